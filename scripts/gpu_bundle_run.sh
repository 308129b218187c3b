#!/usr/bin/env bash
# Runs the GPU checks that scripts/gpu_bundle.sh packed (.gpurun/bundle.tar.xz) on a machine with
# an NVIDIA GPU and its driver, from the repository root. Logs go to $OUT (default /tmp/tempura-gpu
# /logs); the last lines printed are a summary. Each step has a time limit (seconds, below) so that
# one hung step does not take the others with it.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=/tmp/tempura-gpu
logs=${OUT:-$root/logs}
mkdir -p "$root" "$logs"
if command -v xz >/dev/null; then
    tar -C "$root" -xJf "$here/bundle.tar.xz"
else
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
        "$here/bundle.tar.xz" "$root"
fi
# The tests read tests/data at the absolute path of the checkout they were built in.
src=$(cat "$root/bin/srcdir")
if [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
# cuBLAS for bench_gpu's peer: wherever the machine has it.
blas=$(find /usr /opt -name 'libcublas.so.1[0-9]*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH="$root/lib${blas:+:$(dirname "$blas")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset TEMPURA_DEVICE
export TEMPURA_CACHE_DIR=$root/cache
bin=$root/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$logs/gpu.txt"
echo "cuBLAS: ${blas:-none}"

summary=()
step() { # step NAME LIMIT COMMAND... (a LIMIT of 0 skips the step)
    local name=$1 limit=$2
    shift 2
    if [ "$limit" -le 0 ]; then
        summary+=("$name: skipped")
        return
    fi
    local t0=$SECONDS
    timeout "$limit" "$@" >"$logs/$name.log" 2>&1
    local rc=$?
    summary+=("$name: exit $rc in $((SECONDS - t0)) s")
    tail -n 25 "$logs/$name.log"
}
export TEMPURA_TEST_CUDA=1
step cuda_cases "${LIMIT_CASES:-120}" "$bin/test_gpu" "-tc=cuda device:*,cuda realize:*"
# Random networks (convolutions, pools, norms, attention, ...), forward and gradients on the GPU
# against the reference interpreter.
step model_fuzz "${LIMIT_MODELS:-150}" "$bin/test_autograd" \
    "-tc=model fuzz: random networks on a real CUDA*"
# ONNX models exported here by the machine's PyTorch (scripts/onnx_models.py: resnet18,
# mobilenet_v2, the BERT-style encoder, random weights), Tempura's forward on CUDA checked against
# PyTorch's outputs and timed (bench_onnx), then PyTorch's own forward on the same GPU.
if [ "${LIMIT_ONNX:-150}" -gt 0 ] && python3 -c 'import torch, torchvision' 2>/dev/null; then
    step onnx_export 90 python3 scripts/onnx_models.py "$root/onnx_models" resnet18 mobilenet_v2 bert
    step onnx_tempura "${LIMIT_ONNX:-150}" env TEMPURA_DEVICE=CUDA \
        TEMPURA_ONNX_MODELS="$root/onnx_models" "$bin/bench_onnx" --benchmark_repetitions=3 \
        --benchmark_counters_tabular=true
    step onnx_torch 90 python3 scripts/torch_gpu_models.py resnet18 mobilenet_v2 bert
else
    summary+=("onnx: skipped (LIMIT_ONNX=0, or no PyTorch with torchvision here)")
fi
step bench "${LIMIT_BENCH:-180}" "$bin/bench_gpu" --benchmark_min_time=0.3 \
    --benchmark_repetitions=3 --benchmark_counters_tabular=true "$@"
# The float16 matmuls again with TEMPURA_WGMMA=0: on an sm_90 GPU the heuristics' choice is then
# staged mma.sync (TC(3442, 72) at 4096^3) instead of Hopper's warpgroup mma (TC(24421, 256)),
# beside cuBLAS in the same run.
step bench_mma_sync "${LIMIT_WGMMA:-60}" env TEMPURA_WGMMA=0 "$bin/bench_gpu" \
    --benchmark_min_time=0.3 --benchmark_repetitions=3 --benchmark_counters_tabular=true \
    "--benchmark_filter=MatmulF16"
# BEAM on the GPU (TEMPURA_BEAM=2: its candidates timed on CUDA:0) for the memory-bound rows.
if [ "${LIMIT_BEAM:-0}" -gt 0 ]; then
    step beam "$LIMIT_BEAM" env TEMPURA_BEAM=2 "$bin/bench_gpu" --benchmark_min_time=0.3 \
        --benchmark_counters_tabular=true "--benchmark_filter=Triad|Sum|Softmax"
fi
# BEAM on the float16 matmuls, one line per candidate (TEMPURA_DEBUG=2): every tensor-core variant
# (tiles, warps, staged through shared memory, cp.async pipelines, on sm_90 warpgroups of wgmma)
# timed on the GPU.
if [ "${LIMIT_TC:-0}" -gt 0 ]; then
    step tc_sweep "$LIMIT_TC" env TEMPURA_BEAM=1 TEMPURA_DEBUG=2 "$bin/bench_gpu" \
        --benchmark_min_time=0.3 --benchmark_counters_tabular=true "--benchmark_filter=MatmulF16"
fi
# BEAM on the float32 matmul (BM_MatmulF32, beside cuBLAS), one line per candidate: every SMEM
# variant (register tiles, blocks of threads, k-steps) timed on the GPU.
if [ "${LIMIT_SMEM:-0}" -gt 0 ]; then
    step smem_sweep "$LIMIT_SMEM" env TEMPURA_BEAM=1 TEMPURA_DEBUG=2 "$bin/bench_gpu" \
        --benchmark_min_time=0.3 --benchmark_counters_tabular=true "--benchmark_filter=MatmulF32"
fi
step differential "${LIMIT_DIFF:-100}" env TEMPURA_DEVICE=CUDA TEMPURA_DIFF_N=400 \
    "$bin/test_tensor" "-tc=differential: random tensor programs*"
step tensor_suite "${LIMIT_SUITE:-150}" env TEMPURA_DEVICE=CUDA "$bin/test_tensor" \
    "-tce=realize: elementwise,sin and cos kernels are vector code*,erf: float32 within*,float64 transcendental kernels*,from_vector: a realized tensor is RESHAPE*"
# Programs of one's own beside the bundle (.gpurun/extra/*), linked like the tests: run last.
for x in "$here"/extra/*; do
    [ -x "$x" ] && step "extra_$(basename "$x")" "${LIMIT_EXTRA:-120}" "$x"
done
printf '%s\n' "${summary[@]}" | tee "$logs/summary.txt"
