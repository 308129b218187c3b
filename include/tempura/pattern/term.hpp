#pragma once
// Term: the run-time, walkable form of a rule's left side, right side and predicate.
// Printing goes through it, and so does the translation of each rule to Z3 that proves it
// (tests/symbolic/test_z3_rules.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "tempura/ir/ops.hpp"

namespace tempura::pattern {

struct Term {
    enum class Kind : uint8_t {
        Wildcard,      // x y z w: any node
        ConstWildcard, // c0 c1 c2: any CONST
        Literal,       // an integer constant in the rule's text
        Node,          // an op applied to sub-terms
        Fold,          // fold(e): e evaluated on constants when the rule fires
        Predicate,     // a named predicate on sub-terms (is_multiple_of, nonneg, ...)
        Code,          // an escape-hatch callable: opaque
        OpSet,         // alu(x, y), any_of<...>(...): a root matching a set of ops (name)
    };
    Kind kind = Kind::Code;
    Op op = Op::Const;          // for Node
    int slot = -1;              // for wildcards
    int64_t value = 0;          // for Literal
    std::string name;           // wildcard, predicate or code name
    std::vector<Term> children; // operands
};

std::string to_string(const Term& t);

// The names the DSL gives its wildcards, by slot.
inline constexpr const char* kWildcardNames[] = {"x", "y", "z", "w", "c0", "c1", "c2", "c3"};

} // namespace tempura::pattern
