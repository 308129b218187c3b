#pragma once
// What the tests' mock CUDA driver (mock_libcuda.cpp, built as libtempura_mock_cuda.so and loaded
// through TEMPURA_LIBCUDA) records, and the hooks between it and the test process. The mock keeps
// device memory in host memory and runs no GPU code of its own: its cuLaunchKernel calls back
// into the test process (tempura_mock_cuda_run, found with dlsym(RTLD_DEFAULT)), which runs the
// EMU kernel of the same program with the launch's params, grid and block.
#include <cstddef>

extern "C" {

// Counts since the library was loaded (or since tempura_mock_reset).
struct TempuraMockCounters {
    size_t allocs, frees, live_allocs, live_bytes;
    size_t htod, htod_bytes, dtoh, dtoh_bytes, dtod, memsets;
    size_t modules_loaded, modules_unloaded, launches, syncs;
    size_t attributes_set; // cuFuncSetAttribute calls it accepted
    size_t bad_calls;      // calls the mock refused (an unknown address, a copy out of bounds, ...)
};

// One launch as cuLaunchKernel got it.
struct TempuraMockLaunch {
    char kernel[64]; // the function's name (its PTX .entry)
    unsigned grid[3], block[3], shared_bytes;
};

// Exported by the mock.
typedef void (*TempuraMockCountersFn)(TempuraMockCounters* out);
typedef size_t (*TempuraMockLaunchesFn)(TempuraMockLaunch* out, size_t max); // the last `max`
typedef size_t (*TempuraMockModuleCountFn)();                                // modules ever loaded
typedef const char* (*TempuraMockModulePtxFn)(size_t index); // the PTX of the index-th
typedef const char* (*TempuraMockLastRefusalFn)();           // what bad_calls last counted

// Exported by the test process: runs the launch of `function` (the CUfunction the mock handed
// out) on EMU. Returns 0, or a CUresult the mock reports at the next synchronizing call.
typedef int (*TempuraMockRunFn)(void* function, void** params, const unsigned* grid,
                                const unsigned* block);
}
