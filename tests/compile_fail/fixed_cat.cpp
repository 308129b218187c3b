// EXPECT: cat: shapes [2, 3] and [2, 4] differ outside axis 0
// Concatenating along axis 0 needs the same dims on every other axis.
#include <tempura/tempura.hpp>

int main() {
    const auto a = tempura::FixedTensor<float, 2, 3>::zeros();
    const auto b = tempura::FixedTensor<float, 2, 4>::zeros();
    const auto c = tempura::cat<0>(a, b);
    return static_cast<int>(c.numel());
}
