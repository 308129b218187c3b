// EXPECT: conv1d: kernel 7 (dilation 1) is larger than the padded input 4
// A conv1d's kernel must fit in the padded length; the message names conv1d and its one dim.
#include <tempura/tempura.hpp>

int main() {
    using tempura::FixedTensor;
    const auto x = FixedTensor<float, 1, 3, 4>::full(1.0f);
    const auto w = FixedTensor<float, 2, 3, 7>::full(1.0f);
    const auto y = tempura::nn::conv1d(x, w);
    (void)y;
}
