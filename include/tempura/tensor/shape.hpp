#pragma once
// Shape: the dimensions of a tensor, outermost first. A scalar has the empty shape [].
#include <cstdint>
#include <string>
#include <vector>

namespace tempura {

using Shape = std::vector<int64_t>;

// "[2, 3]"; "[]" for a scalar.
std::string shape_str(const Shape& shape);

// The number of elements (1 for []). Throws tempura::Error if the product overflows int64.
int64_t numel(const Shape& shape);

// NumPy broadcasting: shapes aligned at the right, a dimension of 1 stretches to the other's.
// Throws "[broadcast] shapes [2, 3] and [4] cannot be broadcast".
Shape broadcast_shapes(const Shape& a, const Shape& b);

// Normalizes an axis that may count from the end (-1 = last) for a tensor of `ndim` dims.
// Throws "[op] axis 2 is out of range for 2 dims".
int64_t normalize_axis(const std::string& op, int64_t axis, int64_t ndim);

} // namespace tempura
