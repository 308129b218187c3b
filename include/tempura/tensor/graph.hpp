#pragma once
// Facts about the tensor-level graph (docs/KERNEL_IR.md section 1): the shape of every node.
#include <vector>

#include "tempura/ir/uop.hpp"
#include "tempura/tensor/shape.hpp"

namespace tempura {

// The shape of a tensor-level node (UOp::shape(), inferred when the node was built by the shape
// table in tempura/ir/uop.hpp's infer_shape). Throws tempura::Error ("[tensor_shape] ...",
// naming the first node that breaks the table) for a graph that breaks the contract.
Shape tensor_shape(const UOp& root);

} // namespace tempura
