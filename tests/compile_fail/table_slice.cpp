// EXPECT: RuleTable: a table made by compile() owns its rules and cannot be copied
// A view copied out of compile()'s table would point at rules freed with the temporary.
#include <tempura/pattern/table.hpp>

namespace {
using namespace tempura::pattern;
inline constexpr auto add_zero = rule(x + 0, x);
} // namespace

int main() {
    const RuleTable t = compile(rules(add_zero));
    return static_cast<int>(t.size());
}
