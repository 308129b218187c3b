#pragma once
// The GPU path: a GPU program (a kernel lowered with GPU limits, so its output loops are SPECIAL
// block and thread indices) rendered to PTX by LLVM's NVPTX target, and run either on the CPU by
// the emulated GPU "EMU" or on an NVIDIA GPU through the CUDA driver ("CUDA:n"). LLVM stays
// behind src/backend: this header names no LLVM type, and of CUDA only cuda.hpp's own opaque
// handles.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tempura/backend/cuda.hpp"
#include "tempura/backend/llvm_cpu.hpp"
#include "tempura/codegen/opts.hpp"
#include "tempura/ir/uop.hpp"
#include "tempura/runtime/buffer.hpp"

namespace tempura::runtime {

// PTX for a GPU program, for compute capability `sm` (80: sm_80), LLVM's O2 pipeline and the
// NVPTX code generator in process. `block_threads` (the launch's threads per block) becomes the
// kernel's maxntid. LLVM picks the PTX version. Throws tempura::Error ("[nvptx] ...") for an op
// the GPU cannot lower (a C library call).
std::string render_ptx(const std::string& name, const std::vector<UOp>& linear, int sm,
                       int64_t block_threads);

// Shared memory a kernel may declare statically, on every GPU since sm_20.
inline constexpr int64_t kStaticSharedBytes = 48 * 1024;

// A DEFINE_LOCAL's alignment in bytes: 16, or its optional third arg (1024 for the swizzled
// tiles that warpgroup mma reads).
int64_t shared_alignment(const UOp& define_local);
// Where the DEFINE_LOCAL `define_local` of `bytes` bytes starts in a block's shared memory after
// `used` bytes of earlier ones, `used` then moving past it: at a multiple of its alignment, its
// bytes rounded up to 16 (the renderer's layout, static and dynamic, and EMU's).
int64_t place_shared(int64_t& used, const UOp& define_local, int64_t bytes);
// Whether a GPU program has a WGMMA (Hopper's warpgroup mma: PTX for sm_90a).
bool uses_wgmma(const std::vector<UOp>& linear);

// The shared memory a GPU program takes dynamically (at launch, opted into above 48 KiB): its
// DEFINE_LOCALs' bytes, each rounded up to 16 and placed at its alignment, when they total more
// than kStaticSharedBytes;
// 0 when they fit statically (the PTX then declares them as static arrays).
int64_t dynamic_shared_bytes(const std::vector<UOp>& linear);

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
// The same, checked against another device's limits (a mock CUDA driver's, whose launches run
// on EMU: an H100's 227 KiB of shared memory rather than EMU's 163).
void emu_launch(const CompiledKernel& kernel, void* const* buffers, const int64_t* vars,
                const std::array<int64_t, 3>& grid, const std::array<int64_t, 3>& block,
                const codegen::DeviceLimits& limits);

// Checks a launch against a device's limits: every grid and block dim within them, the threads
// per block and the kernel's shared memory. Throws "[<op>] kernel <name>: grid (...) is outside
// the device's limits (...)" and the like.
void check_launch(const char* op, const CompiledKernel& kernel, const codegen::DeviceLimits& lim,
                  const std::array<int64_t, 3>& grid, const std::array<int64_t, 3>& block);

// --- CUDA devices ------------------------------------------------------------------------------

// What the codegen may assume of CUDA device `ordinal` ("CUDA:n"): gpu_limits for its compute
// capability with the block, grid, warp and shared-memory limits the driver reports (shared
// memory: what a block may get with opt-in, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN).
// Throws "[cuda] CUDA:0 (<name>) is
// sm_75: ..." for a GPU outside the archs the PTX path supports (sm_80 .. sm_90).
codegen::DeviceLimits cuda_limits(int ordinal);
// The GPU's name and compute capability ("NVIDIA H100 80GB HBM3 sm_90"): what BEAM's cache is
// keyed by, so that timings of one GPU model are never reused on another.
std::string cuda_device_tag(int ordinal);

// The memory of CUDA device `ordinal` as the runtime's buffers use it: the device's primary
// context, cuMemAlloc/cuMemFree and copies on Tempura's stream.
std::unique_ptr<Allocator> make_cuda_allocator(int ordinal);

// The same GPU program EMU gets, rendered to PTX for the device's arch and loaded into its
// context (cuModuleLoadDataEx: a PTX the JIT rejects throws with the JIT's log). Cached by the
// device, the program's structure and the block size, as EMU's kernels are. The kernel runs only
// through cuda_launch: its run() throws.
std::shared_ptr<const CompiledKernel> compile_cuda_kernel(const std::string& name,
                                                          const std::vector<UOp>& linear,
                                                          int64_t block_threads, int ordinal);
// Empties the CUDA kernel cache (tempura::clear_caches does); a module is unloaded once no plan
// holds its kernel either.
void clear_cuda_kernel_cache();

// Queues a CUDA kernel on its device's stream over `grid` x `block`: `buffers` are the device
// addresses of its buffer_count() buffers (Buffer::address()), `vars` its var_count() variables,
// passed in the order the PTX declares its parameters (the buffers by slot, then the variables
// as 64-bit integers). Checks the launch against the device's limits first. Returns before the
// kernel has run: a copy to the host waits for it.
void cuda_launch(const CompiledKernel& kernel, void* const* buffers, const int64_t* vars,
                 const std::array<int64_t, 3>& grid, const std::array<int64_t, 3>& block);

// The EMU kernel of the program that a CUDA kernel loaded by compile_cuda_kernel runs, by the
// CUfunction the driver returned for it (compiled for EMU on first use), or null for a function
// Tempura did not load. For a CUDA driver that runs no GPU code of its own: the tests' mock
// driver runs each launch on EMU with it, with the launch's own params, grid and block.
std::shared_ptr<const CompiledKernel> emu_kernel_of(cuda::CUfunction function);

} // namespace tempura::runtime
