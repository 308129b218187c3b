// Tensor reductions (REDUCE_AXIS) and the ops built on them: mean, argmax, dot, softmax.
#include <algorithm>
#include <cmath>

#include "tempura/error.hpp"
#include "tempura/tensor/tensor.hpp"
#include "tensor_impl.hpp"

namespace tempura {

using detail::binary;
using detail::bit_not;
using detail::broadcast_to;
using detail::reshape_node;

namespace {

// The axes to reduce, normalized and sorted; {} means every axis.
Shape reduce_axes(const std::string& op, const Tensor& x, const Shape& axes) {
    const int64_t n = x.ndim();
    Shape out;
    if (axes.empty()) {
        for (int64_t i = 0; i < n; ++i) out.push_back(i);
        return out;
    }
    std::vector<bool> seen(static_cast<size_t>(n), false);
    for (int64_t ax : axes) {
        const int64_t a = normalize_axis(op, ax, n);
        if (seen[a]) fail(op, "axis " + std::to_string(ax) + " is repeated in " + shape_str(axes));
        seen[a] = true;
        out.push_back(a);
    }
    std::sort(out.begin(), out.end());
    return out;
}

// The shape of a reduction's result (keepdim: reduced dims as 1).
Shape reduced_shape(const Shape& shape, const Shape& axes, bool keepdim) {
    Shape out;
    for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
        const bool r = std::binary_search(axes.begin(), axes.end(), i);
        if (!r)
            out.push_back(shape[i]);
        else if (keepdim)
            out.push_back(1);
    }
    return out;
}

// REDUCE_AXIS (reduced dims kept as 1), then a RESHAPE dropping them unless keepdim.
// `narrow`: a 16-bit float sum accumulates in its own dtype (a matmul that asked for it).
Tensor reduce(const std::string& op, Op rop, const Tensor& x, const Shape& axes_in, bool keepdim,
              bool narrow = false) {
    const Shape axes = reduce_axes(op, x, axes_in);
    if (axes.empty()) return x; // a scalar: nothing to reduce
    // 16-bit floats accumulate in float32 (2048 + 1 is 2048 in Float16), rounded once at the
    // end: sums, means, products and matmuls alike. The casts fuse into the reduce's kernel.
    if ((rop == Op::Add || rop == Op::Mul) && x.dtype().is_16bit_float() && !narrow)
        return reduce(op, rop, x.cast(DType::Float32), axes_in, keepdim).cast(x.dtype());
    // max and min have no identity to give an empty reduction (NumPy and PyTorch raise too).
    if (rop == Op::Max)
        for (int64_t a : axes)
            if (x.shape()[a] == 0)
                fail(op, "cannot reduce an empty axis of " + shape_str(x.shape()));
    Tensor r = TensorAccess::derive(
        x, UOp::make(Op::ReduceAxis, x.dtype(), {x.uop()}, ReduceArg{rop, axes}),
        reduced_shape(x.shape(), axes, true));
    if (keepdim) return r;
    return reshape_node(r, reduced_shape(x.shape(), axes, false));
}

// min over axes: -max(-x) on floats, ~max(~x) on integers (exact at INT_MIN and for unsigned).
Tensor reduce_min(const std::string& op, const Tensor& x, const Shape& axes, bool keepdim) {
    if (x.dtype().is_float()) return -reduce(op, Op::Max, -x, axes, keepdim);
    return bit_not(reduce(op, Op::Max, bit_not(x), axes, keepdim));
}

} // namespace

Tensor Tensor::sum(Shape axes, bool keepdim, std::source_location loc) const {
    const UserCall site(loc);
    const Tensor x = dtype().is_bool() ? cast(DType::Int32) : *this;
    return reduce("sum", Op::Add, x, axes, keepdim);
}

Tensor Tensor::prod(Shape axes, bool keepdim, std::source_location loc) const {
    const UserCall site(loc);
    const Tensor x = dtype().is_bool() ? cast(DType::Int32) : *this;
    return reduce("prod", Op::Mul, x, axes, keepdim);
}

Tensor Tensor::max(Shape axes, bool keepdim, std::source_location loc) const {
    const UserCall site(loc);
    if (dtype().is_bool())
        return reduce("max", Op::Max, cast(DType::Int32), axes, keepdim).cast(DType::Bool);
    return reduce("max", Op::Max, *this, axes, keepdim);
}

Tensor Tensor::min(Shape axes, bool keepdim, std::source_location loc) const {
    const UserCall site(loc);
    if (dtype().is_bool())
        return reduce_min("min", cast(DType::Int32), axes, keepdim).cast(DType::Bool);
    return reduce_min("min", *this, axes, keepdim);
}

Tensor Tensor::mean(Shape axes, bool keepdim, std::source_location loc) const {
    const UserCall site(loc);
    const Tensor x = dtype().is_float() ? *this : cast(DType::Float32);
    int64_t n = 1;
    for (int64_t a : reduce_axes("mean", x, axes)) n *= shape_[a];
    // mean = sum / n, a division rounded once, as NumPy's: the mean of whole numbers is exact
    // where it is representable (sum * (1/n) is not: 435 * fl(1/30) is 14.500001). An empty
    // reduction gives 0 / 0 = nan, as NumPy does.
    return reduce("mean", Op::Add, x, axes, keepdim) /
           detail::scalar_like(x, static_cast<double>(n));
}

namespace {

// any: the max of x != 0 (Tensor::max reduces bools); an empty reduction has no max: false,
// as NumPy.
Tensor any_of(const std::string& op, const Tensor& x, const Shape& axes_in, bool keepdim) {
    const Shape axes = reduce_axes(op, x, axes_in);
    for (int64_t a : axes)
        if (x.shape()[a] == 0) return Tensor::full(reduced_shape(x.shape(), axes, keepdim), false);
    const Tensor nz = x.dtype().is_bool() ? x : binary(op, Op::CmpNe, x, detail::scalar_like(x, 0));
    return nz.max(axes, keepdim);
}

} // namespace

Tensor Tensor::any(Shape axes, bool keepdim, std::source_location loc) const {
    const UserCall site(loc);
    return any_of("any", *this, axes, keepdim);
}

Tensor Tensor::all(Shape axes, bool keepdim, std::source_location loc) const {
    const UserCall site(loc);
    const Tensor zero = dtype().is_bool()
                            ? logical_not()
                            : binary("all", Op::CmpEq, *this, detail::scalar_like(*this, 0));
    return any_of("all", zero, axes, keepdim).logical_not();
}

Tensor Tensor::var(Shape axes_in, bool keepdim, int64_t correction,
                   std::source_location loc) const {
    const UserCall site(loc);
    detail::check_float("var", *this);
    const Shape axes = reduce_axes("var", *this, axes_in);
    int64_t n = 1;
    for (int64_t a : axes) n *= shape_[a];
    const Tensor d = *this - mean(axes, true);
    // sum / (N - correction): 0 or fewer degrees of freedom give inf or NaN, as PyTorch.
    const double dof = static_cast<double>(n - correction);
    return reduce("var", Op::Add, d * d, axes, keepdim) * detail::scalar_like(*this, 1.0 / dof);
}

Tensor Tensor::std(Shape axes, bool keepdim, int64_t correction, std::source_location loc) const {
    const UserCall site(loc);
    detail::check_float("std", *this);
    return var(std::move(axes), keepdim, correction).sqrt();
}

Tensor Tensor::logsumexp(int64_t axis, bool keepdim, std::source_location loc) const {
    const UserCall site(loc);
    detail::check_float("logsumexp", *this);
    const int64_t a = normalize_axis("logsumexp", axis, ndim());
    if (shape_[a] == 0) // log(0)
        return Tensor::full(reduced_shape(shape_, Shape{a}, keepdim), -INFINITY, dtype());
    const Tensor m = reduce("logsumexp", Op::Max, *this, Shape{a}, true);
    // An infinite max (every element -inf, or one +inf) shifts by 0 instead: x - m would be NaN.
    const Tensor shift = where(m.isinf(), detail::scalar_like(m, 0.0), m);
    const Tensor r =
        reduce("logsumexp", Op::Add, (*this - shift).exp(), Shape{a}, true).log() + shift;
    return keepdim ? r : r.squeeze(a);
}

namespace {

// The first index along `axis` where x holds its max: where(x == max, index, n), then the min
// over the axis. A NaN is the max (MAX propagates it) and equals nothing, so on floats
// `x != x` marks it: the first NaN's index, as NumPy returns.
Tensor first_max_index(const std::string& op, const Tensor& x_in, int64_t axis, bool keepdim) {
    const auto on = detail::on_device_of(x_in);
    const int64_t a = normalize_axis(op, axis, x_in.ndim());
    const int64_t n = x_in.shape()[a];
    if (n == 0) fail(op, "cannot reduce an empty axis of " + shape_str(x_in.shape()));
    const Tensor x = x_in.dtype().is_bool() ? x_in.cast(DType::Int32) : x_in;
    const Tensor m = reduce(op, Op::Max, x, Shape{a}, true);
    Tensor is_max = binary(op, Op::CmpEq, x, m);
    if (x.dtype().is_float()) is_max = binary(op, Op::Or, is_max, binary(op, Op::CmpNe, x, x));
    Shape index_shape(static_cast<size_t>(x.ndim()), 1);
    index_shape[a] = n;
    const Tensor index = reshape_node(Tensor::arange(n, DType::Int32), index_shape);
    const Tensor candidates = where(is_max, index, TensorAccess::scalar_int(DType::Int32, n));
    return reduce_min(op, candidates, Shape{a}, keepdim);
}

} // namespace

Tensor Tensor::argmax(int64_t axis, bool keepdim, std::source_location loc) const {
    const UserCall site(loc);
    return first_max_index("argmax", *this, axis, keepdim);
}

Tensor Tensor::argmin(int64_t axis, bool keepdim, std::source_location loc) const {
    const UserCall site(loc);
    (void)normalize_axis("argmin", axis, ndim());
    if (dtype().is_bool()) return first_max_index("argmin", logical_not(), axis, keepdim);
    if (dtype().is_float()) return first_max_index("argmin", -*this, axis, keepdim);
    return first_max_index("argmin", bit_not(*this), axis, keepdim);
}

Tensor Tensor::dot(const Tensor& other, std::source_location loc) const {
    const UserCall site(loc);
    // 16-bit floats: exact float32 products, float32 sums, rounded once (what tensor cores do).
    return dot(other, dtype().is_16bit_float() ? DType::Float32 : dtype());
}

Tensor Tensor::dot(const Tensor& other, DType acc, std::source_location loc) const {
    const UserCall site(loc);
    const Tensor& a = *this;
    const Tensor& b = other;
    if (a.ndim() == 0 || b.ndim() == 0)
        fail("dot", "needs tensors with at least 1 dim, got " + shape_str(a.shape_) + " @ " +
                        shape_str(b.shape_));
    detail::check_same_dtype("dot", a, b);
    detail::check_arith("dot", a);
    if (a.dtype().is_16bit_float() && acc == DType::Float32)
        return a.cast(DType::Float32).dot(b.cast(DType::Float32)).cast(a.dtype());
    if (acc != a.dtype())
        fail("dot", "accumulates " + a.dtype().name() + " operands in " +
                        (a.dtype().is_16bit_float() ? "float32 or " : "") + a.dtype().name() +
                        ", got " + acc.name());
    // 1-D operands: [K] is a row [1, K] on the left, a column [K, 1] on the right.
    const Tensor x = a.ndim() == 1 ? reshape_node(a, Shape{1, a.shape_[0]}) : a;
    const Tensor y = b.ndim() == 1 ? reshape_node(b, Shape{b.shape_[0], 1}) : b;
    const Shape& xs = x.shape_;
    const Shape& ys = y.shape_;
    const int64_t M = xs[xs.size() - 2], K = xs.back(), N = ys.back();
    if (ys[ys.size() - 2] != K)
        fail("dot",
             "inner dimensions differ: " + shape_str(a.shape_) + " @ " + shape_str(b.shape_));
    const Shape xb(xs.begin(), xs.end() - 2), yb(ys.begin(), ys.end() - 2);
    Shape batch;
    try {
        batch = broadcast_shapes(xb, yb);
    } catch (const Error&) {
        fail("dot",
             "batch dimensions differ: " + shape_str(a.shape_) + " @ " + shape_str(b.shape_));
    }
    // (x[..., M, K, 1] * y[..., 1, K, N]).sum(K): both expanded to [..., M, K, N].
    Shape x3 = xb, y3 = yb, full = batch;
    x3.insert(x3.end(), {M, K, 1});
    y3.insert(y3.end(), {1, K, N});
    full.insert(full.end(), {M, K, N});
    const bool sym = TensorAccess::symbolic(x) || TensorAccess::symbolic(y);
    const Tensor prod =
        broadcast_to(reshape_node(x, x3), full, sym) * broadcast_to(reshape_node(y, y3), full, sym);
    Tensor r = reduce("dot", Op::Add, prod, Shape{static_cast<int64_t>(full.size()) - 2}, false,
                      /*narrow=*/true);
    Shape out = batch;
    if (a.ndim() > 1) out.push_back(M);
    if (b.ndim() > 1) out.push_back(N);
    return reshape_node(r, out);
}

Tensor Tensor::matmul(const Tensor& other, std::source_location loc) const {
    const UserCall site(loc);
    return dot(other);
}

Tensor Tensor::matmul(const Tensor& other, DType acc, std::source_location loc) const {
    const UserCall site(loc);
    return dot(other, acc);
}

Tensor Tensor::softmax(int64_t axis, std::source_location loc) const {
    const UserCall site(loc);
    detail::check_float("softmax", *this);
    const int64_t a = normalize_axis("softmax", axis, ndim());
    if (shape_[a] == 0) return *this; // empty in, empty out: no max to take
    // e / sum(e), e = exp(x - max(x)): the max keeps exp from overflowing.
    const Tensor e = (*this - reduce("softmax", Op::Max, *this, Shape{a}, true)).exp();
    return e * reduce("softmax", Op::Add, e, Shape{a}, true).reciprocal();
}

Tensor Tensor::log_softmax(int64_t axis, std::source_location loc) const {
    const UserCall site(loc);
    detail::check_float("log_softmax", *this);
    const int64_t a = normalize_axis("log_softmax", axis, ndim());
    if (shape_[a] == 0) return *this; // empty in, empty out: no max to take
    const Tensor s = *this - reduce("log_softmax", Op::Max, *this, Shape{a}, true);
    return s - reduce("log_softmax", Op::Add, s.exp(), Shape{a}, true).log();
}

} // namespace tempura
