#pragma once
// Internal: integer expressions as linear combinations  sum(coef_i * mono_i) + constant,
// the normal form behind like-term combining, div/mod folding and comparison rules.
#include <optional>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "tempura/ir/uop.hpp"

namespace tempura::symbolic {

struct LinTerm {
    UOp mono;
    int64_t coef;
};

// Small inline storage: index expressions have a handful of terms, and this is the hot path.
using Terms = boost::container::small_vector<LinTerm, 8>;

struct Linear {
    DType dtype;
    Terms terms; // sorted canonically, like monomials combined, no zero coefs
    int64_t constant = 0;
};

// Flattens Add/Sub/Neg and constant multiplications (distributing them over sums), combines
// like terms and x/c*c + x%c pairs, and sorts the terms. Arithmetic wraps like the dtype.
Linear decompose(const UOp& u);
// The canonical node of a linear form: ((t0 + t1) + ...) + constant, ti = mono * coef.
UOp rebuild(const Linear& l);
// Bounds of the form without its constant, from the terms' bounds (nullopt on overflow).
std::optional<std::pair<int64_t, int64_t>> term_bounds(const Linear& l);

// Canonicalizers used as rule right-hand sides: nullopt when the node is already canonical.
std::optional<UOp> canonical_sum(const UOp& u);     // Add, Sub, Neg of integers
std::optional<UOp> canonical_product(const UOp& u); // Mul of integers
std::optional<UOp> fold_divmod(const UOp& u);     // Idiv, Mod of integers (by a constant or d > 0)
std::optional<UOp> fold_var_divmod(const UOp& u); // Idiv, Mod of integers by a variable d > 0
std::optional<UOp> fold_compare(const UOp& u);    // CmpLt, CmpEq, CmpNe of integers

} // namespace tempura::symbolic
