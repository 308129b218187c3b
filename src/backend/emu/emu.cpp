// EMU, the emulated GPU: a GPU program's per-thread code JIT-compiled for the host (the shared
// renderer's Target::Emu: SPECIAL ids read from the variables, every buffer access checked), run
// once per thread of every block. Blocks run in parallel on the worker threads, the threads of a
// block one after another: without shared memory and barriers (GROUP is refused until they
// exist) a block's threads cannot observe each other's order.
#include <atomic>
#include <chrono>
#include <mutex>

#include "backend/llvm_cpu/render.hpp"
#include "tempura/backend/gpu.hpp"
#include "tempura/error.hpp"
#include "tempura/runtime/thread_pool.hpp"

namespace tempura::runtime {

namespace {

// The first access outside a buffer seen by the program running on this thread.
struct Fault {
    bool set = false;
    int64_t slot = 0, numel = 0, offset = 0, lanes = 0, store = 0;
};
thread_local Fault t_fault;

void on_fault(int64_t slot, int64_t numel, int64_t offset, int64_t lanes, int64_t store) {
    if (!t_fault.set) t_fault = Fault{true, slot, numel, offset, lanes, store};
}

std::string triple(int64_t x, int64_t y, int64_t z) {
    return "(" + std::to_string(x) + ", " + std::to_string(y) + ", " + std::to_string(z) + ")";
}

} // namespace

codegen::DeviceLimits emu_limits() {
    static const codegen::DeviceLimits lim = codegen::gpu_limits("EMU", 80);
    return lim;
}

std::shared_ptr<const CompiledKernel>
compile_emu_kernel(const std::string& name, const std::vector<UOp>& linear, int64_t block_threads) {
    llvm_backend::set_emu_fault_fn(&on_fault);
    const auto t0 = std::chrono::steady_clock::now();
    std::string ptx = render_ptx(name, linear, emu_limits().sm, block_threads);
    const double ptx_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const std::shared_ptr<const CompiledKernel> host =
        compile_for_host(name, linear, llvm_backend::Target::Emu);
    return std::make_shared<const CompiledKernel>(
        name, host->symbol(), std::move(ptx), host->compile_ms() + ptx_ms, host->entry(),
        host->buffer_count(), host->var_count(), host->code());
}

void emu_launch(const CompiledKernel& kernel, void* const* buffers, const int64_t* vars,
                const std::array<int64_t, 3>& grid, const std::array<int64_t, 3>& block) {
    const codegen::DeviceLimits lim = emu_limits();
    const std::string who = "kernel " + kernel.name() + ": ";
    for (size_t d = 0; d < 3; ++d) {
        if (grid[d] < 1 || grid[d] > lim.max_grid[d])
            fail("emu", who + "grid " + triple(grid[0], grid[1], grid[2]) +
                            " is outside the device's limits " +
                            triple(lim.max_grid[0], lim.max_grid[1], lim.max_grid[2]));
        if (block[d] < 1 || block[d] > lim.max_block[d])
            fail("emu", who + "block " + triple(block[0], block[1], block[2]) +
                            " is outside the device's limits " +
                            triple(lim.max_block[0], lim.max_block[1], lim.max_block[2]));
    }
    const int64_t per_block = block[0] * block[1] * block[2];
    if (per_block > lim.max_threads_per_block)
        fail("emu", who + std::to_string(per_block) + " threads per block exceed the limit of " +
                        std::to_string(lim.max_threads_per_block));
    const size_t nv = kernel.var_count();
    const int64_t blocks = grid[0] * grid[1] * grid[2];
    std::atomic<bool> failed{false};
    std::mutex mu;
    std::string first; // the first fault's message
    auto run_blocks = [&](int64_t from, int64_t to) {
        std::vector<int64_t> v(nv + 6);
        std::copy(vars, vars + nv, v.begin());
        for (int64_t b = from; b < to && !failed.load(std::memory_order_relaxed); ++b) {
            v[nv + 0] = b % grid[0];
            v[nv + 1] = b / grid[0] % grid[1];
            v[nv + 2] = b / (grid[0] * grid[1]);
            for (int64_t t = 0; t < per_block; ++t) {
                v[nv + 3] = t % block[0];
                v[nv + 4] = t / block[0] % block[1];
                v[nv + 5] = t / (block[0] * block[1]);
                t_fault.set = false;
                kernel.run(buffers, v.data());
                if (!t_fault.set) continue;
                const Fault f = t_fault;
                std::lock_guard<std::mutex> l(mu);
                if (!failed.exchange(true))
                    first = who + "block " + triple(v[nv], v[nv + 1], v[nv + 2]) + ", thread " +
                            triple(v[nv + 3], v[nv + 4], v[nv + 5]) + ": " +
                            (f.store != 0 ? "STORE" : "LOAD") +
                            (f.lanes > 1 ? " of " + std::to_string(f.lanes) + " elements" : "") +
                            " at element " + std::to_string(f.offset) + " of buffer " +
                            std::to_string(f.slot) + " (" + std::to_string(f.numel) + " elements)";
                return;
            }
        }
    };
    // A few chunks of blocks per worker: enough to balance, few enough to cost nothing.
    const auto workers = static_cast<int64_t>(thread_count());
    const int64_t chunks = std::min<int64_t>(blocks, workers * 4);
    if (chunks <= 1 || per_block * blocks < 4096) {
        run_blocks(0, blocks);
    } else {
        parallel_for(static_cast<size_t>(chunks), [&](size_t c) {
            const auto ci = static_cast<int64_t>(c);
            run_blocks(blocks * ci / chunks, blocks * (ci + 1) / chunks);
        });
    }
    if (failed.load()) fail("emu", first);
}

} // namespace tempura::runtime
