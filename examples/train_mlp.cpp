// Training the MNIST-style MLP (784 -> 128, ReLU -> 10) on the synthetic digits of mlp.cpp: a
// Gaussian blob whose position depends on the label (i % 10), with noise. Each step is one plan:
// the forward pass, the backward pass (built by the gradient rules) and the Adam update run
// together; the loss printed per epoch was computed by that plan.
//
// It prints a line per epoch (mean loss) and the training and held-out accuracy at the end, and
// exits non-zero if the training accuracy is below 95%.
//
// Checkpoints: the model is an nn::Sequential, so its state has PyTorch's names ("0.weight",
// "2.bias"), and a checkpoint is one safetensors file with the model ("model.*"), the optimizer's
// moments and step count ("optimizer.*") and the epoch reached (metadata):
//   train_mlp --epochs 2 --checkpoint ck.safetensors     stops after epoch 2, saves ck
//   train_mlp --resume ck.safetensors                    continues with epoch 3
//   train_mlp --weights-out w.safetensors                saves the trained model at the end
// A run resumed from a checkpoint ends with the same weights, bit for bit, as a run never stopped.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <tempura/io.hpp>
#include <tempura/nn/module.hpp>
#include <tempura/tempura.hpp>

#include "mnist_synthetic.hpp"

namespace {

using mnist_synthetic::Rng;
using tempura::Tensor;
namespace nn = tempura::nn;

constexpr int64_t kBatch = 64, kBatches = 8, kIn = 784, kHidden = 128, kClasses = 10;
constexpr int kEpochs = 5;

// PyTorch's default initialization of a linear layer, uniform +-1/sqrt(fan_in), drawn from this
// program's own generator (the same numbers on every run).
void init(nn::Linear& layer, int64_t out, int64_t in, Rng& rng) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    std::vector<float> w(static_cast<size_t>(out * in)), b(static_cast<size_t>(out));
    for (float& x : w) x = rng.uniform(-bound, bound);
    for (float& x : b) x = rng.uniform(-bound, bound);
    layer.weight.assign(Tensor::from_vector(w, {out, in}));
    layer.bias->assign(Tensor::from_vector(b));
}

struct Options {
    int epochs = kEpochs;
    std::string checkpoint, resume, weights_out;
};

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) return false;
        const std::string v = argv[++i];
        if (a == "--epochs")
            o.epochs = std::atoi(v.c_str());
        else if (a == "--checkpoint")
            o.checkpoint = v;
        else if (a == "--resume")
            o.resume = v;
        else if (a == "--weights-out")
            o.weights_out = v;
        else
            return false;
    }
    return o.epochs >= 1 && o.epochs <= kEpochs;
}

// Splits "model.x" / "optimizer.x" entries of a checkpoint.
std::map<std::string, Tensor> with_prefix(const std::map<std::string, Tensor>& all,
                                          const std::string& prefix) {
    std::map<std::string, Tensor> out;
    for (const auto& [k, t] : all)
        if (k.rfind(prefix, 0) == 0) out.emplace(k.substr(prefix.size()), t);
    return out;
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

int main(int argc, char** argv) {
    Options opt_args;
    if (!parse(argc, argv, opt_args)) {
        std::fprintf(stderr,
                     "usage: train_mlp [--epochs 1..%d] [--checkpoint file] [--resume file] "
                     "[--weights-out file]\n",
                     kEpochs);
        return 2;
    }
    Rng rng{42};
    nn::Sequential model(nn::Linear(kIn, kHidden),
                         nn::Functional([](const Tensor& x) { return x.relu(); }, "ReLU"),
                         nn::Linear(kHidden, kClasses));
    init(static_cast<nn::Linear&>(model[0]), kHidden, kIn, rng);
    init(static_cast<nn::Linear&>(model[2]), kClasses, kHidden, rng);
    // The training set: kBatches batches of 64 images; a held-out batch for the end.
    std::vector<Tensor> batches;
    for (int64_t b = 0; b < kBatches; ++b)
        batches.push_back(Tensor::from_vector(mnist_synthetic::images(kBatch, rng), {kBatch, kIn}));
    const Tensor held_out =
        Tensor::from_vector(mnist_synthetic::images(kBatch, rng), {kBatch, kIn});
    const Tensor y = labels_of(kBatch);

    nn::Adam opt(model.parameters(), 1e-3);
    int first_epoch = 1;
    if (!opt_args.resume.empty()) {
        const auto ck = tempura::io::load_safetensors(opt_args.resume);
        model.load_state_dict(with_prefix(ck, "model."));
        opt.load_state_dict(with_prefix(ck, "optimizer."));
        first_epoch = std::stoi(tempura::io::safetensors_metadata(opt_args.resume).at("epoch")) + 1;
        std::printf("resumed from %s after epoch %d (step %lld)\n", opt_args.resume.c_str(),
                    first_epoch - 1, static_cast<long long>(opt.steps()));
    }
    const auto start = std::chrono::steady_clock::now();
    for (int epoch = first_epoch; epoch <= opt_args.epochs; ++epoch) {
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
    if (!opt_args.checkpoint.empty()) {
        std::map<std::string, Tensor> ck;
        for (auto& [k, t] : model.state_dict()) ck.emplace("model." + k, t);
        for (auto& [k, t] : opt.state_dict()) ck.emplace("optimizer." + k, t);
        tempura::io::save_safetensors(opt_args.checkpoint, ck,
                                      {{"epoch", std::to_string(opt_args.epochs)}});
        std::printf("checkpoint after epoch %d: %s\n", opt_args.epochs,
                    opt_args.checkpoint.c_str());
    }
    if (!opt_args.weights_out.empty()) nn::save(model, opt_args.weights_out);
    if (opt_args.epochs < kEpochs) return 0; // stopped early: no accuracy to judge yet
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    double train = 0;
    {
        tempura::NoGrad no_grad;
        for (const Tensor& x : batches) train += accuracy(model(x), kBatch) / kBatches;
        std::printf("training accuracy %.1f%%, held-out accuracy %.1f%% (%d steps in %.0f ms)\n",
                    100 * train, 100 * accuracy(model(held_out), kBatch),
                    static_cast<int>((opt_args.epochs - first_epoch + 1) * kBatches), ms);
    }
    return train >= 0.95 ? 0 : 1;
}
