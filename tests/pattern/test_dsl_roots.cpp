// The DSL's roots that match a set of ops (any_of, alu, alu_any, ops_in), plain functions as
// right-hand sides, predicates over constants in the algebra's spelling (c0 <= c1, c0 % c1 == 0)
// and the checked rewrite context.
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include <tempura/pattern/table.hpp>
#include <tempura/rewrite/graph_rewrite.hpp>
#include <tempura/tempura.hpp>

#include "../support.hpp"

namespace dsl_roots_test {

using namespace tempura::pattern;
using tempura::DType;
using tempura::Op;
using tempura::UOp;

// A plain function of the root: the rule's right-hand side.
std::optional<UOp> double_it(const UOp& root) { return root + root; }
UOp always_seven(const UOp&) { return UOp::index(7); }

// clang-format off
inline constexpr auto add_or_mul_zero = rule(any_of<Op::Add, Op::Mul>(x, 0), 0);  // x+0, x*0 -> 0
inline constexpr auto any_binary_same = rule(alu(x, x), double_it);               // op(x, x) -> 2 op
inline constexpr auto any_alu = rule(alu_any, always_seven);                       // every ALU node
inline constexpr auto min_bound = rule((x < c0) & (x < c1), x < c0, c0 <= c1);    // x<a & x<b
inline constexpr auto divides_ok = rule((x * c0) + c1, x, c1 % c0 == 0);
inline constexpr auto gt = rule(x + c0, x, c0 > 5);
inline constexpr auto ge = rule(x + c0, x, c0 >= 5);
// clang-format on

static_assert(decltype(add_or_mul_zero.lhs)::kRootOp == kRootOpSet);
static_assert(decltype(add_or_mul_zero.lhs)::kSet.has(Op::Add));
static_assert(decltype(add_or_mul_zero.lhs)::kSet.has(Op::Mul));
static_assert(!decltype(add_or_mul_zero.lhs)::kSet.has(Op::Sub));
static_assert(decltype(any_alu.lhs)::kSet.has(Op::Where));
static_assert(!decltype(any_alu.lhs)::kSet.has(Op::Load));

TEST_CASE("any_of<ADD, MUL>(x, 0): filed under both ops, commutative orders tried") {
    const auto t = compile(rules(add_or_mul_zero));
    CHECK(t.for_op(Op::Add).size() == 1);
    CHECK(t.for_op(Op::Mul).size() == 1);
    CHECK(t.for_op(Op::Sub).empty());
    const UOp a = UOp::variable("a", 0, 9);
    CHECK(t.rewrite_once(a + 0, {}).value().same(UOp::index(0)));
    CHECK(t.rewrite_once(0 + a, {}).value().same(UOp::index(0)));
    CHECK(t.rewrite_once(a * 0, {}).value().same(UOp::index(0)));
    CHECK_FALSE(t.rewrite_once(a - 0, {}).has_value());
    CHECK_FALSE(t.rewrite_once(a + 1, {}).has_value());
    CHECK(t.all()[0].text() == "any_of<ADD, MUL>(x, 0) -> 0");
}

TEST_CASE("alu(x, x) and alu_any: every ALU op of the op table, nothing else") {
    const auto t = compile(rules(any_binary_same));
    const UOp a = UOp::variable("a", 0, 9);
    CHECK(t.rewrite_once(a * a, {}).value().same((a * a) + (a * a)));
    CHECK(t.rewrite_once(maximum(a, a), {}).value().same(maximum(a, a) + maximum(a, a)));
    CHECK_FALSE(t.rewrite_once(a * 2, {}).has_value());
    CHECK(t.all()[0].text() == "alu(x, x) -> <code>");

    const auto all = compile(rules(any_alu));
    size_t buckets = 0;
    for (size_t i = 0; i < tempura::kNumOps; ++i)
        buckets += !all.for_op(static_cast<Op>(i)).empty();
    size_t alu_ops = 0;
    for (size_t i = 0; i < tempura::kNumOps; ++i) alu_ops += tempura::is_alu(static_cast<Op>(i));
    CHECK(buckets == alu_ops); // not every op: the catch-all is gone
    CHECK(all.rewrite_once(-a, {}).value().same(UOp::index(7)));
    CHECK(all.rewrite_once(where(a < 3, a, a + 1), {}).value().same(UOp::index(7)));
    CHECK_FALSE(all.rewrite_once(a, {}).has_value()); // DEFINE_VAR is no ALU op
    CHECK(all.all()[0].text() == "alu_any -> <code>");
}

TEST_CASE("predicates over constants in the algebra's spelling") {
    const UOp a = UOp::variable("a", -50, 50);
    const auto t = compile(rules(min_bound));
    CHECK(t.rewrite_once((a < 3) & (a < 8), {}).value().same(a < 3));
    CHECK(t.rewrite_once((a < 8) & (a < 3), {}).value().same(a < 3)); // & commutes
    CHECK(t.rewrite_once((a < 4) & (a < 4), {}).has_value());
    CHECK(t.all()[0].text() == "(x < c0) & (x < c1) -> x < c0 if c0 <= c1");

    const auto d = compile(rules(divides_ok));
    CHECK(d.rewrite_once(a * 4 + 12, {}).value().same(a));
    CHECK_FALSE(d.rewrite_once(a * 4 + 10, {}).has_value());
    CHECK(d.all()[0].text() == "(x * c0) + c1 -> x if (c1 % c0) == 0");
    // A fold that is undefined (division by zero) makes the predicate false, not a crash.
    CHECK_FALSE(d.rewrite_once(a * 0 + 10, {}).has_value());

    const auto g = compile(rules(gt)), ge5 = compile(rules(ge));
    CHECK(g.rewrite_once(a + 6, {}).has_value());
    CHECK_FALSE(g.rewrite_once(a + 5, {}).has_value());
    CHECK(ge5.rewrite_once(a + 5, {}).has_value());
    CHECK_FALSE(ge5.rewrite_once(a + 4, {}).has_value());
    CHECK(g.all()[0].text() == "x + c0 -> x if c0 > 5");
}

struct Counter {
    int fired = 0;
};
// SUB, not ADD: a declining rule on a commutative op is tried in both operand orders.
inline constexpr auto count_subs = rule(x - y, [](Match& m) -> std::optional<UOp> {
    ++m.context<Counter>().fired;
    return std::nullopt;
});

TEST_CASE("the rewrite context is typed: the wrong type is an error naming both") {
    const auto t = compile(rules(count_subs));
    const UOp a = UOp::variable("a", 0, 9);
    Counter c;
    tempura::graph_rewrite((a - 1) * (a - 2), t, c);
    CHECK(c.fired == 2);
    tempura::graph_rewrite(a - 3, t, &c);
    CHECK(c.fired == 3);
    int wrong = 0;
    const std::string e = error_of([&] { tempura::graph_rewrite(a - 4, t, wrong); });
    CHECK(e.rfind("[rewrite] a rule asked for a context of type ", 0) == 0);
    CHECK(e.find("but graph_rewrite was given one of type ") != std::string::npos);
    CHECK(error_of([&] { tempura::graph_rewrite(a - 5, t); }).find("was given none") !=
          std::string::npos);
}

} // namespace dsl_roots_test
