// Symbolic rule groups, part 1: constant folding, bounds, identities, where, max, booleans.
// Each group reads as the algebra it states; escape-hatch code only where a rule needs a loop.
#include <unordered_set>

#include "symbolic/linear.hpp"
#include "symbolic/tables.hpp"
#include "tempura/ir/scalar.hpp"
#include "tempura/pattern/table.hpp"
#include "tempura/symbolic/eval.hpp"
#include "tempura/symbolic/simplify.hpp"

namespace tempura {

namespace {

using namespace tempura::pattern;

// ---- constant folding -------------------------------------------------------------------------
// Any ALU op whose sources are all constants becomes a constant (C semantics; division by
// zero and out-of-range shifts are left alone).
std::optional<UOp> fold_constants(const UOp& u) {
    if (!is_alu(u.op()) || u.dtype().count != 1 || u.op() == Op::BitCast) return std::nullopt;
    for (const UOp& s : u.srcs())
        if (s.op() != Op::Const) return std::nullopt;
    const size_t n = u.srcs().size();
    if (u.op() == Op::Cast) {
        const UOp& s = u.src(0);
        if (u.dtype().is_float()) {
            double v = std::holds_alternative<double>(s.arg())
                           ? std::get<double>(s.arg())
                           : static_cast<double>(s.const_value());
            if (u.dtype() == DType::Float32) v = static_cast<float>(v);
            return UOp::constant_f(u.dtype(), v);
        }
        if (std::holds_alternative<double>(s.arg())) {
            const double v = std::get<double>(s.arg());
            if (u.dtype().is_bool()) return UOp::boolean(v != 0.0); // NaN is true, as in C
            return UOp::constant(
                u.dtype(), scalar::float_to_int_sat(v, u.dtype().bits(), u.dtype().is_unsigned()));
        }
        return UOp::constant(u.dtype(), s.const_value());
    }
    const DType operand_dt = u.op() == Op::Where ? u.src(1).dtype() : u.src(0).dtype();
    if (operand_dt.is_float()) {
        double v[3];
        for (size_t i = 0; i < n; ++i) {
            const UOp& s = u.src(i);
            v[i] = std::holds_alternative<double>(s.arg()) ? std::get<double>(s.arg())
                                                           : static_cast<double>(s.const_value());
        }
        if (u.op() == Op::Where) return v[0] != 0 ? u.src(1) : u.src(2);
        // c * (1/ln 2) stays for the EXP2 above it, which fold_exp makes e^c: the rewrite is
        // bottom-up, and 2^(the folded product) would be up to |c| / 2 ulp off.
        if (u.op() == Op::Mul && (is_exp_factor(u.dtype(), v[0]) || is_exp_factor(u.dtype(), v[1])))
            return std::nullopt;
        auto r = exec_float_alu(u.op(), operand_dt, v, n);
        if (r && is_comparison(u.op())) return UOp::boolean(*r != 0.0);
        if (!r) return std::nullopt;
        return UOp::constant_f(u.dtype(), *r);
    }
    int64_t v[3];
    for (size_t i = 0; i < n; ++i) v[i] = u.src(i).const_value();
    auto r = exec_int_alu(u.op(), is_comparison(u.op()) ? u.src(0).dtype() : u.dtype(), v, n);
    if (!r) return std::nullopt;
    return UOp::constant(u.dtype(), *r);
}

// EXP2(c * (1/ln 2)) of a constant c is e^c (is_exp_factor, tempura/ir/scalar.hpp), so that a
// folded exp agrees with a computed one (fold_constants leaves that product to this rule).
std::optional<UOp> fold_exp(const UOp& u) {
    if (u.dtype().count != 1) return std::nullopt;
    const UOp y = exp_operand(u);
    const double* c = !y.is_null() && y.is_const() ? std::get_if<double>(&y.arg()) : nullptr;
    if (c == nullptr) return std::nullopt;
    const double e = std::exp(*c);
    return UOp::constant_f(u.dtype(), u.dtype() == DType::Float32 ? static_cast<float>(e) : e);
}

// An integer or bool ALU node whose bounds are a single value is that value.
std::optional<UOp> fold_by_bounds(const UOp& u) {
    if (!is_alu(u.op()) || !u.dtype().is_integral() || u.dtype().count != 1) return std::nullopt;
    if (u.vmin() != u.vmax()) return std::nullopt;
    return u.const_like(u.vmin());
}

// Commutative ops other than ADD/MUL (whose chains the algebra group sorts): a constant goes to
// the right, otherwise the structurally smaller operand goes first.
std::optional<UOp> canonical_order(const UOp& u) {
    const UOp& a = u.src(0);
    const UOp& b = u.src(1);
    bool swap = a.is_const() ? !b.is_const() : (!b.is_const() && compare_structural(b, a) < 0);
    if (!swap) return std::nullopt;
    return u.replace_srcs({b, a});
}
constexpr OpSet kReorderable = [] {
    OpSet s;
    for (size_t i = 0; i < kNumOps; ++i) {
        const Op o = static_cast<Op>(i);
        if (is_commutative(o) && op_info(o).arity == 2 && o != Op::Add && o != Op::Mul) s.add(o);
    }
    return s;
}();

// Rule tables: one rule per line with the algebra it states.
// clang-format off
inline constexpr auto folding = rules(
    rule(op<Op::Exp2>(x), fold_exp).named("fold exp"),       // 2^(c / ln 2) -> e^c
    rule(alu_any, fold_constants).named("fold constants"),   // op(c, ...) -> its value
    rule(alu_any, fold_by_bounds).named("fold by bounds"));  // vmin == vmax -> that value

// ---- identities -------------------------------------------------------------------------------
inline constexpr auto identities = rules(
    rule(x + 0, x, is_int(x)),                // x + 0 == x (not for floats: -0.0 + 0 == +0.0)
    rule(x - 0, x),                           // x - 0 == x, floats included
    rule(x * 1, x),                           // x * 1 == x, floats included
    rule(x * 0, 0, is_int(x)),                // x * 0 == 0 (floats: NaN * 0 is NaN)
    rule(x / 1, x, is_int(x)),                // x / 1 == x
    rule(op<Op::Fdiv>(x, 1), x),              // x / 1.0 == x
    rule(x % 1, 0, is_int(x)),                // x % 1 == 0
    rule(x - x, 0, is_int(x)),                // x - x == 0
    rule(x / x, 1, nonzero(x)),               // x / x == 1 when x cannot be 0
    rule(x % x, 0, nonzero(x)),               // x % x == 0 when x cannot be 0
    rule(-(-x), x),                           // negation is an involution
    rule(x / -1, -x, is_int(x)),              // truncation toward zero: x / -1 == -x
    rule(x % -1, 0, is_int(x)));              // x % -1 == 0

// ---- where ------------------------------------------------------------------------------------
// Inside a branch the condition's value is known: a subexpression of the true branch that is the
// condition itself is true there, and false in the false branch (where(x < 5, where(x < 5, a, b)
// * 2, c) -> where(x < 5, a * 2, c)). Only small branches are searched (the rule runs at every
// WHERE the rewrite visits).
// Never into a memory access: both branches of a WHERE are computed, so a LOAD in the taken-or-
// not branch runs either way, and its gate (or address) is what keeps it inside its buffer
// when the condition is false (a PAD's or GATHER's where(valid, LOAD(i, valid), 0)).
std::optional<UOp> where_closure(const UOp& u) {
    const UOp& c = u.src(0);
    if (c.is_const() || c.dtype().count != 1) return std::nullopt; // a scalar condition
    auto known = [&](const UOp& branch, bool value) -> std::optional<UOp> {
        if (branch.same(c)) return UOp::boolean(value);
        size_t seen = 0;
        bool found = false;
        std::unordered_set<const UOpNode*> reaches_c; // nodes with c among their sources
        for (const UOp& n : branch.toposort()) {
            if (++seen > 64) return std::nullopt;
            bool r = n.same(c);
            for (const UOp& s : n.srcs()) r = r || reaches_c.count(s.get()) != 0;
            if (!r) continue;
            if (!n.same(c) && (n.op() == Op::Load || n.op() == Op::Index)) return std::nullopt;
            reaches_c.insert(n.get());
            found = true;
        }
        if (!found) return std::nullopt;
        return branch.substitute({{c.get(), UOp::boolean(value)}});
    };
    const std::optional<UOp> t = known(u.src(1), true), f = known(u.src(2), false);
    if (!t && !f) return std::nullopt;
    return u.replace_srcs({c, t ? *t : u.src(1), f ? *f : u.src(2)});
}

inline constexpr auto where_folding = rules(
    rule(where(x, y, y), y),                  // both branches equal
    rule(where(x, y, z), y, always(x)),       // a condition that is always true
    rule(where(x, y, z), z, never(x)),        // a condition that is always false
    rule(where(!x, y, z), where(x, z, y)),    // no NOT in conditions
    rule(where(x, c0, c1), x, is_bool(c0) && c0 > c1),  // where(c, true, false) == c
    rule(where(x, c0, c1), !x, is_bool(c0) && c1 > c0), // where(c, false, true) == !c
    rule(where(x, where(x, y, z), w), where(x, y, w)),  // the same condition inside
    rule(where(x, y, where(x, z, w)), where(x, y, w)),
    // An inner condition the outer one implies (x < c0 <= c1), or rules out (x >= c0 >= c1).
    rule(where(x < c0, where(x < c1, y, z), w), where(x < c0, y, w), c0 <= c1),
    rule(where(x < c0, y, where(x < c1, z, w)), where(x < c0, y, w), c1 <= c0),
    // ... and its negation, c1 < x (what !(x < c1 + 1) becomes on integers).
    rule(where(x < c0, y, where(c1 < x, z, w)), where(x < c0, y, z), c0 > c1),
    rule(where(x < c0, where(c1 < x, y, z), w), where(x < c0, z, w), c1 >= c0 - 1),
    // Wheres on one condition combine through + and max (a constant branch each). Integers
    // only: index arithmetic is what needs it (and Z3's float proofs of these take minutes).
    rule(where(x, y, c0) + where(x, z, c1), where(x, y + z, fold(c0 + c1)), is_int(y)),
    rule(where(x, c0, y) + where(x, c1, z), where(x, fold(c0 + c1), y + z), is_int(y)),
    rule(where(x, c0, y) + where(x, z, c1), where(x, z + c0, y + c1), is_int(y)), // cross-zero
    rule(maximum(where(x, y, c0), where(x, z, c1)), where(x, maximum(y, z), fold(maximum(c0, c1)))),
    rule(maximum(where(x, c0, y), where(x, c1, z)), where(x, fold(maximum(c0, c1)), maximum(y, z))),
    // where(x < y, y, x) is the larger of x and y (integers: a float NaN makes the two differ).
    rule(where(x < y, y, x), maximum(x, y), is_int(x)),
    rule(where(y < x, x, y), maximum(x, y), is_int(x)),
    // A comparison with a constant of a where with constant branches is decided in each branch:
    // where(c, 1, 0) != 0 -> where(c, true, false) -> c (a bool cast back to bool).
    rule(where(x, c0, c1) != c2, where(x, fold(c0 != c2), fold(c1 != c2))),
    rule(where(x, c0, c1) == c2, where(x, fold(c0 == c2), fold(c1 == c2))),
    rule(where(x, c0, c1) < c2, where(x, fold(c0 < c2), fold(c1 < c2))),
    rule(c2 < where(x, c0, c1), where(x, fold(c2 < c0), fold(c2 < c1))),
    rule(where(x, y, z), where_closure));     // the condition's value inside its branches

// ---- max --------------------------------------------------------------------------------------
inline constexpr auto max_folding = rules(
    rule(maximum(x, x), x),                   // max(x, x) == x
    rule(maximum(x, y), x, never_above(y, x)),  // y can never exceed x (bounds)
    rule(maximum(x, y), y, never_above(x, y)),  // x can never exceed y
    rule(maximum(maximum(x, c0), c1), maximum(x, fold(maximum(c0, c1))))); // associativity

// ---- booleans and bitwise (integers and bools alike unless said) ------------------------------
inline constexpr auto boolean_algebra = rules(
    rule(x & x, x),                           // idempotence
    rule(x | x, x),
    rule(x ^ x, 0, is_integral(x)),           // x ^ x == 0 (false for bools)
    rule(x & 0, 0),                           // x & false == false, x & 0 == 0
    rule(x | 0, x),                           // x | false == x
    rule(x ^ 0, x),
    rule(x & 1, x, is_bool(x)),               // x & true == x
    rule(x | 1, 1, is_bool(x)),               // x | true == true
    rule(x ^ 1, !x, is_bool(x)),              // x ^ true == !x
    rule(x & -1, x, is_int(x)),               // all ones
    rule(x & !x, 0),                          // contradiction
    rule(x | !x, 1, is_bool(x)),              // excluded middle
    rule(x | !x, -1, is_int(x)),              // x | ~x: all ones
    rule(!(!x), x),
    // Constants of a chain of one associative op meet: (x ^ 5) ^ 5 -> x ^ 0 -> x.
    rule((x ^ c0) ^ c1, x ^ fold(c0 ^ c1)),
    rule((x & c0) & c1, x & fold(c0 & c1)),
    rule((x | c0) | c1, x | fold(c0 | c1)),
    // A bool compared with a constant is itself or its negation: (x < 8) != true -> !(x < 8).
    rule(x != 1, !x, is_bool(x)),
    rule(x != 0, x, is_bool(x)),
    rule(x == 1, x, is_bool(x)),
    rule(x == 0, !x, is_bool(x)),
    rule(x != x, 0, is_integral(x)),          // not for floats: NaN != NaN
    rule(x == x, 1, is_integral(x)),
    rule(x < x, 0, is_int(x)),
    rule((x < c0) & (x < c1), x < c0, c0 <= c1),   // (x < a) & (x < b) == x < min(a, b)
    rule((x < c0) | (x < c1), x < c1, c0 <= c1));  // (x < a) | (x < b) == x < max(a, b)

// ---- canonical order --------------------------------------------------------------------------
inline constexpr auto ordering = rules(
    rule(ops_in<kReorderable>(x, y), canonical_order));   // a op b -> b op a in canonical order
// clang-format on

inline constexpr auto fold_group =
    rules(folding, identities, where_folding, max_folding, boolean_algebra, ordering);

} // namespace

const pattern::RuleTable& symbolic_fold_rules() { return pattern::frozen<fold_group>(); }

// Both groups, the algebra's after the folding's for every op: a constexpr chain of the two
// constexpr tables (the algebra's is defined in rules_algebra.cpp; only its address is used here).
namespace {
static_assert(pattern::frozen<fold_group>().for_op(Op::Add).size() > 0,
              "the folding table is built at compile time");
constexpr pattern::RuleTable kSymbolicRules =
    pattern::frozen<fold_group>().then(symbolic_detail::algebra_table);
} // namespace

const pattern::RuleTable& symbolic_rules() { return kSymbolicRules; }

} // namespace tempura
