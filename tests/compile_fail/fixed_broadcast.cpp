// EXPECT: add: shapes [2, 3] and [4] cannot be broadcast
// Broadcasting aligns shapes at the right: 3 and 4 differ and neither is 1.
#include <tempura/tempura.hpp>

int main() {
    const auto a = tempura::FixedTensor<float, 2, 3>::zeros();
    const auto b = tempura::FixedTensor<float, 4>::zeros();
    const auto c = a + b;
    return static_cast<int>(c.numel());
}
