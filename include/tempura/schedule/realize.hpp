#pragma once
// realize_graph: the whole path from a tensor-level graph (docs/KERNEL_IR.md §1) to its
// value: kernel split, rangeify, the codegen stages, the LLVM backend, and running the plan.
#include <memory>
#include <string>
#include <vector>

#include "tempura/ir/uop.hpp"

namespace tempura {

namespace runtime {
class Buffer;
}

struct KernelInfo {
    std::string name;    // e.g. "r_16_32" (reduce) or "E_1024" (elementwise)
    std::string backend; // "CPU"
    std::string source;  // the generated LLVM IR
};

struct RealizeResult {
    std::shared_ptr<runtime::Buffer> buffer; // contiguous, row-major, tensor_shape(root)
    std::vector<KernelInfo> kernels;         // the kernels that ran, in order
};

RealizeResult realize_graph(const UOp& root);

} // namespace tempura
