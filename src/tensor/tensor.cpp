// Tensor: creation, properties, realization, elementwise ops and operators.
// Movement ops live in movement.cpp, reductions and the ops built on them in reduce.cpp.
#include "tempura/tensor/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "convert.hpp"
#include "tempura/error.hpp"
#include "tempura/realize/device.hpp"
#include "tempura/tensor/graph.hpp"
#include "tempura/tensor/optim.hpp"
#include "tensor_impl.hpp"

namespace tempura {

// ---- TensorAccess: the internals the free functions of src/tensor need ---------------------

std::shared_ptr<const Tensor::Buffers> TensorAccess::no_buffers() {
    static const auto empty = std::make_shared<const Tensor::Buffers>();
    return empty;
}

std::shared_ptr<const Tensor::Buffers>
TensorAccess::merge(const char* op, const std::shared_ptr<const Tensor::Buffers>& a,
                    const std::shared_ptr<const Tensor::Buffers>& b) {
    if (a == b || b->empty()) return a;
    if (a->empty()) return b;
    if (a->front()->device() != b->front()->device())
        fail(op, runtime::different_devices(a->front()->device(), b->front()->device()));
    auto out = std::make_shared<Tensor::Buffers>();
    out->reserve(a->size() + b->size());
    const auto by_id = [](const auto& x, const auto& y) { return x->id() < y->id(); };
    std::set_union(a->begin(), a->end(), b->begin(), b->end(), std::back_inserter(*out), by_id);
    if (out->size() == a->size()) return a; // b's buffers were all in a
    if (out->size() == b->size()) return b;
    return out;
}

Tensor TensorAccess::make(UOp uop, Shape shape, std::shared_ptr<const Tensor::Buffers> buffers,
                          bool symbolic, bool tracks) {
    if (tracks && NoGrad::active()) {
        uop = UOp::make(Op::Detach, uop.dtype(), {uop});
        tracks = false;
    }
    Tensor t(std::move(uop), std::move(shape), std::move(buffers));
    t.core_.symbolic = symbolic;
    t.core_.tracks_grad = tracks;
    return t;
}

Tensor TensorAccess::derive(const Tensor& x, UOp uop, Shape shape) {
    const Tensor::Core& c = x.core();
    Tensor t = make(std::move(uop), std::move(shape), c.buffers, c.symbolic, c.tracks_grad);
    t.core_.device = c.device; // a constant stays on the device it was made on
    t.core_.pinned = c.pinned;
    return t;
}

Tensor TensorAccess::derive(const Tensor& x, UOp uop, Shape shape, const Tensor& also) {
    Tensor t = derive(x, std::move(uop), std::move(shape));
    t.core_.buffers = merge("derive", x.core().buffers, also.core().buffers);
    return t;
}

std::optional<int> TensorAccess::placed(const Tensor& x) {
    const Tensor::Core& c = x.core();
    if (!c.buffers->empty()) return c.buffers->front()->device();
    if (c.pinned) return c.device;
    return std::nullopt;
}

void TensorAccess::place(const char* op, Tensor& out,
                         std::initializer_list<std::reference_wrapper<const Tensor>> ins) {
    std::optional<int> at;
    for (const Tensor& t : ins) {
        const std::optional<int> d = placed(t);
        if (!d) continue;
        if (at && *at != *d) fail(op, runtime::different_devices(*at, *d));
        at = d;
    }
    if (!at) return;
    Tensor::Core& c = out.core_mut();
    c.device = *at;
    c.pinned = true;
}

void TensorAccess::set_buffer(Tensor& x, std::shared_ptr<runtime::Buffer> buffer) {
    x.core_mut().buffer = std::move(buffer);
}

const std::shared_ptr<const Tensor::Buffers>& TensorAccess::buffers(const Tensor& x) {
    return x.core().buffers;
}

Tensor::Shared& TensorAccess::share(Tensor& x) {
    if (!x.shared_) {
        x.shared_ = std::make_shared<Tensor::Shared>();
        x.shared_->core = std::move(x.core_);
        x.core_ = Tensor::Core{};
    }
    return *x.shared_;
}

Tensor TensorAccess::scalar(DType dtype, double value) {
    return Tensor(Tensor::make_const_f(dtype, value), Shape{}, no_buffers());
}

Tensor TensorAccess::scalar_int(DType dtype, int64_t value) {
    return Tensor(Tensor::make_const_i(dtype, value, static_cast<double>(value)), Shape{},
                  no_buffers());
}

// ---- helpers -----------------------------------------------------------------------------

namespace detail {

void check_element_dtype(const std::string& op, DType dtype) {
    if (dtype.is_ptr || dtype.count != 1 || dtype.scalar == Scalar::Void ||
        dtype.scalar == Scalar::Index)
        fail(op, "no tensors of dtype " + dtype.name());
}

void check_shape(const std::string& op, const Shape& shape) {
    for (int64_t d : shape)
        if (d < 0) fail(op, "negative dimension in " + shape_str(shape));
    (void)numel(shape); // overflow
}

void check_arith(const std::string& op, const Tensor& x) {
    if (x.dtype().is_bool()) fail(op, "not supported for bool tensors");
}

void check_float(const std::string& op, const Tensor& x) {
    if (!x.dtype().is_float()) fail(op, "needs a float tensor, got " + x.dtype().name());
}

void check_same_dtype(const std::string& op, const Tensor& a, const Tensor& b) {
    if (a.dtype() != b.dtype())
        fail(op, "dtype mismatch: " + a.dtype().name() + " and " + b.dtype().name());
}

Tensor broadcast_to(const Tensor& x, const Shape& target, bool symbolic) {
    const auto has_one = [](const Shape& s) { return std::find(s.begin(), s.end(), 1) != s.end(); };
    if (x.shape() == target && (!symbolic || !has_one(target))) return x;
    Tensor y = x;
    if (y.shape().size() < target.size()) {
        Shape s(target.size() - y.shape().size(), 1);
        s.insert(s.end(), y.shape().begin(), y.shape().end());
        y = reshape_node(y, s);
    }
    if (y.shape() == target && (!symbolic || !has_one(target))) return y;
    return TensorAccess::derive(y, UOp::make(Op::Expand, y.dtype(), {y.uop()}, target), target);
}

Tensor reshape_node(const Tensor& x, const Shape& shape) {
    if (x.shape() == shape) return x;
    if (x.is_realized() && !(TensorAccess::tracks(x) && NoGrad::active())) {
        // A realized tensor is RESHAPE(BUFFER): reshaping it is another view of the same
        // contiguous buffer, RESHAPE(BUFFER, shape), and still realized.
        const UOp& leaf = x.uop().op() == Op::Reshape ? x.uop().src(0) : x.uop();
        Tensor t = TensorAccess::derive(x, UOp::make(Op::Reshape, x.dtype(), {leaf}, shape), shape);
        TensorAccess::set_buffer(t, x.buffer());
        return t;
    }
    return TensorAccess::derive(x, UOp::make(Op::Reshape, x.dtype(), {x.uop()}, shape), shape);
}

Tensor unary(Op op, const Tensor& x) {
    return TensorAccess::derive(x, UOp::alu(op, {x.uop()}), x.shape());
}

Tensor binary(const std::string& name, Op op, const Tensor& a, const Tensor& b) {
    check_same_dtype(name, a, b);
    const Shape out = broadcast_shapes(a.shape(), b.shape());
    // In a symbolic graph, an operand of fewer dims is broadcast along the new ones whatever
    // their sizes (a bias added to [batch, n] rows, at batch 1 too).
    const bool sym = TensorAccess::symbolic(a) || TensorAccess::symbolic(b);
    const Tensor x = broadcast_to(a, out, sym && a.ndim() < static_cast<int64_t>(out.size())),
                 y = broadcast_to(b, out, sym && b.ndim() < static_cast<int64_t>(out.size()));
    Tensor r = TensorAccess::make(
        UOp::alu(op, {x.uop(), y.uop()}), out,
        TensorAccess::merge(name.c_str(), TensorAccess::buffers(a), TensorAccess::buffers(b)), sym,
        TensorAccess::tracks(a) || TensorAccess::tracks(b));
    TensorAccess::place(name.c_str(), r, {a, b});
    return r;
}

Tensor scalar_like(const Tensor& x, double value) { return TensorAccess::scalar(x.dtype(), value); }

bool& building_derivative() {
    thread_local bool building = false;
    return building;
}

Tensor custom_grad(const Tensor& value, const Tensor& x, const Tensor& derivative) {
    Tensor d = derivative.dtype() == x.dtype() ? derivative : derivative.cast(x.dtype());
    d = broadcast_to(d, x.shape(), TensorAccess::symbolic(x));
    // The derivative may read buffers of its own (argmax's indices): the node keeps them alive.
    return TensorAccess::derive(
        value, UOp::make(Op::CustomGrad, value.dtype(), {value.uop(), x.uop(), d.uop()}),
        value.shape(), d);
}

// Bitwise not through XOR with all ones: reverses the order of signed and unsigned integers alike.
Tensor bit_not(const Tensor& x) {
    return binary("xor", Op::Xor, x, TensorAccess::scalar_int(x.dtype(), -1));
}

} // namespace detail

using detail::binary;
using detail::broadcast_to;
using detail::check_arith;
using detail::check_float;
using detail::scalar_like;
using detail::unary;

// ---- construction --------------------------------------------------------------------------

Tensor::Tensor() : Tensor(make_const_f(DType::Float32, 0.0), Shape{}, TensorAccess::no_buffers()) {}

Tensor::Tensor(UOp uop, Shape shape, std::shared_ptr<const Buffers> buffers)
    : shape_(std::move(shape)) {
    core_.uop = std::move(uop);
    core_.buffers = std::move(buffers);
    core_.device =
        core_.buffers->empty() ? runtime::default_device_index() : core_.buffers->front()->device();
}

std::string Tensor::device() const { return runtime::device_name(core().device); }

const Tensor::Core& Tensor::core() const { return shared_ ? shared_->core : core_; }
Tensor::Core& Tensor::core_mut() { return shared_ ? shared_->core : core_; }

UOp Tensor::make_const_f(DType dtype, double value) {
    detail::check_element_dtype("full", dtype);
    if (dtype.is_float()) return UOp::constant_f(dtype, value);
    if (dtype.is_bool()) return UOp::boolean(value != 0.0);
    return UOp::constant(dtype, detail::float_to_int(dtype, value));
}

UOp Tensor::make_const_i(DType dtype, int64_t value, double as_double) {
    detail::check_element_dtype("full", dtype);
    if (dtype.is_float()) return UOp::constant_f(dtype, as_double);
    return UOp::constant(dtype, value);
}

Tensor Tensor::full_const(Shape shape, const UOp& constant, const char* op) {
    detail::check_shape(op, shape);
    return broadcast_to(Tensor(constant, Shape{}, TensorAccess::no_buffers()), shape);
}

Tensor Tensor::zeros(Shape shape, DType dtype, std::source_location loc) {
    const UserCall site(loc);
    detail::check_element_dtype("zeros", dtype);
    return full_const(std::move(shape), make_const_i(dtype, 0, 0.0), "zeros");
}

Tensor Tensor::ones(Shape shape, DType dtype, std::source_location loc) {
    const UserCall site(loc);
    detail::check_element_dtype("ones", dtype);
    return full_const(std::move(shape), make_const_i(dtype, 1, 1.0), "ones");
}

namespace {

// RESHAPE(BUFFER) of a realized buffer; the BUFFER's sources are the tensor's dims when one of
// them is a variable's (symbolic shapes), else none.
UOp buffer_uop(const std::shared_ptr<runtime::Buffer>& b, const Shape& shape,
               std::vector<UOp> dims = {}) {
    UOp leaf = UOp::make(Op::Buffer, b->dtype(), std::move(dims),
                         std::vector<int64_t>{b->id(), b->numel()});
    return UOp::make(Op::Reshape, b->dtype(), {leaf}, shape);
}

// A tensor made realized has shared state from the start: its copies see an assign().
Tensor realized(const std::shared_ptr<runtime::Buffer>& b, const Shape& shape,
                std::vector<UOp> dims = {}) {
    Tensor t = Tensor::from_uop(buffer_uop(b, shape, std::move(dims)));
    TensorAccess::share(t);
    return t;
}

// A new buffer of n zeros on the default device, then written by fill(p) through a host pointer:
// its own memory when that is the host's, else a host copy sent to the device.
template <class F>
std::shared_ptr<runtime::Buffer> host_filled(DType dtype, int64_t n, F&& fill) {
    const int device = runtime::default_device_index();
    const bool host = runtime::allocator_of(device) == nullptr;
    auto b = runtime::make_buffer(dtype, n, host, device);
    if (host) {
        fill(b->data());
    } else {
        std::vector<unsigned char> staging(b->nbytes()); // zeros
        fill(staging.data());
        b->copy_from_host(staging.data(), staging.size());
    }
    return b;
}

} // namespace

Tensor Tensor::to(const std::string& device, std::source_location loc) const {
    const UserCall site(loc);
    const int d = runtime::device_index(device);
    if (d == core().device) {
        if (!core().buffers->empty()) return *this;
        // A lazy tensor that reads no buffer (a constant) now lives on d too: mixing it with
        // another device's tensor is an error, as for any tensor there.
        Tensor t = TensorAccess::derive(*this, uop(), shape_);
        t.core_mut().pinned = true;
        return t;
    }
    Tensor src = *this;
    src.realize();
    auto b = runtime::make_buffer(dtype(), numel(), false, d);
    b->copy_from(*src.buffer()); // a copy between the two memories (memcpy between host ones)
    // A symbolic tensor stays symbolic: its BUFFER's sources are its dims.
    const UOp& u = src.uop();
    std::vector<UOp> dims;
    if (u.op() == Op::Reshape && u.src(0).op() == Op::Buffer) dims = u.src(0).srcs();
    Tensor t = realized(b, shape_, std::move(dims));
    t.core_mut().device = d;
    return t;
}

Tensor Tensor::from_host(DType src_dtype, const void* data, int64_t count, Shape shape,
                         DType dtype) {
    detail::check_element_dtype("from_vector", dtype);
    detail::check_shape("from_vector", shape);
    const int64_t n = tempura::numel(shape);
    if (count != n)
        fail("from_vector", std::to_string(count) + " values do not fill shape " +
                                shape_str(shape) + " (" + std::to_string(n) + " elements)");
    auto b = host_filled(dtype, n,
                         [&](void* p) { detail::convert_elements(src_dtype, data, dtype, p, n); });
    return realized(b, shape);
}

Tensor Tensor::from_blob(const void* data, Shape shape, DType dtype, std::source_location loc) {
    const UserCall site(loc);
    detail::check_element_dtype("from_blob", dtype);
    detail::check_shape("from_blob", shape);
    const int64_t n = tempura::numel(shape);
    if (n > 0 && data == nullptr)
        fail("from_blob", "null data for " + std::to_string(n) + " elements");
    const int device = runtime::default_device_index();
    const bool host = runtime::allocator_of(device) == nullptr;
    auto b = runtime::make_buffer(dtype, n, false, device);
    const size_t bytes = static_cast<size_t>(n) * static_cast<size_t>(dtype.itemsize());
    if (dtype.is_bool()) {
        // Bool elements must be 0 or 1: normalize while copying (through the host for a device).
        std::vector<unsigned char> staging;
        auto* dst =
            static_cast<unsigned char*>(host ? b->data() : (staging.resize(bytes), staging.data()));
        const auto* src = static_cast<const unsigned char*>(data);
        for (size_t i = 0; i < bytes; ++i) dst[i] = src[i] != 0;
        if (!host) b->copy_from_host(staging.data(), bytes);
    } else if (bytes > 0) {
        if (host)
            std::memcpy(b->data(), data, bytes);
        else
            b->copy_from_host(data, bytes);
    }
    return realized(b, shape);
}

Shape Tensor::dim_values(const char* op, const Dims& dims) {
    Shape shape;
    shape.reserve(dims.size());
    for (const Dim& d : dims) {
        if (!d.is_bound()) fail(op, d.str() + " is not bound");
        shape.push_back(d.value());
    }
    return shape;
}

Tensor Tensor::with_dims(const Tensor& t, const Dims& dims) {
    bool any = false;
    for (const Dim& d : dims) any = any || d.is_variable();
    if (!any) return t;
    std::vector<UOp> uops;
    uops.reserve(dims.size());
    for (const Dim& d : dims) uops.push_back(d.uop());
    return realized(t.buffer(), t.shape_, std::move(uops));
}

Tensor Tensor::arange(int64_t n, DType dtype, std::source_location loc) {
    const UserCall site(loc);
    detail::check_element_dtype("arange", dtype);
    if (n < 0) fail("arange", "negative length " + std::to_string(n));
    auto b = host_filled(dtype, n, [&](void* p) {
        for (int64_t i = 0; i < n; ++i) {
            if (dtype.is_float())
                detail::store_float(dtype, p, i, static_cast<double>(i));
            else
                detail::store_int(dtype, p, i, i);
        }
    });
    return realized(b, Shape{n});
}

Tensor Tensor::eye(int64_t n, DType dtype, std::source_location loc) {
    const UserCall site(loc);
    detail::check_element_dtype("eye", dtype);
    if (n < 0) fail("eye", "negative size " + std::to_string(n));
    const Shape shape{n, n};
    auto b = host_filled(dtype, tempura::numel(shape), [&](void* p) {
        for (int64_t i = 0; i < n; ++i) detail::store_int(dtype, p, i * n + i, 1);
    });
    return realized(b, shape);
}

Tensor Tensor::from_uop(const UOp& uop, std::source_location loc) {
    const UserCall site(loc);
    if (uop.is_null()) fail("from_uop", "null UOp");
    Shape shape = tensor_shape(uop);
    auto bufs = std::make_shared<Buffers>();
    bool symbolic = false;
    for (const UOp& u : uop.toposort()) {
        if (u.op() != Op::Buffer) continue;
        symbolic = symbolic || !u.srcs().empty();
        const auto& a = u.arg_as<std::vector<int64_t>>();
        auto b = runtime::lookup_buffer(a[0]);
        if (b->numel() != a[1] || b->dtype() != u.dtype())
            fail("from_uop", "BUFFER " + std::to_string(a[0]) + " is " + b->dtype().name() + " [" +
                                 std::to_string(b->numel()) + "], the graph says " +
                                 u.dtype().name() + " [" + std::to_string(a[1]) + "]");
        bufs->push_back(std::move(b));
    }
    std::sort(bufs->begin(), bufs->end(),
              [](const auto& x, const auto& y) { return x->id() < y->id(); });
    Tensor t(uop, std::move(shape), std::move(bufs));
    t.core_.symbolic = symbolic;
    // RESHAPE(BUFFER) and BUFFER are realized already.
    const bool is_buffer_view =
        uop.op() == Op::Buffer || (uop.op() == Op::Reshape && uop.src(0).op() == Op::Buffer);
    if (is_buffer_view) t.core_.buffer = t.core_.buffers->front();
    return t;
}

// ---- properties and realization ------------------------------------------------------------

int64_t Tensor::numel() const { return tempura::numel(shape_); }

const Tensor::Buffers& Tensor::buffers() const { return *core().buffers; }

Tensor& Tensor::realize() {
    if (is_realized()) return *this;
    if (shared_ && detail::realize_with_pending_grads(*this)) return *this;
    adopt(realize_graph(uop(), core().device));
    return *this;
}

void realize(const std::vector<std::reference_wrapper<Tensor>>& tensors) {
    std::vector<UOp> roots;
    UOpMap<size_t> index; // a graph two of the tensors share is realized once
    int device = -1;
    for (const Tensor& t : tensors) {
        if (t.is_realized()) continue;
        if (device >= 0 && t.core().device != device)
            fail("realize", runtime::different_devices(device, t.core().device));
        device = t.core().device;
        if (index.emplace(t.uop(), roots.size()).second) roots.push_back(t.uop());
    }
    if (roots.empty()) return;
    std::vector<RealizeResult> results = realize_graphs(roots, device);
    for (Tensor& t : tensors)
        if (!t.is_realized()) t.adopt(results[index.at(t.uop())]);
}

void Tensor::adopt(RealizeResult r) {
    if (!r.buffer) fail("realize", "the scheduler returned no buffer");
    if (r.buffer->numel() != numel() || r.buffer->dtype() != dtype())
        fail("realize", "the scheduler returned " + r.buffer->dtype().name() + " [" +
                            std::to_string(r.buffer->numel()) + "] for a " + dtype().name() +
                            " tensor of shape " + shape_str(shape_));
    runtime::register_buffer(r.buffer);
    const bool keep_graph = core().tracks_grad && !(shared_ && shared_->requires_grad);
    if (keep_graph) TensorAccess::share(*this); // copies from now on share the graph too
    Core& c = core_mut();
    if (keep_graph) {
        c.graph = c.uop;
        c.graph_buffers = c.buffers;
    }
    c.symbolic = !r.dims.empty();
    c.uop = buffer_uop(r.buffer, shape_, std::move(r.dims));
    c.buffers = std::make_shared<const Buffers>(Buffers{r.buffer});
    c.buffer = std::move(r.buffer);
    c.kernels = std::move(r.kernels);
    if (shared_ && (shared_->requires_grad || keep_graph)) detail::register_leaf(shared_);
}

const std::vector<KernelInfo>& Tensor::kernels() const {
    static const std::vector<KernelInfo> none;
    const auto& k = core().kernels;
    return k ? *k : none;
}

void Tensor::read_into(DType to, void* dst) const {
    // A state update waiting for the training step (nn::assign_at_step) is part of the value.
    if (shared_ && detail::has_step_assign(shared_)) nn::realize_step_assigns();
    const auto& b = core().buffer;
    if (!b) fail("to_vector", "tensor is not realized");
    std::vector<unsigned char> staging; // a device's memory is read through a copy
    detail::convert_elements(b->dtype(), runtime::host_bytes(*b, staging), to, dst, b->numel());
}

void Tensor::check_item() const {
    if (numel() != 1)
        fail("item", "tensor of shape " + shape_str(shape_) + " has " + std::to_string(numel()) +
                         " elements, not 1");
}

// ---- elementwise ---------------------------------------------------------------------------

Tensor Tensor::neg(std::source_location loc) const {
    const UserCall site(loc);
    check_arith("neg", *this);
    return unary(Op::Neg, *this);
}

Tensor Tensor::exp2(std::source_location loc) const {
    const UserCall site(loc);
    check_float("exp2", *this);
    return unary(Op::Exp2, *this);
}

Tensor Tensor::exp(std::source_location loc) const {
    const UserCall site(loc);
    check_float("exp", *this);
    if (detail::is_16bit_float(*this))
        return detail::in_float32(*this, [&](const Tensor& x) { return x.exp(); });
    // e^x = 2^(x / ln 2)
    return unary(Op::Exp2, *this * scalar_like(*this, 1.0 / std::numbers::ln2));
}

Tensor Tensor::log2(std::source_location loc) const {
    const UserCall site(loc);
    check_float("log2", *this);
    return unary(Op::Log2, *this);
}

Tensor Tensor::log(std::source_location loc) const {
    const UserCall site(loc);
    check_float("log", *this);
    if (detail::is_16bit_float(*this))
        return detail::in_float32(*this, [&](const Tensor& x) { return x.log(); });
    // ln x = log2(x) * ln 2
    return unary(Op::Log2, *this) * scalar_like(*this, std::numbers::ln2);
}

Tensor Tensor::sqrt(std::source_location loc) const {
    const UserCall site(loc);
    check_float("sqrt", *this);
    return unary(Op::Sqrt, *this);
}

Tensor Tensor::sin(std::source_location loc) const {
    const UserCall site(loc);
    check_float("sin", *this);
    return unary(Op::Sin, *this);
}

Tensor Tensor::erf(std::source_location loc) const {
    const UserCall site(loc);
    check_float("erf", *this);
    return unary(Op::Erf, *this);
}

Tensor Tensor::cos(std::source_location loc) const {
    const UserCall site(loc);
    check_float("cos", *this);
    // Its own op, not sin(pi/2 - x): rounding pi/2 - x to the dtype loses all of x's low bits for
    // large |x| (cos(1e10f) came out 0.49 instead of 0.87).
    return unary(Op::Cos, *this);
}

Tensor Tensor::relu(std::source_location loc) const {
    const UserCall site(loc);
    check_arith("relu", *this);
    const Tensor zero = scalar_like(*this, 0.0);
    // relu'(0) = 0, as PyTorch (MAX's own rule would give each side of the tie half).
    return detail::with_derivative(binary("relu", Op::Max, *this, zero), *this,
                                   [&] { return *this > zero; });
}

Tensor Tensor::sigmoid(std::source_location loc) const {
    const UserCall site(loc);
    check_float("sigmoid", *this);
    if (detail::is_16bit_float(*this))
        return detail::in_float32(*this, [&](const Tensor& x) { return x.sigmoid(); });
    const Tensor one = scalar_like(*this, 1.0);
    const Tensor s = unary(Op::Recip, one + (-*this).exp());
    // s (1 - s): the chain rule through 1 / (1 + e^-x) meets 0 * inf at x = -100.
    return detail::with_derivative(s, *this, [&] { return s * (one - s); });
}

Tensor Tensor::abs(std::source_location loc) const {
    const UserCall site(loc);
    check_arith("abs", *this);
    if (dtype().is_unsigned()) return *this;
    // On floats max(x, -x): IEEE maximum gives +0.0 for -0.0 (a where on x < 0 keeps -0.0)
    // and propagates NaN. Its derivative is sign(x), 0 at 0 (as PyTorch; MAX's tie would give
    // half of g and half of -g).
    if (dtype().is_float())
        return detail::with_derivative(binary("abs", Op::Max, *this, -*this), *this,
                                       [&] { return sign(); });
    return where(*this < scalar_like(*this, 0.0), -*this, *this);
}

Tensor Tensor::reciprocal(std::source_location loc) const {
    const UserCall site(loc);
    check_float("reciprocal", *this);
    return unary(Op::Recip, *this);
}

Tensor Tensor::square(std::source_location loc) const {
    const UserCall site(loc);
    check_arith("square", *this);
    return *this * *this;
}

Tensor Tensor::logical_not(std::source_location loc) const {
    const UserCall site(loc);
    if (!dtype().is_bool()) fail("logical_not", "needs a bool tensor, got " + dtype().name());
    // !x = (x != true), without a NOT node
    return binary("logical_not", Op::CmpNe, *this, scalar_like(*this, 1.0));
}

Tensor Tensor::maximum(const Tensor& other, std::source_location loc) const {
    const UserCall site(loc);
    check_arith("maximum", *this);
    return binary("maximum", Op::Max, *this, other);
}

Tensor Tensor::minimum(const Tensor& other, std::source_location loc) const {
    const UserCall site(loc);
    check_arith("minimum", *this);
    detail::check_same_dtype("minimum", *this, other);
    // min(a, b) = -max(-a, -b) on floats; ~max(~a, ~b) on integers (no overflow at INT_MIN,
    // right for unsigned types too).
    if (dtype().is_float()) return -(-*this).maximum(-other);
    return detail::bit_not(detail::bit_not(*this).maximum(detail::bit_not(other)));
}

Tensor Tensor::cast(DType dtype, std::source_location loc) const {
    const UserCall site(loc);
    detail::check_element_dtype("cast", dtype);
    if (dtype == this->dtype()) return *this;
    return TensorAccess::derive(*this, UOp::make(Op::Cast, dtype, {uop()}), shape_);
}

// ---- operators -----------------------------------------------------------------------------

Tensor operator+(TensorAt at, const Tensor& b) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    check_arith("add", a);
    return binary("add", Op::Add, a, b);
}

Tensor operator-(TensorAt at, const Tensor& b) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    check_arith("sub", a);
    return binary("sub", Op::Sub, a, b);
}

Tensor operator*(TensorAt at, const Tensor& b) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    check_arith("mul", a);
    return binary("mul", Op::Mul, a, b);
}

Tensor operator/(TensorAt at, const Tensor& b) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    check_arith("div", a);
    return binary("div", a.dtype().is_float() ? Op::Fdiv : Op::Idiv, a, b);
}

Tensor operator<(TensorAt at, const Tensor& b) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    return binary("less", Op::CmpLt, a, b);
}

Tensor operator>(TensorAt at, const Tensor& b) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    detail::check_same_dtype("greater", a, b);
    return binary("greater", Op::CmpLt, b, a); // a > b = b < a
}

Tensor operator<=(TensorAt at, const Tensor& b) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    detail::check_same_dtype("less_equal", a, b);
    // a <= b = !(b < a), spelled (b < a) != true
    return binary("less_equal", Op::CmpLt, b, a).logical_not();
}

Tensor operator>=(TensorAt at, const Tensor& b) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    detail::check_same_dtype("greater_equal", a, b);
    // a >= b = !(a < b)
    return binary("greater_equal", Op::CmpLt, a, b).logical_not();
}

Tensor operator==(TensorAt at, TensorAt bt) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    const Tensor& b = bt.t;
    return binary("equal", Op::CmpEq, a, b);
}

Tensor operator!=(TensorAt at, TensorAt bt) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    const Tensor& b = bt.t;
    return binary("not_equal", Op::CmpNe, a, b);
}

Tensor operator-(TensorAt at) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    return a.neg();
}

Tensor operator!(TensorAt at) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    return a.logical_not();
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, std::source_location loc) {
    const UserCall site(loc);
    if (!cond.dtype().is_bool())
        fail("where", "condition must be bool, got " + cond.dtype().name());
    detail::check_same_dtype("where", a, b);
    const Shape out = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape()), b.shape());
    const bool sym =
        TensorAccess::symbolic(cond) || TensorAccess::symbolic(a) || TensorAccess::symbolic(b);
    const auto n = static_cast<int64_t>(out.size());
    const Tensor c = broadcast_to(cond, out, sym && cond.ndim() < n),
                 x = broadcast_to(a, out, sym && a.ndim() < n),
                 y = broadcast_to(b, out, sym && b.ndim() < n);
    auto bufs = TensorAccess::merge(
        "where",
        TensorAccess::merge("where", TensorAccess::buffers(cond), TensorAccess::buffers(a)),
        TensorAccess::buffers(b));
    Tensor r =
        TensorAccess::make(UOp::alu(Op::Where, {c.uop(), x.uop(), y.uop()}), out, std::move(bufs),
                           sym, TensorAccess::tracks(a) || TensorAccess::tracks(b));
    TensorAccess::place("where", r, {cond, a, b});
    return r;
}

Tensor maximum(const Tensor& a, const Tensor& b, std::source_location loc) {
    const UserCall site(loc);
    return a.maximum(b);
}
Tensor minimum(const Tensor& a, const Tensor& b, std::source_location loc) {
    const UserCall site(loc);
    return a.minimum(b);
}

} // namespace tempura
