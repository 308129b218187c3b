// A training step of the MNIST-style MLP (784 -> 128, ReLU -> 10, cross-entropy, SGD) at batch
// 64, against its peers in the same run (medians; ratio = Tempura / peer):
//   forward_ms      Tempura's forward pass alone (logits realized, under NoGrad);
//   step_ms         Tempura's training step: zero_grad, forward, backward, SGD step (one plan);
//   openblas_ms     the same step written by hand: OpenBLAS sgemm for the three matmuls of the
//                   forward and backward passes, loops for the rest (skipped without OpenBLAS).
// The targets: step / forward <= 3, step / openblas <= 1.5.
//
// Run:  OPENBLAS_CORETYPE=SkylakeX build/release/bench/bench_train
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <tempura/tempura.hpp>

#include "bench_common.hpp"

#if defined(TEMPURA_HAVE_OPENBLAS)
#include <cblas.h>
#endif

namespace {

using bench::median_ms;
using bench::random_floats;
using tempura::Tensor;
namespace nn = tempura::nn;

constexpr int64_t kB = 64, kIn = 784, kH = 128, kC = 10;
constexpr float kLr = 0.01f;

std::vector<float> scaled(std::vector<float> v, float s) {
    for (float& x : v) x *= s;
    return v;
}

std::vector<int32_t> labels() {
    std::vector<int32_t> y(kB);
    for (int64_t i = 0; i < kB; ++i) y[static_cast<size_t>(i)] = static_cast<int32_t>(i % kC);
    return y;
}

#if defined(TEMPURA_HAVE_OPENBLAS)
// The hand-written step: forward, softmax cross-entropy, backward, SGD, in place.
struct Peer {
    std::vector<float> x, w1, b1, w2, b2, h, logits, dlogits, dh, dw1, dw2;
    std::vector<int32_t> y;
    float loss = 0;
    void step() {
        // h = relu(x w1^T + b1)
        for (int64_t i = 0; i < kB; ++i) std::copy(b1.begin(), b1.end(), h.begin() + i * kH);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kB, kH, kIn, 1.0f, x.data(), kIn,
                    w1.data(), kIn, 1.0f, h.data(), kH);
        for (float& v : h) v = std::max(v, 0.0f);
        // logits = h w2^T + b2
        for (int64_t i = 0; i < kB; ++i) std::copy(b2.begin(), b2.end(), logits.begin() + i * kC);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kB, kC, kH, 1.0f, h.data(), kH,
                    w2.data(), kH, 1.0f, logits.data(), kC);
        // dlogits = (softmax - onehot) / B
        loss = 0;
        for (int64_t i = 0; i < kB; ++i) {
            float* l = logits.data() + i * kC;
            float* d = dlogits.data() + i * kC;
            const float m = *std::max_element(l, l + kC);
            float s = 0;
            for (int64_t c = 0; c < kC; ++c) s += d[c] = std::exp(l[c] - m);
            loss += std::log(s) + m - l[y[static_cast<size_t>(i)]];
            for (int64_t c = 0; c < kC; ++c)
                d[c] = (d[c] / s - (c == y[static_cast<size_t>(i)] ? 1.0f : 0.0f)) / kB;
        }
        loss /= kB;
        // dw2 = dlogits^T h; db2 = sum dlogits; dh = dlogits w2, through the ReLU
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kC, kH, kB, 1.0f, dlogits.data(), kC,
                    h.data(), kH, 0.0f, dw2.data(), kH);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kB, kH, kC, 1.0f, dlogits.data(), kC,
                    w2.data(), kH, 0.0f, dh.data(), kH);
        for (size_t k = 0; k < dh.size(); ++k)
            if (h[k] <= 0) dh[k] = 0;
        // dw1 = dh^T x
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kH, kIn, kB, 1.0f, dh.data(), kH,
                    x.data(), kIn, 0.0f, dw1.data(), kIn);
        for (int64_t c = 0; c < kC; ++c) {
            float g = 0;
            for (int64_t i = 0; i < kB; ++i) g += dlogits[static_cast<size_t>(i * kC + c)];
            b2[static_cast<size_t>(c)] -= kLr * g;
        }
        for (int64_t j = 0; j < kH; ++j) {
            float g = 0;
            for (int64_t i = 0; i < kB; ++i) g += dh[static_cast<size_t>(i * kH + j)];
            b1[static_cast<size_t>(j)] -= kLr * g;
        }
        for (size_t k = 0; k < w1.size(); ++k) w1[k] -= kLr * dw1[k];
        for (size_t k = 0; k < w2.size(); ++k) w2[k] -= kLr * dw2[k];
    }
};
#endif

void BM_TrainStep(benchmark::State& state) {
    const auto xs = random_floats(kB * kIn, 1);
    const auto w1v = scaled(random_floats(kH * kIn, 2), 0.035f),
               b1v = scaled(random_floats(kH, 3), 0.035f);
    const auto w2v = scaled(random_floats(kC * kH, 4), 0.088f),
               b2v = scaled(random_floats(kC, 5), 0.088f);
    const Tensor x = Tensor::from_vector(xs, {kB, kIn});
    const Tensor y = Tensor::from_vector(labels());
    Tensor w1 = Tensor::from_vector(w1v, {kH, kIn}), b1 = Tensor::from_vector(b1v);
    Tensor w2 = Tensor::from_vector(w2v, {kC, kH}), b2 = Tensor::from_vector(b2v);
    for (Tensor* p : {&w1, &b1, &w2, &b2}) p->requires_grad();
    const auto model = [&] { return nn::linear(nn::linear(x, w1, b1).relu(), w2, b2); };
    nn::SGD opt({w1, b1, w2, b2}, kLr);
    float loss = 0;
    const auto step = [&] {
        opt.zero_grad();
        Tensor l = nn::cross_entropy(model(), y);
        l.backward();
        opt.step();
        loss = l.item();
    };
    const auto forward = [&] {
        tempura::NoGrad ng;
        model().realize();
    };
    const double fwd = median_ms(forward, 21);
    const double ms = median_ms(step, 21);
    for (auto _ : state) state.SetIterationTime(ms / 1e3);
    state.counters["forward_ms"] = fwd;
    state.counters["step_ms"] = ms;
    state.counters["ratio_step_vs_forward"] = ms / fwd;
#if defined(TEMPURA_HAVE_OPENBLAS)
    Peer p{xs,
           w1v,
           b1v,
           w2v,
           b2v,
           std::vector<float>(kB * kH),
           std::vector<float>(kB * kC),
           std::vector<float>(kB * kC),
           std::vector<float>(kB * kH),
           std::vector<float>(kH * kIn),
           std::vector<float>(kC * kH),
           labels()};
    const double peer = median_ms([&] { p.step(); }, 21);
    state.counters["openblas_ms"] = peer;
    state.counters["ratio_step_vs_openblas"] = ms / peer;
    // Both trained the same net from the same start for 22 steps: their losses agree.
    state.counters["loss"] = loss;
    state.counters["peer_loss"] = p.loss;
#endif
}
BENCHMARK(BM_TrainStep)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);

} // namespace

BENCHMARK_MAIN();
