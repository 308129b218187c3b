#pragma once
// Shape: the dimensions of a tensor, outermost first. A scalar has the empty shape [].
// Shapes are an IR fact: every tensor-level UOp knows its own (UOp::shape(), see uop.hpp).
#include <cstdint>
#include <string>
#include <vector>

namespace tempura {

using Shape = std::vector<int64_t>;

// "[2, 3]"; "[]" for a scalar.
std::string shape_str(const Shape& shape);

// The number of elements (1 for []). Throws tempura::Error if the product overflows int64.
int64_t numel(const Shape& shape);

} // namespace tempura
