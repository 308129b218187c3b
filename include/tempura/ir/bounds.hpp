#pragma once
// Bounds (vmin/vmax) of integer and bool nodes, computed once when a node is built.
// C semantics: Idiv truncates toward zero, Mod takes the dividend's sign. Where an operation
// can overflow its dtype, the bounds widen to the dtype's whole range (the value may wrap).
#include <cstdint>
#include <utility>
#include <vector>

#include "tempura/ir/uop.hpp"

namespace tempura {

inline constexpr int64_t kUnknownMin = INT64_MIN;
inline constexpr int64_t kUnknownMax = INT64_MAX;

std::pair<int64_t, int64_t> compute_bounds(Op op, DType dtype, const std::vector<UOp>& srcs,
                                           const Arg& arg);

} // namespace tempura
