#pragma once
// tempura::nn modules, as libtorch's torch::nn::Module: parameters, buffers and child modules
// registered by name, so that a model's state has PyTorch's dotted names ("layer1.0.conv1.weight",
// "bn1.running_mean") and a state dict written by PyTorch loads into the same model written here.
//
// Modules are values with stable children: register_module(name, child) moves the child into
// the parent and returns a reference to it that stays valid (also when the parent is moved).
// Modules move; they do not copy. Parameters and buffers are tensors whose copies share their
// value (Tensor::assign): a module's members and its registry are copies of one tensor, so that
// load_state_dict, an optimizer's step and to(device) update both. Give a parameter a new value
// with assign(), not operator= (which rebinds only the one handle).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tempura/tensor/nn.hpp"
#include "tempura/tensor/tensor.hpp"

namespace tempura::nn {

class Module {
  public:
    Module() = default;
    virtual ~Module() = default;
    Module(Module&&) = default;
    Module& operator=(Module&&) = default;
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;

    // The module's type, as in errors and printouts ("Linear").
    virtual std::string name() const { return "Module"; }
    // The forward pass of a module with one input; modules with other inputs throw
    // "[module] MultiheadAttention takes no single input ...". operator() calls it.
    virtual Tensor forward(const Tensor& x);
    // The nodes forward() builds, and its errors, name the line of this call.
    Tensor operator()(const Tensor& x, std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        return forward(x);
    }

    // ---- registration (names: no '.', unique within the module) --------------------------
    // A parameter: a float tensor that requires a gradient (realized here). Returns the
    // registered tensor (a copy sharing its value with `t`).
    Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
    // A buffer: state that is saved but not trained (running statistics).
    Tensor register_buffer(const std::string& name, Tensor t);
    // Moves `child` into this module; the reference stays valid while this module lives.
    template <class M>
    M& register_module(const std::string& name, M child) {
        auto owned = std::make_unique<M>(std::move(child));
        M& ref = *owned;
        add_child(name, std::move(owned));
        return ref;
    }

    // ---- what the module holds (recursively, own entries first, children in order) --------
    std::vector<std::pair<std::string, Tensor>> named_parameters() const;
    std::vector<Tensor> parameters() const;
    std::vector<std::pair<std::string, Tensor>> named_buffers() const;
    std::vector<std::pair<std::string, Module*>> named_children() const;
    // Parameters and buffers by their dotted names (PyTorch's state_dict keys).
    std::map<std::string, Tensor> state_dict() const;
    // Gives every entry of `state` to the parameter or buffer of that name (values converted to
    // its dtype and device). With `strict`, every key of the module must be in `state` and
    // every key of `state` in the module. Throws "[load_state_dict] ..." listing every missing
    // key, every unexpected key and every shape mismatch (both shapes); when it throws, nothing
    // has changed.
    void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);

    // Training mode (the default) or evaluation mode, for this module and its children.
    Module& train(bool on = true);
    Module& eval() { return train(false); }
    bool is_training() const { return training_; }
    // Moves every parameter and buffer to `device` (their copies see it).
    Module& to(const std::string& device);

  protected:
    void add_child(const std::string& name, std::unique_ptr<Module> child);

  private:
    friend void load(Module&, const std::string&);
    void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out,
                 bool params, bool buffers) const;
    void load_impl(const std::map<std::string, Tensor>& state, bool strict, bool owned);

    std::vector<std::pair<std::string, Tensor>> params_, buffers_;
    std::vector<std::pair<std::string, std::unique_ptr<Module>>> children_;
    bool training_ = true;
};

// Writes the module's state dict as a safetensors file (PyTorch's key names), atomically.
void save(const Module& module, const std::string& path);
// Loads a safetensors state dict into the module (strict), on the module's device.
void load(Module& module, const std::string& path);

// ---- the modules. Initialization as PyTorch's (uniform +-1/sqrt(fan_in) for Linear and Conv2d,
// N(0, 1) for Embedding, ones and zeros for the norms), drawn by Tensor::rand. ------------------

// y = x W^T + b: weight [out, in], bias [out].
class Linear : public Module {
  public:
    Linear(int64_t in_features, int64_t out_features, bool bias = true);
    std::string name() const override { return "Linear"; }
    Tensor forward(const Tensor& x) override;
    Tensor weight;
    std::optional<Tensor> bias;
};

// weight [out, in / groups, kh, kw], bias [out] (the options' bias field is not used: `bias`
// says whether the module has one).
class Conv2d : public Module {
  public:
    Conv2d(int64_t in_channels, int64_t out_channels, Shape kernel, ConvOptions options = {},
           bool bias = true);
    Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, ConvOptions options = {},
           bool bias = true)
        : Conv2d(in_channels, out_channels, Shape{kernel}, std::move(options), bias) {}
    std::string name() const override { return "Conv2d"; }
    Tensor forward(const Tensor& x) override;
    Tensor weight;
    std::optional<Tensor> bias;

  private:
    ConvOptions options_;
};

// Batch normalization over [N, C, H, W] per channel: weight, bias, and the buffers running_mean,
// running_var and num_batches_tracked. In training mode it normalizes with the batch's mean and
// biased variance and updates running_mean and running_var with `momentum` (the variance
// unbiased, n / (n - 1), as PyTorch). Those updates join the next training step's plan (the
// optimizer's step() realizes them with the loss, the gradients and the new parameters, from
// the same batch statistics: the forward runs once); reading the buffers before that
// (state_dict, named_buffers, another forward of this module, evaluation mode) realizes them
// first. In evaluation mode it uses the running statistics.
class BatchNorm2d : public Module {
  public:
    explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1);
    std::string name() const override { return "BatchNorm2d"; }
    Tensor forward(const Tensor& x) override;
    Tensor weight, bias, running_mean, running_var, num_batches_tracked;

  private:
    int64_t c_;
    double eps_, momentum_;
};

// Normalizes over the last dims (normalized_shape); weight and bias of that shape.
class LayerNorm : public Module {
  public:
    explicit LayerNorm(Shape normalized_shape, double eps = 1e-5);
    std::string name() const override { return "LayerNorm"; }
    Tensor forward(const Tensor& x) override;
    Tensor weight, bias;

  private:
    Shape shape_;
    double eps_;
};

// Rows of weight [num_embeddings, embedding_dim] at the indices.
class Embedding : public Module {
  public:
    Embedding(int64_t num_embeddings, int64_t embedding_dim);
    std::string name() const override { return "Embedding"; }
    Tensor forward(const Tensor& index) override;
    Tensor weight;
};

// nn::dropout with the module's training flag.
class Dropout : public Module {
  public:
    explicit Dropout(double p = 0.5);
    std::string name() const override { return "Dropout"; }
    Tensor forward(const Tensor& x) override;

  private:
    double p_;
};

// A function as a module without state (an activation in a Sequential: it takes its index,
// as torch.nn.ReLU does, so that the other indices match PyTorch's).
class Functional : public Module {
  public:
    explicit Functional(std::function<Tensor(const Tensor&)> f, std::string name = "Functional");
    std::string name() const override { return name_; }
    Tensor forward(const Tensor& x) override { return f_(x); }

  private:
    std::function<Tensor(const Tensor&)> f_;
    std::string name_;
};

// Children named "0", "1", ..., applied in order.
class Sequential : public Module {
  public:
    Sequential() = default;
    template <class... M>
    requires(sizeof...(M) > 0 && (std::is_base_of_v<Module, std::decay_t<M>> &&
                                  ...)) explicit Sequential(M&&... modules) {
        (push_back(std::forward<M>(modules)), ...);
    }
    template <class M>
    M& push_back(M module) {
        M& ref = register_module(std::to_string(layers_.size()), std::move(module));
        layers_.push_back(&ref);
        return ref;
    }
    std::string name() const override { return "Sequential"; }
    Tensor forward(const Tensor& x) override;
    size_t size() const { return layers_.size(); }
    Module& operator[](size_t i) { return *layers_.at(i); }

  private:
    std::vector<Module*> layers_;
};

// torch.nn.MultiheadAttention with batch_first=True: inputs [N, L, E]. Parameters as PyTorch
// names them: in_proj_weight [3E, E], in_proj_bias [3E], out_proj.weight [E, E],
// out_proj.bias [E]. Masks as PyTorch's module takes them: attn_mask [L, S] or [N * heads, L, S]
// (bool: true = may NOT attend; float: added to the scores), key_padding_mask [N, S] (bool:
// true = padding, ignored). With `causal`, query i sees keys 0..i only.
class MultiheadAttention : public Module {
  public:
    MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool causal = false);
    std::string name() const override { return "MultiheadAttention"; }
    // Self-attention: forward(x, x, x).
    Tensor forward(const Tensor& x) override;
    Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                   std::optional<Tensor> attn_mask = {},
                   std::optional<Tensor> key_padding_mask = {},
                   std::source_location loc = std::source_location::current());
    Tensor in_proj_weight, in_proj_bias;
    Linear& out_proj;

  private:
    int64_t dim_, heads_;
    bool causal_;
};

} // namespace tempura::nn
