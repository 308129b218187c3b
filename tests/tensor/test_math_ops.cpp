// The elementwise ops beyond the basic ones (pow, activations, rounding, hyperbolic and inverse
// trigonometric functions, Python's % and //, bitwise and logical ops), the shape ops (slice,
// split, chunk, repeat, tril/triu, stack, linspace, *_like) and the reductions any, all, var,
// std and logsumexp: exact values and closed forms, ulp sweeps against libm in double, the
// reference interpreter on random inputs, and the exact error messages.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

#include "../error_at.hpp"
#include "../support.hpp"

namespace {

using tempura::DType;
using tempura::Shape;
using tempura::Slice;
using tempura::Tensor;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor f32(std::vector<float> v) { return Tensor::from_vector(v); }
Tensor i32(std::vector<int32_t> v) { return Tensor::from_vector(v); }

// Same value, NaN equal to NaN, -0 different from +0.
bool same(float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return a == b && std::signbit(a) == std::signbit(b);
}

// Every element of t against want[i] by ok(got, want).
template <class W, class Ok>
void check_each(const Tensor& t, const std::vector<W>& want, Ok ok) {
    const std::vector<float> got = t.to_vector<float>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        CAPTURE(got[i]);
        CAPTURE(want[i]);
        CHECK(ok(got[i], want[i]));
    }
}

void check_exact(const Tensor& t, const std::vector<float>& want) { check_each(t, want, same); }

void check_close(const Tensor& t, const std::vector<double>& want, double rel = 2e-6) {
    check_each(t, want,
               [&](float g, double w) { return std::fabs(g - w) <= rel * std::fabs(w) + 1e-30; });
}

// The compiled values equal the reference interpreter's within `rel` (NaN where it has NaN).
void check_reference(const Tensor& t, double rel = 1e-5) {
    check_each(t, tempura::reference_eval(t.uop()), [&](float g, double w) {
        if (std::isnan(w) || std::isinf(w)) return same(g, static_cast<float>(w));
        return std::fabs(g - w) <= rel * std::max(1.0, std::fabs(w));
    });
}

std::vector<float> random_floats(size_t n, float lo, float hi, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

// The worst distance in ulp between the compiled function and libm's in double, rounded.
template <class Op, class Ref>
int64_t worst_ulp(const std::vector<float>& xs, Op op, Ref ref) {
    const std::vector<float> got = op(Tensor::from_vector(xs)).template to_vector<float>();
    int64_t worst = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
        const auto want = static_cast<float>(ref(static_cast<double>(xs[i])));
        if (std::isinf(want) || std::fabs(want) < std::numeric_limits<float>::min()) continue;
        worst = std::max(worst, ulps(got[i], want));
    }
    return worst;
}

std::vector<float> sweep(float lo, float hi, float step) {
    std::vector<float> xs;
    for (float x = lo; x <= hi; x += step) xs.push_back(x);
    return xs;
}

} // namespace

TEST_CASE("pow: std::pow's special cases, integers by squaring") {
    check_exact(f32({2, -2, 0, 0, -0.0f, 4, -8, 1, kNaN, -1, 2})
                    .pow(f32({3, 3, 0, -1, -1, 0.5f, 1.0f / 3, kNaN, 0, kInf, -2})),
                {8, -8, 1, kInf, -kInf, 2, kNaN, 1, 1, 1, 0.25f});
    // Exponents through the scalar path: products, sqrt, or POW.
    check_exact(f32({1, 2, 3}).pow(2.0), {1, 4, 9});
    check_exact(f32({4, 9}).pow(0.5), {2, 3});
    check_exact(f32({2, 4}).pow(-1.0), {0.5f, 0.25f});
    check_close(f32({2, 10}).pow(1.5), {std::pow(2.0, 1.5), std::pow(10.0, 1.5)});
    CHECK(i32({2, 3, -2, 5, 1, -1, 2, 7})
              .pow(i32({10, 3, 3, 0, -5, -3, -1, 11}))
              .to_vector<int32_t>() == std::vector<int32_t>{1024, 27, -8, 1, 1, -1, 0, 1977326743});
    check_exact(i32({2, -3}).pow(3.0), {8, -27});
    check_exact(i32({2, 3}).pow(5.0), {32, 243});
    // 3^21 wraps in int32 as the scalar semantics say (the reference agrees).
    check_reference(i32({3}).pow(i32({21})));
    CHECK(error_of([] { (void)i32({2}).pow(0.5); }) ==
          at_line(__LINE__ - 1, "[pow] an integer tensor needs an integer exponent, got 0.500000"));
    CHECK(error_of([] { (void)f32({2}).pow(i32({2})); }) ==
          at_line(__LINE__ - 1, "[pow] dtype mismatch: float32 and int32"));
}

TEST_CASE("pow: within 32 ulp where |y log2|x|| <= 32") {
    std::vector<float> xs, ys;
    for (float x = 0.01f; x < 100.0f; x *= 1.37f)
        for (float y = -4.0f; y <= 4.0f; y += 0.37f) {
            if (std::fabs(y * std::log2(x)) > 32) continue;
            xs.push_back(x);
            ys.push_back(y);
            xs.push_back(-x); // negative bases with integer exponents keep their sign rule
            ys.push_back(std::round(y));
        }
    const std::vector<float> got =
        Tensor::from_vector(xs).pow(Tensor::from_vector(ys)).to_vector<float>();
    int64_t worst = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
        const auto want = static_cast<float>(std::pow(double{xs[i]}, double{ys[i]}));
        worst = std::max(worst, ulps(got[i], want));
    }
    MESSAGE("pow: worst ", worst, " ulp over ", xs.size(), " inputs");
    CHECK(worst <= 32);
}

TEST_CASE("activations: closed forms") {
    check_close(f32({1, -1, 0}).gelu(), {0.8413447460685429, -0.15865525393145707, 0});
    check_close(f32({1, -1}).silu(), {0.7310585786300049, -0.2689414213699951});
    // softplus neither overflows (30) nor loses tiny values (-30).
    check_close(f32({0, 30, -30, 1, 100}).softplus(),
                {0.6931471805599453, 30, 9.357622968840175e-14, 1.3132616875182228, 100});
    check_close(f32({1, -30}).mish(), {0.8650983882673103, -30 * 9.357622968840175e-14});
    check_close(f32({-2, 3}).leaky_relu(0.1), {-0.2, 3});
    check_close(f32({-2, 3}).leaky_relu(), {-0.02, 3});
    check_close(f32({-1, 2, -1e-10f}).elu(), {-0.6321205588285577, 2, -1e-10});
    check_close(f32({-1}).elu(2.0), {-2 * 0.6321205588285577});
    check_exact(f32({-5, 0.5f, 7, kNaN}).clip(0, 1), {0, 0.5f, 1, kNaN});
    check_exact(i32({-5, 3, 9}).clip(0, 4), {0, 3, 4});
    check_exact(f32({4, 0.25f}).rsqrt(), {0.5f, 2});
    // tanh keeps its digits near 0 (it was 2 sigmoid(2x) - 1, which gave 0 for 1e-10).
    check_close(f32({1e-10f, -0.3f, 5, -20, 0}).tanh(),
                {1e-10, std::tanh(-0.3), std::tanh(5.0), -1, 0});
    CHECK(error_of([] { (void)i32({1}).gelu(); }) ==
          at_line(__LINE__ - 1, "[gelu] needs a float tensor, got int32"));
    CHECK(error_of([] { (void)f32({1}).clip(NAN, 1); }) ==
          at_line(__LINE__ - 1, "[clip] bounds must be numbers, got nan and 1.000000"));
}

TEST_CASE("rounding: floor, ceil, round half to even, trunc, sign, isnan, isinf") {
    const Tensor x = f32({-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 0.49999997f, -3.7f, 3.7f, 1e10f,
                          kInf, kNaN, -0.0f});
    check_exact(x.floor(), {-3, -2, -1, 0, 1, 2, 0, -4, 3, 1e10f, kInf, kNaN, -0.0f});
    check_exact(x.ceil(), {-2, -1, -0.0f, 1, 2, 3, 1, -3, 4, 1e10f, kInf, kNaN, -0.0f});
    check_exact(x.round(), {-2, -2, -0.0f, 0, 2, 2, 0, -4, 4, 1e10f, kInf, kNaN, -0.0f});
    check_exact(x.trunc(), {-2, -1, -0.0f, 0, 1, 2, 0, -3, 3, 1e10f, kInf, kNaN, -0.0f});
    check_exact(f32({-2, 0, 3, kNaN, -0.0f}).sign(), {-1, 0, 1, kNaN, -0.0f});
    check_exact(i32({-5, 0, 7}).sign(), {-1, 0, 1});
    check_exact(i32({-5, 7}).floor(), {-5, 7});
    CHECK(f32({1, kNaN, kInf}).isnan().to_vector<bool>() == std::vector<bool>{false, true, false});
    CHECK(f32({1, kNaN, -kInf}).isinf().to_vector<bool>() == std::vector<bool>{false, false, true});
    CHECK(i32({1}).isnan().to_vector<bool>() == std::vector<bool>{false});
    CHECK(i32({1}).isinf().dtype() == DType::Bool);
    // Rounding every float of a sweep agrees with the C library.
    const std::vector<float> xs = random_floats(20000, -1e4f, 1e4f, 3);
    std::vector<float> halves;
    for (int i = -200; i <= 200; ++i) halves.push_back(static_cast<float>(i) * 0.5f);
    for (const auto& v : {xs, halves}) {
        const Tensor t = Tensor::from_vector(v);
        const auto fl = t.floor().to_vector<float>(), ce = t.ceil().to_vector<float>(),
                   ro = t.round().to_vector<float>(), tr = t.trunc().to_vector<float>();
        int bad = 0;
        for (size_t i = 0; i < v.size(); ++i)
            bad += !same(fl[i], std::floor(v[i])) + !same(ce[i], std::ceil(v[i])) +
                   !same(ro[i], std::nearbyint(v[i])) + !same(tr[i], std::trunc(v[i]));
        CHECK(bad == 0);
    }
}

TEST_CASE("tan, sinh, cosh, atan, tanh: within their stated ulp of libm") {
    const auto tan_xs = sweep(-20.0f, 20.0f, 0.00731f);
    const auto hyp_xs = sweep(-10.0f, 10.0f, 0.00113f);
    // Beyond |x| = 10 exp's own argument rounding dominates: e^x is 2^(x * log2 e) with the
    // product rounded to float, about |x| ulp.
    const auto big_xs = sweep(-89.0f, 89.0f, 0.00913f);
    std::vector<float> small;
    for (float x = 1e-30f; x < 1.0f; x *= 1.1f) {
        small.push_back(x);
        small.push_back(-x);
    }
    const auto atan_xs = sweep(-1000.0f, 1000.0f, 0.0417f);
    struct Row {
        std::string name;
        int64_t worst, bound;
    };
    const auto tan = [](const Tensor& t) { return t.tan(); };
    const auto sinh = [](const Tensor& t) { return t.sinh(); };
    const auto cosh = [](const Tensor& t) { return t.cosh(); };
    const auto atan = [](const Tensor& t) { return t.atan(); };
    const auto tanh = [](const Tensor& t) { return t.tanh(); };
    const auto lib_tan = [](double x) { return std::tan(x); };
    const auto lib_sinh = [](double x) { return std::sinh(x); };
    const auto lib_cosh = [](double x) { return std::cosh(x); };
    const auto lib_atan = [](double x) { return std::atan(x); };
    const auto lib_tanh = [](double x) { return std::tanh(x); };
    const auto tanh_xs = sweep(-10.0f, 10.0f, 0.00137f);
    const Row rows[] = {
        {"tan", worst_ulp(tan_xs, tan, lib_tan), 4},
        {"sinh", worst_ulp(hyp_xs, sinh, lib_sinh), 12},
        {"sinh near 0", worst_ulp(small, sinh, lib_sinh), 12},
        {"sinh |x| <= 89", worst_ulp(big_xs, sinh, lib_sinh), 100},
        {"cosh", worst_ulp(hyp_xs, cosh, lib_cosh), 12},
        {"cosh |x| <= 89", worst_ulp(big_xs, cosh, lib_cosh), 100},
        {"atan", worst_ulp(atan_xs, atan, lib_atan), 4},
        {"atan near 0", worst_ulp(small, atan, lib_atan), 4},
        {"tanh", worst_ulp(tanh_xs, tanh, lib_tanh), 8},
        {"tanh near 0", worst_ulp(small, tanh, lib_tanh), 8},
    };
    for (const Row& r : rows) {
        MESSAGE(r.name, ": worst ", r.worst, " ulp (bound ", r.bound, ")");
        CAPTURE(r.name);
        CHECK(r.worst <= r.bound);
    }
    check_exact(f32({kInf, -kInf, kNaN, 0, -0.0f}).atan(),
                {static_cast<float>(M_PI / 2), static_cast<float>(-M_PI / 2), kNaN, 0, -0.0f});
    check_exact(f32({kInf, -kInf, kNaN, 0}).sinh(), {kInf, -kInf, kNaN, 0});
    check_exact(f32({kInf, -kInf, kNaN, 0}).cosh(), {kInf, kInf, kNaN, 1});
    check_exact(f32({kInf, -kInf, kNaN, 0}).tanh(), {1, -1, kNaN, 0});
}

TEST_CASE("% and floor_div have Python's signs; bitwise and logical ops") {
    std::vector<int32_t> as, bs;
    for (int a = -9; a <= 9; ++a)
        for (int b = -4; b <= 4; ++b)
            if (b != 0) {
                as.push_back(a);
                bs.push_back(b);
            }
    const Tensor a = Tensor::from_vector(as), b = Tensor::from_vector(bs);
    const auto mod = (a % b).to_vector<int32_t>(), div = floor_div(a, b).to_vector<int32_t>();
    for (size_t i = 0; i < as.size(); ++i) {
        CAPTURE(as[i]);
        CAPTURE(bs[i]);
        const auto q = static_cast<int32_t>(
            std::floor(static_cast<double>(as[i]) / static_cast<double>(bs[i])));
        CHECK(div[i] == q);
        CHECK(mod[i] == as[i] - q * bs[i]);
    }
    check_exact(f32({5.5f, -5.5f, 5.5f, -5.5f}) % f32({-2, 2, 2, -2}), {-0.5f, 0.5f, 1.5f, -1.5f});
    check_exact(floor_div(f32({-7, 7}), f32({2, 2})), {-4, 3});
    check_exact(i32({7, -7}) % 3, {1, 2});
    check_exact(floor_div(i32({7, -7}), 2), {3, -4});
    check_exact(Tensor::from_vector<uint32_t>({7, 9}) % 4u, {3, 1});
    // Bitwise.
    check_exact(i32({12, -1}) & i32({10, 5}), {8, 5});
    check_exact(i32({12, 0}) | i32({3, -8}), {15, -8});
    check_exact(i32({12, -1}) ^ i32({10, 5}), {6, -6});
    check_exact(~i32({0, 5, -1}), {-1, -6, 0});
    check_exact(i32({1, 3, 1, -8}) << i32({4, 2, 40, 1}), {16, 12, 0, -16});
    check_exact(i32({256, -8, -8, 8}) >> i32({4, 1, 40, 40}), {16, -4, -1, 0});
    CHECK((~Tensor::from_vector<bool>({true, false})).to_vector<bool>() ==
          std::vector<bool>{false, true});
    CHECK((Tensor::from_vector<bool>({true, true, false}) &
           Tensor::from_vector<bool>({true, false, false}))
              .to_vector<bool>() == std::vector<bool>{true, false, false});
    // Logical ops: nonzero is true.
    CHECK(logical_and(f32({0, 2, -1, 0}), f32({1, 3, 0, 0})).to_vector<bool>() ==
          std::vector<bool>{false, true, false, false});
    CHECK(logical_or(i32({0, 2, 0}), i32({0, 0, 5})).to_vector<bool>() ==
          std::vector<bool>{false, true, true});
    CHECK(logical_not(f32({0, 2, kNaN})).to_vector<bool>() ==
          std::vector<bool>{true, false, false});
    CHECK(error_of([] { (void)(f32({1}) & f32({1})); }) ==
          at_line(__LINE__ - 1, "[and] needs an integer or bool tensor, got float32"));
    CHECK(error_of([] { (void)(f32({1}) << f32({1})); }) ==
          at_line(__LINE__ - 1, "[shl] needs an integer tensor, got float32"));
    CHECK(error_of([] { (void)(~f32({1})); }) ==
          at_line(__LINE__ - 1, "[invert] needs an integer or bool tensor, got float32"));
}

TEST_CASE("masked_fill") {
    const Tensor x = f32({1, 2, 3, 4}).reshape({2, 2});
    const Tensor m = Tensor::from_vector<bool>({true, false});
    check_exact(x.masked_fill(m, -1), {-1, 2, -1, 4});
    CHECK(error_of([&] {
              (void)x.masked_fill(f32({1, 0}), 0);
          }) == at_line(__LINE__ - 2, "[masked_fill] mask must be bool, got float32"));
    CHECK(error_of([&] {
              (void)f32({1, 2}).masked_fill(Tensor::from_vector<bool>({true, false}, {2, 1}), 0);
          }) ==
          at_line(__LINE__ - 3, "[masked_fill] mask of shape [2, 1] does not broadcast to [2]"));
}

TEST_CASE("slice: Python semantics, steps of both signs, against a direct walk") {
    const int64_t n = 7;
    const Tensor x = Tensor::arange(n);
    std::vector<int64_t> ends;
    for (int64_t v = -10; v <= 10; ++v) ends.push_back(v);
    ends.push_back(Slice::end);
    int checked = 0;
    for (int64_t step : {-3, -2, -1, 1, 2, 3, 9})
        for (int64_t start : ends)
            for (int64_t stop : ends) {
                // Python: None as start is the first element in walking order; negative values
                // count from the end; then clamped to the walkable range.
                auto norm = [&](int64_t v, bool is_start) {
                    if (v == Slice::end)
                        return step > 0 ? (is_start ? 0 : n) : (is_start ? n - 1 : -1);
                    if (v < 0) v += n;
                    return step > 0 ? std::clamp<int64_t>(v, 0, n)
                                    : std::clamp<int64_t>(v, -1, n - 1);
                };
                const int64_t b = norm(start, true);
                const int64_t e = norm(stop, false);
                std::vector<float> want;
                for (int64_t i = b; step > 0 ? i < e : i > e; i += step)
                    want.push_back(static_cast<float>(i));
                CAPTURE(start);
                CAPTURE(stop);
                CAPTURE(step);
                const Tensor s = x.slice({Slice{start, stop, step}});
                CHECK(s.to_vector<float>() == want);
                ++checked;
            }
    CHECK(checked == 7 * 22 * 22);
    const Tensor m = Tensor::arange(12).reshape({3, 4});
    check_exact(m.slice({{Slice::end, Slice::end, -2}, {1, Slice::end, 2}}), {9, 11, 1, 3});
    CHECK(m.slice({{1, 2}}).shape() == Shape{1, 4});
    CHECK(m.slice({{0, 3, 2}, {3, 0, -1}}).to_vector<float>() ==
          std::vector<float>{3, 2, 1, 11, 10, 9});
    CHECK(error_of([&] {
              (void)m.slice({{0, 1, 0}});
          }) == at_line(__LINE__ - 2, "[slice] step must not be 0 (axis 0)"));
    CHECK(error_of([&] {
              (void)m.slice({{}, {}, {}});
          }) == at_line(__LINE__ - 2, "[slice] 3 slices for 2 dims [3, 4]"));
}

TEST_CASE("split, chunk, repeat, stack, tril, triu, linspace, *_like") {
    const Tensor x = Tensor::arange(8);
    auto sizes = [](const std::vector<Tensor>& parts) {
        std::vector<int64_t> s;
        for (const Tensor& p : parts) s.push_back(p.shape()[0]);
        return s;
    };
    const auto parts = x.split(3);
    CHECK(sizes(parts) == std::vector<int64_t>{3, 3, 2});
    check_exact(parts[2], {6, 7});
    CHECK(sizes(x.chunk(3)) == std::vector<int64_t>{3, 3, 2});
    CHECK(sizes(Tensor::arange(6).chunk(4)) == std::vector<int64_t>{2, 2, 2});
    CHECK(sizes(Tensor::arange(5).chunk(4)) == std::vector<int64_t>{2, 2, 1});
    const auto cols = Tensor::arange(6).reshape({2, 3}).split(2, -1);
    REQUIRE(cols.size() == 2);
    check_exact(cols[1], {2, 5});
    CHECK(error_of([&] { (void)x.split(0); }) ==
          at_line(__LINE__ - 1, "[split] split size must be positive, got 0"));
    CHECK(error_of([&] { (void)x.chunk(-1); }) ==
          at_line(__LINE__ - 1, "[chunk] number of chunks must be positive, got -1"));

    const Tensor r = f32({1, 2}).repeat({2, 3});
    CHECK(r.shape() == Shape{2, 6});
    check_exact(r, {1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2});
    check_exact(Tensor::arange(4).reshape({2, 2}).repeat({2, 1}), {0, 1, 2, 3, 0, 1, 2, 3});
    CHECK(error_of([] {
              (void)f32({1, 2}).reshape({1, 2}).repeat({2});
          }) ==
          at_line(__LINE__ - 3, "[repeat] needs at least 2 repeat counts for [1, 2], got [2]"));

    const Tensor a = f32({1, 2, 3}), b = f32({4, 5, 6});
    check_exact(Tensor::stack({a, b}), {1, 2, 3, 4, 5, 6});
    const Tensor s1 = Tensor::stack({a, b}, -1);
    CHECK(s1.shape() == Shape{3, 2});
    check_exact(s1, {1, 4, 2, 5, 3, 6});
    CHECK(error_of([&] {
              (void)Tensor::stack({a, f32({1, 2})});
          }) == at_line(__LINE__ - 2, "[stack] tensor 1 has shape [2], tensor 0 has [3]"));
    CHECK(error_of([] { (void)Tensor::stack({}); }) ==
          at_line(__LINE__ - 1, "[stack] needs at least one tensor"));

    const Tensor m = Tensor::arange(12).reshape({3, 4}) + 1.0f;
    check_exact(m.tril(), {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
    check_exact(m.tril(-1), {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0});
    check_exact(m.triu(), {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
    check_exact(m.triu(2), {0, 0, 3, 4, 0, 0, 0, 8, 0, 0, 0, 0});
    CHECK(error_of([] { (void)f32({1}).tril(); }) ==
          at_line(__LINE__ - 1, "[tril] needs at least 2 dims, got [1]"));

    check_exact(Tensor::linspace(0, 1, 5), {0, 0.25f, 0.5f, 0.75f, 1});
    check_exact(Tensor::linspace(-1, 1, 1), {-1});
    CHECK(Tensor::linspace(0, 1, 0).shape() == Shape{0});
    CHECK(Tensor::linspace(0, 10, 4, DType::Int32).to_vector<int32_t>() ==
          std::vector<int32_t>{0, 3, 6, 10});
    CHECK(Tensor::linspace(0.1, 0.7, 7).to_vector<float>().back() == 0.7f); // the end is exact

    const Tensor t = i32({1, 2, 3}).reshape({3, 1});
    CHECK(Tensor::zeros_like(t).to_vector<int32_t>() == std::vector<int32_t>{0, 0, 0});
    CHECK(Tensor::ones_like(t).shape() == Shape{3, 1});
    CHECK(Tensor::full_like(t, 7).to_vector<int32_t>() == std::vector<int32_t>{7, 7, 7});
    CHECK(Tensor::full_like(f32({1}), 0.5).item<float>() == 0.5f);
}

TEST_CASE("any, all, var, std, logsumexp") {
    const Tensor x = f32({0, 1, 0, 0, 0, 0}).reshape({2, 3});
    CHECK(x.any(1).to_vector<bool>() == std::vector<bool>{true, false});
    CHECK(x.all(0).to_vector<bool>() == std::vector<bool>{false, false, false});
    CHECK(x.any().item<bool>());
    CHECK(!x.all().item<bool>());
    CHECK(f32({1, -1, kNaN}).all().item<bool>());
    CHECK(i32({0, 0}).any(0, true).shape() == Shape{1});
    CHECK(!Tensor::zeros({0}).any().item<bool>()); // empty: false and true
    CHECK(Tensor::zeros({0}).all().item<bool>());
    CHECK(Tensor::zeros({2, 0}).all(1).to_vector<bool>() == std::vector<bool>{true, true});

    const Tensor v = f32({1, 2, 3, 4});
    check_close(v.var(), {5.0 / 3});
    check_close(v.var({}, false, 0), {1.25});
    check_close(v.std(), {std::sqrt(5.0 / 3)});
    check_close(f32({1, 2, 3, 5, 8, 13}).reshape({2, 3}).var(1, true), {1, 49.0 / 3});
    CHECK(f32({1, 2, 3, 5, 8, 13}).reshape({2, 3}).var(1, true).shape() == Shape{2, 1});
    CHECK(std::isnan(f32({3}).var({}, false, 1).item<float>())); // 0 / 0: no degrees of freedom

    check_close(f32({1, 2, 3}).logsumexp(0), {3.40760596444438});
    check_close(f32({1000, 1000}).logsumexp(0), {1000.6931471805599});
    check_close(f32({-1000, -1000}).logsumexp(0), {-999.3068528194401});
    check_exact(f32({-kInf, -kInf}).logsumexp(0), {-kInf});
    check_exact(f32({kInf, 1}).logsumexp(0), {kInf});
    CHECK(f32({1, 2, 3, 4}).reshape({2, 2}).logsumexp(1, true).shape() == Shape{2, 1});
    CHECK(error_of([] { (void)i32({1}).var(); }) ==
          at_line(__LINE__ - 1, "[var] needs a float tensor, got int32"));
}

TEST_CASE("the new ops agree with the reference interpreter on random inputs") {
    const Tensor x = Tensor::from_vector(random_floats(257, -6, 6, 11));
    const Tensor y = Tensor::from_vector(random_floats(257, 0.1f, 3, 12));
    check_reference(x.gelu(), 1e-5);
    check_reference(x.silu(), 1e-5);
    check_reference(x.softplus(), 1e-5);
    check_reference(x.mish(), 1e-5);
    check_reference(x.elu(0.5), 1e-5);
    check_reference(x.leaky_relu(0.2), 1e-6);
    check_reference(x.clip(-1, 2), 0);
    check_reference(x.floor() + x.ceil() * 2 + x.round() * 4 + x.trunc() * 8, 0);
    check_reference(x.sign(), 0);
    check_reference(x.tan(), 1e-4);
    check_reference(x.sinh(), 1e-5);
    check_reference(x.cosh(), 1e-5);
    check_reference(x.atan(), 1e-5);
    check_reference(x.tanh(), 1e-5);
    check_reference(y.pow(x), 1e-5);
    check_reference(x.pow(3.0) + y.pow(0.7), 1e-5);
    check_reference(x % y + floor_div(x, y), 1e-5);
    check_reference(y.rsqrt(), 1e-6);
    const Tensor m = x.reshape({1, 257}).expand({3, 257}) * f32({1, 2, 3}).reshape({3, 1});
    check_reference(m.logsumexp(1), 1e-5);
    check_reference(m.var(1) + m.std(0).sum(), 1e-4);
    check_reference(m.slice({{Slice::end, Slice::end, -1}, {3, 250, 7}}), 0);
    check_reference(m.tril(5) + m.triu(-3), 0);
    check_reference(Tensor::stack({m, m * 2.0f}, 1).repeat({2, 1, 1}), 0);
    const Tensor ints = Tensor::from_vector<int32_t>({-100, -7, -1, 0, 3, 77, 1000});
    const Tensor divs = Tensor::from_vector<int32_t>({3, -2, 5, 7, -3, 4, -9});
    check_reference(ints % divs + floor_div(ints, divs) * 1000, 0);
    check_reference((ints & divs) + (ints | divs) + (ints ^ divs) + (ints >> 2) + (divs << 3), 0);
    check_reference(ints.pow(Tensor::from_vector<int32_t>({3, 2, 5, 0, 4, 3, 2})), 0);
}
