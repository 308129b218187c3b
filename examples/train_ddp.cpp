// Data-parallel training of the MNIST-style MLP of train_mlp.cpp over MPI:
//
//   mpirun -np 2 build/release/examples/train_ddp
//
// Every rank builds the same data set (the synthetic digits, from one seed), takes its shard of
// each epoch's shuffled order (DistributedSampler), and trains a replica of the model on it.
// DataParallel broadcasts rank 0's initial weights and averages the gradients across the ranks in
// every backward pass, so the replicas stay equal: each step is one step on the global batch
// (the ranks' batches together). Rank 0 prints a line per epoch (the loss averaged over the
// ranks) and the accuracy at the end; the program exits non-zero if the accuracy is below 95% or
// the replicas differ. Run alone it is a world of one.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <tempura/dist.hpp>
#include <tempura/nn/module.hpp>
#include <tempura/tempura.hpp>

#include "mnist_synthetic.hpp"

namespace {

using tempura::Tensor;
namespace dist = tempura::dist;
namespace nn = tempura::nn;

constexpr int64_t kSamples = 512, kGlobalBatch = 64, kIn = 784, kHidden = 128, kClasses = 10;
constexpr int kEpochs = 5;

int run() {
    dist::init();
    const int me = dist::rank(), world = dist::world_size();
    if (kGlobalBatch % world != 0) {
        if (me == 0) std::fprintf(stderr, "train_ddp: run it on 1, 2, 4, 8, ... ranks\n");
        dist::finalize();
        return 2;
    }
    const int64_t batch = kGlobalBatch / world; // this rank's share of each step
    // The data set, the same on every rank: image i shows digit i % 10.
    mnist_synthetic::Rng rng{42};
    const std::vector<float> images = mnist_synthetic::images(kSamples, rng);
    // Different initial weights on each rank, on purpose: DataParallel makes them rank 0's.
    tempura::manual_seed(1 + static_cast<uint64_t>(me));
    nn::Sequential model(nn::Linear(kIn, kHidden),
                         nn::Functional([](const Tensor& x) { return x.relu(); }, "ReLU"),
                         nn::Linear(kHidden, kClasses));
    dist::DataParallel ddp(model);
    nn::Adam opt(model.parameters(), 1e-3);
    dist::DistributedSampler sampler(kSamples, /*shuffle=*/true, /*seed=*/7);
    const auto start = std::chrono::steady_clock::now();
    for (int epoch = 1; epoch <= kEpochs; ++epoch) {
        sampler.set_epoch(epoch);
        const std::vector<int64_t> mine = sampler.indices();
        double total = 0;
        int64_t steps = 0;
        for (size_t at = 0; at + static_cast<size_t>(batch) <= mine.size(); at += batch) {
            std::vector<float> x;
            std::vector<int32_t> y;
            for (int64_t k = 0; k < batch; ++k) {
                const int64_t i = mine[at + static_cast<size_t>(k)];
                x.insert(x.end(), images.begin() + i * kIn, images.begin() + (i + 1) * kIn);
                y.push_back(static_cast<int32_t>(i % 10));
            }
            opt.zero_grad();
            Tensor loss = nn::cross_entropy(ddp(Tensor::from_vector(x, {batch, kIn})),
                                            Tensor::from_vector(y));
            ddp.backward(loss);
            opt.step(); // forward, backward, the gradient all_reduce and Adam: one plan
            total += loss.item();
            ++steps;
        }
        // The ranks' mean losses, averaged.
        const float mean = dist::all_reduce(Tensor::full({1}, static_cast<float>(total / steps)),
                                            dist::ReduceOp::Mean)
                               .item();
        if (me == 0) std::printf("epoch %d: loss %.4f\n", epoch, mean);
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    // Accuracy over the whole set (every rank computes it: the replicas are equal), and a check
    // that they are: the elementwise min and max of every parameter across the ranks agree.
    tempura::NoGrad no_grad;
    const std::vector<int32_t> pred =
        model(Tensor::from_vector(images, {kSamples, kIn})).argmax(1).to_vector<int32_t>();
    int64_t right = 0;
    for (int64_t i = 0; i < kSamples; ++i) right += pred[static_cast<size_t>(i)] == i % 10;
    const double accuracy = static_cast<double>(right) / kSamples;
    bool equal = true;
    for (const Tensor& p : model.parameters())
        equal = equal && dist::all_reduce(p, dist::ReduceOp::Min).to_vector() ==
                             dist::all_reduce(p, dist::ReduceOp::Max).to_vector();
    if (me == 0)
        std::printf("%d ranks x batch %lld: accuracy %.1f%%, replicas %s (%d epochs in %.0f ms)\n",
                    world, static_cast<long long>(batch), 100 * accuracy,
                    equal ? "equal" : "DIFFER", kEpochs, ms);
    dist::finalize();
    return accuracy >= 0.95 && equal ? 0 : 1;
}

} // namespace

int main() {
    if (!dist::available()) {
        std::printf("train_ddp: SKIPPED (Tempura was built without MPI: install libopenmpi-dev "
                    "openmpi-bin and configure again)\n");
        return 0;
    }
    try {
        return run();
    } catch (const tempura::Error& e) {
        std::fprintf(stderr, "train_ddp: %s\n", e.what());
        dist::finalize();
        return 1;
    }
}
