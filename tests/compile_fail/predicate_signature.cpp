// EXPECT: rule: the predicate cannot be evaluated: it must be a predicate of the DSL or callable as bool(const Match&)
// A callable predicate receives the Match; one that takes an int cannot be called with it.
#include <tempura/pattern/table.hpp>

namespace {
using namespace tempura::pattern;
inline constexpr auto bad = rule(x + 0, x, [](int v) { return v > 0; });
} // namespace

int main() { return bad.label == nullptr ? 0 : 1; }
