// EXPECT: rule: the predicate uses a wildcard that the left-hand side does not bind, so it cannot be evaluated
// The predicate tests `z`, which the left-hand side `x + y` never binds.
#include <tempura/pattern/table.hpp>

namespace {
using namespace tempura::pattern;
inline constexpr auto bad = rule(x + y, x, nonneg(z));
} // namespace

int main() { return bad.label == nullptr ? 0 : 1; }
