#pragma once
// Whether a real CUDA GPU runs the "cuda device:" and "cuda realize:" cases. The tests' mock
// driver (TEMPURA_LIBCUDA=libtempura_mock_cuda.so, test_cuda.cpp) is no GPU: it runs only
// kernels Tempura compiled. Without a GPU the cases skip visibly; with TEMPURA_TEST_CUDA=1 (a
// machine that must have one: scripts/gpu_check.sh) a missing one fails instead.
#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include <doctest/doctest.h>

#include "tempura/backend/cuda.hpp"

inline bool cuda_driver_is_mock() {
    return tempura::cuda::cuda_usable() &&
           dlsym(tempura::cuda::driver().library(), "tempura_mock_counters") != nullptr;
}

inline bool real_gpu_or_skip() {
    namespace cuda = tempura::cuda;
    const bool mock = cuda_driver_is_mock();
    if (cuda::cuda_usable() && !mock) return true;
    const std::string why =
        mock ? "the CUDA driver is the tests' mock" : cuda::cuda_unusable_reason();
    const char* required = std::getenv("TEMPURA_TEST_CUDA");
    if (!mock && required != nullptr && std::string(required) == "1")
        FAIL_CHECK("TEMPURA_TEST_CUDA=1 but no usable CUDA device: " << why);
    else
        MESSAGE("SKIPPED: no real CUDA device (" << why << ")");
    return false;
}
