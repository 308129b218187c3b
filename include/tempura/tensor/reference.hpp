#pragma once
// A reference interpreter of the tensor-level graph (docs/KERNEL_IR.md section 1), for
// differential tests: every node is evaluated into a dense host array with straightforward
// loops (movement ops as index maps over strided views). Slow and simple on purpose; Tensor
// never uses it.
//
// Semantics: floats are computed in double and rounded to the node's dtype after every op
// (float32, float16, bfloat16); integers wrap to their width (two's complement), IDIV truncates
// toward zero and MOD takes the dividend's sign (x / 0 and x % 0 give 0 here, where the
// backends leave them undefined); comparisons give 0/1; PAD reads 0.
#include <cstdint>
#include <vector>

#include "tempura/ir/uop.hpp"
#include "tempura/tensor/shape.hpp"

namespace tempura {

// A host array: row-major elements of `shape`. Integers and bool live in `ints` (uint64 as its
// bit pattern), floats in `floats`; the other vector is empty.
struct ReferenceArray {
    DType dtype;
    Shape shape;
    std::vector<double> floats;
    std::vector<int64_t> ints;

    int64_t size() const;
    double at(int64_t i) const; // element i as a double, whatever the dtype
    std::vector<double> as_doubles() const;
};

ReferenceArray reference_eval_array(const UOp& root);

// The elements of root, row-major, as doubles.
std::vector<double> reference_eval(const UOp& root);

} // namespace tempura
