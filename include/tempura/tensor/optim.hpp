#pragma once
// Optimizers: nn::SGD, nn::Adam and nn::AdamW, with PyTorch's update formulas. step() realizes,
// as one plan, the losses whose backward() filled the gradients, the gradients, the new values
// of the parameters and the optimizer's state; then every parameter (and every copy of it) holds
// its new value. Scalars that change from step to step (Adam's bias corrections) are read from a
// buffer, so the plan is built once and replayed.
#include <cstdint>
#include <map>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "tempura/tensor/tensor.hpp"

namespace tempura::nn {

// State updates that belong to the training step rather than to a plan of their own
// (BatchNorm2d's running statistics, computed from the batch statistics of the forward pass):
// assign_at_step(target, value) records that `target` (a realized tensor) takes `value` (lazy)
// with the next optimizer step(), which realizes it in the step's one plan, so that what it
// shares with the forward pass is computed once. realize_step_assigns() realizes and assigns the
// pending ones now (for a reader that cannot wait for the step; reading a target's elements with
// to_vector() or item() does it first); has_step_assign(target): whether target has one pending.
// A second value for a target with one pending replaces it: compute it from the pending value,
// or call realize_step_assigns() first (BatchNorm2d does).
void assign_at_step(const Tensor& target, const Tensor& value);
bool has_step_assign(const Tensor& target);
void realize_step_assigns();

class Optimizer {
  public:
    // The parameters must require gradients (throws "[optimizer] parameter 1 does not require a
    // gradient"). The optimizer holds copies: they share the parameters' values and gradients.
    explicit Optimizer(std::vector<Tensor> params, const char* name);
    virtual ~Optimizer() = default;
    // Drops every parameter's gradient.
    void zero_grad();
    // One update of every parameter that has a gradient (one without is left as it is). The
    // update's nodes record the caller's line (provenance), as every public call's do.
    void step(std::source_location loc = std::source_location::current());
    const std::vector<Tensor>& params() const { return params_; }
    int64_t steps() const { return steps_; }
    // For checkpoints: the step count ("step", Int64) and each parameter's state tensors
    // ("state.<i>.<name>": Adam's exp_avg and exp_avg_sq, SGD's momentum_buffer), as PyTorch
    // names them. load_state_dict checks every key and shape against this optimizer and its
    // parameters ("[optimizer] ..." listing what does not fit; nothing changes then) and takes
    // copies: resuming from it continues bit for bit where the saved optimizer stopped.
    std::map<std::string, Tensor> state_dict() const;
    void load_state_dict(const std::map<std::string, Tensor>& state);

  protected:
    // The per-step scalars the update reads (a realized tensor), or an empty tensor.
    virtual Tensor step_scalars() { return Tensor(); }
    // Parameter i's new value from its gradient; `state` (the optimizer's tensors for it, made
    // by init_state) is replaced by its new values. Runs under NoGrad.
    virtual Tensor update(size_t i, const Tensor& p, const Tensor& grad, const Tensor& scalars,
                          std::vector<Tensor>& state) = 0;
    virtual std::vector<Tensor> init_state(const Tensor& p) = 0;
    // The names of a parameter's state tensors, in the order of state_[i].
    virtual std::vector<std::string> state_names() const = 0;

    std::vector<Tensor> params_;
    std::vector<std::vector<Tensor>> state_;
    // The buffers of the losses the last step() realized, kept until the next step: the
    // caller's own copy of a loss (loss.item() after step()) then reads the value the plan
    // computed instead of running the forward pass again. The buffers only: a realized loss
    // that tracks gradients also holds its graph's inputs (the old parameters, the batch).
    std::vector<std::shared_ptr<runtime::Buffer>> last_losses_;
    int64_t steps_ = 0;
    const char* name_;
};

// p -= lr * (momentum buffer or g), with g += weight_decay p; the buffer is
// b = momentum b + g (b = g on the first step), as torch.optim.SGD without dampening.
class SGD : public Optimizer {
  public:
    SGD(std::vector<Tensor> params, double lr, double momentum = 0, double weight_decay = 0);

  protected:
    Tensor update(size_t i, const Tensor& p, const Tensor& grad, const Tensor& scalars,
                  std::vector<Tensor>& state) override;
    std::vector<Tensor> init_state(const Tensor& p) override;
    std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }

  private:
    double lr_, momentum_, weight_decay_;
};

// torch.optim.Adam: g += weight_decay p (L2); m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
class Adam : public Optimizer {
  public:
    Adam(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
         double eps = 1e-8, double weight_decay = 0);

  protected:
    Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
         double weight_decay, bool decoupled, const char* name);
    Tensor step_scalars() override;
    Tensor update(size_t i, const Tensor& p, const Tensor& grad, const Tensor& scalars,
                  std::vector<Tensor>& state) override;
    std::vector<Tensor> init_state(const Tensor& p) override;
    std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }

  private:
    double lr_, beta1_, beta2_, eps_, weight_decay_;
    bool decoupled_;
};

// torch.optim.AdamW: Adam whose weight decay is decoupled: p *= 1 - lr weight_decay, then the
// Adam step without the L2 term.
class AdamW : public Adam {
  public:
    AdamW(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
          double eps = 1e-8, double weight_decay = 0.01);
};

} // namespace tempura::nn
