#pragma once
// What the two MLP examples (mlp.cpp with Tensor, mlp_fixed.cpp with FixedTensor) share: a
// deterministic generator, synthetic 28x28 "digit" images (no dataset can be downloaded here),
// and a dense layer in plain C++ to check the compiled forward pass against.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace mnist_synthetic {

inline constexpr int64_t kPixels = 28 * 28;

// splitmix64: the same sequence on every platform (std::uniform_* distributions are not).
struct Rng {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    float uniform(float lo, float hi) { // [lo, hi)
        return lo + (hi - lo) * static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
    }
};

// Image i is a Gaussian blob centred at a position that depends on its label (i % 10), plus
// uniform noise, with pixel values in [0, 1].
inline std::vector<float> images(int64_t batch, Rng& rng) {
    std::vector<float> px(static_cast<size_t>(batch * kPixels));
    for (int64_t i = 0; i < batch; ++i) {
        const int64_t label = i % 10;
        const float cy = 6.0f + 4.0f * static_cast<float>(label / 4 + rng.uniform(-0.5f, 0.5f));
        const float cx = 6.0f + 5.0f * static_cast<float>(label % 4) + rng.uniform(-1.0f, 1.0f);
        for (int64_t y = 0; y < 28; ++y)
            for (int64_t x = 0; x < 28; ++x) {
                const float dy = static_cast<float>(y) - cy, dx = static_cast<float>(x) - cx;
                const float v = std::exp(-(dx * dx + dy * dy) / 18.0f) + rng.uniform(0.0f, 0.1f);
                px[static_cast<size_t>(i * kPixels + y * 28 + x)] = std::min(v, 1.0f);
            }
    }
    return px;
}

// y = x @ w^T + b (w stored [out, in]), optionally through ReLU, accumulated in double.
inline std::vector<float> dense(const std::vector<float>& x, const std::vector<float>& w,
                                const std::vector<float>& b, int64_t batch, int64_t in, int64_t out,
                                bool relu) {
    std::vector<float> y(static_cast<size_t>(batch * out));
    for (int64_t r = 0; r < batch; ++r)
        for (int64_t j = 0; j < out; ++j) {
            double acc = b[static_cast<size_t>(j)];
            for (int64_t k = 0; k < in; ++k)
                acc += static_cast<double>(x[static_cast<size_t>(r * in + k)]) *
                       w[static_cast<size_t>(j * in + k)];
            y[static_cast<size_t>(r * out + j)] =
                static_cast<float>(relu ? std::max(acc, 0.0) : acc);
        }
    return y;
}

} // namespace mnist_synthetic
