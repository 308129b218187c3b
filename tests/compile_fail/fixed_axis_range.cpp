// EXPECT: sum: axis 2 is out of range for [2, 3] (2 dims)
// A tensor of 2 dims has axes 0 and 1 (or -2 and -1).
#include <tempura/tempura.hpp>

int main() {
    const auto a = tempura::FixedTensor<float, 2, 3>::zeros();
    const auto s = a.sum<2>();
    return static_cast<int>(s.numel());
}
