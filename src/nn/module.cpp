// tempura::nn::Module and the modules: registration, PyTorch's dotted names, state dicts,
// save/load through safetensors, and the layers as compositions of the functional nn.
#include "tempura/nn/module.hpp"

#include <cmath>
#include <set>

#include "tempura/error.hpp"
#include "tempura/io.hpp"
#include "tempura/realize/device.hpp"
#include "tempura/tensor/optim.hpp"
#include "tensor/tensor_impl.hpp"

namespace tempura::nn {

namespace {

void check_name(const std::string& kind, const std::string& name) {
    if (name.empty() || name.find('.') != std::string::npos)
        fail("module", kind + " name '" + name + "' must be non-empty and without '.'");
}

// uniform(-bound, bound), realized.
Tensor init_uniform(Shape shape, double bound) {
    Tensor t = Tensor::uniform(std::move(shape), -bound, bound);
    t.realize();
    return t;
}

Tensor realized_const(Shape shape, double v, DType dt = DType::Float32) {
    Tensor t = dt.is_float()
                   ? Tensor::full(std::move(shape), v, dt).contiguous()
                   : Tensor::full(std::move(shape), static_cast<int64_t>(v), dt).contiguous();
    t.realize();
    return t;
}

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + ("'" + v[i] + "'");
    return s;
}

} // namespace

Tensor Module::forward(const Tensor&) {
    fail("module", name() + " has no forward pass of one input");
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
    check_name("parameter", name);
    for (const auto& e : params_)
        if (e.first == name) fail("module", "parameter '" + name + "' is registered already");
    if (!t.dtype().is_float() && requires_grad)
        fail("module", "parameter '" + name + "' must be a float tensor, got " + t.dtype().name());
    t.realize();
    TensorAccess::share(t);
    if (requires_grad) t.requires_grad();
    params_.emplace_back(name, t);
    return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
    check_name("buffer", name);
    for (const auto& e : buffers_)
        if (e.first == name) fail("module", "buffer '" + name + "' is registered already");
    t.realize();
    TensorAccess::share(t);
    buffers_.emplace_back(name, t);
    return t;
}

void Module::add_child(const std::string& name, std::unique_ptr<Module> child) {
    check_name("module", name);
    for (const auto& e : children_)
        if (e.first == name) fail("module", "module '" + name + "' is registered already");
    child->train(training_);
    children_.emplace_back(name, std::move(child));
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out,
                     bool params, bool buffers) const {
    if (params)
        for (const auto& [n, t] : params_) out.emplace_back(prefix + n, t);
    if (buffers)
        for (const auto& [n, t] : buffers_) out.emplace_back(prefix + n, t);
    for (const auto& [n, c] : children_) c->collect(prefix + n + ".", out, params, buffers);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
    std::vector<std::pair<std::string, Tensor>> out;
    collect("", out, true, false);
    return out;
}

std::vector<Tensor> Module::parameters() const {
    std::vector<Tensor> out;
    for (auto& e : named_parameters()) out.push_back(e.second);
    return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
    realize_step_assigns(); // pending running statistics are part of the value
    std::vector<std::pair<std::string, Tensor>> out;
    collect("", out, false, true);
    return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_children() const {
    std::vector<std::pair<std::string, Module*>> out;
    for (const auto& [n, c] : children_) out.emplace_back(n, c.get());
    return out;
}

std::map<std::string, Tensor> Module::state_dict() const {
    realize_step_assigns();
    std::vector<std::pair<std::string, Tensor>> all;
    collect("", all, true, true);
    std::map<std::string, Tensor> out;
    for (auto& [n, t] : all) out.emplace(n, t);
    return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
    load_impl(state, strict, false);
}

void Module::load_impl(const std::map<std::string, Tensor>& state, bool strict, bool owned) {
    realize_step_assigns(); // a pending update must not overwrite the loaded value later
    std::vector<std::pair<std::string, Tensor>> mine;
    collect("", mine, true, true);
    std::set<std::string> known;
    std::vector<std::string> missing, unexpected, mismatched;
    for (const auto& [n, t] : mine) {
        known.insert(n);
        auto it = state.find(n);
        if (it == state.end()) {
            missing.push_back(n);
        } else if (it->second.shape() != t.shape()) {
            mismatched.push_back("'" + n + "' is " + shape_str(it->second.shape()) +
                                 " in the state dict and " + shape_str(t.shape()) +
                                 " in the module");
        }
    }
    for (const auto& [n, t] : state)
        if (!known.count(n)) unexpected.push_back(n);
    std::vector<std::string> parts;
    if (strict && !missing.empty()) parts.push_back("missing keys: " + join(missing));
    if (strict && !unexpected.empty()) parts.push_back("unexpected keys: " + join(unexpected));
    if (!mismatched.empty()) {
        std::string s = "shape mismatches: ";
        for (size_t i = 0; i < mismatched.size(); ++i) s += (i ? ", " : "") + mismatched[i];
        parts.push_back(s);
    }
    if (!parts.empty()) {
        std::string msg;
        for (size_t i = 0; i < parts.size(); ++i) msg += (i ? "; " : "") + parts[i];
        fail("load_state_dict", msg);
    }
    // Every value converted and realized before the first one is given: a failure here changes
    // nothing.
    std::vector<std::pair<Tensor, Tensor>> give;
    for (auto& [n, t] : mine) {
        auto it = state.find(n);
        if (it == state.end()) continue;
        Tensor v = it->second;
        if (v.device() != t.device()) v = v.to(t.device());
        if (v.dtype() != t.dtype()) {
            NoGrad ng;
            v = v.detach().cast(t.dtype());
        }
        give.emplace_back(t, v);
    }
    {
        std::vector<std::reference_wrapper<Tensor>> vals;
        for (auto& tv : give) vals.push_back(tv.second);
        tempura::realize(vals);
    }
    for (auto& [t, v] : give) {
        // A tensor the caller may still hold is copied (assign does); a fresh one read from a
        // file (owned) becomes the parameter's buffer as it is.
        if (owned || !TensorAccess::shared(v))
            TensorAccess::rebind(t, v);
        else
            t.assign(v);
    }
}

Module& Module::train(bool on) {
    training_ = on;
    for (auto& [n, c] : children_) c->train(on);
    return *this;
}

Module& Module::to(const std::string& device) {
    realize_step_assigns();
    std::vector<std::pair<std::string, Tensor>> mine;
    collect("", mine, true, true);
    std::vector<Tensor> moved;
    for (auto& [n, t] : mine) moved.push_back(t.to(device));
    for (size_t i = 0; i < mine.size(); ++i)
        if (moved[i].device() != mine[i].second.device())
            TensorAccess::rebind(mine[i].second, moved[i]);
    return *this;
}

void save(const Module& module, const std::string& path) {
    io::save_safetensors(path, module.state_dict(), {{"format", "pt"}});
}

void load(Module& module, const std::string& path) {
    std::string device;
    const auto params = module.named_parameters();
    if (!params.empty()) device = params.front().second.device();
    module.load_impl(io::load_safetensors(path, device), true, true);
}

// ---- Linear ---------------------------------------------------------------------------------

Linear::Linear(int64_t in, int64_t out, bool with_bias) {
    if (in <= 0 || out <= 0)
        fail("Linear", "sizes must be positive, got in " + std::to_string(in) + ", out " +
                           std::to_string(out));
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    weight = register_parameter("weight", init_uniform({out, in}, bound));
    if (with_bias) bias = register_parameter("bias", init_uniform({out}, bound));
}

Tensor Linear::forward(const Tensor& x) {
    return bias ? nn::linear(x, weight, *bias) : nn::linear(x, weight);
}

// ---- Conv2d ---------------------------------------------------------------------------------

Conv2d::Conv2d(int64_t in, int64_t out, Shape kernel, ConvOptions options, bool with_bias)
    : options_(std::move(options)) {
    if (kernel.size() == 1) kernel.push_back(kernel[0]);
    if (kernel.size() != 2 || kernel[0] <= 0 || kernel[1] <= 0)
        fail("Conv2d", "kernel must be one or two positive sizes, got " + shape_str(kernel));
    const int64_t g = options_.groups;
    if (in <= 0 || out <= 0 || g <= 0 || in % g != 0 || out % g != 0)
        fail("Conv2d", "channels in " + std::to_string(in) + ", out " + std::to_string(out) +
                           " must be positive multiples of groups " + std::to_string(g));
    const int64_t fan_in = in / g * kernel[0] * kernel[1];
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    weight = register_parameter("weight", init_uniform({out, in / g, kernel[0], kernel[1]}, bound));
    if (with_bias) bias = register_parameter("bias", init_uniform({out}, bound));
    options_.bias.reset();
}

Tensor Conv2d::forward(const Tensor& x) {
    ConvOptions o = options_;
    o.bias = bias;
    return nn::conv2d(x, weight, o);
}

// ---- BatchNorm2d ----------------------------------------------------------------------------

BatchNorm2d::BatchNorm2d(int64_t c, double eps, double momentum)
    : c_(c), eps_(eps), momentum_(momentum) {
    if (c <= 0) fail("BatchNorm2d", "num_features must be positive, got " + std::to_string(c));
    if (!(momentum >= 0 && momentum <= 1))
        fail("BatchNorm2d", "momentum must be in [0, 1], got " + std::to_string(momentum));
    weight = register_parameter("weight", realized_const({c}, 1.0));
    bias = register_parameter("bias", realized_const({c}, 0.0));
    running_mean = register_buffer("running_mean", realized_const({c}, 0.0));
    running_var = register_buffer("running_var", realized_const({c}, 1.0));
    num_batches_tracked =
        register_buffer("num_batches_tracked", realized_const({}, 0.0, DType::Int64));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
    const char* op = "BatchNorm2d";
    if (x.ndim() != 4 || x.shape()[1] != c_)
        fail(op,
             "input must be [N, " + std::to_string(c_) + ", H, W], got " + shape_str(x.shape()));
    // A pending update of this module (a forward without a step since) is realized first.
    if (has_step_assign(running_mean)) realize_step_assigns();
    if (!is_training()) return nn::batch_norm(x, running_mean, running_var, weight, bias, eps_);
    const int64_t n = x.shape()[0] * x.shape()[2] * x.shape()[3];
    if (n <= 1)
        fail(op,
             "training needs more than one value per channel, got input " + shape_str(x.shape()));
    const Tensor mean = x.mean({0, 2, 3});
    const Tensor d = x - mean.reshape({1, c_, 1, 1});
    const Tensor var = (d * d).mean({0, 2, 3}); // biased: what normalizes
    Tensor y = d * (var.reshape({1, c_, 1, 1}) + eps_).rsqrt();
    y = y * weight.reshape({1, c_, 1, 1}) + bias.reshape({1, c_, 1, 1});
    {
        NoGrad ng;
        const double m = momentum_, unbias = static_cast<double>(n) / static_cast<double>(n - 1);
        assign_at_step(running_mean, running_mean * (1 - m) + mean.detach() * m);
        assign_at_step(running_var, running_var * (1 - m) + var.detach() * (m * unbias));
        assign_at_step(num_batches_tracked, num_batches_tracked + int64_t{1});
    }
    return y;
}

// ---- LayerNorm, Embedding, Dropout, Functional, Sequential ----------------------------------

LayerNorm::LayerNorm(Shape shape, double eps) : shape_(shape), eps_(eps) {
    weight = register_parameter("weight", realized_const(shape, 1.0));
    bias = register_parameter("bias", realized_const(shape, 0.0));
}

Tensor LayerNorm::forward(const Tensor& x) { return nn::layer_norm(x, shape_, weight, bias, eps_); }

Embedding::Embedding(int64_t n, int64_t dim) {
    if (n <= 0 || dim <= 0)
        fail("Embedding",
             "sizes must be positive, got " + std::to_string(n) + " x " + std::to_string(dim));
    Tensor w = Tensor::randn({n, dim});
    w.realize();
    weight = register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& index) { return nn::embedding(index, weight); }

Dropout::Dropout(double p) : p_(p) {
    if (!(p >= 0 && p <= 1)) fail("Dropout", "p must be in [0, 1], got " + std::to_string(p));
}

Tensor Dropout::forward(const Tensor& x) { return nn::dropout(x, p_, is_training()); }

Functional::Functional(std::function<Tensor(const Tensor&)> f, std::string name)
    : f_(std::move(f)), name_(std::move(name)) {
    if (!f_) fail("Functional", "empty function");
}

Tensor Sequential::forward(const Tensor& x) {
    Tensor y = x;
    for (Module* m : layers_) y = m->forward(y);
    return y;
}

// ---- MultiheadAttention ---------------------------------------------------------------------

MultiheadAttention::MultiheadAttention(int64_t dim, int64_t heads, bool causal)
    : out_proj(register_module("out_proj", Linear(dim > 0 ? dim : 1, dim > 0 ? dim : 1))),
      dim_(dim), heads_(heads), causal_(causal) {
    if (dim <= 0 || heads <= 0 || dim % heads != 0)
        fail("MultiheadAttention", "embed_dim " + std::to_string(dim) +
                                       " must be a positive multiple of num_heads " +
                                       std::to_string(heads));
    // PyTorch: xavier_uniform_ for in_proj_weight, zeros for the biases.
    const double bound = std::sqrt(6.0 / static_cast<double>(dim + 3 * dim));
    in_proj_weight = register_parameter("in_proj_weight", init_uniform({3 * dim, dim}, bound));
    in_proj_bias = register_parameter("in_proj_bias", realized_const({3 * dim}, 0.0));
    out_proj.bias->assign(Tensor::zeros({dim}));
}

Tensor MultiheadAttention::forward(const Tensor& x) { return forward(x, x, x); }

Tensor MultiheadAttention::forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                   std::optional<Tensor> attn_mask,
                                   std::optional<Tensor> key_padding_mask,
                                   std::source_location loc) {
    const UserCall site(loc);
    const char* op = "MultiheadAttention";
    const auto is_nle = [&](const Tensor& t) {
        return t.ndim() == 3 && t.shape()[2] == dim_ && t.shape()[0] == q.shape()[0];
    };
    if (q.ndim() != 3 || !is_nle(q) || !is_nle(k) || !is_nle(v) || k.shape()[1] != v.shape()[1])
        fail(op, "query, key and value must be [N, L, " + std::to_string(dim_) + "], [N, S, " +
                     std::to_string(dim_) + "], [N, S, " + std::to_string(dim_) + "], got " +
                     shape_str(q.shape()) + ", " + shape_str(k.shape()) + ", " +
                     shape_str(v.shape()));
    const int64_t N = q.shape()[0], L = q.shape()[1], S = k.shape()[1], H = heads_,
                  D = dim_ / heads_;
    const auto w = in_proj_weight.split(dim_, 0);
    const auto b = in_proj_bias.split(dim_, 0);
    const auto heads = [&](const Tensor& x, int i, int64_t len) {
        return nn::linear(x, w[static_cast<size_t>(i)], b[static_cast<size_t>(i)])
            .reshape({N, len, H, D})
            .transpose(1, 2); // [N, H, len, D]
    };
    const Tensor qh = heads(q, 0, L), kh = heads(k, 1, S), vh = heads(v, 2, S);
    // PyTorch's module masks: true = may NOT attend; floats are added. Both become one additive
    // or boolean "may attend" mask of [N, H, L, S] for the functional form.
    std::optional<Tensor> mask;
    if (attn_mask) {
        Tensor m = *attn_mask;
        if (m.shape() == Shape{N * H, L, S})
            m = m.reshape({N, H, L, S});
        else if (m.shape() != Shape{L, S})
            fail(op, "attn_mask must be [" + std::to_string(L) + ", " + std::to_string(S) +
                         "] or [" + std::to_string(N * H) + ", " + std::to_string(L) + ", " +
                         std::to_string(S) + "], got " + shape_str(m.shape()));
        if (m.dtype().is_bool())
            mask = m.logical_not();
        else if (m.dtype().is_float())
            mask = m;
        else
            fail(op, "attn_mask must be bool or float, got " + m.dtype().name());
    }
    if (key_padding_mask) {
        const Tensor& p = *key_padding_mask;
        if (p.shape() != Shape{N, S})
            fail(op, "key_padding_mask must be [" + std::to_string(N) + ", " + std::to_string(S) +
                         "], got " + shape_str(p.shape()));
        Tensor pm = p.reshape({N, 1, 1, S});
        if (p.dtype().is_bool()) {
            const Tensor attend = pm.logical_not();
            if (!mask)
                mask = attend;
            else if (mask->dtype().is_bool())
                mask = logical_and(*mask, attend);
            else
                mask = where(attend, *mask, -INFINITY);
        } else if (p.dtype().is_float()) {
            if (!mask)
                mask = pm;
            else if (mask->dtype().is_bool())
                mask = where(*mask, pm, -INFINITY);
            else
                mask = *mask + pm;
        } else {
            fail(op, "key_padding_mask must be bool or float, got " + p.dtype().name());
        }
    }
    const Tensor o = nn::scaled_dot_product_attention(qh, kh, vh, causal_, mask);
    return out_proj.forward(o.transpose(1, 2).reshape({N, L, dim_}));
}

} // namespace tempura::nn
