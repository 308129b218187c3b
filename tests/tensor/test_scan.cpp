// Scans: cumsum, cumprod and cummax against direct loops for lengths around the block size and
// far beyond it, along every axis, on floats, integers and bools; NaN in cummax; the kernel
// counts of the blocked form; the reference interpreter; the error messages.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

#include "../error_at.hpp"
#include "../support.hpp"

namespace {

using tempura::DType;
using tempura::Shape;
using tempura::Tensor;

std::vector<float> row(int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        v[static_cast<size_t>(i)] = static_cast<float>((i * 37) % 11) - 5;
    return v;
}

} // namespace

TEST_CASE("cumsum and cummax equal a running loop, short axes and long ones") {
    for (int64_t n : {2, 5, 16, 17, 33, 100, 256, 257, 1000, 5000}) {
        CAPTURE(n);
        const std::vector<float> v = row(n);
        const Tensor x = Tensor::from_vector(v, {n});
        const std::vector<float> s = x.cumsum(0).to_vector<float>();
        const std::vector<float> m = x.cummax(-1).to_vector<float>();
        const std::vector<float> p = (x * 0.0 + 1.001).cumprod(0).to_vector<float>();
        float acc = 0, mx = -INFINITY, pr = 1;
        int bad = 0;
        for (int64_t i = 0; i < n; ++i) {
            acc += v[static_cast<size_t>(i)]; // integers: exact in float32 either way
            mx = std::max(mx, v[static_cast<size_t>(i)]);
            pr *= 1.001f; // products in another order: within n roundings
            bad += s[static_cast<size_t>(i)] != acc || m[static_cast<size_t>(i)] != mx ||
                   std::fabs(p[static_cast<size_t>(i)] - pr) > 2e-7f * static_cast<float>(n) * pr;
        }
        CHECK(bad == 0);
    }
}

TEST_CASE("a scan is a triangle up to 16 elements, blocks and their totals beyond") {
    auto kernels = [](int64_t n) {
        Tensor c = Tensor::from_vector(row(n), {n}).cumsum(0);
        c.realize();
        return c.kernels().size();
    };
    CHECK(kernels(16) == 1);   // one reduce over [16, 16]
    CHECK(kernels(256) == 3);  // blocks; the totals' scan; the combination
    CHECK(kernels(5000) == 5); // three levels
}

TEST_CASE("scans along any axis, on integers and bools, agree with the reference") {
    const Tensor x = Tensor::from_vector(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK(x.cumsum(0).to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3, 5, 7, 9});
    CHECK(x.cumprod(1).to_vector<int32_t>() == std::vector<int32_t>{1, 2, 6, 4, 20, 120});
    CHECK((-x).cummax(0).to_vector<int32_t>() == std::vector<int32_t>{-1, -2, -3, -1, -2, -3});
    const Tensor b = Tensor::from_vector(std::vector<bool>{false, true, false, true}, {4});
    Tensor bs = b.cumsum(0);
    CHECK(bs.dtype() == DType::Int32);
    CHECK(bs.to_vector<int32_t>() == std::vector<int32_t>{0, 1, 1, 2});
    CHECK(b.cummax(0).to_vector<bool>() == std::vector<bool>{false, true, true, true});
    const Tensor f = Tensor::from_vector(row(3 * 40 * 2), {3, 40, 2});
    for (int64_t axis : {0, 1, 2}) {
        CAPTURE(axis);
        const std::vector<double> ref = tempura::reference_eval(f.cumsum(axis).uop());
        const std::vector<float> got = f.cumsum(axis).to_vector<float>();
        REQUIRE(ref.size() == got.size());
        for (size_t i = 0; i < got.size(); ++i) CHECK(static_cast<double>(got[i]) == ref[i]);
    }
}

TEST_CASE("cummax carries a NaN forward, and -inf is no smaller than itself") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> m = Tensor::from_vector(std::vector<float>{-INFINITY, 1, nan, 5}, {4})
                                     .cummax(0)
                                     .to_vector<float>();
    CHECK(m[0] == -INFINITY);
    CHECK(m[1] == 1);
    CHECK(std::isnan(m[2]));
    CHECK(std::isnan(m[3]));
}

TEST_CASE("scan errors name the op and the values") {
    const Tensor x = Tensor::zeros({2, 3});
    CHECK_THROWS_WITH(x.cumsum(2),
                      at_line(__LINE__ - 1, "[cumsum] axis 2 is out of range for 2 dims").c_str());
    CHECK_THROWS_WITH(x.cummax(-3),
                      at_line(__LINE__ - 1, "[cummax] axis -3 is out of range for 2 dims").c_str());
    CHECK(x.cumprod(0).shape() == Shape{2, 3});
}
