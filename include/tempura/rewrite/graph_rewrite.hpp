#pragma once
// graph_rewrite: applies a rule table to a graph until no rule fires anywhere (fixpoint).
//
// Top-down (default) tries the rules on a node before its sources and again after they
// change; bottom-up rewrites the sources first. Either way a node whose sources changed is
// rebuilt and re-tried, and a rule's result is itself rewritten to fixpoint. A step limit
// turns a rule set that would loop into a tempura::Error naming the rule and the node.
#include <cstddef>

#include "tempura/ir/uop.hpp"
#include "tempura/pattern/match.hpp" // RewriteContext; the rule DSL itself is not needed here

namespace tempura::pattern {
class RuleTable; // tempura/pattern/table.hpp
} // namespace tempura::pattern

namespace tempura {

struct RewriteOptions {
    bool bottom_up = false;
    // Maximum number of rule applications; 0 means 100,000 + 100 per node of the input.
    size_t max_steps = 0;
};

UOp graph_rewrite(const UOp& root, const pattern::RuleTable& table,
                  const pattern::RewriteContext& ctx = {}, RewriteOptions options = {});

} // namespace tempura
