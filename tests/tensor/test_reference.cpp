// The reference interpreter on the graphs Tensor builds: every op on small inputs, with exact
// expected values (floats compared with a tolerance where the op is transcendental).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

#include "../error_at.hpp"
#include "../support.hpp"

namespace {

using tempura::DType;
using tempura::Shape;
using tempura::Tensor;
using V = std::vector<double>;

V ref(const Tensor& t) {
    auto a = tempura::reference_eval_array(t.uop());
    CHECK(a.shape == t.shape());
    CHECK(a.dtype == t.dtype());
    return a.as_doubles();
}

bool close(const V& got, const V& want, double tol = 1e-6) {
    if (got.size() != want.size()) return false;
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(want[i])) {
            if (!std::isnan(got[i])) return false;
            continue;
        }
        if (std::isinf(want[i])) {
            if (got[i] != want[i]) return false;
            continue;
        }
        if (std::fabs(got[i] - want[i]) > tol * std::max(1.0, std::fabs(want[i]))) return false;
    }
    return true;
}

Tensor f(std::vector<float> v, Shape s) { return Tensor::from_vector(v, s); }
Tensor i32(std::vector<int32_t> v, Shape s) { return Tensor::from_vector(v, s); }

} // namespace

TEST_CASE("reference: leaves") {
    CHECK(ref(f({1, 2, 3, 4, 5, 6}, {2, 3})) == V{1, 2, 3, 4, 5, 6});
    CHECK(ref(Tensor::full({2, 2}, 1.5f)) == V{1.5, 1.5, 1.5, 1.5});
    CHECK(ref(Tensor::zeros({3}, DType::Int32)) == V{0, 0, 0});
    CHECK(ref(Tensor::ones({2}, DType::Bool)) == V{1, 1});
    CHECK(ref(Tensor::arange(4)) == V{0, 1, 2, 3});
    CHECK(ref(Tensor::eye(3)) == V{1, 0, 0, 0, 1, 0, 0, 0, 1});
    CHECK(ref(Tensor::full({}, 7)) == V{7});
    CHECK(ref(Tensor::full({0, 2}, 7)).empty());
    CHECK(ref(Tensor::from_vector<double>({0.1, 0.2})) == V{0.1, 0.2});
    CHECK(ref(Tensor::from_vector<float>({0.1f})) == V{static_cast<double>(0.1f)});
    CHECK(ref(Tensor::from_vector<float>({1.0f, 65504.0f, 1e-8f}, {3}, DType::Float16)) ==
          V{1.0, 65504.0, 0.0});
    CHECK(ref(Tensor::from_vector<int64_t>({int64_t{1} << 40, -5})) == V{1099511627776.0, -5});
}

TEST_CASE("reference: arithmetic with broadcasting") {
    auto a = f({1, 2, 3, 4, 5, 6}, {2, 3});
    auto b = f({10, 20, 30}, {3});
    CHECK(ref(a + b) == V{11, 22, 33, 14, 25, 36});
    CHECK(ref(a - b) == V{-9, -18, -27, -6, -15, -24});
    CHECK(ref(a * b) == V{10, 40, 90, 40, 100, 180});
    CHECK(ref(b / f({4, 8, 16}, {3})) == V{2.5, 2.5, 1.875});
    CHECK(ref(a * 2.0f + 1) == V{3, 5, 7, 9, 11, 13});
    CHECK(ref(1 - a) == V{0, -1, -2, -3, -4, -5});
    CHECK(ref(12.0f / a) == V{12, 6, 4, 3, static_cast<double>(12.0f / 5.0f), 2});
    auto col = f({1, 2}, {2, 1});
    CHECK(ref(col * b) == V{10, 20, 30, 20, 40, 60});
    CHECK(ref(f({1, 2, 3}, {3}) + Tensor::full({}, 0.5f)) == V{1.5, 2.5, 3.5});
    CHECK(ref(-a) == V{-1, -2, -3, -4, -5, -6});
    CHECK(ref(a.square()) == V{1, 4, 9, 16, 25, 36});
    CHECK(ref(tempura::maximum(a, f({3}, {1}))) == V{3, 3, 3, 4, 5, 6});
    CHECK(ref(tempura::minimum(a, f({3}, {1}))) == V{1, 2, 3, 3, 3, 3});
}

TEST_CASE("reference: integer semantics") {
    auto x = i32({7, -7, 7, -7}, {4});
    auto y = i32({2, 2, -2, -2}, {4});
    CHECK(ref(x / y) == V{3, -3, -3, 3}); // truncation toward zero
    CHECK(ref(x + y) == V{9, -5, 5, -9});
    CHECK(ref(x * 3) == V{21, -21, 21, -21});
    auto big = i32({2147483647}, {1});
    CHECK(ref(big + 1) == V{-2147483648.0}); // wraps
    CHECK(ref(i32({-3, 5}, {2}).abs()) == V{3, 5});
    CHECK(ref(i32({-3, 5}, {2}).relu()) == V{0, 5});
    auto m = i32({std::numeric_limits<int32_t>::min(), 0, 5}, {3});
    CHECK(ref(m.min()) == V{-2147483648.0});
    CHECK(ref(m.max()) == V{5});
    CHECK(ref(tempura::minimum(m, i32({1}, {1}))) == V{-2147483648.0, 0, 1});
    auto u = Tensor::from_vector<uint8_t>({200, 3, 100});
    CHECK(ref(u.min()) == V{3});
    CHECK(ref(u + u) == V{144, 6, 200});
    CHECK(ref(u.sum()) == V{47}); // uint8 accumulation wraps
}

TEST_CASE("reference: comparisons and where") {
    auto a = f({1, 2, 3}, {3});
    auto b = f({3, 2, 1}, {3});
    CHECK(ref(a < b) == V{1, 0, 0});
    CHECK(ref(a <= b) == V{1, 1, 0});
    CHECK(ref(a > b) == V{0, 0, 1});
    CHECK(ref(a >= b) == V{0, 1, 1});
    CHECK(ref(a == b) == V{0, 1, 0});
    CHECK(ref(a != b) == V{1, 0, 1});
    CHECK(ref(a < 2.5f) == V{1, 1, 0});
    CHECK(ref(2 <= a) == V{0, 1, 1});
    CHECK(ref(!(a < b)) == V{0, 1, 1});
    CHECK(ref(tempura::where(a < b, a, b)) == V{1, 2, 1});
    CHECK(ref(tempura::where(a < b, a, 0.0f)) == V{1, 0, 0});
    CHECK(ref(tempura::where(f({1, 0}, {2, 1}) == 1.0f, 5.0f, f({7, 8, 9}, {3}))) ==
          V{5, 5, 5, 7, 8, 9});
}

TEST_CASE("reference: unary float ops") {
    auto x = f({-1, 0, 0.5f, 2}, {4});
    CHECK(close(ref(x.exp()), {std::exp(-1.0), 1.0, std::exp(0.5), std::exp(2.0)}));
    CHECK(close(ref(f({1, 2, 0.5f}, {3}).log()), {0.0, std::log(2.0), std::log(0.5)}));
    CHECK(close(ref(f({0, 4, 2}, {3}).sqrt()), {0.0, 2.0, std::sqrt(2.0)}));
    CHECK(close(ref(x.sin()), {std::sin(-1.0), 0.0, std::sin(0.5), std::sin(2.0)}));
    CHECK(close(ref(x.cos()), {std::cos(-1.0), 1.0, std::cos(0.5), std::cos(2.0)}));
    CHECK(ref(x.relu()) == V{0, 0, 0.5, 2});
    CHECK(close(ref(x.sigmoid()), {1 / (1 + std::exp(1.0)), 0.5, 1 / (1 + std::exp(-0.5)),
                                   1 / (1 + std::exp(-2.0))}));
    CHECK(close(ref(x.tanh()), {std::tanh(-1.0), 0.0, std::tanh(0.5), std::tanh(2.0)}, 1e-6));
    CHECK(ref(x.abs()) == V{1, 0, 0.5, 2});
    CHECK(ref(f({2, -4, 0.5f}, {3}).reciprocal()) == V{0.5, -0.25, 2});
    CHECK(ref(f({0}, {1}).log()) == V{-INFINITY});
    CHECK(ref(f({1}, {1}) / 0.0f) == V{INFINITY});
    CHECK(std::isnan(ref(f({-1}, {1}).sqrt())[0]));
}

TEST_CASE("reference: casts") {
    auto x = f({-1.7f, 0.2f, 2.9f, 300.5f}, {4});
    CHECK(ref(x.cast(DType::Int32)) == V{-1, 0, 2, 300});
    CHECK(ref(x.cast(DType::Bool)) == V{1, 1, 1, 1});
    CHECK(ref(f({0, 1}, {2}).cast(DType::Bool)) == V{0, 1});
    CHECK(ref(i32({1, -2}, {2}).cast(DType::Float32)) == V{1, -2});
    CHECK(ref(i32({300, -1}, {2}).cast(DType::UInt8)) == V{44, 255});
    CHECK(ref(Tensor::from_vector<bool>({true, false}).cast(DType::Float32)) == V{1, 0});
    CHECK(ref(f({0.1f}, {1}).cast(DType::Float64)) == V{static_cast<double>(0.1f)});
}

TEST_CASE("reference: movement ops") {
    auto t = f({0, 1, 2, 3, 4, 5}, {2, 3});
    CHECK(ref(t.reshape({3, 2})) == V{0, 1, 2, 3, 4, 5});
    CHECK(ref(t.permute({1, 0})) == V{0, 3, 1, 4, 2, 5});
    CHECK(ref(t.transpose()) == V{0, 3, 1, 4, 2, 5});
    CHECK(ref(f({1, 2}, {2, 1}).expand({2, 3})) == V{1, 1, 1, 2, 2, 2});
    CHECK(ref(f({1, 2}, {2}).expand({2, 2})) == V{1, 2, 1, 2});
    CHECK(ref(t.pad({{1, 0}, {0, 1}})) == V{0, 0, 0, 0, 0, 1, 2, 0, 3, 4, 5, 0});
    CHECK(ref(t.shrink({{1, 2}, {0, 2}})) == V{3, 4});
    CHECK(ref(t.flip({0})) == V{3, 4, 5, 0, 1, 2});
    CHECK(ref(t.flip({1})) == V{2, 1, 0, 5, 4, 3});
    CHECK(ref(t.flip({0, 1})) == V{5, 4, 3, 2, 1, 0});
    CHECK(ref(t.unsqueeze(1).squeeze(1)) == V{0, 1, 2, 3, 4, 5});
    // A chain: transpose, pad, flip, shrink.
    auto c = t.transpose().pad({{0, 0}, {1, 1}}).flip({1}).shrink({{1, 3}, {0, 3}});
    CHECK(c.shape() == Shape{2, 3});
    CHECK(ref(c) == V{0, 4, 1, 0, 5, 2});
    auto t3 = f({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2});
    CHECK(ref(t3.permute({2, 0, 1})) == V{0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11});
    CHECK(ref(t.contiguous()) == V{0, 1, 2, 3, 4, 5});
}

TEST_CASE("reference: cat") {
    auto a = f({1, 2, 3, 4}, {2, 2});
    auto b = f({5, 6}, {1, 2});
    CHECK(ref(Tensor::cat({a, b}, 0)) == V{1, 2, 3, 4, 5, 6});
    CHECK(ref(Tensor::cat({a, f({7, 8}, {2, 1})}, 1)) == V{1, 2, 7, 3, 4, 8});
    CHECK(ref(Tensor::cat({b, a, b}, -2)) == V{5, 6, 1, 2, 3, 4, 5, 6});
    CHECK(ref(Tensor::cat({a, f({}, {0, 2})}, 0)) == V{1, 2, 3, 4});
    auto m = Tensor::from_vector<bool>({true, false});
    CHECK(ref(Tensor::cat({m, m}, 0)) == V{1, 0, 1, 0});
}

TEST_CASE("reference: reductions") {
    auto t = f({1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK(ref(t.sum()) == V{21});
    CHECK(ref(t.sum(0)) == V{5, 7, 9});
    CHECK(ref(t.sum(1)) == V{6, 15});
    CHECK(ref(t.sum(-1, true)) == V{6, 15});
    CHECK(ref(t.prod(1)) == V{6, 120});
    CHECK(ref(t.max(0)) == V{4, 5, 6});
    CHECK(ref(t.min(1)) == V{1, 4});
    CHECK(ref(t.mean()) == V{3.5});
    CHECK(ref(t.mean(0)) == V{2.5, 3.5, 4.5});
    CHECK(ref(i32({1, 2, 4}, {3}).mean()) == V{static_cast<double>(7.0f / 3.0f)});
    CHECK(ref(f({-3, -1, -2}, {3}).max()) == V{-1});
    CHECK(ref(Tensor::from_vector<bool>({true, false, true}).sum()) == V{2});
    CHECK(ref(Tensor::from_vector<bool>({true, false}).max()) == V{1});
    CHECK(ref(Tensor::from_vector<bool>({true, false}).min()) == V{0});
    CHECK(ref(f({}, {0, 3}).sum(0)) == V{0, 0, 0});
    CHECK(error_of([&] { f({}, {0}).max(); }) ==
          at_line(__LINE__ - 1, "[max] cannot reduce an empty axis of [0]"));
    CHECK(std::isnan(ref(f({}, {0}).mean())[0]));
    auto t3 = f({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2});
    CHECK(ref(t3.sum({0, 2})) == V{14, 22, 30});
    CHECK(ref(t3.max({1})) == V{4, 5, 10, 11});
}

TEST_CASE("reference: argmax / argmin (first occurrence)") {
    auto t = f({1, 5, 5, 7, 0, 7}, {2, 3});
    CHECK(ref(t.argmax(1)) == V{1, 0});
    CHECK(ref(t.argmax(0)) == V{1, 0, 1});
    CHECK(ref(t.argmax(-1, true)) == V{1, 0});
    CHECK(ref(t.argmin(1)) == V{0, 1});
    CHECK(ref(i32({3, -9, 4, -9}, {4}).argmin(0)) == V{1});
    CHECK(ref(i32({3, -9, 4, 4}, {4}).argmax(0)) == V{2});
    CHECK(ref(Tensor::from_vector<bool>({false, true, true}).argmax(0)) == V{1});
}

TEST_CASE("reference: dot / matmul") {
    auto a = f({1, 2, 3, 4, 5, 6}, {2, 3});
    auto b = f({1, 0, 0, 1, 1, 1}, {3, 2});
    CHECK(ref(a.dot(b)) == V{4, 5, 10, 11});
    CHECK(ref(f({1, 2, 3}, {3}).dot(b)) == V{4, 5});
    CHECK(ref(a.dot(f({1, 1, 1}, {3}))) == V{6, 15});
    CHECK(ref(f({1, 2, 3}, {3}).dot(f({4, 5, 6}, {3}))) == V{32});
    auto ba = f({1, 2, 3, 4, 1, 0, 0, 1}, {2, 2, 2});
    auto bb = f({1, 1, 1, 1, 2, 3, 4, 5}, {2, 2, 2});
    CHECK(ref(ba.matmul(bb)) == V{3, 3, 7, 7, 2, 3, 4, 5});
    CHECK(ref(ba.matmul(f({1, 0, 0, 2}, {2, 2}))) == V{1, 4, 3, 8, 1, 0, 0, 2});
    CHECK(ref(i32({1, 2, 3, 4}, {2, 2}).matmul(i32({5, 6, 7, 8}, {2, 2}))) == V{19, 22, 43, 50});
    CHECK(ref(f({}, {2, 0}).dot(f({}, {0, 3}))) == V{0, 0, 0, 0, 0, 0});
}

TEST_CASE("reference: softmax and log_softmax") {
    auto x = f({1, 2, 3, 1, 1, 1}, {2, 3});
    const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), s = e1 + e2 + e3;
    CHECK(close(ref(x.softmax(1)), {e1 / s, e2 / s, e3 / s, 1 / 3.0, 1 / 3.0, 1 / 3.0}));
    CHECK(close(ref(x.log_softmax(1)), {1 - std::log(s), 2 - std::log(s), 3 - std::log(s),
                                        -std::log(3.0), -std::log(3.0), -std::log(3.0)}));
    CHECK(close(ref(x.softmax(0)),
                {0.5, e2 / (e2 + e1), e3 / (e3 + e1), 0.5, e1 / (e2 + e1), e1 / (e3 + e1)}));
    // Large inputs do not overflow (the max is subtracted first).
    CHECK(close(ref(f({1000, 1000}, {2}).softmax()), {0.5, 0.5}));
}

TEST_CASE("reference: float32 rounding after every op") {
    // 0.1f + 0.2f in float32 is not 0.1 + 0.2 in double.
    CHECK(ref(f({0.1f}, {1}) + f({0.2f}, {1})) == V{static_cast<double>(0.1f + 0.2f)});
    CHECK(ref(Tensor::from_vector<double>({0.1}) + Tensor::from_vector<double>({0.2})) ==
          V{0.1 + 0.2});
}

TEST_CASE("reference: errors") {
    using tempura::Op;
    using tempura::UOp;
    auto v = UOp::variable("n", 0, 3);
    try {
        tempura::reference_eval(v);
        FAIL("no error");
    } catch (const tempura::Error& e) {
        CHECK(std::string(e.what()) == "[tensor_shape] DEFINE_VAR is not a tensor-level op");
    }
    auto gone = UOp::make(Op::Buffer, DType::Float32, {}, std::vector<int64_t>{-5, 3});
    try {
        tempura::reference_eval(gone);
        FAIL("no error");
    } catch (const tempura::Error& e) {
        CHECK(std::string(e.what()) == "[buffer] no live buffer with id -5");
    }
}
