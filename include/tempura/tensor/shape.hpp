#pragma once
// The tensor surface's shape helpers (Shape itself is an IR fact: tempura/ir/shape.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include "tempura/ir/shape.hpp"

namespace tempura {

// NumPy broadcasting: shapes aligned at the right, a dimension of 1 stretches to the other's.
// Throws "[broadcast] shapes [2, 3] and [4] cannot be broadcast".
Shape broadcast_shapes(const Shape& a, const Shape& b);

// Normalizes an axis that may count from the end (-1 = last) for a tensor of `ndim` dims.
// Throws "[op] axis 2 is out of range for 2 dims".
int64_t normalize_axis(const std::string& op, int64_t axis, int64_t ndim);

} // namespace tempura
