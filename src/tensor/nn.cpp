// tempura::nn: layers and losses as compositions of Tensor ops (see nn.hpp).
#include "tempura/tensor/nn.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "tempura/error.hpp"
#include "tensor_impl.hpp"

namespace tempura::nn {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// One value per spatial dim: a single value is repeated; otherwise exactly `n`.
Shape per_dim(const char* op, const char* what, const Shape& v, size_t n) {
    if (v.size() == 1) return Shape(n, v[0]);
    if (v.size() != n)
        fail(op, std::string(what) + " " + shape_str(v) + " needs 1 or " +
                     str(static_cast<int64_t>(n)) + " values");
    return v;
}

// Pads the last dims by (before, after) pairs, shrinking where a pair is negative.
Tensor pad_last(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& p) {
    std::vector<std::pair<int64_t, int64_t>> pad(static_cast<size_t>(x.ndim()), {0, 0});
    const size_t off = static_cast<size_t>(x.ndim()) - p.size();
    for (size_t i = 0; i < p.size(); ++i)
        pad[off + i] = {std::max<int64_t>(0, p[i].first), std::max<int64_t>(0, p[i].second)};
    Tensor y = x.pad(pad);
    std::vector<std::pair<int64_t, int64_t>> cut;
    for (int64_t d : y.shape()) cut.push_back({0, d});
    for (size_t i = 0; i < p.size(); ++i) {
        const int64_t d = y.shape()[off + i];
        cut[off + i] = {std::max<int64_t>(0, -p[i].first), d - std::max<int64_t>(0, -p[i].second)};
    }
    return y.shrink(cut);
}

// The sliding windows of the last k.size() dims: [..., i...] -> [..., o..., k...], with
// o = (i - d (k - 1) - 1) / s + 1. Movement ops only: repeat the dims so that a window of k
// elements dilated by d can be read as rows of a reshape, then take every s-th window.
Tensor windows(const Tensor& x, const Shape& k, const Shape& s, const Shape& d) {
    const size_t n = k.size();
    const auto lead = static_cast<size_t>(x.ndim()) - n;
    const Shape head(x.shape().begin(), x.shape().begin() + static_cast<long>(lead));
    Shape in(x.shape().begin() + static_cast<long>(lead), x.shape().end()), out(n);
    for (size_t i = 0; i < n; ++i) out[i] = (in[i] - d[i] * (k[i] - 1) - 1) / s[i] + 1;
    // Repeat each dim enough to hold k rows of length i + d.
    Shape times(lead, 1);
    for (size_t i = 0; i < n; ++i) times.push_back((k[i] * (in[i] + d[i]) + in[i] - 1) / in[i]);
    Tensor t = x.repeat(times);
    auto cut = [&](const std::vector<std::pair<int64_t, int64_t>>& tail) {
        std::vector<std::pair<int64_t, int64_t>> c;
        for (size_t i = 0; i < lead; ++i) c.push_back({0, head[i]});
        c.insert(c.end(), tail.begin(), tail.end());
        return c;
    };
    auto with_head = [&](const Shape& tail) {
        Shape r = head;
        r.insert(r.end(), tail.begin(), tail.end());
        return r;
    };
    // [k * (i + d)] -> [k, i + d]: row j starts at element j * d of the (repeated) input.
    std::vector<std::pair<int64_t, int64_t>> c1;
    Shape r1;
    for (size_t i = 0; i < n; ++i) {
        c1.push_back({0, k[i] * (in[i] + d[i])});
        r1.insert(r1.end(), {k[i], in[i] + d[i]});
    }
    t = t.shrink(cut(c1)).reshape(with_head(r1));
    // [k, o * s] -> [k, o, s] -> [k, o, 1] -> [k, o]
    std::vector<std::pair<int64_t, int64_t>> c2, c3;
    Shape r2, r3;
    for (size_t i = 0; i < n; ++i) {
        c2.insert(c2.end(), {{0, k[i]}, {0, out[i] * s[i]}});
        r2.insert(r2.end(), {k[i], out[i], s[i]});
        c3.insert(c3.end(), {{0, k[i]}, {0, out[i]}, {0, 1}});
        r3.insert(r3.end(), {k[i], out[i]});
    }
    t = t.shrink(cut(c2)).reshape(with_head(r2)).shrink(cut(c3)).reshape(with_head(r3));
    // [..., k0, o0, k1, o1] -> [..., o0, o1, k0, k1]
    Shape order;
    for (size_t i = 0; i < lead; ++i) order.push_back(static_cast<int64_t>(i));
    for (size_t i = 0; i < n; ++i) order.push_back(static_cast<int64_t>(lead + 2 * i + 1));
    for (size_t i = 0; i < n; ++i) order.push_back(static_cast<int64_t>(lead + 2 * i));
    return t.permute(order);
}

struct Spatial {
    Shape stride, padding, dilation;
};

Spatial spatial(const char* op, const ConvOptions& o, size_t n) {
    Spatial s{per_dim(op, "stride", o.stride, n), per_dim(op, "padding", o.padding, n),
              per_dim(op, "dilation", o.dilation, n)};
    for (size_t i = 0; i < n; ++i) {
        if (s.stride[i] <= 0) fail(op, "stride must be positive, got " + shape_str(o.stride));
        if (s.dilation[i] <= 0) fail(op, "dilation must be positive, got " + shape_str(o.dilation));
        if (s.padding[i] < 0) fail(op, "padding must not be negative, got " + shape_str(o.padding));
    }
    return s;
}

// conv over the last n dims: x [N, Cin, *i], w [Cout, Cin / groups, *k].
Tensor conv(const char* op, const Tensor& x, const Tensor& w, const ConvOptions& o, size_t n) {
    if (x.ndim() != static_cast<int64_t>(n) + 2)
        fail(op, "input must have " + str(static_cast<int64_t>(n) + 2) + " dims [N, C, ...], got " +
                     shape_str(x.shape()));
    if (w.ndim() != static_cast<int64_t>(n) + 2)
        fail(op, "weight must have " + str(static_cast<int64_t>(n) + 2) + " dims, got " +
                     shape_str(w.shape()));
    detail::check_same_dtype(op, x, w);
    const int64_t g = o.groups;
    const int64_t N = x.shape()[0], cin = x.shape()[1], cout = w.shape()[0];
    if (g <= 0) fail(op, "groups must be positive, got " + str(g));
    if (cin % g != 0 || cout % g != 0)
        fail(op, "groups " + str(g) + " must divide the input channels " + str(cin) +
                     " and the output channels " + str(cout));
    if (w.shape()[1] * g != cin)
        fail(op, "input has " + str(cin) + " channels, weight expects " + str(w.shape()[1] * g));
    const Spatial sp = spatial(op, o, n);
    Shape k(w.shape().begin() + 2, w.shape().end());
    std::vector<std::pair<int64_t, int64_t>> pads;
    for (size_t i = 0; i < n; ++i) {
        pads.push_back({sp.padding[i], sp.padding[i]});
        const int64_t padded = x.shape()[2 + i] + 2 * sp.padding[i];
        if (sp.dilation[i] * (k[i] - 1) + 1 > padded)
            fail(op, "kernel " + shape_str(k) + " (dilation " + shape_str(sp.dilation) +
                         ") is larger than the padded input " + shape_str(x.shape()));
    }
    // [N, Cin, *o, *k] -> [N, g, 1, Cin/g, *o, *k] -> expand rcout -> [N, g, rcout, *o, Cin/g, *k]
    // A padded input is materialized first (one cheap copy kernel): windows over it then read
    // with plain unit-stride vector loads. Fused, every lane's load would carry its own padding
    // gate, and a gated load does not vectorize.
    Tensor padded = pad_last(x, pads);
    if (std::any_of(sp.padding.begin(), sp.padding.end(), [](int64_t p) { return p > 0; }))
        padded = padded.contiguous();
    const Tensor win = windows(padded, k, sp.stride, sp.dilation);
    const Shape o_(win.shape().begin() + 2, win.shape().begin() + 2 + static_cast<long>(n));
    const int64_t rc = cout / g, cg = cin / g;
    Shape s1{N, g, 1, cg}, e1{N, g, rc, cg};
    s1.insert(s1.end(), o_.begin(), o_.end());
    e1.insert(e1.end(), o_.begin(), o_.end());
    s1.insert(s1.end(), k.begin(), k.end());
    e1.insert(e1.end(), k.begin(), k.end());
    Shape order{0, 1, 2};
    for (size_t i = 0; i < n; ++i) order.push_back(static_cast<int64_t>(4 + i));
    order.push_back(3);
    for (size_t i = 0; i < n; ++i) order.push_back(static_cast<int64_t>(4 + n + i));
    const Tensor xs = win.reshape(s1).expand(e1).permute(order);
    Shape ws{1, g, rc};
    for (size_t i = 0; i < n; ++i) ws.push_back(1);
    ws.push_back(cg);
    ws.insert(ws.end(), k.begin(), k.end());
    Shape axes;
    for (size_t i = 0; i <= n; ++i) axes.push_back(-1 - static_cast<int64_t>(i));
    Shape out{N, cout};
    out.insert(out.end(), o_.begin(), o_.end());
    Tensor r = (xs * w.reshape(ws)).sum(axes).reshape(out);
    if (o.bias) {
        const Tensor& b = *o.bias;
        if (b.shape() != Shape{cout})
            fail(op, "bias of shape " + shape_str(b.shape()) + " for " + str(cout) +
                         " output channels");
        Shape bs{1, cout};
        for (size_t i = 0; i < n; ++i) bs.push_back(1);
        r = r + b.reshape(bs);
    }
    return r;
}

Shape pool_kernel(const char* op, const Tensor& x, const PoolOptions& o, Shape& stride,
                  Shape& padding) {
    if (x.ndim() != 4) fail(op, "input must be [N, C, H, W], got " + shape_str(x.shape()));
    if (o.kernel.empty()) fail(op, "needs a kernel size");
    const Shape k = per_dim(op, "kernel", o.kernel, 2);
    stride = o.stride.empty() ? k : per_dim(op, "stride", o.stride, 2);
    padding = per_dim(op, "padding", o.padding, 2);
    for (size_t i = 0; i < 2; ++i) {
        if (k[i] <= 0) fail(op, "kernel must be positive, got " + shape_str(o.kernel));
        if (stride[i] <= 0) fail(op, "stride must be positive, got " + shape_str(stride));
        if (padding[i] < 0 || 2 * padding[i] > k[i])
            fail(op, "padding " + shape_str(padding) + " must be between 0 and half the kernel " +
                         shape_str(k));
        if (k[i] > x.shape()[2 + i] + 2 * padding[i])
            fail(op, "kernel " + shape_str(k) + " is larger than the padded input " +
                         shape_str(x.shape()));
    }
    return k;
}

Tensor param_shaped(const char* op, const Tensor& p, const Shape& want, const Shape& as) {
    if (p.shape() != want)
        fail(op, "parameter of shape " + shape_str(p.shape()) + ", expected " + shape_str(want));
    return p.reshape(as);
}

} // namespace

Tensor linear(const Tensor& x, const Tensor& w, std::source_location loc) {
    const UserCall site(loc);
    if (w.ndim() != 2) fail("linear", "weight must be [out, in], got " + shape_str(w.shape()));
    if (x.ndim() == 0 || x.shape().back() != w.shape()[1])
        fail("linear", "input " + shape_str(x.shape()) + " does not end in the weight's " +
                           str(w.shape()[1]) + " input features");
    return x.matmul(w.transpose());
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, std::source_location loc) {
    const UserCall site(loc);
    if (b.shape() != Shape{w.shape().empty() ? 0 : w.shape()[0]})
        fail("linear",
             "bias of shape " + shape_str(b.shape()) + " for weight " + shape_str(w.shape()));
    return linear(x, w) + b;
}

Tensor conv1d(const Tensor& x, const Tensor& w, const ConvOptions& o, std::source_location loc) {
    const UserCall site(loc);
    return conv("conv1d", x, w, o, 1);
}

Tensor conv2d(const Tensor& x, const Tensor& w, const ConvOptions& o, std::source_location loc) {
    const UserCall site(loc);
    return conv("conv2d", x, w, o, 2);
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const ConvOptions& o,
                        std::source_location loc) {
    const UserCall site(loc);
    const char* op = "conv_transpose2d";
    if (x.ndim() != 4) fail(op, "input must be [N, C, H, W], got " + shape_str(x.shape()));
    if (w.ndim() != 4) fail(op, "weight must have 4 dims, got " + shape_str(w.shape()));
    const int64_t g = o.groups;
    if (g <= 0) fail(op, "groups must be positive, got " + str(g));
    const int64_t cin = x.shape()[1];
    if (w.shape()[0] != cin)
        fail(op, "input has " + str(cin) + " channels, weight expects " + str(w.shape()[0]));
    if (cin % g != 0) fail(op, "groups " + str(g) + " must divide the input channels " + str(cin));
    const Spatial sp = spatial(op, o, 2);
    const Shape op_pad = per_dim(op, "output_padding", o.output_padding, 2);
    const int64_t N = x.shape()[0], cg = cin / g, rc = w.shape()[1];
    // Zeros between the input's pixels (stride - 1 of them), then a plain convolution with the
    // flipped kernel, channels swapped, padded by dilation (k - 1) - padding per side.
    const int64_t H = x.shape()[2], W = x.shape()[3], sh = sp.stride[0], sw = sp.stride[1];
    Tensor up = x.reshape({N, cin, H, 1, W, 1})
                    .pad({{0, 0}, {0, 0}, {0, 0}, {0, sh - 1}, {0, 0}, {0, sw - 1}})
                    .reshape({N, cin, H * sh, W * sw})
                    .shrink({{0, N}, {0, cin}, {0, (H - 1) * sh + 1}, {0, (W - 1) * sw + 1}});
    std::vector<std::pair<int64_t, int64_t>> pads;
    for (size_t i = 0; i < 2; ++i) {
        const int64_t e = sp.dilation[i] * (w.shape()[2 + i] - 1) - sp.padding[i];
        if (op_pad[i] < 0 || (op_pad[i] >= sp.stride[i] && op_pad[i] >= sp.dilation[i]))
            fail(op, "output_padding " + shape_str(o.output_padding) +
                         " must be smaller than the stride or the dilation");
        pads.push_back({e, e + op_pad[i]});
    }
    up = pad_last(up, pads);
    // w [Cin, Cout/g, kh, kw] -> [g, Cin/g, Cout/g, ...] -> [g, Cout/g, Cin/g, ...] -> [Cout,
    // Cin/g, ...]
    const int64_t kh = w.shape()[2], kw = w.shape()[3];
    const Tensor wt = w.reshape({g, cg, rc, kh, kw})
                          .permute({0, 2, 1, 3, 4})
                          .reshape({g * rc, cg, kh, kw})
                          .flip({2, 3});
    ConvOptions c;
    c.bias = o.bias;
    c.dilation = sp.dilation;
    c.groups = g;
    return conv(op, up, wt, c, 2);
}

Tensor max_pool2d(const Tensor& x, const PoolOptions& o, std::source_location loc) {
    const UserCall site(loc);
    Shape stride, padding;
    const Shape k = pool_kernel("max_pool2d", x, o, stride, padding);
    std::vector<std::pair<int64_t, int64_t>> p{{padding[0], padding[0]}, {padding[1], padding[1]}};
    Tensor padded = pad_last(x, p);
    if (padding[0] || padding[1]) // padding reads -inf, never the max
        padded =
            where(pad_last(Tensor::ones(x.shape(), DType::Bool), p), padded,
                  x.dtype().is_float()
                      ? Tensor::full(Shape{}, -std::numeric_limits<double>::infinity(), x.dtype())
                      : Tensor::full(Shape{}, x.dtype().min(), x.dtype()));
    const Tensor w = windows(padded, k, stride, {1, 1}); // [..., oh, ow, kh, kw]
    const Tensor m = detail::with_derivative(w.max({-1, -2}, true), w, [&] {
        // A window with tied maxima sends its whole gradient to the first one (row-major), as
        // PyTorch does; the max's own rule would split it.
        Shape flat = w.shape();
        flat.pop_back();
        flat.back() = k[0] * k[1];
        return w.reshape(flat).argmax(-1).one_hot(k[0] * k[1]).reshape(w.shape());
    });
    Shape out = m.shape();
    out.resize(out.size() - 2);
    return m.reshape(out);
}

Tensor avg_pool2d(const Tensor& x, const PoolOptions& o, std::source_location loc) {
    const UserCall site(loc);
    Shape stride, padding;
    const Shape k = pool_kernel("avg_pool2d", x, o, stride, padding);
    detail::check_float("avg_pool2d", x);
    const Tensor padded = pad_last(x, {{padding[0], padding[0]}, {padding[1], padding[1]}});
    return windows(padded, k, stride, {1, 1}).mean({-1, -2});
}

Tensor adaptive_avg_pool2d(const Tensor& x, Shape out_hw, std::source_location loc) {
    const UserCall site(loc);
    const auto on = detail::on_device_of(x);
    const char* op = "adaptive_avg_pool2d";
    if (x.ndim() != 4) fail(op, "input must be [N, C, H, W], got " + shape_str(x.shape()));
    detail::check_float(op, x);
    out_hw = per_dim(op, "output size", out_hw, 2);
    // out = A_h x A_w^T with A[i, j] = 1 / |window i| on window i: a small constant matrix.
    auto averaging = [&](int64_t o, int64_t n) {
        if (o <= 0) fail(op, "output size must be positive, got " + shape_str(out_hw));
        std::vector<double> a(static_cast<size_t>(o * n), 0.0);
        for (int64_t i = 0; i < o; ++i) {
            const int64_t b = i * n / o, e = ((i + 1) * n + o - 1) / o;
            for (int64_t j = b; j < e; ++j) a[i * n + j] = 1.0 / static_cast<double>(e - b);
        }
        return Tensor::from_vector(a, Shape{o, n}, x.dtype());
    };
    const Tensor ah = averaging(out_hw[0], x.shape()[2]), aw = averaging(out_hw[1], x.shape()[3]);
    return ah.matmul(x).matmul(aw.transpose());
}

Tensor layer_norm(const Tensor& x, Shape normalized_shape, std::optional<Tensor> w,
                  std::optional<Tensor> b, double eps, std::source_location loc) {
    const UserCall site(loc);
    const char* op = "layer_norm";
    detail::check_float(op, x);
    const auto n = static_cast<int64_t>(normalized_shape.size());
    const bool fits =
        n >= 1 && n <= x.ndim() &&
        std::equal(normalized_shape.begin(), normalized_shape.end(), x.shape().end() - n);
    if (!fits)
        fail(op, "normalized_shape " + shape_str(normalized_shape) + " is not the end of " +
                     shape_str(x.shape()));
    Shape axes;
    for (int64_t i = 1; i <= n; ++i) axes.push_back(-i);
    const Tensor mean = x.mean(axes, true);
    const Tensor d = x - mean;
    Tensor y = d * ((d * d).mean(axes, true) + eps).rsqrt();
    if (w) y = y * param_shaped(op, *w, normalized_shape, normalized_shape);
    if (b) y = y + param_shaped(op, *b, normalized_shape, normalized_shape);
    return y;
}

Tensor batch_norm(const Tensor& x, const Tensor& mean, const Tensor& var, std::optional<Tensor> w,
                  std::optional<Tensor> b, double eps, std::source_location loc) {
    const UserCall site(loc);
    const char* op = "batch_norm";
    detail::check_float(op, x);
    if (x.ndim() < 2) fail(op, "input must be [N, C, ...], got " + shape_str(x.shape()));
    const int64_t c = x.shape()[1];
    Shape as(static_cast<size_t>(x.ndim()), 1);
    as[1] = c;
    Tensor y =
        (x - param_shaped(op, mean, {c}, as)) * (param_shaped(op, var, {c}, as) + eps).rsqrt();
    if (w) y = y * param_shaped(op, *w, {c}, as);
    if (b) y = y + param_shaped(op, *b, {c}, as);
    return y;
}

Tensor group_norm(const Tensor& x, int64_t groups, std::optional<Tensor> w, std::optional<Tensor> b,
                  double eps, std::source_location loc) {
    const UserCall site(loc);
    const char* op = "group_norm";
    detail::check_float(op, x);
    if (x.ndim() < 2) fail(op, "input must be [N, C, ...], got " + shape_str(x.shape()));
    const int64_t N = x.shape()[0], c = x.shape()[1];
    if (groups <= 0 || c % groups != 0)
        fail(op, "groups " + str(groups) + " must divide the " + str(c) + " channels");
    const Tensor g = x.reshape({N, groups, -1});
    const Tensor d = g - g.mean(-1, true);
    Tensor y = (d * ((d * d).mean(-1, true) + eps).rsqrt()).reshape(x.shape());
    Shape as(static_cast<size_t>(x.ndim()), 1);
    as[1] = c;
    if (w) y = y * param_shaped(op, *w, {c}, as);
    if (b) y = y + param_shaped(op, *b, {c}, as);
    return y;
}

Tensor rms_norm(const Tensor& x, std::optional<Tensor> w, double eps, std::source_location loc) {
    const UserCall site(loc);
    const char* op = "rms_norm";
    detail::check_float(op, x);
    if (x.ndim() == 0) fail(op, "needs at least 1 dim");
    Tensor y = x * ((x * x).mean(-1, true) + eps).rsqrt();
    if (w) y = y * param_shaped(op, *w, {x.shape().back()}, {x.shape().back()});
    return y;
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    std::optional<Tensor> attn_mask, std::source_location loc) {
    const UserCall site(loc);
    const char* op = "scaled_dot_product_attention";
    detail::check_float(op, q);
    if (q.ndim() < 2 || k.ndim() < 2 || v.ndim() < 2 || q.shape().back() != k.shape().back() ||
        k.shape()[k.ndim() - 2] != v.shape()[v.ndim() - 2])
        fail(op, "shapes " + shape_str(q.shape()) + ", " + shape_str(k.shape()) + " and " +
                     shape_str(v.shape()) + " are not [..., L, E], [..., S, E], [..., S, Ev]");
    const int64_t L = q.shape()[q.ndim() - 2], S = k.shape()[k.ndim() - 2];
    Tensor scores =
        q.matmul(k.transpose()) * (1.0 / std::sqrt(static_cast<double>(q.shape().back())));
    if (causal) // query i sees keys j <= i
        scores = scores.masked_fill(Tensor::ones({L, S}, DType::Bool).triu(1), -INFINITY);
    if (attn_mask) {
        const Tensor& m = *attn_mask;
        const auto fits = [&] {
            try {
                return broadcast_shapes(m.shape(), scores.shape()) == scores.shape();
            } catch (const Error&) {
                return false;
            }
        };
        if (!fits())
            fail(op, "attn_mask of shape " + shape_str(m.shape()) +
                         " does not broadcast to the scores' shape " + shape_str(scores.shape()));
        if (m.dtype().is_bool())
            scores = scores.masked_fill(m.logical_not(), -INFINITY);
        else if (m.dtype().is_float())
            scores = scores + (m.dtype() == scores.dtype() ? m : m.cast(scores.dtype()));
        else
            fail(op, "attn_mask must be bool or float, got " + m.dtype().name());
    }
    return scores.softmax(-1).matmul(v);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, std::source_location loc) {
    const UserCall site(loc);
    const char* op = "cross_entropy";
    detail::check_float(op, logits);
    if (logits.ndim() != 2) fail(op, "logits must be [N, C], got " + shape_str(logits.shape()));
    const int64_t n = logits.shape()[0], c = logits.shape()[1];
    if (!target.dtype().is_int())
        fail(op, "target must be Int32 or Int64, got " + target.dtype().name());
    if (target.shape() != Shape{n})
        fail(op, "target of shape " + shape_str(target.shape()) + " for logits " +
                     shape_str(logits.shape()));
    if (target.is_realized())
        for (int64_t t : target.to_vector<int64_t>())
            if (t < 0 || t >= c)
                fail(op, "target " + str(t) + " is out of range for " + str(c) + " classes");
    const Tensor picked = (logits.log_softmax(-1) * target.one_hot(c).cast(logits.dtype())).sum(-1);
    return -picked.mean();
}

Tensor mse_loss(const Tensor& a, const Tensor& b, std::source_location loc) {
    const UserCall site(loc);
    detail::check_float("mse_loss", a);
    const Tensor d = a - b;
    return (d * d).mean();
}

Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& y,
                                        std::source_location loc) {
    const UserCall site(loc);
    detail::check_float("binary_cross_entropy_with_logits", x);
    // -(y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))) = softplus(x) - x y, without overflow.
    return (x.softplus() - x * y).mean();
}

} // namespace tempura::nn
