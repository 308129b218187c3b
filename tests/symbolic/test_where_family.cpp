// The WHERE family of the simplifier: exact results for each form, and the simplified expression
// equal to the original at every point of its variables' ranges.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "tempura/symbolic/eval.hpp"
#include "tempura/symbolic/simplify.hpp"

namespace {

using tempura::UOp;

// simplify(e) renders as `want` and agrees with e for s in [0, 10], x in [-10, 10], a, b in [0, 7].
void check(const UOp& e, const std::string& want) {
    const UOp s = tempura::simplify(e);
    CHECK(s.render() == want);
    for (int64_t sv = 0; sv <= 10; ++sv)
        for (int64_t xv = -10; xv <= 10; xv += 3)
            for (int64_t av = 0; av <= 7; av += 3)
                for (int64_t bv = 0; bv <= 7; bv += 2) {
                    const std::map<std::string, int64_t> at{
                        {"s", sv}, {"x", xv}, {"a", av}, {"b", bv}};
                    REQUIRE(tempura::evaluate(s, at) == tempura::evaluate(e, at));
                }
}

} // namespace

TEST_CASE("where family: bool branches, nesting, implied and negated conditions") {
    const UOp s = UOp::variable("s", 0, 10), x = UOp::variable("x", -10, 10);
    const UOp a = UOp::variable("a", 0, 7), b = UOp::variable("b", 0, 7);
    const UOp c = s < 5;
    check(where(c, UOp::boolean(true), UOp::boolean(false)), "s < 5");
    check(where(c, UOp::boolean(false), UOp::boolean(true)), "!(s < 5)");
    check(where(c, where(c, a, b), x), "where(s < 5, a, x)");
    check(where(c, x, where(c, a, b)), "where(s < 5, x, b)");
    check(where(s < 5, where(s < 6, a, b), b), "where(s < 5, a, b)");
    check(where(s < 5, a, where(s < 3, b, x)), "where(s < 5, a, x)");
    check(where(c, where(!c, a, b), x), "where(s < 5, b, x)");
    check(where(s < 5, a, where(4 < s, b, x)), "where(s < 5, a, b)");
    check(where(s < 5, where(4 < s, a, b), x), "where(s < 5, b, x)");
}

TEST_CASE("where family: closure folding and combining through + and max") {
    const UOp s = UOp::variable("s", 0, 10), x = UOp::variable("x", -10, 10);
    const UOp a = UOp::variable("a", 0, 7), b = UOp::variable("b", 0, 7);
    const UOp c = s < 5;
    check(where(x < 5, where(x < 5, -x, x) * 2, x), "where(x < 5, x * -2, x)");
    check(where(c, a, where(c, b, x) + 1), "where(s < 5, a, x + 1)");
    check(where(c, a, 0) + where(c, b, 1), "where(s < 5, a + b, 1)");
    check(where(c, 0, b) + where(c, a, 0), "where(s < 5, a, b)");
    check(where(c, 2, a) + where(c, 3, b), "where(s < 5, 5, a + b)");
    check(maximum(where(c, a, 0), where(c, b, 3)), "where(s < 5, max(a, b), 3)");
    check(maximum(where(c, 1, a), where(c, 4, b)), "where(s < 5, 4, max(a, b))");
}
