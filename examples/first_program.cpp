// The README's first program: a small model, realized, printed.
#include <cstdio>
#include <vector>

#include <tempura/tempura.hpp>
using tempura::Tensor;

int main() {
    Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor w = Tensor::randn({4, 3}), b = Tensor::full({4}, 0.1f); // a small linear layer
    Tensor y = tempura::nn::linear(x, w, b).relu().softmax(-1);    // lazy: nothing has run yet
    y.realize();                                                   // compiles and runs kernels
    for (float v : y.to_vector()) std::printf("%.3f ", v);         // [2, 4] probabilities
    std::printf("\n");
    for (const auto& k : y.kernels()) std::printf("kernel %s\n", k.name.c_str());
}
