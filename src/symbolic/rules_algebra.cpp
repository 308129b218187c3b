// Symbolic rule groups, part 2: the algebra on linear forms (like terms, constants, canonical
// order of sums and products, div/mod folding, comparisons). The work is in linear.cpp; the
// rules say where it applies.
#include "symbolic/linear.hpp"
#include "symbolic/tables.hpp"
#include "tempura/pattern/table.hpp"
#include "tempura/rewrite/graph_rewrite.hpp"
#include "tempura/symbolic/simplify.hpp"

namespace tempura {

namespace {

using namespace tempura::pattern;
using namespace tempura::symbolic;

// clang-format off
inline constexpr auto sums = rules(
    // x - y == x + y*-1, -x == x*-1; like terms combined; constants last; terms sorted.
    rule(x + y, canonical_sum, is_int(x)).named("canonical sum"),
    rule(x - y, canonical_sum, is_int(x)).named("canonical sum"),
    rule(-x, canonical_sum, is_int(x)).named("canonical sum"),
    rule(x * y, canonical_product, is_int(x)).named("canonical product"));

inline constexpr auto divmod = rules(
    // (a*c + b) / c, nested, gcd..., and by a variable d > 0: (a*d + b) / d
    rule(x / y, fold_divmod, is_int(x)).named("div folding"),
    rule(x % y, fold_divmod, is_int(x)).named("mod folding"));  // (a*c + b) % c, ranges...

inline constexpr auto comparisons = rules(
    rule(x < y, fold_compare, is_int(x)).named("lt folding"),    // constants moved, factors out
    rule(x == y, fold_compare, is_int(x)).named("eq folding"),
    rule(x != y, fold_compare, is_int(x)).named("ne folding"));
// clang-format on

inline constexpr auto algebra_group = rules(sums, divmod, comparisons);

} // namespace

namespace symbolic_detail {
constexpr pattern::RuleTable algebra_table = pattern::frozen<algebra_group>().alias();
} // namespace symbolic_detail

const pattern::RuleTable& symbolic_algebra_rules() { return symbolic_detail::algebra_table; }

UOp simplify(const UOp& u) {
    RewriteOptions o;
    o.bottom_up = true;
    UOp r = graph_rewrite(u, symbolic_rules(), nullptr, o);
    // The rules work node by node and cannot see sharing: splitting (s / c) and (s % c) of a
    // shared s into separate simpler forms can cost more nodes than it saves. The contract is
    // that simplify never returns a larger graph, so such a result gives way to its input.
    if (r.same(u) || r.node_count() <= u.node_count()) return r;
    return u;
}

} // namespace tempura
