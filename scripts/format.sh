#!/usr/bin/env bash
# clang-format every C++ file of the project (tracked or new, not ignored), with the root .clang-format.
#   ./scripts/format.sh          reformat in place
#   ./scripts/format.sh --check  change nothing; list the files that are not formatted, exit 1 if any
# (the CTest test `format` runs --check, so CI fails on unformatted code)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

clang_format=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}
if [[ -z "$clang_format" ]]; then
    echo "format.sh: clang-format not found (apt-get install clang-format)" >&2
    exit 1
fi

files=()
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    while IFS= read -r -d '' f; do
        [[ -f "$f" ]] && files+=("$f")
    done < <(git ls-files -z --cached --others --exclude-standard -- \
                 'include/*.hpp' 'include/*.h' 'src/*.cpp' 'src/*.hpp' 'src/*.h' \
                 'tests/*.cpp' 'tests/*.hpp' 'bench/*.cpp' 'bench/*.hpp' 'examples/*.cpp' 'examples/*.hpp')
else
    while IFS= read -r -d '' f; do
        files+=("$f")
    done < <(find include src tests bench examples -type f \( -name '*.hpp' -o -name '*.h' -o -name '*.cpp' \) -print0 2>/dev/null)
fi

if ((${#files[@]} == 0)); then
    echo "format.sh: no C++ files."
    exit 0
fi

if [[ "${1:-}" == "--check" ]]; then
    bad=()
    for f in "${files[@]}"; do
        if ! "$clang_format" --dry-run --Werror "$f" >/dev/null 2>&1; then
            bad+=("$f")
        fi
    done
    if ((${#bad[@]} > 0)); then
        echo "format.sh: ${#bad[@]} of ${#files[@]} files are not clang-formatted (run ./scripts/format.sh):"
        printf '  %s\n' "${bad[@]}"
        "$clang_format" --dry-run "${bad[0]}" 2>&1 | head -n 40
        exit 1
    fi
    echo "format.sh: ${#files[@]} files formatted."
else
    "$clang_format" -i "${files[@]}"
    echo "format.sh: formatted ${#files[@]} files."
fi
