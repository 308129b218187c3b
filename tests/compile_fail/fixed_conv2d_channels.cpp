// EXPECT: conv2d: input has 3 channels, weight expects 4
// The weight's input channels (times the groups) must be the input's channels.
#include <tempura/tempura.hpp>

int main() {
    const auto x = tempura::FixedTensor<float, 1, 3, 8, 8>::zeros();
    const auto w = tempura::FixedTensor<float, 2, 4, 3, 3>::zeros();
    return static_cast<int>(tempura::nn::conv2d(x, w).numel());
}
