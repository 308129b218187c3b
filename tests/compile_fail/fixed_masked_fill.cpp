// EXPECT: masked_fill: the mask [2] does not broadcast to [2, 3]
// The mask must broadcast to the tensor's shape.
#include <tempura/tempura.hpp>

int main() {
    const auto x = tempura::FixedTensor<float, 2, 3>::zeros();
    const auto m = tempura::FixedTensor<bool, 2>::zeros();
    return static_cast<int>(x.masked_fill(m, 1.0).numel());
}
