// EXPECT: rule: the right-hand side uses a wildcard that the left-hand side does not bind
// `y` appears only on the right: there is nothing to build it from.
#include <tempura/pattern/table.hpp>

namespace {
using namespace tempura::pattern;
inline constexpr auto bad = rule(x + 0, y);
} // namespace

int main() { return bad.label == nullptr ? 0 : 1; }
