// Unit tests of the compile-time rule DSL: wildcards, literals, commutative matching with
// backtracking, fold(), predicates, the escape hatch, groups, the op-indexed table with its early
// reject, printing of rules and their walkable terms. Rules are constexpr values, as in the
// library's own rule groups.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>

#include <tempura/pattern/table.hpp>
#include <tempura/tempura.hpp>

namespace dsl_test {

using namespace tempura::pattern;
using tempura::DType;
using tempura::Op;
using tempura::UOp;
using tempura::VarArg;

// ---- rules as constexpr data --------------------------------------------------------------------

inline constexpr auto add_zero = rule(x + 0, x);
inline constexpr auto mul_one = rule(x * 1, x);
inline constexpr auto div_self = rule(x / x, 1);
inline constexpr auto fold_add = rule(c0 + c1, fold(c0 + c1));
inline constexpr auto reassoc = rule((x + c0) + c1, x + fold(c0 + c1));
inline constexpr auto mod_multiple = rule(x % c0, 0, x_is_multiple_of(c0));
inline constexpr auto max_nonneg = rule(maximum(x, 0), x, nonneg(x));
inline constexpr auto where_same = rule(where(x, y, y), y);
inline constexpr auto named_add_zero = rule(x + 0, x).named("add-zero");

inline constexpr auto zero_folding = rules(add_zero, rule(x * 0, 0, is_int(x)));
inline constexpr auto simple = rules(zero_folding, mul_one);
inline constexpr auto nested = rules(simple, rules(div_self, zero_folding));

// The escape hatch and callable predicates are constexpr too (captureless lambdas).
constexpr auto decline = rule(x + y, [](Match&) -> std::optional<UOp> { return std::nullopt; });
constexpr auto double_to_add = rule(x * 2, [](Match& m) { return m[x] + m[x]; });
constexpr auto const_left =
    rule(x + y, y, [](const Match& m) { return m[x].is_const(); }); // x + y -> y if x is const

// What the types say about the rules, at compile time.
static_assert(
    std::is_same_v<std::remove_cv_t<decltype(add_zero.lhs)>, OpPat<Op::Add, Wild<0>, Lit>>);
static_assert(std::get<1>(add_zero.lhs.cs).value == 0);
static_assert(decltype(add_zero.lhs)::kUses == 1u);
static_assert(decltype(add_zero.lhs)::kRootOp == static_cast<int>(Op::Add));
static_assert(decltype(reassoc.lhs)::kUses == (1u | 1u << 4 | 1u << 5));
static_assert(decltype(reassoc.rhs)::kUses == (1u | 1u << 4 | 1u << 5));
static_assert(decltype(fold_add.lhs)::kConstOnly);
static_assert(!decltype(reassoc.lhs)::kConstOnly);
static_assert(decltype(reassoc.lhs)::kSwap);
static_assert(!decltype(rule(x - 0, x).lhs)::kSwap);
static_assert(decltype(mod_multiple.pred)::kUses == (1u | 1u << 4));
static_assert(add_zero.label == nullptr);
static_assert(named_add_zero.label[0] == 'a' && named_add_zero.label[7] == 'o');
static_assert(decltype(zero_folding)::size == 2);
static_assert(decltype(simple)::size == 3);
static_assert(decltype(nested)::size == 6);
static_assert(
    std::is_same_v<std::remove_cvref_t<decltype(boost::hana::at_c<5>(nested.rules))>,
                   std::remove_cvref_t<decltype(boost::hana::at_c<1>(zero_folding.rules))>>);

// frozen<>(): the table is built by the compiler, bucketed by root op in declaration order.
inline constexpr auto wild_decline =
    rule(x, [](Match&) -> std::optional<UOp> { return std::nullopt; }).named("wild");
inline constexpr auto indexed = rules(add_zero, mul_one, fold_add, wild_decline, rule(x - x, 0),
                                      rule(c0, [](Match&) { return UOp::index(0); }));
constexpr const RuleTable& kIndexed = frozen<indexed>();
static_assert(kIndexed.size() == 6);
static_assert(kIndexed.for_op(Op::Add).size() == 3);
static_assert(kIndexed.for_op(Op::Mul).size() == 2);
static_assert(kIndexed.for_op(Op::Sub).size() == 2);
static_assert(kIndexed.for_op(Op::Const).size() == 2); // the wildcard rule and c0
static_assert(kIndexed.for_op(Op::Where).size() == 1);
static_assert(kIndexed.for_op(Op::Add)[0].rule == &boost::hana::at_c<0>(indexed.rules));
static_assert(kIndexed.for_op(Op::Add)[2].nchild == 0 && kIndexed.for_op(Op::Add)[1].swap);

UOp var(const char* name, int64_t lo, int64_t hi) { return UOp::variable(name, lo, hi); }

// A non-constant node of another dtype.
UOp typed_var(const char* name, DType dt) {
    return UOp::make(Op::DefineVar, dt, {}, VarArg{name, 0, 5});
}

// Applies a table once at the root; the result or a null UOp.
// The first entry of a bucket (which must not be empty).
const CompiledRule& first(std::span<const CompiledRule> s) {
    REQUIRE_FALSE(s.empty());
    return s[0];
}

UOp once(const RuleTable& t, const UOp& n, const tempura::pattern::RewriteContext& ctx = {}) {
    auto r = t.rewrite_once(n, ctx);
    return r ? *r : UOp();
}

bool same(const UOp& a, const UOp& b) { return !a.is_null() && !b.is_null() && a.same(b); }

} // namespace dsl_test

using namespace dsl_test;

TEST_CASE("x + 0 -> x matches both operand orders of a commutative op") {
    const auto t = compile(rules(add_zero));
    UOp a = var("a", 0, 10);
    CHECK(same(once(t, a + 0), a));
    CHECK(same(once(t, 0 + a), a));
    CHECK(once(t, a + 1).is_null());
    CHECK(once(t, a * 0).is_null());
    CHECK(once(t, a - 0).is_null());
    // The rule object applies directly too.
    auto direct = add_zero.apply(0 + a, nullptr);
    REQUIRE(direct);
    CHECK(direct->same(a));
    // A literal matches a CONST of that value in any dtype.
    UOp f = typed_var("f", DType::Float32);
    CHECK(same(once(t, f + UOp::constant_f(DType::Float32, 0.0)), f));
    CHECK(once(t, f + UOp::constant_f(DType::Float32, 0.5)).is_null());
    UOp i8 = typed_var("i8", DType::Int8);
    CHECK(same(once(t, UOp::constant(DType::Int8, 0) + i8), i8));
    // Through graph_rewrite, everywhere in the graph.
    UOp b = var("b", 0, 10);
    CHECK(tempura::graph_rewrite((a + 0) * (0 + b), t).same(a * b));
}

TEST_CASE("a repeated wildcard means the same node") {
    const auto t = compile(rules(div_self));
    UOp a = var("a", 0, 10), b = var("b", 0, 10);
    CHECK(same(once(t, a / a), UOp::index(1)));
    CHECK(once(t, a / b).is_null());
    CHECK(same(once(t, (a + 1) / (a + 1)), UOp::index(1))); // hash-consed: the same node
    CHECK(once(t, (a + 1) / (1 + a)).is_null());            // equal value, different node
    // The literal on the right takes the dtype of the matched node.
    UOp i = typed_var("i32", DType::Int32);
    CHECK(same(once(t, i / i), UOp::constant(DType::Int32, 1)));
}

TEST_CASE("constant wildcards and fold()") {
    const auto t =
        compile(rules(fold_add, rule(c0 / c1, fold(c0 / c1)), rule(c0 % c1, fold(c0 % c1)),
                      rule(c0 < c1, fold(c0 < c1)), rule(c0 * 2, fold(c0 * 2))));
    UOp a = var("a", 0, 10);
    CHECK(same(once(t, UOp::index(3) + UOp::index(4)), UOp::index(7)));
    CHECK(once(t, a + 4).is_null());
    CHECK(once(t, 4 + a).is_null());
    // Folding follows the dtype: int8 wraps, floats stay floats.
    CHECK(same(once(t, UOp::constant(DType::Int8, 100) + UOp::constant(DType::Int8, 100)),
               UOp::constant(DType::Int8, -56)));
    CHECK(
        same(once(t, UOp::constant_f(DType::Float32, 1.5) + UOp::constant_f(DType::Float32, 2.25)),
             UOp::constant_f(DType::Float32, 3.75)));
    // C semantics; an undefined fold (division by zero) does not fire.
    CHECK(same(once(t, UOp::index(-7) / UOp::index(2)), UOp::index(-3)));
    CHECK(same(once(t, UOp::index(-7) % UOp::index(2)), UOp::index(-1)));
    CHECK(once(t, UOp::index(7) / UOp::index(0)).is_null());
    CHECK(once(t, UOp::index(7) % UOp::index(0)).is_null());
    // A comparison folds to a Bool constant.
    CHECK(same(once(t, UOp::index(3) < UOp::index(4)), UOp::boolean(true)));
    CHECK(same(once(t, UOp::index(4) < UOp::index(3)), UOp::boolean(false)));
    CHECK(same(once(t, UOp::constant(DType::UInt8, 3) < UOp::constant(DType::UInt8, 250)),
               UOp::boolean(true)));
    // Float comparisons fold to Bool as well.
    CHECK(same(once(t, UOp::constant_f(DType::Float32, 1.0) < UOp::constant_f(DType::Float32, 2.0)),
               UOp::boolean(true)));
    // A literal inside fold() adopts the constant's dtype; `2 * 21` matches `c0 * 2` swapped.
    CHECK(same(once(t, UOp::index(2) * UOp::index(21)), UOp::index(42)));
    CHECK(same(once(t, UOp::constant(DType::Int32, 21) * UOp::constant(DType::Int32, 2)),
               UOp::constant(DType::Int32, 42)));
    CHECK(once(t, UOp::index(3) * UOp::index(21)).is_null());
}

TEST_CASE("(x + c0) + c1 -> x + fold(c0 + c1), in every operand order") {
    const auto t = compile(rules(reassoc));
    UOp a = var("a", 0, 10), b = var("b", 0, 10);
    const UOp want = a + 7;
    CHECK(same(once(t, (a + 3) + 4), want));
    CHECK(same(once(t, 4 + (a + 3)), want));
    CHECK(same(once(t, (3 + a) + 4), want));
    CHECK(same(once(t, 4 + (3 + a)), want));
    CHECK(once(t, (a + b) + 4).is_null());
    CHECK(once(t, (a + 3) + b).is_null());
    CHECK(once(t, (a * 3) + 4).is_null());
    // Both constants, in the inner sum: the first successful binding wins (x = 3, c0 = 4).
    CHECK(same(once(t, (UOp::index(3) + UOp::index(4)) + 5), UOp::index(3) + 9));
    // The folded constant takes the constants' dtype.
    UOp i = typed_var("i32", DType::Int32);
    CHECK(same(once(t, (i + 3) + 4), i + UOp::constant(DType::Int32, 7)));
}

TEST_CASE("commutative matching backtracks: a later failure undoes earlier bindings") {
    // (x + y) + x: on (a + b) + b the inner sum first binds x = a, then the outer operand b
    // fails to be x; the inner sum must be retried swapped (x = b, y = a).
    static constexpr auto r = rule((x + y) + x, x * y);
    const auto t = compile(rules(r));
    UOp a = var("a", 0, 10), b = var("b", 0, 10), c = var("c", 0, 10);
    CHECK(same(once(t, (a + b) + b), b * a));
    CHECK(same(once(t, (a + b) + a), a * b));
    CHECK(same(once(t, b + (a + b)), b * a)); // outer swapped, inner swapped
    CHECK(same(once(t, a + (a + b)), a * b)); // outer swapped
    CHECK(once(t, (a + b) + c).is_null());
    // With a constant wildcard inside: (x + c0) + x.
    static constexpr auto r2 = rule((x + c0) + x, x * 2 + c0);
    const auto t2 = compile(rules(r2));
    CHECK(same(once(t2, a + (3 + a)), a * 2 + 3));
    CHECK(same(once(t2, (3 + a) + a), a * 2 + 3));
    CHECK(once(t2, (3 + a) + b).is_null());
}

TEST_CASE("predicates") {
    UOp a = var("a", 0, 10);      // nonneg
    UOp n = var("n", -1, 10);     // may be negative
    UOp big = var("big", 11, 20); // always above a

    SUBCASE("x % c0 -> 0 if x_is_multiple_of(c0)") {
        const auto t = compile(rules(mod_multiple));
        CHECK(same(once(t, UOp::index(12) % UOp::index(4)), UOp::index(0)));
        CHECK(same(once(t, UOp::index(-12) % UOp::index(4)), UOp::index(0)));
        CHECK(once(t, UOp::index(12) % UOp::index(5)).is_null());
        CHECK(once(t, UOp::index(12) % UOp::index(0)).is_null()); // never divides by zero
        CHECK(once(t, a % 4).is_null());                          // a is not a multiple of 4
        // A non-constant multiple of c0: a * 4 is a multiple of 4 for every a.
        CHECK(same(once(t, (a * 4) % 4), UOp::index(0)));
        // Shifts by constants, WHEREs of multiples and widening casts (the GPU renderer's
        // alignment proofs of lowered indices).
        CHECK(tempura::pattern::is_multiple_of(a << UOp::index(3), 8));
        CHECK(!tempura::pattern::is_multiple_of(a << UOp::index(2), 8));
        CHECK(tempura::pattern::is_multiple_of((a * 4) << UOp::index(1), 8));
        CHECK(tempura::pattern::is_multiple_of((a * 3) << UOp::index(1), 3));
        CHECK(tempura::pattern::is_multiple_of(where(a < 5, a * 4, UOp::index(8)), 4));
        CHECK(!tempura::pattern::is_multiple_of(where(a < 5, a * 4, UOp::index(6)), 4));
        const auto cast = [](DType dt, const UOp& x) { return UOp::make(Op::Cast, dt, {x}); };
        const UOp a4 = cast(DType::Int32, a) * 4; // an int32 multiple of 4
        CHECK(tempura::pattern::is_multiple_of(cast(DType::Int64, a4), 4));
        // A narrowing cast wraps: 3 * a modulo 2^8 need not be a multiple of 3.
        CHECK(!tempura::pattern::is_multiple_of(cast(DType::Int8, cast(DType::Int32, a) * 3), 3));
        // is_multiple_of with explicit wildcards is the same predicate.
        static constexpr auto r = rule(x % c0, 0, is_multiple_of(x, c0));
        CHECK(same(compile(rules(r)).rewrite_once(UOp::index(9) % UOp::index(3), nullptr).value(),
                   UOp::index(0)));
    }
    SUBCASE("bounds predicates") {
        const auto t = compile(rules(max_nonneg));
        CHECK(same(once(t, tempura::maximum(a, 0)), a));
        CHECK(same(once(t, tempura::maximum(0, a)), a));
        CHECK(once(t, tempura::maximum(n, 0)).is_null());
        CHECK(once(t, tempura::maximum(a, 1)).is_null());

        static constexpr auto lt = rule(x < y, 1, always_less(x, y));
        const auto tl = compile(rules(lt));
        CHECK(same(once(tl, a < big), UOp::boolean(true))); // a literal of the root's dtype
        CHECK(once(tl, big < a).is_null());

        static constexpr auto both = rule(x / y, 0, nonneg(x) && always_less(x, y));
        const auto tb = compile(rules(both));
        CHECK(same(once(tb, a / big), UOp::index(0)));
        CHECK(once(tb, n / big).is_null());
        CHECK(once(tb, big / a).is_null());

        static constexpr auto pos = rule(x / x, 1, positive(x));
        const auto tp = compile(rules(pos));
        CHECK(same(once(tp, big / big), UOp::index(1)));
        CHECK(once(tp, a / a).is_null()); // a may be 0

        static constexpr auto nz = rule(x / x, 1, nonzero(x));
        const auto tn = compile(rules(nz));
        UOp neg = var("neg", -9, -1);
        CHECK(same(once(tn, neg / neg), UOp::index(1)));
        CHECK(once(tn, n / n).is_null());
    }
    SUBCASE("dtype predicates") {
        static constexpr auto r = rule(x * 0, 0, is_int(x));
        const auto t = compile(rules(r));
        CHECK(same(once(t, a * 0), UOp::index(0)));
        UOp f = typed_var("f", DType::Float32);
        CHECK(once(t, f * UOp::constant_f(DType::Float32, 0.0)).is_null());

        static constexpr auto rb = rule(x & x, x, is_bool(x));
        const auto tb = compile(rules(rb));
        UOp cmp = a < 3;
        CHECK(same(once(tb, cmp & cmp), cmp));
        CHECK(once(tb, a & a).is_null());
    }
    SUBCASE("a callable predicate, tried in both operand orders") {
        const auto t = compile(rules(const_left));
        CHECK(same(once(t, a + 5), a)); // x = a fails the predicate; swapped x = 5 passes
        CHECK(same(once(t, 5 + a), a));
        CHECK(once(t, a + n).is_null());
        // A predicate reads the rewrite context.
        static constexpr auto gated =
            rule(x + 0, x, [](const Match& m) { return m.context<int>() > 0; });
        const auto tg = compile(rules(gated));
        int on = 1, off = 0;
        CHECK(same(once(tg, a + 0, &on), a));
        CHECK(once(tg, a + 0, &off).is_null());
    }
}

TEST_CASE("the escape hatch: code computes the replacement or declines") {
    UOp a = var("a", 0, 10);
    // A declining rule does not fire; the next rule gets its turn.
    const auto t = compile(rules(decline, add_zero));
    const CompiledRule* which = nullptr;
    auto r = t.rewrite_once(a + 0, nullptr, &which);
    REQUIRE(r);
    CHECK(r->same(a));
    REQUIRE(which != nullptr);
    CHECK(which->text() == "x + 0 -> x");
    CHECK(once(t, a + 1).is_null());
    // graph_rewrite with only a declining rule leaves the graph as it is.
    UOp e = (a + 1) * (a + 2);
    CHECK(tempura::graph_rewrite(e, compile(rules(decline))).same(e));

    // Code may return a UOp rather than an optional.
    const auto t2 = compile(rules(double_to_add));
    CHECK(same(once(t2, a * 2), a + a));
    CHECK(same(once(t2, 2 * a), a + a));
    CHECK(once(t2, a * 3).is_null());

    // Code sees the matched root and the context.
    static constexpr auto count_and_fold = rule(c0 + c1, [](Match& m) -> std::optional<UOp> {
        ++m.context<int>();
        if (m.root->op() != Op::Add) return std::nullopt;
        return UOp::index(m[c0].const_value() * 10 + m[c1].const_value());
    });
    const auto t3 = compile(rules(count_and_fold));
    int calls = 0;
    CHECK(same(once(t3, UOp::index(1) + UOp::index(2), &calls), UOp::index(12)));
    CHECK(calls == 1);
    // Declining in the first operand order tries the second.
    static constexpr auto only_swapped = rule(x + y, [](Match& m) -> std::optional<UOp> {
        if (!m[x].is_const()) return std::nullopt;
        return m[y] - m[x];
    });
    const auto t4 = compile(rules(only_swapped));
    CHECK(same(once(t4, a + 5), a - 5));
}

TEST_CASE("groups compose and keep declaration order: the first matching rule wins") {
    UOp a = var("a", 0, 10);
    static constexpr auto any_add = rule(x + y, 42).named("any-add");
    static constexpr auto group_a = rules(named_add_zero);
    const auto first = compile(rules(group_a, any_add));
    const auto last = compile(rules(any_add, group_a));
    const CompiledRule* which = nullptr;
    CHECK(same(first.rewrite_once(a + 0, nullptr, &which).value(), a));
    CHECK(std::string(which->label) == "add-zero");
    CHECK(same(first.rewrite_once(a + 1, nullptr, &which).value(), UOp::index(42)));
    CHECK(std::string(which->label) == "any-add");
    CHECK(same(last.rewrite_once(a + 0, nullptr, &which).value(), UOp::index(42)));
    CHECK(std::string(which->label) == "any-add");

    // A flattened composition lists its rules in order.
    const auto t = compile(nested);
    REQUIRE(t.size() == 6);
    CHECK(t.dump() == "x + 0 -> x\n"
                      "x * 0 -> 0 if is_int(x)\n"
                      "x * 1 -> x\n"
                      "x / x -> 1\n"
                      "x + 0 -> x\n"
                      "x * 0 -> 0 if is_int(x)\n");
    // Tables chain: the first one's rules come first.
    const auto t_any = compile(rules(any_add));
    const auto t_a = compile(group_a);
    const RuleTable sum = t_any.then(t_a);
    CHECK(same(once(sum, a + 0), UOp::index(42)));
    const RuleTable sum2 = t_a.then(t_any);
    CHECK(same(once(sum2, a + 0), a));
    CHECK(sum2.size() == 2);
    CHECK(sum2.dump() == "add-zero: x + 0 -> x\nany-add: x + y -> 42\n");
}

TEST_CASE("the table is indexed by root op") {
    // The same group compiled at run time and frozen at compile time gives the same table.
    const auto dyn = compile(indexed);
    for (const RuleTable* t : {static_cast<const RuleTable*>(&dyn), &kIndexed}) {
        CHECK(t->size() == 6);
        REQUIRE(t->for_op(Op::Add).size() == 3);
        CHECK(t->for_op(Op::Add)[0].text() == "x + 0 -> x");
        CHECK(t->for_op(Op::Add)[1].text() == "c0 + c1 -> fold(c0 + c1)");
        CHECK(t->for_op(Op::Add)[2].text() == "wild: x -> <code>");
        REQUIRE(t->for_op(Op::Mul).size() == 2);
        CHECK(t->for_op(Op::Mul)[0].text() == "x * 1 -> x");
        CHECK(t->for_op(Op::Sub).size() == 2);
        CHECK(t->for_op(Op::Const).size() == 2); // the wildcard rule and c0
        CHECK(t->for_op(Op::Const)[1].text() == "c0 -> <code>");
        CHECK(t->for_op(Op::Where).size() == 1);
        CHECK(t->for_op(Op::Sink).size() == 1);
        CHECK(t->for_op(Op::Idiv).size() == 1);
        // all(): each rule once, in declaration order.
        REQUIRE(t->all().size() == 6);
        CHECK(t->all()[3].text() == "wild: x -> <code>");
        CHECK(t->all()[4].text() == "x - x -> 0");
        CHECK(same(t->rewrite_once(UOp::index(3) + UOp::index(4), nullptr).value(), UOp::index(7)));
    }
}

TEST_CASE("early reject on the children's ops") {
    UOp a = var("a", 0, 10), b = var("b", 0, 10);
    const auto t = compile(rules(reassoc));
    REQUIRE(t.for_op(Op::Add).size() == 1);
    const CompiledRule& r = t.for_op(Op::Add)[0];
    CHECK(r.nchild == 2);
    CHECK(r.child_op[0] == static_cast<int>(Op::Add));
    CHECK(r.child_op[1] == static_cast<int>(Op::Const));
    CHECK(r.child_op[2] == -1);
    CHECK(r.swap);
    CHECK(r.may_match((a + 3) + 4));
    CHECK(r.may_match(4 + (a + 3)));
    CHECK(r.may_match((a + b) + 4)); // only ops are checked, then matching decides
    CHECK_FALSE(r.may_match(a + 4));
    CHECK_FALSE(r.may_match((a * 3) + 4));
    CHECK_FALSE(r.may_match((a + 3) + b));

    static constexpr auto sub = rule((x + c0) - c1, x + fold(c0 - c1));
    const auto ts = compile(rules(sub));
    const CompiledRule& s = first(ts.for_op(Op::Sub));
    CHECK_FALSE(s.swap);
    CHECK(s.may_match((a + 3) - 4));
    CHECK_FALSE(s.may_match(4 - (a + 3)));

    const auto tz = compile(rules(add_zero));
    const CompiledRule& z = tz.for_op(Op::Add)[0];
    CHECK(z.nchild == 2);
    CHECK(z.child_op[0] == -1);
    CHECK(z.child_op[1] == static_cast<int>(Op::Const));
    CHECK(z.may_match(a + 0));
    CHECK(z.may_match(0 + a));
    CHECK(z.may_match(a + 5));
    CHECK_FALSE(z.may_match(a + b));

    const auto tw = compile(rules(where_same, decline));
    const CompiledRule& wr = tw.for_op(Op::Where)[0];
    CHECK(wr.nchild == 3);
    CHECK(wr.child_op[0] == -1);
    CHECK(wr.child_op[2] == -1);
    CHECK_FALSE(wr.swap);
    UOp cmp = a < 5;
    CHECK(same(once(tw, tempura::where(cmp, b, b)), b));
    CHECK(once(tw, tempura::where(cmp, a, b)).is_null());

    static constexpr auto wild = rule(x, x + 0);
    const auto tany = compile(rules(wild));
    const CompiledRule& any = first(tany.for_op(Op::Mul));
    CHECK(any.nchild == 0);
    CHECK(any.may_match(a * b));
    CHECK(any.may_match(a));
}

TEST_CASE("CompiledRule::text prints the rule as written") {
    auto text_of = [](const auto& r) { return first(compile(rules(r)).all()).text(); };
    CHECK(text_of(add_zero) == "x + 0 -> x");
    CHECK(text_of(reassoc) == "(x + c0) + c1 -> x + fold(c0 + c1)");
    CHECK(text_of(fold_add) == "c0 + c1 -> fold(c0 + c1)");
    CHECK(text_of(div_self) == "x / x -> 1");
    CHECK(text_of(mod_multiple) == "x % c0 -> 0 if is_multiple_of(x, c0)");
    CHECK(text_of(max_nonneg) == "maximum(x, 0) -> x if nonneg(x)");
    CHECK(text_of(where_same) == "where(x, y, y) -> y");
    CHECK(text_of(named_add_zero) == "add-zero: x + 0 -> x");
    CHECK(text_of(double_to_add) == "x * 2 -> <code>");
    CHECK(text_of(const_left) == "x + y -> y if <code>");
    CHECK(text_of(rule(x / y, 0, nonneg(x) && always_less(x, y))) ==
          "x / y -> 0 if nonneg(x) && always_less(x, y)");
    CHECK(text_of(rule(x + (y + z), (x + y) + z)) == "x + (y + z) -> (x + y) + z");
    CHECK(text_of(rule(x * y + w, w)) == "(x * y) + w -> w");
    CHECK(text_of(rule(x + -1, x - 1)) == "x + -1 -> x - 1");
    CHECK(text_of(rule(-(x + y), -x - y)) == "-(x + y) -> -x - y");
    CHECK(text_of(rule(!(x < y), y < x + 1)) == "!(x < y) -> y < (x + 1)");
    CHECK(text_of(rule(op<Op::Load>(x), x)) == "load(x) -> x");
    CHECK(text_of(rule(op<Op::Sink>(x, y), y)) == "sink(x, y) -> y");
    CHECK(text_of(rule(maximum(x, y), maximum(y, x))) == "maximum(x, y) -> maximum(y, x)");
    CHECK(text_of(rule((x == y) != 0, x == y)) == "(x == y) != 0 -> x == y");
    // A negation of a negation should read as one, not as C++'s pre-decrement.
    const std::string neg_neg = text_of(rule(-(-x), x));
    CAPTURE(neg_neg);
    CHECK(neg_neg == "-(-x) -> x");
}

TEST_CASE("rule terms are walkable") {
    const auto t = compile(rules(reassoc, mod_multiple, add_zero, double_to_add));
    REQUIRE(t.all().size() == 4);
    const CompiledRule& r = t.all()[0];
    const RuleTerms terms = r.terms(r.rule);
    using K = Term::Kind;

    const Term& lhs = terms.lhs;
    CHECK(lhs.kind == K::Node);
    CHECK(lhs.op == Op::Add);
    REQUIRE(lhs.children.size() == 2);
    const Term& inner = lhs.children[0];
    CHECK(inner.kind == K::Node);
    CHECK(inner.op == Op::Add);
    REQUIRE(inner.children.size() == 2);
    CHECK(inner.children[0].kind == K::Wildcard);
    CHECK(inner.children[0].slot == 0);
    CHECK(inner.children[0].name == "x");
    CHECK(inner.children[1].kind == K::ConstWildcard);
    CHECK(inner.children[1].slot == 4);
    CHECK(inner.children[1].name == "c0");
    CHECK(lhs.children[1].kind == K::ConstWildcard);
    CHECK(lhs.children[1].slot == 5);
    CHECK(lhs.children[1].name == "c1");
    CHECK(to_string(lhs) == "(x + c0) + c1");

    const Term& rhs = terms.rhs;
    CHECK(rhs.kind == K::Node);
    CHECK(rhs.op == Op::Add);
    REQUIRE(rhs.children.size() == 2);
    CHECK(rhs.children[0].kind == K::Wildcard);
    const Term& f = rhs.children[1];
    CHECK(f.kind == K::Fold);
    CHECK(f.name == "fold");
    REQUIRE(f.children.size() == 1);
    CHECK(f.children[0].kind == K::Node);
    CHECK(f.children[0].op == Op::Add);
    CHECK(to_string(f) == "fold(c0 + c1)");

    CHECK(terms.pred.kind == K::Predicate);
    CHECK(terms.pred.name == "true");
    CHECK(terms.pred.children.empty());

    // The wildcards a term uses, by walking it.
    std::set<int> slots;
    auto walk = [&](auto&& self, const Term& term) -> void {
        if (term.kind == K::Wildcard || term.kind == K::ConstWildcard) slots.insert(term.slot);
        for (const Term& c : term.children) self(self, c);
    };
    walk(walk, lhs);
    CHECK(slots == std::set<int>{0, 4, 5});

    const RuleTerms mod = t.all()[1].terms(t.all()[1].rule);
    CHECK(mod.lhs.op == Op::Mod);
    CHECK(mod.rhs.kind == K::Literal);
    CHECK(mod.rhs.value == 0);
    CHECK(mod.pred.kind == K::Predicate);
    CHECK(mod.pred.name == "is_multiple_of");
    REQUIRE(mod.pred.children.size() == 2);
    CHECK(mod.pred.children[0].slot == 0);
    CHECK(mod.pred.children[1].slot == 4);

    const RuleTerms az = t.all()[2].terms(t.all()[2].rule);
    CHECK(az.lhs.children.at(1).kind == K::Literal);
    CHECK(az.lhs.children.at(1).value == 0);

    const RuleTerms code = t.all()[3].terms(t.all()[3].rule);
    CHECK(code.rhs.kind == K::Code);
    CHECK(code.rhs.name == "code");
}
