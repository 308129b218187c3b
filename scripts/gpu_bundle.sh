#!/usr/bin/env bash
# Packs the GPU checks, built here, for a GPU machine that has the NVIDIA driver but no LLVM 19,
# doctest or Google Benchmark (a container image with CUDA and nothing else):
#   .gpurun/bundle.tar.xz   test_gpu, test_tensor, test_autograd, bench_gpu, bench_onnx, the mock
#                           driver and every shared library they load (LLVM 19 and its
#                           dependencies), but for glibc's;
#   .gpurun/run.sh          unpacks it under /tmp/tempura-gpu and runs the real-GPU cases, the
#                           random networks (model fuzz), ONNX models against PyTorch on the same
#                           GPU, the tensor suite and the random-program differential on CUDA,
#                           then bench_gpu (its rows include BM_MatmulF32, the float32 matmul staged
#                           through shared memory, beside cuBLAS; LIMIT_SMEM=... above 0 adds
#                           BEAM over its SMEM variants). Run it from the repository root (the
#                           tests read tests/data).
# Usage: scripts/gpu_bundle.sh [build dir, default build/release]. The build must be current.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build/release}
out=.gpurun
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$out"
bins=("$build/tests/test_gpu" "$build/tests/test_tensor" "$build/tests/test_autograd"
    "$build/bench/bench_gpu" "$build/bench/bench_onnx")
cp "${bins[@]}" "$build/tests/libtempura_mock_cuda.so" "$stage/bin/"
# Every library the binaries load, but for the C library's own (the target has a newer glibc).
ldd "${bins[@]}" | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
    libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | ld-linux*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
    esac
done
echo "$PWD" >"$stage/bin/srcdir"
tar -C "$stage" -cf - bin lib | xz -T2 -6 >"$out/bundle.tar.xz"
cp scripts/gpu_bundle_run.sh "$out/run.sh"
ls -la "$out"
