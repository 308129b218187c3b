#pragma once
// Facts about the tensor-level graph (docs/KERNEL_IR.md section 1): the shape of every node.
#include <vector>

#include "tempura/ir/uop.hpp"
#include "tempura/tensor/shape.hpp"

namespace tempura {

// The shape of a tensor-level node, derived from the graph below it (BUFFER: [numel], CONST: [],
// movement ops from their args, ALU ops from their operands, REDUCE_AXIS keeps reduced dims as 1).
// Iterative over toposort(), so deep graphs do not overflow the stack. Throws tempura::Error
// ("[tensor_shape] ...") for a graph that breaks the contract.
Shape tensor_shape(const UOp& root);

// The shape of one node given the shapes of its sources (in order). The one place the contract's
// shape table is written down; tensor_shape() applies it over the whole graph.
Shape node_shape(const UOp& node, const std::vector<const Shape*>& src_shapes);

} // namespace tempura
