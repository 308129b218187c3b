#!/usr/bin/env bash
# run_fault.sh <mpiexec> <fault_worker> <mode> <np> <timeout s> <expected text>: runs the worker
# under mpirun with TEMPURA_DIST_TIMEOUT=<timeout s>; passes when the job ends (no hang: at most
# 4 timeouts + 30 s) and every rank but the failing one (rank 1) printed the expected error.
# mpirun runs with --enable-recovery: by default it ends the whole job the moment one process
# dies, before the others can report (the job still ends, with mpirun's own message); in
# recovery mode the others run on and report, and mpirun's exit status no longer tells, hence
# the count of the ranks' lines.
set -uo pipefail
mpiexec=$1 worker=$2 mode=$3 np=$4 secs=$5 want=$6
limit=$((4 * secs + 30))
start=$(date +%s)
out=$(timeout "$limit" "$mpiexec" --oversubscribe --allow-run-as-root --enable-recovery \
    -np "$np" -x TEMPURA_DIST_TIMEOUT="$secs" "$worker" "$mode" 2>&1)
rc=$?
elapsed=$(($(date +%s) - start))
echo "$out"
echo "run_fault.sh: $mode at -np $np: mpirun exit $rc after ${elapsed} s"
if ((rc == 124)); then
    echo "run_fault.sh: FAILED: the job hung (killed after $limit s)"
    exit 1
fi
for ((r = 0; r < np; ++r)); do
    ((r == 1)) && continue
    if ! grep -qF -- "rank $r: $want" <<<"$out"; then
        echo "run_fault.sh: FAILED: rank $r printed no line starting: $want"
        exit 1
    fi
done
echo "run_fault.sh: passed"
