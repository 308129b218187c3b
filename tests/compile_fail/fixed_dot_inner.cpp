// EXPECT: dot: inner dimensions differ: [4, 3] @ [2, 5]
// [M, K] @ [K, N] needs the same K on both sides: 3 is not 2.
#include <tempura/tempura.hpp>

int main() {
    const auto a = tempura::FixedTensor<float, 4, 3>::zeros();
    const auto b = tempura::FixedTensor<float, 2, 5>::zeros();
    const auto c = a.dot(b);
    return static_cast<int>(c.numel());
}
