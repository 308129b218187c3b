// Training the MNIST-style MLP (784 -> 128, ReLU -> 10) on the synthetic digits of mlp.cpp: a
// Gaussian blob whose position depends on the label (i % 10), with noise. Each step is one plan:
// the forward pass, the backward pass (built by the gradient rules) and the Adam update run
// together; the loss printed per epoch was computed by that plan.
//
// It prints a line per epoch (mean loss) and the training and held-out accuracy at the end, and
// exits non-zero if the training accuracy is below 95%.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <tempura/tempura.hpp>

#include "mnist_synthetic.hpp"

namespace {

using mnist_synthetic::Rng;
using tempura::Tensor;
namespace nn = tempura::nn;

constexpr int64_t kBatch = 64, kBatches = 8, kIn = 784, kHidden = 128, kClasses = 10;

// PyTorch's default initialization of a linear layer: uniform +-1/sqrt(fan_in).
Tensor init(int64_t out, int64_t in, Rng& rng) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    std::vector<float> v(static_cast<size_t>(out * in));
    for (float& x : v) x = rng.uniform(-bound, bound);
    Tensor t = in == 1 ? Tensor::from_vector(v) : Tensor::from_vector(v, {out, in});
    t.requires_grad();
    return t;
}

Tensor labels_of(int64_t n) {
    std::vector<int32_t> y(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<int32_t>(i % 10);
    return Tensor::from_vector(y);
}

double accuracy(const Tensor& logits, int64_t n) {
    const std::vector<int32_t> pred = logits.argmax(1).to_vector<int32_t>();
    int64_t right = 0;
    for (int64_t i = 0; i < n; ++i) right += pred[static_cast<size_t>(i)] == i % 10;
    return static_cast<double>(right) / static_cast<double>(n);
}

} // namespace

int main() {
    Rng rng{42};
    Tensor w1 = init(kHidden, kIn, rng), b1 = init(kHidden, 1, rng);
    Tensor w2 = init(kClasses, kHidden, rng), b2 = init(kClasses, 1, rng);
    const auto model = [&](const Tensor& x) {
        return nn::linear(nn::linear(x, w1, b1).relu(), w2, b2);
    };
    // The training set: kBatches batches of 64 images; a held-out batch for the end.
    std::vector<Tensor> batches;
    for (int64_t b = 0; b < kBatches; ++b)
        batches.push_back(Tensor::from_vector(mnist_synthetic::images(kBatch, rng), {kBatch, kIn}));
    const Tensor held_out =
        Tensor::from_vector(mnist_synthetic::images(kBatch, rng), {kBatch, kIn});
    const Tensor y = labels_of(kBatch);

    nn::Adam opt({w1, b1, w2, b2}, 1e-3);
    const auto start = std::chrono::steady_clock::now();
    for (int epoch = 1; epoch <= 5; ++epoch) {
        double total = 0;
        for (const Tensor& x : batches) {
            opt.zero_grad();
            Tensor loss = nn::cross_entropy(model(x), y);
            loss.backward();
            opt.step();
            total += loss.item();
        }
        std::printf("epoch %d: loss %.4f\n", epoch, total / kBatches);
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    double train = 0;
    {
        tempura::NoGrad no_grad;
        for (const Tensor& x : batches) train += accuracy(model(x), kBatch) / kBatches;
        std::printf("training accuracy %.1f%%, held-out accuracy %.1f%% (%d steps in %.0f ms)\n",
                    100 * train, 100 * accuracy(model(held_out), kBatch),
                    static_cast<int>(5 * kBatches), ms);
    }
    return train >= 0.95 ? 0 : 1;
}
