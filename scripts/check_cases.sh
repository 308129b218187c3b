#!/usr/bin/env bash
# Checks that tests/data holds the same case files as the team's shared cases folder (given as
# $1), so the repository's copy stays in step. Without that folder it says so and passes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
shared=${1:-../shared/cases}
if [[ ! -d "$shared" ]]; then
    echo "check_cases.sh: SKIPPED: no shared cases folder at $shared (tests/data is used as is)"
    exit 0
fi
status=0
n=0
for f in "$shared"/*.tsv; do
    [[ -e "$f" ]] || continue
    n=$((n + 1))
    name=$(basename "$f")
    if ! cmp -s "$f" "tests/data/$name"; then
        echo "check_cases.sh: tests/data/$name differs from $f: copy it (cp '$f' tests/data/)"
        status=1
    fi
done
echo "check_cases.sh: $n case files compared with $shared"
exit $status
