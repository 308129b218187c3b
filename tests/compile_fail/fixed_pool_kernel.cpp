// EXPECT: max_pool2d: kernel 5x5 is larger than the padded input 4x4
// A pooling window must fit in the padded input.
#include <tempura/tempura.hpp>

int main() {
    const auto x = tempura::FixedTensor<float, 1, 1, 4, 4>::zeros();
    return static_cast<int>(tempura::nn::max_pool2d<5>(x).numel());
}
