// The EXP2/LOG2 (float32) and SIN/COS (float32, float64) decompositions (codegen stage
// "decompositions") against libm: within 2 ulp (exp2, log2) and 1 ulp (sin, cos, over the whole
// range) of it, exact on the special values, and vector code with no libm call.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "../support.hpp"
#include "tempura/backend/llvm_cpu.hpp"
#include "tempura/tempura.hpp"

using tempura::Tensor;

namespace {

float from_bits(uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

} // namespace

TEST_CASE("exp2 decomposition: within 2 ulp of libm over [-149, 127], exact specials") {
    std::vector<float> xs;
    for (float x = -149.0f; x <= 127.0f; x += 0.0137f) xs.push_back(x);
    const std::vector<float> got = Tensor::from_vector(xs).exp2().to_vector<float>();
    int64_t worst = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
        const float want = std::exp2(xs[i]);
        if (want < std::numeric_limits<float>::min()) continue; // denormal results: see below
        worst = std::max(worst, ulps(got[i], want));
    }
    CAPTURE(worst);
    CHECK(worst <= 2);
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> sp = Tensor::from_vector<float>({0.0f, 1.0f, -1.0f, 128.0f, 200.0f,
                                                              -200.0f, inf, -inf, NAN, -140.0f})
                                      .exp2()
                                      .to_vector<float>();
    CHECK(sp[0] == 1.0f);
    CHECK(sp[1] == 2.0f);
    CHECK(sp[2] == 0.5f);
    CHECK(sp[3] == inf);
    CHECK(sp[4] == inf);
    CHECK(sp[5] == 0.0f);
    CHECK(sp[6] == inf);
    CHECK(sp[7] == 0.0f);
    CHECK(std::isnan(sp[8]));
    CHECK(sp[9] == std::exp2(-140.0f)); // a denormal, exact: 2^-140 scaled in two steps
    // In full vector lanes too: a NaN in any lane stays NaN, its neighbours are unaffected.
    std::vector<float> lanes(64, 1.0f);
    lanes[5] = NAN;
    lanes[37] = -NAN;
    const std::vector<float> lane_out = Tensor::from_vector(lanes).exp2().to_vector<float>();
    for (size_t i = 0; i < lanes.size(); ++i) {
        CAPTURE(i);
        if (i == 5 || i == 37)
            CHECK(std::isnan(lane_out[i]));
        else
            CHECK(lane_out[i] == 2.0f);
    }
    // Just below the overflow: 2^128 alone is inf, times 2^-0.3 it is not (exp2 rounds x to
    // 128 there). exp(88.5) is the same case.
    const std::vector<float> top =
        Tensor::from_vector<float>({127.7f, 127.99f, 127.5f}).exp2().to_vector<float>();
    for (size_t i = 0; i < top.size(); ++i) {
        CAPTURE(i);
        CHECK(std::isfinite(top[i]));
        CHECK(ulps(top[i], std::exp2(std::vector<float>{127.7f, 127.99f, 127.5f}[i])) <= 2);
    }
    const float e = Tensor::from_vector<float>({88.5f}).exp().item<float>();
    CHECK(std::isfinite(e));
    CHECK(std::fabs(e / std::exp(88.5f) - 1.0f) < 1e-6f);
}

TEST_CASE("log2 decomposition: within 2 ulp of libm, denormals, exact specials") {
    std::vector<float> xs;
    for (float x = 1e-30f; x < 1e30f; x *= 1.0173f) xs.push_back(x);
    xs.push_back(1e-40f); // denormal
    xs.push_back(std::numeric_limits<float>::denorm_min());
    const std::vector<float> got = Tensor::from_vector(xs).log2().to_vector<float>();
    int64_t worst = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
        const float want = std::log2(xs[i]);
        if (std::fabs(want) < 1e-3f) continue; // near 1, compare absolutely below
        worst = std::max(worst, ulps(got[i], want));
    }
    CAPTURE(worst);
    CHECK(worst <= 2);
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> sp =
        Tensor::from_vector<float>({1.0f, 2.0f, 0.5f, 1024.0f, 0.0f, -1.0f, inf, NAN, 1.0001f})
            .log2()
            .to_vector<float>();
    CHECK(sp[0] == 0.0f);
    CHECK(sp[1] == 1.0f);
    CHECK(sp[2] == -1.0f);
    CHECK(sp[3] == 10.0f);
    CHECK(sp[4] == -inf);
    CHECK(std::isnan(sp[5]));
    CHECK(sp[6] == inf);
    CHECK(std::isnan(sp[7]));
    CHECK(std::fabs(sp[8] - std::log2(1.0001f)) <= 1e-7f);
}

namespace {

// Inputs for sin and cos over the whole float range: every 1021st bit pattern of the 2^32
// (positive and negative, denormals, inf and NaN included), dense near 0 and near multiples of
// pi/2, and the floats closest to a multiple of pi/2 (the hardest for argument reduction).
std::vector<float> trig_inputs() {
    std::vector<float> xs;
    for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 1021) xs.push_back(from_bits(b));
    for (uint32_t b = 0; b < 0x00800000; b += 4099) { // denormals
        xs.push_back(from_bits(b));
        xs.push_back(-from_bits(b));
    }
    for (float x = -0.01f; x <= 0.01f; x += 1.3e-6f) xs.push_back(x);
    for (int k = 1; k < 6000; ++k)
        for (const double m : {std::numbers::pi / 2 * k, -std::numbers::pi / 2 * k}) {
            float x = static_cast<float>(m);
            for (int i = 0; i < 4; ++i) x = std::nextafter(x, 0.0f);
            for (int i = 0; i < 9; ++i, x = std::nextafter(x, 2 * x)) xs.push_back(x);
        }
    // Per binade, the float with the smallest |x mod pi/2| (2^-25.9 .. 2^-29.2): found by an
    // exhaustive search, on both sides of the switch from Cody-Waite to Payne-Hanek at 4096.
    for (const float x :
         {4.71238899f, 252.898209f, 505.796417f, 1011.59283f, 2238.38477f, 52516.4336f, 2709675.5f,
          42781604.0f, 0x1.47d0fep+34f, 0x1.47d0fep+35f, 0x1.628d4cp+40f, 0x1.13093p+76f,
          0x1.32ede2p+85f, 0x1.f37c8ap+95f, 0x1.f37c8ap+96f, 0x1.7b9b4p+127f}) {
        xs.push_back(x);
        xs.push_back(-x);
    }
    return xs;
}

void check_trig(const std::string& name, const std::vector<float>& xs,
                const std::vector<float>& got, double (*ref)(double)) {
    REQUIRE(got.size() == xs.size());
    int64_t worst = 0;
    float worst_x = 0;
    size_t nan_mismatches = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
        // The reference interpreter's semantics: the double function of the float, rounded.
        const float want = static_cast<float>(ref(static_cast<double>(xs[i])));
        if (std::isnan(want) || std::isnan(got[i])) {
            nan_mismatches += std::isnan(want) != std::isnan(got[i]);
            continue;
        }
        if (const int64_t d = ulps(got[i], want); d > worst) {
            worst = d;
            worst_x = xs[i];
        }
    }
    CAPTURE(name);
    CAPTURE(worst);
    CAPTURE(worst_x);
    MESSAGE(name << ": " << xs.size() << " inputs, worst " << worst << " ulp");
    CHECK(nan_mismatches == 0);
    CHECK(worst <= 1); // over all 2^32 floats: < 0.8 ulp from the exact value
}

} // namespace

TEST_CASE("sin and cos decompositions: within 1 ulp of libm over the whole float range") {
    const std::vector<float> xs = trig_inputs();
    const Tensor t = Tensor::from_vector(xs);
    check_trig("sin", xs, t.sin().to_vector<float>(), [](double x) { return std::sin(x); });
    check_trig("cos", xs, t.cos().to_vector<float>(), [](double x) { return std::cos(x); });
}

TEST_CASE("sin and cos: large arguments, tiny ones, and the special values") {
    const float inf = std::numeric_limits<float>::infinity();
    const float fmin = std::numeric_limits<float>::min();
    const float dmin = std::numeric_limits<float>::denorm_min();
    const float fmax = std::numeric_limits<float>::max();
    const std::vector<float> xs = {1e10f, 1e30f, 3.4e38f, fmax, -fmax, fmin,  -dmin,
                                   0.0f,  -0.0f, inf,     -inf, NAN,   -1e10f};
    const Tensor t = Tensor::from_vector(xs);
    const std::vector<float> s = t.sin().to_vector<float>();
    const std::vector<float> c = t.cos().to_vector<float>();
    // cos(1e10) is 0.8731; rounding pi/2 - 1e10 to float first gave 0.4875.
    CHECK(std::fabs(c[0] - 0.87311962f) < 1e-7f);
    CHECK(c[12] == c[0]);
    CHECK(s[12] == -s[0]);
    for (size_t i = 0; i < 5; ++i) {
        CAPTURE(xs[i]);
        CHECK(ulps(s[i], static_cast<float>(std::sin(static_cast<double>(xs[i])))) <= 1);
        CHECK(ulps(c[i], static_cast<float>(std::cos(static_cast<double>(xs[i])))) <= 1);
    }
    CHECK(s[5] == fmin); // sin x == x and cos x == 1 for tiny x
    CHECK(c[5] == 1.0f);
    CHECK(s[6] == -dmin);
    CHECK(c[6] == 1.0f);
    CHECK(s[7] == 0.0f);
    CHECK_FALSE(std::signbit(s[7]));
    CHECK(s[8] == 0.0f);
    CHECK(std::signbit(s[8])); // sin(-0) == -0
    CHECK(c[7] == 1.0f);
    CHECK(c[8] == 1.0f);
    for (size_t i = 9; i < 12; ++i) {
        CHECK(std::isnan(s[i]));
        CHECK(std::isnan(c[i]));
    }
}

namespace {

int64_t ordinal64(double a) {
    int64_t i;
    std::memcpy(&i, &a, 8);
    return i < 0 ? -(i & std::numeric_limits<int64_t>::max()) : i;
}

int64_t ulps64(double a, double b) { return std::llabs(ordinal64(a) - ordinal64(b)); }

double from_bits64(uint64_t b) {
    double d;
    std::memcpy(&d, &b, 8);
    return d;
}

} // namespace

TEST_CASE("float64 sin and cos decompositions: within 1 ulp over the whole double range") {
    std::vector<double> xs;
    // 2^20 bit patterns spread over all 2^64 (the odd factor varies the low bits too).
    for (uint64_t i = 0; i < (uint64_t{1} << 20); ++i)
        xs.push_back(from_bits64(i * 0xffffc0de0f1u));
    for (double x = -0x1p20; x < 0x1p20; x += 7.77) xs.push_back(x); // Cody-Waite up to 2^19
    for (double x = 1e-9; x < 1e6; x *= 1.0001) xs.push_back(x);
    for (int k = 1; k < 6000; ++k) {
        double x = std::numbers::pi / 2 * k;
        for (int i = 0; i < 4; ++i) x = std::nextafter(x, 0.0);
        for (int i = 0; i < 9; ++i, x = std::nextafter(x, 2 * x)) xs.push_back(x);
    }
    const Tensor t = Tensor::from_vector(xs);
    const std::vector<double> s = t.sin().to_vector<double>();
    const std::vector<double> c = t.cos().to_vector<double>();
    // The reference in long double (64-bit significand on x86), so that its own error does not
    // count: glibc's double cos is 8 ulp off at the hard case below.
    int64_t worst_s = 0, worst_c = 0;
    size_t nan_mismatches = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
        const long double x = xs[i];
        const double ws = static_cast<double>(std::sin(x)), wc = static_cast<double>(std::cos(x));
        if (std::isnan(ws)) {
            nan_mismatches += !std::isnan(s[i]) + !std::isnan(c[i]);
            continue;
        }
        worst_s = std::max(worst_s, ulps64(s[i], ws));
        worst_c = std::max(worst_c, ulps64(c[i], wc));
    }
    MESSAGE("float64: " << xs.size() << " inputs, worst sin " << worst_s << " ulp, worst cos "
                        << worst_c << " ulp");
    CHECK(nan_mismatches == 0);
    CHECK(worst_s <= 1);
    CHECK(worst_c <= 1);

    // The double closest to a multiple of pi/2 (|r| = 2^-60.9), 1e22, and the special values,
    // against correctly rounded values.
    const double inf = std::numeric_limits<double>::infinity();
    const double dmin = std::numeric_limits<double>::denorm_min();
    const std::vector<double> sp = {
        std::ldexp(6381956970095103.0, 797), 1e22, -0.0, 0.0, -dmin, inf, -inf, NAN};
    const Tensor ts = Tensor::from_vector(sp);
    const std::vector<double> ss = ts.sin().to_vector<double>();
    const std::vector<double> cs = ts.cos().to_vector<double>();
    CHECK(ss[0] == 1.0);
    CHECK(cs[0] == -0x1.14ae72e6ba22fp-61);
    CHECK(ulps64(ss[1], -0.8522008497671888) <= 1);
    CHECK(ulps64(cs[1], 0.523214785395139) <= 1);
    CHECK(ss[2] == 0.0);
    CHECK(std::signbit(ss[2])); // sin(-0) == -0
    CHECK_FALSE(std::signbit(ss[3]));
    CHECK(cs[2] == 1.0);
    CHECK(ss[4] == -dmin);
    CHECK(cs[4] == 1.0);
    for (size_t i = 5; i < 8; ++i) {
        CHECK(std::isnan(ss[i]));
        CHECK(std::isnan(cs[i]));
    }
}

TEST_CASE("exp (float32): e^x from x itself, not 2^(x * (1/ln 2) rounded)") {
    // 2^(the rounded product) is up to |x| * 0.78 ulp off (62 ulp at x = 79.7); exp reduces x
    // itself (x - n ln 2), within 2 ulp (1 measured).
    std::vector<float> xs;
    for (float x = -87.3f; x < 88.72f; x += 0.00137f) xs.push_back(x);
    const std::vector<float> got = Tensor::from_vector(xs).exp().to_vector<float>();
    int64_t worst = 0;
    float at = 0;
    for (size_t i = 0; i < xs.size(); ++i)
        if (const int64_t d =
                ulps(got[i], static_cast<float>(std::exp(static_cast<double>(xs[i]))));
            d > worst) {
            worst = d;
            at = xs[i];
        }
    MESSAGE("float32 exp: " << xs.size() << " inputs, worst " << worst << " ulp at " << at);
    CHECK(worst <= 2);
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> sp =
        Tensor::from_vector<float>({0.0f, 88.72f, 88.73f, -103.0f, -104.0f, inf, -inf, NAN})
            .exp()
            .to_vector<float>();
    CHECK(sp[0] == 1.0f);
    CHECK(ulps(sp[1], static_cast<float>(std::exp(static_cast<double>(88.72f)))) <= 1);
    CHECK(sp[2] == inf);
    CHECK(sp[3] == static_cast<float>(std::exp(-103.0))); // a subnormal, one rounding
    CHECK(sp[4] == 0.0f);
    CHECK(sp[5] == inf);
    CHECK(sp[6] == 0.0f);
    CHECK(std::isnan(sp[7]));
}

TEST_CASE("exp of a constant folds to e^c, the value a kernel computes") {
    // Folding 2^(c * (1/ln 2)) would be the rounded product's value (float32 exp(80): 27 ulp
    // off); the fold of EXP2(c * (1/ln 2)) is e^c, as the reference interpreter's and within
    // the kernels' bound of it.
    for (const double c : {3.0, 80.0, -87.0, 700.0}) {
        CAPTURE(c);
        const float f = Tensor::full({1}, static_cast<float>(c)).exp().item<float>();
        const float fk =
            Tensor::from_vector(std::vector<float>{static_cast<float>(c)}).exp().item<float>();
        CHECK(f == static_cast<float>(std::exp(static_cast<double>(static_cast<float>(c)))));
        CHECK(ulps(f, fk) <= 1);
        const double d = Tensor::full({1}, c, tempura::DType::Float64).exp().item<double>();
        const double dk = Tensor::from_vector(std::vector<double>{c}).exp().item<double>();
        CHECK(d == std::exp(c));
        CHECK(ulps64(d, dk) <= 1);
    }
}

TEST_CASE("float64 exp2, exp, log2 and erf decompositions: within 1 ulp, exact specials") {
    // Against long double (64-bit significand on x86) rounded to double, so that the
    // reference's own error does not count.
    const auto worst_of = [](const std::vector<double>& xs, const std::vector<double>& got,
                             long double (*ref)(long double)) {
        int64_t worst = 0;
        double at = 0;
        for (size_t i = 0; i < xs.size(); ++i)
            if (const int64_t d = ulps64(got[i], static_cast<double>(ref(xs[i]))); d > worst) {
                worst = d;
                at = xs[i];
            }
        return std::pair{worst, at};
    };
    std::vector<double> e;
    for (double x = -1080.0; x < 1030.0; x += 0.00731) e.push_back(x);
    for (double x = -2.0; x < 2.0; x += 1.0 / 65536 + 1e-9) e.push_back(x);
    std::vector<double> l;
    // 2^19 bit patterns over the positive doubles (subnormals included), and around 1.
    for (uint64_t i = 1; i < (uint64_t{1} << 19); ++i)
        l.push_back(from_bits64((i * 0x3ffe7c0de0f1u) & 0x7fefffffffffffffu));
    for (double x = 0.5; x < 2.0; x += 1.0 / 131072 + 1e-10) l.push_back(x);
    std::vector<double> f;
    for (double x = -7.0; x < 7.0; x += 1.0 / 16384 + 1e-10) f.push_back(x);
    for (double x = 1e-300; x < 1.0; x *= 1.01) {
        f.push_back(x);
        f.push_back(-x);
    }
    const auto [we, we_at] = worst_of(e, Tensor::from_vector(e).exp2().to_vector<double>(),
                                      [](long double x) { return exp2l(x); });
    const auto [wl, wl_at] = worst_of(l, Tensor::from_vector(l).log2().to_vector<double>(),
                                      [](long double x) { return log2l(x); });
    const auto [wf, wf_at] = worst_of(f, Tensor::from_vector(f).erf().to_vector<double>(),
                                      [](long double x) { return erfl(x); });
    // exp = EXP2(x * (1/ln 2)), computed from x itself: 2^(the rounded product) would be up to
    // |x| / 2 ulp (431 at 700).
    std::vector<double> ex;
    for (double v = -745.5; v < 709.8; v += 0.00513) ex.push_back(v);
    const auto [wx, wx_at] = worst_of(ex, Tensor::from_vector(ex).exp().to_vector<double>(),
                                      [](long double v) { return expl(v); });
    MESSAGE("float64 exp2: " << e.size() << " inputs, worst " << we << " ulp at " << we_at
                             << "; log2: " << l.size() << ", worst " << wl << " at " << wl_at
                             << "; erf: " << f.size() << ", worst " << wf << " at " << wf_at
                             << "; exp: " << ex.size() << ", worst " << wx << " at " << wx_at);
    CHECK(we <= 1);
    CHECK(wl <= 1);
    CHECK(wf <= 1);
    CHECK(wx <= 1);
    const std::vector<double> xs =
        Tensor::from_vector(std::vector<double>{0.0, 1.0, 709.78, 709.79, -745.0, -746.0,
                                                std::numeric_limits<double>::infinity(),
                                                -std::numeric_limits<double>::infinity(), NAN})
            .exp()
            .to_vector<double>();
    CHECK(xs[0] == 1.0);
    CHECK(ulps64(xs[1], static_cast<double>(expl(1.0L))) <= 1);
    CHECK(ulps64(xs[2], static_cast<double>(expl(static_cast<long double>(709.78)))) <= 1);
    CHECK(xs[3] == std::numeric_limits<double>::infinity());
    CHECK(xs[4] == std::numeric_limits<double>::denorm_min());
    CHECK(xs[5] == 0.0);
    CHECK(xs[6] == std::numeric_limits<double>::infinity());
    CHECK(xs[7] == 0.0);
    CHECK(std::isnan(xs[8]));

    const double inf = std::numeric_limits<double>::infinity();
    const double dmin = std::numeric_limits<double>::denorm_min();
    const std::vector<double> es =
        Tensor::from_vector(std::vector<double>{0.0, 1.0, -1.0, 1023.0, 1024.0, -1022.0, -1074.0,
                                                -1074.5, -1075.0, inf, -inf, NAN, 1023.999})
            .exp2()
            .to_vector<double>();
    CHECK(es[0] == 1.0);
    CHECK(es[1] == 2.0);
    CHECK(es[2] == 0.5);
    CHECK(es[3] == 0x1p1023);
    CHECK(es[4] == inf);
    CHECK(es[5] == 0x1p-1022);
    CHECK(es[6] == dmin); // subnormal results: one rounding, the last
    CHECK(es[7] == dmin);
    CHECK(es[8] == 0.0); // 2^-1075, halfway to the least subnormal: to even
    CHECK(es[9] == inf);
    CHECK(es[10] == 0.0);
    CHECK(std::isnan(es[11]));
    CHECK(ulps64(es[12], static_cast<double>(exp2l(static_cast<long double>(1023.999)))) <= 1);
    std::vector<double> pow2;
    for (int k = -1074; k <= 1023; ++k) pow2.push_back(std::ldexp(1.0, k));
    const std::vector<double> lp = Tensor::from_vector(pow2).log2().to_vector<double>();
    size_t inexact = 0;
    for (size_t i = 0; i < pow2.size(); ++i) inexact += lp[i] != -1074.0 + static_cast<double>(i);
    CHECK(inexact == 0); // log2(2^k) = k, subnormals too
    const std::vector<double> ls =
        Tensor::from_vector(std::vector<double>{0.0, -0.0, -1.0, inf, -inf, NAN, 1.0})
            .log2()
            .to_vector<double>();
    CHECK(ls[0] == -inf);
    CHECK(ls[1] == -inf);
    CHECK(std::isnan(ls[2]));
    CHECK(ls[3] == inf);
    CHECK(std::isnan(ls[4]));
    CHECK(std::isnan(ls[5]));
    CHECK(ls[6] == 0.0);
    const std::vector<double> fs =
        Tensor::from_vector(std::vector<double>{0.0, -0.0, inf, -inf, NAN, 6.0, 30.0, -dmin})
            .erf()
            .to_vector<double>();
    CHECK(fs[0] == 0.0);
    CHECK(std::signbit(fs[1])); // erf(-0) = -0
    CHECK(fs[2] == 1.0);
    CHECK(fs[3] == -1.0);
    CHECK(std::isnan(fs[4]));
    CHECK(fs[5] == 1.0);
    CHECK(fs[6] == 1.0);
    CHECK(fs[7] == static_cast<double>(erfl(-dmin)));
}

TEST_CASE("float64 transcendental kernels (exp2, exp, log2, erf) are vector code, no libm call") {
    const bool avx512 = tempura::runtime::host_cpu_features().find("+avx512f") != std::string::npos;
    const Tensor x = Tensor::from_vector(std::vector<double>(4096, 1.5));
    for (const Tensor& t : {x.exp2(), x.exp(), x.log2(), x.erf()}) {
        Tensor r = t;
        r.realize();
        REQUIRE(r.kernels().size() == 1);
        const std::string& ir = r.kernels()[0].source;
        for (const char* call : {"@exp2", "@log2", "@erf", "@llvm.exp2", "@llvm.log2"}) {
            CAPTURE(call);
            CHECK(ir.find(call) == std::string::npos);
        }
        CHECK(ir.find(" x double>") != std::string::npos);
        if (avx512) CHECK(ir.find("<8 x double>") != std::string::npos);
    }
}

TEST_CASE("sin and cos kernels are vector code with no libm call") {
    const bool avx512 = tempura::runtime::host_cpu_features().find("+avx512f") != std::string::npos;
    for (const bool f64 : {false, true})
        for (const bool cos : {false, true}) {
            CAPTURE(f64);
            CAPTURE(cos);
            const Tensor x = f64 ? Tensor::from_vector(std::vector<double>(4096, 1.5))
                                 : Tensor::from_vector(std::vector<float>(4096, 1.5f));
            Tensor t = cos ? x.cos() : x.sin();
            t.realize();
            REQUIRE(t.kernels().size() == 1);
            const std::string& ir = t.kernels()[0].source;
            for (const char* call : {"@sin", "@cos", "@llvm.sin", "@llvm.cos"}) {
                CAPTURE(call);
                CHECK(ir.find(call) == std::string::npos);
            }
            CHECK(ir.find(f64 ? " x double>" : " x float>") != std::string::npos);
            if (avx512) CHECK(ir.find(f64 ? "<8 x double>" : "<16 x float>") != std::string::npos);
        }
}

namespace {

// ERF: float32 decomposed (a series below 0.5, 1 - erfc above).
TEST_CASE("erf: float32 within 3 ulp of erf in double, vectorized, no libm call") {
    std::vector<float> xs;
    for (float x = -6.0f; x <= 6.0f; x += 1.0f / 4096) xs.push_back(x);
    for (float x = 1e-30f; x < 1.0f; x *= 1.37f) {
        xs.push_back(x);
        xs.push_back(-x);
    }
    const float inf = std::numeric_limits<float>::infinity();
    for (float x : {0.0f, -0.0f, 0.5f, -0.5f, 0.49999997f, 3.9f, 3.92f, 10.0f, 1e30f, inf, -inf})
        xs.push_back(x);
    Tensor t = Tensor::from_vector(xs).erf();
    t.realize();
    const std::vector<float> got = t.to_vector<float>();
    int64_t worst = 0;
    float worst_x = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
        const float want = static_cast<float>(std::erf(static_cast<double>(xs[i])));
        if (const int64_t d = ulps(got[i], want); d > worst) {
            worst = d;
            worst_x = xs[i];
        }
    }
    MESSAGE("erf float32: " << xs.size() << " inputs, worst " << worst << " ulp at " << worst_x);
    CHECK(worst <= 3);
    CHECK(std::signbit(got[xs.size() - 10])); // erf(-0.0) = -0.0
    CHECK(got[xs.size() - 2] == 1.0f);        // erf(inf) = 1
    CHECK(got[xs.size() - 1] == -1.0f);
    CHECK(std::isnan(Tensor::from_vector(std::vector<float>{NAN}).erf().item<float>()));
    CHECK(t.kernels().at(0).source.find("@erf") == std::string::npos);
    // 4096 elements: the heuristics give the kernel vector lanes.
    Tensor v = (Tensor::arange(4096) * 0.001f).erf();
    v.realize();
    const std::string& ir = v.kernels().at(0).source;
    CHECK(ir.find("@erf") == std::string::npos);
    if (tempura::runtime::host_cpu_features().find("+avx512f") != std::string::npos)
        CHECK(ir.find("<16 x float>") != std::string::npos);

    // float64: decomposed too (the float64 test case above).
    const std::vector<double> d = {-3.0, -0.25, 0.0, 1e-300, 0.7, 2.5, 30.0};
    const std::vector<double> dg = Tensor::from_vector(d).erf().to_vector<double>();
    for (size_t i = 0; i < d.size(); ++i) CHECK(ulps64(dg[i], std::erf(d[i])) <= 1);
    const std::vector<float> f =
        tempura::FixedTensor<float, 2>::from_vector({0.5f, -1.0f}).erf().to_vector();
    CHECK(ulps(f[0], static_cast<float>(std::erf(0.5))) <= 3);
    CHECK(ulps(f[1], static_cast<float>(std::erf(-1.0))) <= 3);
}

} // namespace
