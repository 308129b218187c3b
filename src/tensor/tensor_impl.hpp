#pragma once
// Internals shared by the translation units of src/tensor (not installed).
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "tempura/ir/custom_grad.hpp"
#include "tempura/realize/device.hpp"
#include "tempura/tensor/tensor.hpp"

namespace tempura {

// The one friend of Tensor: builds tensors from nodes and reads their buffer lists.
struct TensorAccess {
    static std::shared_ptr<const Tensor::Buffers> no_buffers();
    // The sorted union of two buffer lists (sharing an input list when possible). Throws
    // "[<op>] tensors on different devices: CPU and EMU" when both read buffers and their
    // devices differ (a tensor that reads none, a constant, goes with any device).
    static std::shared_ptr<const Tensor::Buffers>
    merge(const char* op, const std::shared_ptr<const Tensor::Buffers>& a,
          const std::shared_ptr<const Tensor::Buffers>& b);
    // A tensor over `uop`; `tracks`: gradients flow through it (an input does). Under NoGrad a
    // tracking result is wrapped in DETACH and does not track.
    static Tensor make(UOp uop, Shape shape, std::shared_ptr<const Tensor::Buffers> buffers,
                       bool symbolic, bool tracks = false);
    // The device x lives on: its buffers', or the one to() pinned it to; none for a bare
    // constant, which goes with any device.
    static std::optional<int> placed(const Tensor& x);
    // Puts `out`, computed from `ins`, on their device; throws "[<op>] tensors on different
    // devices: CPU and EMU" when two of them live on different ones.
    static void place(const char* op, Tensor& out,
                      std::initializer_list<std::reference_wrapper<const Tensor>> ins);
    static bool symbolic(const Tensor& x) { return x.core().symbolic; }
    static bool tracks(const Tensor& x) { return x.core().tracks_grad; }
    static const Tensor::Core& core(const Tensor& x) { return x.core(); }
    static const std::shared_ptr<Tensor::Shared>& shared(const Tensor& x) { return x.shared_; }
    // x's Shared state, made (from x's core) if it has none.
    static Tensor::Shared& share(Tensor& x);
    // Gives t (and every copy sharing its state) the realized `value`'s buffer (assign without
    // the checks; optimizers realize their updates together, then rebind).
    static void rebind(Tensor& t, const Tensor& value);
    // A tensor over `uop`, which reads what x reads.
    static Tensor derive(const Tensor& x, UOp uop, Shape shape);
    // The same, over a node that also reads what `also` reads.
    static Tensor derive(const Tensor& x, UOp uop, Shape shape, const Tensor& also);
    static const std::shared_ptr<const Tensor::Buffers>& buffers(const Tensor& x);
    static void set_buffer(Tensor& x, std::shared_ptr<runtime::Buffer> buffer);
    // A CONST scalar tensor of `dtype` (value converted as C does; floats rounded by the dtype).
    static Tensor scalar(DType dtype, double value);
    static Tensor scalar_int(DType dtype, int64_t value);
};

// The state copies of a tensor share: its core, and its autograd leaf state.
struct Tensor::Shared {
    Core core;
    bool requires_grad = false;
    std::mutex mu;               // guards grad and pending
    std::optional<Tensor> grad;  // accumulated (lazy until realized)
    std::vector<Tensor> pending; // losses whose backward() added to grad since it was realized
    // A loss's: the leaves whose pending gradient its backward() added to. Realizing the loss
    // (loss.item() before the optimizer's step) realizes their gradients in the same plan, so
    // that the forward pass runs once, not again in step().
    std::vector<std::weak_ptr<Shared>> grads_waiting;
};

namespace detail {

// 16-bit floats compute a composite op (exp as 2^(x log2 e), sigmoid, tanh, ...) in float32
// and round once: its intermediate steps rounded to 16 bits would cost several ulp.
inline bool is_16bit_float(const Tensor& x) { return x.dtype().is_16bit_float(); }
template <class F>
Tensor in_float32(const Tensor& x, F&& f) {
    return f(x.cast(DType::Float32)).cast(x.dtype());
}

// The ops that make tensors of their own (indices, masks, counters) make them on x's device.
inline runtime::DeviceScope on_device_of(const Tensor& x) {
    return runtime::DeviceScope(TensorAccess::core(x).device);
}

// Realizes a loss whose backward() left gradients pending together with those gradients (one
// plan); false when it has none waiting (autograd.cpp).
bool realize_with_pending_grads(Tensor& loss);

// Adds each gradient to its leaf's accumulated one, as backward() does (reshaped to the leaf's
// dims; a leaf with 8 losses pending realizes its sum, so that the lazy graph stays bounded),
// and lists the leaves, in this order, as waiting on `loss` (autograd.cpp). Tensor::backward
// and dist::DataParallel::backward add their gradients through it.
using LeafGrad = std::pair<std::shared_ptr<Tensor::Shared>, Tensor>;
void add_to_grads(Tensor& loss, const std::vector<LeafGrad>& grads);

// Autograd's leaf registry (autograd.cpp): a requires-grad tensor's buffer -> its shared state.
void register_leaf(const std::shared_ptr<Tensor::Shared>& s);

// `value`, computed from x by a composite op, whose gradient to x is g * derivative (a
// CUSTOM_GRAD node; the derivative has x's shape, or one that broadcasts to it; the value x's rank,
// each dim x's or 1). Autograd then never differentiates the composite's building blocks, whose
// chain rule can meet 0 * inf (sigmoid at -100: 1 / (1 + e^100)) or a branch a `where` did not
// take (expm1's 0 / 0): each composite states its derivative in the form PyTorch defines it.
Tensor custom_grad(const Tensor& value, const Tensor& x, const Tensor& derivative);
// A CUSTOM_GRAD node of `kind` (custom_grad.hpp) over value, x and w, its arg {kind, params...}:
// autograd never differentiates the value's building blocks (a window view, whose adjoint sums
// a padded, repeated copy of g), but takes x's and w's adjoints from custom_vjp. A stride-1
// convolution's (Conv: params {n, padding..., dilation..., groups}): x takes the transposed
// convolution of g, w the correlation of x with g. A pool's window view windows(x, k, s)
// (Windows: params {n, k..., s...}, w is x again): x takes the sum of the window elements that
// hold it.
Tensor with_custom_vjp(const Tensor& value, const Tensor& x, const Tensor& w, CustomGradKind kind,
                       const std::vector<int64_t>& params);
// The adjoints of such a node's x and w (none for a window view's second x) from g; `params` is
// the node's whole arg, its kind first.
std::pair<std::optional<Tensor>, std::optional<Tensor>>
custom_vjp(const Tensor& g, const Tensor& x, const Tensor& w, const std::vector<int64_t>& params);
// Whether a derivative is being built on this thread (with_derivative below).
bool& building_derivative();
// Whether a gradient can flow through a node built from xs: one of them tracks, outside NoGrad
// and outside a derivative being built (with_derivative). The one test every composite with a
// derivative of its own (with_derivative, nn.cpp's convolutions and window views) makes.
template <class... T>
bool grad_flows(const T&... xs) {
    return (TensorAccess::tracks(xs) || ...) && !NoGrad::active() && !building_derivative();
}
// The same, building the derivative only when a gradient can flow (x tracks, outside NoGrad).
// Composites inside a derivative (sinh's is cosh, whose is sinh) are built plain: a gradient of
// the gradient goes through their building blocks, and building does not recurse without end.
template <class F>
Tensor with_derivative(const Tensor& value, const Tensor& x, F&& derivative) {
    if (!grad_flows(x)) return value;
    bool& nested = building_derivative();
    nested = true;
    struct Reset {
        bool& b;
        ~Reset() { b = false; }
    } reset{nested};
    return custom_grad(value, x, derivative());
}

void check_element_dtype(const std::string& op, DType dtype);
// [0, 1, ..., n-1] of an integer dtype, computed by the kernel that reads it from two short
// aranges (about 2 sqrt(n) host values, not n): random numbers' counters, sort's indices.
Tensor iota(int64_t n, DType dtype);
void check_shape(const std::string& op, const Shape& shape);
void check_arith(const std::string& op, const Tensor& x);
void check_float(const std::string& op, const Tensor& x);
void check_same_dtype(const std::string& op, const Tensor& a, const Tensor& b);

// x broadcast to `target` (assumed compatible): RESHAPE adding leading 1s, then EXPAND. With
// `keep_ones` (graphs of symbolic dims), a tensor with a dim of size 1 gets its EXPAND even when
// the sizes agree: the graph then has one structure for every value of a variable, 1 included.
Tensor broadcast_to(const Tensor& x, const Shape& target, bool keep_ones = false);
// A RESHAPE node (none if the shape is unchanged; RESHAPE of RESHAPE collapses).
Tensor reshape_node(const Tensor& x, const Shape& shape);
Tensor unary(Op op, const Tensor& x);
// An ALU node over a and b broadcast together; "[name] dtype mismatch: ..." if dtypes differ.
Tensor binary(const std::string& name, Op op, const Tensor& a, const Tensor& b);
Tensor scalar_like(const Tensor& x, double value);
// The pending assign_at_step updates (target, value), removed from the registry (optim.hpp).
std::vector<std::pair<Tensor, Tensor>> take_step_assigns();
// Puts taken ones back (their plan failed), ahead of any added since.
void restore_step_assigns(std::vector<std::pair<Tensor, Tensor>> taken);
// Whether a tensor with this shared state has an assign_at_step pending (cheap when none is).
bool has_step_assign(const std::shared_ptr<Tensor::Shared>& s);
Tensor bit_not(const Tensor& x);

} // namespace detail
} // namespace tempura
