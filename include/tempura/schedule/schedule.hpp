#pragma once
// The scheduler: splits a tensor-level graph (docs/KERNEL_IR.md §1) into kernels at its
// materialization points and rangeifies each one (movement ops become index arithmetic on
// RANGEs, REDUCE_AXIS a REDUCE over Reduce ranges, PAD a gated load).
//
// Materialization points: the root, CONTIGUOUS, and every REDUCE_AXIS that is reached through
// an EXPAND (its value is reused by many outputs, so recomputing it per output would multiply
// the work). Everything else fuses into the kernel that consumes it: a chain of elementwise
// ops and the reduce that consumes it form one kernel; softmax is three kernels.
#include <string>
#include <vector>

#include "tempura/ir/uop.hpp"

namespace tempura {

struct SymbolicShapes;

struct ScheduledKernel {
    std::string name;
    UOp output;              // the tensor-level node this kernel computes (materializes)
    std::vector<UOp> params; // tensor-level node behind each PARAM slot; params[0] == output
    size_t outputs = 1;      // params[0 .. outputs) are what it writes (several: fused roots)
    UOp ast;                 // SINK(END(STORE(INDEX(PARAM 0, i), value), ranges...))
};

// The kernels of a graph in dependency order (a kernel comes after those whose outputs it
// reads). BUFFER leaves are inputs, not kernels. A SINK root is several roots scheduled
// together: shared work is computed once, and roots of the same dims (none reading another
// through a third kernel) share one kernel with a store each, e.g. a max and a sum of one input.
// With symbolic dims (symbolic_shapes.hpp) the kernels' loops and indices are expressions of the
// graph's variables (DEFINE_VARs).
std::vector<ScheduledKernel> schedule_graph(const UOp& root, const SymbolicShapes* sym = nullptr);

// The materialization points of a graph (the root first), for inspection and tests.
std::vector<UOp> materialization_points(const UOp& root);

// rangeify: the kernel AST computing `output`, reading the nodes in `materialized` (other than
// output) and BUFFER leaves through PARAMs; fills `params` in slot order.
UOp rangeify(const UOp& output, const std::vector<UOp>& materialized, std::vector<UOp>& params,
             const SymbolicShapes* sym = nullptr);
// Several outputs of the same dims in one loop nest, a store each (params[i] is outputs[i]).
UOp rangeify_outputs(const std::vector<UOp>& outputs, const std::vector<UOp>& materialized,
                     std::vector<UOp>& params, const SymbolicShapes* sym = nullptr);

} // namespace tempura
