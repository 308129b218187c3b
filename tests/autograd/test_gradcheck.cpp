// Every gradient rule against central finite differences in float64: for each op, random inputs
// of random shapes (broadcast where the op broadcasts), loss = sum(f(inputs) * r) with random r,
// the gradient from backward() against (L(x + h) - L(x - h)) / 2h element by element.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <tempura/tempura.hpp>

#include "../support.hpp"

namespace {

using tempura::DType;
using tempura::Shape;
using tempura::Slice;
using tempura::Tensor;
namespace nn = tempura::nn;

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Input {
    Shape shape;
    double lo = -2, hi = 2;
};

std::vector<double> random_values(std::mt19937& rng, int64_t n, double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) x = d(rng);
    return v;
}

int64_t count(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

// Checks d/d(input) of sum(f(inputs) * r) for every input, element by element.
void gradcheck(const std::string& name, const Fn& f, const std::vector<Input>& inputs,
               uint32_t seed = 1, double tol = 1e-5) {
    CAPTURE(name);
    std::mt19937 rng(seed);
    std::vector<std::vector<double>> data;
    for (const Input& in : inputs)
        data.push_back(random_values(rng, count(in.shape), in.lo, in.hi));
    const auto make = [&](const std::vector<std::vector<double>>& d) {
        std::vector<Tensor> ts;
        for (size_t i = 0; i < inputs.size(); ++i)
            ts.push_back(Tensor::from_vector(d[i], inputs[i].shape));
        return ts;
    };
    std::vector<Tensor> params = make(data);
    for (Tensor& p : params) p.requires_grad();
    const Tensor out = f(params);
    const std::vector<double> r = random_values(rng, out.numel(), -1, 1);
    const Tensor weights = Tensor::from_vector(r, out.shape());
    const auto loss_of = [&](const Tensor& o) { return (o * weights).sum(); };
    loss_of(out).backward();
    const double h = 1e-6;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const std::vector<double> analytic = params[i].grad().to_vector<double>();
        REQUIRE(analytic.size() == data[i].size());
        int bad = 0;
        for (size_t j = 0; j < data[i].size(); ++j) {
            auto plus = data, minus = data;
            plus[i][j] += h;
            minus[i][j] -= h;
            const double lp = loss_of(f(make(plus))).item<double>();
            const double lm = loss_of(f(make(minus))).item<double>();
            const double numeric = (lp - lm) / (2 * h);
            if (!(std::fabs(analytic[j] - numeric) <= tol * std::max(1.0, std::fabs(numeric)))) {
                if (bad++ < 4)
                    MESSAGE(name, ": input ", i, " element ", j, ": backward ", analytic[j],
                            ", finite differences ", numeric);
            }
        }
        CHECK(bad == 0);
    }
}

// A random shape of `rank` dims of 1..4 elements.
Shape random_shape(std::mt19937& rng, int rank) {
    Shape s;
    for (int i = 0; i < rank; ++i) s.push_back(std::uniform_int_distribution<int64_t>(1, 4)(rng));
    return s;
}

// `s` with some dims set to 1 and some leading dims dropped: it broadcasts to s.
Shape broadcastable(std::mt19937& rng, const Shape& s) {
    Shape b = s;
    for (int64_t& d : b)
        if (rng() % 3 == 0) d = 1;
    const size_t drop = rng() % (b.size() + 1);
    return Shape(b.begin() + static_cast<std::ptrdiff_t>(drop), b.end());
}

const Fn unary(Tensor (Tensor::*m)(std::source_location) const) {
    return [m](const std::vector<Tensor>& x) { return (x[0].*m)(std::source_location::current()); };
}

// An op to check: its name, the function, and the range its inputs are drawn from.
struct OpCase {
    const char* name;
    Fn f;
    double lo, hi;
};

} // namespace

TEST_CASE("gradcheck: elementwise unary ops, random shapes") {
    const std::vector<OpCase> ops = {
        {"neg", unary(&Tensor::neg), -2, 2},
        {"exp", unary(&Tensor::exp), -2, 2},
        {"exp2", unary(&Tensor::exp2), -2, 2},
        {"log", unary(&Tensor::log), 0.2, 3},
        {"log2", unary(&Tensor::log2), 0.2, 3},
        {"sqrt", unary(&Tensor::sqrt), 0.2, 3},
        {"rsqrt", unary(&Tensor::rsqrt), 0.2, 3},
        {"sin", unary(&Tensor::sin), -3, 3},
        {"cos", unary(&Tensor::cos), -3, 3},
        {"tan", unary(&Tensor::tan), -1.2, 1.2},
        {"erf", unary(&Tensor::erf), -2, 2},
        {"reciprocal", unary(&Tensor::reciprocal), 0.3, 3},
        {"square", unary(&Tensor::square), -2, 2},
        {"abs", unary(&Tensor::abs), 0.1, 2},
        {"relu", unary(&Tensor::relu), -2, 2},
        {"sigmoid", unary(&Tensor::sigmoid), -4, 4},
        {"tanh", unary(&Tensor::tanh), -3, 3},
        {"gelu", [](const std::vector<Tensor>& x) { return x[0].gelu(); }, -3, 3},
        {"gelu tanh", [](const std::vector<Tensor>& x) { return x[0].gelu("tanh"); }, -3, 3},
        {"relu6", unary(&Tensor::relu6), -2, 8},
        {"hardsigmoid", unary(&Tensor::hardsigmoid), -5, 5},
        {"hardswish", unary(&Tensor::hardswish), -5, 5},
        {"silu", unary(&Tensor::silu), -3, 3},
        {"softplus", unary(&Tensor::softplus), -3, 3},
        {"mish", unary(&Tensor::mish), -3, 3},
        {"sinh", unary(&Tensor::sinh), -2, 2},
        {"cosh", unary(&Tensor::cosh), -2, 2},
        {"atan", unary(&Tensor::atan), -3, 3},
        {"floor", unary(&Tensor::floor), -3, 3},
        {"leaky_relu", [](const std::vector<Tensor>& x) { return x[0].leaky_relu(0.1); }, -2, 2},
        {"elu", [](const std::vector<Tensor>& x) { return x[0].elu(0.7); }, -2, 2},
        {"clip", [](const std::vector<Tensor>& x) { return x[0].clip(-0.5, 0.7); }, -2, 2},
        {"pow 2.5", [](const std::vector<Tensor>& x) { return x[0].pow(2.5); }, 0.2, 2},
        {"pow 3", [](const std::vector<Tensor>& x) { return x[0].pow(3.0); }, -2, 2},
    };
    std::mt19937 rng(7);
    for (const OpCase& u : ops) {
        const Shape s = random_shape(rng, static_cast<int>(rng() % 3) + 1);
        // relu, abs, clip, leaky_relu: kinks away from the sampled points (a value within h
        // of a kink would make the finite difference meaningless)
        gradcheck(u.name, u.f, {{s, u.lo, u.hi}}, static_cast<uint32_t>(rng()));
    }
}

TEST_CASE("gradcheck: binary ops with broadcasting") {
    const std::vector<OpCase> ops = {
        {"add", [](const std::vector<Tensor>& x) { return x[0] + x[1]; }, -2, 2},
        {"sub", [](const std::vector<Tensor>& x) { return x[0] - x[1]; }, -2, 2},
        {"mul", [](const std::vector<Tensor>& x) { return x[0] * x[1]; }, -2, 2},
        {"div", [](const std::vector<Tensor>& x) { return x[0] / x[1]; }, 0.5, 2},
        {"maximum", [](const std::vector<Tensor>& x) { return x[0].maximum(x[1]); }, -2, 2},
        {"minimum", [](const std::vector<Tensor>& x) { return x[0].minimum(x[1]); }, -2, 2},
        {"pow", [](const std::vector<Tensor>& x) { return x[0].pow(x[1]); }, 0.3, 2},
        {"mod", [](const std::vector<Tensor>& x) { return x[0] % (x[1] + 3.0); }, -2, 2},
        {"where",
         [](const std::vector<Tensor>& x) {
             return tempura::where(x[0] > x[1], x[0] * x[1], x[1] - x[0]);
         },
         -2, 2},
    };
    std::mt19937 rng(11);
    for (const OpCase& b : ops)
        for (int trial = 0; trial < 2; ++trial) {
            const Shape s = random_shape(rng, static_cast<int>(rng() % 3) + 1);
            const Shape t = broadcastable(rng, s);
            const bool flip = rng() % 2;
            gradcheck(b.name, b.f, {{flip ? t : s, b.lo, b.hi}, {flip ? s : t, b.lo, b.hi}},
                      static_cast<uint32_t>(rng()));
        }
}

TEST_CASE("gradcheck: movement ops") {
    using V = std::vector<Tensor>;
    gradcheck("reshape", [](const V& x) { return x[0].reshape({3, 4}).exp(); }, {{{2, 6}}});
    gradcheck("permute", [](const V& x) { return x[0].permute({2, 0, 1}).sin(); }, {{{2, 3, 4}}});
    gradcheck("transpose", [](const V& x) { return x[0].transpose().square(); }, {{{3, 2}}});
    gradcheck("expand", [](const V& x) { return x[0].expand({2, 3, 4}).sin(); }, {{{3, 1}}});
    gradcheck("pad", [](const V& x) { return x[0].pad({{1, 2}, {0, 1}}).exp(); }, {{{2, 3}}});
    gradcheck("shrink", [](const V& x) { return x[0].shrink({{1, 3}, {0, 2}}).exp(); }, {{{4, 3}}});
    gradcheck("flip", [](const V& x) { return x[0].flip({0, 1}) * x[0]; }, {{{3, 2}}});
    gradcheck("slice step -2",
              [](const V& x) {
                  return x[0].slice({Slice{Slice::end, Slice::end, -2}}).exp();
              },
              {{{5, 2}}});
    gradcheck("repeat", [](const V& x) { return x[0].repeat({2, 3}).sin(); }, {{{2, 2}}});
    gradcheck("cat",
              [](const V& x) {
                  return Tensor::cat({x[0], x[1].exp()}, 1);
              },
              {{{2, 3}}, {{2, 2}}});
    gradcheck("stack",
              [](const V& x) {
                  return Tensor::stack({x[0], x[1] * x[0]}, 1);
              },
              {{{2, 3}}, {{2, 3}}});
    gradcheck("tril", [](const V& x) { return x[0].tril().exp(); }, {{{3, 4}}});
    gradcheck("contiguous", [](const V& x) { return x[0].exp().contiguous() * x[0]; }, {{{2, 3}}});
    gradcheck("split", [](const V& x) { return x[0].split(2, 1)[1] * 3.0; }, {{{2, 5}}});
}

TEST_CASE("gradcheck: reductions") {
    using V = std::vector<Tensor>;
    gradcheck("sum", [](const V& x) { return x[0].sum(1); }, {{{3, 4, 2}}});
    gradcheck("sum all", [](const V& x) { return x[0].sum().reshape({1}) * x[0]; }, {{{2, 3}}});
    gradcheck("mean", [](const V& x) { return x[0].mean({0, 2}, true); }, {{{3, 4, 2}}});
    gradcheck("max", [](const V& x) { return x[0].max(0); }, {{{4, 3}}});
    gradcheck("min", [](const V& x) { return x[0].min({1}); }, {{{3, 5}}});
    gradcheck("prod", [](const V& x) { return x[0].prod(1); }, {{{3, 4}, 0.5, 2}});
    gradcheck("var", [](const V& x) { return x[0].var(1); }, {{{3, 4}}});
    gradcheck("std", [](const V& x) { return x[0].std(0, true, 0); }, {{{4, 3}}});
    gradcheck("logsumexp", [](const V& x) { return x[0].logsumexp(1); }, {{{3, 4}}});
    gradcheck("softmax", [](const V& x) { return x[0].softmax(-1); }, {{{3, 4}}});
    gradcheck("log_softmax", [](const V& x) { return x[0].log_softmax(0); }, {{{3, 4}}});
    gradcheck("matmul", [](const V& x) { return x[0].matmul(x[1]); }, {{{3, 4}}, {{4, 2}}});
    gradcheck("matmul batched broadcast", [](const V& x) { return x[0].matmul(x[1]); },
              {{{2, 3, 4}}, {{4, 2}}});
    gradcheck("dot vector", [](const V& x) { return x[0].dot(x[1]); }, {{{4}}, {{4, 3}}});
}

TEST_CASE("gradcheck: prod with zeros (no division by zero)") {
    // One zero in a row: the gradient at the zero is the product of the others, 0 elsewhere;
    // two zeros: all 0. Checked against the values directly (finite differences agree too).
    Tensor x = Tensor::from_vector(std::vector<double>{2, 0, 3, 0, 5, 0, 1, 2, 4}, {3, 3});
    x.requires_grad();
    x.prod(1).sum().backward();
    CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 6, 0, 0, 0, 0, 8, 4, 2});
}

TEST_CASE("gradcheck: max splits ties equally") {
    Tensor x = Tensor::from_vector(std::vector<double>{1, 3, 3, 2, 2, 2}, {2, 3});
    x.requires_grad();
    x.max(1).sum().backward();
    const std::vector<double> g = x.grad().to_vector<double>();
    CHECK(g[0] == 0);
    CHECK(g[1] == 0.5);
    CHECK(g[2] == 0.5);
    CHECK(std::fabs(g[3] - 1.0 / 3) < 1e-15);
}

TEST_CASE("gradcheck: nn layers and losses") {
    using V = std::vector<Tensor>;
    gradcheck("linear", [](const V& x) { return nn::linear(x[0], x[1], x[2]); },
              {{{2, 3}}, {{4, 3}}, {{4}}});
    gradcheck("conv2d stride padding",
              [](const V& x) {
                  nn::ConvOptions o;
                  o.bias = x[2];
                  o.stride = {2};
                  o.padding = {1};
                  return nn::conv2d(x[0], x[1], o);
              },
              {{{1, 2, 5, 5}}, {{3, 2, 3, 3}}, {{3}}});
    gradcheck("conv2d dilation groups",
              [](const V& x) {
                  nn::ConvOptions o;
                  o.dilation = {2};
                  o.groups = 2;
                  return nn::conv2d(x[0], x[1], o);
              },
              {{{1, 4, 5, 5}}, {{2, 2, 2, 2}}});
    gradcheck("conv1d", [](const V& x) { return nn::conv1d(x[0], x[1]); },
              {{{2, 2, 6}}, {{3, 2, 3}}});
    // Strides per dim over the input's phases (a phase no tap reads: stride 3 past a 2-tap
    // kernel), padding wider than the kernel's reach, and a row of 17 (no vector width
    // divides it: the input's gradient is computed over zero columns more).
    gradcheck("conv2d strides 3 x 2 groups",
              [](const V& x) {
                  nn::ConvOptions o;
                  o.stride = {3, 2};
                  o.padding = {2, 1};
                  o.groups = 2;
                  return nn::conv2d(x[0], x[1], o);
              },
              {{{2, 4, 7, 6}}, {{4, 2, 2, 3}}});
    gradcheck("conv2d 1x1 padding 1",
              [](const V& x) {
                  nn::ConvOptions o;
                  o.padding = {1};
                  return nn::conv2d(x[0], x[1], o);
              },
              {{{1, 2, 3, 4}}, {{3, 2, 1, 1}}});
    gradcheck("conv2d row of 17",
              [](const V& x) {
                  nn::ConvOptions o;
                  o.padding = {1};
                  return nn::conv2d(x[0], x[1], o);
              },
              {{{1, 2, 2, 17}}, {{2, 2, 3, 3}}});
    gradcheck("max_pool2d 3 stride 2 padding 1",
              [](const V& x) {
                  return nn::max_pool2d(x[0], {.kernel = {3}, .stride = {2}, .padding = {1}});
              },
              {{{1, 2, 6, 5}}});
    gradcheck("avg_pool2d 3 stride 1",
              [](const V& x) { return nn::avg_pool2d(x[0], {.kernel = {3}, .stride = {1}}); },
              {{{2, 1, 5, 4}}});
    gradcheck("conv_transpose2d",
              [](const V& x) {
                  nn::ConvOptions o;
                  o.stride = {2};
                  return nn::conv_transpose2d(x[0], x[1], o);
              },
              {{{1, 2, 3, 3}}, {{2, 3, 2, 2}}});
    gradcheck("max_pool2d", [](const V& x) { return nn::max_pool2d(x[0], {.kernel = {2}}); },
              {{{1, 2, 4, 4}}});
    gradcheck("avg_pool2d",
              [](const V& x) {
                  return nn::avg_pool2d(x[0], {.kernel = {3}, .stride = {2}, .padding = {1}});
              },
              {{{1, 1, 5, 5}}});
    gradcheck("adaptive_avg_pool2d",
              [](const V& x) {
                  return nn::adaptive_avg_pool2d(x[0], {2, 3});
              },
              {{{1, 2, 4, 6}}});
    gradcheck("layer_norm", [](const V& x) { return nn::layer_norm(x[0], {4}, x[1], x[2]); },
              {{{3, 4}}, {{4}}, {{4}}});
    gradcheck("batch_norm", [](const V& x) { return nn::batch_norm(x[0], x[1], x[2], x[3]); },
              {{{2, 3, 2}}, {{3}}, {{3}, 0.5, 2}, {{3}}});
    gradcheck("group_norm", [](const V& x) { return nn::group_norm(x[0], 2, x[1], x[2]); },
              {{{2, 4, 3}}, {{4}}, {{4}}});
    gradcheck("rms_norm", [](const V& x) { return nn::rms_norm(x[0], x[1]); }, {{{3, 4}}, {{4}}});
    gradcheck("scaled_dot_product_attention causal",
              [](const V& x) { return nn::scaled_dot_product_attention(x[0], x[1], x[2], true); },
              {{{2, 3, 4}}, {{2, 3, 4}}, {{2, 3, 4}}});
    const Tensor target = Tensor::from_vector(std::vector<int32_t>{2, 0, 1});
    gradcheck("cross_entropy", [&](const V& x) { return nn::cross_entropy(x[0], target); },
              {{{3, 4}}});
    gradcheck("mse_loss", [](const V& x) { return nn::mse_loss(x[0], x[1]); },
              {{{3, 4}}, {{3, 4}}});
    gradcheck("binary_cross_entropy_with_logits",
              [](const V& x) { return nn::binary_cross_entropy_with_logits(x[0], x[1].sigmoid()); },
              {{{3, 4}}, {{3, 4}}});
}

TEST_CASE("gradcheck: a cast between float dtypes passes the gradient, converted") {
    // (finite differences through a float32 rounding would measure the rounding, not the rule)
    Tensor x = Tensor::from_vector(std::vector<double>{0.5, -1.25, 3}, {3});
    x.requires_grad();
    const Tensor r = Tensor::from_vector(std::vector<float>{2, -3, 0.25f}, {3});
    (x.cast(DType::Float32) * r).sum().backward();
    CHECK(x.grad().dtype() == DType::Float64);
    CHECK(x.grad().to_vector<double>() == std::vector<double>{2, -3, 0.25});
}

TEST_CASE("gradcheck: gather, index_select, embedding, scatter_add (repeated indices add up)") {
    using V = std::vector<Tensor>;
    const Tensor idx = Tensor::from_vector(std::vector<int32_t>{2, 0, 2, 1, 1, 1}, {2, 3});
    gradcheck("gather", [&](const V& x) { return x[0].gather(1, idx).exp(); }, {{{2, 4}}});
    const Tensor rows = Tensor::from_vector(std::vector<int64_t>{3, 0, 3, 3}, {4});
    gradcheck("index_select", [&](const V& x) { return x[0].index_select(0, rows) * x[0].sum(); },
              {{{4, 2}}});
    const Tensor tokens = Tensor::from_vector(std::vector<int32_t>{1, 4, 1, 0, 4, 4}, {2, 3});
    gradcheck("embedding", [&](const V& x) { return nn::embedding(tokens, x[0]).sin(); },
              {{{5, 3}}});
    gradcheck("scatter_add",
              [&](const V& x) { return x[0].scatter_add(1, idx, x[1].exp()) * x[0]; },
              {{{2, 3}}, {{2, 3}}});
    // A computed index out of range: gather reads 0 there, so no gradient reaches the source.
    const Tensor lazy = Tensor::from_vector(std::vector<int32_t>{0, 9, -1, 1}, {4}) * 1;
    Tensor w = Tensor::from_vector(std::vector<double>{1, 2}, {2});
    w.requires_grad();
    w.gather(0, lazy).sum().backward();
    CHECK(w.grad().to_vector<double>() == std::vector<double>{1, 1});
}

TEST_CASE("gradcheck: scans, short and blocked") {
    using V = std::vector<Tensor>;
    gradcheck("cumsum", [](const V& x) { return x[0].cumsum(1); }, {{{2, 5}}});
    gradcheck("cumsum blocked", [](const V& x) { return x[0].cumsum(0).sin(); }, {{{40}}});
    gradcheck("cumprod", [](const V& x) { return x[0].cumprod(0); }, {{{6, 2}, 0.5, 1.5}});
    gradcheck("cummax", [](const V& x) { return x[0].cummax(-1); }, {{{3, 20}}});
}

TEST_CASE("gradcheck: sort and topk (a permutation: the gradient goes back where it came from)") {
    using V = std::vector<Tensor>;
    gradcheck("sort", [](const V& x) { return x[0].sort(1).exp(); }, {{{2, 6}}});
    gradcheck("sort descending", [](const V& x) { return x[0].sort(0, true) * x[0]; }, {{{5, 2}}});
    gradcheck("topk", [](const V& x) { return x[0].topk(3).first.sin(); }, {{{2, 7}}});
}
