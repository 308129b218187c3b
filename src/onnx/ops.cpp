// The dispatch table of the ONNX importer: each entry is a short function over Tensor methods
// (as tinygrad's frontend/onnx.py). Attributes become arguments; nothing here computes an op
// element by element except small index tables (Resize's taps, ReverseSequence's order) and the
// data-dependent shapes of NonZero/Compress/Unique, which realize their input first.
#include "onnx/ops.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <unordered_map>

#include "tempura/error.hpp"
#include "tempura/tensor/nn.hpp"
#include "tempura/tensor/shape.hpp"

namespace tempura::onnx::detail {

// ---- Ctx ----------------------------------------------------------------------------------

const Tensor& Ctx::x(size_t k) const {
    if (!has(k)) error("input " + std::to_string(k) + " is required");
    return *in[k];
}

int64_t Ctx::i(const std::string& name, int64_t def) const {
    auto it = node.attrs.find(name);
    return it == node.attrs.end() ? def : it->second.i;
}
double Ctx::f(const std::string& name, double def) const {
    auto it = node.attrs.find(name);
    return it == node.attrs.end() ? def : it->second.f;
}
std::string Ctx::s(const std::string& name, const std::string& def) const {
    auto it = node.attrs.find(name);
    return it == node.attrs.end() ? def : it->second.s;
}
std::vector<int64_t> Ctx::ints(const std::string& name, std::vector<int64_t> def) const {
    auto it = node.attrs.find(name);
    return it == node.attrs.end() ? def : it->second.ints;
}
std::vector<double> Ctx::floats(const std::string& name, std::vector<double> def) const {
    auto it = node.attrs.find(name);
    return it == node.attrs.end() ? def : it->second.floats;
}
const Tensor* Ctx::tensor_attr(const std::string& name) const {
    auto it = node.attrs.find(name);
    if (it == node.attrs.end()) return nullptr;
    if (!it->second.unsupported.empty()) error(it->second.unsupported);
    return it->second.t ? &*it->second.t : nullptr;
}
std::vector<int64_t> Ctx::ints_of(size_t k) const { return x(k).to_vector<int64_t>(); }
std::vector<double> Ctx::doubles_of(size_t k) const { return x(k).to_vector<double>(); }
void Ctx::error(const std::string& what) const { throw Error(what); }

namespace {

using Pads = std::vector<std::pair<int64_t, int64_t>>;
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor scalar(double v, DType dt) { return Tensor::full(Shape{}, v, dt); }

int64_t numel_of(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

int64_t axis_of(int64_t axis, int64_t ndim) { return normalize_axis("onnx", axis, ndim); }

Shape axes_of(const std::vector<int64_t>& axes, int64_t ndim) {
    Shape r;
    for (int64_t a : axes) r.push_back(axis_of(a, ndim));
    return r;
}

// x broadcast to `shape` (NumPy rules; rank grows on the left).
Tensor broadcast_to(const Tensor& x, const Shape& shape) {
    if (x.shape() == shape) return x;
    Shape s = x.shape();
    while (s.size() < shape.size()) s.insert(s.begin(), 1);
    return x.reshape(s).expand(shape);
}

// Zero padding of the last dims; negative amounts crop.
Tensor pad_spatial(const Tensor& x, const Shape& begin, const Shape& end, double value = 0) {
    const size_t n = begin.size(), lead = static_cast<size_t>(x.ndim()) - n;
    bool any = false, neg = false;
    Pads p(static_cast<size_t>(x.ndim()), {0, 0});
    for (size_t i = 0; i < n; ++i) {
        p[lead + i] = {std::max<int64_t>(0, begin[i]), std::max<int64_t>(0, end[i])};
        any = any || begin[i] > 0 || end[i] > 0;
        neg = neg || begin[i] < 0 || end[i] < 0;
    }
    Tensor y = x;
    if (any) {
        y = x.pad(p);
        if (value != 0)
            y = where(Tensor::ones(x.shape(), DType::Bool).pad(p), y, scalar(value, x.dtype()));
    }
    if (neg) {
        Pads cut;
        for (int64_t d : y.shape()) cut.push_back({0, d});
        for (size_t i = 0; i < n; ++i) {
            const int64_t d = y.shape()[lead + i];
            cut[lead + i] = {std::max<int64_t>(0, -begin[i]), d - std::max<int64_t>(0, -end[i])};
        }
        y = y.shrink(cut);
    }
    return y;
}

// ---- elementwise --------------------------------------------------------------------------

// A Tensor method of no arguments but its (defaulted) call site.
Outs unary(Ctx& c, Tensor (Tensor::*m)(std::source_location) const) {
    return {(c.x(0).*m)(std::source_location::current())};
}

Tensor mod(const Tensor& a, const Tensor& b, bool fmod) {
    Tensor r = a % b; // the divisor's sign (Python)
    if (!fmod) return r;
    // C's fmod takes the dividend's sign: where they differ (and r != 0), r - b.
    const Tensor zero = scalar(0, r.dtype());
    const Tensor differ = logical_and(r != zero, (r < zero) != (broadcast_to(a, r.shape()) < zero));
    return where(differ, r - b, r);
}

Tensor pow_of(const Tensor& base, const Tensor& e) {
    if (base.dtype() == e.dtype()) return base.pow(e);
    if (base.dtype().is_float()) return base.pow(e.cast(base.dtype()));
    // An integer base with a float exponent: computed in the exponent's type, then cast back.
    return base.cast(e.dtype()).pow(e).cast(base.dtype());
}

Tensor fold(Ctx& c, Tensor (*op)(const Tensor&, const Tensor&)) {
    Tensor r = c.x(0);
    for (size_t k = 1; k < c.in.size(); ++k)
        if (c.has(k)) r = op(r, c.x(k));
    return r;
}

Tensor asin_of(const Tensor& x) { return (x / (1 - x * x).sqrt()).atan(); }

// ---- reductions ---------------------------------------------------------------------------

struct ReduceSpec {
    Shape axes;
    bool keep = true, noop = false;
};

ReduceSpec reduce_spec(Ctx& c, bool axes_from_input) {
    ReduceSpec r;
    r.keep = c.i("keepdims", 1) != 0;
    std::vector<int64_t> axes;
    if (axes_from_input) {
        if (c.has(1)) axes = c.ints_of(1);
    } else {
        axes = c.ints("axes");
    }
    if (axes.empty() && c.i("noop_with_empty_axes", 0) != 0) r.noop = true;
    r.axes = axes_of(axes, c.x(0).ndim());
    if (r.axes.empty())
        for (int64_t k = 0; k < c.x(0).ndim(); ++k) r.axes.push_back(k);
    return r;
}

template <class F>
Outs reduce(Ctx& c, bool sum_like_from_13, F f) {
    const bool from_input = (sum_like_from_13 && c.opset >= 13) || c.opset >= 18;
    const ReduceSpec r = reduce_spec(c, from_input);
    if (r.noop) return {c.x(0)};
    return {f(c.x(0), r.axes, r.keep)};
}

Tensor logsumexp(const Tensor& x, const Shape& axes, bool keep) {
    Tensor m = x.max(axes, true);
    // An all -inf slice keeps -inf (its max is subtracted as 0).
    m = where(m.isinf(), scalar(0, x.dtype()), m);
    Tensor r = (x - m).exp().sum(axes, true).log() + m;
    if (!keep) {
        Shape s;
        for (int64_t k = 0; k < x.ndim(); ++k)
            if (std::find(axes.begin(), axes.end(), k) == axes.end())
                s.push_back(x.shape()[static_cast<size_t>(k)]);
        r = r.reshape(s);
    }
    return r;
}

Outs arg_extreme(Ctx& c, bool is_max) {
    const Tensor& x = c.x(0);
    const int64_t axis = axis_of(c.i("axis", 0), x.ndim());
    const bool keep = c.i("keepdims", 1) != 0, last = c.i("select_last_index", 0) != 0;
    if (!last) return {(is_max ? x.argmax(axis, keep) : x.argmin(axis, keep)).cast(DType::Int64)};
    const Tensor f = x.flip({axis});
    const Tensor i = (is_max ? f.argmax(axis, keep) : f.argmin(axis, keep)).cast(DType::Int64);
    return {scalar(static_cast<double>(x.shape()[static_cast<size_t>(axis)] - 1), DType::Int64) -
            i};
}

// Softmax-like ops: opset < 13 coerce the input to 2-D at axis (default 1), later ones work along
// axis (default -1).
template <class F>
Outs softmax_like(Ctx& c, F f) {
    const Tensor& x = c.x(0);
    if (c.opset >= 13) return {f(x, axis_of(c.i("axis", -1), x.ndim()))};
    const int64_t axis = axis_of(c.i("axis", 1), std::max<int64_t>(x.ndim(), 1));
    int64_t rows = 1;
    for (int64_t k = 0; k < axis; ++k) rows *= x.shape()[static_cast<size_t>(k)];
    return {f(x.reshape({rows, -1}), 1).reshape(x.shape())};
}

Tensor hardmax(const Tensor& x, int64_t axis) {
    const int64_t n = x.shape()[static_cast<size_t>(axis)];
    const Tensor idx = x.argmax(axis, true).cast(DType::Int64);
    Shape s(static_cast<size_t>(x.ndim()), 1);
    s[static_cast<size_t>(axis)] = n;
    return (idx == Tensor::arange(n, DType::Int64).reshape(s)).cast(x.dtype());
}

// ---- shape ops ----------------------------------------------------------------------------

Outs reshape(Ctx& c) {
    const Tensor& x = c.x(0);
    std::vector<int64_t> shape = c.opset >= 5 ? c.ints_of(1) : c.ints("shape");
    const bool allowzero = c.i("allowzero", 0) != 0;
    for (size_t k = 0; k < shape.size(); ++k)
        if (shape[k] == 0 && !allowzero) {
            if (k >= x.shape().size())
                c.error("shape dim " + std::to_string(k) + " is 0 but the input has " +
                        std::to_string(x.ndim()) + " dims");
            shape[k] = x.shape()[k];
        }
    return {x.reshape(Shape(shape.begin(), shape.end()))};
}

Outs unsqueeze(Ctx& c) {
    const Tensor& x = c.x(0);
    const std::vector<int64_t> axes = c.opset >= 13 ? c.ints_of(1) : c.ints("axes");
    const int64_t rank = x.ndim() + static_cast<int64_t>(axes.size());
    Shape norm = axes_of(axes, rank);
    std::sort(norm.begin(), norm.end());
    Shape s = x.shape();
    for (int64_t a : norm) s.insert(s.begin() + a, 1);
    return {x.reshape(s)};
}

Outs squeeze(Ctx& c) {
    const Tensor& x = c.x(0);
    std::vector<int64_t> axes;
    if (c.opset >= 13) {
        if (c.has(1)) axes = c.ints_of(1);
    } else {
        axes = c.ints("axes");
    }
    Shape s;
    const Shape norm = axes_of(axes, x.ndim());
    for (int64_t k = 0; k < x.ndim(); ++k) {
        const int64_t d = x.shape()[static_cast<size_t>(k)];
        const bool listed = std::find(norm.begin(), norm.end(), k) != norm.end();
        if (listed && d != 1)
            c.error("cannot squeeze axis " + std::to_string(k) + " of size " + std::to_string(d));
        if (listed || (norm.empty() && d == 1)) continue;
        s.push_back(d);
    }
    return {x.reshape(s)};
}

Outs flatten(Ctx& c) {
    const Tensor& x = c.x(0);
    const int64_t axis = c.i("axis", 1) < 0 ? c.i("axis", 1) + x.ndim() : c.i("axis", 1);
    if (axis < 0 || axis > x.ndim())
        c.error("axis " + std::to_string(c.i("axis", 1)) + " is out of range");
    int64_t rows = 1;
    for (int64_t k = 0; k < axis; ++k) rows *= x.shape()[static_cast<size_t>(k)];
    return {x.reshape({rows, numel_of(x.shape()) / std::max<int64_t>(rows, 1)})};
}

Outs transpose(Ctx& c) {
    const Tensor& x = c.x(0);
    std::vector<int64_t> perm = c.ints("perm");
    if (perm.empty())
        for (int64_t k = x.ndim() - 1; k >= 0; --k) perm.push_back(k);
    return {x.permute(Shape(perm.begin(), perm.end()))};
}

Outs concat(Ctx& c) {
    std::vector<Tensor> ts;
    for (size_t k = 0; k < c.in.size(); ++k)
        if (c.has(k)) ts.push_back(c.x(k));
    const int64_t axis = axis_of(c.i("axis", 0), ts.at(0).ndim());
    std::vector<Tensor> nonempty;
    for (const Tensor& t : ts)
        if (t.shape()[static_cast<size_t>(axis)] > 0) nonempty.push_back(t);
    if (nonempty.empty()) return {ts[0]};
    if (nonempty.size() == 1) return {nonempty[0]};
    return {Tensor::cat(nonempty, axis)};
}

Tensor take(const Tensor& x, int64_t axis, int64_t start, int64_t len) {
    std::vector<Slice> sl(static_cast<size_t>(axis) + 1);
    sl[static_cast<size_t>(axis)] = Slice{start, start + len, 1};
    return x.slice(sl);
}

Outs split(Ctx& c) {
    const Tensor& x = c.x(0);
    const int64_t axis = axis_of(c.i("axis", 0), x.ndim());
    std::vector<int64_t> sizes =
        c.opset >= 13 ? (c.has(1) ? c.ints_of(1) : std::vector<int64_t>{}) : c.ints("split");
    const int64_t n = x.shape()[static_cast<size_t>(axis)];
    if (sizes.empty()) {
        const auto parts = static_cast<int64_t>(c.n_out);
        const int64_t each = (n + parts - 1) / parts;
        for (int64_t k = 0; k < parts; ++k) sizes.push_back(std::min(each, n - k * each));
    }
    Outs r;
    int64_t at = 0;
    for (int64_t s : sizes) {
        r.push_back(take(x, axis, at, s));
        at += s;
    }
    if (at != n)
        c.error("split sizes add up to " + std::to_string(at) + ", the axis has " +
                std::to_string(n));
    return r;
}

Outs slice(Ctx& c) {
    const Tensor& x = c.x(0);
    std::vector<int64_t> starts, ends, axes, steps;
    if (c.opset >= 10) {
        starts = c.ints_of(1);
        ends = c.ints_of(2);
        if (c.has(3)) axes = c.ints_of(3);
        if (c.has(4)) steps = c.ints_of(4);
    } else {
        starts = c.ints("starts");
        ends = c.ints("ends");
        axes = c.ints("axes");
    }
    if (axes.empty())
        for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
    if (steps.empty()) steps.assign(starts.size(), 1);
    std::vector<Slice> sl(static_cast<size_t>(x.ndim()));
    for (size_t k = 0; k < axes.size(); ++k) {
        const auto a = static_cast<size_t>(axis_of(axes[k], x.ndim()));
        const int64_t n = x.shape()[a];
        if (steps[k] == 0) c.error("a step of 0");
        // ONNX clamps huge starts and ends; Slice::end (INT64_MAX) would mean Python's None.
        sl[a] = Slice{std::min(starts[k], n), std::min(ends[k], n), steps[k]};
    }
    return {x.slice(sl)};
}

Tensor fix_negative(const Tensor& idx, int64_t n) {
    const Tensor i =
        idx.dtype() == DType::Int32 || idx.dtype() == DType::Int64 ? idx : idx.cast(DType::Int64);
    return where(i < scalar(0, i.dtype()), i + scalar(static_cast<double>(n), i.dtype()), i);
}

Outs gather(Ctx& c) {
    const Tensor& x = c.x(0);
    const int64_t axis = axis_of(c.i("axis", 0), x.ndim());
    const int64_t n = x.shape()[static_cast<size_t>(axis)];
    if (c.x(1).is_realized() && c.x(1).numel() == 1) {
        // One known index (x[:, 0]): a slice, a movement op that fuses with what reads it.
        int64_t i = c.ints_of(1).at(0);
        if (i < -n || i >= n)
            c.error("index " + std::to_string(i) + " is out of range for size " +
                    std::to_string(n));
        if (i < 0) i += n;
        Shape out = x.shape();
        out.erase(out.begin() + axis);
        const Shape& is = c.x(1).shape();
        out.insert(out.begin() + axis, is.begin(), is.end());
        return {take(x, axis, i, 1).reshape(out)};
    }
    Tensor idx = fix_negative(c.x(1), n);
    const bool scalar_index = idx.ndim() == 0;
    if (scalar_index) idx = idx.reshape({1});
    // out = data[:a] + I + data[a+1:], as a PyTorch-style gather along a: the index's dims sit
    // where the axis was, without flattening it (so a symbolic batch in it stays one dim).
    const Shape& I = idx.shape();
    const Shape head(x.shape().begin(), x.shape().begin() + axis),
        rest(x.shape().begin() + axis + 1, x.shape().end());
    Shape src = head, src_e = head, ishape(static_cast<size_t>(axis), 1), out = head;
    src.push_back(n);
    src_e.push_back(n);
    for (size_t k = 1; k < I.size(); ++k) {
        src.push_back(1);
        src_e.push_back(I[k]);
    }
    ishape.insert(ishape.end(), I.begin(), I.end());
    out.insert(out.end(), I.begin(), I.end());
    src.insert(src.end(), rest.begin(), rest.end());
    src_e.insert(src_e.end(), rest.begin(), rest.end());
    out.insert(out.end(), rest.begin(), rest.end());
    for (size_t k = 0; k < rest.size(); ++k) ishape.push_back(1);
    Tensor g = x.reshape(src).expand(src_e).gather(axis, idx.reshape(ishape).expand(out));
    if (scalar_index) g = g.squeeze(axis);
    return {g};
}

Outs gather_elements(Ctx& c) {
    const Tensor& x = c.x(0);
    const int64_t axis = axis_of(c.i("axis", 0), x.ndim());
    return {x.gather(axis, fix_negative(c.x(1), x.shape()[static_cast<size_t>(axis)]))};
}

// The flat positions (in the first b + k dims of data, batch dims included) that GatherND and
// ScatterND index: indices [..., k] -> [...].
Tensor nd_positions(const Tensor& data, const Tensor& indices, int64_t batch_dims) {
    const int64_t k = indices.shape().back();
    Tensor idx = indices.cast(DType::Int64);
    Tensor pos =
        Tensor::zeros(Shape(indices.shape().begin(), indices.shape().end() - 1), DType::Int64);
    for (int64_t j = 0; j < k; ++j) {
        const int64_t n = data.shape()[static_cast<size_t>(batch_dims + j)];
        std::vector<Slice> sl(static_cast<size_t>(indices.ndim()));
        sl.back() = Slice{j, j + 1, 1};
        const Tensor ij = fix_negative(idx.slice(sl).squeeze(-1), n);
        pos = pos * scalar(static_cast<double>(n), DType::Int64) + ij;
    }
    return pos;
}

Outs gather_nd(Ctx& c) {
    const Tensor& data = c.x(0);
    const Tensor& indices = c.x(1);
    const int64_t b = c.i("batch_dims", 0), k = indices.shape().back();
    const Shape bshape(data.shape().begin(), data.shape().begin() + b);
    const int64_t B = numel_of(bshape);
    int64_t M = 1;
    for (int64_t j = 0; j < k; ++j) M *= data.shape()[static_cast<size_t>(b + j)];
    const Shape rest(data.shape().begin() + b + k, data.shape().end());
    const Tensor pos = nd_positions(data, indices, b); // indices.shape[:-1]
    const Shape ishape(indices.shape().begin() + b, indices.shape().end() - 1);
    const int64_t L = numel_of(ishape);
    Shape d3{B, M};
    d3.insert(d3.end(), rest.begin(), rest.end());
    const Tensor d = data.reshape(d3);
    Shape p3{B, L};
    Shape e3{B, L};
    for (int64_t r : rest) {
        p3.push_back(1);
        e3.push_back(r);
    }
    const Tensor g = d.gather(1, pos.reshape(p3).expand(e3));
    Shape out = bshape;
    out.insert(out.end(), ishape.begin(), ishape.end());
    out.insert(out.end(), rest.begin(), rest.end());
    return {g.reshape(out)};
}

// out = x with out[index] = src (reduction none) or += src (add), along axis.
Tensor scatter(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src,
               const std::string& reduction) {
    const Tensor idx = fix_negative(index, x.shape()[static_cast<size_t>(axis)]);
    const Tensor zeros = Tensor::zeros_like(x);
    const Tensor added = zeros.scatter_add(axis, idx, src);
    if (reduction == "add") return x + added;
    const Tensor hit = zeros.scatter_add(axis, idx, Tensor::ones_like(src)) != scalar(0, x.dtype());
    return where(hit, added, x);
}

Outs scatter_elements(Ctx& c) {
    const Tensor& x = c.x(0);
    const int64_t axis = axis_of(c.i("axis", 0), x.ndim());
    return {scatter(x, axis, c.x(1), c.x(2), c.s("reduction", "none"))};
}

Outs scatter_nd(Ctx& c) {
    const Tensor& data = c.x(0);
    const Tensor& indices = c.x(1);
    const Tensor& updates = c.x(2);
    const int64_t k = indices.shape().back();
    int64_t M = 1;
    for (int64_t j = 0; j < k; ++j) M *= data.shape()[static_cast<size_t>(j)];
    const Shape rest(data.shape().begin() + k, data.shape().end());
    const int64_t R = numel_of(rest);
    const Tensor pos = nd_positions(data, indices, 0);
    const int64_t L = numel_of(pos.shape());
    const Tensor d = data.reshape({M, R});
    const Tensor idx = pos.reshape({L, 1}).expand({L, R});
    return {scatter(d, 0, idx, updates.reshape({L, R}), c.s("reduction", "none"))
                .reshape(data.shape())};
}

Outs expand(Ctx& c) {
    const Tensor& x = c.x(0);
    const std::vector<int64_t> s = c.ints_of(1);
    return {broadcast_to(x, broadcast_shapes(x.shape(), Shape(s.begin(), s.end())))};
}

Outs tile(Ctx& c) {
    const std::vector<int64_t> r = c.ints_of(1);
    return {c.x(0).repeat(Shape(r.begin(), r.end()))};
}

Tensor edge_or_reflect(const Tensor& x, int64_t axis, int64_t before, int64_t after, bool reflect) {
    const int64_t n = x.shape()[static_cast<size_t>(axis)];
    std::vector<Tensor> parts;
    if (before > 0) {
        if (reflect)
            parts.push_back(take(x, axis, 1, before).flip({axis}));
        else {
            Shape s = x.shape();
            s[static_cast<size_t>(axis)] = before;
            parts.push_back(take(x, axis, 0, 1).expand(s));
        }
    }
    parts.push_back(x);
    if (after > 0) {
        if (reflect)
            parts.push_back(take(x, axis, n - 1 - after, after).flip({axis}));
        else {
            Shape s = x.shape();
            s[static_cast<size_t>(axis)] = after;
            parts.push_back(take(x, axis, n - 1, 1).expand(s));
        }
    }
    return parts.size() == 1 ? x : Tensor::cat(parts, axis);
}

Outs pad(Ctx& c) {
    const Tensor& x = c.x(0);
    const std::string mode = c.s("mode", "constant");
    std::vector<int64_t> pads = c.opset >= 11 ? c.ints_of(1) : c.ints("pads");
    double value = c.f("value", 0);
    if (c.opset >= 11 && c.has(2)) value = c.doubles_of(2).at(0);
    std::vector<int64_t> axes;
    if (c.has(3)) axes = c.ints_of(3);
    const int64_t r = x.ndim();
    if (axes.empty())
        for (int64_t k = 0; k < r; ++k) axes.push_back(k);
    if (pads.size() != 2 * axes.size())
        c.error("pads has " + std::to_string(pads.size()) + " values for " +
                std::to_string(axes.size()) + " axes");
    Shape begin(static_cast<size_t>(r), 0), end(static_cast<size_t>(r), 0);
    for (size_t k = 0; k < axes.size(); ++k) {
        const auto a = static_cast<size_t>(axis_of(axes[k], r));
        begin[a] = pads[k];
        end[a] = pads[k + axes.size()];
    }
    if (mode == "constant") return {pad_spatial(x, begin, end, value)};
    if (mode != "reflect" && mode != "edge") c.error("pad mode '" + mode + "'");
    Tensor y = x;
    for (int64_t a = 0; a < r; ++a) {
        const auto k = static_cast<size_t>(a);
        if (begin[k] < 0 || end[k] < 0) c.error("negative pads with mode " + mode);
        y = edge_or_reflect(y, a, begin[k], end[k], mode == "reflect");
    }
    return {y};
}

Outs constant(Ctx& c) {
    if (const Tensor* t = c.tensor_attr("value")) return {*t};
    if (c.has_attr("value_float")) return {scalar(c.f("value_float", 0), DType::Float32)};
    if (c.has_attr("value_int")) return {Tensor::full(Shape{}, c.i("value_int", 0), DType::Int64)};
    if (c.has_attr("value_floats")) {
        std::vector<float> v;
        for (double d : c.floats("value_floats")) v.push_back(static_cast<float>(d));
        return {Tensor::from_vector(v)};
    }
    if (c.has_attr("value_ints")) return {Tensor::from_vector(c.ints("value_ints"))};
    c.error("a Constant without a numeric value");
}

Outs constant_of_shape(Ctx& c) {
    const std::vector<int64_t> s = c.has(0) ? c.ints_of(0) : std::vector<int64_t>{};
    const Shape shape(s.begin(), s.end());
    if (const Tensor* t = c.tensor_attr("value")) {
        if (t->dtype().is_float())
            return {Tensor::full(shape, t->to_vector<double>().at(0), t->dtype())};
        return {Tensor::full(shape, t->to_vector<int64_t>().at(0), t->dtype())};
    }
    return {Tensor::zeros(shape, DType::Float32)};
}

Outs range(Ctx& c) {
    const Tensor& s = c.x(0);
    const DType dt = s.dtype();
    const double start = c.doubles_of(0).at(0), limit = c.doubles_of(1).at(0),
                 delta = c.doubles_of(2).at(0);
    if (delta == 0) c.error("delta is 0");
    const auto n = static_cast<int64_t>(std::max(0.0, std::ceil((limit - start) / delta)));
    return {Tensor::arange(n, dt) * scalar(delta, dt) + scalar(start, dt)};
}

std::optional<DType> dtype_attr(Ctx& c, const std::string& name, int def) {
    return dtype_of_onnx(static_cast<int>(c.i(name, def)));
}

// x.cast(dt), except float -> bfloat16, which the CPU backend cannot compile yet (its kernels
// would call compiler-rt's __truncsfbf2, which the JIT does not link): the values are realized
// and converted on the host, as from_vector converts them.
Tensor cast_to(const Tensor& x, DType dt) {
    if (dt != DType::BFloat16 || x.dtype() == DType::BFloat16) return x.cast(dt);
    const Tensor f = x.dtype() == DType::Float32 ? x : x.cast(DType::Float32);
    return Tensor::from_vector(f.to_vector<float>(), x.shape(), DType::BFloat16);
}

Outs cast(Ctx& c) {
    const auto dt = dtype_attr(c, "to", 1);
    if (!dt) c.error("Cast to " + onnx_type_name(static_cast<int>(c.i("to", 1))));
    return {cast_to(c.x(0), *dt)};
}

Outs one_hot(Ctx& c) {
    const Tensor& idx = c.x(0);
    const auto depth = static_cast<int64_t>(c.doubles_of(1).at(0));
    const Tensor& values = c.x(2);
    const int64_t axis = axis_of(c.i("axis", -1), idx.ndim() + 1);
    Tensor i = idx.dtype().is_float() ? idx.cast(DType::Int64) : idx.cast(DType::Int64);
    i = where(i < scalar(0, DType::Int64), i + scalar(static_cast<double>(depth), DType::Int64), i);
    Shape s(static_cast<size_t>(idx.ndim() + 1), 1);
    s[static_cast<size_t>(axis)] = depth;
    const Tensor hit = i.unsqueeze(axis) == Tensor::arange(depth, DType::Int64).reshape(s);
    const Tensor off = values.slice({Slice{0, 1, 1}}).reshape({}),
                 on = values.slice({Slice{1, 2, 1}}).reshape({});
    return {where(hit, on, off)};
}

Outs eye_like(Ctx& c) {
    const Tensor& x = c.x(0);
    const DType dt =
        c.has_attr("dtype") ? dtype_attr(c, "dtype", 1).value_or(x.dtype()) : x.dtype();
    const int64_t k = c.i("k", 0), n = x.shape()[0], m = x.shape()[1];
    const Tensor r = Tensor::arange(n, DType::Int64).reshape({n, 1}) +
                     scalar(static_cast<double>(k), DType::Int64);
    return {(r == Tensor::arange(m, DType::Int64).reshape({1, m})).cast(dt)};
}

Outs trilu(Ctx& c) {
    const int64_t k = c.has(1) ? c.ints_of(1).at(0) : 0;
    return {c.i("upper", 1) != 0 ? c.x(0).triu(k) : c.x(0).tril(k)};
}

Outs depth_to_space(Ctx& c) {
    const Tensor& x = c.x(0);
    const int64_t b = c.i("blocksize", 1);
    const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
    if (c.s("mode", "DCR") == "DCR")
        return {x.reshape({N, b, b, C / (b * b), H, W})
                    .permute({0, 3, 4, 1, 5, 2})
                    .reshape({N, C / (b * b), H * b, W * b})};
    return {x.reshape({N, C / (b * b), b, b, H, W})
                .permute({0, 1, 4, 2, 5, 3})
                .reshape({N, C / (b * b), H * b, W * b})};
}

Outs space_to_depth(Ctx& c) {
    const Tensor& x = c.x(0);
    const int64_t b = c.i("blocksize", 1);
    const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
    return {x.reshape({N, C, H / b, b, W / b, b})
                .permute({0, 3, 5, 1, 2, 4})
                .reshape({N, C * b * b, H / b, W / b})};
}

Outs top_k(Ctx& c) {
    const Tensor& x = c.x(0);
    const int64_t axis = axis_of(c.i("axis", -1), x.ndim());
    const int64_t k = c.opset >= 10 ? c.ints_of(1).at(0) : c.i("k", 1);
    const bool largest = c.i("largest", 1) != 0;
    if (largest) {
        auto [v, i] = x.topk(k, axis);
        return {v, i.cast(DType::Int64)};
    }
    auto [v, i] = (-x).topk(k, axis);
    return {-v, i.cast(DType::Int64)};
}

Outs cumsum(Ctx& c) {
    Tensor x = c.x(0);
    const int64_t axis = axis_of(c.ints_of(1).at(0), x.ndim());
    const bool rev = c.i("reverse", 0) != 0, excl = c.i("exclusive", 0) != 0;
    if (rev) x = x.flip({axis});
    Tensor y = x.cumsum(axis);
    if (excl) {
        const int64_t n = x.shape()[static_cast<size_t>(axis)];
        Shape b(static_cast<size_t>(x.ndim()), 0), e(static_cast<size_t>(x.ndim()), 0);
        b[static_cast<size_t>(axis)] = 1;
        e[static_cast<size_t>(axis)] = -1;
        y = n > 0 ? pad_spatial(y, b, e) : y;
    }
    if (rev) y = y.flip({axis});
    return {y};
}

Outs where_op(Ctx& c) { return {where(c.x(0), c.x(1), c.x(2))}; }

Outs clip(Ctx& c) {
    Tensor x = c.x(0);
    if (c.opset < 11) return {x.clip(c.f("min", -kInf), c.f("max", kInf))};
    if (c.has(1)) x = maximum(x, c.x(1));
    if (c.has(2)) x = minimum(x, c.x(2));
    return {x};
}

// ---- linear algebra -----------------------------------------------------------------------

Outs gemm(Ctx& c) {
    Tensor a = c.x(0), b = c.x(1);
    if (c.i("transA", 0)) a = a.transpose(0, 1);
    if (c.i("transB", 0)) b = b.transpose(0, 1);
    Tensor y = a.matmul(b);
    const double alpha = c.f("alpha", 1), beta = c.f("beta", 1);
    if (alpha != 1) y = y * scalar(alpha, y.dtype());
    if (c.has(2) && beta != 0) y = y + (beta == 1 ? c.x(2) : c.x(2) * scalar(beta, y.dtype()));
    return {y};
}

Outs einsum(Ctx& c) {
    std::string eq;
    for (char ch : c.s("equation", ""))
        if (ch != ' ') eq += ch;
    const auto arrow = eq.find("->");
    std::string lhs = eq.substr(0, arrow), rhs;
    std::vector<std::string> terms;
    for (size_t p = 0;;) {
        const auto q = lhs.find(',', p);
        terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
        if (q == std::string::npos) break;
        p = q + 1;
    }
    std::vector<Tensor> ops;
    for (size_t k = 0; k < c.in.size(); ++k) ops.push_back(c.x(k));
    if (ops.size() != terms.size())
        c.error("the equation names " + std::to_string(terms.size()) + " operands");
    // Ellipses become upper-case letters (which equations never use otherwise here).
    size_t ell = 0;
    for (size_t k = 0; k < terms.size(); ++k) {
        const auto e = terms[k].find("...");
        if (e == std::string::npos) continue;
        const size_t nd = static_cast<size_t>(ops[k].ndim()) - (terms[k].size() - 3);
        ell = std::max(ell, nd);
    }
    std::string ell_letters;
    for (size_t k = 0; k < ell; ++k) ell_letters += static_cast<char>('A' + k);
    for (size_t k = 0; k < terms.size(); ++k) {
        const auto e = terms[k].find("...");
        if (e == std::string::npos) continue;
        const size_t nd = static_cast<size_t>(ops[k].ndim()) - (terms[k].size() - 3);
        terms[k] = terms[k].substr(0, e) + ell_letters.substr(ell - nd) + terms[k].substr(e + 3);
    }
    if (arrow != std::string::npos) {
        rhs = eq.substr(arrow + 2);
        const auto e = rhs.find("...");
        if (e != std::string::npos) rhs = rhs.substr(0, e) + ell_letters + rhs.substr(e + 3);
    } else {
        std::map<char, int> count;
        for (const auto& t : terms)
            for (char ch : t) ++count[ch];
        rhs = ell_letters;
        for (auto [ch, n] : count)
            if (n == 1 && !(ch >= 'A' && ch <= 'Z')) rhs += ch;
    }
    // Every letter gets a position; each operand is brought to [all letters] by diagonals,
    // permutes and broadcasts, then multiplied and summed over the letters not in the output.
    std::string all = rhs;
    for (const auto& t : terms)
        for (char ch : t)
            if (all.find(ch) == std::string::npos) all += ch;
    std::map<char, int64_t> size;
    Tensor prod;
    for (size_t k = 0; k < terms.size(); ++k) {
        Tensor t = ops[k];
        std::string term = terms[k];
        if (static_cast<int64_t>(term.size()) != t.ndim())
            c.error("operand " + std::to_string(k) + " has " + std::to_string(t.ndim()) +
                    " dims for '" + terms[k] + "'");
        // Repeated letters: take the diagonal.
        for (size_t a = 0; a < term.size(); ++a) {
            for (size_t b = a + 1; b < term.size();) {
                if (term[b] != term[a]) {
                    ++b;
                    continue;
                }
                const int64_t n = t.shape()[a];
                // Move b next to a's end, flatten the pair and step by n + 1.
                Shape order;
                for (int64_t d = 0; d < t.ndim(); ++d)
                    if (d != static_cast<int64_t>(a) && d != static_cast<int64_t>(b))
                        order.push_back(d);
                order.push_back(static_cast<int64_t>(a));
                order.push_back(static_cast<int64_t>(b));
                t = t.permute(order);
                Shape s(t.shape().begin(), t.shape().end() - 2);
                s.push_back(n * n);
                std::vector<Slice> sl(s.size());
                sl.back() = Slice{0, Slice::end, n + 1};
                t = t.reshape(s).slice(sl);
                std::string nt;
                for (size_t d = 0; d < term.size(); ++d)
                    if (d != a && d != b) nt += term[d];
                nt += term[a];
                term = nt;
                a = 0;
                b = 1;
                if (term.size() < 2) break;
            }
        }
        for (size_t d = 0; d < term.size(); ++d) {
            const int64_t n = t.shape()[d];
            auto [it, fresh] = size.emplace(term[d], n);
            if (!fresh && it->second != n && n != 1 && it->second != 1)
                c.error(std::string("letter ") + term[d] + " has sizes " +
                        std::to_string(it->second) + " and " + std::to_string(n));
            if (it->second == 1) it->second = n;
        }
        Shape order;
        std::string placed;
        for (char ch : all) {
            const auto p = term.find(ch);
            if (p != std::string::npos) {
                order.push_back(static_cast<int64_t>(p));
                placed += ch;
            }
        }
        t = t.permute(order);
        Shape s;
        size_t at = 0;
        for (char ch : all)
            s.push_back(at < placed.size() && placed[at] == ch ? t.shape()[at++] : 1);
        t = t.reshape(s);
        prod = k == 0 ? t : prod * t;
    }
    Shape axes;
    for (size_t d = rhs.size(); d < all.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    Shape full;
    for (char ch : all) full.push_back(size[ch]);
    prod = broadcast_to(prod, full);
    if (!axes.empty()) prod = prod.sum(axes);
    return {prod};
}

// ---- convolution and pooling --------------------------------------------------------------

struct Window {
    Shape kernel, strides, dilations, begin, end;
};

Window window(Ctx& c, const Shape& in, const Shape& kernel) {
    const size_t n = kernel.size();
    Window w;
    w.kernel = kernel;
    const auto s = c.ints("strides"), d = c.ints("dilations"), p = c.ints("pads");
    w.strides = s.empty() ? Shape(n, 1) : Shape(s.begin(), s.end());
    w.dilations = d.empty() ? Shape(n, 1) : Shape(d.begin(), d.end());
    w.begin.assign(n, 0);
    w.end.assign(n, 0);
    const std::string ap = c.s("auto_pad", "NOTSET");
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
        for (size_t k = 0; k < n; ++k) {
            const int64_t out = (in[k] + w.strides[k] - 1) / w.strides[k];
            const int64_t total = std::max<int64_t>(
                0, (out - 1) * w.strides[k] + w.dilations[k] * (kernel[k] - 1) + 1 - in[k]);
            w.begin[k] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
            w.end[k] = total - w.begin[k];
        }
    } else if (ap != "VALID" && !p.empty()) {
        for (size_t k = 0; k < n; ++k) {
            w.begin[k] = p[k];
            w.end[k] = p[k + n];
        }
    }
    return w;
}

// The input of a convolution, padded (asymmetric pads allowed). A padded input is materialized
// (one cheap copy kernel), as nn::conv2d does with its own padding: the convolution's windows
// then read it with plain vector loads instead of recomputing the padding (and whatever
// elementwise ops produced x) at every tap.
Tensor padded_input(const Tensor& x, const Shape& begin, const Shape& end) {
    const bool any = std::any_of(begin.begin(), begin.end(), [](int64_t p) { return p != 0; }) ||
                     std::any_of(end.begin(), end.end(), [](int64_t p) { return p != 0; });
    return any ? pad_spatial(x, begin, end).contiguous() : x;
}

// Convolution over any number of spatial dims, built from nn::conv2d: one dim is unsqueezed,
// three dims are a sum over the first dim's kernel taps of 2-D convolutions.
Tensor conv_nd(const Tensor& x, const Tensor& w, const Shape& s, const Shape& d, int64_t group) {
    const size_t n = static_cast<size_t>(x.ndim()) - 2;
    nn::ConvOptions o;
    o.groups = group;
    if (n == 2) {
        o.stride = s;
        o.dilation = d;
        return nn::conv2d(x, w, o);
    }
    if (n == 1) {
        o.stride = {1, s[0]};
        o.dilation = {1, d[0]};
        return nn::conv2d(x.unsqueeze(2), w.unsqueeze(2), o).squeeze(2);
    }
    if (n != 3) throw Error("[onnx] " + std::to_string(n) + "-D convolution is not supported");
    const int64_t N = x.shape()[0], C = x.shape()[1], D = x.shape()[2], K = w.shape()[2];
    const int64_t OD = (D - d[0] * (K - 1) - 1) / s[0] + 1;
    const Shape s2(s.begin() + 1, s.end()), d2(d.begin() + 1, d.end());
    Tensor acc;
    for (int64_t k = 0; k < K; ++k) {
        const int64_t st = k * d[0];
        Tensor xs = x.slice(
            {Slice{}, Slice{}, Slice{st, st + (OD - 1) * s[0] + 1, s[0]}}); // [N, C, OD, H, W]
        xs = xs.permute({0, 2, 1, 3, 4}).reshape({N * OD, C, x.shape()[3], x.shape()[4]});
        const Tensor wk = w.slice({Slice{}, Slice{}, Slice{k, k + 1, 1}}).squeeze(2);
        const Tensor y = conv_nd(xs, wk, s2, d2, group);
        acc = k == 0 ? y : acc + y;
    }
    return acc.reshape({N, OD, acc.shape()[1], acc.shape()[2], acc.shape()[3]})
        .permute({0, 2, 1, 3, 4});
}

Tensor add_bias(const Tensor& y, const Tensor& b) {
    Shape s(static_cast<size_t>(y.ndim()), 1);
    s[1] = b.numel();
    return y + b.reshape(s);
}

Outs conv(Ctx& c) {
    const Tensor& x = c.x(0);
    const Tensor& w = c.x(1);
    const Shape in(x.shape().begin() + 2, x.shape().end()),
        k(w.shape().begin() + 2, w.shape().end());
    const Window win = window(c, in, k);
    Tensor y = conv_nd(padded_input(x, win.begin, win.end), w, win.strides, win.dilations,
                       c.i("group", 1));
    if (c.has(2)) y = add_bias(y, c.x(2));
    return {y};
}

Outs conv_transpose(Ctx& c) {
    const Tensor& x = c.x(0);
    const Tensor& w = c.x(1);
    const size_t n = static_cast<size_t>(x.ndim()) - 2;
    if (n < 1 || n > 3) c.error(std::to_string(n) + "-D ConvTranspose is not supported");
    const Shape in(x.shape().begin() + 2, x.shape().end()),
        k(w.shape().begin() + 2, w.shape().end());
    const auto s = c.ints("strides"), d = c.ints("dilations"), p = c.ints("pads"),
               op = c.ints("output_padding"), os = c.ints("output_shape");
    const Shape st = s.empty() ? Shape(n, 1) : Shape(s.begin(), s.end());
    const Shape dl = d.empty() ? Shape(n, 1) : Shape(d.begin(), d.end());
    const Shape outpad = op.empty() ? Shape(n, 0) : Shape(op.begin(), op.end());
    Shape begin(n, 0), end(n, 0), full(n);
    for (size_t i = 0; i < n; ++i) full[i] = (in[i] - 1) * st[i] + dl[i] * (k[i] - 1) + 1;
    const std::string ap = c.s("auto_pad", "NOTSET");
    if (!os.empty() || ap == "SAME_UPPER" || ap == "SAME_LOWER") {
        for (size_t i = 0; i < n; ++i) {
            const int64_t want = !os.empty() ? os[os.size() - n + i] : in[i] * st[i];
            const int64_t total = full[i] + outpad[i] - want;
            // Floor division, as ONNX's reference: a negative total (an output larger than the
            // full one) grows the end.
            const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
            if (ap == "SAME_UPPER") {
                begin[i] = half;
                end[i] = total - half;
            } else {
                begin[i] = total - half;
                end[i] = half;
            }
        }
    } else if (!p.empty() && ap != "VALID") {
        for (size_t i = 0; i < n; ++i) {
            begin[i] = p[i];
            end[i] = p[i + n];
        }
    }
    nn::ConvOptions o;
    o.groups = c.i("group", 1);
    Tensor y;
    if (n == 2) {
        o.stride = st;
        o.dilation = dl;
        y = nn::conv_transpose2d(x, w, o);
    } else if (n == 1) {
        o.stride = {1, st[0]};
        o.dilation = {1, dl[0]};
        y = nn::conv_transpose2d(x.unsqueeze(2), w.unsqueeze(2), o).squeeze(2);
    } else {
        // 3-D: the input with stride - 1 zeros between its elements, padded by
        // dilation (k - 1) on each side, convolved with the flipped kernel, channels swapped.
        const int64_t g = o.groups, cin = x.shape()[1], rc = w.shape()[1];
        Tensor up = x;
        for (size_t i = 0; i < n; ++i) {
            const int64_t a = static_cast<int64_t>(2 + i), len = up.shape()[2 + i];
            Shape split = up.shape(), merged = up.shape();
            split.insert(split.begin() + a + 1, 1);
            merged[2 + i] = len * st[i];
            Pads pz(split.size(), {0, 0});
            pz[static_cast<size_t>(a + 1)] = {0, st[i] - 1};
            up = take(up.reshape(split).pad(pz).reshape(merged), a, 0, (len - 1) * st[i] + 1);
        }
        Shape b(n), e(n);
        for (size_t i = 0; i < n; ++i) b[i] = e[i] = dl[i] * (k[i] - 1);
        Shape ws{g, cin / g, rc}, wt{g * rc, cin / g}, order{0, 2, 1}, flip;
        for (size_t i = 0; i < n; ++i) {
            ws.push_back(k[i]);
            wt.push_back(k[i]);
            order.push_back(static_cast<int64_t>(3 + i));
            flip.push_back(static_cast<int64_t>(2 + i));
        }
        const Tensor wk = w.reshape(ws).permute(order).reshape(wt).flip(flip);
        y = conv_nd(padded_input(up, b, e), wk, Shape(n, 1), dl, g);
    }
    // output_padding adds rows that no input reaches, then the pads crop.
    Shape neg_b(n), neg_e(n);
    for (size_t i = 0; i < n; ++i) {
        neg_b[i] = -begin[i];
        neg_e[i] = outpad[i] - end[i];
    }
    y = pad_spatial(y, neg_b, neg_e);
    if (c.has(2)) y = add_bias(y, c.x(2));
    return {y};
}

enum class PoolKind { Max, Avg, Lp };

Tensor pool(Ctx& c, const Tensor& x, PoolKind kind) {
    const Shape in(x.shape().begin() + 2, x.shape().end());
    const auto ks = c.ints("kernel_shape");
    const Shape kernel(ks.begin(), ks.end());
    const size_t n = kernel.size();
    if (n != in.size())
        c.error("kernel_shape has " + std::to_string(n) + " dims for input " +
                shape_str(x.shape()));
    const Window w = window(c, in, kernel);
    const bool ceil_mode = c.i("ceil_mode", 0) != 0;
    Shape out(n), extra(n);
    for (size_t i = 0; i < n; ++i) {
        const int64_t span = in[i] + w.begin[i] + w.end[i] - w.dilations[i] * (kernel[i] - 1) - 1;
        out[i] = (ceil_mode ? (span + w.strides[i] - 1) / w.strides[i] : span / w.strides[i]) + 1;
        if (ceil_mode && (out[i] - 1) * w.strides[i] >= in[i] + w.begin[i]) --out[i];
        extra[i] =
            std::max<int64_t>(0, (out[i] - 1) * w.strides[i] + w.dilations[i] * (kernel[i] - 1) +
                                     1 - (in[i] + w.begin[i] + w.end[i]));
    }
    Shape end = w.end;
    for (size_t i = 0; i < n; ++i) end[i] += extra[i];
    const double lowest =
        x.dtype().is_float() ? -kInf : static_cast<double>(std::numeric_limits<int64_t>::min());
    Tensor xp =
        kind == PoolKind::Max
            ? (x.dtype().is_float() ? pad_spatial(x, w.begin, end, lowest)
                                    : where(Tensor::ones(x.shape(), DType::Bool).pad([&] {
                                          Pads p(2, {0, 0});
                                          for (size_t i = 0; i < n; ++i)
                                              p.push_back({w.begin[i], end[i]});
                                          return p;
                                      }()),
                                            pad_spatial(x, w.begin, end),
                                            Tensor::full(Shape{}, x.dtype().min(), x.dtype())))
            : pad_spatial(x, w.begin, end);
    if (kind == PoolKind::Lp) {
        const double p = static_cast<double>(c.i("p", 2));
        xp = xp.abs().pow(p);
    }
    // Every kernel tap is a strided view of the padded input; the taps are combined.
    Tensor acc;
    Shape tap(n, 0);
    const int64_t taps = numel_of(kernel);
    for (int64_t t = 0; t < taps; ++t) {
        std::vector<Slice> sl(2);
        for (size_t i = 0; i < n; ++i) {
            const int64_t st = tap[i] * w.dilations[i];
            sl.push_back(Slice{st, st + (out[i] - 1) * w.strides[i] + 1, w.strides[i]});
        }
        const Tensor v = xp.slice(sl);
        acc = t == 0 ? v : (kind == PoolKind::Max ? maximum(acc, v) : acc + v);
        for (size_t i = n; i-- > 0;) {
            if (++tap[i] < kernel[i]) break;
            tap[i] = 0;
        }
    }
    // A pooled result is materialized: what reads it (a convolution's windows) would otherwise
    // recompute every tap at each of its own.
    if (kind == PoolKind::Max) return acc.contiguous();
    if (kind == PoolKind::Lp) return acc.pow(1.0 / static_cast<double>(c.i("p", 2)));
    // The divisor: the taps that fall on the input (and on the explicit pads when they count),
    // never on the ceil-mode overhang.
    const bool include_pad = c.i("count_include_pad", 0) != 0;
    Shape one_shape(n + 2, 1);
    for (size_t i = 0; i < n; ++i) one_shape[i + 2] = in[i];
    Tensor ones = Tensor::ones(one_shape, x.dtype());
    Tensor mask = include_pad
                      ? pad_spatial(pad_spatial(ones, w.begin, w.end, 1), Shape(n, 0), extra)
                      : pad_spatial(ones, w.begin, end);
    Tensor count;
    std::fill(tap.begin(), tap.end(), 0);
    for (int64_t t = 0; t < taps; ++t) {
        std::vector<Slice> sl(2);
        for (size_t i = 0; i < n; ++i) {
            const int64_t st = tap[i] * w.dilations[i];
            sl.push_back(Slice{st, st + (out[i] - 1) * w.strides[i] + 1, w.strides[i]});
        }
        const Tensor v = mask.slice(sl);
        count = t == 0 ? v : count + v;
        for (size_t i = n; i-- > 0;) {
            if (++tap[i] < kernel[i]) break;
            tap[i] = 0;
        }
    }
    return acc / count.contiguous();
}

Outs avg_pool(Ctx& c) { return {pool(c, c.x(0), PoolKind::Avg)}; }
Outs lp_pool(Ctx& c) { return {pool(c, c.x(0), PoolKind::Lp)}; }

Shape spatial_axes(const Tensor& x) {
    Shape a;
    for (int64_t k = 2; k < x.ndim(); ++k) a.push_back(k);
    return a;
}

// ---- normalization ------------------------------------------------------------------------

// A per-output-channel parameter of a weight [Cout, ...]: shaped [Cout, 1, ...].
Tensor per_channel_w(const Tensor& p, int64_t ndim) {
    Shape s(static_cast<size_t>(ndim), 1);
    s[0] = p.numel();
    return p.reshape(s);
}

Tensor per_channel(const Tensor& p, int64_t ndim) {
    Shape s(static_cast<size_t>(ndim), 1);
    s[1] = p.numel();
    return p.reshape(s);
}

Outs batch_norm(Ctx& c) {
    const Tensor& x = c.x(0);
    const double eps = c.f("epsilon", 1e-5);
    const int64_t r = x.ndim();
    const Tensor scale = per_channel(c.x(1), r), bias = per_channel(c.x(2), r);
    const bool training = c.opset >= 14 ? c.i("training_mode", 0) != 0 : c.used(1);
    if (!training) {
        const Tensor mean = per_channel(c.x(3), r), var = per_channel(c.x(4), r);
        return {(x - mean) * (scale / (var + scalar(eps, x.dtype())).sqrt()) + bias};
    }
    Shape axes{0};
    for (int64_t k = 2; k < r; ++k) axes.push_back(k);
    const Tensor mean = x.mean(axes, true), var = x.var(axes, true, 0);
    const Tensor y = (x - mean) * (scale / (var + scalar(eps, x.dtype())).sqrt()) + bias;
    const double m = c.f("momentum", 0.9);
    const Tensor rm = c.x(3) * scalar(m, x.dtype()) + mean.reshape({-1}) * scalar(1 - m, x.dtype());
    const Tensor rv = c.x(4) * scalar(m, x.dtype()) + var.reshape({-1}) * scalar(1 - m, x.dtype());
    return {y, rm, rv};
}

Outs layer_norm(Ctx& c) {
    const Tensor& x = c.x(0);
    const int64_t axis = axis_of(c.i("axis", -1), x.ndim());
    Shape axes;
    for (int64_t k = axis; k < x.ndim(); ++k) axes.push_back(k);
    const Tensor mean = x.mean(axes, true);
    const Tensor d = x - mean;
    const Tensor inv = ((d * d).mean(axes, true) + scalar(c.f("epsilon", 1e-5), x.dtype())).rsqrt();
    Tensor y = d * inv * c.x(1);
    if (c.has(2)) y = y + c.x(2);
    return {y, mean, inv};
}

Outs instance_norm(Ctx& c) {
    const Tensor& x = c.x(0);
    const Shape axes = spatial_axes(x);
    const Tensor mean = x.mean(axes, true);
    const Tensor var = x.var(axes, true, 0);
    const Tensor y = (x - mean) * (var + scalar(c.f("epsilon", 1e-5), x.dtype())).rsqrt();
    return {y * per_channel(c.x(1), x.ndim()) + per_channel(c.x(2), x.ndim())};
}

Outs lrn(Ctx& c) {
    const Tensor& x = c.x(0);
    const int64_t size = c.i("size", 1);
    const double alpha = c.f("alpha", 1e-4), beta = c.f("beta", 0.75), bias = c.f("bias", 1.0);
    const Tensor sq = x * x;
    Pads p(static_cast<size_t>(x.ndim()), {0, 0});
    p[1] = {(size - 1) / 2, size - 1 - (size - 1) / 2};
    const Tensor padded = sq.pad(p);
    const int64_t C = x.shape()[1];
    Tensor sum;
    for (int64_t k = 0; k < size; ++k) {
        const Tensor v = take(padded, 1, k, C);
        sum = k == 0 ? v : sum + v;
    }
    return {x /
            (scalar(bias, x.dtype()) + scalar(alpha / static_cast<double>(size), x.dtype()) * sum)
                .pow(beta)};
}

Outs mvn(Ctx& c) {
    const Tensor& x = c.x(0);
    const Shape axes = axes_of(c.ints("axes", {0, 2, 3}), x.ndim());
    const Tensor mean = x.mean(axes, true);
    const Tensor var = (x * x).mean(axes, true) - mean * mean;
    return {(x - mean) / (var.sqrt() + scalar(1e-9, x.dtype()))};
}

// ---- losses -------------------------------------------------------------------------------

// NegativeLogLikelihoodLoss over input [N, C, d...] (log-probabilities) and target [N, d...].
Tensor nll(Ctx& c, const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight) {
    const std::string reduction = c.s("reduction", "mean");
    const bool has_ignore = c.has_attr("ignore_index");
    const int64_t ignore = c.i("ignore_index", 0);
    const Tensor t = target.cast(DType::Int64);
    const Tensor ign = has_ignore ? (t == scalar(static_cast<double>(ignore), DType::Int64))
                                  : Tensor::zeros(t.shape(), DType::Bool);
    const Tensor safe = where(ign, scalar(0, DType::Int64), t);
    const Tensor picked = -input.gather(1, safe.unsqueeze(1)).squeeze(1);
    Tensor w = weight ? weight->index_select(0, safe.reshape({-1})).reshape(t.shape())
                      : Tensor::ones(t.shape(), input.dtype());
    w = where(ign, scalar(0, input.dtype()), w);
    const Tensor loss = picked * w;
    if (reduction == "none") return loss;
    if (reduction == "sum") return loss.sum();
    return loss.sum() / w.sum();
}

Outs nll_loss(Ctx& c) {
    return {nll(c, c.x(0), c.x(1), c.has(2) ? std::optional<Tensor>(c.x(2)) : std::nullopt)};
}

Outs softmax_ce(Ctx& c) {
    const Tensor lp = c.x(0).log_softmax(1);
    return {nll(c, lp, c.x(1), c.has(2) ? std::optional<Tensor>(c.x(2)) : std::nullopt), lp};
}

// ---- Resize -------------------------------------------------------------------------------

// Per output position of one axis: the input positions it reads and their weights, and whether
// it is outside (tf_crop_and_resize's extrapolation). Computed on the host from sizes only.
struct Taps {
    int n = 1;
    std::vector<int64_t> idx; // [out][n]
    std::vector<double> w;    // [out][n]
    std::vector<bool> outside;
};

double cubic(double x, double a) {
    x = std::abs(x);
    if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0;
}

Taps resize_taps(int64_t in, int64_t out, double scale, const std::string& mode,
                 const std::string& ctm, const std::string& nearest, double a, bool exclude,
                 double roi0, double roi1) {
    Taps t;
    t.n = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
    const double out_w = scale * static_cast<double>(in);
    for (int64_t o = 0; o < out; ++o) {
        const auto x = static_cast<double>(o);
        double xo = 0;
        bool outside = false;
        if (ctm == "align_corners")
            xo = out_w == 1 ? 0 : x * static_cast<double>(in - 1) / (out_w - 1);
        else if (ctm == "asymmetric")
            xo = x / scale;
        else if (ctm == "tf_crop_and_resize") {
            xo = out_w == 1 ? (roi1 - roi0) * static_cast<double>(in - 1) / 2
                            : x * (roi1 - roi0) * static_cast<double>(in - 1) / (out_w - 1);
            xo += roi0 * static_cast<double>(in - 1);
            outside = xo < 0 || xo > static_cast<double>(in - 1);
        } else if (ctm == "pytorch_half_pixel")
            xo = out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
        else if (ctm == "tf_half_pixel_for_nn")
            xo = (x + 0.5) / scale;
        else
            xo = (x + 0.5) / scale - 0.5;
        t.outside.push_back(outside);
        const double fl = std::floor(xo);
        const bool integer = xo == fl;
        // The tap left of xo, with ratio in (0, 1] (an integer position is the right tap of
        // the pair, as ONNX's reference picks its neighbours).
        const auto i0 = static_cast<int64_t>(integer ? fl - 1 : fl);
        const double r = integer ? 1.0 : xo - fl;
        auto clampi = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
        if (mode == "nearest") {
            bool right = true;
            if (!integer) {
                if (nearest == "round_prefer_ceil")
                    right = r >= 0.5;
                else if (nearest == "floor")
                    right = false;
                else if (nearest == "ceil")
                    right = true;
                else
                    right = r > 0.5;
            }
            t.idx.push_back(clampi(right ? i0 + 1 : i0));
            t.w.push_back(1);
            continue;
        }
        std::vector<int64_t> ids;
        std::vector<double> ws;
        if (mode == "linear") {
            ids = {i0, i0 + 1};
            ws = {1 - r, r};
        } else {
            ids = {i0 - 1, i0, i0 + 1, i0 + 2};
            ws = {cubic(1 + r, a), cubic(r, a), cubic(1 - r, a), cubic(2 - r, a)};
        }
        if (exclude) {
            double sum = 0;
            for (size_t k = 0; k < ids.size(); ++k) {
                if (ids[k] < 0 || ids[k] >= in) ws[k] = 0;
                sum += ws[k];
            }
            for (double& v : ws) v /= sum;
        }
        for (size_t k = 0; k < ids.size(); ++k) {
            t.idx.push_back(clampi(ids[k]));
            t.w.push_back(ws[k]);
        }
    }
    return t;
}

Tensor resize_axis(const Tensor& x, int64_t axis, const Taps& t, int64_t out,
                   double extrapolation) {
    Tensor y;
    Shape ws(static_cast<size_t>(x.ndim()), 1);
    ws[static_cast<size_t>(axis)] = out;
    for (int k = 0; k < t.n; ++k) {
        std::vector<int64_t> idx;
        std::vector<double> w;
        for (int64_t o = 0; o < out; ++o) {
            idx.push_back(t.idx[static_cast<size_t>(o * t.n + k)]);
            w.push_back(t.w[static_cast<size_t>(o * t.n + k)]);
        }
        Tensor v = x.index_select(axis, Tensor::from_vector(idx));
        if (t.n > 1) v = v * Tensor::from_vector(w, ws, x.dtype());
        y = k == 0 ? v : y + v;
    }
    if (std::find(t.outside.begin(), t.outside.end(), true) != t.outside.end()) {
        std::vector<bool> o(t.outside.begin(), t.outside.end());
        y = where(Tensor::from_vector(o, ws), scalar(extrapolation, x.dtype()), y);
    }
    return y;
}

Outs resize_impl(Ctx& c, const Tensor& x, std::vector<double> scales, std::vector<int64_t> sizes,
                 std::vector<double> roi, const std::string& mode, const std::string& ctm,
                 const std::string& nearest) {
    const int64_t r = x.ndim();
    std::vector<int64_t> out(static_cast<size_t>(r));
    if (!sizes.empty()) {
        if (static_cast<int64_t>(sizes.size()) != r)
            c.error("sizes has " + std::to_string(sizes.size()) + " values for " +
                    std::to_string(r) + " dims");
        scales.clear();
        for (int64_t k = 0; k < r; ++k)
            scales.push_back(static_cast<double>(sizes[static_cast<size_t>(k)]) /
                             static_cast<double>(x.shape()[static_cast<size_t>(k)]));
        out = sizes;
    } else {
        if (static_cast<int64_t>(scales.size()) != r)
            c.error("scales has " + std::to_string(scales.size()) + " values for " +
                    std::to_string(r) + " dims");
        for (int64_t k = 0; k < r; ++k)
            out[static_cast<size_t>(k)] = static_cast<int64_t>(
                std::floor(static_cast<double>(x.shape()[static_cast<size_t>(k)]) *
                           scales[static_cast<size_t>(k)]));
    }
    Tensor y = x;
    for (int64_t k = 0; k < r; ++k) {
        const auto kk = static_cast<size_t>(k);
        const int64_t in = x.shape()[kk];
        if (out[kk] == in && scales[kk] == 1 && ctm != "tf_crop_and_resize") continue;
        const double r0 = roi.empty() ? 0 : roi[kk],
                     r1 = roi.empty() ? 1 : roi[kk + static_cast<size_t>(r)];
        const Taps t =
            resize_taps(in, out[kk], scales[kk], mode, ctm, nearest, c.f("cubic_coeff_a", -0.75),
                        c.i("exclude_outside", 0) != 0, r0, r1);
        y = resize_axis(y, k, t, out[kk], c.f("extrapolation_value", 0));
    }
    return {y};
}

Outs resize(Ctx& c) {
    const std::string mode = c.s("mode", "nearest");
    if (c.opset < 11)
        return resize_impl(c, c.x(0), c.doubles_of(1), {}, {}, mode, "asymmetric", "floor");
    std::vector<double> roi, scales;
    std::vector<int64_t> sizes;
    if (c.has(1)) roi = c.doubles_of(1);
    if (c.has(2)) scales = c.doubles_of(2);
    if (c.has(3)) sizes = c.ints_of(3);
    if (!sizes.empty()) scales.clear();
    return resize_impl(c, c.x(0), scales, sizes, roi, mode,
                       c.s("coordinate_transformation_mode", "half_pixel"),
                       c.s("nearest_mode", "round_prefer_floor"));
}

Outs upsample(Ctx& c) {
    const std::vector<double> scales = c.opset >= 9 ? c.doubles_of(1) : c.floats("scales");
    return resize_impl(c, c.x(0), scales, {}, {}, c.s("mode", "nearest"), "asymmetric", "floor");
}

// ---- data-dependent shapes ----------------------------------------------------------------

Outs non_zero(Ctx& c) {
    const Tensor& x = c.x(0);
    const std::vector<double> v = x.to_vector<double>();
    const Shape& s = x.shape();
    std::vector<std::vector<int64_t>> coords(s.size());
    for (size_t flat = 0; flat < v.size(); ++flat) {
        if (v[flat] == 0) continue;
        size_t rem = flat;
        for (size_t d = s.size(); d-- > 0;) {
            coords[d].push_back(static_cast<int64_t>(rem % static_cast<size_t>(s[d])));
            rem /= static_cast<size_t>(s[d]);
        }
    }
    std::vector<int64_t> out;
    for (const auto& row : coords) out.insert(out.end(), row.begin(), row.end());
    const auto nnz = static_cast<int64_t>(s.empty() ? (v.at(0) != 0 ? 1 : 0) : coords[0].size());
    if (s.empty()) return {Tensor::zeros({0, nnz}, DType::Int64)};
    return {Tensor::from_vector(out, {static_cast<int64_t>(s.size()), nnz})};
}

Outs compress(Ctx& c) {
    Tensor x = c.x(0);
    const std::vector<bool> cond = c.x(1).to_vector<bool>();
    int64_t axis = 0;
    if (c.has_attr("axis"))
        axis = axis_of(c.i("axis", 0), x.ndim());
    else
        x = x.reshape({-1});
    std::vector<int64_t> idx;
    const int64_t n = x.shape()[static_cast<size_t>(axis)];
    for (int64_t k = 0; k < n && k < static_cast<int64_t>(cond.size()); ++k)
        if (cond[static_cast<size_t>(k)]) idx.push_back(k);
    return {x.index_select(axis, Tensor::from_vector(idx))};
}

Outs reverse_sequence(Ctx& c) {
    const Tensor& x = c.x(0);
    const int64_t ba = c.i("batch_axis", 1), ta = c.i("time_axis", 0);
    const std::vector<int64_t> lens = c.ints_of(1);
    const int64_t T = x.shape()[static_cast<size_t>(ta)], B = x.shape()[static_cast<size_t>(ba)];
    std::vector<int64_t> idx(static_cast<size_t>(T * B));
    for (int64_t t = 0; t < T; ++t)
        for (int64_t b = 0; b < B; ++b) {
            const int64_t l = lens[static_cast<size_t>(b)];
            idx[static_cast<size_t>(ta == 0 ? t * B + b : b * T + t)] = t < l ? l - 1 - t : t;
        }
    Shape is(static_cast<size_t>(x.ndim()), 1);
    is[static_cast<size_t>(ta)] = T;
    is[static_cast<size_t>(ba)] = B;
    return {x.gather(ta, Tensor::from_vector(idx, is).expand(x.shape()))};
}

// ---- activations --------------------------------------------------------------------------

Tensor selu(const Tensor& x, double alpha, double gamma) {
    const DType dt = x.dtype();
    return scalar(gamma, dt) *
           where(x > scalar(0, dt), x, scalar(alpha, dt) * (x.exp() - scalar(1, dt)));
}

Tensor hard_sigmoid(const Tensor& x, double alpha, double beta) {
    return (x * scalar(alpha, x.dtype()) + scalar(beta, x.dtype())).clip(0, 1);
}

// ---- windows ------------------------------------------------------------------------------

template <class F>
Outs window_fn(Ctx& c, F f) {
    const int64_t size = c.ints_of(0).at(0);
    const bool periodic = c.i("periodic", 1) != 0;
    const DType dt =
        dtype_of_onnx(static_cast<int>(c.i("output_datatype", 1))).value_or(DType::Float32);
    const auto N = static_cast<double>(periodic ? size : size - 1);
    const Tensor n = Tensor::arange(size, DType::Float64) * (2 * M_PI / N);
    return {f(n).cast(dt)};
}

// ---- quantization -------------------------------------------------------------------------

// A per-axis parameter (1-D, along `axis` of x) or a scalar, shaped to broadcast against x.
Tensor along(const Tensor& p, const Tensor& x, int64_t axis) {
    if (p.ndim() == 0 || p.numel() == 1) return p.reshape({});
    Shape s(static_cast<size_t>(x.ndim()), 1);
    s[static_cast<size_t>(axis_of(axis, x.ndim()))] = p.numel();
    return p.reshape(s);
}

// round half to even, + zero point, saturated to the integer type, in that type.
Tensor saturate(const Tensor& scaled, const Tensor* zp, DType dt) {
    Tensor y = scaled.round();
    if (zp) y = y + zp->cast(scaled.dtype());
    return y.clip(dt.min(), dt.max()).cast(dt);
}

Outs quantize_linear(Ctx& c) {
    const Tensor x = c.x(0).dtype() == DType::Float32 ? c.x(0) : c.x(0).cast(DType::Float32);
    const int64_t axis = c.i("axis", 1);
    const Tensor s = along(c.x(1), x, axis).cast(DType::Float32);
    const DType dt = c.has(2) ? c.x(2).dtype() : DType::UInt8;
    const Tensor zp = c.has(2) ? along(c.x(2), x, axis) : Tensor();
    return {saturate(x / s, c.has(2) ? &zp : nullptr, dt)};
}

Outs dequantize_linear(Ctx& c) {
    const Tensor& x = c.x(0);
    const int64_t axis = c.i("axis", 1);
    const Tensor s = along(c.x(1), x, axis);
    Tensor v = x.cast(s.dtype());
    if (c.has(2)) v = v - along(c.x(2), x, axis).cast(s.dtype());
    return {v * s};
}

Outs dynamic_quantize_linear(Ctx& c) {
    const Tensor& x = c.x(0);
    const Tensor zero = scalar(0, x.dtype());
    const Tensor lo = minimum(x.min(), zero), hi = maximum(x.max(), zero);
    const Tensor s = (hi - lo) / scalar(255, x.dtype());
    const Tensor zp = (zero - lo / s).round().clip(0, 255).cast(DType::UInt8);
    return {saturate(x / s, &zp, DType::UInt8), s, zp};
}

// (a - a_zp) @ (b - b_zp) in Int32; a_zp may be per row of a, b_zp per column of b.
Tensor int_matmul(const Tensor& a, const Tensor& b, const Tensor* azp, const Tensor* bzp) {
    Tensor x = a.cast(DType::Int32), y = b.cast(DType::Int32);
    if (azp)
        x = x - (azp->numel() > 1 ? azp->reshape({-1, 1}) : azp->reshape({})).cast(DType::Int32);
    if (bzp) y = y - (bzp->numel() > 1 ? bzp->reshape({-1}) : bzp->reshape({})).cast(DType::Int32);
    return x.matmul(y);
}

Outs matmul_integer(Ctx& c) {
    const Tensor azp = c.has(2) ? c.x(2) : Tensor(), bzp = c.has(3) ? c.x(3) : Tensor();
    return {int_matmul(c.x(0), c.x(1), c.has(2) ? &azp : nullptr, c.has(3) ? &bzp : nullptr)};
}

Outs qlinear_matmul(Ctx& c) {
    const Tensor azp = c.x(2), bzp = c.x(5);
    const Tensor acc = int_matmul(c.x(0), c.x(3), &azp, &bzp).cast(DType::Float32);
    const Tensor scale =
        c.x(1).cast(DType::Float32) * c.x(4).cast(DType::Float32) / c.x(6).cast(DType::Float32);
    const Tensor yzp = c.x(7);
    return {saturate(acc * scale, &yzp, yzp.dtype())};
}

// Integer convolution: (x - x_zp) conv (w - w_zp), accumulated exactly in Int32.
Tensor int_conv(Ctx& c, const Tensor& x, const Tensor& w, const Tensor* xzp, const Tensor* wzp) {
    Tensor xi = x.cast(DType::Int32), wi = w.cast(DType::Int32);
    if (xzp) xi = xi - xzp->reshape({}).cast(DType::Int32);
    if (wzp)
        wi = wi - (wzp->numel() > 1 ? per_channel_w(*wzp, w.ndim()) : wzp->reshape({}))
                      .cast(DType::Int32);
    const Shape in(x.shape().begin() + 2, x.shape().end()),
        k(w.shape().begin() + 2, w.shape().end());
    const Window win = window(c, in, k);
    return conv_nd(padded_input(xi, win.begin, win.end), wi, win.strides, win.dilations,
                   c.i("group", 1));
}

Outs conv_integer(Ctx& c) {
    const Tensor xzp = c.has(2) ? c.x(2) : Tensor(), wzp = c.has(3) ? c.x(3) : Tensor();
    return {int_conv(c, c.x(0), c.x(1), c.has(2) ? &xzp : nullptr, c.has(3) ? &wzp : nullptr)};
}

Outs qlinear_conv(Ctx& c) {
    const Tensor xzp = c.x(2), wzp = c.x(5);
    Tensor acc = int_conv(c, c.x(0), c.x(3), &xzp, &wzp);
    if (c.has(8)) acc = add_bias(acc, c.x(8).cast(DType::Int32));
    const Tensor ws = c.x(4).numel() > 1 ? per_channel(c.x(4), acc.ndim()) : c.x(4).reshape({});
    const Tensor scale = c.x(1).reshape({}) * ws / c.x(6).reshape({});
    const Tensor yzp = c.x(7);
    return {saturate(acc.cast(DType::Float32) * scale, &yzp, yzp.dtype())};
}

// ---- training ops (ai.onnx.preview.training) ----------------------------------------------

// The optimizers' inputs: R, T, then n groups of tensors (X..., G..., and state).
Outs optimizer(Ctx& c, size_t groups) {
    const size_t n = (c.in.size() - 2) / groups;
    const double r = c.doubles_of(0).at(0);
    const int64_t t = c.ints_of(1).at(0);
    const std::string& op = c.node.op_type;
    Outs xs, s1, s2;
    for (size_t k = 0; k < n; ++k) {
        const Tensor& x = c.x(2 + k);
        const DType dt = x.dtype();
        auto S = [&](double v) { return scalar(v, dt); };
        const Tensor g = c.x(2 + n + k) + x * S(c.f("norm_coefficient", 0));
        if (op == "Adagrad") {
            const double lr = r / (1 + static_cast<double>(t) * c.f("decay_factor", 0));
            const Tensor h = c.x(2 + 2 * n + k) + g * g;
            xs.push_back(x - S(lr) * g / (h.sqrt() + S(c.f("epsilon", 0))));
            s1.push_back(h);
        } else if (op == "Momentum") {
            const double alpha = c.f("alpha", 0), beta = t > 0 ? c.f("beta", 0) : 1;
            const Tensor v = S(alpha) * c.x(2 + 2 * n + k) + S(beta) * g;
            xs.push_back(c.s("mode", "standard") == "nesterov" ? x - S(r) * (g + S(alpha) * v)
                                                               : x - S(r) * v);
            s1.push_back(v);
        } else { // Adam
            const double alpha = c.f("alpha", 0.9), beta = c.f("beta", 0.999);
            const Tensor v = S(alpha) * c.x(2 + 2 * n + k) + S(1 - alpha) * g;
            const Tensor h = S(beta) * c.x(2 + 3 * n + k) + S(1 - beta) * g * g;
            const double tt = static_cast<double>(t);
            const double ra =
                t > 0 ? r * std::sqrt(1 - std::pow(beta, tt)) / (1 - std::pow(alpha, tt)) : r;
            const Tensor xn = x - S(ra) * v / (h.sqrt() + S(c.f("epsilon", 0)));
            xs.push_back(xn * S(1 - c.f("norm_coefficient_post", 0)));
            s1.push_back(v);
            s2.push_back(h);
        }
    }
    xs.insert(xs.end(), s1.begin(), s1.end());
    xs.insert(xs.end(), s2.begin(), s2.end());
    return xs;
}

// ---- random numbers (Tempura's Threefry stream; a `seed` attribute is not honoured) -------

DType random_dtype(Ctx& c, DType def) {
    return c.has_attr("dtype") ? dtype_of_onnx(static_cast<int>(c.i("dtype", 1))).value_or(def)
                               : def;
}

Outs random_like(Ctx& c, bool normal) {
    const Tensor& x = c.x(0);
    const DType dt = random_dtype(c, x.dtype());
    if (normal) return {Tensor::normal(x.shape(), c.f("mean", 0), c.f("scale", 1), dt)};
    return {Tensor::uniform(x.shape(), c.f("low", 0), c.f("high", 1), dt)};
}

Outs random_shaped(Ctx& c, bool normal) {
    const auto s = c.ints("shape");
    const Shape shape(s.begin(), s.end());
    const DType dt = random_dtype(c, DType::Float32);
    if (normal) return {Tensor::normal(shape, c.f("mean", 0), c.f("scale", 1), dt)};
    return {Tensor::uniform(shape, c.f("low", 0), c.f("high", 1), dt)};
}

Outs bernoulli(Ctx& c) {
    const Tensor& p = c.x(0);
    const DType dt = random_dtype(c, p.dtype());
    return {(Tensor::rand(p.shape(), DType::Float64) < p.cast(DType::Float64)).cast(dt)};
}

// ---- Unique (data-dependent: realizes its input) ------------------------------------------

Outs unique(Ctx& c) {
    Tensor x = c.x(0);
    const bool has_axis = c.has_attr("axis");
    if (!has_axis) x = x.reshape({-1});
    const int64_t axis = has_axis ? axis_of(c.i("axis", 0), x.ndim()) : 0;
    const bool sorted = c.i("sorted", 1) != 0;
    // Slices along axis, as rows of doubles (integers up to 2^53 compare exactly).
    const Tensor rows = x.permute([&] {
        Shape o{axis};
        for (int64_t k = 0; k < x.ndim(); ++k)
            if (k != axis) o.push_back(k);
        return o;
    }());
    const int64_t n = x.shape()[static_cast<size_t>(axis)];
    const std::vector<double> v = rows.to_vector<double>();
    const size_t w = n == 0 ? 0 : v.size() / static_cast<size_t>(n);
    auto row = [&](int64_t i) {
        return std::vector<double>(v.begin() + static_cast<long>(static_cast<size_t>(i) * w),
                                   v.begin() + static_cast<long>(static_cast<size_t>(i + 1) * w));
    };
    std::map<std::vector<double>, int64_t> first; // row -> first index
    std::vector<int64_t> order;                   // first indices in order of appearance
    for (int64_t i = 0; i < n; ++i)
        if (first.emplace(row(i), i).second) order.push_back(i);
    if (sorted) {
        order.clear();
        for (const auto& [r, i] : first) order.push_back(i);
    }
    std::map<int64_t, int64_t> slot; // first index -> output position
    for (size_t k = 0; k < order.size(); ++k) slot[order[k]] = static_cast<int64_t>(k);
    std::vector<int64_t> inverse, counts(order.size(), 0);
    for (int64_t i = 0; i < n; ++i) {
        const int64_t s = slot[first[row(i)]];
        inverse.push_back(s);
        ++counts[static_cast<size_t>(s)];
    }
    const Tensor idx = Tensor::from_vector(order);
    return {x.index_select(axis, idx), idx, Tensor::from_vector(inverse),
            Tensor::from_vector(counts)};
}

// ---- MaxPool's indices, MaxUnpool ---------------------------------------------------------

Outs max_pool_with_indices(Ctx& c) {
    const Tensor& x = c.x(0);
    if (!c.used(1)) return {pool(c, x, PoolKind::Max)};
    // The same taps as pool(): each tap's values and their flat positions in x; the first
    // maximum wins.
    const Shape in(x.shape().begin() + 2, x.shape().end());
    const auto ks = c.ints("kernel_shape");
    const Shape kernel(ks.begin(), ks.end());
    const size_t n = kernel.size();
    const Window w = window(c, in, kernel);
    const bool ceil_mode = c.i("ceil_mode", 0) != 0;
    Shape out(n), end = w.end;
    for (size_t i = 0; i < n; ++i) {
        const int64_t span = in[i] + w.begin[i] + w.end[i] - w.dilations[i] * (kernel[i] - 1) - 1;
        out[i] = (ceil_mode ? (span + w.strides[i] - 1) / w.strides[i] : span / w.strides[i]) + 1;
        if (ceil_mode && (out[i] - 1) * w.strides[i] >= in[i] + w.begin[i]) --out[i];
        end[i] +=
            std::max<int64_t>(0, (out[i] - 1) * w.strides[i] + w.dilations[i] * (kernel[i] - 1) +
                                     1 - (in[i] + w.begin[i] + w.end[i]));
    }
    if (!x.dtype().is_float()) c.error("indices of an integer MaxPool");
    const Tensor xp = pad_spatial(x, w.begin, end, -kInf);
    // Flat positions in x, row-major, or with the spatial dims column-major (storage_order 1).
    Tensor base = Tensor::arange(x.numel(), DType::Int64);
    if (c.i("storage_order", 0) != 0) {
        Shape rev{x.shape()[0], x.shape()[1]}, order{0, 1};
        for (size_t i = n; i-- > 0;) {
            rev.push_back(in[i]);
            order.push_back(static_cast<int64_t>(2 + i));
        }
        base = base.reshape(rev).permute(order);
    } else {
        base = base.reshape(x.shape());
    }
    const Tensor pos = pad_spatial(base, w.begin, end);
    Tensor best, idx;
    Shape tap(n, 0);
    for (int64_t t = 0; t < numel_of(kernel); ++t) {
        std::vector<Slice> sl(2);
        for (size_t i = 0; i < n; ++i) {
            const int64_t st = tap[i] * w.dilations[i];
            sl.push_back(Slice{st, st + (out[i] - 1) * w.strides[i] + 1, w.strides[i]});
        }
        const Tensor v = xp.slice(sl), p = pos.slice(sl);
        if (t == 0) {
            best = v;
            idx = p;
        } else {
            const Tensor better = v > best;
            idx = where(better, p, idx);
            best = where(better, v, best);
        }
        for (size_t i = n; i-- > 0;) {
            if (++tap[i] < kernel[i]) break;
            tap[i] = 0;
        }
    }
    return {best, idx};
}

Outs max_unpool(Ctx& c) {
    const Tensor& x = c.x(0);
    const Tensor idx = c.x(1).cast(DType::Int64);
    const auto ks = c.ints("kernel_shape"), st = c.ints("strides"), pd = c.ints("pads");
    const size_t n = ks.size();
    // The indices address the pooled input's shape (the default output); a larger
    // output_shape adds zeros after each spatial dim, as onnxruntime places them.
    Shape out{x.shape()[0], x.shape()[1]};
    for (size_t i = 0; i < n; ++i) {
        const int64_t s = st.empty() ? 1 : st[i], b = pd.empty() ? 0 : pd[i],
                      e = pd.empty() ? 0 : pd[i + n];
        out.push_back((x.shape()[2 + i] - 1) * s + ks[i] - b - e);
    }
    const Tensor flat = Tensor::zeros({numel_of(out)}, x.dtype());
    Tensor y = flat.scatter_add(0, idx.reshape({-1}), x.reshape({-1})).reshape(out);
    if (c.has(2)) {
        const auto o = c.ints_of(2);
        Shape b(n, 0), e(n, 0);
        for (size_t i = 0; i < n; ++i) e[i] = o.at(2 + i) - out[2 + i];
        y = pad_spatial(y, b, e);
    }
    return {y};
}

// ---- recurrent layers: RNN, GRU, LSTM, unrolled over the (known) sequence length ------------

Tensor activation(Ctx& c, const std::string& name, const Tensor& x) {
    if (name == "Sigmoid") return x.sigmoid();
    if (name == "Tanh") return x.tanh();
    if (name == "Relu") return x.relu();
    c.error("activation " + name + " is not supported");
}

enum class Cell { Rnn, Gru, Lstm };

Outs recurrent(Ctx& c, Cell kind) {
    const bool batch_first = c.i("layout", 0) != 0;
    Tensor X = c.x(0);
    if (batch_first) X = X.transpose(0, 1); // [T, B, I]
    const Tensor &W = c.x(1), &R = c.x(2);
    const int64_t T = X.shape()[0], B = X.shape()[1], H = R.shape()[2];
    const int64_t G = kind == Cell::Lstm ? 4 : kind == Cell::Gru ? 3 : 1;
    const std::string direction = c.s("direction", "forward");
    const int64_t D = direction == "bidirectional" ? 2 : 1;
    if (c.i("input_forget", 0) != 0) c.error("input_forget");
    std::vector<std::string> acts;
    auto it = c.node.attrs.find("activations");
    if (it != c.node.attrs.end()) acts = it->second.strings;
    const std::vector<std::string> def =
        kind == Cell::Lstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
        : kind == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                            : std::vector<std::string>{"Tanh"};
    const DType dt = X.dtype();
    const double clip_v = c.f("clip", 0);
    auto clip = [&](const Tensor& v) { return c.has_attr("clip") ? v.clip(-clip_v, clip_v) : v; };
    // sequence_lens: steps at or past a batch entry's length keep its state and output zeros.
    std::vector<int64_t> lens(static_cast<size_t>(B), T);
    if (c.has(4)) lens = c.ints_of(4);
    const bool ragged = std::any_of(lens.begin(), lens.end(), [&](int64_t l) { return l != T; });
    if (ragged && direction != "forward") c.error("sequence_lens with direction " + direction);
    std::vector<Tensor> ys_dir, hs, cs;
    for (int64_t d = 0; d < D; ++d) {
        auto act = [&](size_t k) {
            return acts.size() >= def.size() * static_cast<size_t>(d + 1)
                       ? acts[def.size() * static_cast<size_t>(d) + k]
                       : def[k];
        };
        auto pick = [&](const Tensor& t) { return take(t, 0, d, 1).squeeze(0); };
        const Tensor Wd = pick(W), Rd = pick(R);
        const bool reverse = direction == "reverse" || d == 1;
        Tensor Wb = Tensor::zeros({G * H}, dt), Rb = Tensor::zeros({G * H}, dt);
        if (c.has(3)) {
            const Tensor b = pick(c.x(3));
            Wb = take(b, 0, 0, G * H);
            Rb = take(b, 0, G * H, G * H);
        }
        const Tensor XW = X.matmul(Wd.transpose(0, 1)) + Wb; // [T, B, G H]
        Tensor h = c.has(5) ? pick(c.x(5)) : Tensor::zeros({B, H}, dt);
        Tensor cell = kind == Cell::Lstm && c.has(6) ? pick(c.x(6)) : Tensor::zeros({B, H}, dt);
        Tensor P;
        if (kind == Cell::Lstm && c.has(7)) P = pick(c.x(7));
        auto chunk = [&](const Tensor& v, int64_t k) { return take(v, v.ndim() - 1, k * H, H); };
        std::vector<Tensor> ys(static_cast<size_t>(T));
        for (int64_t step = 0; step < T; ++step) {
            const int64_t t = reverse ? T - 1 - step : step;
            const Tensor xw = take(XW, 0, t, 1).squeeze(0); // [B, G H]
            Tensor hn, cn;
            if (kind == Cell::Rnn) {
                hn = activation(c, act(0), clip(xw + h.matmul(Rd.transpose(0, 1)) + Rb));
            } else if (kind == Cell::Gru) {
                const Tensor Rzr = take(Rd, 0, 0, 2 * H), Rh = take(Rd, 0, 2 * H, H);
                const Tensor hzr = h.matmul(Rzr.transpose(0, 1)) + take(Rb, 0, 0, 2 * H);
                const Tensor z = activation(c, act(0), clip(chunk(xw, 0) + chunk(hzr, 0)));
                const Tensor r = activation(c, act(0), clip(chunk(xw, 1) + chunk(hzr, 1)));
                const Tensor rbh = take(Rb, 0, 2 * H, H);
                const Tensor inner = c.i("linear_before_reset", 0) != 0
                                         ? r * (h.matmul(Rh.transpose(0, 1)) + rbh)
                                         : (r * h).matmul(Rh.transpose(0, 1)) + rbh;
                const Tensor hh = activation(c, act(1), clip(chunk(xw, 2) + inner));
                hn = (scalar(1, dt) - z) * hh + z * h;
            } else {
                const Tensor g = xw + h.matmul(Rd.transpose(0, 1)) + Rb;
                Tensor gi = chunk(g, 0), go = chunk(g, 1), gf = chunk(g, 2);
                if (P.ndim() > 0) {
                    gi = gi + take(P, 0, 0, H) * cell;
                    gf = gf + take(P, 0, 2 * H, H) * cell;
                }
                const Tensor i = activation(c, act(0), clip(gi)),
                             f = activation(c, act(0), clip(gf));
                cn = f * cell + i * activation(c, act(1), clip(chunk(g, 3)));
                if (P.ndim() > 0) go = go + take(P, 0, H, H) * cn;
                hn = activation(c, act(0), clip(go)) * activation(c, act(2), cn);
            }
            if (ragged) {
                std::vector<bool> live;
                for (int64_t l : lens) live.push_back(t < l);
                const Tensor m = Tensor::from_vector(live, {B, 1});
                ys[static_cast<size_t>(t)] = where(m, hn, scalar(0, dt));
                h = where(m, hn, h);
                if (kind == Cell::Lstm) cell = where(m, cn, cell);
            } else {
                ys[static_cast<size_t>(t)] = hn;
                h = hn;
                if (kind == Cell::Lstm) cell = cn;
            }
        }
        ys_dir.push_back(Tensor::stack(ys, 0)); // [T, B, H]
        hs.push_back(h);
        cs.push_back(cell);
    }
    Tensor Y = Tensor::stack(ys_dir, 1), Yh = Tensor::stack(hs, 0), Yc = Tensor::stack(cs, 0);
    if (batch_first) {
        Y = Y.permute({2, 0, 1, 3});
        Yh = Yh.transpose(0, 1);
        Yc = Yc.transpose(0, 1);
    }
    if (kind == Cell::Lstm) return {Y, Yh, Yc};
    return {Y, Yh};
}

// ---- NonMaxSuppression (data-dependent: realizes boxes and scores) ------------------------

Outs non_max_suppression(Ctx& c) {
    const Tensor &boxes = c.x(0), &scores = c.x(1);
    const int64_t B = scores.shape()[0], C = scores.shape()[1], S = scores.shape()[2];
    const int64_t max_out = c.has(2) && c.x(2).numel() > 0 ? c.ints_of(2).at(0) : 0;
    const double iou_t = c.has(3) && c.x(3).numel() > 0 ? c.doubles_of(3).at(0) : 0;
    const bool has_score_t = c.has(4) && c.x(4).numel() > 0;
    const double score_t = has_score_t ? c.doubles_of(4).at(0) : 0;
    const bool center = c.i("center_point_box", 0) != 0;
    const std::vector<double> bx = boxes.to_vector<double>(), sc = scores.to_vector<double>();
    auto corners = [&](int64_t b, int64_t i) {
        const double* p = &bx[static_cast<size_t>((b * S + i) * 4)];
        if (center)
            return std::array<double, 4>{p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2,
                                         p[0] + p[2] / 2};
        return std::array<double, 4>{std::min(p[0], p[2]), std::min(p[1], p[3]),
                                     std::max(p[0], p[2]), std::max(p[1], p[3])};
    };
    auto iou = [&](const std::array<double, 4>& a, const std::array<double, 4>& b) {
        const double ih = std::max(0.0, std::min(a[2], b[2]) - std::max(a[0], b[0]));
        const double iw = std::max(0.0, std::min(a[3], b[3]) - std::max(a[1], b[1]));
        const double inter = ih * iw;
        const double uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
        return uni > 0 ? inter / uni : 0.0;
    };
    std::vector<int64_t> out;
    int64_t count = 0;
    for (int64_t b = 0; b < B; ++b)
        for (int64_t k = 0; k < C; ++k) {
            std::vector<int64_t> order;
            for (int64_t i = 0; i < S; ++i) {
                const double v = sc[static_cast<size_t>((b * C + k) * S + i)];
                if (!has_score_t || v > score_t) order.push_back(i);
            }
            std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
                return sc[static_cast<size_t>((b * C + k) * S + x)] >
                       sc[static_cast<size_t>((b * C + k) * S + y)];
            });
            std::vector<int64_t> kept;
            for (int64_t i : order) {
                if (static_cast<int64_t>(kept.size()) >= max_out) break;
                bool keep = true;
                for (int64_t j : kept)
                    if (iou(corners(b, i), corners(b, j)) > iou_t) keep = false;
                if (!keep) continue;
                kept.push_back(i);
                out.insert(out.end(), {b, k, i});
                ++count;
            }
        }
    if (count == 0) return {Tensor::zeros({0, 3}, DType::Int64)};
    return {Tensor::from_vector(out, {count, 3})};
}

// ---- DFT and STFT: products with cosine and sine tables -----------------------------------

// The DFT along the last axis of (re, im) [..., n], n padded or cut to N, K outputs.
std::pair<Tensor, Tensor> dft_last(Tensor re, Tensor im, int64_t N, int64_t K, bool inverse) {
    const int64_t n = re.shape().back();
    if (n != N) {
        Shape b(1, 0), e(1, N - n);
        re = pad_spatial(re, b, e);
        im = pad_spatial(im, b, e);
    }
    std::vector<double> cs(static_cast<size_t>(N * K)), sn(static_cast<size_t>(N * K));
    for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < K; ++k) {
            const double a = 2 * M_PI * static_cast<double>((j * k) % N) / static_cast<double>(N);
            cs[static_cast<size_t>(j * K + k)] = std::cos(a);
            sn[static_cast<size_t>(j * K + k)] = std::sin(a);
        }
    const Tensor C = Tensor::from_vector(cs, {N, K}, re.dtype()),
                 S = Tensor::from_vector(sn, {N, K}, re.dtype());
    if (!inverse) return {re.matmul(C) + im.matmul(S), im.matmul(C) - re.matmul(S)};
    const Tensor inv = scalar(1.0 / static_cast<double>(N), re.dtype());
    return {(re.matmul(C) - im.matmul(S)) * inv, (re.matmul(S) + im.matmul(C)) * inv};
}

// Splits [..., 1 or 2] into its real and imaginary parts.
std::pair<Tensor, Tensor> complex_parts(const Tensor& x) {
    const int64_t last = x.ndim() - 1;
    const Tensor re = take(x, last, 0, 1).squeeze(last);
    const Tensor im =
        x.shape().back() == 2 ? take(x, last, 1, 1).squeeze(last) : Tensor::zeros_like(re);
    return {re, im};
}

Outs dft(Ctx& c) {
    const Tensor& x = c.x(0);
    auto [re, im] = complex_parts(x);
    const int64_t axis = axis_of(c.i("axis", 1), x.ndim() - 1);
    Shape order;
    for (int64_t k = 0; k < re.ndim(); ++k)
        if (k != axis) order.push_back(k);
    order.push_back(axis);
    Shape back(order.size());
    for (size_t k = 0; k < order.size(); ++k)
        back[static_cast<size_t>(order[k])] = static_cast<int64_t>(k);
    re = re.permute(order);
    im = im.permute(order);
    const int64_t N = c.has(1) ? c.ints_of(1).at(0) : re.shape().back();
    const int64_t K = c.i("onesided", 0) != 0 ? N / 2 + 1 : N;
    auto [yr, yi] = dft_last(re, im, N, K, c.i("inverse", 0) != 0);
    return {Tensor::stack({yr.permute(back), yi.permute(back)}, -1)};
}

Outs stft(Ctx& c) {
    const Tensor& x = c.x(0);
    const int64_t step = c.ints_of(1).at(0);
    const int64_t fl = c.has(3) ? c.ints_of(3).at(0) : c.x(2).numel();
    const int64_t L = x.shape()[1], n = (L - fl) / step + 1;
    std::vector<Tensor> frames;
    for (int64_t f = 0; f < n; ++f) frames.push_back(take(x, 1, f * step, fl));
    Tensor fr = Tensor::stack(frames, 1); // [B, n, fl, 1|2]
    auto [re, im] = complex_parts(fr);
    if (c.has(2)) {
        re = re * c.x(2);
        im = im * c.x(2);
    }
    const int64_t K = c.i("onesided", 1) != 0 ? fl / 2 + 1 : fl;
    auto [yr, yi] = dft_last(re, im, fl, K, false);
    return {Tensor::stack({yr, yi}, -1)};
}

// ---- GridSample (opset 16, 2-D): data-dependent gathers at computed positions --------------

// PyTorch's reflect_coordinates: x reflected into [lo2 / 2, hi2 / 2].
Tensor reflect(const Tensor& x, double lo2, double hi2) {
    const DType dt = x.dtype();
    if (lo2 == hi2) return Tensor::zeros_like(x);
    const double lo = lo2 / 2, span = (hi2 - lo2) / 2;
    const Tensor in = (x - scalar(lo, dt)).abs();
    const Tensor extra = in % scalar(span, dt);
    const Tensor flips = (in / scalar(span, dt)).floor();
    const Tensor even = (flips % scalar(2, dt)) == scalar(0, dt);
    return where(even, extra + scalar(lo, dt), scalar(span + lo, dt) - extra);
}

Outs grid_sample(Ctx& c) {
    const Tensor& X = c.x(0);
    const Tensor& grid = c.x(1);
    if (X.ndim() != 4)
        c.error("input of " + std::to_string(X.ndim()) + " dims (only 2-D sampling)");
    const std::string mode = c.s("mode", "bilinear"), pad = c.s("padding_mode", "zeros");
    const bool ac = c.i("align_corners", 0) != 0;
    const DType dt = X.dtype();
    const int64_t N = X.shape()[0], C = X.shape()[1], H = X.shape()[2], W = X.shape()[3];
    const int64_t Ho = grid.shape()[1], Wo = grid.shape()[2], P = Ho * Wo;
    const Tensor g = grid.cast(dt);
    auto unnorm = [&](const Tensor& v, int64_t size) {
        const auto sz = static_cast<double>(size);
        return ac ? (v + scalar(1, dt)) * scalar((sz - 1) / 2, dt)
                  : ((v + scalar(1, dt)) * scalar(sz, dt) - scalar(1, dt)) * scalar(0.5, dt);
    };
    // Padding of a coordinate (border: clipped; reflection: reflected, then clipped).
    auto padded = [&](const Tensor& v, int64_t size) {
        const auto sz = static_cast<double>(size);
        if (pad == "border") return v.clip(0, sz - 1);
        if (pad == "reflection")
            return (ac ? reflect(v, 0, 2 * (sz - 1)) : reflect(v, -1, 2 * sz - 1)).clip(0, sz - 1);
        return v;
    };
    Tensor ix = unnorm(take(g, 3, 0, 1).reshape({N, P}), W),
           iy = unnorm(take(g, 3, 1, 1).reshape({N, P}), H);
    const Tensor flat = X.reshape({N, C, H * W});
    // The value at integer positions (xx, yy) [N, P], 0 outside the image.
    auto fetch = [&](const Tensor& xx, const Tensor& yy) {
        const Tensor inside = logical_and(
            logical_and(xx >= scalar(0, dt), xx <= scalar(static_cast<double>(W - 1), dt)),
            logical_and(yy >= scalar(0, dt), yy <= scalar(static_cast<double>(H - 1), dt)));
        const Tensor idx =
            (yy.clip(0, static_cast<double>(H - 1)) * scalar(static_cast<double>(W), dt) +
             xx.clip(0, static_cast<double>(W - 1)))
                .cast(DType::Int64);
        const Tensor v = flat.gather(2, idx.reshape({N, 1, P}).expand({N, C, P}));
        return where(inside.reshape({N, 1, P}), v, scalar(0, dt));
    };
    Tensor out;
    if (mode == "nearest") {
        out = fetch(padded(ix, W).round(), padded(iy, H).round());
    } else if (mode == "bilinear") {
        ix = padded(ix, W);
        iy = padded(iy, H);
        const Tensor x0 = ix.floor(), y0 = iy.floor(), one = scalar(1, dt);
        const Tensor wx = ix - x0, wy = iy - y0;
        auto w = [&](const Tensor& t) { return t.reshape({N, 1, P}); };
        out = fetch(x0, y0) * w((one - wx) * (one - wy)) +
              fetch(x0 + one, y0) * w(wx * (one - wy)) + fetch(x0, y0 + one) * w((one - wx) * wy) +
              fetch(x0 + one, y0 + one) * w(wx * wy);
    } else if (mode == "bicubic") {
        const Tensor x0 = ix.floor(), y0 = iy.floor();
        const Tensor tx = ix - x0, ty = iy - y0;
        const double A = -0.75;
        // Cubic convolution weights for offsets -1, 0, 1, 2 from the floor.
        auto weights = [&](const Tensor& t) {
            const Tensor one = scalar(1, dt);
            auto near = [&](const Tensor& d) {
                return ((scalar(A + 2, dt) * d - scalar(A + 3, dt)) * d * d) + one;
            };
            auto far = [&](const Tensor& d) {
                return ((scalar(A, dt) * d - scalar(5 * A, dt)) * d + scalar(8 * A, dt)) * d -
                       scalar(4 * A, dt);
            };
            return std::array<Tensor, 4>{far(t + one), near(t), near(one - t),
                                         far(scalar(2, dt) - t)};
        };
        const auto wx = weights(tx), wy = weights(ty);
        for (int64_t a = 0; a < 4; ++a)
            for (int64_t b = 0; b < 4; ++b) {
                const Tensor xx = padded(x0 + scalar(static_cast<double>(b - 1), dt), W);
                const Tensor yy = padded(y0 + scalar(static_cast<double>(a - 1), dt), H);
                const Tensor v =
                    fetch(xx, yy) *
                    (wx[static_cast<size_t>(b)] * wy[static_cast<size_t>(a)]).reshape({N, 1, P});
                out = a == 0 && b == 0 ? v : out + v;
            }
    } else {
        c.error("mode '" + mode + "'");
    }
    return {out.reshape({N, C, Ho, Wo})};
}

// ---- TfIdfVectorizer (counts n-grams of integer ids: realizes its input) -------------------

Outs tfidf(Ctx& c) {
    const Tensor& x = c.x(0);
    if (x.ndim() != 1 && x.ndim() != 2)
        c.error("input of shape " + shape_str(x.shape()) + " (1-D or 2-D)");
    const std::vector<int64_t> pool = c.ints("pool_int64s"), counts = c.ints("ngram_counts"),
                               indexes = c.ints("ngram_indexes");
    if (c.has_attr("pool_strings")) c.error("a pool of strings");
    const int64_t lo = c.i("min_gram_length", 1), hi = c.i("max_gram_length", 1),
                  max_skip = c.i("max_skip_count", 0);
    const std::string mode = c.s("mode", "TF");
    std::vector<double> weights = c.floats("weights");
    // The pool's n-grams: n-grams of length n start at counts[n - 1]; each maps to an output slot.
    std::map<std::vector<int64_t>, int64_t> slot;
    size_t gram = 0;
    for (size_t n = 1; n <= counts.size(); ++n) {
        const auto start = static_cast<size_t>(counts[n - 1]);
        const size_t end = n < counts.size() ? static_cast<size_t>(counts[n]) : pool.size();
        for (size_t at = start; at + n <= end; at += n, ++gram) {
            if (gram >= indexes.size())
                c.error("ngram_indexes has " + std::to_string(indexes.size()) +
                        " entries for more n-grams");
            slot[std::vector<int64_t>(pool.begin() + static_cast<long>(at),
                                      pool.begin() + static_cast<long>(at + n))] = indexes[gram];
        }
    }
    int64_t width = 0;
    for (int64_t i : indexes) width = std::max(width, i + 1);
    const int64_t rows = x.ndim() == 2 ? x.shape()[0] : 1, C = x.shape().back();
    const std::vector<int64_t> v = x.to_vector<int64_t>();
    std::vector<double> out(static_cast<size_t>(rows * width), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t* row = v.data() + r * C;
        for (int64_t i = 0; i < C; ++i)
            for (int64_t n = std::max<int64_t>(lo, 1); n <= hi; ++n)
                for (int64_t s = 0; s <= (n == 1 ? 0 : max_skip); ++s) {
                    if (i + (n - 1) * (s + 1) >= C) break;
                    std::vector<int64_t> g;
                    for (int64_t k = 0; k < n; ++k) g.push_back(row[i + k * (s + 1)]);
                    auto it = slot.find(g);
                    if (it != slot.end()) out[static_cast<size_t>(r * width + it->second)] += 1;
                }
    }
    for (size_t k = 0; k < out.size(); ++k) {
        const double w = weights.empty() ? 1.0 : weights.at(k % static_cast<size_t>(width));
        if (mode == "IDF")
            out[k] = out[k] > 0 ? w : 0;
        else if (mode == "TFIDF")
            out[k] *= w;
    }
    const Shape shape = x.ndim() == 2 ? Shape{rows, width} : Shape{width};
    return {Tensor::from_vector(out, shape, DType::Float32)};
}

// ---- Det: Gaussian elimination with partial pivoting, in tensor ops (n steps) ---------------

Outs det(Ctx& c) {
    const Tensor& x = c.x(0);
    if (x.ndim() < 2 || x.shape().back() != x.shape()[static_cast<size_t>(x.ndim() - 2)])
        c.error("input of shape " + shape_str(x.shape()) + " is not [..., n, n]");
    const int64_t n = x.shape().back();
    const Shape batch(x.shape().begin(), x.shape().end() - 2);
    const int64_t B = numel_of(batch);
    const DType dt = x.dtype();
    Tensor A = x.reshape({B, n, n});
    Tensor d = Tensor::ones({B}, dt);
    const Tensor rows = Tensor::arange(n, DType::Int64).reshape({1, n});
    for (int64_t k = 0; k < n; ++k) {
        // The largest |A[i, k]| for i >= k becomes row k (a swap flips the sign).
        const Tensor col =
            A.slice({Slice{}, Slice{k, n, 1}, Slice{k, k + 1, 1}}).reshape({B, n - k});
        const Tensor p = col.abs().argmax(1, true).cast(DType::Int64) +
                         scalar(static_cast<double>(k), DType::Int64); // [B, 1]
        const Tensor kk = scalar(static_cast<double>(k), DType::Int64);
        const Tensor order = where(rows == kk, p, where(rows == p, kk, rows)); // [B, n]
        A = A.gather(1, order.reshape({B, n, 1}).expand({B, n, n}));
        const Tensor swapped = (p != kk).reshape({B});
        const Tensor pivot =
            A.slice({Slice{}, Slice{k, k + 1, 1}, Slice{k, k + 1, 1}}).reshape({B});
        d = d * where(swapped, -pivot, pivot);
        if (k + 1 == n) break;
        // Rows below k lose their multiple of row k (nothing where the pivot is 0: then det is 0).
        const Tensor zero = pivot == scalar(0, dt);
        const Tensor below = A.slice({Slice{}, Slice{k + 1, n, 1}}); // [B, n-k-1, n]
        const Tensor rk = A.slice({Slice{}, Slice{k, k + 1, 1}});    // [B, 1, n]
        const Tensor f = below.slice({Slice{}, Slice{}, Slice{k, k + 1, 1}}) /
                         where(zero, scalar(1, dt), pivot).reshape({B, 1, 1}); // [B, n-k-1, 1]
        A = Tensor::cat({A.slice({Slice{}, Slice{0, k + 1, 1}}), below - f * rk}, 1).contiguous();
    }
    return {d.reshape(batch)};
}

// ---- RoiAlign: bilinear samples of each region, at positions computed from the (realized)
// regions, gathered from the input ---------------------------------------------------------

Outs roi_align(Ctx& c) {
    const Tensor& X = c.x(0);
    if (X.ndim() != 4) c.error("input of shape " + shape_str(X.shape()) + " is not [N, C, H, W]");
    const std::vector<double> rois = c.doubles_of(1);
    const std::vector<int64_t> bidx = c.ints_of(2);
    const int64_t R = static_cast<int64_t>(bidx.size()), C = X.shape()[1], H = X.shape()[2],
                  W = X.shape()[3];
    const int64_t oh = c.i("output_height", 1), ow = c.i("output_width", 1),
                  ratio = c.i("sampling_ratio", 0);
    const double scale = c.f("spatial_scale", 1.0);
    const bool half =
        c.opset < 16 ? false : c.s("coordinate_transformation_mode", "half_pixel") == "half_pixel";
    const bool is_max = c.s("mode", "avg") == "max";
    if (static_cast<int64_t>(rois.size()) != 4 * R) c.error("rois and batch_indices disagree");
    // Per region: samples of every output bin, 4 taps each (position, weight); regions with
    // fewer samples than the most are padded with taps that do not count.
    struct Tap {
        int64_t pos = 0;
        double w = 0;
        bool valid = false;
    };
    std::vector<std::vector<Tap>> taps(static_cast<size_t>(R));
    std::vector<int64_t> counts(static_cast<size_t>(R));
    size_t most = 0;
    for (int64_t r = 0; r < R; ++r) {
        const double off = half ? 0.5 : 0.0;
        const double x0 = rois[static_cast<size_t>(4 * r)] * scale - off,
                     y0 = rois[static_cast<size_t>(4 * r + 1)] * scale - off;
        double rw = rois[static_cast<size_t>(4 * r + 2)] * scale - off - x0,
               rh = rois[static_cast<size_t>(4 * r + 3)] * scale - off - y0;
        if (!half) {
            rw = std::max(rw, 1.0);
            rh = std::max(rh, 1.0);
        }
        const double bh = rh / static_cast<double>(oh), bw = rw / static_cast<double>(ow);
        const auto gh =
            ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rh / static_cast<double>(oh)));
        const auto gw =
            ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rw / static_cast<double>(ow)));
        counts[static_cast<size_t>(r)] = std::max<int64_t>(gh * gw, 1);
        auto& t = taps[static_cast<size_t>(r)];
        for (int64_t ph = 0; ph < oh; ++ph)
            for (int64_t pw = 0; pw < ow; ++pw) {
                std::vector<Tap> bin;
                for (int64_t iy = 0; iy < gh; ++iy)
                    for (int64_t ix = 0; ix < gw; ++ix) {
                        double y = y0 + static_cast<double>(ph) * bh +
                                   (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
                        double x = x0 + static_cast<double>(pw) * bw +
                                   (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
                        if (y < -1.0 || y > static_cast<double>(H) || x < -1.0 ||
                            x > static_cast<double>(W)) {
                            for (int k = 0; k < 4; ++k) bin.push_back(Tap{0, 0, true});
                            continue;
                        }
                        y = std::max(y, 0.0);
                        x = std::max(x, 0.0);
                        auto yl = static_cast<int64_t>(y), xl = static_cast<int64_t>(x),
                             yh = yl + 1, xh = xl + 1;
                        if (yl >= H - 1) {
                            yh = yl = H - 1;
                            y = static_cast<double>(yl);
                        }
                        if (xl >= W - 1) {
                            xh = xl = W - 1;
                            x = static_cast<double>(xl);
                        }
                        const double ly = y - static_cast<double>(yl),
                                     lx = x - static_cast<double>(xl);
                        bin.push_back(Tap{yl * W + xl, (1 - ly) * (1 - lx), true});
                        bin.push_back(Tap{yl * W + xh, (1 - ly) * lx, true});
                        bin.push_back(Tap{yh * W + xl, ly * (1 - lx), true});
                        bin.push_back(Tap{yh * W + xh, ly * lx, true});
                    }
                most = std::max(most, bin.size());
                t.insert(t.end(), bin.begin(), bin.end());
            }
    }
    const int64_t P = oh * ow, T = std::max<int64_t>(static_cast<int64_t>(most), 1);
    std::vector<int64_t> pos(static_cast<size_t>(R * P * T), 0);
    std::vector<double> wts(static_cast<size_t>(R * P * T), 0);
    std::vector<bool> valid(static_cast<size_t>(R * P * T), false);
    for (int64_t r = 0; r < R; ++r) {
        const auto& t = taps[static_cast<size_t>(r)];
        const int64_t per = static_cast<int64_t>(t.size()) / P;
        for (int64_t p = 0; p < P; ++p)
            for (int64_t k = 0; k < per; ++k) {
                const Tap& tap = t[static_cast<size_t>(p * per + k)];
                const auto at = static_cast<size_t>((r * P + p) * T + k);
                pos[at] = tap.pos;
                wts[at] = tap.w;
                valid[at] = tap.valid;
            }
    }
    const Tensor src = X.reshape({X.shape()[0], C, H * W})
                           .index_select(0, Tensor::from_vector(bidx)); // [R, C, HW]
    const Tensor idx = Tensor::from_vector(pos, {R, 1, P * T}).expand({R, C, P * T});
    const Tensor v = src.gather(2, idx).reshape({R, C, P, T}) *
                     Tensor::from_vector(wts, {R, 1, P, T}, X.dtype());
    Tensor y;
    if (is_max) {
        const Tensor ok = Tensor::from_vector(valid, {R, 1, P, T});
        // As onnxruntime: the largest weighted tap (not the largest interpolated sample).
        y = where(ok, v, scalar(-kInf, X.dtype())).max(3);
    } else {
        std::vector<double> cnt(counts.begin(), counts.end());
        y = v.sum(3) / Tensor::from_vector(cnt, {R, 1, 1}, X.dtype());
    }
    return {y.reshape({R, C, oh, ow})};
}

// ---- the table ----------------------------------------------------------------------------

std::string refuse_scatter(const Node& n, int64_t) {
    auto it = n.attrs.find("reduction");
    if (it != n.attrs.end() && it->second.s != "none" && it->second.s != "add")
        return "reduction '" + it->second.s + "'";
    return "";
}
std::string refuse_cast(const Node& n, int64_t) {
    auto it = n.attrs.find("to");
    if (it != n.attrs.end() && !dtype_of_onnx(static_cast<int>(it->second.i)))
        return "Cast to " + onnx_type_name(static_cast<int>(it->second.i));
    return "";
}
std::string refuse_constant(const Node& n, int64_t) {
    for (const auto& [k, a] : n.attrs) {
        if (k == "sparse_value" || k == "value_string" || k == "value_strings") return "a " + k;
        if (!a.unsupported.empty()) return a.unsupported;
    }
    return "";
}
std::string refuse_resize(const Node& n, int64_t) {
    auto it = n.attrs.find("antialias");
    if (it != n.attrs.end() && it->second.i != 0) return "antialias";
    auto kp = n.attrs.find("keep_aspect_ratio_policy");
    if (kp != n.attrs.end() && kp->second.s != "stretch")
        return "keep_aspect_ratio_policy '" + kp->second.s + "'";
    return "";
}

using Table = std::unordered_map<std::string, OpInfo>;

const Table& table() {
    static const Table t = [] {
        Table m;
        auto def = [&](const char* name, OpFn fn, RefuseFn refuse = nullptr, bool random = false) {
            m[name] = OpInfo{fn, refuse, random};
        };
        // elementwise
        def("Identity", [](Ctx& c) -> Outs { return {c.x(0)}; });
        def("Abs", [](Ctx& c) { return unary(c, &Tensor::abs); });
        def("Neg", [](Ctx& c) -> Outs { return {-c.x(0)}; });
        def("Exp", [](Ctx& c) { return unary(c, &Tensor::exp); });
        def("Log", [](Ctx& c) { return unary(c, &Tensor::log); });
        def("Sqrt", [](Ctx& c) { return unary(c, &Tensor::sqrt); });
        def("Sin", [](Ctx& c) { return unary(c, &Tensor::sin); });
        def("Cos", [](Ctx& c) { return unary(c, &Tensor::cos); });
        def("Tan", [](Ctx& c) { return unary(c, &Tensor::tan); });
        def("Tanh", [](Ctx& c) { return unary(c, &Tensor::tanh); });
        def("Sinh", [](Ctx& c) { return unary(c, &Tensor::sinh); });
        def("Cosh", [](Ctx& c) { return unary(c, &Tensor::cosh); });
        def("Atan", [](Ctx& c) { return unary(c, &Tensor::atan); });
        def("Asin", [](Ctx& c) -> Outs { return {asin_of(c.x(0))}; });
        def("Acos",
            [](Ctx& c) -> Outs { return {scalar(M_PI / 2, c.x(0).dtype()) - asin_of(c.x(0))}; });
        def("Asinh", [](Ctx& c) -> Outs {
            const Tensor& x = c.x(0);
            const Tensor a = x.abs();
            return {x.sign() * (a + (a * a + scalar(1, x.dtype())).sqrt()).log()};
        });
        def("Acosh", [](Ctx& c) -> Outs {
            const Tensor& x = c.x(0);
            return {(x + (x * x - scalar(1, x.dtype())).sqrt()).log()};
        });
        def("Atanh", [](Ctx& c) -> Outs {
            const Tensor& x = c.x(0);
            const Tensor one = scalar(1, x.dtype());
            return {((one + x) / (one - x)).log() * scalar(0.5, x.dtype())};
        });
        def("Sigmoid", [](Ctx& c) { return unary(c, &Tensor::sigmoid); });
        def("Relu", [](Ctx& c) { return unary(c, &Tensor::relu); });
        def("Floor", [](Ctx& c) { return unary(c, &Tensor::floor); });
        def("Ceil", [](Ctx& c) { return unary(c, &Tensor::ceil); });
        def("Round", [](Ctx& c) { return unary(c, &Tensor::round); });
        def("Sign", [](Ctx& c) { return unary(c, &Tensor::sign); });
        def("Reciprocal", [](Ctx& c) { return unary(c, &Tensor::reciprocal); });
        def("Erf", [](Ctx& c) { return unary(c, &Tensor::erf); });
        def("Not", [](Ctx& c) -> Outs { return {logical_not(c.x(0))}; });
        def("IsNaN", [](Ctx& c) { return unary(c, &Tensor::isnan); });
        def("IsInf", [](Ctx& c) -> Outs {
            const Tensor& x = c.x(0);
            const bool pos = c.i("detect_positive", 1) != 0, neg = c.i("detect_negative", 1) != 0;
            const Tensor inf = x.isinf(), zero = scalar(0, x.dtype());
            if (pos && neg) return {inf};
            if (pos) return {logical_and(inf, x > zero)};
            if (neg) return {logical_and(inf, x < zero)};
            return {Tensor::zeros(x.shape(), DType::Bool)};
        });
        def("Softsign",
            [](Ctx& c) -> Outs { return {c.x(0) / (c.x(0).abs() + scalar(1, c.x(0).dtype()))}; });
        def("Softplus", [](Ctx& c) { return unary(c, &Tensor::softplus); });
        def("Elu", [](Ctx& c) -> Outs { return {c.x(0).elu(c.f("alpha", 1.0))}; });
        def("Selu", [](Ctx& c) -> Outs {
            return {selu(c.x(0), c.f("alpha", 1.67326319217681884765625),
                         c.f("gamma", 1.05070102214813232421875))};
        });
        def("Celu", [](Ctx& c) -> Outs {
            const Tensor& x = c.x(0);
            const double a = c.f("alpha", 1.0);
            const DType dt = x.dtype();
            return {x.relu() + minimum(scalar(0, dt), scalar(a, dt) * ((x / scalar(a, dt)).exp() -
                                                                       scalar(1, dt)))};
        });
        def("LeakyRelu", [](Ctx& c) -> Outs { return {c.x(0).leaky_relu(c.f("alpha", 0.01))}; });
        def("ThresholdedRelu", [](Ctx& c) -> Outs {
            const Tensor& x = c.x(0);
            return {where(x > scalar(c.f("alpha", 1.0), x.dtype()), x, scalar(0, x.dtype()))};
        });
        def("HardSigmoid", [](Ctx& c) -> Outs {
            return {hard_sigmoid(c.x(0), c.f("alpha", 0.2), c.f("beta", 0.5))};
        });
        def("HardSwish",
            [](Ctx& c) -> Outs { return {c.x(0) * hard_sigmoid(c.x(0), 1.0 / 6, 0.5)}; });
        def("Mish", [](Ctx& c) { return unary(c, &Tensor::mish); });
        def("Gelu", [](Ctx& c) -> Outs {
            const Tensor& x = c.x(0);
            if (c.s("approximate", "none") != "tanh") return {x.gelu()};
            const DType dt = x.dtype();
            const Tensor inner =
                (x + x * x * x * scalar(0.044715, dt)) * scalar(std::sqrt(2 / M_PI), dt);
            return {x * scalar(0.5, dt) * (scalar(1, dt) + inner.tanh())};
        });
        def("Shrink", [](Ctx& c) -> Outs {
            const Tensor& x = c.x(0);
            const DType dt = x.dtype();
            const double bias = c.f("bias", 0), l = c.f("lambd", 0.5);
            return {where(x < scalar(-l, dt), x + scalar(bias, dt),
                          where(x > scalar(l, dt), x - scalar(bias, dt), scalar(0, dt)))};
        });
        def("PRelu", [](Ctx& c) -> Outs {
            const Tensor& x = c.x(0);
            Tensor slope = c.x(1);
            // Before opset 7 a 1-D slope of C values is per channel (dim 1), not NumPy-aligned.
            if (c.opset < 7 && slope.ndim() == 1 && x.ndim() > 2 && slope.numel() == x.shape()[1])
                slope = per_channel(slope, x.ndim()).squeeze(0);
            return {where(x < scalar(0, x.dtype()), x * slope, x)};
        });
        def("Clip", clip);
        // binary
        def("Add", [](Ctx& c) -> Outs { return {c.x(0) + c.x(1)}; });
        def("Sub", [](Ctx& c) -> Outs { return {c.x(0) - c.x(1)}; });
        def("Mul", [](Ctx& c) -> Outs { return {c.x(0) * c.x(1)}; });
        def("Div", [](Ctx& c) -> Outs { return {c.x(0) / c.x(1)}; });
        def("Pow", [](Ctx& c) -> Outs { return {pow_of(c.x(0), c.x(1))}; });
        def("Mod", [](Ctx& c) -> Outs { return {mod(c.x(0), c.x(1), c.i("fmod", 0) != 0)}; });
        def("Equal", [](Ctx& c) -> Outs { return {c.x(0) == c.x(1)}; });
        def("Less", [](Ctx& c) -> Outs { return {c.x(0) < c.x(1)}; });
        def("LessOrEqual", [](Ctx& c) -> Outs { return {c.x(0) <= c.x(1)}; });
        def("Greater", [](Ctx& c) -> Outs { return {c.x(0) > c.x(1)}; });
        def("GreaterOrEqual", [](Ctx& c) -> Outs { return {c.x(0) >= c.x(1)}; });
        def("And", [](Ctx& c) -> Outs { return {logical_and(c.x(0), c.x(1))}; });
        def("Or", [](Ctx& c) -> Outs { return {logical_or(c.x(0), c.x(1))}; });
        def("Xor", [](Ctx& c) -> Outs { return {c.x(0) != c.x(1)}; });
        def("BitwiseAnd", [](Ctx& c) -> Outs { return {c.x(0) & c.x(1)}; });
        def("BitwiseOr", [](Ctx& c) -> Outs { return {c.x(0) | c.x(1)}; });
        def("BitwiseXor", [](Ctx& c) -> Outs { return {c.x(0) ^ c.x(1)}; });
        def("BitwiseNot", [](Ctx& c) -> Outs { return {~c.x(0)}; });
        def("BitShift", [](Ctx& c) -> Outs {
            return {c.s("direction", "LEFT") == "LEFT" ? c.x(0) << c.x(1) : c.x(0) >> c.x(1)};
        });
        def("Max", [](Ctx& c) -> Outs {
            return {fold(c, [](const Tensor& a, const Tensor& b) { return maximum(a, b); })};
        });
        def("Min", [](Ctx& c) -> Outs {
            return {fold(c, [](const Tensor& a, const Tensor& b) { return minimum(a, b); })};
        });
        def("Sum", [](Ctx& c) -> Outs {
            return {fold(c, [](const Tensor& a, const Tensor& b) { return a + b; })};
        });
        def("Mean", [](Ctx& c) -> Outs {
            size_t n = 0;
            for (size_t k = 0; k < c.in.size(); ++k) n += c.has(k) ? 1 : 0;
            const Tensor s = fold(c, [](const Tensor& a, const Tensor& b) { return a + b; });
            return {s / scalar(static_cast<double>(n), s.dtype())};
        });
        def("Where", where_op);
        // reductions
        def("ReduceSum", [](Ctx& c) {
            return reduce(c, true,
                          [](const Tensor& x, const Shape& a, bool k) { return x.sum(a, k); });
        });
        def("ReduceMean", [](Ctx& c) {
            return reduce(c, false,
                          [](const Tensor& x, const Shape& a, bool k) { return x.mean(a, k); });
        });
        def("ReduceMax", [](Ctx& c) {
            return reduce(c, false,
                          [](const Tensor& x, const Shape& a, bool k) { return x.max(a, k); });
        });
        def("ReduceMin", [](Ctx& c) {
            return reduce(c, false,
                          [](const Tensor& x, const Shape& a, bool k) { return x.min(a, k); });
        });
        def("ReduceProd", [](Ctx& c) {
            return reduce(c, false,
                          [](const Tensor& x, const Shape& a, bool k) { return x.prod(a, k); });
        });
        def("ReduceL1", [](Ctx& c) {
            return reduce(c, false, [](const Tensor& x, const Shape& a, bool k) {
                return x.abs().sum(a, k);
            });
        });
        def("ReduceL2", [](Ctx& c) {
            return reduce(c, false, [](const Tensor& x, const Shape& a, bool k) {
                return (x * x).sum(a, k).sqrt();
            });
        });
        def("ReduceSumSquare", [](Ctx& c) {
            return reduce(c, false, [](const Tensor& x, const Shape& a, bool k) {
                return (x * x).sum(a, k);
            });
        });
        def("ReduceLogSum", [](Ctx& c) {
            return reduce(c, false, [](const Tensor& x, const Shape& a, bool k) {
                return x.sum(a, k).log();
            });
        });
        def("ReduceLogSumExp", [](Ctx& c) { return reduce(c, false, logsumexp); });
        def("ArgMax", [](Ctx& c) { return arg_extreme(c, true); });
        def("ArgMin", [](Ctx& c) { return arg_extreme(c, false); });
        def("Softmax", [](Ctx& c) {
            return softmax_like(c, [](const Tensor& x, int64_t a) { return x.softmax(a); });
        });
        def("LogSoftmax", [](Ctx& c) {
            return softmax_like(c, [](const Tensor& x, int64_t a) { return x.log_softmax(a); });
        });
        def("Hardmax", [](Ctx& c) { return softmax_like(c, hardmax); });
        def("CumSum", cumsum);
        def("TopK", top_k);
        // shapes
        def("Reshape", reshape);
        def("Unsqueeze", unsqueeze);
        def("Squeeze", squeeze);
        def("Flatten", flatten);
        def("Transpose", transpose);
        def("Concat", concat);
        def("Split", split);
        def("Slice", slice);
        def("Gather", gather);
        def("GatherElements", gather_elements);
        def("GatherND", gather_nd);
        def("ScatterElements", scatter_elements, refuse_scatter);
        def("Scatter", scatter_elements, refuse_scatter);
        def("ScatterND", scatter_nd, refuse_scatter);
        def("Expand", expand);
        def("Tile", tile);
        def("Pad", pad);
        def("Constant", constant, refuse_constant);
        def("ConstantOfShape", constant_of_shape);
        def("Range", range);
        def("Cast", cast, refuse_cast);
        def("CastLike", [](Ctx& c) -> Outs { return {cast_to(c.x(0), c.x(1).dtype())}; });
        def("OneHot", one_hot);
        def("EyeLike", eye_like);
        def("Trilu", trilu);
        def("DepthToSpace", depth_to_space);
        def("SpaceToDepth", space_to_depth);
        def("Shape", [](Ctx& c) -> Outs {
            const Shape& s = c.x(0).shape();
            const auto r = static_cast<int64_t>(s.size());
            int64_t a = c.i("start", 0), b = c.i("end", r);
            a = std::clamp<int64_t>(a < 0 ? a + r : a, 0, r);
            b = std::clamp<int64_t>(b < 0 ? b + r : b, 0, r);
            std::vector<int64_t> v(s.begin() + a, s.begin() + std::max(a, b));
            return {Tensor::from_vector(v)};
        });
        def("Size",
            [](Ctx& c) -> Outs { return {Tensor::full(Shape{}, c.x(0).numel(), DType::Int64)}; });
        def(
            "Dropout",
            [](Ctx& c) -> Outs {
                const Tensor& x = c.x(0);
                double ratio =
                    c.opset >= 12 ? (c.has(1) ? c.doubles_of(1).at(0) : 0.5) : c.f("ratio", 0.5);
                const bool training = c.opset >= 12 ? (c.has(2) && c.ints_of(2).at(0) != 0)
                                                    : c.i("is_test", 0) == 0 && c.opset < 7;
                if (!training || ratio == 0) return {x, Tensor::ones(x.shape(), DType::Bool)};
                const Tensor keep = Tensor::rand(x.shape()) >= scalar(ratio, DType::Float32);
                return {where(keep, x * scalar(1 / (1 - ratio), x.dtype()), scalar(0, x.dtype())),
                        keep};
            },
            nullptr, true);
        // linear algebra
        def("MatMul", [](Ctx& c) -> Outs { return {c.x(0).matmul(c.x(1))}; });
        def("Gemm", gemm);
        def("Einsum", einsum);
        // convolution, pooling, normalization
        def("Conv", conv);
        def("ConvTranspose", conv_transpose);
        def("AveragePool", avg_pool);
        def("LpPool", lp_pool);
        def("GlobalAveragePool",
            [](Ctx& c) -> Outs { return {c.x(0).mean(spatial_axes(c.x(0)), true)}; });
        def("GlobalMaxPool",
            [](Ctx& c) -> Outs { return {c.x(0).max(spatial_axes(c.x(0)), true)}; });
        def("GlobalLpPool", [](Ctx& c) -> Outs {
            const double p = static_cast<double>(c.i("p", 2));
            return {c.x(0).abs().pow(p).sum(spatial_axes(c.x(0)), true).pow(1 / p)};
        });
        def("BatchNormalization", batch_norm);
        def("LayerNormalization", layer_norm);
        def("InstanceNormalization", instance_norm);
        def("LRN", lrn);
        def("MeanVarianceNormalization", mvn);
        def("NegativeLogLikelihoodLoss", nll_loss);
        def("SoftmaxCrossEntropyLoss", softmax_ce);
        def("Resize", resize, refuse_resize);
        def("Upsample", upsample);
        def("NonZero", non_zero);
        def("Compress", compress);
        def("ReverseSequence", reverse_sequence);
        def("HannWindow", [](Ctx& c) {
            return window_fn(c, [](const Tensor& n) { return 0.5 - 0.5 * n.cos(); });
        });
        def("HammingWindow", [](Ctx& c) {
            return window_fn(c,
                             [](const Tensor& n) { return 25.0 / 46 - (1 - 25.0 / 46) * n.cos(); });
        });
        def("BlackmanWindow", [](Ctx& c) {
            return window_fn(
                c, [](const Tensor& n) { return 0.42 - 0.5 * n.cos() + 0.08 * (n * 2.0).cos(); });
        });
        // quantization
        def("QuantizeLinear", quantize_linear);
        def("DequantizeLinear", dequantize_linear);
        def("DynamicQuantizeLinear", dynamic_quantize_linear);
        def("MatMulInteger", matmul_integer);
        def("QLinearMatMul", qlinear_matmul);
        def("ConvInteger", conv_integer);
        def("QLinearConv", qlinear_conv);
        // random numbers
        def(
            "RandomUniformLike", [](Ctx& c) { return random_like(c, false); }, nullptr, true);
        def(
            "RandomNormalLike", [](Ctx& c) { return random_like(c, true); }, nullptr, true);
        def(
            "RandomUniform", [](Ctx& c) { return random_shaped(c, false); }, nullptr, true);
        def(
            "RandomNormal", [](Ctx& c) { return random_shaped(c, true); }, nullptr, true);
        def("Bernoulli", bernoulli, nullptr, true);
        def("Unique", unique);
        def("RoiAlign", roi_align);
        def("Det", det);
        def("TfIdfVectorizer", tfidf);
        def("GridSample", grid_sample);
        def("NonMaxSuppression", non_max_suppression);
        def("DFT", dft);
        def("STFT", stft);
        def("RNN", [](Ctx& c) { return recurrent(c, Cell::Rnn); });
        def("GRU", [](Ctx& c) { return recurrent(c, Cell::Gru); });
        def("LSTM", [](Ctx& c) { return recurrent(c, Cell::Lstm); });
        def("MaxUnpool", max_unpool);
        m["MaxPool"] = OpInfo{max_pool_with_indices, nullptr, false};
        for (const char* op :
             {"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt",
              "SequenceLength", "SplitToSequence", "ConcatFromSequence"})
            m[op] = OpInfo{nullptr, nullptr, false, true};
        return m;
    }();
    return t;
}

} // namespace

const OpInfo* find_op(const std::string& domain, const std::string& op_type) {
    if (domain == "ai.onnx.preview.training") {
        static const OpInfo adagrad{[](Ctx& c) { return optimizer(c, 3); }, nullptr, false};
        static const OpInfo momentum{[](Ctx& c) { return optimizer(c, 3); }, nullptr, false};
        static const OpInfo adam{[](Ctx& c) { return optimizer(c, 4); }, nullptr, false};
        if (op_type == "Adagrad") return &adagrad;
        if (op_type == "Momentum") return &momentum;
        if (op_type == "Adam") return &adam;
        static const OpInfo gradient{nullptr, nullptr, false, false, true};
        if (op_type == "Gradient") return &gradient;
        return nullptr;
    }
    if (!domain.empty() && domain != "ai.onnx") return nullptr;
    const auto& t = table();
    auto it = t.find(op_type);
    return it == t.end() ? nullptr : &it->second;
}

} // namespace tempura::onnx::detail
