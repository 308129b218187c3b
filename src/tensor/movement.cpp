// Tensor movement ops: RESHAPE, PERMUTE, EXPAND, PAD, SHRINK, FLIP and those built on them.
#include <algorithm>

#include "tempura/error.hpp"
#include "tempura/tensor/tensor.hpp"
#include "tensor_impl.hpp"

namespace tempura {

using detail::broadcast_to;
using detail::reshape_node;

namespace {

std::string pair_str(int64_t a, int64_t b) {
    return "(" + std::to_string(a) + ", " + std::to_string(b) + ")";
}

Tensor movement(const Tensor& x, Op op, std::vector<int64_t> arg, Shape out) {
    return TensorAccess::derive(x, UOp::make(op, x.dtype(), {x.uop()}, std::move(arg)),
                                std::move(out));
}

} // namespace

Tensor Tensor::reshape(Shape shape, std::source_location loc) const {
    const UserCall site(loc);
    int64_t infer = -1;
    for (size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == -1) {
            if (infer >= 0) fail("reshape", "more than one -1 in " + shape_str(shape));
            infer = static_cast<int64_t>(i);
        } else if (shape[i] < 0) {
            fail("reshape",
                 "invalid dimension " + std::to_string(shape[i]) + " in " + shape_str(shape));
        }
    }
    const int64_t n = numel();
    const std::string from = "cannot reshape " + shape_str(shape_) + " (" + std::to_string(n) +
                             " elements) into " + shape_str(shape);
    int64_t known = 1;
    bool overflow = false;
    for (size_t i = 0; i < shape.size(); ++i)
        if (static_cast<int64_t>(i) != infer)
            overflow |= __builtin_mul_overflow(known, shape[i], &known);
    if (overflow) fail("reshape", from + " (too many elements)");
    if (infer >= 0) {
        if (known == 0 || n % known != 0) fail("reshape", from);
        shape[infer] = n / known;
        known = n;
    }
    if (known != n) fail("reshape", from + " (" + std::to_string(known) + " elements)");
    return reshape_node(*this, shape);
}

Tensor Tensor::permute(Shape order, std::source_location loc) const {
    const UserCall site(loc);
    const int64_t n = ndim();
    Shape norm(order.size());
    std::vector<bool> seen(static_cast<size_t>(n), false);
    bool ok = static_cast<int64_t>(order.size()) == n;
    for (size_t i = 0; ok && i < order.size(); ++i) {
        int64_t a = order[i] < 0 ? order[i] + n : order[i];
        ok = a >= 0 && a < n && !seen[a];
        if (ok) seen[a] = true, norm[i] = a;
    }
    if (!ok)
        fail("permute",
             shape_str(order) + " is not a permutation of " + std::to_string(n) + " axes");
    bool identity = true;
    Shape out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        out[i] = shape_[norm[i]];
        identity &= norm[i] == i;
    }
    if (identity) return *this;
    return movement(*this, Op::Permute, norm, out);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1, std::source_location loc) const {
    const UserCall site(loc);
    const int64_t a = normalize_axis("transpose", dim0, ndim());
    const int64_t b = normalize_axis("transpose", dim1, ndim());
    Shape order(static_cast<size_t>(ndim()));
    for (int64_t i = 0; i < ndim(); ++i) order[i] = i;
    std::swap(order[a], order[b]);
    return permute(order);
}

Tensor Tensor::expand(Shape shape, std::source_location loc) const {
    const UserCall site(loc);
    const size_t n = shape.size(), m = shape_.size();
    const auto bad = [&] {
        fail("expand", "cannot expand " + shape_str(shape_) + " to " + shape_str(shape));
    };
    if (n < m) bad();
    Shape target(n);
    for (size_t i = 0; i < n; ++i) {
        if (i < n - m) { // a new leading dim
            if (shape[i] < 0) bad();
            target[i] = shape[i];
            continue;
        }
        const int64_t old = shape_[i - (n - m)];
        const int64_t want = shape[i] == -1 ? old : shape[i];
        if (want < 0 || (want != old && old != 1)) bad();
        target[i] = want;
    }
    (void)tempura::numel(target); // overflow
    return broadcast_to(*this, target);
}

Tensor Tensor::pad(const std::vector<std::pair<int64_t, int64_t>>& padding,
                   std::source_location loc) const {
    const UserCall site(loc);
    if (static_cast<int64_t>(padding.size()) != ndim())
        fail("pad", "needs " + std::to_string(ndim()) + " (before, after) pairs for " +
                        shape_str(shape_) + ", got " + std::to_string(padding.size()));
    std::vector<int64_t> arg;
    Shape out = shape_;
    bool any = false;
    for (size_t i = 0; i < padding.size(); ++i) {
        const auto [b, e] = padding[i];
        if (b < 0 || e < 0)
            fail("pad", "negative padding " + pair_str(b, e) + " on axis " + std::to_string(i));
        if (__builtin_add_overflow(out[i], b, &out[i]) ||
            __builtin_add_overflow(out[i], e, &out[i]))
            fail("pad",
                 "padding " + pair_str(b, e) + " on axis " + std::to_string(i) + " is too large");
        arg.push_back(b);
        arg.push_back(e);
        any |= b != 0 || e != 0;
    }
    if (!any) return *this;
    (void)tempura::numel(out); // overflow
    return movement(*this, Op::Pad, arg, out);
}

Tensor Tensor::shrink(const std::vector<std::pair<int64_t, int64_t>>& bounds,
                      std::source_location loc) const {
    const UserCall site(loc);
    if (static_cast<int64_t>(bounds.size()) != ndim())
        fail("shrink", "needs " + std::to_string(ndim()) + " (begin, end) pairs for " +
                           shape_str(shape_) + ", got " + std::to_string(bounds.size()));
    std::vector<int64_t> arg;
    Shape out(shape_.size());
    bool any = false;
    for (size_t i = 0; i < bounds.size(); ++i) {
        const auto [b, e] = bounds[i];
        if (b < 0 || b > e || e > shape_[i])
            fail("shrink", pair_str(b, e) + " is out of range for axis " + std::to_string(i) +
                               " of size " + std::to_string(shape_[i]));
        arg.push_back(b);
        arg.push_back(e);
        out[i] = e - b;
        any |= b != 0 || e != shape_[i];
    }
    if (!any) return *this;
    return movement(*this, Op::Shrink, arg, out);
}

Tensor Tensor::flip(Shape axes, std::source_location loc) const {
    const UserCall site(loc);
    std::vector<int64_t> flags(shape_.size(), 0);
    bool any = false;
    for (int64_t ax : axes) {
        const int64_t a = normalize_axis("flip", ax, ndim());
        if (flags[a])
            fail("flip", "axis " + std::to_string(ax) + " is repeated in " + shape_str(axes));
        flags[a] = 1;
        any = true;
    }
    if (!any) return *this;
    return movement(*this, Op::Flip, flags, shape_);
}

Tensor Tensor::squeeze(int64_t axis, std::source_location loc) const {
    const UserCall site(loc);
    const int64_t a = normalize_axis("squeeze", axis, ndim());
    if (shape_[a] != 1)
        fail("squeeze",
             "axis " + std::to_string(axis) + " has size " + std::to_string(shape_[a]) + ", not 1");
    Shape out = shape_;
    out.erase(out.begin() + a);
    return reshape_node(*this, out);
}

Tensor Tensor::squeeze(std::source_location loc) const {
    const UserCall site(loc);
    Shape out;
    for (int64_t d : shape_)
        if (d != 1) out.push_back(d);
    return reshape_node(*this, out);
}

Tensor Tensor::unsqueeze(int64_t axis, std::source_location loc) const {
    const UserCall site(loc);
    const int64_t n = ndim();
    if (axis < -(n + 1) || axis > n)
        fail("unsqueeze", "axis " + std::to_string(axis) + " is out of range for " +
                              std::to_string(n) + " dims");
    const int64_t a = axis < 0 ? axis + n + 1 : axis;
    Shape out = shape_;
    out.insert(out.begin() + a, 1);
    return reshape_node(*this, out);
}

Tensor Tensor::flatten(std::source_location loc) const {
    const UserCall site(loc);
    return reshape_node(*this, Shape{numel()});
}

Tensor Tensor::contiguous(std::source_location loc) const {
    const UserCall site(loc);
    return TensorAccess::derive(*this, UOp::make(Op::Contiguous, dtype(), {uop()}), shape_);
}

Tensor Tensor::cat(const std::vector<Tensor>& tensors, int64_t axis, std::source_location loc) {
    const UserCall site(loc);
    if (tensors.empty()) fail("cat", "needs at least one tensor");
    const Tensor& first = tensors[0];
    const int64_t ax = normalize_axis("cat", axis, first.ndim());
    int64_t total = 0;
    for (const Tensor& t : tensors) {
        detail::check_same_dtype("cat", first, t);
        bool same = t.ndim() == first.ndim();
        for (int64_t i = 0; same && i < t.ndim(); ++i)
            same = i == ax || t.shape_[i] == first.shape_[i];
        if (!same)
            fail("cat", "shapes " + shape_str(first.shape_) + " and " + shape_str(t.shape_) +
                            " differ outside axis " + std::to_string(ax));
        total += t.shape_[ax];
    }
    if (tensors.size() == 1) return first;
    // Each input padded to the full extent along `axis` (PAD reads 0), then summed: every output
    // element has exactly one non-padding term. Bool tensors are combined with OR.
    const Op combine = first.dtype().is_bool() ? Op::Or : Op::Add;
    Tensor acc;
    bool have = false;
    int64_t offset = 0;
    for (const Tensor& t : tensors) {
        const int64_t size = t.shape_[ax];
        if (size == 0) continue;
        std::vector<std::pair<int64_t, int64_t>> padding(static_cast<size_t>(t.ndim()), {0, 0});
        padding[ax] = {offset, total - offset - size};
        Tensor p = t.pad(padding);
        acc = have ? detail::binary("cat", combine, acc, p) : p;
        have = true;
        offset += size;
    }
    if (!have) return first; // every input is empty along axis: so is the result
    return acc;
}

} // namespace tempura
