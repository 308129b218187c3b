// EXPECT: reshape: cannot reshape [2, 3] (6 elements) into [4, 2] (8 elements)
// A reshape keeps the number of elements.
#include <tempura/tempura.hpp>

int main() {
    const auto a = tempura::FixedTensor<float, 2, 3>::zeros();
    const auto b = a.reshape<4, 2>();
    return static_cast<int>(b.numel());
}
