// EXPECT: and: needs an integer or bool tensor, got float32 [2]
// Bitwise ops are for integers and bools.
#include <tempura/tempura.hpp>

int main() {
    const auto a = tempura::FixedTensor<float, 2>::zeros();
    const auto c = a & a;
    return static_cast<int>(c.numel());
}
