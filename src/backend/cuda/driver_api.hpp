#pragma once
// The CUDA driver entry points Tempura calls, resolved with dlsym. The signatures follow cuda.h
// (CUDA 13) for 64-bit Linux, where CUDAAPI is empty and every enum argument is passed as an
// int; cuda.h itself is never included, so building needs no CUDA toolkit.
#include <cstddef>

#include "tempura/backend/cuda.hpp"

namespace tempura::cuda {

// cuda.h's enum values used here.
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2; // _Y = 3, _Z = 4
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5;  // _Y = 6, _Z = 7
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
inline constexpr int CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

inline constexpr int CU_JIT_INFO_LOG_BUFFER = 3;
inline constexpr int CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
inline constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
inline constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

inline constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

inline constexpr unsigned CU_STREAM_DEFAULT = 0;

// Member names are the symbols' names without the _v2 suffix that cuda.h's #defines add; the
// table in driver.cpp pairs each with the exact symbol it resolves.
struct Driver::Api {
    CUresult (*cuInit)(unsigned flags);
    CUresult (*cuDriverGetVersion)(int* version);
    CUresult (*cuDeviceGetCount)(int* count);
    CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
    CUresult (*cuDeviceGetName)(char* name, int len, CUdevice device);
    CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* context, CUdevice device);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device);
    CUresult (*cuCtxSetCurrent)(CUcontext context);
    CUresult (*cuCtxSynchronize)();
    CUresult (*cuMemAlloc)(CUdeviceptr* ptr, size_t bytes);
    CUresult (*cuMemFree)(CUdeviceptr ptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void* src, size_t bytes);
    CUresult (*cuMemcpyDtoH)(void* dst, CUdeviceptr src, size_t bytes);
    CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
    CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t count,
                                CUstream stream);
    CUresult (*cuModuleLoadDataEx)(CUmodule* module, const void* image, unsigned num_options,
                                   int* options, void** option_values);
    CUresult (*cuModuleUnload)(CUmodule module);
    CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name);
    CUresult (*cuLaunchKernel)(CUfunction function, unsigned grid_x, unsigned grid_y,
                               unsigned grid_z, unsigned block_x, unsigned block_y,
                               unsigned block_z, unsigned shared_bytes, CUstream stream,
                               void** params, void** extra);
    CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags);
    CUresult (*cuStreamSynchronize)(CUstream stream);
    CUresult (*cuStreamDestroy)(CUstream stream);
    CUresult (*cuGetErrorName)(CUresult result, const char** name);
    CUresult (*cuGetErrorString)(CUresult result, const char** description);
    CUresult (*cuFuncSetAttribute)(CUfunction function, int attribute, int value);
};

} // namespace tempura::cuda
