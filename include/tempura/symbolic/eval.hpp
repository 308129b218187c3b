#pragma once
// evaluate(): an integer/bool expression at an assignment of its variables, with the scalar
// semantics of tempura/ir/scalar.hpp.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "tempura/ir/scalar.hpp" // exec_int_alu, exec_float_alu
#include "tempura/ir/uop.hpp"

namespace tempura {

// Evaluates an integer/bool expression at an assignment of its variables (bool as 0/1).
// Throws tempura::Error on division by zero, an unassigned variable, a value outside the
// variable's bounds, or a node that is not integer arithmetic.
int64_t evaluate(const UOp& u, const std::map<std::string, int64_t>& vars);

} // namespace tempura
