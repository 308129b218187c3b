#pragma once
// Dim: one dimension of a tensor's shape as the user gives it: a fixed size (an int64_t is a
// Dim), or a variable of the symbolic shapes (a named size in [min, max]) bound to the size it
// has in this graph. Kernels and plans built for a graph whose input has a bound variable serve
// every value of that variable: a model run at batch 1, 2, ..., 256 compiles once.
//
//     const Dim batch = Dim::variable("batch", 1, 1024);
//     Tensor x = Tensor::from_vector(data, {batch.bind(64), 784});   // shape() is [64, 784]
//
// A tensor's shape() is always the concrete sizes; the variables only decide what is compiled.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tempura/ir/uop.hpp"

namespace tempura {

class Dim {
  public:
    // A fixed size. Implicit, so that {batch.bind(64), 784} is a list of Dims.
    Dim(int64_t size);                                 // NOLINT(google-explicit-constructor)
    Dim(int size) : Dim(static_cast<int64_t>(size)) {} // NOLINT(google-explicit-constructor)

    // A variable size in [min, max], 1 <= min <= max (an empty size would change what the
    // kernels are). Throws "[Dim] variable batch needs 1 <= min <= max, got [0, 8]".
    static Dim variable(std::string name, int64_t min, int64_t max);
    // This variable bound to `value`. Throws "[Dim] batch bound to 2000, outside [1, 1024]", or
    // "[Dim] 784 is not a variable" for a fixed size.
    Dim bind(int64_t value) const;

    bool is_variable() const { return var_.has_value(); }
    bool is_bound() const { return bound_; }
    // The size: the fixed one or the bound value. Throws "[Dim] batch is not bound".
    int64_t value() const;
    // The variable (a DEFINE_VAR of dtype Index). Throws for a fixed size.
    UOp variable_uop() const;
    // This dim in a graph: CONST for a fixed size, BIND(DEFINE_VAR, value) for a bound variable.
    UOp uop() const;
    std::string str() const; // "784", "batch=64", "batch"

  private:
    Dim() = default;
    int64_t value_ = 0;
    std::optional<VarArg> var_;
    bool bound_ = false;
};

using Dims = std::vector<Dim>;

} // namespace tempura
