// Random numbers: Threefry-2x32-20 against Random123's known-answer vectors (compiled and in the
// reference interpreter), reproducibility for a seed, fresh streams per call, one fused kernel,
// the moments of rand / randn / randint / uniform / normal, dropout, and the error messages.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

#include "../error_at.hpp"
#include "../support.hpp"

namespace {

using tempura::DType;
using tempura::Shape;
using tempura::Tensor;
namespace nn = tempura::nn;

Tensor u32s(const std::vector<uint32_t>& v) {
    return Tensor::from_vector(v, Shape{int64_t(v.size())});
}

struct Moments {
    double mean = 0, var = 0, lo = 1e300, hi = -1e300;
};

Moments moments(const std::vector<float>& v) {
    Moments m;
    for (float x : v) {
        m.mean += x;
        m.lo = std::min<double>(m.lo, x);
        m.hi = std::max<double>(m.hi, x);
    }
    m.mean /= static_cast<double>(v.size());
    for (float x : v) m.var += (x - m.mean) * (x - m.mean);
    m.var /= static_cast<double>(v.size() - 1);
    return m;
}

} // namespace

TEST_CASE("threefry2x32 gives Random123's known answers, compiled and in the reference") {
    // Random123 kat_vectors, threefry2x32 20 rounds: counter (c0, c1), key (k0, k1) -> (x0, x1).
    const Tensor c0 = u32s({0, 0xffffffffu, 0x243f6a88u});
    const Tensor c1 = u32s({0, 0xffffffffu, 0x85a308d3u});
    const Tensor k0 = u32s({0, 0xffffffffu, 0x13198a2eu});
    const Tensor k1 = u32s({0, 0xffffffffu, 0x03707344u});
    auto [x0, x1] = tempura::threefry2x32(c0, c1, k0, k1);
    const std::vector<uint32_t> want0{0x6b200159u, 0x1cb996fcu, 0xc4923a9cu};
    const std::vector<uint32_t> want1{0x99ba4efeu, 0xbb002be7u, 0x483df7a0u};
    const std::vector<double> ref0 = tempura::reference_eval(x0.uop());
    const std::vector<double> ref1 = tempura::reference_eval(x1.uop());
    CHECK(x0.to_vector<uint32_t>() == want0);
    CHECK(x1.to_vector<uint32_t>() == want1);
    for (size_t i = 0; i < 3; ++i) {
        CHECK(ref0[i] == static_cast<double>(want0[i]));
        CHECK(ref1[i] == static_cast<double>(want1[i]));
    }
}

TEST_CASE("rand is one kernel and the same for a seed; each call draws new numbers") {
    tempura::manual_seed(42);
    Tensor a = Tensor::rand({1000});
    const std::vector<float> va = a.to_vector<float>();
    CHECK(a.kernels().size() == 1);
    Tensor b = Tensor::rand({1000});
    const std::vector<float> vb = b.to_vector<float>();
    CHECK(va != vb);
    tempura::manual_seed(42);
    CHECK(Tensor::rand({1000}).to_vector<float>() == va);
    CHECK(Tensor::rand({1000}).to_vector<float>() == vb);
    tempura::manual_seed(43);
    CHECK(Tensor::rand({1000}).to_vector<float>() != va);
    // The compiled numbers are the reference interpreter's, bit for bit.
    tempura::manual_seed(7);
    Tensor c = Tensor::rand({3, 37, 5});
    const std::vector<double> ref = tempura::reference_eval(c.uop());
    const std::vector<float> vc = c.to_vector<float>();
    REQUIRE(ref.size() == vc.size());
    for (size_t i = 0; i < vc.size(); ++i) CHECK(static_cast<double>(vc[i]) == ref[i]);
}

TEST_CASE("rand's element i is the first word of threefry at counter (i, call), key the seed") {
    tempura::manual_seed(0x0000000500000003ull);
    const std::vector<float> v = Tensor::rand({2050}).to_vector<float>(); // call 0
    const std::vector<uint32_t> idx{0, 1, 1023, 1024, 2049};
    const std::vector<uint32_t> zero(idx.size(), 0), k0(idx.size(), 3), k1(idx.size(), 5);
    auto [x0, x1] = tempura::threefry2x32(u32s(idx), u32s(zero), u32s(k0), u32s(k1));
    const std::vector<uint32_t> bits = x0.to_vector<uint32_t>();
    for (size_t i = 0; i < idx.size(); ++i)
        CHECK(v[idx[i]] == static_cast<float>(bits[i] >> 8) * 0x1p-24f);
}

TEST_CASE("rand, uniform, randn, normal and randint have the right moments") {
    tempura::manual_seed(1);
    const int64_t n = 1 << 18;
    const Moments u = moments(Tensor::rand({n}).to_vector<float>());
    CHECK(u.lo >= 0.0);
    CHECK(u.hi < 1.0);
    CHECK(std::fabs(u.mean - 0.5) < 0.005);
    CHECK(std::fabs(u.var - 1.0 / 12) < 0.002);
    const Moments w = moments(Tensor::uniform({n}, -3, 5).to_vector<float>());
    CHECK(w.lo >= -3.0);
    CHECK(w.hi < 5.0);
    CHECK(std::fabs(w.mean - 1.0) < 0.04);
    const Moments g = moments(Tensor::randn({n}).to_vector<float>());
    CHECK(std::fabs(g.mean) < 0.01);
    CHECK(std::fabs(g.var - 1.0) < 0.01);
    CHECK(g.lo < -4.0);
    CHECK(g.hi > 4.0);
    const Moments h = moments(Tensor::normal({n}, 10, 2).to_vector<float>());
    CHECK(std::fabs(h.mean - 10) < 0.02);
    CHECK(std::fabs(h.var - 4) < 0.05);
    // The fraction of randn within one standard deviation: 68.27%.
    const std::vector<float> z = Tensor::randn({n}).to_vector<float>();
    const double within = static_cast<double>(std::count_if(
                              z.begin(), z.end(), [](float x) { return std::fabs(x) < 1; })) /
                          static_cast<double>(n);
    CHECK(std::fabs(within - 0.6827) < 0.005);
    Tensor r = Tensor::randint(-3, 4, {n});
    CHECK(r.dtype() == DType::Int32);
    const std::vector<int32_t> vr = r.to_vector<int32_t>();
    std::vector<int64_t> count(7, 0);
    for (int32_t x : vr) {
        REQUIRE(x >= -3);
        REQUIRE(x < 4);
        ++count[static_cast<size_t>(x + 3)];
    }
    for (int64_t c : count) CHECK(std::fabs(static_cast<double>(c) / n - 1.0 / 7) < 0.005);
    // Float64 uses 53 bits.
    const std::vector<double> d = Tensor::rand({1000}, DType::Float64).to_vector<double>();
    CHECK(std::any_of(d.begin(), d.end(), [](double x) { return x != static_cast<float>(x); }));
}

TEST_CASE("a random graph compiles once: the next call replays the plan with a new stream") {
    tempura::manual_seed(3);
    Tensor a = Tensor::randn({64, 64}) * 2.0;
    a.realize();
    Tensor b = Tensor::randn({64, 64}) * 2.0;
    b.realize();
    REQUIRE(a.kernels().size() == 1);
    REQUIRE(b.kernels().size() == 1);
    CHECK(a.kernels()[0].name == b.kernels()[0].name);
    CHECK(a.to_vector<float>() != b.to_vector<float>());
}

TEST_CASE("dropout zeroes about p of the elements and scales the rest") {
    tempura::manual_seed(5);
    const int64_t n = 1 << 16;
    const Tensor x = Tensor::full({n}, 2.0f);
    const std::vector<float> y = nn::dropout(x, 0.25).to_vector<float>();
    int64_t zeros = 0;
    for (float v : y) {
        if (v == 0)
            ++zeros;
        else
            REQUIRE(v == doctest::Approx(2.0 / 0.75).epsilon(1e-6));
    }
    CHECK(std::fabs(static_cast<double>(zeros) / n - 0.25) < 0.01);
    CHECK(nn::dropout(x, 0.25, false).to_vector<float>() == x.to_vector<float>());
    CHECK(nn::dropout(x, 0).to_vector<float>() == x.to_vector<float>());
    const std::vector<float> all = nn::dropout(x, 1).to_vector<float>();
    CHECK(std::all_of(all.begin(), all.end(), [](float v) { return v == 0; }));
    // The gradient is the same mask, scaled.
    Tensor w = Tensor::full({n}, 1.0f);
    w.requires_grad();
    tempura::manual_seed(5);
    Tensor out = nn::dropout(w * 2.0, 0.25);
    out.sum().backward();
    const std::vector<float> g = w.grad().to_vector<float>();
    const std::vector<float> o = out.to_vector<float>();
    for (size_t i = 0; i < g.size(); ++i) {
        if (o[i] == 0)
            REQUIRE(g[i] == 0);
        else
            REQUIRE(g[i] == doctest::Approx(2.0 / 0.75).epsilon(1e-6));
    }
}

TEST_CASE("random numbers' errors name the op and the values") {
    CHECK_THROWS_WITH(Tensor::randint(4, 4, {2}),
                      at_line(__LINE__ - 1, "[randint] needs lo < hi, got [4, 4)").c_str());
    CHECK_THROWS_WITH(
        Tensor::randint(0, int64_t{1} << 33, {2}, DType::Int64),
        at_line(__LINE__ - 2, "[randint] range [0, 8589934592) holds more than 2^32 values")
            .c_str());
    CHECK_THROWS_WITH(Tensor::randint(0, 300, {2}, DType::Int8),
                      at_line(__LINE__ - 1, "[randint] range [0, 300) does not fit int8").c_str());
    CHECK_THROWS_WITH(
        Tensor::randint(0, 3, {2}, DType::Float32),
        at_line(__LINE__ - 2, "[randint] needs an integer dtype, got float32").c_str());
    CHECK_THROWS_WITH(Tensor::rand({2}, DType::Int32),
                      at_line(__LINE__ - 1, "[rand] needs a float dtype, got int32").c_str());
    CHECK_THROWS_WITH(Tensor::uniform({2}, 1, 0),
                      at_line(__LINE__ - 1, "[uniform] needs finite lo <= hi, got [1, 0)").c_str());
    CHECK_THROWS_WITH(
        Tensor::normal({2}, 0, -1),
        at_line(__LINE__ - 2, "[normal] needs a finite mean and std >= 0, got mean 0, std -1")
            .c_str());
    CHECK_THROWS_WITH(nn::dropout(Tensor::full({2}, 1.0f), 1.5),
                      at_line(__LINE__ - 1, "[dropout] p must lie in [0, 1], got 1.5").c_str());
    CHECK_THROWS_WITH(nn::dropout(Tensor::full({2}, 1), 0.5),
                      at_line(__LINE__ - 1, "[dropout] needs a float tensor, got int32").c_str());
    CHECK_THROWS_WITH(
        tempura::threefry2x32(Tensor::full({2}, 1), u32s({1, 2}), u32s({1, 2}), u32s({1, 2})),
        at_line(__LINE__ - 2, "[threefry2x32] needs UInt32 tensors, got int32").c_str());
}

TEST_CASE("uniform stays below hi after rounding, and does not overflow on a wide range") {
    tempura::manual_seed(2);
    for (DType dt : {DType::BFloat16, DType::Float16, DType::Float32}) {
        CAPTURE(dt.name());
        const std::vector<float> v =
            Tensor::uniform({1 << 18}, 10, 11, dt).cast(DType::Float32).to_vector<float>();
        CHECK(std::all_of(v.begin(), v.end(), [](float x) { return x >= 10 && x < 11; }));
    }
    const std::vector<float> w = Tensor::uniform({1000}, -3e38, 3e38).to_vector<float>();
    CHECK(std::all_of(w.begin(), w.end(), [](float x) { return std::isfinite(x); }));
    CHECK(*std::min_element(w.begin(), w.end()) < -1e38f);
    CHECK(*std::max_element(w.begin(), w.end()) > 1e38f);
}
