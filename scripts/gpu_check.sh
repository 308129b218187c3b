#!/usr/bin/env bash
# The checks that need a real NVIDIA GPU (sm_80 .. sm_90) and its driver (libcuda.so.1), on a
# machine that has them:
#   1. configures and builds the release preset (the tests of label gpu and bench_gpu);
#   2. runs `ctest -L gpu` with TEMPURA_DEVICE unset and TEMPURA_TEST_CUDA=1: the "cuda device:"
#      and "cuda realize:" cases then run on the GPU, and fail (instead of skipping) when no
#      usable CUDA device is found; the mock-driver cases (gpu_cuda_mock) and EMU's run as
#      everywhere;
#   3. runs bench_gpu (Tempura on CUDA:0 against the device's copy bandwidth and cuBLAS).
# Exits non-zero on the first failure. Extra arguments go to bench_gpu (e.g.
# --benchmark_filter=Triad).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cmake --preset release
cmake --build --preset release --parallel "$(nproc)" --target test_gpu test_tensor bench_gpu

unset TEMPURA_DEVICE
TEMPURA_TEST_CUDA=1 ctest --test-dir build/release -L gpu --output-on-failure

build/release/bench/bench_gpu "$@"
echo "gpu_check.sh: the GPU tests passed; bench_gpu ran."
