// EXPECT: pattern op<>: the number of operands does not match the op's arity in the op table
// WHERE takes three operands (the op table says so); a pattern that gives it two is a mistake the
// compiler reports with a sentence.
#include <tempura/pattern/table.hpp>

namespace {
using namespace tempura::pattern;
inline constexpr auto bad = rule(op<tempura::Op::Where>(x, y), y);
} // namespace

int main() { return bad.label == nullptr ? 0 : 1; }
