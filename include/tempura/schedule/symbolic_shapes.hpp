#pragma once
// Symbolic shapes: which dims of a tensor graph are expressions of its variables.
//
// A tensor's shape is always concrete (the bound sizes); the variables enter the graph on the
// BUFFERs of tensors made from Dims (their sources are the tensor's dims, e.g.
// [BIND(batch, 64), 784]). The scheduler needs the symbolic dims of every node, to build kernels
// whose loops run to `batch` rather than to 64. They are inferred on the graph:
//  - forward, sources first: movement ops map their source's dims (a RESHAPE by groups of equal
//    products, an EXPAND keeps a dim it does not grow), ALU ops take an operand's symbolic dim,
//    REDUCE_AXIS keeps the dims it does not reduce;
//  - backward, users first: a concrete dim that meets a symbolic one of the same size at an ALU
//    op (the broadcast bias of `x @ w + b`, expanded to 64 rows) becomes that expression, and so
//    does what it was made from;
//  - then every dim is checked against the concrete shape at the bound values. A graph that
//    fails the check is not symbolic: it is compiled for its concrete sizes, as if it bound
//    nothing. The check is what makes the inference safe: two graphs with the same structure and
//    the same symbolic dims compute the same thing whatever the values.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tempura/ir/uop.hpp"

namespace tempura {

struct SymbolicShapes {
    // Per tensor node with a symbolic dim: every dim as an Index expression over DEFINE_VARs
    // (CONST for a fixed one).
    UOpMap<std::vector<UOp>> dims;
    // The bound value of each variable of the graph.
    std::map<std::string, int64_t> values;

    bool empty() const { return dims.empty(); }
    // The dims of a node: its symbolic ones, or its shape as CONSTs.
    std::vector<UOp> of(const UOp& node) const;
    // `expr` with each variable bound to its value (BIND nodes), for a graph built on a result.
    UOp bound(const UOp& expr) const;
};

// The dims of a RESHAPE's source (`in`, with their sizes `iv`) and result (sizes `ov`) in groups
// of equal products, in order; dims of a fixed size 1 belong to no group. nullopt when they do
// not group (a size 0). A source dim of size 1 that is a variable's pairs with a result dim of
// size 1 or joins the next group.
struct ReshapeGroup {
    std::vector<size_t> in, out;
};
std::optional<std::vector<ReshapeGroup>> reshape_groups(const std::vector<UOp>& in, const Shape& iv,
                                                        const Shape& ov);

// The symbolic dims of the graph `topo` (sources first); empty when it binds no variable or the
// inferred dims do not check. Throws tempura::Error ("[realize] batch is bound to 64 and to 65
// in one graph") when a variable has two values.
SymbolicShapes infer_symbolic_shapes(const std::vector<UOp>& topo);

} // namespace tempura
