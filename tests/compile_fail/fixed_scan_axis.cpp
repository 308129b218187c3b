// EXPECT: cumsum: axis 2 is out of range for [2, 3]
// A scan's axis must be one of the tensor's dims.
#include <tempura/tempura.hpp>

int main() {
    const auto x = tempura::FixedTensor<float, 2, 3>::zeros();
    return static_cast<int>(x.cumsum<2>().numel());
}
