// One pre-norm transformer block on a batch of 2 sequences of 8 tokens, width 16, 2 heads:
//   x + attention(layer_norm(x)) (causal), then + MLP(layer_norm(.)) with gelu.
// Prints the kernels it ran and checks the result against the reference interpreter.
#include <cmath>
#include <cstdio>
#include <vector>

#include <tempura/tempura.hpp>

#include "example_check.hpp"

using example::synthetic;

int main() {
    using tempura::Tensor;
    namespace nn = tempura::nn;
    constexpr int64_t B = 2, L = 8, D = 16, H = 2, E = D / H;
    auto weight = [](int64_t out, int64_t in, unsigned seed) {
        return Tensor::from_vector(
            synthetic(out * in, 1.0f / std::sqrt(static_cast<float>(in)), seed), {out, in});
    };
    const Tensor x = Tensor::from_vector(synthetic(B * L * D, 1.0f, 1), {B, L, D});
    const Tensor wq = weight(D, D, 2), wk = weight(D, D, 3), wv = weight(D, D, 4),
                 wo = weight(D, D, 5);
    const Tensor w1 = weight(4 * D, D, 6), w2 = weight(D, 4 * D, 7);

    // [B, L, D] -> [B, H, L, E]
    auto heads = [&](const Tensor& t) { return t.reshape({B, L, H, E}).permute({0, 2, 1, 3}); };
    const Tensor a = nn::layer_norm(x, {D});
    const Tensor att = nn::scaled_dot_product_attention(
        heads(nn::linear(a, wq)), heads(nn::linear(a, wk)), heads(nn::linear(a, wv)), true);
    const Tensor h = x + nn::linear(att.permute({0, 2, 1, 3}).reshape({B, L, D}), wo);
    Tensor out = h + nn::linear(nn::linear(nn::layer_norm(h, {D}), w1).gelu(), w2);

    const double worst = example::realize_and_check(out, "transformer block");
    const std::vector<float> got = out.to_vector<float>();
    std::printf("token 0 of sequence 0:");
    for (int j = 0; j < 6; ++j) std::printf(" %.4f", static_cast<double>(got[j]));
    std::printf(" ...\nlargest difference from the reference interpreter: %.3g\n", worst);
    return worst < 1e-4 ? 0 : 1;
}
