// Realizing lazy tensors through the scheduler and the CPU backend (realize_graph), compared
// with hard-coded expected values, and (for larger inputs) with the reference interpreter.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

namespace {

using tempura::DType;
using tempura::Op;
using tempura::Shape;
using tempura::Tensor;

Tensor f(std::vector<float> v, Shape s) { return Tensor::from_vector(v, s); }
Tensor i32(std::vector<int32_t> v, Shape s) { return Tensor::from_vector(v, s); }

bool close(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
    if (got.size() != want.size()) return false;
    for (size_t i = 0; i < got.size(); ++i)
        if (!(std::fabs(got[i] - want[i]) <= tol * std::max(1.0f, std::fabs(want[i]))))
            return false;
    return true;
}

// The realized values agree with the reference interpreter's.
bool matches_reference(Tensor t, float tol = 1e-5f) {
    const auto want = tempura::reference_eval(t.uop());
    std::vector<float> w(want.begin(), want.end());
    return close(t.to_vector<float>(), w, tol);
}

std::vector<float> iota(int64_t n, float scale = 1.0f, float offset = 0.0f) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * scale + offset;
    return v;
}

} // namespace

TEST_CASE("realize: elementwise") {
    auto a = f({1, 2, 3, 4}, {4});
    auto b = f({10, 20, 30, 40}, {4});
    auto c = a + b;
    CHECK_FALSE(c.is_realized());
    CHECK(c.to_vector<float>() == std::vector<float>{11, 22, 33, 44});
    CHECK(c.is_realized());
    REQUIRE_FALSE(c.kernels().empty());
    CHECK(c.kernels()[0].backend == "CPU");
    CHECK_FALSE(c.kernels()[0].source.empty());
    // After realize the graph is RESHAPE(BUFFER).
    CHECK(c.uop().op() == Op::Reshape);
    CHECK(c.uop().src(0).op() == Op::Buffer);
    CHECK(((a * b) - 1.0f).to_vector<float>() == std::vector<float>{9, 39, 89, 159});
    CHECK((b / a).to_vector<float>() == std::vector<float>{10, 10, 10, 10});
    CHECK((-a).to_vector<float>() == std::vector<float>{-1, -2, -3, -4});
    CHECK(close(a.exp().to_vector<float>(), {2.7182817f, 7.389056f, 20.085537f, 54.59815f}));
    CHECK(close(a.log().to_vector<float>(), {0.0f, 0.6931472f, 1.0986123f, 1.3862944f}));
    CHECK(close(a.sqrt().to_vector<float>(), {1.0f, 1.4142135f, 1.7320508f, 2.0f}));
    CHECK(close(a.sin().to_vector<float>(), {0.84147096f, 0.9092974f, 0.14112f, -0.7568025f}));
    CHECK(close(a.cos().to_vector<float>(), {0.5403023f, -0.41614684f, -0.9899925f, -0.6536436f}));
    auto x = f({-2, -0.5f, 0, 3}, {4});
    CHECK(x.relu().to_vector<float>() == std::vector<float>{0, 0, 0, 3});
    CHECK(x.abs().to_vector<float>() == std::vector<float>{2, 0.5f, 0, 3});
    CHECK(close(x.sigmoid().to_vector<float>(), {0.11920292f, 0.37754068f, 0.5f, 0.95257413f}));
    CHECK(close(x.tanh().to_vector<float>(), {-0.9640276f, -0.46211717f, 0.0f, 0.9950548f}));
    CHECK(a.reciprocal().to_vector<float>() == std::vector<float>{1, 0.5f, 1.0f / 3.0f, 0.25f});
    CHECK((a < 2.5f).to_vector<bool>() == std::vector<bool>{true, true, false, false});
    CHECK((a <= 2.0f).to_vector<bool>() == std::vector<bool>{true, true, false, false});
    CHECK((a > 2.0f).to_vector<bool>() == std::vector<bool>{false, false, true, true});
    CHECK((a >= 2.0f).to_vector<bool>() == std::vector<bool>{false, true, true, true});
    CHECK((a == 3.0f).to_vector<bool>() == std::vector<bool>{false, false, true, false});
    CHECK((a != 3.0f).to_vector<bool>() == std::vector<bool>{true, true, false, true});
    CHECK(tempura::where(a < 2.5f, a, b).to_vector<float>() == std::vector<float>{1, 2, 30, 40});
    CHECK(a.cast(DType::Int32).to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3, 4});
    CHECK(f({-1.5f, 2.7f}, {2}).cast(DType::Int32).to_vector<int32_t>() ==
          std::vector<int32_t>{-1, 2});
}

TEST_CASE("realize: integers") {
    auto x = i32({7, -7, 7, -7}, {4});
    auto y = i32({2, 2, -2, -2}, {4});
    CHECK((x / y).to_vector<int32_t>() == std::vector<int32_t>{3, -3, -3, 3});
    CHECK((x * y + 1).to_vector<int32_t>() == std::vector<int32_t>{15, -13, -13, 15});
    CHECK(x.abs().to_vector<int32_t>() == std::vector<int32_t>{7, 7, 7, 7});
    CHECK(tempura::minimum(x, y).to_vector<int32_t>() == std::vector<int32_t>{2, -7, -2, -7});
}

TEST_CASE("realize: broadcasting and scalars") {
    auto a = f({1, 2, 3, 4, 5, 6}, {2, 3});
    auto row = f({10, 20, 30}, {3});
    auto col = f({100, 200}, {2, 1});
    CHECK((a + row).to_vector<float>() == std::vector<float>{11, 22, 33, 14, 25, 36});
    CHECK((a + col).to_vector<float>() == std::vector<float>{101, 102, 103, 204, 205, 206});
    CHECK((row + col).to_vector<float>() == std::vector<float>{110, 120, 130, 210, 220, 230});
    CHECK((2.0f * a - 1).to_vector<float>() == std::vector<float>{1, 3, 5, 7, 9, 11});
    CHECK(Tensor::full({2, 2}, 3.5f).to_vector<float>() ==
          std::vector<float>{3.5f, 3.5f, 3.5f, 3.5f});
    CHECK(Tensor::zeros({3}).to_vector<float>() == std::vector<float>{0, 0, 0});
    CHECK(Tensor::ones({2}, DType::Int32).to_vector<int32_t>() == std::vector<int32_t>{1, 1});
    CHECK((Tensor::arange(4) * 2.0f).to_vector<float>() == std::vector<float>{0, 2, 4, 6});
    CHECK((Tensor::eye(2) + 1.0f).to_vector<float>() == std::vector<float>{2, 1, 1, 2});
    auto s = Tensor::full({}, 4.0f) * 2.0f;
    CHECK(s.item<float>() == 8.0f);
}

TEST_CASE("realize: movement chains") {
    auto t = f({0, 1, 2, 3, 4, 5}, {2, 3});
    CHECK(t.transpose().to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
    CHECK((t.transpose() + 0.0f).to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
    CHECK(t.permute({1, 0}).reshape({6}).to_vector<float>() ==
          std::vector<float>{0, 3, 1, 4, 2, 5});
    CHECK(t.pad({{1, 0}, {0, 1}}).to_vector<float>() ==
          std::vector<float>{0, 0, 0, 0, 0, 1, 2, 0, 3, 4, 5, 0});
    CHECK(t.shrink({{1, 2}, {0, 2}}).to_vector<float>() == std::vector<float>{3, 4});
    CHECK(t.flip({1}).to_vector<float>() == std::vector<float>{2, 1, 0, 5, 4, 3});
    CHECK(f({1, 2}, {2, 1}).expand({2, 3}).to_vector<float>() ==
          std::vector<float>{1, 1, 1, 2, 2, 2});
    auto c = t.transpose().pad({{0, 0}, {1, 1}}).flip({1}).shrink({{1, 3}, {0, 3}});
    CHECK((c * 1.0f).to_vector<float>() == std::vector<float>{0, 4, 1, 0, 5, 2});
    CHECK(Tensor::cat({t, f({6, 7, 8}, {1, 3})}, 0).to_vector<float>() ==
          std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8});
    CHECK(Tensor::cat({t, f({9, 9}, {2, 1})}, 1).to_vector<float>() ==
          std::vector<float>{0, 1, 2, 9, 3, 4, 5, 9});
    // Realizing an intermediate, then building on it.
    auto mid = (t + 1.0f).realize();
    CHECK(mid.is_realized());
    CHECK((mid.transpose() * 2.0f).to_vector<float>() == std::vector<float>{2, 8, 4, 10, 6, 12});
}

TEST_CASE("realize: reductions") {
    auto t = f({1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK(t.sum().item<float>() == 21.0f);
    CHECK(t.sum(0).to_vector<float>() == std::vector<float>{5, 7, 9});
    CHECK(t.sum(1).to_vector<float>() == std::vector<float>{6, 15});
    CHECK(t.sum(1, true).shape() == Shape{2, 1});
    CHECK(t.prod(1).to_vector<float>() == std::vector<float>{6, 120});
    CHECK(t.max(0).to_vector<float>() == std::vector<float>{4, 5, 6});
    CHECK(t.min(1).to_vector<float>() == std::vector<float>{1, 4});
    CHECK(t.mean().item<float>() == 3.5f);
    CHECK(t.mean(0).to_vector<float>() == std::vector<float>{2.5f, 3.5f, 4.5f});
    CHECK(f({-3, -1, -2}, {3}).max().item<float>() == -1.0f);
    CHECK(i32({4, -2, 9}, {3}).sum().item<int32_t>() == 11);
    CHECK(i32({4, -2, 9}, {3}).min().item<int32_t>() == -2);
    // Reduce then broadcast back (a materialized reduce reused through EXPAND).
    CHECK((t - t.mean(1, true)).to_vector<float>() == std::vector<float>{-1, 0, 1, -1, 0, 1});
    // Larger: against the reference.
    auto big = Tensor::from_vector(iota(64 * 48, 0.01f, -10.0f), {64, 48});
    CHECK(matches_reference(big.sum(1), 1e-4f));
    CHECK(matches_reference(big.max(0)));
    CHECK(matches_reference(big.sum(), 1e-4f));
}

TEST_CASE("realize: matmul") {
    auto a = f({1, 2, 3, 4, 5, 6}, {2, 3});
    auto b = f({1, 0, 0, 1, 1, 1}, {3, 2});
    CHECK(a.matmul(b).to_vector<float>() == std::vector<float>{4, 5, 10, 11});
    CHECK(a.dot(f({1, 1, 1}, {3})).to_vector<float>() == std::vector<float>{6, 15});
    CHECK(f({1, 2, 3}, {3}).dot(b).to_vector<float>() == std::vector<float>{4, 5});
    auto ba = f({1, 2, 3, 4, 1, 0, 0, 1}, {2, 2, 2});
    auto bb = f({1, 1, 1, 1, 2, 3, 4, 5}, {2, 2, 2});
    CHECK(ba.matmul(bb).to_vector<float>() == std::vector<float>{3, 3, 7, 7, 2, 3, 4, 5});
    CHECK(Tensor::eye(3).matmul(a.transpose()).to_vector<float>() ==
          std::vector<float>{1, 4, 2, 5, 3, 6});
    auto x = Tensor::from_vector(iota(32 * 24, 0.01f), {32, 24});
    auto w = Tensor::from_vector(iota(24 * 16, -0.02f, 1.0f), {24, 16});
    CHECK(matches_reference(x.matmul(w), 1e-4f));
}

TEST_CASE("realize: softmax and argmax") {
    auto x = f({1, 2, 3, 1, 1, 1}, {2, 3});
    CHECK(close(x.softmax(1).to_vector<float>(),
                {0.09003057f, 0.24472848f, 0.66524094f, 1 / 3.0f, 1 / 3.0f, 1 / 3.0f}));
    CHECK(close(x.log_softmax(1).to_vector<float>(),
                {-2.4076059f, -1.4076059f, -0.40760595f, -1.0986123f, -1.0986123f, -1.0986123f}));
    auto s = x.softmax(-1).sum(-1).to_vector<float>();
    CHECK(close(s, {1.0f, 1.0f}));
    auto t = f({1, 5, 5, 7, 0, 7}, {2, 3});
    CHECK(t.argmax(1).to_vector<int32_t>() == std::vector<int32_t>{1, 0});
    CHECK(t.argmax(0).to_vector<int32_t>() == std::vector<int32_t>{1, 0, 1});
    CHECK(t.argmin(1).to_vector<int32_t>() == std::vector<int32_t>{0, 1});
    CHECK(t.argmax(1).dtype() == DType::Int32);
}

TEST_CASE("realize: an MLP layer") {
    auto x = Tensor::from_vector(iota(4 * 8, 0.1f, -1.0f), {4, 8});
    auto w = Tensor::from_vector(iota(8 * 3, -0.05f, 0.5f), {8, 3});
    auto b = f({0.1f, -0.2f, 0.3f}, {3});
    auto y = (x.matmul(w) + b).relu().softmax(1);
    CHECK(matches_reference(y, 1e-4f));
    auto pred = (x.matmul(w) + b).argmax(1);
    const auto want = tempura::reference_eval(pred.uop());
    const auto got = pred.to_vector<int32_t>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == static_cast<int32_t>(want[i]));
}
