// EXPECT: stack: shapes [3] and [2] differ
// Stacked tensors have one shape.
#include <tempura/tempura.hpp>

int main() {
    const auto a = tempura::FixedTensor<float, 3>::zeros();
    const auto b = tempura::FixedTensor<float, 2>::zeros();
    const auto c = tempura::stack<0>(a, b);
    return static_cast<int>(c.numel());
}
