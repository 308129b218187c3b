#pragma once
// Private to src/backend/llvm_cpu: the linearized kernel (docs/KERNEL_IR.md section 2) -> an LLVM
// function, built with llvm::IRBuilder (no textual IR round trip).
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tempura/ir/uop.hpp"

namespace llvm {
class Function;
class Module;
class TargetMachine;
} // namespace llvm

namespace tempura::runtime {
class CompiledKernel;
}

namespace tempura::llvm_backend {

// What the program is rendered for.
enum class Target {
    Cpu,   // void f(ptr buffers, ptr vars): the CPU backend's kernels
    Emu,   // the same signature, for the emulated GPU's per-thread program: SPECIAL ids are read
           // from vars[n .. n + 6) after the n DEFINE_VARs (block x, y, z, then thread x, y, z),
           // the block's shared memory's address from vars[n + 6]; every access of a PARAM of
           // known size is checked (outside the buffer it is skipped and reported), every
           // shared access and barrier reported (EmuHooks).
    Nvptx, // a ptx_kernel: one `ptr addrspace(1) noalias` per buffer slot, then one i64 per
           // DEFINE_VAR; SPECIAL reads llvm.nvvm.read.ptx.sreg.{ctaid,tid}.{x,y,z}
};

// The emulator's hooks, called by EMU programs (Target::Emu) on the thread that runs them:
// - fault: an access outside its buffer: the buffer's slot and size, the element offset, the
//   number of lanes, and whether it was a store;
// - shared: an access of `bytes` bytes of shared memory at `address`, before it happens; it
//   returns 1 when the access may proceed (inside the block's shared memory), else 0;
// - barrier: the thread reached the BARRIER at program position `position`;
// - mma: the thread reached the WMMA at `position` with its fragments (a: 8 floats, b: 4, cd: 4,
//   the 16-bit inputs widened exactly); when its warp's 32 threads are there, cd holds D;
// - copy_async: the thread's COPY_ASYNC of `bytes` bytes from global memory at `source` (read
//   already, at `data`; 0 where its gate is false) to shared memory at `address`; they land
//   there by the ASYNC_WAIT that retires it;
// - async_wait: the thread's ASYNC_WAIT {n};
// - ldmatrix: the thread reached the LDMATRIX at `position` with its row's address; when its
//   warp's 32 threads are there, `out` holds its 2 x count 16-bit values;
// - wgmma: the thread reached the WGMMA at `position` with its k-steps' descriptors (A's and B's
//   of each, in the PTX matrix-descriptor format, addresses in the block's shared memory) and its
//   accumulator (n / 2 floats); shape = n | k-steps << 16 | A MN-major << 24 | B MN-major << 25 |
//   BFloat16 << 26 | a float16 accumulator << 27 | left in flight << 28. When its warpgroup's 128
//   threads are there, cd holds D;
// - wgmma_wait: the thread reached a WGMMA_WAIT: its warpgroup's mma in flight are done.
struct EmuHooks {
    void (*fault)(int64_t slot, int64_t numel, int64_t offset, int64_t lanes, int64_t store);
    int64_t (*shared)(int64_t address, int64_t bytes, int64_t store);
    void (*barrier)(int64_t position);
    void (*mma)(int64_t position, float* a, float* b, float* cd);
    void (*copy_async)(int64_t address, int64_t source, int64_t bytes, const void* data);
    void (*async_wait)(int64_t n);
    void (*ldmatrix)(int64_t position, int64_t address, int64_t count, int64_t trans,
                     uint16_t* out);
    void (*wgmma)(int64_t position, const int64_t* descriptors, int64_t shape, float* cd);
    void (*wgmma_wait)(int64_t position);
};
void set_emu_hooks(const EmuHooks& hooks);

struct RenderInfo {
    size_t buffer_count = 0; // 1 + the highest PARAM slot
    size_t var_count = 0;    // DEFINE_VARs, in program order
    size_t shared_bytes = 0; // DEFINE_LOCALs (EMU: the block's shared memory it reads)
    bool barriers = false;   // the program has a BARRIER
};

// Above this many operations (linearized ops, or LLVM instructions: about one each) a kernel is
// long straight-line code (a deep elementwise chain): the code generator runs without its
// optimizations, whose DAG scheduling grows faster than the block (a chain of 70,000 vector adds
// took 35 s at the default level, 0.5 s without), and optimize() runs SROA alone (the 100,000-add
// chain: 4.2 -> 3.1 s, most of it InstCombine and GVN). Both the CPU and the NVPTX backend.
inline constexpr size_t kLongKernelOps = 16384;

// Optimizes `m` for the target of `tm`. `expanded`: the codegen's expander vectorized and
// unrolled the kernel already, so LLVM's vectorizers and unroller stay off (GPU kernels always);
// an expanded host kernel gets a short pipeline of the passes it needs, the others LLVM's O2.
void optimize(llvm::Module& m, llvm::TargetMachine& tm, bool expanded);

// A C identifier from a kernel's name (its first 48 characters, others as '_'): symbols and
// PTX entry names.
std::string sanitize(const std::string& name);

// Adds `void <symbol>(ptr buffers, ptr vars)` to `module` (whose data layout should already be
// set). Throws tempura::Error ("[cpu] ...") naming the op and dtype for anything unsupported and
// for programs that break the contract; `kernel` names the kernel in those messages.
llvm::Function* render_kernel(llvm::Module& module, const std::string& symbol,
                              const std::string& kernel, const std::vector<UOp>& linear,
                              RenderInfo& info, Target target = Target::Cpu,
                              int64_t max_threads = 0);

} // namespace tempura::llvm_backend

namespace tempura::runtime {
// compile_cpu_kernel for either host target (Cpu, or Emu's per-thread program), cached by the
// program's structure and the target.
std::shared_ptr<const CompiledKernel> compile_for_host(const std::string& name,
                                                       const std::vector<UOp>& linear,
                                                       llvm_backend::Target target);
} // namespace tempura::runtime
