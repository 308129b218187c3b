#pragma once
// tempura::nn: the layers and losses of PyTorch's torch.nn.functional, as compositions of Tensor
// ops (so they fuse into the same kernels). Layout NCHW; weights as PyTorch lays them out.
// A convolution is a sliding-window view of the padded input (movement ops only) times the
// weights, summed: the optimizer sees a matmul-like reduce.
#include <cstdint>
#include <optional>
#include <source_location>

#include "tempura/tensor/tensor.hpp"

namespace tempura::nn {

// x @ w^T (+ b): x [..., in], w [out, in], b [out].
Tensor linear(const Tensor& x, const Tensor& w,
              std::source_location loc = std::source_location::current());
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b,
              std::source_location loc = std::source_location::current());

// One value in stride/padding/dilation/output_padding stands for every spatial dim.
struct ConvOptions {
    std::optional<Tensor> bias;
    Shape stride{1}, padding{0}, dilation{1}, output_padding{0};
    int64_t groups = 1;
};
// x [N, Cin, L] and w [Cout, Cin / groups, K] -> [N, Cout, Lout].
Tensor conv1d(const Tensor& x, const Tensor& w, const ConvOptions& = {},
              std::source_location loc = std::source_location::current());
// x [N, Cin, H, W] and w [Cout, Cin / groups, KH, KW] -> [N, Cout, OH, OW], where
// OH = (H + 2 padding - dilation (KH - 1) - 1) / stride + 1.
Tensor conv2d(const Tensor& x, const Tensor& w, const ConvOptions& = {},
              std::source_location loc = std::source_location::current());
// The gradient of conv2d with respect to its input: x [N, Cin, H, W], w [Cin, Cout / groups, KH,
// KW] -> [N, Cout, (H - 1) stride - 2 padding + dilation (KH - 1) + output_padding + 1, ...].
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const ConvOptions& = {},
                        std::source_location loc = std::source_location::current());

// kernel: one value for every spatial dim or one per dim; stride {} means the kernel.
struct PoolOptions {
    Shape kernel;
    Shape stride{};
    Shape padding{0};
};
Tensor max_pool2d(const Tensor& x, const PoolOptions& options,
                  std::source_location loc = std::source_location::current()); // padding reads -inf
Tensor
avg_pool2d(const Tensor& x, const PoolOptions& options,
           std::source_location loc = std::source_location::current()); // padding counted (as 0s)
// Averages over the windows [floor(i H / OH), ceil((i + 1) H / OH)) of each output row (and
// column), as PyTorch.
Tensor adaptive_avg_pool2d(const Tensor& x, Shape out_hw,
                           std::source_location loc = std::source_location::current());

// (x - mean) / sqrt(var + eps) over the last dims (normalized_shape), then * w + b.
Tensor layer_norm(const Tensor& x, Shape normalized_shape, std::optional<Tensor> w = {},
                  std::optional<Tensor> b = {}, double eps = 1e-5,
                  std::source_location loc = std::source_location::current());
// Inference form: per channel (dim 1) with the given running mean and variance.
Tensor batch_norm(const Tensor& x, const Tensor& mean, const Tensor& var,
                  std::optional<Tensor> w = {}, std::optional<Tensor> b = {}, double eps = 1e-5,
                  std::source_location loc = std::source_location::current());
// Normalizes each of `groups` channel groups over its channels and spatial dims; w, b per channel.
Tensor group_norm(const Tensor& x, int64_t groups, std::optional<Tensor> w = {},
                  std::optional<Tensor> b = {}, double eps = 1e-5,
                  std::source_location loc = std::source_location::current());
// x / sqrt(mean(x^2) + eps) over the last dim, then * w.
Tensor rms_norm(const Tensor& x, std::optional<Tensor> w = {}, double eps = 1e-6,
                std::source_location loc = std::source_location::current());

// softmax(q k^T / sqrt(E)) v over [..., L, E] x [..., S, E] x [..., S, Ev]; with causal, query i
// sees keys 0..i only. attn_mask (broadcast to [..., L, S]), as PyTorch's: a bool mask says
// which keys a query may attend (true = attend), a float one is added to the scores (-inf
// masks). A query that may attend no key gets NaN, as in PyTorch.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool causal = false, std::optional<Tensor> attn_mask = {},
                                    std::source_location loc = std::source_location::current());

// Rows of table [V, D] at the indices (Int32 or Int64, any shape): index.shape + [D].
Tensor embedding(const Tensor& index, const Tensor& table,
                 std::source_location loc = std::source_location::current());

// Training: zeroes each element with probability p (drawn by Tensor::rand) and scales the rest by
// 1 / (1 - p); with training false, or p = 0, x itself. p must lie in [0, 1].
Tensor dropout(const Tensor& x, double p, bool training = true,
               std::source_location loc = std::source_location::current());

// Losses, averaged over the batch. cross_entropy: logits [N, C], target [N] of class indices
// (Int32 or Int64); a realized target is checked to lie in [0, C).
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     std::source_location loc = std::source_location::current());
Tensor mse_loss(const Tensor& a, const Tensor& b,
                std::source_location loc = std::source_location::current());
Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& y,
                                        std::source_location loc = std::source_location::current());

} // namespace tempura::nn
