#pragma once
// Private to src/backend/llvm_cpu: the linearized kernel (docs/KERNEL_IR.md section 2) -> an LLVM
// function, built with llvm::IRBuilder (no textual IR round trip).
#include <cstddef>
#include <string>
#include <vector>

#include "tempura/ir/uop.hpp"

namespace llvm {
class Function;
class Module;
} // namespace llvm

namespace tempura::llvm_backend {

struct RenderInfo {
    size_t buffer_count = 0; // 1 + the highest PARAM slot
    size_t var_count = 0;    // DEFINE_VARs, in program order
};

// Adds `void <symbol>(ptr buffers, ptr vars)` to `module` (whose data layout should already be
// set). Throws tempura::Error ("[cpu] ...") naming the op and dtype for anything unsupported and
// for programs that break the contract; `kernel` names the kernel in those messages.
llvm::Function* render_kernel(llvm::Module& module, const std::string& symbol,
                              const std::string& kernel, const std::vector<UOp>& linear,
                              RenderInfo& info);

} // namespace tempura::llvm_backend
