// tempura_mock_cuda_run: the mock CUDA driver's launches, run on EMU (mock_run.hpp).
#include "mock_run.hpp"

#include <cstdint>
#include <exception>
#include <mutex>
#include <vector>

#include "tempura/backend/cuda.hpp"
#include "tempura/backend/gpu.hpp"
#include "tempura/error.hpp"

namespace {

std::mutex g_mu;
std::string g_error; // the last launch the mock could not run on EMU

} // namespace

std::string mock_run_error() {
    std::lock_guard lock(g_mu);
    return g_error;
}

void clear_mock_run_error() {
    std::lock_guard lock(g_mu);
    g_error.clear();
}

// The mock driver's cuLaunchKernel calls this: the launch runs on EMU, with the EMU kernel of
// the program whose PTX was loaded, the device addresses (host memory in the mock) and the
// variables as the params pass them, and the launch's grid and block.
extern "C" __attribute__((visibility("default"))) int
tempura_mock_cuda_run(void* function, void** params, const unsigned* grid, const unsigned* block) {
    namespace runtime = tempura::runtime;
    try {
        const auto k = runtime::emu_kernel_of(static_cast<tempura::cuda::CUfunction>(function));
        if (!k) tempura::fail("mock", "no EMU kernel for the function launched");
        const size_t nb = k->buffer_count(), nv = k->var_count();
        std::vector<void*> buffers(nb);
        for (size_t i = 0; i < nb; ++i)
            buffers[i] =
                reinterpret_cast<void*>(*static_cast<tempura::cuda::CUdeviceptr*>(params[i]));
        std::vector<int64_t> vars(nv);
        for (size_t i = 0; i < nv; ++i) vars[i] = *static_cast<int64_t*>(params[nb + i]);
        runtime::emu_launch(*k, buffers.data(), vars.data(), {grid[0], grid[1], grid[2]},
                            {block[0], block[1], block[2]}, runtime::cuda_limits(0));
        return 0;
    } catch (const std::exception& e) {
        std::lock_guard lock(g_mu);
        g_error = e.what();
        return 719; // CUDA_ERROR_LAUNCH_FAILED
    }
}
