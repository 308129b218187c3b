// EXPECT: add: element types differ: float32 [2, 3] and int32 [2, 3]
// The element type is part of a FixedTensor's type; convert explicitly with cast<float>().
#include <cstdint>

#include <tempura/tempura.hpp>

int main() {
    const auto a = tempura::FixedTensor<float, 2, 3>::zeros();
    const auto b = tempura::FixedTensor<int32_t, 2, 3>::zeros();
    const auto c = a + b;
    return static_cast<int>(c.numel());
}
