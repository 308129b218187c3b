#pragma once
// tempura::nn on FixedTensor: conv2d and the 2-D poolings with their output sizes computed at
// compile time, and their mistakes (a channel mismatch, a kernel larger than the padded input)
// as one-sentence compile errors:
//     auto y = nn::conv2d<1, 1>(x, w);  // x FixedTensor<float, 8, 64, 56, 56>, w <.., 64, 64, 3,
//     3>
//                                       // -> FixedTensor<float, 8, 64, 56, 56>
// The options are template arguments (one value for both spatial dims), in PyTorch's order:
// stride, padding, dilation, groups.
#include <cstdint>
#include <optional>
#include <utility>

#include "tempura/tensor/fixed_tensor.hpp"
#include "tempura/tensor/nn.hpp"

namespace tempura::nn {

namespace fixed_nn_detail {

// The spatial size out of a window of `k` (dilated by d) sliding by s over n padded by p on
// each side; -1 when the window is larger than the padded input.
constexpr int64_t window_out(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d) {
    const int64_t span = d * (k - 1) + 1;
    if (n + 2 * p < span) return -1;
    return (n + 2 * p - span) / s + 1;
}

template <int64_t C, int64_t H, int64_t W, int64_t O, int64_t CG, int64_t KH, int64_t KW, int64_t S,
          int64_t P, int64_t D, int64_t G>
// `one_d`: conv1d's check (W == KW == 1 stand for the missing dim; messages say L and K only).
constexpr fixed_detail::Checked<2> conv2d_check(const char* op, bool one_d = false) {
    fixed_detail::Checked<2> r;
    if (S < 1 || D < 1 || P < 0 || G < 1)
        return r.fail(op, ": stride ", S, ", dilation ", D, " and groups ", G,
                      " must be positive and padding ", P, " not negative");
    if (C != CG * G) return r.fail(op, ": input has ", C, " channels, weight expects ", CG * G);
    if (O % G != 0) return r.fail(op, ": ", O, " output channels do not split into ", G, " groups");
    const int64_t oh = window_out(H, KH, S, P, D), ow = one_d ? 1 : window_out(W, KW, S, P, D);
    if (oh < 0 && one_d)
        return r.fail(op, ": kernel ", KH, " (dilation ", D, ") is larger than the padded input ",
                      H + 2 * P);
    if (oh < 0 || ow < 0)
        return r.fail(op, ": kernel ", KH, "x", KW, " (dilation ", D,
                      ") is larger than the padded input ", H + 2 * P, "x", W + 2 * P);
    r.push(oh);
    r.push(ow);
    return r;
}

template <int64_t H, int64_t W, int64_t K, int64_t S, int64_t P>
constexpr fixed_detail::Checked<2> pool_check(const char* op) {
    fixed_detail::Checked<2> r;
    if (K < 1 || S < 1 || P < 0)
        return r.fail(op, ": kernel ", K, " and stride ", S, " must be positive and padding ", P,
                      " not negative");
    if (2 * P > K) return r.fail(op, ": padding ", P, " is more than half the kernel ", K);
    const int64_t oh = window_out(H, K, S, P, 1), ow = window_out(W, K, S, P, 1);
    if (oh < 0 || ow < 0)
        return r.fail(op, ": kernel ", K, "x", K, " is larger than the padded input ", H + 2 * P,
                      "x", W + 2 * P);
    r.push(oh);
    r.push(ow);
    return r;
}

// conv_transpose2d: x [N, C, H, W], w [C, O / G, KH, KW] -> [N, O, OH, OW],
// OH = (H - 1) S - 2 P + D (KH - 1) + OP + 1.
template <int64_t C, int64_t H, int64_t W, int64_t WC, int64_t OG, int64_t KH, int64_t KW,
          int64_t S, int64_t P, int64_t OP, int64_t D, int64_t G>
constexpr fixed_detail::Checked<2> conv_transpose2d_check() {
    fixed_detail::Checked<2> r;
    if (S < 1 || D < 1 || P < 0 || G < 1)
        return r.fail("conv_transpose2d: stride ", S, ", dilation ", D, " and groups ", G,
                      " must be positive and padding ", P, " not negative");
    if (WC != C) return r.fail("conv_transpose2d: input has ", C, " channels, weight expects ", WC);
    if (C % G != 0)
        return r.fail("conv_transpose2d: groups ", G, " must divide the input channels ", C);
    if (OP < 0 || (OP >= S && OP >= D))
        return r.fail("conv_transpose2d: output_padding ", OP,
                      " must be smaller than the stride or the dilation");
    const int64_t oh = (H - 1) * S - 2 * P + D * (KH - 1) + OP + 1;
    const int64_t ow = (W - 1) * S - 2 * P + D * (KW - 1) + OP + 1;
    if (oh < 1 || ow < 1)
        return r.fail("conv_transpose2d: padding ", P, " leaves no output (", oh, "x", ow, ")");
    r.push(oh);
    r.push(ow);
    return r;
}

inline ConvOptions conv_options(int64_t s, int64_t p, int64_t d, int64_t g) {
    ConvOptions o;
    o.stride = {s};
    o.padding = {p};
    o.dilation = {d};
    o.groups = g;
    return o;
}

} // namespace fixed_nn_detail

namespace fixed_nn_detail {

template <int64_t Stride, int64_t Padding, int64_t Dilation, int64_t Groups, class T, int64_t N,
          int64_t C, int64_t H, int64_t W, int64_t O, int64_t CG, int64_t KH, int64_t KW>
auto conv2d(const FixedTensor<T, N, C, H, W>& x, const FixedTensor<T, O, CG, KH, KW>& w,
            std::optional<Tensor> bias,
            std::source_location loc = std::source_location::current()) {
    const UserCall site(loc);
    constexpr auto r =
        conv2d_check<C, H, W, O, CG, KH, KW, Stride, Padding, Dilation, Groups>("conv2d");
    if constexpr (!r.ok) {
        fixed_detail::report<r.message>();
        return InvalidFixedTensor<T>{};
    } else {
        ConvOptions o = conv_options(Stride, Padding, Dilation, Groups);
        o.bias = std::move(bias);
        return FixedTensor<T, N, O, r.dims[0], r.dims[1]>::from_tensor(
            nn::conv2d(x.tensor(), w.tensor(), o));
    }
}

} // namespace fixed_nn_detail

// x [N, C, H, W], w [O, C / Groups, KH, KW] -> [N, O, OH, OW].
template <int64_t Stride = 1, int64_t Padding = 0, int64_t Dilation = 1, int64_t Groups = 1,
          class T, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t CG, int64_t KH,
          int64_t KW>
auto conv2d(const FixedTensor<T, N, C, H, W>& x, const FixedTensor<T, O, CG, KH, KW>& w,
            std::source_location loc = std::source_location::current()) {
    const UserCall site(loc);
    return fixed_nn_detail::conv2d<Stride, Padding, Dilation, Groups>(x, w, std::nullopt);
}

// The same with a bias [O].
template <int64_t Stride = 1, int64_t Padding = 0, int64_t Dilation = 1, int64_t Groups = 1,
          class T, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t CG, int64_t KH,
          int64_t KW>
auto conv2d(const FixedTensor<T, N, C, H, W>& x, const FixedTensor<T, O, CG, KH, KW>& w,
            const FixedTensor<T, O>& bias,
            std::source_location loc = std::source_location::current()) {
    const UserCall site(loc);
    return fixed_nn_detail::conv2d<Stride, Padding, Dilation, Groups>(x, w, bias.tensor());
}

// x [N, C, L], w [O, C / Groups, K] -> [N, O, OL].
template <int64_t Stride = 1, int64_t Padding = 0, int64_t Dilation = 1, int64_t Groups = 1,
          class T, int64_t N, int64_t C, int64_t L, int64_t O, int64_t CG, int64_t K>
auto conv1d(const FixedTensor<T, N, C, L>& x, const FixedTensor<T, O, CG, K>& w,
            std::source_location loc = std::source_location::current()) {
    const UserCall site(loc);
    constexpr auto r =
        fixed_nn_detail::conv2d_check<C, L, 1, O, CG, K, 1, Stride, Padding, Dilation, Groups>(
            "conv1d", true);
    if constexpr (!r.ok) {
        fixed_detail::report<r.message>();
        return InvalidFixedTensor<T>{};
    } else {
        return FixedTensor<T, N, O, r.dims[0]>::from_tensor(
            conv1d(x.tensor(), w.tensor(),
                   fixed_nn_detail::conv_options(Stride, Padding, Dilation, Groups)));
    }
}

// x [N, C, H, W], w [C, O / Groups, KH, KW] -> [N, O, OH, OW] (PyTorch's order of options).
template <int64_t Stride = 1, int64_t Padding = 0, int64_t OutputPadding = 0, int64_t Groups = 1,
          int64_t Dilation = 1, class T, int64_t N, int64_t C, int64_t H, int64_t W, int64_t WC,
          int64_t OG, int64_t KH, int64_t KW>
auto conv_transpose2d(const FixedTensor<T, N, C, H, W>& x, const FixedTensor<T, WC, OG, KH, KW>& w,
                      std::source_location loc = std::source_location::current()) {
    const UserCall site(loc);
    constexpr auto r =
        fixed_nn_detail::conv_transpose2d_check<C, H, W, WC, OG, KH, KW, Stride, Padding,
                                                OutputPadding, Dilation, Groups>();
    if constexpr (!r.ok) {
        fixed_detail::report<r.message>();
        return InvalidFixedTensor<T>{};
    } else {
        ConvOptions o = fixed_nn_detail::conv_options(Stride, Padding, Dilation, Groups);
        o.output_padding = {OutputPadding};
        return FixedTensor<T, N, OG * Groups, r.dims[0], r.dims[1]>::from_tensor(
            conv_transpose2d(x.tensor(), w.tensor(), o));
    }
}

namespace fixed_nn_detail {

template <bool Max, int64_t Kernel, int64_t Stride, int64_t Padding, class T, int64_t N, int64_t C,
          int64_t H, int64_t W>
auto pool2d(const FixedTensor<T, N, C, H, W>& x) {
    constexpr auto r = pool_check<H, W, Kernel, Stride, Padding>(Max ? "max_pool2d" : "avg_pool2d");
    if constexpr (!r.ok) {
        fixed_detail::report<r.message>();
        return InvalidFixedTensor<T>{};
    } else {
        const PoolOptions o{{Kernel}, {Stride}, {Padding}};
        return FixedTensor<T, N, C, r.dims[0], r.dims[1]>::from_tensor(
            Max ? max_pool2d(x.tensor(), o) : avg_pool2d(x.tensor(), o));
    }
}

} // namespace fixed_nn_detail

// Square windows of Kernel, sliding by Stride (the kernel unless given), padded by Padding.
template <int64_t Kernel, int64_t Stride = Kernel, int64_t Padding = 0, class T, int64_t N,
          int64_t C, int64_t H, int64_t W>
auto max_pool2d(const FixedTensor<T, N, C, H, W>& x,
                std::source_location loc = std::source_location::current()) {
    const UserCall site(loc);
    return fixed_nn_detail::pool2d<true, Kernel, Stride, Padding>(x);
}
template <int64_t Kernel, int64_t Stride = Kernel, int64_t Padding = 0, class T, int64_t N,
          int64_t C, int64_t H, int64_t W>
auto avg_pool2d(const FixedTensor<T, N, C, H, W>& x,
                std::source_location loc = std::source_location::current()) {
    const UserCall site(loc);
    return fixed_nn_detail::pool2d<false, Kernel, Stride, Padding>(x);
}

// [N, C, H, W] -> [N, C, OH, OW].
template <int64_t OH, int64_t OW, class T, int64_t N, int64_t C, int64_t H, int64_t W>
FixedTensor<T, N, C, OH, OW>
adaptive_avg_pool2d(const FixedTensor<T, N, C, H, W>& x,
                    std::source_location loc = std::source_location::current()) {
    const UserCall site(loc);
    static_assert(OH >= 1 && OW >= 1, "adaptive_avg_pool2d: the output size must be positive");
    return FixedTensor<T, N, C, OH, OW>::from_tensor(adaptive_avg_pool2d(x.tensor(), {OH, OW}));
}

} // namespace tempura::nn
