// A small CNN forward pass: conv(3->8, 3x3, pad 1) -> relu -> max_pool 2x2 -> conv(8->16, 3x3,
// stride 2) -> relu -> global average pool -> linear(16->10) -> log_softmax, on a batch of 4
// synthetic 3x16x16 images. Prints the kernels the forward pass ran and checks the result
// against the reference interpreter (a plain loop evaluation of the same graph).
#include <cmath>
#include <cstdio>
#include <vector>

#include <tempura/tempura.hpp>

#include "example_check.hpp"

using example::synthetic;

int main() {
    using tempura::Tensor;
    namespace nn = tempura::nn;
    const Tensor images = Tensor::from_vector(synthetic(4 * 3 * 16 * 16, 1.0f, 1), {4, 3, 16, 16});
    const Tensor w1 = Tensor::from_vector(synthetic(8 * 3 * 3 * 3, 0.3f, 2), {8, 3, 3, 3});
    const Tensor b1 = Tensor::from_vector(synthetic(8, 0.1f, 3));
    const Tensor w2 = Tensor::from_vector(synthetic(16 * 8 * 3 * 3, 0.2f, 4), {16, 8, 3, 3});
    const Tensor wf = Tensor::from_vector(synthetic(10 * 16, 0.3f, 5), {10, 16});
    const Tensor bf = Tensor::from_vector(synthetic(10, 0.1f, 6));

    nn::ConvOptions c1;
    c1.padding = {1};
    c1.bias = b1;
    nn::ConvOptions c2;
    c2.stride = {2};
    Tensor h = nn::conv2d(images, w1, c1).relu();            // [4, 8, 16, 16]
    h = nn::max_pool2d(h, {{2}});                            // [4, 8, 8, 8]
    h = nn::conv2d(h, w2, c2).relu();                        // [4, 16, 3, 3]
    h = nn::adaptive_avg_pool2d(h, {1, 1}).reshape({4, 16}); // [4, 16]
    Tensor out = nn::linear(h, wf, bf).log_softmax(-1);      // [4, 10]

    const double worst = example::realize_and_check(out, "CNN forward");
    const std::vector<float> got = out.to_vector<float>();
    std::printf("log-probabilities of image 0:");
    for (int j = 0; j < 10; ++j) std::printf(" %.4f", static_cast<double>(got[j]));
    std::printf("\nlargest difference from the reference interpreter: %.3g\n", worst);
    return worst < 1e-4 ? 0 : 1;
}
