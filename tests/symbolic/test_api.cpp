// Unit tests of the public symbolic API: construction, hash-consing, evaluate (C semantics and
// errors), bounds, node_count, render/tree, and a few simplify identities.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <tempura/tempura.hpp>

namespace {

using tempura::UOp;
using Env = std::map<std::string, int64_t>;

static_assert(std::is_base_of_v<std::runtime_error, tempura::Error>,
              "tempura::Error must be a std::runtime_error");

// The message of the tempura::Error that evaluate throws, or "" (and a failed check) if none is
// thrown.
std::string evaluate_error(const UOp& u, const Env& env) {
    try {
        int64_t v = tempura::evaluate(u, env);
        FAIL_CHECK("evaluate did not throw; it returned " << v);
    } catch (const tempura::Error& e) {
        return e.what();
    }
    return "";
}

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

} // namespace

TEST_CASE("UOp::variable, index and boolean carry their values as bounds") {
    UOp x = UOp::variable("x", 0, 10);
    CHECK(x.vmin() == 0);
    CHECK(x.vmax() == 10);
    UOp n = UOp::variable("n", -7, -3);
    CHECK(n.vmin() == -7);
    CHECK(n.vmax() == -3);

    UOp c = UOp::index(5);
    CHECK(c.vmin() == 5);
    CHECK(c.vmax() == 5);
    UOp m = UOp::index(-4);
    CHECK(m.vmin() == -4);
    CHECK(m.vmax() == -4);

    UOp t = UOp::boolean(true), f = UOp::boolean(false);
    CHECK(t.vmin() == 1);
    CHECK(t.vmax() == 1);
    CHECK(f.vmin() == 0);
    CHECK(f.vmax() == 0);

    CHECK(tempura::evaluate(x, Env{{"x", 7}}) == 7);
    CHECK(tempura::evaluate(c, Env{}) == 5);
    CHECK(tempura::evaluate(m, Env{}) == -4);
    CHECK(tempura::evaluate(t, Env{}) == 1);
    CHECK(tempura::evaluate(f, Env{}) == 0);
}

TEST_CASE("hash-consing: the same node built twice is the same node") {
    UOp x = UOp::variable("x", 0, 10), y = UOp::variable("y", -5, 5);
    CHECK(x.same(UOp::variable("x", 0, 10)));
    CHECK_FALSE(x.same(y));
    CHECK_FALSE(x.same(UOp::variable("x", 0, 11))); // the bounds are part of the variable

    CHECK(UOp::index(5).same(UOp::index(5)));
    CHECK_FALSE(UOp::index(5).same(UOp::index(6)));
    CHECK(UOp::boolean(true).same(UOp::boolean(true)));
    CHECK_FALSE(UOp::boolean(true).same(UOp::boolean(false)));
    // Index and Bool constants differ by dtype even where the value is the same.
    CHECK_FALSE(UOp::index(1).same(UOp::boolean(true)));
    CHECK_FALSE(UOp::index(0).same(UOp::boolean(false)));

    CHECK((x + 3).same(x + 3));
    CHECK((x + 3).same(x + UOp::index(3)));
    CHECK(((x + 3) * y).same((x + 3) * y));
    CHECK((3 + x).same(3 + x));
    CHECK(((x / 4) % 3).same((x / 4) % 3));
    CHECK(tempura::where(x < 5, x, y).same(tempura::where(x < 5, x, y)));
    CHECK(tempura::maximum(x, y).same(tempura::maximum(x, y)));
    CHECK_FALSE((x + 3).same(x + 4));
    CHECK_FALSE((x / 3).same(x % 3));

    UOp copy = x + 3;
    UOp other = copy;
    CHECK(other.same(copy));
}

TEST_CASE("operator== and operator!= build comparison nodes, not bools") {
    UOp x = UOp::variable("x", 0, 10), y = UOp::variable("y", 0, 10);
    UOp eq = (x == y);
    UOp ne = (x != y);
    CHECK(eq.same(x == y));
    CHECK_FALSE(eq.same(ne));
    CHECK(tempura::evaluate(eq, Env{{"x", 2}, {"y", 2}}) == 1);
    CHECK(tempura::evaluate(eq, Env{{"x", 2}, {"y", 3}}) == 0);
    CHECK(tempura::evaluate(ne, Env{{"x", 2}, {"y", 2}}) == 0);
    CHECK(tempura::evaluate(ne, Env{{"x", 2}, {"y", 3}}) == 1);
}

// `x == 4`, `4 == x`, `x != 4` and `4 != x` are part of the public API (int64_t on either side).
// They are checked through a template so that, if the overloads are ambiguous (C++20 also tries
// the reversed `4 == x` for `x == 4`), this reports a failed check instead of breaking the build
// of every test in this directory.
template <class U>
void check_mixed_equality(const U& x) {
    constexpr bool with_int64 = requires(const U& a, int64_t b) {
        a == b;
        b == a;
        a != b;
        b != a;
    };
    constexpr bool with_int = requires(const U& a, int b) {
        a == b;
        b == a;
        a != b;
        b != a;
    };
    CHECK_MESSAGE(with_int64, "UOp == int64_t, int64_t == UOp, UOp != int64_t or int64_t != UOp "
                              "does not compile (ambiguous with the reversed C++20 candidates?)");
    CHECK_MESSAGE(with_int, "UOp == 4 (an int literal) or 4 != UOp does not compile");
    if constexpr (with_int64 && with_int) {
        CHECK(tempura::evaluate(x == 4, Env{{"x", 4}}) == 1);
        CHECK(tempura::evaluate(x == 4, Env{{"x", 5}}) == 0);
        CHECK(tempura::evaluate(4 == x, Env{{"x", 4}}) == 1);
        CHECK(tempura::evaluate(x != int64_t{4}, Env{{"x", 4}}) == 0);
        CHECK(tempura::evaluate(4 != x, Env{{"x", 4}}) == 0);
        CHECK(tempura::evaluate(4 != x, Env{{"x", 3}}) == 1);
        CHECK((x == 4).same(x == UOp::index(4)));
    }
}

TEST_CASE("operator== and operator!= with an integer on either side") {
    check_mixed_equality(UOp::variable("x", 0, 10));
}

TEST_CASE("UOp::sink") {
    UOp x = UOp::variable("x", 0, 10), y = UOp::variable("y", 0, 10);
    UOp s = UOp::sink({x + 1, y});
    CHECK(s.same(UOp::sink({x + 1, y})));
    CHECK_FALSE(s.same(UOp::sink({y, x + 1})));
    CHECK(s.node_count() == 5); // x, 1, x + 1, y, sink
}

TEST_CASE("evaluate follows C semantics: / truncates toward zero, % takes the dividend's sign") {
    // Constants.
    CHECK(tempura::evaluate(UOp::index(-7) / UOp::index(2), Env{}) == -3);
    CHECK(tempura::evaluate(UOp::index(-7) % UOp::index(2), Env{}) == -1);
    CHECK(tempura::evaluate(UOp::index(7) / UOp::index(-2), Env{}) == -3);
    CHECK(tempura::evaluate(UOp::index(7) % UOp::index(-2), Env{}) == 1);
    CHECK(tempura::evaluate(UOp::index(-7) / UOp::index(-2), Env{}) == 3);
    CHECK(tempura::evaluate(UOp::index(-7) % UOp::index(-2), Env{}) == -1);

    // Variables, so nothing can be folded at construction.
    UOp a = UOp::variable("a", -100, 100), b = UOp::variable("b", -100, 100);
    CHECK(tempura::evaluate(a / b, Env{{"a", -7}, {"b", 2}}) == -3);
    CHECK(tempura::evaluate(a % b, Env{{"a", -7}, {"b", 2}}) == -1);
    CHECK(tempura::evaluate(a / b, Env{{"a", 7}, {"b", -2}}) == -3);
    CHECK(tempura::evaluate(a % b, Env{{"a", 7}, {"b", -2}}) == 1);
    CHECK(tempura::evaluate(a / b, Env{{"a", -7}, {"b", -2}}) == 3);
    CHECK(tempura::evaluate(a % b, Env{{"a", -7}, {"b", -2}}) == -1);
    CHECK(tempura::evaluate(a / b, Env{{"a", 7}, {"b", 2}}) == 3);
    CHECK(tempura::evaluate(a % b, Env{{"a", 7}, {"b", 2}}) == 1);

    // int64_t on either side.
    CHECK(tempura::evaluate(a / 2, Env{{"a", -7}}) == -3);
    CHECK(tempura::evaluate(a % 2, Env{{"a", -7}}) == -1);
    CHECK(tempura::evaluate(a / -2, Env{{"a", 7}}) == -3);
    CHECK(tempura::evaluate(a % -2, Env{{"a", 7}}) == 1);
    CHECK(tempura::evaluate(-7 / b, Env{{"b", 2}}) == -3);
    CHECK(tempura::evaluate(-7 % b, Env{{"b", 2}}) == -1);
}

TEST_CASE("evaluate of every operator") {
    UOp x = UOp::variable("x", -20, 20), y = UOp::variable("y", -20, 20);
    Env e{{"x", 6}, {"y", -4}};
    CHECK(tempura::evaluate(x + y, e) == 2);
    CHECK(tempura::evaluate(x - y, e) == 10);
    CHECK(tempura::evaluate(x * y, e) == -24);
    CHECK(tempura::evaluate(-x, e) == -6);
    CHECK(tempura::evaluate(-(-y), e) == -4);
    CHECK(tempura::evaluate(x + 3, e) == 9);
    CHECK(tempura::evaluate(3 - x, e) == -3);
    CHECK(tempura::evaluate(x - 3, e) == 3);
    CHECK(tempura::evaluate(2 * y, e) == -8);
    CHECK(tempura::evaluate(x < y, e) == 0);
    CHECK(tempura::evaluate(y < x, e) == 1);
    CHECK(tempura::evaluate(x < 6, e) == 0);
    CHECK(tempura::evaluate(5 < x, e) == 1);
    CHECK(tempura::evaluate((y < x) & (x < 7), e) == 1);
    CHECK(tempura::evaluate((y < x) & (x < 6), e) == 0);
    CHECK(tempura::evaluate((x < y) | (x < 6), e) == 0);
    CHECK(tempura::evaluate((x < y) | (x < 7), e) == 1);
    CHECK(tempura::evaluate((y < x) ^ (x < 7), e) == 0);
    CHECK(tempura::evaluate((y < x) ^ (x < 6), e) == 1);
    CHECK(tempura::evaluate(UOp::boolean(true) & UOp::boolean(false), Env{}) == 0);
    CHECK(tempura::evaluate(UOp::boolean(true) | UOp::boolean(false), Env{}) == 1);
    CHECK(tempura::evaluate(UOp::boolean(true) ^ UOp::boolean(true), Env{}) == 0);
    CHECK(tempura::evaluate(tempura::where(x < y, x, y), e) == -4);
    CHECK(tempura::evaluate(tempura::where(y < x, x, y), e) == 6);
    CHECK(tempura::evaluate(tempura::maximum(x, y), e) == 6);
    CHECK(tempura::evaluate(tempura::maximum(y, UOp::index(-10)), e) == -4);
    CHECK(tempura::evaluate((x + y) * (x - y), e) == 20);
}

TEST_CASE("evaluate throws tempura::Error on division by zero") {
    UOp a = UOp::variable("a", -10, 10), b = UOp::variable("b", 0, 5);
    CHECK_THROWS_AS(tempura::evaluate(a / b, Env{{"a", 3}, {"b", 0}}), tempura::Error);
    CHECK_THROWS_AS(tempura::evaluate(a % b, Env{{"a", 3}, {"b", 0}}), tempura::Error);
    CHECK_THROWS_AS(tempura::evaluate(a / b, Env{{"a", 0}, {"b", 0}}), tempura::Error);
    CHECK(tempura::evaluate(a / b, Env{{"a", 3}, {"b", 1}}) == 3);
}

TEST_CASE("evaluate throws tempura::Error naming a missing variable") {
    UOp a = UOp::variable("a", 0, 10);
    UOp q = UOp::variable("missing_quux", 0, 10);
    std::string msg = evaluate_error(a + q, Env{{"a", 1}});
    INFO("message: " << msg);
    CHECK(contains(msg, "missing_quux"));
    msg = evaluate_error(q, Env{});
    CHECK(contains(msg, "missing_quux"));
}

TEST_CASE("vmin/vmax of basic operations") {
    UOp x = UOp::variable("x", -3, 2), y = UOp::variable("y", -5, 4);
    CHECK((x + y).vmin() == -8);
    CHECK((x + y).vmax() == 6);
    CHECK((x - y).vmin() == -7);
    CHECK((x - y).vmax() == 7);
    CHECK((-x).vmin() == -2);
    CHECK((-x).vmax() == 3);
    CHECK((x * y).vmin() == -12);
    CHECK((x * y).vmax() == 15);
    CHECK((x * 3).vmin() == -9);
    CHECK((x * 3).vmax() == 6);
    CHECK((x * -3).vmin() == -6);
    CHECK((x * -3).vmax() == 9);
    CHECK((x + 10).vmin() == 7);
    CHECK((x + 10).vmax() == 12);
    CHECK(tempura::maximum(x, y).vmin() == -3);
    CHECK(tempura::maximum(x, y).vmax() == 4);

    UOp z = UOp::variable("z", -7, 7);
    CHECK((z % 5).vmin() == -4); // C: the remainder takes the dividend's sign
    CHECK((z % 5).vmax() == 4);
    CHECK((z / 3).vmin() == -2); // C: truncation toward zero
    CHECK((z / 3).vmax() == 2);
    CHECK((z / -3).vmin() == -2);
    CHECK((z / -3).vmax() == 2);
    UOp w = UOp::variable("w", 0, 100);
    CHECK((w % 5).vmin() == 0);
    CHECK((w % 5).vmax() == 4);
    CHECK((w / 3).vmin() == 0);
    CHECK((w / 3).vmax() == 33);
    UOp u = UOp::variable("u", -100, -1);
    CHECK((u % 5).vmin() == -4);
    CHECK((u % 5).vmax() == 0);
    CHECK((u / 3).vmin() == -33);
    CHECK((u / 3).vmax() == 0);

    UOp y2 = UOp::variable("y2", -2, 3);
    CHECK(tempura::maximum(z, y2).vmin() == -2);
    CHECK(tempura::maximum(z, y2).vmax() == 7);

    // where: the union of the branches' ranges (the condition is independent of them).
    UOp v = UOp::variable("v", 0, 9);
    UOp wh = tempura::where(v < 3, x, y);
    CHECK(wh.vmin() == -5);
    CHECK(wh.vmax() == 4);

    // Comparisons and boolean operators are bools: within [0, 1].
    for (const UOp& b :
         {x < y, x == y, x != y, (x < y) & (v < 3), (x < y) | (v < 3), (x < y) ^ (v < 3)}) {
        CHECK(b.vmin() >= 0);
        CHECK(b.vmax() <= 1);
        CHECK(b.vmin() <= b.vmax());
    }
}

TEST_CASE("node_count counts distinct reachable nodes") {
    UOp x = UOp::variable("x", 0, 10), y = UOp::variable("y", 0, 10);
    CHECK(x.node_count() == 1);
    CHECK(UOp::index(7).node_count() == 1);
    CHECK(UOp::boolean(true).node_count() == 1);
    CHECK((x + 3).node_count() == 3);
    CHECK((x + y).node_count() == 3);
    CHECK((x + x).node_count() == 2);
    CHECK(((x + 3) * (x + 3)).node_count() == 4);
    CHECK(((x + 3) * (y + 3)).node_count() == 6); // x, y, 3, x + 3, y + 3, *
    CHECK(tempura::where(x < y, x, y).node_count() == 4);
    CHECK(tempura::maximum(x, y).node_count() == 3);
}

TEST_CASE("render and tree") {
    UOp x = UOp::variable("x", 0, 10);
    CHECK((x + 3).render() == "x + 3");
    CHECK(contains(x.render(), "x"));

    std::string t = (x + 3).tree();
    INFO("tree:\n" << t);
    CHECK(contains(t, "[0]"));
    CHECK(contains(t, "[1]"));
    CHECK(contains(t, "[2]"));
    CHECK(contains(t, "x"));

    std::string shared = ((x + 3) * (x + 3)).tree();
    INFO("tree:\n" << shared);
    CHECK(contains(shared, "[0]"));
}

TEST_CASE("simplify: basic identities") {
    UOp x = UOp::variable("x", 0, 10);
    CHECK(tempura::simplify(x).same(x));
    CHECK(tempura::simplify(x + 0).same(x));
    CHECK(tempura::simplify(x * 1).same(x));
    CHECK(tempura::simplify(x - x).same(UOp::index(0)));
    CHECK(tempura::simplify(UOp::index(3) + UOp::index(4)).same(UOp::index(7)));
    CHECK(tempura::simplify(UOp::index(5) < UOp::index(7)).same(UOp::boolean(true)));
    CHECK(tempura::simplify(x < 11).same(UOp::boolean(true)));
    CHECK(tempura::simplify(x < 0).same(UOp::boolean(false)));
}

TEST_CASE("simplify reaches a fixpoint: simplifying its result changes nothing") {
    UOp x = UOp::variable("x", 0, 100), y = UOp::variable("y", 0, 7), z = UOp::variable("z", -9, 9);
    std::vector<UOp> exprs = {
        x * 3 + x * 5,
        (x + 3) + 5,
        (x * 4 + 3) / 4,
        (x * 8 + y) % 8,
        (x / 4) * 4 + x % 4,
        ((x * 6 + y * 9 + 5) / 3) % 7 + (x * 6 + y * 9 + 5) % 3,
        tempura::where(z < 0, -z, z) + tempura::maximum(z, x),
        (x % 16) / 4,
        (z * 2 + 1) / 2,
        (z + 1) % 3,
    };
    for (const UOp& e : exprs) {
        UOp s = tempura::simplify(e);
        UOp s2 = tempura::simplify(s);
        INFO("e = " << e.render() << "; simplify(e) = " << s.render()
                    << "; simplify(simplify(e)) = " << s2.render());
        CHECK(s2.same(s));
    }
}

TEST_CASE("hash-consing is safe and consistent across threads") {
    UOp v = UOp::variable("threads_v", 0, 1000);
    constexpr int kThreads = 4, kNodes = 2000;
    std::vector<std::vector<UOp>> built(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&built, &v, t] {
            std::vector<UOp>& out = built[static_cast<size_t>(t)];
            out.reserve(kNodes);
            // Each thread builds the same nodes, in a different order per thread.
            for (int k = 0; k < kNodes; ++k) {
                int i = (t % 2 == 0) ? k : kNodes - 1 - k;
                out.push_back((v + i) * (i % 7 + 2));
            }
        });
    }
    for (std::thread& th : threads) th.join();
    int64_t differ = 0;
    for (int t = 1; t < kThreads; ++t) {
        for (int k = 0; k < kNodes; ++k) {
            int i0 = k, it = (t % 2 == 0) ? k : kNodes - 1 - k;
            // built[0][i0] holds i = k; built[t] holds i = k at index it.
            if (!built[static_cast<size_t>(t)][static_cast<size_t>(it)].same(
                    built[0][static_cast<size_t>(i0)]))
                ++differ;
        }
    }
    CHECK(differ == 0);
    // And they are the expressions they should be.
    CHECK(tempura::evaluate(built[0][10], Env{{"threads_v", 5}}) == (5 + 10) * (10 % 7 + 2));
    CHECK_FALSE(built[0][10].same(built[0][11]));
}
