#pragma once
// The symbolic simplifier: the rule groups of tinygrad's symbolic.py, as Tempura rules, run
// bottom-up to fixpoint. Integer semantics are C's (Idiv truncates, Mod takes the dividend's
// sign); rules that are only true without overflow check the bounds first.
#include "tempura/ir/uop.hpp"

namespace tempura::pattern {
class RuleTable; // tempura/pattern/table.hpp: include it to apply or inspect the rules
} // namespace tempura::pattern

namespace tempura {

// The whole symbolic rule set, compiled once (groups in their own translation units).
const pattern::RuleTable& symbolic_rules();

// Its parts, in the order symbolic_rules() tries them.
const pattern::RuleTable& symbolic_fold_rules();    // constant folding, bounds, identities
const pattern::RuleTable& symbolic_algebra_rules(); // like terms, canonical order, div/mod, cmp

// The symbolic rules to fixpoint. Never returns a graph with more nodes than its input: where
// the rewritten graph is larger (rules cannot see sharing), the input is returned.
UOp simplify(const UOp& u);

} // namespace tempura
