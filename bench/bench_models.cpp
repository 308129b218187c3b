// Whole models against libtorch (PyTorch's C++ library, Debian's libtorch-dev) in the same
// binary, on the same weights and inputs, both on 2 threads (at::set_num_threads(2) and
// TEMPURA_THREADS=2). The libtorch side is built from torch::nn modules; its weights are copied
// into Tempura tensors, and Tempura's side is written as a user writes it with tempura::nn (no
// hand-placed contiguous()).
//
// Each row checks the outputs once, untimed (check_err: max |tempura - torch| / max |torch|),
// then reports the warm medians of both (tempura_ms, torch_ms), their ratio (tempura / torch),
// Tempura's cold time (its first call, compiles included: cold_ms) and its kernel count.
// Training rows run one step (zero_grad, forward, backward, step, loss.item()) on both sides and
// compare every parameter after the first step (check_err); step1_ms and step2_ms are Tempura's
// first two steps (the second must compile nothing). The resnet training row uses batch norm in
// its inference form (running statistics) on both sides: Tempura's nn::batch_norm has no
// training mode yet.
//
// Rows print SKIPPED when built without libtorch. BENCH_MODELS_REPS (default 5) sets the number
// of timed runs each median is taken over.
//
// Run:  build/release/bench/bench_models [--benchmark_filter=Resnet]
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <tempura/tempura.hpp>

#include "bench_common.hpp"

#if defined(TEMPURA_HAVE_TORCH)
#include <torch/torch.h>
#endif

namespace {

using bench::Clock;
using bench::median_ms;
using bench::ms_between;

int reps() {
    const char* s = std::getenv("BENCH_MODELS_REPS");
    const int r = s != nullptr ? std::atoi(s) : 5;
    return r > 0 ? r : 5;
}

#if defined(TEMPURA_HAVE_TORCH)

using tempura::Shape;
using tempura::Tensor;
namespace nn = tempura::nn;
namespace tnn = torch::nn;

// ---- weights: every parameter and buffer of a torch module, by name, as Tempura tensors ------

Tensor from_torch(const torch::Tensor& t) {
    const torch::Tensor c = t.detach().contiguous();
    if (c.scalar_type() == torch::kLong || c.scalar_type() == torch::kInt) {
        const torch::Tensor i = c.to(torch::kInt);
        const int32_t* p = i.data_ptr<int32_t>();
        return Tensor::from_vector(std::vector<int32_t>(p, p + i.numel()),
                                   Shape(i.sizes().begin(), i.sizes().end()));
    }
    const float* p = c.data_ptr<float>();
    return Tensor::from_vector(std::vector<float>(p, p + c.numel()),
                               Shape(c.sizes().begin(), c.sizes().end()));
}

struct Weights {
    std::map<std::string, Tensor> by_name;
    std::vector<Tensor> params; // the module's parameters, in its parameters() order
    const Tensor& operator()(const std::string& name) const {
        const auto it = by_name.find(name);
        if (it == by_name.end()) throw std::runtime_error("bench_models: no weight " + name);
        return it->second;
    }
    bool has(const std::string& name) const { return by_name.count(name) != 0; }
};

Weights weights_of(const tnn::Module& m, bool trainable) {
    Weights w;
    for (const auto& p : m.named_parameters()) {
        Tensor t = from_torch(p.value());
        if (trainable) t.requires_grad();
        w.by_name.emplace(p.key(), t);
        w.params.push_back(t);
    }
    for (const auto& b : m.named_buffers())
        if (b.value().is_floating_point()) w.by_name.emplace(b.key(), from_torch(b.value()));
    return w;
}

// Random running statistics and affine parameters for every batch norm, so that inference
// batch norm is not the identity.
void randomize_batch_norms(tnn::Module& m) {
    torch::NoGradGuard ng;
    for (const auto& b : m.named_buffers()) {
        if (b.key().find("running_mean") != std::string::npos)
            b.value().uniform_(-0.1, 0.1);
        else if (b.key().find("running_var") != std::string::npos)
            b.value().uniform_(0.5, 1.5);
    }
    for (const auto& p : m.named_parameters())
        if (p.key().find("bn.") != std::string::npos) {
            if (p.key().find("weight") != std::string::npos)
                p.value().uniform_(0.5, 1.5);
            else
                p.value().uniform_(-0.1, 0.1);
        }
}

double max_rel_err(const std::vector<float>& a, const torch::Tensor& ref) {
    const torch::Tensor r = ref.detach().contiguous().to(torch::kFloat).flatten();
    if (static_cast<int64_t>(a.size()) != r.numel()) return INFINITY;
    const float* p = r.data_ptr<float>();
    double diff = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, static_cast<double>(std::fabs(a[i] - p[i])));
        scale = std::max(scale, static_cast<double>(std::fabs(p[i])));
    }
    return diff / std::max(scale, 1e-30);
}

// ---- building blocks shared by the convolutional models ----------------------------------------

// Conv (no bias, padding (k - 1) / 2) then batch norm: torchvision's conv + BatchNorm2d pair.
struct ConvBNImpl : tnn::Module {
    tnn::Conv2d conv{nullptr};
    tnn::BatchNorm2d bn{nullptr};
    ConvBNImpl(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t groups = 1) {
        conv = register_module("conv", tnn::Conv2d(tnn::Conv2dOptions(in, out, k)
                                                       .stride(stride)
                                                       .padding((k - 1) / 2)
                                                       .groups(groups)
                                                       .bias(false)));
        bn = register_module("bn", tnn::BatchNorm2d(out));
    }
    torch::Tensor forward(const torch::Tensor& x) { return bn->forward(conv->forward(x)); }
};
TORCH_MODULE(ConvBN);

// Tempura's side of a ConvBN named `p`, as a user writes it.
Tensor conv_bn(const Weights& w, const std::string& p, const Tensor& x, int64_t stride,
               int64_t groups = 1) {
    const Tensor& cw = w(p + ".conv.weight");
    nn::ConvOptions o;
    o.stride = {stride};
    o.padding = {(cw.shape()[2] - 1) / 2};
    o.groups = groups;
    return nn::batch_norm(nn::conv2d(x, cw, o), w(p + ".bn.running_mean"), w(p + ".bn.running_var"),
                          w(p + ".bn.weight"), w(p + ".bn.bias"));
}

// ---- resnet18 (torchvision's BasicBlock layout) -------------------------------------------------

struct Resnet18Impl : tnn::Module {
    std::map<std::string, ConvBN> cb;
    tnn::Linear fc{nullptr};
    void add(const std::string& name, int64_t in, int64_t out, int64_t k, int64_t s) {
        cb.emplace(name, register_module(name, ConvBN(in, out, k, s)));
    }
    Resnet18Impl() {
        add("stem", 3, 64, 7, 2);
        int64_t in = 64;
        for (int l = 0; l < 4; ++l)
            for (int b = 0; b < 2; ++b) {
                const int64_t out = int64_t{64} << l, s = l > 0 && b == 0 ? 2 : 1;
                const std::string p = "l" + std::to_string(l) + "b" + std::to_string(b);
                add(p + "c1", in, out, 3, s);
                add(p + "c2", out, out, 3, 1);
                if (s != 1 || in != out) add(p + "ds", in, out, 1, s);
                in = out;
            }
        fc = register_module("fc", tnn::Linear(512, 1000));
    }
    torch::Tensor forward(torch::Tensor x) {
        x = torch::relu(cb.at("stem")->forward(x));
        x = torch::max_pool2d(x, 3, 2, 1);
        for (int l = 0; l < 4; ++l)
            for (int b = 0; b < 2; ++b) {
                const std::string p = "l" + std::to_string(l) + "b" + std::to_string(b);
                torch::Tensor y = torch::relu(cb.at(p + "c1")->forward(x));
                y = cb.at(p + "c2")->forward(y);
                const torch::Tensor id = cb.count(p + "ds") ? cb.at(p + "ds")->forward(x) : x;
                x = torch::relu(y + id);
            }
        x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
        return fc->forward(x);
    }
};
TORCH_MODULE(Resnet18);

Tensor resnet18(const Weights& w, Tensor x) {
    x = conv_bn(w, "stem", x, 2).relu();
    x = nn::max_pool2d(x, {{3}, {2}, {1}});
    for (int l = 0; l < 4; ++l)
        for (int b = 0; b < 2; ++b) {
            const std::string p = "l" + std::to_string(l) + "b" + std::to_string(b);
            const int64_t s = l > 0 && b == 0 ? 2 : 1;
            Tensor y = conv_bn(w, p + "c1", x, s).relu();
            y = conv_bn(w, p + "c2", y, 1);
            const Tensor id = w.has(p + "ds.conv.weight") ? conv_bn(w, p + "ds", x, s) : x;
            x = (y + id).relu();
        }
    x = nn::adaptive_avg_pool2d(x, {1, 1}).reshape({-1, 512});
    return nn::linear(x, w("fc.weight"), w("fc.bias"));
}

// ---- mobilenet_v2 (torchvision's inverted residuals)
// ---------------------------------------------

struct MbBlock {
    int64_t in, hidden, out, stride;
};

std::vector<MbBlock> mobilenet_blocks() {
    const int64_t cfg[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                               {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    std::vector<MbBlock> v;
    int64_t in = 32;
    for (const auto& c : cfg)
        for (int64_t i = 0; i < c[2]; ++i) {
            v.push_back({in, in * c[0], c[1], i == 0 ? c[3] : 1});
            in = c[1];
        }
    return v;
}

struct MobilenetV2Impl : tnn::Module {
    std::map<std::string, ConvBN> cb;
    tnn::Linear fc{nullptr};
    void add(const std::string& name, int64_t in, int64_t out, int64_t k, int64_t s,
             int64_t g = 1) {
        cb.emplace(name, register_module(name, ConvBN(in, out, k, s, g)));
    }
    MobilenetV2Impl() {
        add("stem", 3, 32, 3, 2);
        int i = 0;
        for (const MbBlock& b : mobilenet_blocks()) {
            const std::string p = "b" + std::to_string(i++);
            if (b.hidden != b.in) add(p + "exp", b.in, b.hidden, 1, 1);
            add(p + "dw", b.hidden, b.hidden, 3, b.stride, b.hidden);
            add(p + "proj", b.hidden, b.out, 1, 1);
        }
        add("last", 320, 1280, 1, 1);
        fc = register_module("fc", tnn::Linear(1280, 1000));
    }
    torch::Tensor forward(torch::Tensor x) {
        auto relu6 = [](const torch::Tensor& t) { return torch::clamp(t, 0, 6); };
        x = relu6(cb.at("stem")->forward(x));
        int i = 0;
        for (const MbBlock& b : mobilenet_blocks()) {
            const std::string p = "b" + std::to_string(i++);
            torch::Tensor y = b.hidden != b.in ? relu6(cb.at(p + "exp")->forward(x)) : x;
            y = relu6(cb.at(p + "dw")->forward(y));
            y = cb.at(p + "proj")->forward(y);
            x = b.stride == 1 && b.in == b.out ? x + y : y;
        }
        x = relu6(cb.at("last")->forward(x));
        x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
        return fc->forward(x);
    }
};
TORCH_MODULE(MobilenetV2);

Tensor mobilenet_v2(const Weights& w, Tensor x) {
    x = conv_bn(w, "stem", x, 2).clip(0, 6);
    int i = 0;
    for (const MbBlock& b : mobilenet_blocks()) {
        const std::string p = "b" + std::to_string(i++);
        Tensor y = b.hidden != b.in ? conv_bn(w, p + "exp", x, 1).clip(0, 6) : x;
        y = conv_bn(w, p + "dw", y, b.stride, b.hidden).clip(0, 6);
        y = conv_bn(w, p + "proj", y, 1);
        x = b.stride == 1 && b.in == b.out ? x + y : y;
    }
    x = conv_bn(w, "last", x, 1).clip(0, 6);
    x = nn::adaptive_avg_pool2d(x, {1, 1}).reshape({-1, 1280});
    return nn::linear(x, w("fc.weight"), w("fc.bias"));
}

// ---- transformers: a GPT-2-style decoder and a BERT-style encoder
// ----------------------------------

constexpr int64_t kVocab = 1000, kD = 256, kHeads = 4, kFF = 1024, kSeq = 128, kLayers = 4;

struct TransformerImpl : tnn::Module {
    bool decoder;
    tnn::Embedding tok{nullptr}, pos{nullptr};
    std::vector<tnn::LayerNorm> ln1, ln2;
    std::vector<tnn::Linear> qkv, proj, fc1, fc2;
    tnn::LayerNorm ln_f{nullptr};
    tnn::Linear head{nullptr};
    explicit TransformerImpl(bool is_decoder) : decoder(is_decoder) {
        tok = register_module("tok", tnn::Embedding(kVocab, kD));
        pos = register_module("pos", tnn::Embedding(kSeq, kD));
        if (!decoder) ln_f = register_module("ln_e", tnn::LayerNorm(tnn::LayerNormOptions({kD})));
        for (int64_t i = 0; i < kLayers; ++i) {
            const std::string p = "h" + std::to_string(i) + "_";
            ln1.push_back(register_module(p + "ln1", tnn::LayerNorm(tnn::LayerNormOptions({kD}))));
            qkv.push_back(register_module(p + "qkv", tnn::Linear(kD, 3 * kD)));
            proj.push_back(register_module(p + "proj", tnn::Linear(kD, kD)));
            ln2.push_back(register_module(p + "ln2", tnn::LayerNorm(tnn::LayerNormOptions({kD}))));
            fc1.push_back(register_module(p + "fc1", tnn::Linear(kD, kFF)));
            fc2.push_back(register_module(p + "fc2", tnn::Linear(kFF, kD)));
        }
        if (decoder) {
            ln_f = register_module("ln_f", tnn::LayerNorm(tnn::LayerNormOptions({kD})));
            head = register_module("head", tnn::Linear(tnn::LinearOptions(kD, kVocab).bias(false)));
        }
    }
    // mask: the decoder's causal mask (bool, true where masked) or the encoder's additive
    // padding mask [B, 1, 1, S].
    torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& mask) {
        const int64_t B = idx.size(0), T = idx.size(1), Dh = kD / kHeads;
        torch::Tensor x = tok->forward(idx) + pos->weight.slice(0, 0, T);
        if (!decoder) x = ln_f->forward(x);
        auto attention = [&](const torch::Tensor& h, size_t i) {
            const auto c = qkv[i]->forward(h).chunk(3, -1);
            auto heads = [&](const torch::Tensor& t) {
                return t.view({B, T, kHeads, Dh}).transpose(1, 2);
            };
            torch::Tensor a = torch::matmul(heads(c[0]), heads(c[1]).transpose(-2, -1)) /
                              std::sqrt(static_cast<double>(Dh));
            a = decoder ? a.masked_fill(mask, -INFINITY) : a + mask;
            const torch::Tensor y = torch::matmul(torch::softmax(a, -1), heads(c[2]));
            return proj[i]->forward(y.transpose(1, 2).reshape({B, T, kD}));
        };
        for (size_t i = 0; i < static_cast<size_t>(kLayers); ++i) {
            if (decoder) {
                x = x + attention(ln1[i]->forward(x), i);
                x = x + fc2[i]->forward(torch::gelu(fc1[i]->forward(ln2[i]->forward(x)), "tanh"));
            } else {
                x = ln1[i]->forward(x + attention(x, i));
                x = ln2[i]->forward(x + fc2[i]->forward(torch::gelu(fc1[i]->forward(x))));
            }
        }
        return decoder ? head->forward(ln_f->forward(x)) : x;
    }
};
TORCH_MODULE(Transformer);

// tanh-approximated gelu, from tensor ops.
Tensor gelu_tanh(const Tensor& x) {
    return 0.5f * x * (1.0f + (0.7978845608028654f * (x + 0.044715f * x * x * x)).tanh());
}

Tensor layer_norm(const Weights& w, const std::string& p, const Tensor& x) {
    return nn::layer_norm(x, {kD}, w(p + ".weight"), w(p + ".bias"));
}

Tensor linear(const Weights& w, const std::string& p, const Tensor& x) {
    return w.has(p + ".bias") ? nn::linear(x, w(p + ".weight"), w(p + ".bias"))
                              : nn::linear(x, w(p + ".weight"));
}

// The decoder (causal attention through nn::scaled_dot_product_attention) or the encoder (the
// additive padding mask [B, 1, 1, S] added to the scores).
Tensor transformer(const Weights& w, bool decoder, const Tensor& idx, const Tensor& mask) {
    const int64_t B = idx.shape()[0], T = idx.shape()[1], Dh = kD / kHeads;
    Tensor x = nn::embedding(idx, w("tok.weight")) + w("pos.weight").shrink({{0, T}, {0, kD}});
    if (!decoder) x = layer_norm(w, "ln_e", x);
    auto attention = [&](const Tensor& h, const std::string& p) {
        const auto c = linear(w, p + "qkv", h).chunk(3, -1);
        auto heads = [&](const Tensor& t) { return t.reshape({B, T, kHeads, Dh}).transpose(1, 2); };
        Tensor y;
        if (decoder) {
            y = nn::scaled_dot_product_attention(heads(c[0]), heads(c[1]), heads(c[2]), true);
        } else {
            const Tensor a = heads(c[0]).matmul(heads(c[1]).transpose()) *
                                 static_cast<float>(1 / std::sqrt(static_cast<double>(Dh))) +
                             mask;
            y = a.softmax(-1).matmul(heads(c[2]));
        }
        return linear(w, p + "proj", y.transpose(1, 2).reshape({B, T, kD}));
    };
    for (int64_t i = 0; i < kLayers; ++i) {
        const std::string p = "h" + std::to_string(i) + "_";
        if (decoder) {
            x = x + attention(layer_norm(w, p + "ln1", x), p);
            x = x +
                linear(w, p + "fc2", gelu_tanh(linear(w, p + "fc1", layer_norm(w, p + "ln2", x))));
        } else {
            x = layer_norm(w, p + "ln1", x + attention(x, p));
            x = layer_norm(w, p + "ln2", x + linear(w, p + "fc2", linear(w, p + "fc1", x).gelu()));
        }
    }
    return decoder ? linear(w, "head", layer_norm(w, "ln_f", x)) : x;
}

// ---- inputs
// ---------------------------------------------------------------------------------------

constexpr int64_t kTBatch = 4;

torch::Tensor tokens(int64_t seed) {
    torch::manual_seed(static_cast<uint64_t>(seed));
    return torch::randint(kVocab, {kTBatch, kSeq}, torch::kLong);
}

torch::Tensor causal_mask() { return torch::triu(torch::ones({kSeq, kSeq}, torch::kBool), 1); }

// Sequences of 128, 100, 64 and 32 tokens: -1e9 on the padding keys.
torch::Tensor padding_mask() {
    torch::Tensor m = torch::zeros({kTBatch, 1, 1, kSeq});
    const int64_t len[kTBatch] = {128, 100, 64, 32};
    for (int64_t b = 0; b < kTBatch; ++b) m[b].slice(-1, len[b]).fill_(-1e9);
    return m;
}

// ---- rows -------------------------------------------------------------------------------------

void forward_row(benchmark::State& state, const std::function<Tensor()>& mine,
                 const std::function<torch::Tensor()>& theirs) {
    auto t0 = Clock::now();
    Tensor out = mine();
    out.realize();
    const double cold = ms_between(t0, Clock::now());
    torch::Tensor ref;
    {
        torch::NoGradGuard ng;
        ref = theirs();
    }
    const double err = max_rel_err(out.to_vector<float>(), ref);
    size_t kernels = 0;
    const double tm = median_ms(
        [&] {
            Tensor o = mine();
            o.realize();
            kernels = o.kernels().size();
        },
        reps());
    const double pm = median_ms(
        [&] {
            torch::NoGradGuard ng;
            const torch::Tensor o = theirs();
        },
        reps());
    for (auto _ : state) state.SetIterationTime(tm / 1e3);
    state.counters["tempura_ms"] = tm;
    state.counters["torch_ms"] = pm;
    state.counters["ratio"] = tm / pm;
    state.counters["cold_ms"] = cold;
    state.counters["kernels"] = static_cast<double>(kernels);
    state.counters["check_err"] = err;
    if (!(err < 1e-3)) state.SkipWithError("outputs differ from libtorch's");
}

// A Tempura training step as a user writes it: zero_grad, the loss, backward, step, and the
// loss read (before step() when `item_first`, as PyTorch users often do).
template <class Opt, class Loss>
std::function<void()> tempura_step(Opt& opt, Loss loss_of, bool item_first = false) {
    return [&opt, loss_of, item_first] {
        opt.zero_grad();
        Tensor loss = loss_of();
        loss.backward();
        if (item_first) benchmark::DoNotOptimize(loss.item<float>());
        opt.step();
        if (!item_first) benchmark::DoNotOptimize(loss.item<float>());
    };
}

// The same step in libtorch.
template <class Opt, class Loss>
std::function<void()> torch_step(Opt& opt, Loss loss_of) {
    return [&opt, loss_of] {
        opt.zero_grad();
        torch::Tensor loss = loss_of();
        loss.backward();
        opt.step();
        benchmark::DoNotOptimize(loss.item<float>());
    };
}

// One training step on each side; `params_err` compares the parameters.
void train_row(benchmark::State& state, const std::function<void()>& mine,
               const std::function<void()>& theirs, const std::function<double()>& params_err) {
    auto t0 = Clock::now();
    mine();
    const double step1 = ms_between(t0, Clock::now());
    theirs();
    const double err = params_err();
    t0 = Clock::now();
    mine();
    const double step2 = ms_between(t0, Clock::now());
    const double tm = median_ms(mine, reps());
    const double pm = median_ms(theirs, reps());
    for (auto _ : state) state.SetIterationTime(tm / 1e3);
    state.counters["tempura_ms"] = tm;
    state.counters["torch_ms"] = pm;
    state.counters["ratio"] = tm / pm;
    state.counters["step1_ms"] = step1;
    state.counters["step2_ms"] = step2;
    state.counters["check_err"] = err;
    if (!(err < 1e-3)) state.SkipWithError("parameters differ from libtorch's after step 1");
}

// Every parameter against libtorch's after the same step. Adam and AdamW move each element by
// about lr whatever the size of its gradient, so an element whose gradient is rounding noise on
// both sides (a key projection's bias: softmax does not see it, its gradient is 0 up to rounding)
// lands on either side of its start: with `normalized`, elements whose libtorch gradient is below
// 1e-6 of the largest are left out of the comparison.
double params_err(const Weights& w, const tnn::Module& m, bool normalized = false) {
    double gmax = 0;
    for (const torch::Tensor& p : m.parameters())
        if (p.grad().defined()) gmax = std::max(gmax, p.grad().abs().max().item<double>());
    double err = 0;
    size_t i = 0;
    for (const torch::Tensor& p : m.parameters()) {
        Tensor t = w.params.at(i++);
        std::vector<float> mine = t.to_vector<float>();
        torch::Tensor ref = p.detach().contiguous().flatten().clone();
        if (normalized && p.grad().defined()) {
            const torch::Tensor noise = (p.grad().abs() < 1e-6 * gmax).flatten();
            const torch::Tensor mt =
                torch::from_blob(mine.data(), {static_cast<int64_t>(mine.size())}).clone();
            ref = torch::where(noise, torch::zeros_like(ref), ref);
            const torch::Tensor kept = torch::where(noise, torch::zeros_like(mt), mt);
            std::copy(kept.data_ptr<float>(), kept.data_ptr<float>() + kept.numel(), mine.begin());
        }
        err = std::max(err, max_rel_err(mine, ref));
    }
    return err;
}

Tensor image(const torch::Tensor& x) { return from_torch(x); }

void BM_Resnet18(benchmark::State& state) {
    const int64_t batch = state.range(0);
    torch::manual_seed(1);
    Resnet18 m;
    randomize_batch_norms(*m);
    m->eval();
    const Weights w = weights_of(*m, false);
    const torch::Tensor xt = torch::randn({batch, 3, 224, 224});
    const Tensor x = image(xt);
    forward_row(
        state, [&] { return resnet18(w, x); }, [&] { return m->forward(xt); });
}
BENCHMARK(BM_Resnet18)
    ->Arg(1)
    ->Arg(8)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(1);

void BM_MobilenetV2(benchmark::State& state) {
    torch::manual_seed(2);
    MobilenetV2 m;
    randomize_batch_norms(*m);
    m->eval();
    const Weights w = weights_of(*m, false);
    const torch::Tensor xt = torch::randn({state.range(0), 3, 224, 224});
    const Tensor x = image(xt);
    forward_row(
        state, [&] { return mobilenet_v2(w, x); }, [&] { return m->forward(xt); });
}
BENCHMARK(BM_MobilenetV2)->Arg(1)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);

void BM_Decoder(benchmark::State& state) {
    torch::manual_seed(3);
    Transformer m(true);
    m->eval();
    const Weights w = weights_of(*m, false);
    const torch::Tensor it = tokens(4), mt = causal_mask();
    const Tensor idx = from_torch(it);
    forward_row(
        state, [&] { return transformer(w, true, idx, Tensor()); },
        [&] { return m->forward(it, mt); });
}
BENCHMARK(BM_Decoder)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);

void BM_Encoder(benchmark::State& state) {
    torch::manual_seed(5);
    Transformer m(false);
    m->eval();
    const Weights w = weights_of(*m, false);
    const torch::Tensor it = tokens(6), mt = padding_mask();
    const Tensor idx = from_torch(it), mask = from_torch(mt);
    forward_row(
        state, [&] { return transformer(w, false, idx, mask); },
        [&] { return m->forward(it, mt); });
}
BENCHMARK(BM_Encoder)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);

// ---- training -----------------------------------------------------------------------------------

void BM_TrainResnet18(benchmark::State& state) {
    constexpr int64_t kB = 8;
    constexpr double kLr = 1e-3;
    torch::manual_seed(7);
    Resnet18 m;
    randomize_batch_norms(*m);
    m->eval(); // batch norm from running statistics on both sides
    const Weights w = weights_of(*m, true);
    const torch::Tensor xt = torch::randn({kB, 3, 224, 224});
    const torch::Tensor yt = torch::randint(1000, {kB}, torch::kLong);
    const Tensor x = image(xt), y = from_torch(yt);
    nn::SGD opt(w.params, kLr, 0.9);
    torch::optim::SGD topt(m->parameters(), torch::optim::SGDOptions(kLr).momentum(0.9));
    train_row(
        state, tempura_step(opt, [&] { return nn::cross_entropy(resnet18(w, x), y); }),
        torch_step(topt, [&] { return torch::nn::functional::cross_entropy(m->forward(xt), yt); }),
        [&] { return params_err(w, *m); });
}
BENCHMARK(BM_TrainResnet18)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);

// Arg 1: loss.item() read before opt.step(), as PyTorch users often do.
void BM_TrainDecoder(benchmark::State& state) {
    const bool item_first = state.range(0) != 0;
    torch::manual_seed(8);
    Transformer m(true);
    const Weights w = weights_of(*m, true);
    const torch::Tensor it = tokens(9), mt = causal_mask();
    const torch::Tensor target = tokens(10).flatten();
    const Tensor idx = from_torch(it), y = from_torch(target);
    nn::AdamW opt(w.params, 1e-3);
    torch::optim::AdamW topt(m->parameters(), torch::optim::AdamWOptions(1e-3));
    train_row(state,
              tempura_step(
                  opt,
                  [&] {
                      return nn::cross_entropy(
                          transformer(w, true, idx, Tensor()).reshape({-1, kVocab}), y);
                  },
                  item_first),
              torch_step(topt,
                         [&] {
                             return torch::nn::functional::cross_entropy(
                                 m->forward(it, mt).reshape({-1, kVocab}), target);
                         }),
              [&] { return params_err(w, *m, true); });
}
BENCHMARK(BM_TrainDecoder)
    ->ArgName("item_first")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(1);

struct MlpImpl : tnn::Module {
    tnn::Linear fc1{nullptr}, fc2{nullptr};
    MlpImpl() {
        fc1 = register_module("fc1", tnn::Linear(784, 128));
        fc2 = register_module("fc2", tnn::Linear(128, 10));
    }
    torch::Tensor forward(const torch::Tensor& x) {
        return fc2->forward(torch::relu(fc1->forward(x)));
    }
};
TORCH_MODULE(Mlp);

void BM_TrainMLP(benchmark::State& state) {
    torch::manual_seed(11);
    Mlp m;
    const Weights w = weights_of(*m, true);
    const torch::Tensor xt = torch::rand({64, 784});
    const torch::Tensor yt = torch::randint(10, {64}, torch::kLong);
    const Tensor x = from_torch(xt), y = from_torch(yt);
    nn::Adam opt(w.params, 1e-3);
    torch::optim::Adam topt(m->parameters(), torch::optim::AdamOptions(1e-3));
    train_row(
        state,
        tempura_step(opt,
                     [&] {
                         Tensor h = nn::linear(x, w("fc1.weight"), w("fc1.bias")).relu();
                         return nn::cross_entropy(nn::linear(h, w("fc2.weight"), w("fc2.bias")), y);
                     }),
        torch_step(topt, [&] { return torch::nn::functional::cross_entropy(m->forward(xt), yt); }),
        [&] { return params_err(w, *m, true); });
}
BENCHMARK(BM_TrainMLP)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);

#else

void BM_Models(benchmark::State& state) {
    for (auto _ : state) {
    }
    state.SkipWithError("SKIPPED: built without libtorch (libtorch-dev), the peer of every row");
}
BENCHMARK(BM_Models);

#endif

} // namespace

int main(int argc, char** argv) {
    // Both sides on 2 threads: Tempura's pool reads TEMPURA_THREADS when it starts.
    setenv("TEMPURA_THREADS", "2", 0);
#if defined(TEMPURA_HAVE_TORCH)
    at::set_num_threads(2);
#endif
    (void)reps;
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
