// Unit tests of graph_rewrite: top-down and bottom-up order, fixpoint, rebuilding of parents,
// shared subgraphs, the step limit and its error message, and deep graphs.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <tempura/pattern/table.hpp>
#include <tempura/tempura.hpp>

namespace rewrite_test {

using namespace tempura::pattern;
using tempura::graph_rewrite;
using tempura::Op;
using tempura::RewriteOptions;
using tempura::UOp;

inline constexpr auto add_zero = rule(x + 0, x);
inline constexpr auto mul_zero = rule(x * 0, 0);
inline constexpr auto mul_one = rule(x * 1, x);

// Records the node every rule attempt sees (through the context) and never fires.
inline constexpr auto log_visits = rule(x, [](Match& m) -> std::optional<UOp> {
    m.context<std::vector<std::string>>().push_back(m.root->render());
    return std::nullopt;
});

// x + 0 -> x, counting its firings in the context.
inline constexpr auto counted_add_zero = rule(x + 0, [](Match& m) -> std::optional<UOp> {
    ++m.context<int>();
    return m[x];
});

// Loops: a + b -> b + a -> a + b -> ...
inline constexpr auto swap_add = rule(x + y, y + x);

std::string error_of(const UOp& root, const RuleTable& t, RewriteOptions o) {
    try {
        UOp r = graph_rewrite(root, t, nullptr, o);
        return "<no error; result " + r.render() + ">";
    } catch (const tempura::Error& e) {
        return e.what();
    }
}

} // namespace rewrite_test

using namespace rewrite_test;

TEST_CASE("top-down tries a node before its sources; bottom-up after") {
    UOp a = UOp::variable("a", 0, 10), b = UOp::variable("b", 0, 10);
    const UOp e = (a + 1) * b;
    const auto t = compile(rules(log_visits));
    std::vector<std::string> seen;
    CHECK(graph_rewrite(e, t, &seen).same(e));
    CHECK(seen == std::vector<std::string>{"(a + 1) * b", "a + 1", "a", "1", "b"});
    seen.clear();
    CHECK(graph_rewrite(e, t, &seen, RewriteOptions{.bottom_up = true}).same(e));
    CHECK(seen == std::vector<std::string>{"a", "1", "a + 1", "b", "(a + 1) * b"});
}

TEST_CASE("top-down and bottom-up can reach different fixpoints") {
    // (x + 0) + y -> 111 only sees its pattern if the inner x + 0 has not been rewritten yet.
    static constexpr auto outer = rule((x + 0) + y, 111);
    const auto t = compile(rules(outer, add_zero));
    UOp a = UOp::variable("a", 0, 10), b = UOp::variable("b", 0, 10);
    const UOp e = (a + 0) + b;
    CHECK(graph_rewrite(e, t).same(UOp::index(111)));
    CHECK(graph_rewrite(e, t, nullptr, RewriteOptions{.bottom_up = true}).same(a + b));
}

TEST_CASE("fixpoint: results and rebuilt parents are rewritten again") {
    UOp a = UOp::variable("a", 0, 10), b = UOp::variable("b", 0, 10);
    for (bool bottom_up : {false, true}) {
        CAPTURE(bottom_up);
        const RewriteOptions o{.bottom_up = bottom_up};
        // a * 0 -> 0 makes the parent b + 0, which x + 0 -> x then rewrites.
        const auto t = compile(rules(add_zero, mul_zero));
        CHECK(graph_rewrite(b + a * 0, t, nullptr, o).same(b));
        CHECK(graph_rewrite((a * 0 + b) * (b + a * 0), t, nullptr, o).same(b * b));
        // A rule's result is itself rewritten: a * 2 -> a + a -> 77.
        static constexpr auto dbl = rule(x * 2, x + x);
        static constexpr auto twice = rule(x + x, 77);
        const auto t2 = compile(rules(dbl, twice));
        CHECK(graph_rewrite(a * 2, t2, nullptr, o).same(UOp::index(77)));
        CHECK(graph_rewrite(UOp::sink({a * 2, a, b * 2}), t2, nullptr, o)
                  .same(UOp::sink({UOp::index(77), a, UOp::index(77)})));
        // Cascades through several levels: ((a * 1) * 1 + 0) * 1 -> a.
        const auto t3 = compile(rules(add_zero, mul_one));
        CHECK(graph_rewrite(((a * 1) * 1 + 0) * 1, t3, nullptr, o).same(a));
        // Constants folded up a tree.
        static constexpr auto fold_add = rule(c0 + c1, fold(c0 + c1));
        static constexpr auto fold_mul = rule(c0 * c1, fold(c0 * c1));
        const auto t4 = compile(rules(fold_add, fold_mul));
        UOp i = UOp::index(2);
        CHECK(graph_rewrite((i + 3) * (i * 4) + (i + 3), t4, nullptr, o).same(UOp::index(45)));
    }
}

TEST_CASE("parents whose sources changed are rebuilt; untouched graphs come back as they are") {
    UOp a = UOp::variable("a", 0, 10), b = UOp::variable("b", 0, 10);
    const auto t = compile(rules(add_zero));
    for (bool bottom_up : {false, true}) {
        CAPTURE(bottom_up);
        const RewriteOptions o{.bottom_up = bottom_up};
        const UOp root = UOp::sink({(a + 0) * 3, b, tempura::where(a < 5, b + 0, a)});
        const UOp want = UOp::sink({a * 3, b, tempura::where(a < 5, b, a)});
        const UOp got = graph_rewrite(root, t, nullptr, o);
        CHECK(got.same(want));
        CHECK(got.render() == "sink(a * 3, b, where(a < 5, b, a))");
        // Nothing to rewrite: the very same node, with the same sources.
        const UOp clean = UOp::sink({a * 3, b - 1});
        CHECK(graph_rewrite(clean, t, nullptr, o).same(clean));
        // A single node.
        CHECK(graph_rewrite(a, t, nullptr, o).same(a));
        CHECK(graph_rewrite(a + 0, t, nullptr, o).same(a));
    }
}

TEST_CASE("shared subgraphs are rewritten once") {
    UOp a = UOp::variable("a", 0, 10), b = UOp::variable("b", 0, 10);
    const auto t = compile(rules(counted_add_zero));
    for (bool bottom_up : {false, true}) {
        CAPTURE(bottom_up);
        const RewriteOptions o{.bottom_up = bottom_up};
        const UOp s = a + 0; // shared three times
        int fired = 0;
        const UOp got = graph_rewrite(s * s + s, t, &fired, o);
        CHECK(got.same(a * a + a));
        CHECK(fired == 1);
        // A DAG with 2^30 paths to its leaf: still one firing, and quick.
        UOp e = s;
        for (int i = 0; i < 30; ++i) e = e * e;
        fired = 0;
        UOp want = a;
        for (int i = 0; i < 30; ++i) want = want * want;
        CHECK(graph_rewrite(e, t, &fired, o).same(want));
        CHECK(fired == 1);
    }
    // Each distinct node is tried once when nothing fires.
    const auto tl = compile(rules(log_visits));
    const UOp s = a + b;
    const UOp root = s * s + s;
    std::vector<std::string> seen;
    graph_rewrite(root, tl, &seen);
    CHECK(seen.size() == root.node_count());
    CHECK(seen.size() == 5);
}

TEST_CASE("the step limit turns a looping rule set into an error naming the rule and the node") {
    UOp a = UOp::variable("la", 0, 10), b = UOp::variable("lb", 0, 10);
    const int line_ab = __LINE__ + 1;
    const UOp ab = a + b;
    const std::string at_ab =
        " (created at " + std::string(__FILE__) + ":" + std::to_string(line_ab) + ")";
    const size_t live_before = tempura::live_uop_count();

    SUBCASE("a + b -> b + a -> a + b ..., top-down") {
        const auto t = compile(rules(swap_add));
        const std::string msg = error_of(ab, t, RewriteOptions{.max_steps = 1000});
        CHECK(msg.starts_with("[graph_rewrite] exceeded the limit of 1000 rewrite steps"));
        CHECK(msg == "[graph_rewrite] exceeded the limit of 1000 rewrite steps; the rule "
                     "`x + y -> y + x` was firing on ADD node `la + lb`" +
                         at_ab);
        CHECK_THROWS_AS(graph_rewrite(ab, t, nullptr, RewriteOptions{.max_steps = 1000}),
                        tempura::Error);
    }
    SUBCASE("the same, bottom-up, with a named rule") {
        const auto t = compile(rules(swap_add.named("swap")));
        const std::string msg = error_of(ab, t, RewriteOptions{.bottom_up = true, .max_steps = 50});
        CHECK(msg == "[graph_rewrite] exceeded the limit of 50 rewrite steps; the rule "
                     "`swap: x + y -> y + x` was firing on ADD node `la + lb`" +
                         at_ab);
    }
    SUBCASE("x -> x + 0 and x + 0 -> x undo each other") {
        static constexpr auto grow = rule(x, x + 0);
        const auto t = compile(rules(add_zero, grow));
        const int line_c = __LINE__ + 1;
        const UOp c = UOp::variable("lc", 0, 3);
        const std::string msg = error_of(c, t, RewriteOptions{.max_steps = 1000});
        CHECK(msg == "[graph_rewrite] exceeded the limit of 1000 rewrite steps; the rule "
                     "`x -> x + 0` was firing on DEFINE_VAR node `lc` (created at " +
                         std::string(__FILE__) + ":" + std::to_string(line_c) + ")");
    }
    SUBCASE("the default limit is 100,000 steps plus 100 per node of the input") {
        const auto t = compile(rules(swap_add));
        const std::string msg = error_of(ab, t, RewriteOptions{});
        CHECK(msg == "[graph_rewrite] exceeded the limit of 100300 rewrite steps; the rule "
                     "`x + y -> y + x` was firing on ADD node `la + lb`" +
                         at_ab);
    }
    SUBCASE("a rule set that keeps growing the graph") {
        static constexpr auto grow = rule(x, x * 1);
        const auto t = compile(rules(grow));
        const std::string msg = error_of(a, t, RewriteOptions{.max_steps = 10});
        CHECK(msg.starts_with("[graph_rewrite] exceeded the limit of 10 rewrite steps; the rule "
                              "`x -> x * 1` was firing on "));
    }
    SUBCASE("exactly at the limit is fine") {
        // (((a * 1) * 1) * 1): three firings.
        const auto t = compile(rules(mul_one));
        CHECK(graph_rewrite(a * 1 * 1 * 1, t, nullptr, RewriteOptions{.max_steps = 3}).same(a));
        CHECK(error_of(a * 1 * 1 * 1, t, RewriteOptions{.max_steps = 2})
                  .starts_with("[graph_rewrite] exceeded the limit of 2 rewrite steps; the rule "
                               "`x * 1 -> x` was firing on MUL node `la * 1`"));
    }
    // Nothing leaks when the rewrite stops with an error.
    CHECK(tempura::live_uop_count() == live_before);
}

TEST_CASE("deep graphs (100,000 chained nodes) are rewritten without recursion") {
    UOp v = UOp::variable("dv", 0, 10), w = UOp::variable("dw", 0, 10);
    const size_t live_before = tempura::live_uop_count();
    constexpr int kDepth = 100000;
    {
        // Only the innermost node changes; every parent above it is rebuilt.
        UOp e = v + 0, want = v;
        for (int i = 0; i < kDepth; ++i) {
            e = e + w;
            want = want + w;
        }
        REQUIRE(e.node_count() == kDepth + 4); // v, 0, w, v + 0 and the chain
        const auto t = compile(rules(counted_add_zero));
        for (bool bottom_up : {false, true}) {
            CAPTURE(bottom_up);
            int fired = 0;
            const UOp got = graph_rewrite(e, t, &fired, RewriteOptions{.bottom_up = bottom_up});
            CHECK(got.same(want));
            CHECK(fired == 1);
        }
    }
    {
        // Every node fires: ((v * 1) * 1) ... * 1 -> v, 100,000 steps.
        UOp e = v;
        for (int i = 0; i < kDepth; ++i) e = e * 1;
        const auto t = compile(rules(mul_one));
        CHECK(graph_rewrite(e, t).same(v));
        CHECK(graph_rewrite(e, t, nullptr, RewriteOptions{.bottom_up = true}).same(v));
        CHECK(error_of(e, t, RewriteOptions{.max_steps = kDepth - 1})
                  .starts_with("[graph_rewrite] exceeded the limit of 99999 rewrite steps"));
    }
    CHECK(tempura::live_uop_count() == live_before);
}
