#pragma once
// The CPU backend: a linearized kernel (docs/KERNEL_IR.md section 2) rendered to LLVM IR,
// optimized at O2 for the host CPU and JIT-compiled with ORC. LLVM stays behind
// src/backend/llvm_cpu: this header names no LLVM type, so users compile against Tempura without
// LLVM's headers.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tempura/codegen/opts.hpp"
#include "tempura/ir/uop.hpp"

namespace tempura::runtime {

// A kernel compiled for the host CPU. Its machine code lives in the process-wide JIT while any
// CompiledKernel sharing it is alive (a cached one, one a plan holds, a renamed copy); the last
// one to go frees it.
class CompiledKernel {
  public:
    // The signature of every CPU kernel: buffers[slot] is PARAM `slot`'s base address, vars[k]
    // the k-th DEFINE_VAR (in program order), as int64 whatever the variable's dtype.
    using EntryFn = void (*)(void* const* buffers, const int64_t* vars);

    // `code` owns the machine code (its deleter frees it); copies under other names share it.
    CompiledKernel(std::string name, std::string symbol, std::string source, double compile_ms,
                   EntryFn entry, size_t buffer_count, size_t var_count,
                   std::shared_ptr<const void> code = {}, size_t shared_bytes = 0,
                   bool barriers = false, size_t code_bytes = 0);
    virtual ~CompiledKernel();
    CompiledKernel(const CompiledKernel&) = delete;
    CompiledKernel& operator=(const CompiledKernel&) = delete;

    // Runs the kernel once on the calling thread. `vars` may be null when var_count() is 0.
    void run(void* const* buffers, const int64_t* vars) const { entry_(buffers, vars); }

    const std::string& name() const { return name_; }     // as given to compile_cpu_kernel
    const std::string& symbol() const { return symbol_; } // the unique JIT symbol
    const std::string& source() const { return source_; } // the optimized LLVM IR text
    double compile_ms() const { return compile_ms_; }     // render + O2 + codegen, wall clock
    EntryFn entry() const { return entry_; }
    size_t buffer_count() const { return buffer_count_; } // 1 + the highest PARAM slot (0 if none)
    size_t var_count() const { return var_count_; }       // the number of DEFINE_VARs
    const std::shared_ptr<const void>& code() const { return code_; }
    // An EMU kernel's shared memory per block and whether it has barriers (0 and false on the
    // CPU).
    size_t shared_bytes() const { return shared_bytes_; }
    bool barriers() const { return barriers_; }
    // The memory the JIT holds for the machine code (its sections, page-rounded, and its
    // records), shared by the copies under other names; 0 when the code is not the JIT's.
    size_t code_bytes() const { return code_bytes_; }
    // What this kernel keeps in memory: itself, its texts and code_bytes(). The caches charge it.
    size_t memory_bytes() const {
        return sizeof(*this) + name_.capacity() + symbol_.capacity() + source_.capacity() +
               code_bytes_;
    }

  private:
    std::string name_, symbol_, source_;
    double compile_ms_;
    EntryFn entry_;
    size_t buffer_count_, var_count_;
    std::shared_ptr<const void> code_;
    size_t shared_bytes_;
    bool barriers_;
    size_t code_bytes_;
};

// Compiles a linearized kernel for the host CPU, or returns the cached one. The cache key is the
// structure of the program (each UOp as op, dtype, arg and the positions of its sources in
// `linear`), not UOp identity: compiling the same computation again, even from freshly built
// UOps, compiles nothing. A hit under another name returns a kernel of that name sharing the
// machine code. Throws tempura::Error for an op or dtype the backend does not support, or a
// program that breaks the contract (a source after its user, an unclosed RANGE, ...).
// Thread-safe; compiles are serialized.
std::shared_ptr<const CompiledKernel> compile_cpu_kernel(const std::string& name,
                                                         const std::vector<UOp>& linear);

struct CpuCacheStats {
    size_t hits = 0, misses = 0;
    size_t entries = 0, bytes = 0, evictions = 0; // bounded by TEMPURA_CACHE_MB, LRU
    size_t live_modules = 0; // compiled modules whose machine code is still in the JIT
};
CpuCacheStats cpu_kernel_cache_stats();

// Empties the kernel cache; machine code is freed once no plan holds it either.
void clear_cpu_kernel_cache();

// The host CPU as LLVM sees it (e.g. "znver5") and the feature string the JIT compiles for
// (e.g. "+avx512f,+fma,...").
std::string host_cpu_name();
std::string host_cpu_features();

// What the codegen may assume of this CPU: vector width (64 bytes with AVX-512, 32 with AVX2,
// else 16), worker threads (thread_count()), no shared memory. The codegen is handed these; it
// never asks the host itself.
codegen::DeviceLimits host_limits();

} // namespace tempura::runtime
