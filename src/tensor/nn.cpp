// tempura::nn: layers and losses as compositions of Tensor ops (see nn.hpp).
#include "tempura/tensor/nn.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "tempura/error.hpp"
#include "tempura/ir/custom_grad.hpp"
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

// x padded (or cut, where negative) by `pads` per side of its last dims, materialized when
// anything changed (one cheap copy kernel): windows over it then read with plain unit-stride
// vector loads. Fused, every lane's load would carry its own padding gate, and a gated load
// does not vectorize. A convolution's input, its weight gradient's and a transposed one's.
Tensor padded_copy(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& pads) {
    const Tensor padded = pad_last(x, pads);
    const bool changed = std::any_of(pads.begin(), pads.end(),
                                     [](const auto& p) { return p.first != 0 || p.second != 0; });
    return changed ? padded.contiguous() : padded;
}

// windows() over x padded by `pad` per side of the last k.size() dims (padded_copy): the
// convolution's windows, built the same way by its forward pass and by its weight gradient
// (conv_vjp).
Tensor padded_windows(const Tensor& x, const Shape& k, const Shape& s, const Shape& pad,
                      const Shape& d) {
    std::vector<std::pair<int64_t, int64_t>> pads;
    for (int64_t p : pad) pads.push_back({p, p});
    return windows(padded_copy(x, pads), k, s, d);
}

struct Spatial {
    Shape stride, padding, dilation;
};

// windows() (no dilation) whose gradient is summed straight from the window elements that hold
// each input element (windows_adjoint, with_custom_vjp), not through the adjoints of its repeat,
// reshapes and shrinks: those sum a padded grid k / s times the input's size per dim.
Tensor windows_with_vjp(const Tensor& x, const Shape& k, const Shape& s) {
    const Tensor win = windows(x, k, s, Shape(k.size(), 1));
    if (!detail::grad_flows(x) || TensorAccess::symbolic(x)) return win;
    std::vector<int64_t> params{static_cast<int64_t>(k.size())};
    params.insert(params.end(), k.begin(), k.end());
    params.insert(params.end(), s.begin(), s.end());
    return detail::with_custom_vjp(win, x, x, CustomGradKind::Windows, params);
}

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

Tensor conv(const char* op, const Tensor& x, const Tensor& w, const ConvOptions& o, size_t n);

// The multiple the flat and gathered forms round their positions up to: two vectors of the
// widest registers (32 floats), or on a device of 8-float vectors and 16 registers (AVX2) three
// vectors, for its register tile of 3 vectors x 4 output channels (codegen/opts.cpp): its 2 x 4
// over 32 ran 12-30% slower, the positions rounding to 24 adds included (512 channels on 7 x 7,
// batch 8: 25.8 -> 20.1 ms; 256 on 14 x 14: 21.3 -> 18.8).
int64_t positions_multiple(const Tensor& x) {
    return runtime::device_limits(TensorAccess::core(x).device).vector_bytes == 32 ? 24 : 32;
}

// The flat, pointwise and gathered forms' result: the reduce over [N, Cout, positions rounded
// up] made a buffer of its own and read back as its first p positions, [N, Cout, rows, cols]
// (p = rows cols).
Tensor first_positions(const Tensor& r, int64_t N, int64_t cout, int64_t p, int64_t rows,
                       int64_t cols) {
    return r.reshape({N, cout, r.numel() / (N * cout)})
        .contiguous()
        .shrink({{0, N}, {0, cout}, {0, p}})
        .reshape({N, cout, rows, cols});
}

// Whether a stride-1 convolution over the last n dims with kernel k, padding `pad` and dilation
// `dil` takes the flat form (flat_conv): 2-D, a kernel wider than one tap, sizes known, and an
// output row that 16 lanes (the widest vector registers, AVX-512's floats) do not divide. Where
// they do, the rows are vectors already and the flat form would only add its dropped columns.
bool flat_form(size_t n, const Shape& k, const Shape& pad, const Shape& dil, const Tensor& x,
               const Tensor& w) {
    if (n != 2 || (k[0] == 1 && k[1] == 1) || TensorAccess::symbolic(x) ||
        TensorAccess::symbolic(w))
        return false;
    const int64_t ow = x.shape()[3] + 2 * pad[1] - dil[1] * (k[1] - 1);
    return ow % 16 != 0;
}

// A stride-1 2-D convolution computed over the flattened rows of its padded input. With the
// padded input [N, Cin, Hp, Wp] read as one row of Hp Wp elements per channel, output position
// p = oh Wp + ow reads element p + dh kh Wp + dw kw for tap (kh, kw): every tap is the same
// contiguous row shifted, so the output positions (oh, ow) form one axis P, vectorized and
// register-tiled like a matmul's columns whatever the image's width (a 7-wide row gave 7-lane
// vectors and 3-trip inner loops: 40-50 GFLOP/s, as one axis of 64 positions 125-145). The
// price: the Wp - OW columns past each output row's end are computed too and dropped (2 of 9
// on a 7 x 7 image with padding 1, 2 of 58 on 56 x 56), and P is rounded up to a multiple of
// 32 or 24 (positions_multiple) so that the vector axis always divides; the padded
// copy (made anyway, for the padding) gets the rows those extra positions read. The result is
// its own kernel over [N, Cout, P], read through a view that drops the extra columns.
Tensor flat_conv(const Tensor& x, const Tensor& w, const Spatial& sp, int64_t g) {
    const int64_t N = x.shape()[0], cin = x.shape()[1], cout = w.shape()[0];
    const int64_t kh = w.shape()[2], kw = w.shape()[3];
    const int64_t dh = sp.dilation[0], dw = sp.dilation[1];
    const int64_t hp = x.shape()[2] + 2 * sp.padding[0], wp = x.shape()[3] + 2 * sp.padding[1];
    const int64_t oh = hp - dh * (kh - 1), ow = wp - dw * (kw - 1);
    const int64_t p = oh * wp, m = positions_multiple(x), p_all = (p + m - 1) / m * m;
    const int64_t read = p_all + dh * (kh - 1) * wp + dw * (kw - 1); // elements a channel reads
    const int64_t rows = std::max<int64_t>(0, (read - hp * wp + wp - 1) / wp); // rows added
    const Tensor xp =
        padded_copy(x, {{sp.padding[0], sp.padding[0] + rows}, {sp.padding[1], sp.padding[1]}});
    const Tensor flat =
        xp.reshape({N, cin, (hp + rows) * wp}).shrink({{0, N}, {0, cin}, {0, read}});
    // [N, Cin, read] -> [N, Cin, read - dw (kw - 1), kw] -> [N, Cin, kw, P, kh]
    //   -> [N, Cin, P, kh, kw]
    const Tensor taps =
        windows(windows(flat, {kw}, {1}, {dw}).permute({0, 1, 3, 2}), {kh}, {1}, {dh * wp})
            .permute({0, 1, 3, 4, 2});
    const int64_t rc = cout / g, cg = cin / g;
    const Tensor xs = taps.reshape({N, g, 1, cg, p_all, kh, kw})
                          .expand({N, g, rc, cg, p_all, kh, kw})
                          .permute({0, 1, 2, 4, 3, 5, 6});
    const Tensor r = (xs * w.reshape({1, g, rc, 1, cg, kh, kw})).sum({-1, -2, -3});
    return first_positions(r, N, cout, p, oh, wp).shrink({{0, N}, {0, cout}, {0, oh}, {0, ow}});
}

// A 1 x 1 stride-1 unpadded 2-D convolution whose positions 16 does not divide (7 x 7 and
// 14 x 14: MobileNet's expansions and projections) as a matmul over them as one axis,
// rounded up to a multiple of 32 (the input copied with zero columns past the end, the result
// read through a view that drops them): over [oh, ow] its lanes were the 7 of a row, its
// register tile 7 rows, 6-16 GFLOP/s on an AVX2 host.
bool pointwise_form(size_t n, const Shape& k, const Spatial& sp, const Tensor& x, const Tensor& w) {
    if (n != 2 || k[0] != 1 || k[1] != 1 || TensorAccess::symbolic(x) || TensorAccess::symbolic(w))
        return false;
    for (size_t i = 0; i < n; ++i)
        if (sp.stride[i] != 1 || sp.padding[i] != 0) return false;
    return x.shape()[2] * x.shape()[3] % 16 != 0;
}

Tensor pointwise_conv(const Tensor& x, const Tensor& w, int64_t g) {
    const int64_t N = x.shape()[0], cin = x.shape()[1], cout = w.shape()[0];
    const int64_t h = x.shape()[2], wd = x.shape()[3];
    const int64_t p = h * wd, p_all = (p + 31) / 32 * 32;
    // (pointwise_form: p is no multiple of 16, so p_all > p.)
    const Tensor flat = pad_last(x.reshape({N, cin, p}), {{0, p_all - p}}).contiguous();
    const int64_t rc = cout / g, cg = cin / g;
    const Tensor xs =
        flat.reshape({N, g, 1, cg, p_all}).expand({N, g, rc, cg, p_all}).permute({0, 1, 2, 4, 3});
    return first_positions((xs * w.reshape({1, g, rc, 1, cg})).sum({-1}), N, cout, p, h, wd);
}

// A stride-1 2-D convolution's weight gradient with the input copied channels last: dw[o, c,
// tap] = sum over the batch's output positions of g[o, position] x[position + tap, c]. Over
// x padded and copied as [N, hp, wp, Cin], each tap's channels at a position are one contiguous
// row: the kernel is a matmul's, input channels in vector lanes, output channels register-tiled
// over g's broadcast values, one reduce over the batch's positions. (The windows form, over the
// channels-first input, took its lanes along the output rows: 7 of them on a 7 x 7 image, 50
// GFLOP/s. A flat form like the forward's, the lanes along the positions, is a dot product whose
// horizontal sums a 64-position image does not amortize: 60.) The reduce stores each gradient
// element in the weight's layout, strided along its lanes (codegen/opts.cpp: a reduce kernel's
// outer output axis). For 2-D convolutions whatever the forward's form (a stem's 4 x 4 taps over
// 12 phase channels too) with 8 or more input channels a group: fewer leave too few lanes.
Tensor channels_last_weight_grad(const Tensor& g, const Tensor& x, const Shape& pad,
                                 const Shape& dil, int64_t groups, int64_t kh, int64_t kw) {
    const int64_t N = x.shape()[0], cout = g.shape()[1];
    const int64_t oh = g.shape()[2], ow = g.shape()[3];
    // Each group's channels padded with zeros to a multiple of 8, the lanes' count: a stem's
    // 12 phase channels took no lanes at all (1.5 GFLOP/s, 1.6 s of a ResNet-18 training step).
    const int64_t cg_in = x.shape()[1] / groups, cg = (cg_in + 7) / 8 * 8, cin = groups * cg;
    const Tensor xl = pad_last(x, {{pad[0], pad[0]}, {pad[1], pad[1]}}).permute({0, 2, 3, 1});
    const Shape hw{xl.shape()[1], xl.shape()[2]};
    const Tensor xt = pad_last(xl.reshape({N, hw[0], hw[1], groups, cg_in}), {{0, cg - cg_in}})
                          .reshape({N, hw[0], hw[1], cin})
                          .contiguous()
                          .permute({0, 3, 1, 2});
    const Tensor win = windows(xt, {kh, kw}, {1, 1}, dil); // [N, Cin, oh, ow, kh, kw]
    const int64_t rc = cout / groups;
    // [N, g, cg, oh, ow, kh, kw] -> [g, 1, kh, kw, cg, N, oh, ow]
    const Tensor xs = win.reshape({N, groups, cg, oh, ow, kh, kw})
                          .permute({1, 5, 6, 2, 0, 3, 4})
                          .reshape({groups, 1, kh, kw, cg, N, oh, ow});
    // [N, g, rc, oh, ow] -> [g, rc, 1, 1, 1, N, oh, ow]
    const Tensor gs = g.reshape({N, groups, rc, oh, ow})
                          .permute({1, 2, 0, 3, 4})
                          .reshape({groups, rc, 1, 1, 1, N, oh, ow});
    // The batch's positions in chunks of whole images, at most 2048 positions each (each chunk's
    // [positions, 32 channels] block, 256 KiB, then stays in cache while every output channel
    // and tap passes over it), summed after: streamed whole, a 56 x 56 batch of 8 ran 69
    // GFLOP/s, bound by memory.
    int64_t per = 1;
    for (int64_t c = N; c >= 1; --c)
        if (N % c == 0 && c * oh * ow <= 2048) {
            per = c;
            break;
        }
    const int64_t chunks = N / per;
    const Tensor prod = gs * xs;
    const std::vector<std::pair<int64_t, int64_t>> keep{{0, cout}, {0, cg_in}, {0, kh}, {0, kw}};
    if (chunks == 1)
        return prod.sum({5, 6, 7})
            .reshape({cout, kh, kw, cg})
            .permute({0, 3, 1, 2})
            .shrink(keep)
            .contiguous();
    // (Only N is split: a reshape merging it with the windowed positions is no single view.)
    return prod.reshape({groups, rc, kh, kw, cg, chunks, per, oh, ow})
        .sum({6, 7, 8})
        .reshape({cout, kh, kw, cg, chunks})
        .permute({4, 0, 3, 1, 2})
        .contiguous()
        .sum({0})
        .shrink(keep);
}

// A strided 2-D convolution as a matmul over its gathered windows (im2col): the taps of every
// output position copied once into [N, Cin, kh, kw, P] (P = OH OW rounded up to a multiple of
// 32 or 24, positions_multiple, zeros past the end), so that the reduce reads each tap's row
// contiguously along the output positions, vectorized and register-tiled like a matmul's
// columns. The copy is the input's size times kh kw / (sh sw): 2.25 for 3 x 3 at stride 2, a
// quarter for 1 x 1, a small multiple of the padded copy a convolution makes anyway where the
// kernel is at most twice the stride per dim (gathered_form). A wider one (7 x 7 at stride 2:
// 12 times the input) takes the phases (polyphase_conv). Against the phases' regrouping, no tap
// is a zero: a 3 x 3 stride-2 convolution computes its 9 taps, not 16. A depthwise convolution
// (one channel a group) takes the phases too: each gathered tap would serve one output channel,
// and the copy cost more than the reduce (MobileNetV2's 144 channels at 56 x 56: 2.6 ms, a
// gather a lane).
bool gathered_form(size_t n, const Shape& k, const Spatial& sp, const Tensor& x, const Tensor& w) {
    if (n != 2 || TensorAccess::symbolic(x) || TensorAccess::symbolic(w)) return false;
    for (size_t i = 0; i < n; ++i)
        if (k[i] > 2 * sp.stride[i]) return false;
    return w.shape()[1] > 1;
}

Tensor gathered_conv(const Tensor& x, const Tensor& w, const Spatial& sp, int64_t g) {
    const int64_t N = x.shape()[0], cin = x.shape()[1], cout = w.shape()[0];
    const int64_t kh = w.shape()[2], kw = w.shape()[3];
    std::vector<std::pair<int64_t, int64_t>> pads;
    for (int64_t p : sp.padding) pads.push_back({p, p});
    const Tensor padded = pad_last(x, pads);
    const bool dilated = sp.dilation[0] > 1 || sp.dilation[1] > 1;
    const Tensor win = dilated ? windows(padded, {kh, kw}, sp.stride, sp.dilation)
                               : windows_with_vjp(padded, {kh, kw}, sp.stride);
    const int64_t oh = win.shape()[2], ow = win.shape()[3];
    const int64_t p = oh * ow, m = positions_multiple(x), p_all = (p + m - 1) / m * m;
    // [N, Cin, OH, OW, kh, kw] -> [N, Cin, kh, kw, P] padded to p_all: one copy kernel.
    const Tensor col =
        pad_last(win.permute({0, 1, 4, 5, 2, 3}).reshape({N, cin, kh, kw, p}), {{0, p_all - p}})
            .contiguous();
    const int64_t rc = cout / g, cg = cin / g;
    const Tensor xs = col.reshape({N, g, 1, cg, kh, kw, p_all})
                          .expand({N, g, rc, cg, kh, kw, p_all})
                          .permute({0, 1, 2, 6, 3, 4, 5});
    const Tensor r = (xs * w.reshape({1, g, rc, 1, cg, kh, kw})).sum({-1, -2, -3});
    return first_positions(r, N, cout, p, oh, ow);
}

// A strided convolution (no dilation) as a stride-1 one over the input's phases: with stride s,
// input row s i + r is row i of phase r, and tap t = s a + r of the kernel reads phase r at
// row o + a. So the padded input is copied once into [N, Cin * phases, rows / s, ...] (the copy
// the padding needs anyway; the flat form's own copy where it takes one), the kernel's taps are
// regrouped the same way (zeros past the kernel's end: ceil(k / s) taps a phase), and a stride-1
// convolution does the rest with the unit-stride loads and register tiles of any other (a strided
// window is a gather a lane). A phase no tap reads (s > k: a 1x1 stride-2 convolution) is left out.
Tensor polyphase_conv(const char* op, const Tensor& x, const Tensor& w, const ConvOptions& o,
                      const Spatial& sp, size_t n) {
    const int64_t N = x.shape()[0], cin = x.shape()[1], cout = w.shape()[0], cg = w.shape()[1];
    std::vector<std::pair<int64_t, int64_t>> pads;
    Shape split{N, cin}, wsplit{cout, cg}, a(n), q(n), ph(n);
    std::vector<std::pair<int64_t, int64_t>> keep{{0, N}, {0, cin}}, wkeep{{0, cout}, {0, cg}},
        wpads;
    int64_t phases = 1;
    for (size_t i = 0; i < n; ++i) {
        const int64_t s = sp.stride[i], k = w.shape()[2 + i];
        const int64_t padded = x.shape()[2 + i] + 2 * sp.padding[i];
        const int64_t out = (padded - k) / s + 1;
        a[i] = (k + s - 1) / s;
        q[i] = out + a[i] - 1;
        ph[i] = std::min(s, k);
        phases *= ph[i];
        // Padded (or cut) to q s rows: the rows past the padded input are read only by the
        // zero taps past the kernel's end.
        pads.push_back({sp.padding[i], q[i] * s - x.shape()[2 + i] - sp.padding[i]});
        split.insert(split.end(), {q[i], s});
        keep.insert(keep.end(), {{0, q[i]}, {0, ph[i]}});
        wpads.push_back({0, a[i] * s - k});
        wsplit.insert(wsplit.end(), {a[i], s});
        wkeep.insert(wkeep.end(), {{0, a[i]}, {0, ph[i]}});
    }
    // [N, Cin, q0, s0, q1, s1, ...] -> [N, Cin, p0, p1, ..., q0, q1, ...]
    Shape order{0, 1};
    for (size_t i = 0; i < n; ++i) order.push_back(static_cast<int64_t>(3 + 2 * i));
    for (size_t i = 0; i < n; ++i) order.push_back(static_cast<int64_t>(2 + 2 * i));
    Shape pshape{N, cin * phases}, wshape{cout, cg * phases};
    pshape.insert(pshape.end(), q.begin(), q.end());
    wshape.insert(wshape.end(), a.begin(), a.end());
    Tensor px = pad_last(x, pads).reshape(split).shrink(keep).permute(order).reshape(pshape);
    const Tensor pw =
        pad_last(w, wpads).reshape(wsplit).shrink(wkeep).permute(order).reshape(wshape);
    // The flat form copies its input (with its extra rows) anyway: that one copy does the
    // regrouping too.
    if (!flat_form(n, a, Shape(n, 0), Shape(n, 1), px, pw)) px = px.contiguous();
    ConvOptions c;
    c.bias = o.bias;
    c.groups = o.groups;
    return conv(op, px, pw, c, n);
}

// A convolution as a reduce over its windows: [N, Cin, *o, *k] -> [N, g, 1, Cin/g, *o, *k] ->
// expand rcout -> [N, g, rcout, *o, Cin/g, *k], times the weight, summed over the last n + 1 dims.
Tensor windows_conv(const Tensor& x, const Tensor& w, const Spatial& sp, int64_t g, size_t n) {
    const int64_t N = x.shape()[0], cin = x.shape()[1], cout = w.shape()[0];
    const Shape k(w.shape().begin() + 2, w.shape().end());
    const Tensor win = padded_windows(x, k, sp.stride, sp.padding, sp.dilation);
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
    return (xs * w.reshape(ws)).sum(axes).reshape(out);
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
    const int64_t cin = x.shape()[1], cout = w.shape()[0];
    if (g <= 0) fail(op, "groups must be positive, got " + str(g));
    if (cin % g != 0 || cout % g != 0)
        fail(op, "groups " + str(g) + " must divide the input channels " + str(cin) +
                     " and the output channels " + str(cout));
    if (w.shape()[1] * g != cin)
        fail(op, "input has " + str(cin) + " channels, weight expects " + str(w.shape()[1] * g));
    const Spatial sp = spatial(op, o, n);
    Shape k(w.shape().begin() + 2, w.shape().end());
    for (size_t i = 0; i < n; ++i) {
        const int64_t padded = x.shape()[2 + i] + 2 * sp.padding[i];
        if (sp.dilation[i] * (k[i] - 1) + 1 > padded)
            fail(op, "kernel " + shape_str(k) + " (dilation " + shape_str(sp.dilation) +
                         ") is larger than the padded input " + shape_str(x.shape()));
    }
    const bool strided =
        std::any_of(sp.stride.begin(), sp.stride.end(), [](int64_t s) { return s > 1; });
    const bool dilated =
        std::any_of(sp.dilation.begin(), sp.dilation.end(), [](int64_t d) { return d > 1; });
    const bool gathered = strided && gathered_form(n, k, sp, x, w);
    if (strided && !dilated && !gathered) return polyphase_conv(op, x, w, o, sp, n);
    Tensor r = gathered ? gathered_conv(x, w, sp, g)
               : !strided && flat_form(n, k, sp.padding, sp.dilation, x, w) ? flat_conv(x, w, sp, g)
               : pointwise_form(n, k, sp, x, w) ? pointwise_conv(x, w, g)
                                                : windows_conv(x, w, sp, g, n);
    const bool unit_stride =
        std::all_of(sp.stride.begin(), sp.stride.end(), [](int64_t s) { return s == 1; });
    if (unit_stride && detail::grad_flows(x, w) && !TensorAccess::symbolic(x) &&
        !TensorAccess::symbolic(w)) {
        std::vector<int64_t> params{static_cast<int64_t>(n)};
        params.insert(params.end(), sp.padding.begin(), sp.padding.end());
        params.insert(params.end(), sp.dilation.begin(), sp.dilation.end());
        params.push_back(g);
        r = detail::with_custom_vjp(r, x, w, CustomGradKind::Conv, params);
    }
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

// The transposed convolution over the last n dims, at stride 1: `up` (a strided transposed
// convolution's input with its zeros already inserted, or a convolution's adjoint) convolved
// with w [Cin, Cout / g, *k] flipped and its channels swapped per group, over up padded by
// dilation (k - 1) - padding per side (negative: rows cut) and `after` more past the end.
// conv_transpose2d and a convolution's input gradient (conv_vjp); errors name `op`.
Tensor transposed_conv(const char* op, const Tensor& up, const Tensor& w, const Shape& padding,
                       const Shape& after, const Shape& dilation, int64_t g,
                       const std::optional<Tensor>& bias, size_t n) {
    // w [Cin, Cout/g, *k] -> [g, Cin/g, Cout/g, *k] -> [g, Cout/g, Cin/g, *k] -> [Cout, Cin/g, *k]
    const int64_t cg = w.shape()[0] / g, rc = w.shape()[1];
    Shape wsplit{g, cg, rc}, wperm{0, 2, 1}, wt_shape{g * rc, cg}, flip;
    std::vector<std::pair<int64_t, int64_t>> reach;
    for (size_t i = 0; i < n; ++i) {
        const int64_t k = w.shape()[2 + i];
        wsplit.push_back(k);
        wperm.push_back(static_cast<int64_t>(3 + i));
        wt_shape.push_back(k);
        flip.push_back(static_cast<int64_t>(2 + i));
        const int64_t e = dilation[i] * (k - 1) - padding[i];
        reach.push_back({e, e + after[i]});
    }
    const Tensor wt = w.reshape(wsplit).permute(wperm).reshape(wt_shape).flip(flip);
    ConvOptions c;
    c.bias = bias;
    c.dilation = dilation;
    c.groups = g;
    // The flat form makes its padded copy itself, of any width.
    if (const Tensor view = pad_last(up, reach); flat_form(
            n, Shape(w.shape().begin() + 2, w.shape().end()), Shape(n, 0), dilation, view, wt))
        return conv(op, view, wt, c, n);
    // A row no vector width divides (29: the phases of a stride-2 convolution's 56 rows)
    // would leave the kernel scalar: it is computed over a few more columns of zeros (to a
    // multiple of 8), which are cut off after. The widths are the CPU backend's registers
    // (codegen/opts.cpp: vector_bytes / 4 lanes, 16, 32 or 64 bytes): a row that only an odd
    // lane count divides (7, 13, 26) would get one of those on some machines and none on others.
    const int64_t width = up.shape().back() + reach.back().first + reach.back().second -
                          dilation.back() * (w.shape().back() - 1); // the output's rows
    bool divides = false;
    for (int64_t lanes : {4, 8, 16}) divides = divides || width % lanes == 0;
    const int64_t extra = divides ? 0 : (width + 7) / 8 * 8 - width;
    reach.back().second += extra;
    const Tensor padded = padded_copy(up, reach);
    Tensor r = conv(op, padded, wt, c, n);
    if (extra > 0) {
        std::vector<std::pair<int64_t, int64_t>> cut;
        for (int64_t d : r.shape()) cut.push_back({0, d});
        cut.back().second -= extra;
        r = r.contiguous().shrink(cut);
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
    const int64_t N = x.shape()[0];
    // Zeros between the input's pixels (stride - 1 of them), then the stride-1 transposed
    // convolution (output_padding more rows past the end).
    const int64_t H = x.shape()[2], W = x.shape()[3], sh = sp.stride[0], sw = sp.stride[1];
    Tensor up = x.reshape({N, cin, H, 1, W, 1})
                    .pad({{0, 0}, {0, 0}, {0, 0}, {0, sh - 1}, {0, 0}, {0, sw - 1}})
                    .reshape({N, cin, H * sh, W * sw})
                    .shrink({{0, N}, {0, cin}, {0, (H - 1) * sh + 1}, {0, (W - 1) * sw + 1}});
    for (size_t i = 0; i < 2; ++i)
        if (op_pad[i] < 0 || (op_pad[i] >= sp.stride[i] && op_pad[i] >= sp.dilation[i]))
            fail(op, "output_padding " + shape_str(o.output_padding) +
                         " must be smaller than the stride or the dilation");
    return transposed_conv(op, up, w, sp.padding, op_pad, sp.dilation, g, o.bias, 2);
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
                      : Tensor::full(Shape{}, x.dtype().min(), x.dtype()))
                .contiguous(); // (one copy: the window loads are then ungated vector loads)
    const Tensor win = windows(padded, k, stride, Shape{1, 1}); // [..., oh, ow, kh, kw]
    if (!detail::grad_flows(padded)) return win.max({-1, -2});
    // A window with tied maxima sends its whole gradient to the first one (row-major), as PyTorch
    // does; the max's own rule would split it. The one-hot mask is built here, with the forward
    // pass: its arange buffers then live as long as the pool's output, which the backward pass
    // reads it through.
    Shape flat = win.shape();
    flat.pop_back();
    flat.back() = k[0] * k[1];
    if (!TensorAccess::symbolic(padded)) {
        // The pool states its own gradient (CustomGradKind::MaxPool, max_pool_adjoint): the
        // argmax is a kernel of its own, which the input's gradient reads. Through the max's
        // derivative and the window view's adjoint, each of an input element's windows
        // recomputed it: 182 ms of a ResNet-18 training step at batch 8 for the first pool, now
        // 125. The argmax compares each tap with the pool's output, read from its buffer, as
        // argmax() does with the max it computes (the first tap equal to it, or the first NaN):
        // through argmax(), the max over the 9 taps was recomputed for each of them, 81
        // comparisons an output (22 ms a step for ResNet-18's pool at batch 8).
        const Tensor y = win.max({-1, -2}).contiguous();
        Shape yb = y.shape(), taps(win.ndim(), 1);
        yb.insert(yb.end(), {1, 1});
        taps[taps.size() - 2] = k[0];
        taps.back() = k[1];
        const Tensor index = Tensor::arange(k[0] * k[1], DType::Int32).reshape(taps);
        const Tensor is_first = logical_or(win == y.reshape(yb), win != win);
        const Tensor first =
            where(is_first, index,
                  Tensor::full(Shape{}, static_cast<double>(k[0] * k[1]), DType::Int32))
                .min({-1, -2})
                .one_hot(k[0] * k[1])
                .reshape(win.shape());
        std::vector<int64_t> params{2, k[0], k[1], stride[0], stride[1]};
        return detail::with_custom_vjp(y, padded, first, CustomGradKind::MaxPool, params);
    }
    const Tensor first = win.reshape(flat).argmax(-1).one_hot(k[0] * k[1]).reshape(win.shape());
    // Symbolic sizes (the window view's adjoint needs concrete ones): the max's own derivative.
    const Tensor m = detail::with_derivative(win.max({-1, -2}, true), win, [&] { return first; });
    return m.reshape(Shape(m.shape().begin(), m.shape().end() - 2)); // (the two window dims)
}

Tensor avg_pool2d(const Tensor& x, const PoolOptions& o, std::source_location loc) {
    const UserCall site(loc);
    Shape stride, padding;
    const Shape k = pool_kernel("avg_pool2d", x, o, stride, padding);
    detail::check_float("avg_pool2d", x);
    const Tensor padded = pad_last(x, {{padding[0], padding[0]}, {padding[1], padding[1]}});
    return windows_with_vjp(padded, k, stride).mean({-1, -2});
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

namespace tempura::detail {

Tensor with_custom_vjp(const Tensor& value, const Tensor& x, const Tensor& w, CustomGradKind kind,
                       const std::vector<int64_t>& params) {
    std::vector<int64_t> arg{static_cast<int64_t>(kind)};
    arg.insert(arg.end(), params.begin(), params.end());
    return TensorAccess::derive(
        value, UOp::make(Op::CustomGrad, value.dtype(), {value.uop(), x.uop(), w.uop()}, arg),
        value.shape(), w); // (w's buffers too: a max pool's mask reads its own)
}

namespace {

// The adjoint of windows(x, k, s) (no dilation): with t = s b + r, input row s a + r is tap t of
// window a - b, so each of its phases r is a sum of ceil(k / s) shifted copies of g's taps
// (one per b and dim: one term where the windows do not overlap), then the phases interleave.
Tensor windows_adjoint(const Tensor& g, const Tensor& x, const std::vector<int64_t>& p) {
    const auto n = static_cast<size_t>(p.at(1));
    const Shape k(p.begin() + 2, p.begin() + 2 + static_cast<long>(n)),
        s(p.begin() + 2 + static_cast<long>(n), p.begin() + 2 + static_cast<long>(2 * n));
    const size_t lead = g.shape().size() - 2 * n;
    Shape o(n), b(n), a(n), in(n);
    for (size_t i = 0; i < n; ++i) {
        o[i] = g.shape()[lead + i];
        in[i] = x.shape()[lead + i];
        b[i] = (k[i] + s[i] - 1) / s[i];
        a[i] = (in[i] + s[i] - 1) / s[i];
    }
    // [..., o..., k...] -> [..., o..., b0, s0, b1, s1, ...]
    std::vector<std::pair<int64_t, int64_t>> kpad;
    Shape split(g.shape().begin(), g.shape().begin() + static_cast<long>(lead + n));
    for (size_t i = 0; i < n; ++i) {
        kpad.push_back({0, b[i] * s[i] - k[i]});
        split.insert(split.end(), {b[i], s[i]});
    }
    const Tensor gs = nn::pad_last(g, kpad).reshape(split);
    std::optional<Tensor> sum;
    Shape at(n, 0); // the term's b per dim
    for (bool more = true; more;) {
        std::vector<std::pair<int64_t, int64_t>> pick, shift;
        for (size_t i = 0; i < lead + n; ++i) pick.push_back({0, gs.shape()[i]});
        for (size_t i = 0; i < n; ++i) {
            pick.insert(pick.end(), {{at[i], at[i] + 1}, {0, s[i]}});
            shift.push_back({at[i], a[i] - o[i] - at[i]});
        }
        // [..., o..., 1, s0, 1, s1] -> [..., o..., s...] -> shifted by b along o: [..., a..., s...]
        Shape term_shape(gs.shape().begin(), gs.shape().begin() + static_cast<long>(lead + n));
        term_shape.insert(term_shape.end(), s.begin(), s.end());
        Tensor t = gs.shrink(pick).reshape(term_shape);
        // pad_last pads the last dims: move the s dims before o, shift, and back.
        Shape to_front;
        for (size_t i = 0; i < lead; ++i) to_front.push_back(static_cast<int64_t>(i));
        for (size_t i = 0; i < n; ++i) to_front.push_back(static_cast<int64_t>(lead + n + i));
        for (size_t i = 0; i < n; ++i) to_front.push_back(static_cast<int64_t>(lead + i));
        t = nn::pad_last(t.permute(to_front), shift);
        sum = sum ? *sum + t : t;
        size_t i = 0;
        while (i < n && ++at[i] == b[i]) at[i++] = 0;
        more = i < n;
    }
    // [..., s0, s1, a0, a1] -> [..., a0, s0, a1, s1] -> [..., a0 s0, a1 s1], cut to the input
    Shape order, rows(sum->shape().begin(), sum->shape().begin() + static_cast<long>(lead));
    for (size_t i = 0; i < lead; ++i) order.push_back(static_cast<int64_t>(i));
    std::vector<std::pair<int64_t, int64_t>> cut;
    for (size_t i = 0; i < n; ++i) {
        order.insert(order.end(),
                     {static_cast<int64_t>(lead + n + i), static_cast<int64_t>(lead + i)});
        rows.push_back(a[i] * s[i]);
        cut.push_back({0, in[i] - a[i] * s[i]});
    }
    // Its own kernel: the consumers (a norm's gradient reduces) would otherwise recompute every
    // term (and a max pool's argmax under it) per element they read.
    return nn::pad_last(sum->permute(order).reshape(rows), cut).contiguous();
}

// The adjoint of a max pool over windows(x, k, s) (CustomGradKind::MaxPool): g goes through the
// first-maximum mask m (max_pool2d builds it; its argmax a kernel of its own) to the input, by
// the window view's adjoint, reading g from a buffer. Fused, g (in ResNet-18 the sum of a
// residual block's input gradients, one a flat-form convolution's view) was recomputed for each
// of the four terms, in a kernel left scalar: 90 ms a training step at batch 8, 8 so. (When
// the convolutions' input gradients were windows-form reduces, materializing g had the
// scheduler fuse that reduce with elementwise work it recomputed per tap, 40x slower; a flat
// form's reduce is a kernel of its own.)
Tensor max_pool_adjoint(const Tensor& g, const Tensor& x, const Tensor& m,
                        const std::vector<int64_t>& p) {
    Shape ones = g.shape();
    ones.resize(m.shape().size(), 1);
    return windows_adjoint(g.contiguous().reshape(ones) * m.cast(g.dtype()), x, p);
}

// A stride-1 convolution's adjoints {dx, dw} from g (CustomGradKind::Conv, with_custom_vjp).
std::pair<Tensor, Tensor> conv_vjp(const Tensor& g, const Tensor& x, const Tensor& w,
                                   const std::vector<int64_t>& p) {
    const auto n = static_cast<size_t>(p.at(1));
    const Shape pad(p.begin() + 2, p.begin() + 2 + static_cast<long>(n)),
        dil(p.begin() + 2 + static_cast<long>(n), p.begin() + 2 + static_cast<long>(2 * n));
    const int64_t G = p.at(2 + 2 * n);
    const int64_t N = x.shape()[0], cout = w.shape()[0], cg = w.shape()[1], rc = cout / G;
    const Shape k(w.shape().begin() + 2, w.shape().end());
    // dx: the transposed convolution of the adjoint (stride 1, the forward's padding and
    // dilation), its errors named by the forward's op.
    // The channels-last weight gradient reads g as one broadcast value per position and output
    // channel, for every input channel block and tap: g is read from a buffer (the adjoint of a
    // norm and its activation, recomputed there, made a ResNet-18 weight gradient 20x slower),
    // which the input gradient's padded copy reads too.
    if (n == 2 && cg >= 8 && !TensorAccess::symbolic(x) && !TensorAccess::symbolic(w)) {
        const Tensor gc = g.contiguous();
        return {nn::transposed_conv(n == 1 ? "conv1d" : "conv2d", gc, w, pad, Shape(n, 0), dil, G,
                                    std::nullopt, n),
                nn::channels_last_weight_grad(gc, x, pad, dil, G, k[0], k[1])};
    }
    const Tensor dx = nn::transposed_conv(n == 1 ? "conv1d" : "conv2d", g, w, pad, Shape(n, 0), dil,
                                          G, std::nullopt, n);
    // dw: the input's windows (the forward's padded copy) against g, summed over the batch and
    // the output positions.
    const Tensor win = nn::padded_windows(x, k, Shape(n, 1), pad, dil); // [N, Cin, *o, *k]
    const Shape o(win.shape().begin() + 2, win.shape().begin() + 2 + static_cast<long>(n));
    Shape xs{N, G, 1, cg}, gs{N, G, rc, 1}, axes{0}, dws{cout, cg};
    for (size_t i = 0; i < n; ++i) {
        xs.push_back(o[i]);
        gs.push_back(o[i]);
        axes.push_back(static_cast<int64_t>(4 + i));
    }
    for (size_t i = 0; i < n; ++i) {
        xs.push_back(k[i]);
        gs.push_back(1);
        dws.push_back(k[i]);
    }
    // Its own kernel: an optimizer's update would otherwise take the reduce into one kernel with
    // the other parameters' updates of the same shape, where only one reduce gets vector lanes.
    const Tensor dw = (win.reshape(xs) * g.reshape(gs)).sum(axes).reshape(dws).contiguous();
    return {dx, dw};
}

} // namespace

std::pair<std::optional<Tensor>, std::optional<Tensor>>
custom_vjp(const Tensor& g, const Tensor& x, const Tensor& w, const std::vector<int64_t>& p) {
    switch (static_cast<CustomGradKind>(p.at(0))) {
    case CustomGradKind::Windows: return {windows_adjoint(g, x, p), std::nullopt};
    case CustomGradKind::MaxPool: return {max_pool_adjoint(g, x, w, p), std::nullopt};
    case CustomGradKind::Conv: {
        auto [dx, dw] = conv_vjp(g, x, w, p);
        return {std::move(dx), std::move(dw)};
    }
    }
    fail("custom_vjp", "unknown CUSTOM_GRAD kind " + std::to_string(p.at(0)));
}

} // namespace tempura::detail
