// Microbenchmarks of your own tensor expressions, with Google Benchmark and
// <tempura/benchmark.hpp>: each expression is timed with its plan warm (the first, compiling call
// is reported apart as first_ms), its kernels' GFLOP/s and GB/s come from their own operation and
// byte counts, and a hand-written peer measured in the same run gives a ratio (below 1: Tempura
// is faster).
//
//   build/release/examples/microbench                         # all three
//   build/release/examples/microbench --benchmark_filter=gelu # one
#include <cmath>
#include <vector>

#include <tempura/benchmark.hpp>
#include <tempura/tempura.hpp>

using tempura::Tensor;

int main(int argc, char** argv) {
    constexpr int64_t kN = 1 << 20, kRows = 512, kIn = 256, kOut = 256;
    tempura::manual_seed(1);
    // Inputs made and realized once: each iteration builds the expression on them and runs it.
    Tensor x = Tensor::randn({kN}), m = Tensor::randn({kRows, kIn});
    Tensor w = Tensor::randn({kIn, kOut}), b = Tensor::randn({kOut});
    for (Tensor* t : {&x, &m, &w, &b}) t->realize();
    const std::vector<float> hx = x.to_vector<float>(), hm = m.to_vector<float>(),
                             hw = w.to_vector<float>(), hb = b.to_vector<float>();
    std::vector<float> out(kN), out2(static_cast<size_t>(kRows * kOut));

    // 1. An elementwise expression: x * sigmoid(1.702 x), one kernel; peer: the same loop.
    tempura::bench::register_realize(
        "swish_1M", [=] { return x * (x * 1.702f).sigmoid(); },
        [&] {
            for (int64_t i = 0; i < kN; ++i) out[i] = hx[i] / (1.0f + std::exp(-1.702f * hx[i]));
            benchmark::DoNotOptimize(out.data());
        },
        "loop");

    // 2. GELU (erf), the activation of most transformers.
    tempura::bench::register_realize(
        "gelu_1M", [=] { return x.gelu(); },
        [&] {
            for (int64_t i = 0; i < kN; ++i)
                out[i] = 0.5f * hx[i] * (1.0f + std::erf(hx[i] * 0.70710678f));
            benchmark::DoNotOptimize(out.data());
        },
        "loop");

    // 3. A dense layer, relu(m @ w + b): a reduction kernel; peer: a plain i-k-j loop.
    tempura::bench::register_realize(
        "dense_relu_512x256x256", [=] { return (m.matmul(w) + b).relu(); },
        [&] {
            for (int64_t i = 0; i < kRows; ++i) {
                float* o = &out2[static_cast<size_t>(i * kOut)];
                for (int64_t j = 0; j < kOut; ++j) o[j] = hb[j];
                for (int64_t k = 0; k < kIn; ++k) {
                    const float a = hm[static_cast<size_t>(i * kIn + k)];
                    const float* wr = &hw[static_cast<size_t>(k * kOut)];
                    for (int64_t j = 0; j < kOut; ++j) o[j] += a * wr[j];
                }
                for (int64_t j = 0; j < kOut; ++j) o[j] = std::max(o[j], 0.0f);
            }
            benchmark::DoNotOptimize(out2.data());
        },
        "loop");

    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
