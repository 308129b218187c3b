// Learning (a + b) mod 10 from token pairs: an embedding table, an MLP with dropout, AdamW.
// Everything random comes from Tempura's generator (manual_seed, randn, uniform, and dropout's
// mask, drawn inside the kernel that applies it); the embedding is a data-dependent load and its
// gradient a scatter_add, so the table trains. Each step is one plan: forward, backward and the
// update.
//
// It prints the loss every 100 steps, the kernels of one step, and the accuracy over all 100
// pairs (dropout off), and exits non-zero below 95%.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <tempura/tempura.hpp>

namespace {

using tempura::Tensor;
namespace nn = tempura::nn;

constexpr int64_t kTokens = 10, kDim = 16, kHidden = 64, kPairs = kTokens * kTokens;

// PyTorch's default initialization of a linear layer: uniform +-1/sqrt(fan_in).
Tensor param(tempura::Shape shape, int64_t fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    Tensor t = Tensor::uniform(std::move(shape), -bound, bound).contiguous();
    t.realize();
    t.requires_grad();
    return t;
}

} // namespace

int main() {
    tempura::manual_seed(0);
    Tensor table = (Tensor::randn({kTokens, kDim}) * 0.5).contiguous();
    table.realize();
    table.requires_grad();
    Tensor w1 = param({kHidden, 2 * kDim}, 2 * kDim), b1 = param({kHidden}, 2 * kDim);
    Tensor w2 = param({kTokens, kHidden}, kHidden), b2 = param({kTokens}, kHidden);

    // Every pair (a, b) and its label (a + b) mod 10.
    std::vector<int32_t> pairs, labels;
    for (int32_t a = 0; a < kTokens; ++a)
        for (int32_t b = 0; b < kTokens; ++b) {
            pairs.insert(pairs.end(), {a, b});
            labels.push_back((a + b) % kTokens);
        }
    const Tensor x = Tensor::from_vector(pairs, {kPairs, 2});
    const Tensor y = Tensor::from_vector(labels);

    const auto model = [&](bool training) {
        const Tensor e = nn::embedding(x, table).reshape({kPairs, 2 * kDim});
        const Tensor h = nn::dropout(nn::linear(e, w1, b1).relu(), 0.1, training);
        return nn::linear(h, w2, b2);
    };

    nn::AdamW opt({table, w1, b1, w2, b2}, 1e-2, 0.9, 0.999, 1e-8, 1e-4);
    for (int step = 1; step <= 400; ++step) {
        opt.zero_grad();
        Tensor loss = nn::cross_entropy(model(true), y);
        loss.backward();
        opt.step();
        if (step % 100 == 0) std::printf("step %d: loss %.4f\n", step, loss.item());
        if (step == 400) {
            std::printf("the kernels of one step (%zu):", table.kernels().size());
            for (const auto& k : table.kernels()) std::printf(" %s", k.name.c_str());
            std::printf("\n");
        }
    }
    tempura::NoGrad no_grad;
    const std::vector<int32_t> pred = model(false).argmax(1).to_vector<int32_t>();
    int64_t right = 0;
    for (int64_t i = 0; i < kPairs; ++i)
        right += pred[static_cast<size_t>(i)] == labels[static_cast<size_t>(i)];
    const double acc = static_cast<double>(right) / kPairs;
    std::printf("accuracy over all %lld pairs: %.1f%%\n", static_cast<long long>(kPairs),
                100 * acc);
    return acc >= 0.95 ? 0 : 1;
}
