// EXPECT: fold: the expression may use only constant wildcards (c0, c1, c2, c3) and integer literals
// fold() evaluates its expression when the rule fires; `x` is any node, not a number.
#include <tempura/pattern/table.hpp>

namespace {
using namespace tempura::pattern;
inline constexpr auto bad = rule(x + c0, fold(x + c0));
} // namespace

int main() { return bad.label == nullptr ? 0 : 1; }
