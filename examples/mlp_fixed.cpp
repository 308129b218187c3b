// The MNIST-style classifier of examples/mlp.cpp, 784 (28x28 pixels) -> 128 (ReLU) -> 10 logits,
// softmax and argmax on a batch of 64 images, written with FixedTensor: every shape is part of a
// type, so a layer wired wrong does not compile. Try it: forget the transpose in Linear::forward,
// `x.dot(weight)`, and g++'s first error reads (on one line)
//
//   error: invalid application of 'sizeof' to incomplete type 'tempura::FixedTensorError<
//   tempura::Sentence{"dot: inner dimensions differ: [64, 784] @ [128, 784]"}>'
//
// FixedTensor wraps Tensor (no second engine): the kernels are those of the Tensor version.
// Weights and images are synthetic and deterministic (no dataset is downloaded); the network is
// untrained, so its predicted classes are arbitrary. The example exits non-zero if the logits
// differ from a plain C++ forward pass or a softmax row does not sum to 1.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <vector>

#include <tempura/tempura.hpp>

#include "mnist_synthetic.hpp"

namespace {

using mnist_synthetic::Rng;
using tempura::FixedTensor;

constexpr int64_t kBatch = 64, kIn = 784, kHidden = 128, kClasses = 10;

// y = x @ W^T + b with W stored [Out, In] (PyTorch's convention), for any batch size N.
template <int64_t In, int64_t Out>
struct Linear {
    std::vector<float> w, b; // host copies, for the reference forward pass
    FixedTensor<float, Out, In> weight;
    FixedTensor<float, Out> bias;

    explicit Linear(Rng& rng) {
        const float bound = 1.0f / std::sqrt(static_cast<float>(In));
        for (int64_t i = 0; i < In * Out; ++i) w.push_back(rng.uniform(-bound, bound));
        for (int64_t i = 0; i < Out; ++i) b.push_back(rng.uniform(-bound, bound));
        weight = FixedTensor<float, Out, In>::from_vector(w);
        bias = FixedTensor<float, Out>::from_vector(b);
    }
    template <int64_t N>
    FixedTensor<float, N, Out> forward(const FixedTensor<float, N, In>& x) const {
        return x.dot(weight.template transpose<0, 1>()) + bias;
    }
};

struct MnistNet {
    Linear<kIn, kHidden> fc1;
    Linear<kHidden, kClasses> fc2;
    explicit MnistNet(Rng& rng) : fc1(rng), fc2(rng) {}
    template <int64_t N>
    FixedTensor<float, N, kClasses> forward(const FixedTensor<float, N, kIn>& x) const {
        return fc2.forward(fc1.forward(x).relu()); // logits
    }
};

// One layer of the forward pass in plain C++, for checking.
template <int64_t In, int64_t Out>
std::vector<float> reference_layer(const Linear<In, Out>& l, const std::vector<float>& in,
                                   bool relu) {
    return mnist_synthetic::dense(in, l.w, l.b, kBatch, In, Out, relu);
}

} // namespace

int main() {
    Rng rng{42};
    const MnistNet net(rng);
    const auto images =
        FixedTensor<float, kBatch, kIn>::from_vector(mnist_synthetic::images(kBatch, rng));

    // The shapes are known to the compiler: these are checked while compiling, not run.
    auto logits = net.forward(images);
    static_assert(decltype(logits)::shape() == std::array<int64_t, 2>{kBatch, kClasses});
    logits.realize();
    auto probs = logits.softmax<-1>(); // FixedTensor<float, 64, 10>
    auto preds = logits.argmax<-1>();  // FixedTensor<int32_t, 64>
    auto confidence = probs.max<-1>(); // FixedTensor<float, 64>
    static_assert(std::is_same_v<decltype(preds), FixedTensor<int32_t, kBatch>>);
    static_assert(std::is_same_v<decltype(confidence), FixedTensor<float, kBatch>>);

    size_t kernels = logits.kernels().size();
    for (auto* k :
         {&probs.realize().kernels(), &preds.realize().kernels(), &confidence.realize().kernels()})
        kernels += k->size();
    std::printf("FixedTensor MLP %lld -> %lld -> %lld, batch %lld: %zu kernels ran\n",
                static_cast<long long>(kIn), static_cast<long long>(kHidden),
                static_cast<long long>(kClasses), static_cast<long long>(kBatch), kernels);
    for (const tempura::KernelInfo& k : logits.kernels())
        std::printf("  logits kernel %-16s backend %s\n", k.name.c_str(), k.backend.c_str());

    const std::vector<int32_t> p = preds.to_vector();
    const std::vector<float> conf = confidence.to_vector();
    std::printf("predicted classes (untrained network, synthetic images):");
    for (int64_t i = 0; i < kBatch; ++i)
        std::printf("%s%d", i % 32 ? " " : "\n  ", p[static_cast<size_t>(i)]);
    std::printf("\nconfidence of the first 8:");
    for (int64_t i = 0; i < 8; ++i)
        std::printf(" %.4f", static_cast<double>(conf[static_cast<size_t>(i)]));
    std::printf("\n");

    // ---- checks -------------------------------------------------------------------------------
    const std::vector<float> ref =
        reference_layer(net.fc2, reference_layer(net.fc1, images.to_vector(), true), false);
    const std::vector<float> got = logits.to_vector();
    const std::vector<float> row_sums = probs.sum<-1>().to_vector();
    double worst_logit = 0, worst_sum = 0;
    int failures = 0;
    for (size_t i = 0; i < got.size(); ++i)
        worst_logit = std::max(worst_logit, static_cast<double>(std::fabs(got[i] - ref[i])));
    for (float s : row_sums)
        worst_sum = std::max(worst_sum, std::fabs(static_cast<double>(s) - 1.0));
    for (int64_t r = 0; r < kBatch; ++r) {
        const float* row = &got[static_cast<size_t>(r * kClasses)];
        const int32_t c = p[static_cast<size_t>(r)];
        if (c < 0 || c >= kClasses || row[c] != *std::max_element(row, row + kClasses)) ++failures;
    }
    std::printf("max |logit - reference| = %.2e, max |row sum - 1| = %.2e, argmax %s\n",
                worst_logit, worst_sum, failures ? "WRONG" : "ok");
    if (worst_logit > 1e-3) {
        std::printf("FAILED: logits differ from the reference forward pass\n");
        ++failures;
    }
    if (worst_sum > 1e-5) {
        std::printf("FAILED: a softmax row does not sum to 1 within 1e-5\n");
        ++failures;
    }
    return failures ? 1 : 0;
}
