#pragma once
// The GPU path that runs without a GPU: a GPU program (a kernel lowered with GPU limits, so its
// output loops are SPECIAL block and thread indices) rendered to PTX by LLVM's NVPTX target, and
// run on the CPU by the emulated GPU "EMU". LLVM stays behind src/backend: this header names no
// LLVM or CUDA type.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tempura/backend/llvm_cpu.hpp"
#include "tempura/codegen/opts.hpp"
#include "tempura/ir/uop.hpp"

namespace tempura::runtime {

// PTX for a GPU program, for compute capability `sm` (80: sm_80), LLVM's O2 pipeline and the
// NVPTX code generator in process. `block_threads` (the launch's threads per block) becomes the
// kernel's maxntid. LLVM picks the PTX version. Throws tempura::Error ("[nvptx] ...") for an op
// the GPU cannot lower (a C library call).
std::string render_ptx(const std::string& name, const std::vector<UOp>& linear, int sm,
                       int64_t block_threads);

// EMU's limits: an sm_80 GPU's (codegen::gpu_limits("EMU", 80)).
codegen::DeviceLimits emu_limits();

// A GPU program compiled for EMU: the per-thread program JIT-compiled for the host (every
// access to a buffer of known size checked), with the program's sm_80 PTX as its source().
// Cached by the program's structure, as CPU kernels are.
std::shared_ptr<const CompiledKernel>
compile_emu_kernel(const std::string& name, const std::vector<UOp>& linear, int64_t block_threads);

// Empties the EMU kernel cache (tempura::clear_caches does).
void clear_emu_kernel_cache();

// Runs an EMU kernel as a GPU would: every thread of every block of `grid`, with `vars` (its
// DEFINE_VARs, var_count() of them). Checks the launch against EMU's limits (grid, block, shared
// memory), and throws tempura::Error naming the kernel, the block, the thread and the address
// for an access outside a buffer ("[emu] kernel E_4: block (1, 0, 0), thread (3, 0, 0): LOAD of
// 4 elements at element 1022 of buffer 1 (1024 elements)") or outside the block's shared
// memory, a shared-memory race between two barriers, and a barrier reached by part of a block
// or a different number of times. Blocks run in parallel on the worker threads; a block's
// threads run last first, or as fibers between barriers.
void emu_launch(const CompiledKernel& kernel, void* const* buffers, const int64_t* vars,
                const std::array<int64_t, 3>& grid, const std::array<int64_t, 3>& block);

} // namespace tempura::runtime
