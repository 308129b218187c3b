// The MNIST-style MLP (784 -> 128 -> 10, softmax, argmax) written with FixedTensor and with
// Tensor: FixedTensor is a compile-time layer over Tensor, so both build the same graph and run the
// same kernels (names and generated code), with the same results.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <tempura/tempura.hpp>
#include <tempura/testing.hpp>

namespace {

using tempura::FixedTensor;
using tempura::KernelInfo;
using tempura::Tensor;

constexpr int64_t kBatch = 16, kIn = 784, kHidden = 128, kClasses = 10;

// Deterministic values in [-bound, bound).
std::vector<float> values(int64_t n, uint64_t seed, float bound) {
    std::vector<float> v(static_cast<size_t>(n));
    uint64_t s = seed;
    for (float& x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x = bound * (static_cast<float>(s >> 40) / 8388608.0f - 1.0f);
    }
    return v;
}

struct Weights {
    std::vector<float> w1 = values(kHidden * kIn, 1, 1.0f / 28.0f), b1 = values(kHidden, 2, 0.03f);
    std::vector<float> w2 = values(kClasses * kHidden, 3, 0.09f), b2 = values(kClasses, 4, 0.09f);
    std::vector<float> x = values(kBatch * kIn, 5, 1.0f);
};

// y = x @ W^T + b, W stored [out, in].
template <int64_t In, int64_t Out>
struct FixedLinear {
    FixedTensor<float, Out, In> weight;
    FixedTensor<float, Out> bias;
    template <int64_t N>
    FixedTensor<float, N, Out> operator()(const FixedTensor<float, N, In>& x) const {
        return x.dot(weight.template transpose<0, 1>()) + bias;
    }
};

struct Outputs {
    std::vector<KernelInfo> kernels;
    std::vector<float> logits, probs;
    std::vector<int32_t> preds;
};

Outputs run_fixed(const Weights& w) {
    const FixedLinear<kIn, kHidden> fc1{FixedTensor<float, kHidden, kIn>::from_vector(w.w1),
                                        FixedTensor<float, kHidden>::from_vector(w.b1)};
    const FixedLinear<kHidden, kClasses> fc2{
        FixedTensor<float, kClasses, kHidden>::from_vector(w.w2),
        FixedTensor<float, kClasses>::from_vector(w.b2)};
    const auto x = FixedTensor<float, kBatch, kIn>::from_vector(w.x);
    FixedTensor<float, kBatch, kClasses> logits = fc2(fc1(x).relu());
    logits.realize();
    FixedTensor<float, kBatch, kClasses> probs = logits.softmax<-1>();
    probs.realize();
    FixedTensor<int32_t, kBatch> preds = logits.argmax<-1>();
    preds.realize();
    Outputs o;
    for (const auto* ks : {&logits.kernels(), &probs.kernels(), &preds.kernels()})
        o.kernels.insert(o.kernels.end(), ks->begin(), ks->end());
    o.logits = logits.to_vector();
    o.probs = probs.to_vector();
    o.preds = preds.to_vector();
    return o;
}

Outputs run_tensor(const Weights& w) {
    const Tensor w1 = Tensor::from_vector(w.w1, {kHidden, kIn}), b1 = Tensor::from_vector(w.b1);
    const Tensor w2 = Tensor::from_vector(w.w2, {kClasses, kHidden}),
                 b2 = Tensor::from_vector(w.b2);
    const Tensor x = Tensor::from_vector(w.x, {kBatch, kIn});
    const Tensor h = (x.dot(w1.transpose(0, 1)) + b1).relu();
    Tensor logits = h.dot(w2.transpose(0, 1)) + b2;
    logits.realize();
    Tensor probs = logits.softmax(-1);
    probs.realize();
    Tensor preds = logits.argmax(-1);
    preds.realize();
    Outputs o;
    for (const auto* ks : {&logits.kernels(), &probs.kernels(), &preds.kernels()})
        o.kernels.insert(o.kernels.end(), ks->begin(), ks->end());
    o.logits = logits.to_vector<float>();
    o.probs = probs.to_vector<float>();
    o.preds = preds.to_vector<int32_t>();
    return o;
}

} // namespace

TEST_CASE("fixed: the FixedTensor MLP and the Tensor MLP run identical kernels") {
    const Weights w;
    const Outputs t = run_tensor(w);
    const Outputs f = run_fixed(w);
    REQUIRE_FALSE(t.kernels.empty());
    REQUIRE(f.kernels.size() == t.kernels.size());
    for (size_t k = 0; k < t.kernels.size(); ++k) {
        CAPTURE(k);
        CHECK(f.kernels[k].name == t.kernels[k].name);
        CHECK(f.kernels[k].backend == t.kernels[k].backend);
        CHECK(f.kernels[k].source == t.kernels[k].source);
    }
    CHECK(f.logits == t.logits);
    CHECK(f.probs == t.probs);
    CHECK(f.preds == t.preds);
    // And the graphs are the same node for node: the FixedTensor layer adds nothing.
    const auto x = FixedTensor<float, kBatch, kIn>::from_vector(w.x);
    const auto w1 = FixedTensor<float, kHidden, kIn>::from_vector(w.w1);
    CHECK(x.dot(w1.transpose()).uop().same(x.tensor().dot(w1.tensor().transpose()).uop()));
}
