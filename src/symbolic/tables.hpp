#pragma once
// The symbolic simplifier's two constexpr tables live in two translation units (for compile
// time); the chained symbolic_rules() table in rules_fold.cpp points at the algebra's.
#include "tempura/pattern/table.hpp"

namespace tempura::symbolic_detail {
extern const pattern::RuleTable algebra_table; // rules_algebra.cpp
} // namespace tempura::symbolic_detail
