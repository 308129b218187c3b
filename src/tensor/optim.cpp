// nn::SGD, nn::Adam, nn::AdamW: updates written with tensor ops (under NoGrad), realized together
// with the gradients and the losses that made them: one plan per step.
#include "tempura/tensor/optim.hpp"

#include <cmath>
#include <functional>

#include "tempura/error.hpp"
#include "tensor_impl.hpp"

namespace tempura::nn {

Optimizer::Optimizer(std::vector<Tensor> params, const char* name)
    : params_(std::move(params)), state_(params_.size()), name_(name) {
    for (size_t i = 0; i < params_.size(); ++i)
        if (!params_[i].requires_grad_enabled())
            fail(name_, "parameter " + std::to_string(i) +
                            " does not require a gradient (call requires_grad() on it)");
}

void Optimizer::zero_grad() {
    for (const Tensor& p : params_) p.zero_grad();
}

void Optimizer::step(std::source_location loc) {
    const UserCall site(loc);
    last_losses_.clear();
    // The parameters that have a gradient, and the losses whose backward() made it.
    std::vector<size_t> which;
    std::vector<Tensor> grads, pending;
    for (size_t i = 0; i < params_.size(); ++i) {
        const auto& sh = TensorAccess::shared(params_[i]);
        std::lock_guard<std::mutex> l(sh->mu);
        if (!sh->grad) continue;
        which.push_back(i);
        grads.push_back(*sh->grad);
        for (Tensor& t : sh->pending) pending.push_back(std::move(t));
        sh->pending.clear();
    }
    if (which.empty()) return;
    ++steps_;
    const auto on = detail::on_device_of(params_[which.front()]);
    const Tensor scalars = step_scalars();
    std::vector<Tensor> next(which.size());
    std::vector<std::vector<Tensor>> next_state(which.size());
    {
        NoGrad ng;
        for (size_t k = 0; k < which.size(); ++k) {
            const size_t i = which[k];
            if (state_[i].empty()) state_[i] = init_state(params_[i]);
            next_state[k] = state_[i];
            next[k] = update(i, params_[i], grads[k], scalars, next_state[k]);
        }
    }
    // One schedule: forward (the pending losses), backward (the gradients), the updates.
    std::vector<std::reference_wrapper<Tensor>> all;
    for (Tensor& t : pending) all.push_back(t);
    for (Tensor& t : grads) all.push_back(t);
    for (Tensor& t : next) all.push_back(t);
    for (auto& st : next_state)
        for (Tensor& t : st) all.push_back(t);
    // State updates that belong to this step (BatchNorm's running statistics).
    std::vector<std::pair<Tensor, Tensor>> at_step = detail::take_step_assigns();
    for (auto& tv : at_step) all.push_back(tv.second);
    try {
        tempura::realize(all);
    } catch (...) {
        detail::restore_step_assigns(std::move(at_step)); // not lost: realized with a later step
        throw;
    }
    for (auto& [t, v] : at_step) TensorAccess::rebind(t, v);
    for (size_t k = 0; k < which.size(); ++k) {
        const size_t i = which[k];
        TensorAccess::rebind(params_[i], next[k]);
        state_[i] = std::move(next_state[k]);
        const auto& sh = TensorAccess::shared(params_[i]);
        std::lock_guard<std::mutex> l(sh->mu);
        sh->grad = grads[k]; // realized: grad() reads it without running the backward again
    }
    for (const Tensor& t : pending) last_losses_.push_back(t.buffer());
}

namespace {
Tensor scalar(const Tensor& like, double v) { return tempura::detail::scalar_like(like, v); }

// Zeros in a buffer of p's shape, dtype and device. State that starts as data, as it is after
// every step, makes the first step's plan the plan of every step: zeros as a constant would be
// folded into the first plan, and the second step would compile a plan of its own.
Tensor zeros_buffer(const Tensor& p) {
    Tensor z = Tensor::from_vector(std::vector<float>(static_cast<size_t>(p.numel()), 0.0f),
                                   p.shape(), p.dtype());
    if (z.device() != p.device()) {
        z = z.to(p.device());
        z.realize();
    }
    return z;
}
} // namespace

// ---- SGD ----------------------------------------------------------------------------------------

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay)
    : Optimizer(std::move(params), "SGD"), lr_(lr), momentum_(momentum),
      weight_decay_(weight_decay) {
    if (!(lr >= 0)) fail("SGD", "learning rate must be >= 0, got " + std::to_string(lr));
    if (!(momentum >= 0)) fail("SGD", "momentum must be >= 0, got " + std::to_string(momentum));
    if (!(weight_decay >= 0))
        fail("SGD", "weight_decay must be >= 0, got " + std::to_string(weight_decay));
}

std::vector<Tensor> SGD::init_state(const Tensor& p) {
    // momentum 0 + g is g: the first step's b = g, with the plan of the steps after it.
    if (momentum_ != 0) return {zeros_buffer(p)};
    return {};
}

Tensor SGD::update(size_t, const Tensor& p, const Tensor& grad, const Tensor&,
                   std::vector<Tensor>& state) {
    Tensor g = grad;
    if (weight_decay_ != 0) g = g + p * scalar(p, weight_decay_);
    if (momentum_ != 0) {
        // b = g on the first step, then b = momentum b + g
        const Tensor b = state.empty() ? g : state[0] * scalar(p, momentum_) + g;
        state = {b};
        g = b;
    }
    return p - g * scalar(p, lr_);
}

// ---- Adam and AdamW
// -------------------------------------------------------------------------------

Adam::Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
           double weight_decay)
    : Adam(std::move(params), lr, beta1, beta2, eps, weight_decay, false, "Adam") {}

Adam::Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
           double weight_decay, bool decoupled, const char* name)
    : Optimizer(std::move(params), name), lr_(lr), beta1_(beta1), beta2_(beta2), eps_(eps),
      weight_decay_(weight_decay), decoupled_(decoupled) {
    if (!(lr >= 0)) fail(name, "learning rate must be >= 0, got " + std::to_string(lr));
    if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
        fail(name, "betas must be in [0, 1), got (" + std::to_string(beta1) + ", " +
                       std::to_string(beta2) + ")");
    if (!(eps >= 0)) fail(name, "eps must be >= 0, got " + std::to_string(eps));
    if (!(weight_decay >= 0))
        fail(name, "weight_decay must be >= 0, got " + std::to_string(weight_decay));
}

AdamW::AdamW(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
             double weight_decay)
    : Adam(std::move(params), lr, beta1, beta2, eps, weight_decay, true, "AdamW") {}

std::vector<Tensor> Adam::init_state(const Tensor& p) { return {zeros_buffer(p), zeros_buffer(p)}; }

// [lr / (1 - beta1^t), 1 / sqrt(1 - beta2^t)]: the step's bias corrections, as data.
Tensor Adam::step_scalars() {
    const double t = static_cast<double>(steps_);
    const double bc1 = 1 - std::pow(beta1_, t), bc2 = 1 - std::pow(beta2_, t);
    return Tensor::from_vector(std::vector<double>{lr_ / bc1, 1 / std::sqrt(bc2)});
}

Tensor Adam::update(size_t, const Tensor& p, const Tensor& grad, const Tensor& scalars,
                    std::vector<Tensor>& state) {
    Tensor g = grad, base = p;
    if (weight_decay_ != 0) {
        if (decoupled_)
            base = p * scalar(p, 1 - lr_ * weight_decay_);
        else
            g = g + p * scalar(p, weight_decay_);
    }
    const Tensor m = state[0] * scalar(p, beta1_) + g * scalar(p, 1 - beta1_);
    const Tensor v = state[1] * scalar(p, beta2_) + g * g * scalar(p, 1 - beta2_);
    state = {m, v};
    const Tensor s = scalars.cast(p.dtype());
    const Tensor step_size = s.shrink({{0, 1}}).reshape({});
    const Tensor inv_sqrt_bc2 = s.shrink({{1, 2}}).reshape({});
    const Tensor denom = v.sqrt() * inv_sqrt_bc2 + scalar(p, eps_);
    return base - m / denom * step_size;
}

} // namespace tempura::nn

// ---- checkpoints
// ---------------------------------------------------------------------------------

namespace tempura::nn {

namespace {
// A realized copy of t in a buffer of its own (nothing else can rebind or write it).
Tensor own_copy(const Tensor& t) {
    Tensor v = t;
    v.realize();
    std::vector<unsigned char> staging;
    runtime::DeviceScope on(TensorAccess::core(v).device);
    return Tensor::from_blob(runtime::host_bytes(*v.buffer(), staging), v.shape(), v.dtype());
}
} // namespace

std::map<std::string, Tensor> Optimizer::state_dict() const {
    std::map<std::string, Tensor> out;
    out.emplace("step", Tensor::from_vector(std::vector<int64_t>{steps_}, Shape{}));
    const std::vector<std::string> names = state_names();
    for (size_t i = 0; i < state_.size(); ++i)
        for (size_t k = 0; k < state_[i].size() && k < names.size(); ++k)
            out.emplace("state." + std::to_string(i) + "." + names[k], own_copy(state_[i][k]));
    return out;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
    const std::vector<std::string> names = state_names();
    std::vector<std::string> problems;
    std::vector<std::vector<Tensor>> next(params_.size());
    std::vector<std::vector<bool>> have(params_.size(), std::vector<bool>(names.size(), false));
    int64_t steps = -1;
    bool saw_step = false;
    for (const auto& [key, t] : state) {
        if (key == "step") {
            saw_step = true;
            if (t.numel() != 1 || !t.dtype().is_int())
                problems.push_back("'step' must be one integer, got " + t.dtype().name() + " " +
                                   shape_str(t.shape()));
            else
                steps = t.item<int64_t>();
            continue;
        }
        // state.<i>.<name>
        size_t i = 0, k = names.size();
        bool ok = key.rfind("state.", 0) == 0;
        if (ok) {
            const size_t dot = key.find('.', 6);
            ok = dot != std::string::npos && dot > 6 &&
                 key.find_first_not_of("0123456789", 6) == dot && dot - 6 < 10;
            if (ok) {
                i = std::stoul(key.substr(6, dot - 6));
                const std::string n = key.substr(dot + 1);
                for (size_t j = 0; j < names.size(); ++j)
                    if (names[j] == n) k = j;
                ok = i < params_.size() && k < names.size();
            }
        }
        if (!ok) {
            problems.push_back("unexpected key '" + key + "'");
            continue;
        }
        const Tensor& p = params_[i];
        if (next[i].empty()) next[i].resize(names.size());
        have[i][k] = true;
        if (t.shape() != p.shape() || t.dtype() != p.dtype()) {
            problems.push_back("'" + key + "' is " + t.dtype().name() + " " + shape_str(t.shape()) +
                               ", parameter " + std::to_string(i) + " is " + p.dtype().name() +
                               " " + shape_str(p.shape()));
            continue;
        }
        next[i][k] = t;
    }
    if (!saw_step)
        problems.push_back("missing key 'step'");
    else if (steps < 0 && problems.empty())
        problems.push_back("'step' is negative");
    for (size_t i = 0; i < params_.size(); ++i) {
        if (next[i].empty()) continue;
        for (size_t k = 0; k < names.size(); ++k)
            if (!have[i][k])
                problems.push_back("missing key 'state." + std::to_string(i) + "." + names[k] +
                                   "'");
    }
    if (!problems.empty()) {
        std::string msg = "cannot load the state dict: ";
        for (size_t j = 0; j < problems.size(); ++j) msg += (j ? "; " : "") + problems[j];
        fail(name_, msg);
    }
    for (size_t i = 0; i < params_.size(); ++i) {
        std::vector<Tensor> st;
        for (Tensor& t : next[i]) {
            runtime::DeviceScope on(TensorAccess::core(params_[i]).device);
            st.push_back(own_copy(t.to(params_[i].device())));
        }
        next[i] = std::move(st);
    }
    state_ = std::move(next);
    steps_ = steps;
}

} // namespace tempura::nn
