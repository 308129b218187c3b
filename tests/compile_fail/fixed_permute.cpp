// EXPECT: permute: [0, 0] is not a permutation of the 2 axes of [2, 3]
// permute names every axis exactly once.
#include <tempura/tempura.hpp>

int main() {
    const auto a = tempura::FixedTensor<float, 2, 3>::zeros();
    const auto p = a.permute<0, 0>();
    return static_cast<int>(p.numel());
}
