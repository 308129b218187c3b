// tempura::nn against direct loops written here (the definitions, element by element): the
// convolutions with stride, padding, dilation, groups and bias, the poolings, the norms,
// attention with and without the causal mask, and the losses; the exact error messages.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <tempura/backend/llvm_cpu.hpp>
#include <tempura/tempura.hpp>

#include "../error_at.hpp"
#include "../support.hpp"

namespace {

using tempura::DType;
using tempura::Shape;
using tempura::Tensor;
namespace nn = tempura::nn;

std::vector<float> randoms(int64_t n, uint32_t seed, float lo = -1, float hi = 1) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = d(rng);
    return v;
}

void check_near(const Tensor& t, const std::vector<double>& want, double tol = 1e-4) {
    const std::vector<float> got = t.to_vector<float>();
    REQUIRE(got.size() == want.size());
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
        if (!(std::fabs(got[i] - want[i]) <= tol * std::max(1.0, std::fabs(want[i])))) {
            if (bad++ < 5) MESSAGE("element ", i, ": got ", got[i], ", want ", want[i]);
        }
    CHECK(bad == 0);
}

struct Conv {
    int64_t n, cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups;
    bool bias;
};

// The definition of conv2d, one output element at a time.
std::vector<double> conv2d_loops(const Conv& c, const std::vector<float>& x,
                                 const std::vector<float>& w, const std::vector<float>& b) {
    const int64_t oh = (c.h + 2 * c.ph - c.dh * (c.kh - 1) - 1) / c.sh + 1;
    const int64_t ow = (c.w + 2 * c.pw - c.dw * (c.kw - 1) - 1) / c.sw + 1;
    const int64_t cg = c.cin / c.groups, rc = c.cout / c.groups;
    std::vector<double> out;
    for (int64_t n = 0; n < c.n; ++n)
        for (int64_t co = 0; co < c.cout; ++co)
            for (int64_t i = 0; i < oh; ++i)
                for (int64_t j = 0; j < ow; ++j) {
                    double acc = c.bias ? b[co] : 0.0;
                    const int64_t g = co / rc;
                    for (int64_t ci = 0; ci < cg; ++ci)
                        for (int64_t a = 0; a < c.kh; ++a)
                            for (int64_t e = 0; e < c.kw; ++e) {
                                const int64_t y = i * c.sh - c.ph + a * c.dh;
                                const int64_t z = j * c.sw - c.pw + e * c.dw;
                                if (y < 0 || y >= c.h || z < 0 || z >= c.w) continue;
                                acc += double{x[((n * c.cin + g * cg + ci) * c.h + y) * c.w + z]} *
                                       w[((co * cg + ci) * c.kh + a) * c.kw + e];
                            }
                    out.push_back(acc);
                }
    return out;
}

// conv2d of each case (random input, weight and bias from `seed` on) against conv2d_loops.
void check_conv_cases(const std::vector<Conv>& cases, uint32_t seed) {
    for (const Conv& c : cases) {
        CAPTURE(seed);
        const auto x = randoms(c.n * c.cin * c.h * c.w, seed++);
        const auto w = randoms(c.cout * (c.cin / c.groups) * c.kh * c.kw, seed++);
        const auto b = randoms(c.cout, seed++);
        nn::ConvOptions o;
        o.stride = {c.sh, c.sw};
        o.padding = {c.ph, c.pw};
        o.dilation = {c.dh, c.dw};
        o.groups = c.groups;
        if (c.bias) o.bias = Tensor::from_vector(b);
        check_near(nn::conv2d(Tensor::from_vector(x, {c.n, c.cin, c.h, c.w}),
                              Tensor::from_vector(w, {c.cout, c.cin / c.groups, c.kh, c.kw}), o),
                   conv2d_loops(c, x, w, b));
    }
}

} // namespace

TEST_CASE("conv2d: stride, padding, dilation, groups and bias against the definition") {
    const Conv cases[] = {
        {1, 1, 5, 5, 1, 3, 3, 1, 1, 0, 0, 1, 1, 1, false},
        {2, 3, 7, 6, 4, 3, 2, 2, 1, 1, 0, 1, 1, 1, true},
        {1, 4, 9, 9, 6, 3, 3, 2, 3, 2, 1, 2, 1, 2, true},
        {2, 4, 6, 5, 4, 1, 1, 1, 1, 0, 0, 1, 1, 4, false}, // depthwise 1x1
        {1, 2, 8, 8, 2, 5, 5, 3, 3, 2, 2, 1, 1, 1, true},
        {1, 3, 4, 4, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, true}, // depthwise 3x3, same size
    };
    check_conv_cases({std::begin(cases), std::end(cases)}, 1);
}

TEST_CASE("conv2d: one kernel; conv1d and conv_transpose2d against the definition") {
    // Output rows of 16 (vectors already): the windows form.
    const auto x = randoms(2 * 3 * 6 * 18, 7);
    const auto w = randoms(4 * 3 * 3 * 3, 8);
    Tensor y =
        nn::conv2d(Tensor::from_vector(x, {2, 3, 6, 18}), Tensor::from_vector(w, {4, 3, 3, 3}));
    CHECK(y.shape() == Shape{2, 4, 4, 16});
    y.realize();
    CHECK(y.kernels().size() == 1); // the window view and the reduce fuse
    check_near(y, conv2d_loops({2, 3, 6, 18, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1, false}, x, w, {}));
    // Padded: the padded input is one copy kernel, then the window loads need no gates and are
    // vector loads (gated per lane, they would be split into scalar loads).
    nn::ConvOptions pad1;
    pad1.padding = {1};
    const auto xp = randoms(2 * 3 * 16 * 32, 11);
    Tensor yp = nn::conv2d(Tensor::from_vector(xp, {2, 3, 16, 32}),
                           Tensor::from_vector(w, {4, 3, 3, 3}), pad1);
    yp.realize();
    REQUIRE(yp.kernels().size() == 2);
    CHECK(yp.kernels()[0].name == "E_2_3_18_34");
    if (tempura::default_device() == "CPU" && // EMU renders per-thread code
        tempura::runtime::host_cpu_features().find("+avx512f") != std::string::npos)
        CHECK(yp.kernels()[1].source.find("load <16 x float>") != std::string::npos);
    const Conv pc{2, 3, 16, 32, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, false};
    check_near(yp, conv2d_loops(pc, xp, w, {}));

    // conv1d is conv2d with a height of 1.
    const auto x1 = randoms(2 * 4 * 9, 9), w1 = randoms(6 * 2 * 3, 10);
    nn::ConvOptions o;
    o.stride = {2};
    o.padding = {1};
    o.dilation = {2};
    o.groups = 2;
    const Conv as2d{2, 4, 1, 9, 6, 1, 3, 1, 2, 0, 1, 1, 2, 2, false};
    check_near(
        nn::conv1d(Tensor::from_vector(x1, {2, 4, 9}), Tensor::from_vector(w1, {6, 2, 3}), o),
        conv2d_loops(as2d, x1, w1, {}));

    // conv_transpose2d scatters each input pixel through the kernel.
    const int64_t N = 1, cin = 4, H = 3, W = 4, rc = 3, g = 2, kh = 3, kw = 2, s = 2, p = 1,
                  opad = 1;
    const auto xt = randoms(N * cin * H * W, 11), wt = randoms(cin * rc * kh * kw, 12),
               bt = randoms(g * rc, 13);
    nn::ConvOptions ot;
    ot.stride = {s};
    ot.padding = {p};
    ot.output_padding = {opad};
    ot.groups = g;
    ot.bias = Tensor::from_vector(bt);
    const Tensor yt = nn::conv_transpose2d(Tensor::from_vector(xt, {N, cin, H, W}),
                                           Tensor::from_vector(wt, {cin, rc, kh, kw}), ot);
    const int64_t OH = (H - 1) * s - 2 * p + (kh - 1) + opad + 1,
                  OW = (W - 1) * s - 2 * p + (kw - 1) + opad + 1;
    CHECK(yt.shape() == Shape{N, g * rc, OH, OW});
    std::vector<double> want(static_cast<size_t>(N * g * rc * OH * OW));
    for (int64_t co = 0; co < g * rc; ++co)
        for (int64_t i = 0; i < OH * OW; ++i) want[co * OH * OW + i] = bt[co];
    const int64_t cg = cin / g;
    for (int64_t ci = 0; ci < cin; ++ci)
        for (int64_t i = 0; i < H; ++i)
            for (int64_t j = 0; j < W; ++j)
                for (int64_t r = 0; r < rc; ++r)
                    for (int64_t a = 0; a < kh; ++a)
                        for (int64_t e = 0; e < kw; ++e) {
                            const int64_t y2 = i * s - p + a, z2 = j * s - p + e;
                            if (y2 < 0 || y2 >= OH || z2 < 0 || z2 >= OW) continue;
                            const int64_t co = (ci / cg) * rc + r;
                            want[(co * OH + y2) * OW + z2] += double{xt[(ci * H + i) * W + j]} *
                                                              wt[((ci * rc + r) * kh + a) * kw + e];
                        }
    check_near(yt, want);
}

TEST_CASE("conv2d: the flat form over rows no vector divides, the gathered form when strided") {
    // 7 x 7 with padding 1: the padded input copied with one more row (the rounded-up positions
    // read it), one reduce over the 7 x 9 = 63 positions rounded up to 64 in vector lanes, and
    // the realized result read back without the two extra columns a row.
    const auto x = randoms(2 * 8 * 7 * 7, 21), w = randoms(16 * 8 * 3 * 3, 22);
    nn::ConvOptions pad1;
    pad1.padding = {1};
    Tensor y = nn::conv2d(Tensor::from_vector(x, {2, 8, 7, 7}),
                          Tensor::from_vector(w, {16, 8, 3, 3}), pad1);
    CHECK(y.shape() == Shape{2, 16, 7, 7});
    y.realize();
    // On a device of 8-float vectors and 16 registers (AVX2) the positions are rounded up to a
    // multiple of 24 (three vectors, its register tile), to 72, and the copy takes two more rows.
    const bool by24 =
        tempura::runtime::device_limits(tempura::runtime::default_device_index()).vector_bytes ==
        32;
    REQUIRE(y.kernels().size() == 3);
    CHECK(y.kernels()[0].name == (by24 ? "E_2_8_11_9" : "E_2_8_10_9"));
    CHECK(y.kernels()[1].name == (by24 ? "r_2_16_72_8_3_3" : "r_2_16_64_8_3_3"));
    CHECK(y.kernels()[2].name == "E_2_16_7_7");
    if (tempura::default_device() == "CPU" &&
        tempura::runtime::host_cpu_features().find("+avx512f") != std::string::npos)
        CHECK(y.kernels()[1].source.find("load <16 x float>") != std::string::npos);
    check_near(y, conv2d_loops({2, 8, 7, 7, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, false}, x, w, {}));

    // Stride 2: every tap's row gathered once (9 taps, not the 16 of the phases), then the
    // same reduce over the 4 x 4 = 16 positions rounded up to 32 (24), read back without the rest.
    const auto xs = randoms(1 * 8 * 8 * 8, 23);
    nn::ConvOptions s2;
    s2.padding = {1};
    s2.stride = {2};
    Tensor ys = nn::conv2d(Tensor::from_vector(xs, {1, 8, 8, 8}),
                           Tensor::from_vector(w, {16, 8, 3, 3}), s2);
    ys.realize();
    REQUIRE(ys.kernels().size() == 3);
    CHECK(ys.kernels()[0].name == (by24 ? "E_8_3_3_24" : "E_8_3_3_32"));
    CHECK(ys.kernels()[1].name == (by24 ? "r_16_24_8_3_3" : "r_16_32_8_3_3"));
    CHECK(ys.kernels()[2].name == "E_16_4_4");
    check_near(ys, conv2d_loops({1, 8, 8, 8, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, false}, xs, w, {}));

    // Both forms with dilation, groups, odd sizes and bias against the definition; a 7 x 7
    // kernel at stride 2 (over 12 times its input gathered) keeps the phases.
    const Conv cases[] = {
        {1, 4, 9, 13, 6, 3, 3, 1, 1, 2, 1, 2, 1, 2, true},  // flat, dilated rows, groups
        {2, 3, 5, 11, 4, 2, 3, 1, 1, 0, 2, 1, 2, 1, false}, // flat, no padding, 2 x 3
        {1, 4, 10, 9, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, true},  // flat depthwise
        {2, 3, 9, 13, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, true},  // gathered
        {1, 4, 9, 9, 4, 2, 2, 2, 2, 0, 0, 1, 1, 2, false},  // gathered 2 x 2, groups
        {1, 2, 8, 10, 4, 1, 1, 2, 2, 0, 0, 1, 1, 1, false}, // gathered 1 x 1
        {1, 3, 12, 11, 2, 7, 7, 2, 2, 3, 3, 1, 1, 1, true}, // phases
        {2, 4, 9, 9, 4, 3, 3, 2, 2, 1, 1, 1, 1, 4, true},   // depthwise at stride 2: phases
        {2, 6, 7, 7, 4, 1, 1, 1, 1, 0, 0, 1, 1, 2, true},   // 1 x 1 over 49 positions, groups
    };
    check_conv_cases({std::begin(cases), std::end(cases)}, 30);

    // 1 x 1 over a 7 x 7 image: the 49 positions one axis rounded up to 64 (the input copied
    // with the zero columns), the result read back without them. A depthwise convolution at
    // stride 2 reduces over its phases, not over gathered taps: with one channel a group no
    // tap's copy is reused.
    const auto xp = randoms(1 * 16 * 7 * 7, 41), wp = randoms(8 * 16, 42);
    Tensor yp =
        nn::conv2d(Tensor::from_vector(xp, {1, 16, 7, 7}), Tensor::from_vector(wp, {8, 16, 1, 1}));
    yp.realize();
    REQUIRE(yp.kernels().size() == 3);
    CHECK(yp.kernels()[0].name == "E_16_64");
    CHECK(yp.kernels()[1].name == "r_8_64_16");
    CHECK(yp.kernels()[2].name == "E_8_7_7");
    check_near(yp, conv2d_loops({1, 16, 7, 7, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1, false}, xp, wp, {}));
    const auto xd = randoms(1 * 8 * 8 * 8, 43), wd = randoms(8 * 9, 44);
    nn::ConvOptions dw2;
    dw2.padding = {1};
    dw2.stride = {2};
    dw2.groups = 8;
    Tensor yd = nn::conv2d(Tensor::from_vector(xd, {1, 8, 8, 8}),
                           Tensor::from_vector(wd, {8, 1, 3, 3}), dw2);
    yd.realize();
    for (const auto& k : yd.kernels()) CHECK(k.name.find("_3_3_") == std::string::npos);
    check_near(yd, conv2d_loops({1, 8, 8, 8, 8, 3, 3, 2, 2, 1, 1, 1, 1, 8, false}, xd, wd, {}));
}

TEST_CASE("conv errors name the values") {
    const Tensor x = Tensor::zeros({1, 3, 5, 5});
    CHECK(error_of([&] {
              (void)nn::conv2d(x, Tensor::zeros({2, 4, 3, 3}));
          }) == at_line(__LINE__ - 2, "[conv2d] input has 3 channels, weight expects 4"));
    CHECK(error_of([&] {
              (void)nn::conv2d(x, Tensor::zeros({2, 3, 6, 6}));
          }) == at_line(__LINE__ - 2, "[conv2d] kernel [6, 6] (dilation [1, 1]) is larger than the "
                                      "padded input [1, 3, 5, 5]"));
    nn::ConvOptions o;
    o.groups = 2;
    CHECK(error_of([&] {
              (void)nn::conv2d(x, Tensor::zeros({2, 3, 3, 3}), o);
          }) ==
          at_line(__LINE__ - 3,
                  "[conv2d] groups 2 must divide the input channels 3 and the output channels 2"));
    o.groups = 1;
    o.stride = {0};
    CHECK(error_of([&] {
              (void)nn::conv2d(x, Tensor::zeros({2, 3, 3, 3}), o);
          }) == at_line(__LINE__ - 2, "[conv2d] stride must be positive, got [0]"));
    CHECK(error_of([&] {
              (void)nn::conv2d(Tensor::zeros({3, 5, 5}), Tensor::zeros({2, 3, 3, 3}));
          }) ==
          at_line(__LINE__ - 3, "[conv2d] input must have 4 dims [N, C, ...], got [3, 5, 5]"));
}

TEST_CASE("max_pool2d, avg_pool2d, adaptive_avg_pool2d against the definition") {
    const int64_t N = 2, C = 3, H = 7, W = 6;
    const auto x = randoms(N * C * H * W, 21);
    const Tensor t = Tensor::from_vector(x, {N, C, H, W});
    struct Case {
        int64_t k, s, p;
    };
    for (const Case c : {Case{2, 2, 0}, Case{3, 1, 1}, Case{3, 2, 1}, Case{2, 3, 0}}) {
        CAPTURE(c.k);
        CAPTURE(c.s);
        CAPTURE(c.p);
        const int64_t oh = (H + 2 * c.p - c.k) / c.s + 1, ow = (W + 2 * c.p - c.k) / c.s + 1;
        std::vector<double> mx, av;
        for (int64_t nc = 0; nc < N * C; ++nc)
            for (int64_t i = 0; i < oh; ++i)
                for (int64_t j = 0; j < ow; ++j) {
                    double m = -INFINITY, s = 0;
                    for (int64_t a = 0; a < c.k; ++a)
                        for (int64_t e = 0; e < c.k; ++e) {
                            const int64_t y = i * c.s - c.p + a, z = j * c.s - c.p + e;
                            if (y < 0 || y >= H || z < 0 || z >= W) continue;
                            m = std::max(m, double{x[(nc * H + y) * W + z]});
                            s += x[(nc * H + y) * W + z];
                        }
                    mx.push_back(m);
                    av.push_back(s / static_cast<double>(c.k * c.k));
                }
        const nn::PoolOptions o{{c.k}, {c.s}, {c.p}};
        check_near(nn::max_pool2d(t, o), mx, 0);
        check_near(nn::avg_pool2d(t, o), av);
    }
    // Adaptive: windows [floor(i H / OH), ceil((i + 1) H / OH)).
    const int64_t OH = 3, OW = 4;
    std::vector<double> want;
    for (int64_t nc = 0; nc < N * C; ++nc)
        for (int64_t i = 0; i < OH; ++i)
            for (int64_t j = 0; j < OW; ++j) {
                const int64_t y0 = i * H / OH, y1 = ((i + 1) * H + OH - 1) / OH;
                const int64_t z0 = j * W / OW, z1 = ((j + 1) * W + OW - 1) / OW;
                double s = 0;
                for (int64_t y = y0; y < y1; ++y)
                    for (int64_t z = z0; z < z1; ++z) s += x[(nc * H + y) * W + z];
                want.push_back(s / static_cast<double>((y1 - y0) * (z1 - z0)));
            }
    check_near(nn::adaptive_avg_pool2d(t, {OH, OW}), want);
    CHECK(error_of([&] { (void)nn::max_pool2d(t, {{8}}); }) ==
          at_line(__LINE__ - 1,
                  "[max_pool2d] kernel [8, 8] is larger than the padded input [2, 3, 7, 6]"));
}

TEST_CASE("max_pool2d at stride 2: the window rows are one wide load and a shuffle") {
    // 3 x 3 at stride 2 with padding 1 over 64 x 64: the padded input is one copy kernel, then
    // each 16-lane row of a tap's elements two apart is read as one load of the 32 elements it
    // spans (inside the buffer), every second lane kept; lane by lane it was 16 scalar loads.
    const int64_t H = 64, W = 64;
    const auto x = randoms(2 * H * W, 41);
    const Tensor t = Tensor::from_vector(x, {1, 2, H, W});
    Tensor y = nn::max_pool2d(t, {.kernel = {3}, .stride = {2}, .padding = {1}});
    y.realize();
    REQUIRE(y.kernels().size() == 2);
    CHECK(y.kernels()[0].name == "E_2_66_66");
    CHECK(y.kernels()[1].name == "r_2_32_32_3_3");
    if (tempura::default_device() == "CPU" &&
        tempura::runtime::host_cpu_features().find("+avx512f") != std::string::npos) {
        CHECK(y.kernels()[1].source.find("load <32 x float>") != std::string::npos);
        CHECK(y.kernels()[1].source.find("shufflevector <32 x float>") != std::string::npos);
    }
    std::vector<double> want;
    for (int64_t c = 0; c < 2; ++c)
        for (int64_t i = 0; i < 32; ++i)
            for (int64_t j = 0; j < 32; ++j) {
                double m = -INFINITY;
                for (int64_t a = 0; a < 3; ++a)
                    for (int64_t e = 0; e < 3; ++e) {
                        const int64_t r = 2 * i - 1 + a, q = 2 * j - 1 + e;
                        if (r >= 0 && r < H && q >= 0 && q < W)
                            m = std::max(m, double{x[(c * H + r) * W + q]});
                    }
                want.push_back(m);
            }
    check_near(y, want, 0);
}

TEST_CASE("layer_norm, batch_norm, group_norm, rms_norm against the definition") {
    const auto xv = randoms(2 * 4 * 3, 31, -3, 3);
    const Tensor x = Tensor::from_vector(xv, {2, 4, 3});
    const auto wv = randoms(4 * 3, 32), bv = randoms(4 * 3, 33);
    // layer_norm over the last two dims [4, 3].
    std::vector<double> ln;
    for (int64_t n = 0; n < 2; ++n) {
        double m = 0, v = 0;
        for (int64_t i = 0; i < 12; ++i) m += xv[n * 12 + i];
        m /= 12;
        for (int64_t i = 0; i < 12; ++i) v += (xv[n * 12 + i] - m) * (xv[n * 12 + i] - m);
        v /= 12;
        for (int64_t i = 0; i < 12; ++i)
            ln.push_back((xv[n * 12 + i] - m) / std::sqrt(v + 1e-5) * wv[i] + bv[i]);
    }
    check_near(
        nn::layer_norm(x, {4, 3}, Tensor::from_vector(wv, {4, 3}), Tensor::from_vector(bv, {4, 3})),
        ln);
    // batch_norm per channel (dim 1 of [2, 4, 3]).
    const auto mean = randoms(4, 34), var = randoms(4, 35, 0.5f, 2), w4 = randoms(4, 36),
               b4 = randoms(4, 37);
    std::vector<double> bn;
    for (int64_t n = 0; n < 2; ++n)
        for (int64_t c = 0; c < 4; ++c)
            for (int64_t i = 0; i < 3; ++i)
                bn.push_back(
                    (xv[(n * 4 + c) * 3 + i] - mean[c]) / std::sqrt(var[c] + 1e-5) * w4[c] + b4[c]);
    check_near(nn::batch_norm(x, Tensor::from_vector(mean), Tensor::from_vector(var),
                              Tensor::from_vector(w4), Tensor::from_vector(b4)),
               bn);
    // group_norm with 2 groups of 2 channels.
    std::vector<double> gn(xv.size());
    for (int64_t n = 0; n < 2; ++n)
        for (int64_t g = 0; g < 2; ++g) {
            const int64_t base = (n * 4 + g * 2) * 3;
            double m = 0, v = 0;
            for (int64_t i = 0; i < 6; ++i) m += xv[base + i];
            m /= 6;
            for (int64_t i = 0; i < 6; ++i) v += (xv[base + i] - m) * (xv[base + i] - m);
            v /= 6;
            for (int64_t i = 0; i < 6; ++i)
                gn[base + i] = (xv[base + i] - m) / std::sqrt(v + 1e-5) * w4[g * 2 + i / 3] +
                               b4[g * 2 + i / 3];
        }
    check_near(nn::group_norm(x, 2, Tensor::from_vector(w4), Tensor::from_vector(b4)), gn);
    // rms_norm over the last dim.
    const auto w3 = randoms(3, 38);
    std::vector<double> rn;
    for (int64_t r = 0; r < 8; ++r) {
        double ms = 0;
        for (int64_t i = 0; i < 3; ++i) ms += double{xv[r * 3 + i]} * xv[r * 3 + i];
        ms /= 3;
        for (int64_t i = 0; i < 3; ++i) rn.push_back(xv[r * 3 + i] / std::sqrt(ms + 1e-6) * w3[i]);
    }
    check_near(nn::rms_norm(x, Tensor::from_vector(w3)), rn);
    CHECK(error_of([&] {
              (void)nn::layer_norm(x, {3, 4});
          }) == at_line(__LINE__ - 2,
                        "[layer_norm] normalized_shape [3, 4] is not the end of [2, 4, 3]"));
    CHECK(error_of([&] { (void)nn::group_norm(x, 3); }) ==
          at_line(__LINE__ - 1, "[group_norm] groups 3 must divide the 4 channels"));
    CHECK(error_of([&] { (void)nn::batch_norm(x, Tensor::zeros({3}), Tensor::ones({4})); }) ==
          at_line(__LINE__ - 1, "[batch_norm] parameter of shape [3], expected [4]"));
}

TEST_CASE("scaled_dot_product_attention, causal or not, against the definition") {
    const int64_t B = 2, L = 4, S = 5, E = 3, Ev = 2;
    const auto q = randoms(B * L * E, 41), k = randoms(B * S * E, 42), v = randoms(B * S * Ev, 43);
    for (bool causal : {false, true}) {
        CAPTURE(causal);
        std::vector<double> want;
        for (int64_t b = 0; b < B; ++b)
            for (int64_t i = 0; i < L; ++i) {
                std::vector<double> s(S);
                double mx = -INFINITY;
                for (int64_t j = 0; j < S; ++j) {
                    double d = 0;
                    for (int64_t e = 0; e < E; ++e)
                        d += double{q[(b * L + i) * E + e]} * k[(b * S + j) * E + e];
                    s[j] = causal && j > i ? -INFINITY : d / std::sqrt(3.0);
                    mx = std::max(mx, s[j]);
                }
                double z = 0;
                for (double& x : s) z += (x = std::exp(x - mx));
                for (int64_t e = 0; e < Ev; ++e) {
                    double o = 0;
                    for (int64_t j = 0; j < S; ++j) o += s[j] / z * v[(b * S + j) * Ev + e];
                    want.push_back(o);
                }
            }
        check_near(nn::scaled_dot_product_attention(Tensor::from_vector(q, {B, L, E}),
                                                    Tensor::from_vector(k, {B, S, E}),
                                                    Tensor::from_vector(v, {B, S, Ev}), causal),
                   want);
    }
}

TEST_CASE("linear, one_hot and the losses") {
    const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    const Tensor w = Tensor::from_vector<float>({1, 0, -1, 2, 1, 0}, {2, 3});
    check_near(nn::linear(x, w), {-2, 4, -2, 13});
    check_near(nn::linear(x, w, Tensor::from_vector<float>({10, 20})), {8, 24, 8, 33});
    CHECK(error_of([&] {
              (void)nn::linear(x, Tensor::zeros({2, 4}));
          }) == at_line(__LINE__ - 2,
                        "[linear] input [2, 3] does not end in the weight's 4 input features"));

    CHECK(Tensor::from_vector<int32_t>({2, 0, 5}).one_hot(3).to_vector<int32_t>() ==
          std::vector<int32_t>{0, 0, 1, 1, 0, 0, 0, 0, 0});
    CHECK(error_of([] { (void)Tensor::zeros({2}).one_hot(3); }) ==
          at_line(__LINE__ - 1, "[one_hot] needs an integer tensor, got float32"));

    // cross_entropy of logits [[1, 2, 3], [1, 1, 1]] with targets [2, 0]:
    // mean(log(e + e^2 + e^3) - 3, log 3) = (0.40760596444438 + 1.09861228866811) / 2.
    const Tensor logits = Tensor::from_vector<float>({1, 2, 3, 1, 1, 1}, {2, 3});
    check_near(nn::cross_entropy(logits, Tensor::from_vector<int64_t>({2, 0})),
               {(0.40760596444438 + 1.09861228866811) / 2}, 1e-6);
    CHECK(error_of([&] {
              (void)nn::cross_entropy(logits, Tensor::from_vector<int32_t>({2, 3}));
          }) == at_line(__LINE__ - 2, "[cross_entropy] target 3 is out of range for 3 classes"));
    CHECK(error_of([&] { (void)nn::cross_entropy(logits, Tensor::zeros({2})); }) ==
          at_line(__LINE__ - 1, "[cross_entropy] target must be Int32 or Int64, got float32"));
    check_near(
        nn::mse_loss(Tensor::from_vector<float>({1, 2, 3}), Tensor::from_vector<float>({1, 0, 6})),
        {13.0 / 3}, 1e-6);
    // BCE with logits: mean(log(1 + e^x) - x y) at x = [0, 100, -100], y = [1, 1, 0]: no overflow.
    check_near(nn::binary_cross_entropy_with_logits(Tensor::from_vector<float>({0, 100, -100}),
                                                    Tensor::from_vector<float>({1, 1, 0})),
               {std::log(2.0) / 3}, 1e-6);
}
