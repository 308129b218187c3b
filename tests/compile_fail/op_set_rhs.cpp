// EXPECT: rule: an op set (alu, alu_any, any_of) can only be a left-hand side
// An op set names several ops: a right-hand side built from it would not know which to build.
#include <tempura/pattern/table.hpp>

namespace {
using namespace tempura::pattern;
inline constexpr auto bad = rule(x + y, alu(x, y));
} // namespace

int main() { return bad.label == nullptr ? 0 : 1; }
