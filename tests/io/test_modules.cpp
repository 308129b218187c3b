// nn modules: PyTorch's dotted names, state dicts (exact errors, nothing changed on a throw),
// save/load, BatchNorm2d's training mode inside the step's one plan, attention masks, optimizer
// checkpoints that resume bit for bit, and state dicts written by PyTorch itself.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <tempura/io.hpp>
#include <tempura/nn/module.hpp>
#include <tempura/tempura.hpp>

#include "../error_at.hpp"
#include "../support.hpp"

namespace fs = std::filesystem;
namespace nn = tempura::nn;
using tempura::DType;
using tempura::Shape;
using tempura::Tensor;

namespace {

std::string temp_path(const std::string& name) {
    return (fs::temp_directory_path() / ("tempura_mod_" + std::to_string(::getpid()) + "_" + name))
        .string();
}

nn::ConvOptions conv_opts(int64_t padding, int64_t stride = 1) {
    nn::ConvOptions o;
    o.padding = {padding};
    o.stride = {stride};
    return o;
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& v) {
    std::vector<std::string> out;
    for (const auto& e : v) out.push_back(e.first);
    return out;
}

// A ResNet-like block, named as torchvision names its parts.
struct Block : nn::Module {
    nn::Conv2d& conv1 = register_module("conv1", nn::Conv2d(4, 4, 3, conv_opts(1), false));
    nn::BatchNorm2d& bn1 = register_module("bn1", nn::BatchNorm2d(4));
    std::string name() const override { return "Block"; }
    Tensor forward(const Tensor& x) override { return (bn1(conv1(x)) + x).relu(); }
};

struct Net : nn::Module {
    nn::Conv2d& conv1 = register_module("conv1", nn::Conv2d(3, 4, 3, conv_opts(1)));
    nn::BatchNorm2d& bn1 = register_module("bn1", nn::BatchNorm2d(4));
    nn::Sequential& layer1 = register_module("layer1", nn::Sequential(Block(), Block()));
    nn::Linear& fc = register_module("fc", nn::Linear(4, 2));
    Tensor forward(const Tensor& x) override {
        Tensor y = layer1(bn1(conv1(x)).relu());
        return fc(y.mean({2, 3}));
    }
};

std::vector<float> values(int64_t n, float scale, int seed) {
    std::vector<float> v(static_cast<size_t>(n));
    uint32_t s = static_cast<uint32_t>(seed) * 2654435761u + 1;
    for (float& x : v) {
        s = s * 1664525u + 1013904223u;
        x = (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * scale;
    }
    return v;
}

bool have_torch() {
    return std::system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") == 0;
}

} // namespace

TEST_CASE("modules: parameters and buffers carry PyTorch's dotted names") {
    Net net;
    CHECK(names_of(net.named_parameters()) ==
          std::vector<std::string>{
              "conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias", "layer1.0.conv1.weight",
              "layer1.0.bn1.weight", "layer1.0.bn1.bias", "layer1.1.conv1.weight",
              "layer1.1.bn1.weight", "layer1.1.bn1.bias", "fc.weight", "fc.bias"});
    CHECK(names_of(net.named_buffers()) ==
          std::vector<std::string>{"bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked",
                                   "layer1.0.bn1.running_mean", "layer1.0.bn1.running_var",
                                   "layer1.0.bn1.num_batches_tracked", "layer1.1.bn1.running_mean",
                                   "layer1.1.bn1.running_var", "layer1.1.bn1.num_batches_tracked"});
    CHECK(net.state_dict().size() == 21);
    CHECK(net.parameters().size() == 12);
    CHECK(net.parameters()[0].requires_grad_enabled());
    CHECK(net.bn1.num_batches_tracked.dtype() == DType::Int64);
    CHECK(net.fc.weight.shape() == Shape{2, 4});
    // Linear's initialization: uniform within 1/sqrt(in).
    for (float w : net.fc.weight.to_vector<float>()) CHECK(std::abs(w) <= 0.5f);
    CHECK(net.is_training());
    net.eval();
    CHECK(!net.layer1[1].is_training());
    net.train();
    CHECK(net.layer1[1].is_training());

    nn::Module m;
    m.register_parameter("w", Tensor::zeros({2}));
    CHECK_THROWS_WITH(m.register_parameter("w", Tensor::zeros({2})),
                      "[module] parameter 'w' is registered already");
    CHECK_THROWS_WITH(m.register_buffer("a.b", Tensor::zeros({2})),
                      "[module] buffer name 'a.b' must be non-empty and without '.'");
    CHECK_THROWS_WITH(m.forward(Tensor::zeros({2})),
                      "[module] Module has no forward pass of one input");
    CHECK_THROWS_WITH(nn::Linear(0, 3), "[Linear] sizes must be positive, got in 0, out 3");
}

TEST_CASE("modules: load_state_dict lists every problem and changes nothing when it throws") {
    nn::Sequential a(nn::Linear(3, 2), nn::Functional([](const Tensor& x) { return x.relu(); }),
                     nn::Linear(2, 1));
    nn::Sequential b(nn::Linear(3, 2), nn::Functional([](const Tensor& x) { return x.relu(); }),
                     nn::Linear(2, 1));
    auto sd = a.state_dict();
    CHECK(sd.size() == 4);
    b.load_state_dict(sd);
    const Tensor x = Tensor::from_vector(values(6, 2, 1), {2, 3});
    CHECK(b(x).to_vector<float>() == a(x).to_vector<float>());
    // Copies: changing a afterwards does not change b.
    const auto b0 = b.state_dict()["0.weight"].to_vector<float>();
    a.state_dict()["0.weight"].assign(Tensor::zeros({2, 3}));
    CHECK(b.state_dict()["0.weight"].to_vector<float>() == b0);

    auto bad = sd;
    bad.erase("2.bias");
    bad.erase("0.bias");
    bad["2.b"] = Tensor::zeros({1});
    bad["extra"] = Tensor::zeros({1});
    bad["0.weight"] = Tensor::zeros({3, 2});
    bad["2.weight"] = Tensor::zeros({1, 3});
    const auto before = b.state_dict();
    std::vector<std::vector<float>> before_values;
    for (auto& [k, t] : before) before_values.push_back(t.to_vector<float>());
    CHECK_THROWS_WITH(b.load_state_dict(bad),
                      "[load_state_dict] missing keys: '0.bias', '2.bias'; unexpected keys: "
                      "'2.b', 'extra'; shape mismatches: '0.weight' is [3, 2] in the state dict "
                      "and [2, 3] in the module, '2.weight' is [1, 3] in the state dict and "
                      "[1, 2] in the module");
    size_t i = 0;
    for (auto& [k, t] : b.state_dict()) CHECK(t.to_vector<float>() == before_values[i++]);
    // Not strict: missing and unexpected keys are fine, a shape mismatch is not.
    auto partial = sd;
    partial.erase("0.bias");
    partial["extra"] = Tensor::zeros({1});
    partial["2.bias"] = Tensor::full({1}, 5.0f);
    b.load_state_dict(partial, false);
    CHECK(b.state_dict()["2.bias"].to_vector<float>() == std::vector<float>{5});
    CHECK_THROWS_WITH(b.load_state_dict({{"0.weight", Tensor::zeros({1})}}, false),
                      "[load_state_dict] shape mismatches: '0.weight' is [1] in the state dict "
                      "and [2, 3] in the module");
    // Values are converted to the parameter's dtype.
    b.load_state_dict({{"2.bias", Tensor::full({1}, 2.5, DType::Float64)}}, false);
    CHECK(b.state_dict()["2.bias"].dtype() == DType::Float32);
    CHECK(b.state_dict()["2.bias"].to_vector<float>() == std::vector<float>{2.5f});
}

TEST_CASE("modules: nn::save and nn::load round-trip a model through safetensors") {
    Net a, b;
    const Tensor x = Tensor::from_vector(values(2 * 3 * 5 * 5, 2, 3), {2, 3, 5, 5});
    nn::SGD opt(a.parameters(), 0.1);
    Tensor loss = a(x).square().mean();
    loss.backward();
    opt.step(); // moves the running statistics
    a.eval();
    b.eval();
    const std::string path = temp_path("net.safetensors");
    nn::save(a, path);
    CHECK(tempura::io::safetensors_metadata(path) ==
          std::map<std::string, std::string>{{"format", "pt"}});
    CHECK(tempura::io::load_safetensors(path).size() == 21);
    nn::load(b, path);
    CHECK(b(x).to_vector<float>() == a(x).to_vector<float>());
    CHECK(b.bn1.num_batches_tracked.item<int64_t>() == 1);
    std::remove(path.c_str());
    nn::Linear small(2, 2);
    nn::save(small, path);
    CHECK_THROWS_WITH(nn::load(b, path),
                      doctest::Contains("'fc.bias'; unexpected keys: 'bias', 'weight'"));
    std::remove(path.c_str());
}

TEST_CASE("BatchNorm2d: training mode normalizes by the batch and updates the running statistics") {
    nn::BatchNorm2d bn(2, 1e-5, 0.1);
    bn.weight.assign(Tensor::from_vector(std::vector<float>{2, 0.5f}));
    bn.bias.assign(Tensor::from_vector(std::vector<float>{1, -1}));
    const int64_t N = 3, C = 2, H = 2, W = 2;
    const std::vector<float> xv = values(N * C * H * W, 4, 5);
    const Tensor x = Tensor::from_vector(xv, {N, C, H, W});
    const Tensor y = bn(x);
    // The reference on the host, in double.
    std::vector<double> mean(C, 0), var(C, 0);
    const double n = N * H * W;
    for (int64_t i = 0; i < N; ++i)
        for (int64_t c = 0; c < C; ++c)
            for (int64_t k = 0; k < H * W; ++k) mean[c] += xv[((i * C + c) * H * W) + k] / n;
    for (int64_t i = 0; i < N; ++i)
        for (int64_t c = 0; c < C; ++c)
            for (int64_t k = 0; k < H * W; ++k) {
                const double d = xv[((i * C + c) * H * W) + k] - mean[c];
                var[c] += d * d / n;
            }
    const double w[2] = {2, 0.5}, b[2] = {1, -1};
    std::vector<float> want(xv.size());
    for (int64_t i = 0; i < N; ++i)
        for (int64_t c = 0; c < C; ++c)
            for (int64_t k = 0; k < H * W; ++k) {
                const size_t at = static_cast<size_t>(((i * C + c) * H * W) + k);
                want[at] =
                    static_cast<float>((xv[at] - mean[c]) / std::sqrt(var[c] + 1e-5) * w[c] + b[c]);
            }
    check_close(y.to_vector<float>(), want, 1e-5f);
    // No step: reading the buffers realizes the pending update.
    CHECK(nn::has_step_assign(bn.running_mean));
    const auto sd = bn.state_dict();
    CHECK(!nn::has_step_assign(bn.running_mean));
    std::vector<float> rm, rv;
    for (int64_t c = 0; c < C; ++c) {
        rm.push_back(static_cast<float>(0.1 * mean[c]));
        rv.push_back(static_cast<float>(0.9 + 0.1 * var[c] * n / (n - 1))); // unbiased
    }
    check_close(sd.at("running_mean").to_vector<float>(), rm, 1e-6f);
    check_close(sd.at("running_var").to_vector<float>(), rv, 1e-6f);
    CHECK(bn.num_batches_tracked.item<int64_t>() == 1);
    // Evaluation mode uses the running statistics.
    bn.eval();
    std::vector<float> ev(xv.size());
    for (size_t at = 0; at < xv.size(); ++at) {
        const size_t c = (at / (H * W)) % C;
        ev[at] = static_cast<float>((xv[at] - rm[c]) / std::sqrt(rv[c] + 1e-5) * w[c] + b[c]);
    }
    check_close(bn(x).to_vector<float>(), ev, 1e-5f);
    CHECK(bn.num_batches_tracked.item<int64_t>() == 1);
    CHECK_THROWS_WITH(
        bn(Tensor::zeros({2, 3, 2, 2})),
        at_line(__LINE__ - 2, "[BatchNorm2d] input must be [N, 2, H, W], got [2, 3, 2, 2]")
            .c_str());
}

TEST_CASE("BatchNorm2d: the running-statistics update joins the training step's one plan") {
    // conv -> batch norm -> relu -> mean -> linear; one SGD step. The batch statistics feed both
    // the normalization and the running averages: with the updates in the step's plan, the plan
    // has exactly as many kernels as the same step whose batch norm updates nothing (momentum 0
    // still writes the buffers, so compare with a plan that has no pending update at all).
    const auto step_kernels = [](bool update) {
        nn::Conv2d conv(3, 4, 3);
        nn::BatchNorm2d bn(4);
        nn::Linear fc(4, 2);
        std::vector<Tensor> params = conv.parameters();
        for (auto& p : bn.parameters()) params.push_back(p);
        for (auto& p : fc.parameters()) params.push_back(p);
        nn::SGD opt(params, 0.1);
        const Tensor x = Tensor::from_vector(values(2 * 3 * 6 * 6, 2, 9), {2, 3, 6, 6});
        Tensor loss = fc(bn(conv(x)).relu().mean({2, 3})).square().mean();
        size_t separate = 0;
        if (!update) { // a plan of its own, before the step: the batch statistics again
            nn::realize_step_assigns();
            separate = bn.running_mean.kernels().size();
            CHECK(separate > 0);
        }
        loss.backward();
        opt.step();
        CHECK(!nn::has_step_assign(bn.running_mean));
        const auto rm = bn.running_mean.to_vector<float>();
        CHECK(rm[0] != 0);
        if (!update) MESSAGE("the update in a plan of its own: " << separate << " kernels");
        return conv.weight.kernels().size(); // a parameter's: the whole plan of the step
    };
    const size_t with = step_kernels(true), without = step_kernels(false);
    MESSAGE("training step: " << with << " kernels with the running statistics, " << without
                              << " without");
    CHECK(with == without);
}

TEST_CASE("scaled_dot_product_attention: attn_mask, bool (true = attend) or float (added)") {
    const Tensor q = Tensor::from_vector(values(2 * 3 * 4, 2, 11), {2, 3, 4});
    const Tensor k = Tensor::from_vector(values(2 * 5 * 4, 2, 12), {2, 5, 4});
    const Tensor v = Tensor::from_vector(values(2 * 5 * 3, 2, 13), {2, 5, 3});
    // Keys 3 and 4 masked out = attention over keys 0..2 only.
    std::vector<bool> mv(15);
    for (size_t i = 0; i < 15; ++i) mv[i] = i % 5 < 3;
    const Tensor mask = Tensor::from_vector(mv, {3, 5});
    const auto got = nn::scaled_dot_product_attention(q, k, v, false, mask).to_vector<float>();
    const auto want =
        nn::scaled_dot_product_attention(q, k.slice({{}, {0, 3}}), v.slice({{}, {0, 3}}))
            .to_vector<float>();
    check_close(got, want, 1e-6f);
    std::vector<float> fv(15);
    for (size_t i = 0; i < 15; ++i) fv[i] = mv[i] ? 0.0f : -INFINITY;
    const auto additive =
        nn::scaled_dot_product_attention(q, k, v, false, Tensor::from_vector(fv, {3, 5}))
            .to_vector<float>();
    check_close(additive, want, 1e-6f);
    // A float mask shifts the scores: adding a constant per row changes nothing.
    check_close(nn::scaled_dot_product_attention(q, k, v, false, Tensor::full({3, 1}, 7.0f))
                    .to_vector<float>(),
                nn::scaled_dot_product_attention(q, k, v).to_vector<float>(), 1e-6f);
    CHECK_THROWS_WITH(nn::scaled_dot_product_attention(q, k, v, false, Tensor::zeros({4, 5})),
                      at_line(__LINE__ - 1, "[scaled_dot_product_attention] attn_mask of shape "
                                            "[4, 5] does not broadcast to the scores' shape "
                                            "[2, 3, 5]")
                          .c_str());
    CHECK_THROWS_WITH(
        nn::scaled_dot_product_attention(q, k, v, false, Tensor::zeros({3, 5}, DType::Int32)),
        at_line(__LINE__ - 2,
                "[scaled_dot_product_attention] attn_mask must be bool or float, got int32")
            .c_str());
}

TEST_CASE("optimizer state_dict: a run stopped, saved and resumed ends bit-identical") {
    const Tensor x = Tensor::from_vector(values(8 * 3 * 4 * 4, 2, 21), {8, 3, 4, 4});
    const auto make = [] {
        tempura::manual_seed(5);
        return std::make_unique<Net>();
    };
    const auto train = [&](Net& net, nn::Adam& opt, int steps) {
        for (int s = 0; s < steps; ++s) {
            opt.zero_grad();
            Tensor loss = net(x).square().mean();
            loss.backward();
            opt.step();
        }
    };
    auto ref = make();
    nn::Adam ref_opt(ref->parameters(), 1e-2);
    train(*ref, ref_opt, 6);

    const std::string path = temp_path("ckpt.safetensors");
    {
        auto a = make();
        nn::Adam opt(a->parameters(), 1e-2);
        train(*a, opt, 3);
        std::map<std::string, Tensor> ck = a->state_dict();
        for (auto& [k, t] : opt.state_dict()) ck.emplace("optimizer." + k, t);
        tempura::io::save_safetensors(path, ck);
    }
    auto b = make();
    b->conv1.weight.assign(Tensor::zeros(b->conv1.weight.shape())); // overwritten by the load
    nn::Adam opt(b->parameters(), 1e-2);
    auto ck = tempura::io::load_safetensors(path);
    std::map<std::string, Tensor> model, optim;
    for (auto& [k, t] : ck) (k.rfind("optimizer.", 0) == 0 ? optim[k.substr(10)] : model[k]) = t;
    CHECK(optim.count("state.0.exp_avg") == 1);
    CHECK(optim.at("step").item<int64_t>() == 3);
    b->load_state_dict(model);
    opt.load_state_dict(optim);
    CHECK(opt.steps() == 3);
    train(*b, opt, 3);
    const auto want = ref->state_dict(), got = b->state_dict();
    for (auto& [k, t] : want) {
        INFO(k);
        CHECK(got.at(k).to_vector<double>() == t.to_vector<double>());
    }
    std::remove(path.c_str());

    auto bad = optim;
    bad.erase("state.1.exp_avg_sq");
    bad["state.0.exp_avg"] = Tensor::zeros({1});
    bad["state.99.exp_avg"] = Tensor::zeros({1});
    const int64_t steps_before = opt.steps();
    CHECK_THROWS_WITH(opt.load_state_dict(bad),
                      "[Adam] cannot load the state dict: 'state.0.exp_avg' is float32 [1], "
                      "parameter 0 is float32 [4, 3, 3, 3]; unexpected key 'state.99.exp_avg'; "
                      "missing key 'state.1.exp_avg_sq'");
    CHECK(opt.steps() == steps_before);
}

TEST_CASE("PyTorch state dicts load into the same Tempura modules and give PyTorch's outputs") {
    if (!have_torch()) {
        MESSAGE("SKIPPED: /usr/bin/python3 with torch and numpy (python3-torch) is not available");
        return;
    }
    const std::string script = temp_path("torch_ref.py"), out = temp_path("torch_ref.safetensors");
    {
        std::ofstream f(script);
        f << R"PY(
import json, struct, sys
import numpy as np
import torch
torch.manual_seed(0)
torch.set_num_threads(1)

class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 8, 3, stride=2, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
        self.fc = torch.nn.Linear(8, 5)
    def forward(self, x):
        return self.fc(self.features(x).mean(dim=(2, 3)))

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 16)
        self.ln1 = torch.nn.LayerNorm(16)
        self.attn = torch.nn.MultiheadAttention(16, 4, batch_first=True)
        self.ln2 = torch.nn.LayerNorm(16)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))
    def forward(self, ids, pad):
        x = self.emb(ids)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, key_padding_mask=pad, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))

cnn = CNN()
# Non-trivial running statistics: a few training-mode batches.
cnn.train()
with torch.no_grad():
    for _ in range(3):
        cnn(torch.randn(4, 3, 8, 8) * 2 + 0.5)
cnn.eval()
x = torch.randn(2, 3, 8, 8)
block = Block().eval()
ids = torch.tensor([[1, 2, 3, 4, 5, 0], [6, 7, 8, 9, 0, 0]])
pad = ids == 0
with torch.no_grad():
    y = cnn(x)
    z = block(ids, pad)
# Batch norm in training mode: the output from the batch statistics, the running ones after.
bn = torch.nn.BatchNorm2d(3, momentum=0.2)
with torch.no_grad():
    bn.weight.copy_(torch.randn(3)); bn.bias.copy_(torch.randn(3))
bn_state = {k: v.clone() for k, v in bn.state_dict().items()}
bnx = torch.randn(4, 3, 5, 5) * 3 + 1
with torch.no_grad():
    bny = bn.train()(bnx)
# Attention masks: the functional form (bool: true = attend; float: added) and the module's
# (bool: true = may not attend).
q, k, v = torch.randn(2, 2, 4, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
bmask = torch.rand(4, 6) > 0.4
bmask[:, 0] = True
fmask = torch.randn(2, 1, 4, 6)
def sdpa(q, k, v, mask):  # PyTorch 2's F.scaled_dot_product_attention, for older versions too
    if hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v
sdpa_b = sdpa(q, k, v, bmask)
sdpa_f = sdpa(q, k, v, fmask)
causal = torch.triu(torch.ones(6, 6, dtype=torch.bool), 1)
with torch.no_grad():
    h = block.ln1(block.emb(ids))
    z2 = block.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
tensors = {}
for k_, v_ in bn_state.items(): tensors["bn." + k_] = v_
tensors.update({"bnx": bnx, "bny": bny, "bn_rm": bn.running_mean, "bn_rv": bn.running_var,
                "q": q, "k": k, "v": v, "bmask": bmask, "fmask": fmask, "sdpa_b": sdpa_b,
                "sdpa_f": sdpa_f, "h": h, "z2": z2})
for k, v in cnn.state_dict().items(): tensors["cnn." + k] = v
for k, v in block.state_dict().items(): tensors["block." + k] = v
tensors.update({"x": x, "y": y, "ids": ids, "pad": pad, "z": z})
codes = {torch.float32: "F32", torch.int64: "I64", torch.bool: "BOOL"}
header, blobs, off = {}, [], 0
for name, t in tensors.items():
    b = t.detach().contiguous().numpy().tobytes()
    header[name] = {"dtype": codes[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
    blobs.append(b); off += len(b)
h = json.dumps(header).encode()
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h))); f.write(h); f.write(b"".join(blobs))
)PY";
    }
    REQUIRE(std::system(("/usr/bin/python3 " + script + " " + out).c_str()) == 0);
    auto all = tempura::io::load_safetensors(out);
    std::remove(script.c_str());
    std::remove(out.c_str());
    const auto with_prefix = [&](const std::string& p) {
        std::map<std::string, Tensor> m;
        for (auto& [k, t] : all)
            if (k.rfind(p, 0) == 0) m.emplace(k.substr(p.size()), t);
        return m;
    };

    struct CNN : nn::Module {
        nn::Sequential& features = register_module(
            "features",
            nn::Sequential(nn::Conv2d(3, 8, 3, conv_opts(1)), nn::BatchNorm2d(8),
                           nn::Functional([](const Tensor& t) { return t.relu(); }, "ReLU"),
                           nn::Conv2d(8, 8, 3, conv_opts(0, 2), false), nn::BatchNorm2d(8),
                           nn::Functional([](const Tensor& t) { return t.relu(); }, "ReLU")));
        nn::Linear& fc = register_module("fc", nn::Linear(8, 5));
        Tensor forward(const Tensor& x) override { return fc(features(x).mean({2, 3})); }
    } cnn;
    cnn.load_state_dict(with_prefix("cnn."));
    cnn.eval();
    check_close(cnn(all.at("x")).to_vector<float>(), all.at("y").to_vector<float>(), 1e-4f);

    struct Block : nn::Module {
        nn::Embedding& emb = register_module("emb", nn::Embedding(11, 16));
        nn::LayerNorm& ln1 = register_module("ln1", nn::LayerNorm({16}));
        nn::MultiheadAttention& attn = register_module("attn", nn::MultiheadAttention(16, 4));
        nn::LayerNorm& ln2 = register_module("ln2", nn::LayerNorm({16}));
        nn::Sequential& mlp = register_module(
            "mlp", nn::Sequential(nn::Linear(16, 32),
                                  nn::Functional([](const Tensor& t) { return t.gelu(); }, "GELU"),
                                  nn::Linear(32, 16)));
        Tensor run(const Tensor& ids, const Tensor& pad) {
            Tensor x = emb(ids);
            Tensor h = ln1(x);
            x = x + attn.forward(h, h, h, {}, pad);
            return x + mlp(ln2(x));
        }
    } block;
    block.load_state_dict(with_prefix("block."));
    block.eval();
    check_close(block.run(all.at("ids"), all.at("pad")).to_vector<float>(),
                all.at("z").to_vector<float>(), 1e-4f);
    // The module's masks: a bool attn_mask (true = may not attend), and causal, alike.
    const Tensor h = all.at("h");
    const Tensor causal = Tensor::ones({6, 6}, DType::Bool).triu(1);
    check_close(block.attn.forward(h, h, h, causal).to_vector<float>(),
                all.at("z2").to_vector<float>(), 1e-4f);
    nn::MultiheadAttention causal_attn(16, 4, true);
    causal_attn.load_state_dict(block.attn.state_dict());
    check_close(causal_attn(h).to_vector<float>(), all.at("z2").to_vector<float>(), 1e-4f);

    // The functional attention's masks.
    const Tensor q = all.at("q"), k = all.at("k"), v = all.at("v");
    check_close(
        nn::scaled_dot_product_attention(q, k, v, false, all.at("bmask")).to_vector<float>(),
        all.at("sdpa_b").to_vector<float>(), 1e-5f);
    check_close(
        nn::scaled_dot_product_attention(q, k, v, false, all.at("fmask")).to_vector<float>(),
        all.at("sdpa_f").to_vector<float>(), 1e-5f);

    // Batch norm in training mode: PyTorch's output and running statistics.
    nn::BatchNorm2d bn(3, 1e-5, 0.2);
    bn.load_state_dict(with_prefix("bn."));
    check_close(bn(all.at("bnx")).to_vector<float>(), all.at("bny").to_vector<float>(), 1e-5f);
    // Reading a buffer's elements realizes its pending update first.
    CHECK(nn::has_step_assign(bn.running_mean));
    check_close(bn.running_mean.to_vector<float>(), all.at("bn_rm").to_vector<float>(), 1e-5f);
    CHECK(!nn::has_step_assign(bn.running_mean));
    const auto sd = bn.state_dict();
    check_close(sd.at("running_mean").to_vector<float>(), all.at("bn_rm").to_vector<float>(),
                1e-5f);
    check_close(sd.at("running_var").to_vector<float>(), all.at("bn_rv").to_vector<float>(), 1e-5f);
    CHECK(sd.at("num_batches_tracked").item<int64_t>() == 1);
}

TEST_CASE("modules: Dropout follows the mode; to(device) moves parameters and buffers") {
    tempura::manual_seed(3);
    nn::Dropout drop(0.5);
    const Tensor x = Tensor::ones({1000});
    const auto y = drop(x).to_vector<float>();
    size_t zeros = 0;
    for (float v : y) {
        CHECK((v == 0 || v == 2));
        zeros += v == 0;
    }
    CHECK(zeros > 400);
    CHECK(zeros < 600);
    drop.eval();
    CHECK(drop(x).to_vector<float>() == x.to_vector<float>());
    CHECK_THROWS_WITH(nn::Dropout(1.5), "[Dropout] p must be in [0, 1], got 1.500000");

    nn::Sequential net(nn::Linear(3, 2), nn::Functional([](const Tensor& t) { return t.relu(); }));
    nn::BatchNorm2d bn(2);
    const Tensor in = Tensor::from_vector(values(6, 2, 4), {2, 3});
    const auto want = net(in).to_vector<float>();
    const Tensor w = net.named_parameters()[0].second; // a copy: it follows the module
    net.to("EMU");
    bn.to("EMU");
    CHECK(w.device() == "EMU");
    CHECK(bn.running_var.device() == "EMU");
    for (auto& [n, t] : net.named_parameters()) CHECK(t.requires_grad_enabled());
    CHECK(net(in.to("EMU")).to_vector<float>() == want);
    nn::SGD opt(net.parameters(), 0.1);
    Tensor loss = net(in.to("EMU")).sum();
    loss.backward();
    opt.step();
    CHECK(w.device() == "EMU");
}

TEST_CASE("optimizer state_dict: SGD's momentum buffers; the errors") {
    Tensor w = Tensor::from_vector(std::vector<float>{1, -2, 3});
    w.requires_grad();
    nn::SGD opt({w}, 0.1, 0.9);
    CHECK(opt.state_dict().size() == 1); // no step yet: the count alone
    for (int i = 0; i < 2; ++i) {
        opt.zero_grad();
        (w * w).sum().backward();
        opt.step();
    }
    auto sd = opt.state_dict();
    CHECK(sd.size() == 2);
    CHECK(sd.at("step").item<int64_t>() == 2);
    // b1 = g1 = 2 w0; w1 = w0 - 0.1 b1 = 0.8 w0; b2 = 0.9 b1 + 2 w1 = 3.4 w0.
    check_close(sd.at("state.0.momentum_buffer").to_vector<float>(), {3.4f, -6.8f, 10.2f}, 1e-6f);
    Tensor w2 = Tensor::from_vector(std::vector<float>{0, 0, 0});
    w2.requires_grad();
    nn::SGD opt2({w2}, 0.1, 0.9);
    opt2.load_state_dict(sd);
    CHECK(opt2.steps() == 2);
    sd.at("state.0.momentum_buffer").assign(Tensor::zeros({3})); // opt2 holds a copy
    CHECK(opt2.state_dict().at("state.0.momentum_buffer").to_vector<float>()[0] ==
          doctest::Approx(3.4f));
    CHECK_THROWS_WITH(opt2.load_state_dict({}),
                      "[SGD] cannot load the state dict: missing key 'step'");
    CHECK_THROWS_WITH(
        opt2.load_state_dict({{"step", Tensor::full({}, 1.5f)}, {"state.x.y", Tensor::zeros({1})}}),
        "[SGD] cannot load the state dict: unexpected key 'state.x.y'; 'step' must be "
        "one integer, got float32 []");
    CHECK(opt2.steps() == 2);
}
