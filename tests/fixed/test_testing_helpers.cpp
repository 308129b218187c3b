// tempura/testing.hpp: CHECK_TENSOR_EQ / CHECK_TENSOR_CLOSE and the comparisons behind them.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <tempura/tempura.hpp>
#include <tempura/testing.hpp>

namespace {

using tempura::FixedTensor;
using tempura::Tensor;
using tempura::testing::compare_close;
using tempura::testing::compare_equal;

Tensor f32(std::vector<float> v, tempura::Shape s) { return Tensor::from_vector(v, s); }

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("testing: equal tensors pass, in any mix of Tensor and FixedTensor") {
    const Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
    const auto fa = FixedTensor<float, 2, 3>::from_vector({1, 2, 3, 4, 5, 6});
    CHECK_TENSOR_EQ(a, a);
    CHECK_TENSOR_EQ(fa, a);
    CHECK_TENSOR_EQ(a, fa);
    CHECK_TENSOR_EQ(fa * 1.0f, fa);
    CHECK_TENSOR_EQ(a + 0.0f, a); // lazy: realized by the check
    CHECK_TENSOR_CLOSE(a + 1e-7f, a, 1e-6, 0.0);
    CHECK_TENSOR_CLOSE(fa, a.cast(tempura::DType::Float64), 0.0, 0.0); // dtypes may differ
    const float nan = std::numeric_limits<float>::quiet_NaN();
    CHECK_TENSOR_EQ(f32({nan, 1}, {2}), f32({nan, 1}, {2}));
    CHECK(compare_equal(Tensor::from_vector(std::vector<int64_t>{int64_t{1} << 60}),
                        Tensor::from_vector(std::vector<int64_t>{(int64_t{1} << 60) + 1}))
              .ok == false); // integers compare exactly, beyond 2^53
}

TEST_CASE("testing: a failure prints both tensors and the first difference") {
    const Tensor a = f32({0, 1, 2, 3, 4, 6}, {2, 3});
    const Tensor b = f32({0, 1, 2, 3, 4, 7}, {2, 3});
    const auto r = compare_equal(a, b, "y", "want");
    CHECK_FALSE(r.ok);
    CHECK(r.message == "1 of 6 elements differ; the first at [1, 2] (flat 5): 6 vs 7; "
                       "max |a - b| = 1\n"
                       "  y = float32 [2, 3] {0, 1, 2, 3, 4, 6}\n"
                       "  want = float32 [2, 3] {0, 1, 2, 3, 4, 7}");

    const auto shapes = compare_equal(a, a.reshape({3, 2}));
    CHECK_FALSE(shapes.ok);
    CHECK(contains(shapes.message, "the shapes differ: [2, 3] and [3, 2]"));

    const auto dtypes = compare_equal(a, a.cast(tempura::DType::Int32));
    CHECK_FALSE(dtypes.ok);
    CHECK(contains(dtypes.message, "the dtypes differ: float32 and int32"));
    CHECK(contains(dtypes.message, "b = int32 [2, 3] {0, 1, 2, 3, 4, 6}"));

    const auto close = compare_close(a, b, 0.15, 0.0);
    CHECK(close.ok); // |6 - 7| <= 0.15 * 7
    const auto far = compare_close(a, b, 0.01, 0.1);
    CHECK_FALSE(far.ok);
    CHECK(contains(far.message, "1 of 6 elements differ"));

    const auto flags = compare_equal(Tensor::from_vector(std::vector<bool>{true, false}),
                                     Tensor::from_vector(std::vector<bool>{true, true}));
    CHECK(contains(flags.message, "the first at [1] (flat 1): false vs true"));
    CHECK(contains(flags.message, "a = bool [2] {true, false}"));
}

TEST_CASE("testing: long tensors are truncated") {
    std::vector<float> v(100);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    std::vector<float> w = v;
    w[50] = -1;
    const auto r = compare_equal(f32(v, {10, 10}), f32(w, {10, 10}));
    CHECK_FALSE(r.ok);
    CHECK(contains(r.message, "the first at [5, 0] (flat 50): 50 vs -1"));
    CHECK(contains(r.message,
                   "a = float32 [10, 10] {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, ..., 96, 97, 98, "
                   "99} (100 values)"));
}
