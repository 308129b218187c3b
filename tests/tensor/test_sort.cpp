// sort, argsort and topk against std::stable_sort on random rows (duplicates, NaN, -0), along
// every axis, ascending and descending, on floats, integers and bools; the kernel count of the
// bitonic network; the reference interpreter; gradients; the error messages.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

#include "../error_at.hpp"
#include "../support.hpp"

namespace {

using tempura::DType;
using tempura::Shape;
using tempura::Tensor;

// The order the ops promise: NaN last ascending (first descending), ties by index.
std::vector<int32_t> expected_order(const std::vector<float>& v, bool desc) {
    std::vector<int32_t> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
        const float x = v[static_cast<size_t>(a)], y = v[static_cast<size_t>(b)];
        if (std::isnan(x) || std::isnan(y))
            return desc ? std::isnan(x) && !std::isnan(y) : !std::isnan(x) && std::isnan(y);
        return desc ? x > y : x < y;
    });
    return idx;
}

std::vector<float> random_row(std::mt19937& rng, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) {
        const int k = static_cast<int>(rng() % 12);
        x = k == 0 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(k % 7) - 3;
    }
    return v;
}

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
    return true;
}

} // namespace

TEST_CASE("sort and argsort follow a stable sort with NaN last, for every length") {
    std::mt19937 rng(5);
    for (int64_t n : {1, 2, 3, 7, 8, 13, 64, 100, 333}) {
        for (bool desc : {false, true}) {
            CAPTURE(n);
            CAPTURE(desc);
            const std::vector<float> v = random_row(rng, n);
            const Tensor x = Tensor::from_vector(v, {n});
            const std::vector<int32_t> want = expected_order(v, desc);
            std::vector<float> want_v;
            for (int32_t i : want) want_v.push_back(v[static_cast<size_t>(i)]);
            CHECK(x.argsort(0, desc).to_vector<int32_t>() == want);
            CHECK(same_floats(x.sort(-1, desc).to_vector<float>(), want_v));
        }
    }
}

TEST_CASE("sort along any axis of a batch; integers and bools; -0 keeps its sign") {
    const Tensor y = Tensor::from_vector(std::vector<int32_t>{5, 3, 9, 1, 7, 2}, {2, 3});
    CHECK(y.sort(0).to_vector<int32_t>() == std::vector<int32_t>{1, 3, 2, 5, 7, 9});
    CHECK(y.argsort(1, true).to_vector<int32_t>() == std::vector<int32_t>{2, 0, 1, 1, 2, 0});
    const Tensor b = Tensor::from_vector(std::vector<bool>{true, false, true, false}, {4});
    CHECK(b.sort().to_vector<bool>() == std::vector<bool>{false, false, true, true});
    const std::vector<float> z =
        Tensor::from_vector(std::vector<float>{0.0f, -0.0f}, {2}).sort().to_vector<float>();
    CHECK(!std::signbit(z[0])); // equal keys keep their order: +0 first, then -0
    CHECK(std::signbit(z[1]));
    std::mt19937 rng(9);
    const std::vector<float> v = random_row(rng, 3 * 20 * 4);
    const Tensor t = Tensor::from_vector(v, {3, 20, 4});
    Tensor s = t.sort(1);
    const std::vector<float> got = s.to_vector<float>();
    for (int64_t i = 0; i < 3; ++i)
        for (int64_t k = 0; k < 4; ++k) {
            std::vector<float> col;
            for (int64_t j = 0; j < 20; ++j)
                col.push_back(v[static_cast<size_t>((i * 20 + j) * 4 + k)]);
            std::vector<float> want;
            for (int32_t o : expected_order(col, false))
                want.push_back(col[static_cast<size_t>(o)]);
            std::vector<float> have;
            for (int64_t j = 0; j < 20; ++j)
                have.push_back(got[static_cast<size_t>((i * 20 + j) * 4 + k)]);
            CHECK(same_floats(have, want));
        }
    // 20 rounds up to 32: 5 * 6 / 2 = 15 stages, a kernel each for the keys and the indices.
    CHECK(s.kernels().size() == 30);
    const std::vector<double> ref = tempura::reference_eval(t.argsort(1).uop());
    const std::vector<int32_t> ids = t.argsort(1).to_vector<int32_t>();
    for (size_t i = 0; i < ids.size(); ++i) CHECK(static_cast<double>(ids[i]) == ref[i]);
}

TEST_CASE("topk gives the k largest, largest first, with their indices") {
    const Tensor x = Tensor::from_vector(std::vector<float>{3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, {2, 5});
    auto [v, i] = x.topk(2);
    CHECK(v.shape() == Shape{2, 2});
    CHECK(v.to_vector<float>() == std::vector<float>{5, 4, 9, 6});
    CHECK(i.to_vector<int32_t>() == std::vector<int32_t>{4, 2, 0, 2});
    auto [c, ci] = x.topk(1, 0);
    CHECK(c.to_vector<float>() == std::vector<float>{9, 2, 6, 5, 5});
    CHECK(ci.to_vector<int32_t>() == std::vector<int32_t>{1, 1, 1, 1, 0});
    CHECK(x.topk(0).first.shape() == Shape{2, 0});
}

TEST_CASE("sort's gradient goes back to where each value came from") {
    Tensor w = Tensor::from_vector(std::vector<double>{3, 1, 2}, {3});
    w.requires_grad();
    const Tensor weights = Tensor::from_vector(std::vector<double>{10, 20, 30}, {3});
    (w.sort() * weights).sum().backward();
    // sorted: w1 (x10), w2 (x20), w0 (x30)
    CHECK(w.grad().to_vector<double>() == std::vector<double>{30, 10, 20});
}

TEST_CASE("sort errors name the op and the values") {
    const Tensor x = Tensor::zeros({2, 3});
    CHECK_THROWS_WITH(x.sort(2),
                      at_line(__LINE__ - 1, "[sort] axis 2 is out of range for 2 dims").c_str());
    CHECK_THROWS_WITH(
        x.argsort(-3),
        at_line(__LINE__ - 2, "[argsort] axis -3 is out of range for 2 dims").c_str());
    CHECK_THROWS_WITH(
        x.topk(4),
        at_line(__LINE__ - 2, "[topk] k 4 is out of range for an axis of 3 elements").c_str());
    CHECK_THROWS_WITH(Tensor::full(Shape{}, 1.0f).sort(),
                      at_line(__LINE__ - 1, "[sort] needs a tensor with at least one dim").c_str());
}
