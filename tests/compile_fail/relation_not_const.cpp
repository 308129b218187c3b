// EXPECT: pattern: <=, > and >= compare matched constants in a predicate
// `x <= c0` compares a non-constant node: there is no <= op for a pattern to match.
#include <tempura/pattern/table.hpp>

namespace {
using namespace tempura::pattern;
inline constexpr auto bad = rule(x + c0, x, x <= c0);
} // namespace

int main() { return bad.label == nullptr ? 0 : 1; }
