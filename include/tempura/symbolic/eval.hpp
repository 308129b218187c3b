#pragma once
// Scalar semantics of the integer and bool ALU ops, shared by constant folding, bounds and
// evaluate(): C semantics (Idiv truncates, Mod takes the dividend's sign), results wrapped to
// the dtype's width as LLVM does.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "tempura/ir/uop.hpp"

namespace tempura {

// Applies an integer/bool ALU op to constant operands; nullopt when the result is undefined
// (division by zero, shift out of range) or the op is not an integer op.
std::optional<int64_t> exec_int_alu(Op op, DType dtype, const int64_t* operands, size_t n);

// Floating-point folding: nullopt for ops that are not float ALU ops.
std::optional<double> exec_float_alu(Op op, DType dtype, const double* operands, size_t n);

// Evaluates an integer/bool expression at an assignment of its variables (bool as 0/1).
// Throws tempura::Error on division by zero, an unassigned variable, a value outside the
// variable's bounds, or a node that is not integer arithmetic.
int64_t evaluate(const UOp& u, const std::map<std::string, int64_t>& vars);

} // namespace tempura
