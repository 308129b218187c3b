// Shape ops built on the movement ops: slice with steps, split and chunk, repeat, stack, tril and
// triu, linspace and the *_like constructors. Each is a view (SHRINK, PAD, RESHAPE, EXPAND,
// FLIP) or a WHERE over one, so it fuses into the kernel that reads it.
#include <algorithm>
#include <limits>

#include "tempura/error.hpp"
#include "tempura/tensor/tensor.hpp"
#include "tensor_impl.hpp"

namespace tempura {

using detail::reshape_node;

namespace {

// Every `step`-th element along axis a, from element 0 (count of them): pad the axis to
// count * step, split it into [count, step] and keep column 0.
Tensor every_nth(const Tensor& x, int64_t a, int64_t step, int64_t count) {
    if (step == 1) return x;
    const int64_t n = x.shape()[a];
    std::vector<std::pair<int64_t, int64_t>> pad(static_cast<size_t>(x.ndim()), {0, 0});
    std::vector<std::pair<int64_t, int64_t>> cut(static_cast<size_t>(x.ndim()), {0, 0});
    for (int64_t i = 0; i < x.ndim(); ++i) cut[i] = {0, x.shape()[i]};
    Tensor y = x;
    if (count * step >= n) {
        pad[a] = {0, count * step - n};
        y = y.pad(pad);
    } else {
        cut[a] = {0, count * step};
        y = y.shrink(cut);
    }
    Shape split = y.shape();
    split[a] = count;
    split.insert(split.begin() + a + 1, step);
    y = y.reshape(split);
    std::vector<std::pair<int64_t, int64_t>> col;
    for (int64_t i = 0; i < y.ndim(); ++i) col.push_back({0, y.shape()[i]});
    col[a + 1] = {0, 1};
    return y.shrink(col).squeeze(a + 1);
}

// The [rows, cols] bool mask of (j - i) compared with k over the last two dims of x.
Tensor diagonal_mask(const Tensor& x, int64_t k, bool lower) {
    const auto on = detail::on_device_of(x);
    const int64_t r = x.shape()[x.ndim() - 2], c = x.shape().back();
    // Int32 where j - i and k fit (always, but for a diagonal offset past 2^31): twice the
    // vector lanes of Int64 in a kernel the mask is fused into (a causal softmax: 1.7 -> 0.7 ms).
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max() / 2;
    const DType t = r <= kMax && c <= kMax && k >= -kMax && k <= kMax ? DType::Int32 : DType::Int64;
    const Tensor i = Tensor::arange(r, t).reshape({r, 1});
    const Tensor j = Tensor::arange(c, t).reshape({1, c});
    const Tensor d = j - i;
    return lower ? d <= Tensor::full(Shape{}, k, t) : d >= Tensor::full(Shape{}, k, t);
}

Tensor triangle(const char* op, const Tensor& x, int64_t k, bool lower) {
    if (x.ndim() < 2) fail(op, "needs at least 2 dims, got " + shape_str(x.shape()));
    return where(diagonal_mask(x, k, lower), x, Tensor::zeros_like(x));
}

} // namespace

Tensor Tensor::slice(const std::vector<Slice>& slices, std::source_location loc) const {
    const UserCall site(loc);
    if (static_cast<int64_t>(slices.size()) > ndim())
        fail("slice", std::to_string(slices.size()) + " slices for " + std::to_string(ndim()) +
                          " dims " + shape_str(shape_));
    Tensor x = *this;
    for (size_t a = 0; a < slices.size(); ++a) {
        const Slice& s = slices[a];
        if (s.step == 0) fail("slice", "step must not be 0 (axis " + std::to_string(a) + ")");
        if (s.step == std::numeric_limits<int64_t>::min())
            fail("slice", "step " + std::to_string(s.step) + " is out of range");
        const int64_t n = x.shape()[a];
        auto [start, count] = slice_range(s, n);
        int64_t step = s.step;
        if (step < 0) { // walk the flipped axis forward
            Shape ax{static_cast<int64_t>(a)};
            x = x.flip(ax);
            start = n - 1 - start;
            step = -step;
        }
        if (count <= 1) step = 1; // one element (or none): no stride to take
        std::vector<std::pair<int64_t, int64_t>> cut;
        for (int64_t i = 0; i < x.ndim(); ++i) cut.push_back({0, x.shape()[i]});
        const int64_t last = count == 0 ? start : start + (count - 1) * step + 1;
        cut[a] = count == 0 ? std::pair<int64_t, int64_t>{0, 0} : std::pair{start, last};
        x = every_nth(x.shrink(cut), static_cast<int64_t>(a), step, count);
    }
    return x;
}

std::vector<Tensor> Tensor::split(int64_t size, int64_t axis, std::source_location loc) const {
    const UserCall site(loc);
    const int64_t a = normalize_axis("split", axis, ndim());
    if (size <= 0) fail("split", "split size must be positive, got " + std::to_string(size));
    const int64_t n = shape_[a];
    std::vector<Tensor> out;
    std::vector<std::pair<int64_t, int64_t>> cut;
    for (int64_t d : shape_) cut.push_back({0, d});
    for (int64_t b = 0; b < n || (n == 0 && out.empty()); b += size) {
        cut[a] = {b, std::min(n, b + size)};
        out.push_back(shrink(cut));
        if (n == 0) break;
    }
    return out;
}

std::vector<Tensor> Tensor::chunk(int64_t n, int64_t axis, std::source_location loc) const {
    const UserCall site(loc);
    const int64_t a = normalize_axis("chunk", axis, ndim());
    if (n <= 0) fail("chunk", "number of chunks must be positive, got " + std::to_string(n));
    const int64_t d = shape_[a];
    return split(std::max<int64_t>(1, (d + n - 1) / n), a);
}

Tensor Tensor::repeat(Shape times, std::source_location loc) const {
    const UserCall site(loc);
    if (static_cast<int64_t>(times.size()) < ndim())
        fail("repeat", "needs at least " + std::to_string(ndim()) + " repeat counts for " +
                           shape_str(shape_) + ", got " + shape_str(times));
    for (int64_t t : times)
        if (t < 0) fail("repeat", "negative repeat count in " + shape_str(times));
    // x [d0, d1] -> [1, d0, 1, d1] -> expand [t0, d0, t1, d1] -> [t0*d0, t1*d1].
    Shape base(times.size() - shape_.size(), 1);
    base.insert(base.end(), shape_.begin(), shape_.end());
    Shape spread, grown, out;
    for (size_t i = 0; i < times.size(); ++i) {
        spread.insert(spread.end(), {1, base[i]});
        grown.insert(grown.end(), {times[i], base[i]});
        int64_t o;
        if (__builtin_mul_overflow(times[i], base[i], &o))
            fail("repeat",
                 "too many elements repeating " + shape_str(shape_) + " by " + shape_str(times));
        out.push_back(o);
    }
    (void)tempura::numel(out); // overflow
    return reshape_node(reshape_node(*this, spread).expand(grown), out);
}

Tensor Tensor::tril(int64_t k, std::source_location loc) const {
    const UserCall site(loc);
    return triangle("tril", *this, k, true);
}
Tensor Tensor::triu(int64_t k, std::source_location loc) const {
    const UserCall site(loc);
    return triangle("triu", *this, k, false);
}

Tensor Tensor::stack(const std::vector<Tensor>& tensors, int64_t axis, std::source_location loc) {
    const UserCall site(loc);
    if (tensors.empty()) fail("stack", "needs at least one tensor");
    const Tensor& first = tensors[0];
    const int64_t n = first.ndim();
    if (axis < -(n + 1) || axis > n)
        fail("stack", "axis " + std::to_string(axis) + " is out of range for " +
                          std::to_string(n + 1) + " dims");
    std::vector<Tensor> parts;
    for (size_t i = 0; i < tensors.size(); ++i) {
        if (tensors[i].shape() != first.shape())
            fail("stack", "tensor " + std::to_string(i) + " has shape " +
                              shape_str(tensors[i].shape()) + ", tensor 0 has " +
                              shape_str(first.shape()));
        parts.push_back(tensors[i].unsqueeze(axis));
    }
    return cat(parts, axis < 0 ? axis + n + 1 : axis);
}

Tensor Tensor::linspace(double start, double stop, int64_t n, DType dtype,
                        std::source_location loc) {
    const UserCall site(loc);
    detail::check_element_dtype("linspace", dtype);
    if (n < 0) fail("linspace", "negative number of values " + std::to_string(n));
    if (n == 0) return zeros(Shape{0}, dtype);
    if (n == 1) return full(Shape{1}, start, DType::Float64).cast(dtype);
    // In float64, the first half counted from start and the second from stop (PyTorch's
    // symmetric form: both ends exact), then rounded to the dtype.
    const double step = (stop - start) / static_cast<double>(n - 1);
    const Tensor i = arange(n, DType::Float64);
    const Tensor from_start = i * step + start;
    const Tensor from_stop =
        Tensor::full(Shape{}, stop, DType::Float64) -
        (Tensor::full(Shape{}, static_cast<double>(n - 1), DType::Float64) - i) * step;
    const Tensor v = where(i < Tensor::full(Shape{}, static_cast<double>(n / 2), DType::Float64),
                           from_start, from_stop);
    return v.cast(dtype);
}

Tensor Tensor::one_hot(int64_t classes, std::source_location loc) const {
    const UserCall site(loc);
    const auto on = detail::on_device_of(*this);
    if (!dtype().is_int() || dtype().is_bool())
        fail("one_hot", "needs an integer tensor, got " + dtype().name());
    if (classes < 0) fail("one_hot", "negative number of classes " + std::to_string(classes));
    Shape s = shape_;
    s.push_back(1);
    Shape cls(shape_.size(), 1);
    cls.push_back(classes);
    const Tensor idx = arange(classes, dtype()).reshape(cls);
    return (reshape_node(*this, s) == idx).cast(DType::Int32);
}

Tensor Tensor::zeros_like(const Tensor& x, std::source_location loc) {
    const UserCall site(loc);
    return zeros(x.shape(), x.dtype());
}
Tensor Tensor::ones_like(const Tensor& x, std::source_location loc) {
    const UserCall site(loc);
    return ones(x.shape(), x.dtype());
}
Tensor Tensor::full_like(const Tensor& x, double value, std::source_location loc) {
    const UserCall site(loc);
    return full(x.shape(), value, x.dtype());
}

} // namespace tempura
