// Float16 and BFloat16 end to end, on the CPU and on EMU: storage and rounding in from_vector,
// to_vector and cast, arithmetic (transcendentals in float32, rounded once), float32
// accumulation in reductions and matmuls, and the same bits on both devices.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "../error_at.hpp"
#include "../support.hpp"
#include "matmul_buffers.hpp"
#include "ptxas.hpp"
#include "tempura/backend/gpu.hpp"
#include "tempura/codegen/opts.hpp"
#include "tempura/codegen/stages.hpp"
#include "tempura/schedule/schedule.hpp"
#include "tempura/schedule/symbolic_shapes.hpp"
#include "tempura/symbolic/eval.hpp"
#include "tempura/tempura.hpp"

using namespace tempura;

namespace {

const float kInf = std::numeric_limits<float>::infinity();

// The float nearest x among the values of `dt` (round to nearest, ties to even), computed here
// by bit arithmetic on the float, independently of the library's converters.
float round_to(DType dt, float x) {
    if (std::isnan(x) || std::isinf(x)) return x;
    if (dt == DType::BFloat16) {
        uint32_t b;
        std::memcpy(&b, &x, 4);
        b += 0x7fff + ((b >> 16) & 1);
        b &= 0xffff0000u;
        float r;
        std::memcpy(&r, &b, 4);
        return r;
    }
    // Float16: 11 significant bits, exponents down to -14 (subnormals below), max 65504.
    const float a = std::fabs(x);
    if (a >= 65520.0f) return std::copysign(kInf, x);
    int e;
    std::frexp(a, &e); // a = m 2^e, m in [0.5, 1)
    const int exp = std::max(e - 1, -14);
    const float ulp = std::ldexp(1.0f, exp - 10);
    return std::copysign(std::nearbyint(a / ulp) * ulp, x);
}

// n small whole numbers over 8 (a matmul's A) or over 4 (its B): the products and sums of a
// tensor-core test's matmuls are exact, in float32 and in float16.
std::vector<float> a_values(int64_t n) {
    std::vector<float> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<float>((i * 37) % 17 - 8) / 8);
    return v;
}
std::vector<float> b_values(int64_t n) {
    std::vector<float> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<float>((i * 11) % 13 - 6) / 4);
    return v;
}

// A [m, k] and B [k, n] of those values as stored: A as [k, m] where a_t, B as [n, k] where b_t.
std::pair<Tensor, Tensor> stored_operands(int64_t m, int64_t k, int64_t n, bool a_t, bool b_t,
                                          DType dt) {
    return {Tensor::from_vector(a_values(m * k), a_t ? Shape{k, m} : Shape{m, k}, dt),
            Tensor::from_vector(b_values(k * n), b_t ? Shape{n, k} : Shape{k, n}, dt)};
}

// The matmul of a0 and b0 (as stored: read transposed where a_t, b_t) with `acc` accumulation,
// lowered with TC(stage, tiles) for a device of limits `lim` and run on EMU under them into an
// output of NaN: the lowered kernel, its EMU kernel, and EMU's product beside the CPU's.
struct TcOnEmu {
    codegen::LoweredKernel low;
    std::shared_ptr<const runtime::CompiledKernel> kernel;
    std::vector<float> got, want;
};
TcOnEmu tc_on_emu(const Tensor& a0, const Tensor& b0, bool a_t, bool b_t, DType acc, int64_t stage,
                  int64_t tiles, const codegen::DeviceLimits& lim, const std::string& name) {
    const Tensor a = a_t ? a0.transpose() : a0, b = b_t ? b0.transpose() : b0;
    const Tensor prod = a.matmul(b, acc);
    TcOnEmu r;
    r.want = prod.to_vector<float>();
    const std::vector<ScheduledKernel> ks = schedule_graph(prod.uop());
    REQUIRE(ks.size() == 1);
    std::vector<codegen::Opt> opts{{codegen::OptOp::Tc, stage, tiles}};
    r.low = codegen::lower_kernel_opt("r", ks[0].ast, lim, &opts);
    r.kernel = runtime::compile_emu_kernel(name, r.low.program,
                                           r.low.block[0] * r.low.block[1] * r.low.block[2]);
    const Tensor out =
        Tensor::from_vector(std::vector<float>(r.want.size(), NAN), prod.shape(), a0.dtype());
    const auto bufs = matmul_buffers(ks[0], out, a0, b0);
    runtime::emu_launch(*r.kernel, bufs.data(), nullptr, r.low.grid, r.low.block, lim);
    r.got = out.to_vector<float>();
    return r;
}

// What the TC opt says of a staging it does not know, before the value.
const std::string kBadStaging =
    "the staging is 0 or 1000 * pipeline tiles (0, 2, 3 or 4) + 100 * k-steps + 10 * row warps "
    "+ column warps (each 1, 2 or 4), or 10000 + that for warpgroups (k-steps 4), 20000 + that "
    "for warpgroups keeping an mma in flight (pipelines of 3 or 4), got ";

// The error TC(stage, tiles) raises on kernel k ("<no error>" when it applies).
std::string tc_error(codegen::OptKernel& k, int64_t stage, int64_t tiles) {
    return error_of([&] { k.apply({codegen::OptOp::Tc, stage, tiles}); });
}

std::vector<float> on(const std::string& device, const Tensor& t) {
    return t.to(device).to_vector<float>();
}

} // namespace

TEST_CASE("float16 and bfloat16: conversion rounds to nearest even, on every device") {
    const std::vector<float> edge = {0.0f,     -0.0f,       1.0f,        2049.0f,     2051.0f,
                                     65504.0f, 65519.0f,    65520.0f,    -70000.0f,   1e-8f,
                                     6e-8f,    1.00390625f, 1.01171875f, 3.14159265f, kInf,
                                     -kInf,    1e30f,       -2.5e-5f};
    for (DType dt : {DType::Float16, DType::BFloat16}) {
        INFO(dt.name());
        const Tensor t = Tensor::from_vector(edge, {static_cast<int64_t>(edge.size())}, dt);
        std::vector<float> want;
        for (float x : edge) want.push_back(round_to(dt, x));
        CHECK(t.to_vector<float>() == want);
        // cast from float32 in a kernel rounds the same way, on the CPU and on EMU.
        const Tensor f = Tensor::from_vector(edge);
        for (const char* d : {"CPU", "EMU"}) {
            INFO(d);
            CHECK(f.to(d).cast(dt).to_vector<float>() == want);
        }
    }
    const Tensor nan = Tensor::from_vector(std::vector<float>{std::nanf("")}, {1}, DType::Float16);
    CHECK(std::isnan(nan.to_vector<float>()[0]));
}

TEST_CASE("float16 and bfloat16: arithmetic agrees with float32 rounded, on every device") {
#ifndef TEMPURA_PTXAS
    MESSAGE("SKIPPED: ptxas checks (CMake found no CUDA toolkit); the values are still checked");
#endif
    std::vector<float> xs;
    for (int i = 0; i < 256; ++i) xs.push_back(0.05f + 0.037f * static_cast<float>(i));
    for (DType dt : {DType::Float16, DType::BFloat16}) {
        const Tensor x = Tensor::from_vector(xs, {256}, dt);
        const std::vector<float> xr = x.to_vector<float>(); // the values x holds
        struct Case {
            const char* name;
            Tensor (*f)(const Tensor&);
            float (*ref)(float);
        };
        const Case cases[] = {
            {"exp", [](const Tensor& t) { return t.exp(); }, [](float v) { return std::exp(v); }},
            {"log", [](const Tensor& t) { return t.log(); }, [](float v) { return std::log(v); }},
            {"sin", [](const Tensor& t) { return t.sin(); }, [](float v) { return std::sin(v); }},
            {"sqrt", [](const Tensor& t) { return t.sqrt(); },
             [](float v) { return std::sqrt(v); }},
            {"erf", [](const Tensor& t) { return t.erf(); }, [](float v) { return std::erf(v); }},
            {"x*x+1", [](const Tensor& t) { return t * t + 1.0f; },
             [](float v) { return v * v + 1.0f; }},
        };
        for (const Case& c : cases) {
            INFO(dt.name() << " " << std::string(c.name));
            const Tensor r = c.f(x);
            const std::vector<float> cpu = on("CPU", r), emu = on("EMU", c.f(x.to("EMU")));
            CHECK(cpu == emu); // the same bits on both devices
            Tensor k = c.f(x.to("EMU"));
            k.realize();
            for (const KernelInfo& ki : k.kernels()) {
                CHECK(ptxas(ki.source, "sm_80") == "");
                CHECK(ptxas(ki.source, "sm_90") == "");
            }
            // Within one step of the 16-bit type of float32's answer rounded (the float32
            // decompositions are within a few float32 ulp; x*x+1 rounds twice).
            int64_t worst = 0;
            for (size_t i = 0; i < xs.size(); ++i) {
                const float want = round_to(dt, c.ref(xr[i]));
                const float step =
                    std::fabs(round_to(dt, want * (dt == DType::Float16 ? 1.0f + 1.0f / 1024
                                                                        : 1.0f + 1.0f / 128)) -
                              want);
                if (std::fabs(cpu[i] - want) > step) ++worst;
            }
            CHECK(worst == 0);
        }
    }
}

TEST_CASE("float16 and bfloat16: reductions and matmuls accumulate in float32") {
    for (DType dt : {DType::Float16, DType::BFloat16}) {
        INFO(dt.name());
        for (const char* d : {"CPU", "EMU"}) {
            INFO(d);
            const Tensor o = Tensor::ones({4096}, dt).to(d);
            // 2048 + 1 is 2048 in Float16 (and 256 + 1 is 256 in BFloat16): a 16-bit
            // accumulator would stop there.
            CHECK(o.sum().to_vector<float>() == std::vector<float>{4096});
            CHECK(o.mean().to_vector<float>() == std::vector<float>{1});
            const Tensor a = Tensor::ones({2, 4096}, dt).to(d),
                         b = Tensor::ones({4096, 3}, dt).to(d);
            CHECK(a.matmul(b).to_vector<float>() == std::vector<float>(6, 4096));
            CHECK(a.matmul(b).dtype() == dt);
        }
    }
}

TEST_CASE("float16 accumulation: matmul(b, Float16) rounds its sums to float16") {
    const Tensor h = Tensor::ones({2, 3}, DType::Float16), g = Tensor::ones({3, 2}, DType::Float16);
    CHECK(error_of([&] { (void)h.matmul(g, DType::Int32); }) ==
          at_line(__LINE__ - 1,
                  "[dot] accumulates float16 operands in float32 or float16, got int32"));
    CHECK(error_of([&] {
              (void)h.cast(DType::Float32).matmul(g.cast(DType::Float32), DType::Float16);
          }) ==
          at_line(__LINE__ - 3, "[dot] accumulates float32 operands in float32, got float16"));
    // M and N padded on the tensor cores (40 rows, 24 columns), K = 80: five k-steps.
    const int64_t m = 40, k = 80, n = 24;
    std::vector<float> av, bv;
    for (int64_t i = 0; i < m * k; ++i)
        av.push_back(round_to(DType::Float16, static_cast<float>((i * 37) % 101 - 50) / 23.0f));
    for (int64_t i = 0; i < k * n; ++i)
        bv.push_back(round_to(DType::Float16, static_cast<float>((i * 11) % 89 - 44) / 17.0f));
    const Tensor a = Tensor::from_vector(av, {m, k}, DType::Float16),
                 b = Tensor::from_vector(bv, {k, n}, DType::Float16);
    const auto ab = [&](int64_t i, int64_t x, int64_t j) {
        return av[static_cast<size_t>(i * k + x)] * bv[static_cast<size_t>(x * n + j)];
    };
    // The float32-accumulated product, rounded once: the 16-bit accumulator differs from it.
    const std::vector<float> wide = a.matmul(b).to_vector<float>();
    CHECK(a.matmul(b, DType::Float32).to_vector<float>() == wide);
    for (const char* d : {"CPU", "EMU"}) {
        INFO(d);
        Tensor r = a.to(d).matmul(b.to(d), DType::Float16);
        r.realize();
        CHECK(r.dtype() == DType::Float16);
        const std::vector<float> got = r.to_vector<float>();
        REQUIRE(got.size() == static_cast<size_t>(m * n));
        size_t differ = 0, far = 0, off_model = 0;
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                const float v = got[static_cast<size_t>(i * n + j)];
                double exact = 0, mag = 0;
                // EMU's tensor cores: per k-step, C plus 16 exact products summed in float32 in
                // k order, rounded once to float16.
                float acc = 0;
                for (int64_t kt = 0; kt < k; kt += 16) {
                    float s = acc;
                    for (int64_t x = kt; x < kt + 16; ++x) s += ab(i, x, j);
                    acc = round_to(DType::Float16, s);
                }
                for (int64_t x = 0; x < k; ++x) {
                    exact += static_cast<double>(ab(i, x, j));
                    mag += std::fabs(static_cast<double>(ab(i, x, j)));
                }
                // Each of the k partial sums rounded to float16 (half an ulp, 2^-11 relative).
                if (std::fabs(v - exact) > static_cast<double>(k) * std::ldexp(mag, -11)) ++far;
                if (v != wide[static_cast<size_t>(i * n + j)]) ++differ;
                if (v != acc) ++off_model;
            }
        CHECK(far == 0);
        CHECK(differ > 0);
        if (std::string(d) == "EMU") {
            CHECK(off_model == 0);
            REQUIRE(r.kernels().size() == 1);
            const std::string& ptx = r.kernels()[0].source;
            CHECK(ptx.find("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16") !=
                  std::string::npos);
            CHECK(ptxas(ptx, "sm_80") == "");
            CHECK(ptxas(ptx, "sm_90") == "");
        }
    }
    // BFloat16 accumulation runs (on EMU without tensor cores, which have no such accumulator).
    const Tensor c = a.cast(DType::BFloat16), e = b.cast(DType::BFloat16);
    Tensor r = c.to("EMU").matmul(e.to("EMU"), DType::BFloat16);
    r.realize();
    CHECK(r.dtype() == DType::BFloat16);
    REQUIRE(r.kernels().size() == 1);
    CHECK(r.kernels()[0].source.find("mma.sync") == std::string::npos);
    const std::vector<float> cpu = c.matmul(e, DType::BFloat16).to_vector<float>(),
                             emu = r.to_vector<float>(), c32 = c.matmul(e).to_vector<float>();
    const std::vector<float> cv = c.to_vector<float>(), ev = e.to_vector<float>();
    size_t far = 0, differ = 0;
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double exact = 0, mag = 0;
            for (int64_t x = 0; x < k; ++x) {
                const double p = static_cast<double>(cv[static_cast<size_t>(i * k + x)]) *
                                 ev[static_cast<size_t>(x * n + j)];
                exact += p;
                mag += std::fabs(p);
            }
            // k partial sums, each rounded to bfloat16 (2^-8 relative at most).
            const double bound = static_cast<double>(k) * std::ldexp(mag, -8);
            const size_t at = static_cast<size_t>(i * n + j);
            far += std::fabs(emu[at] - exact) > bound || std::fabs(cpu[at] - exact) > bound;
            differ += cpu[at] != c32[at];
        }
    CHECK(far == 0);
    CHECK(differ > 0); // the sums were rounded to bfloat16, not float32
    const std::vector<ScheduledKernel> ks =
        schedule_graph(c.to("EMU").matmul(e.to("EMU"), DType::BFloat16).uop());
    REQUIRE(ks.size() == 1);
    codegen::OptKernel tc(codegen::prepare_for_opts(ks[0].ast), runtime::emu_limits());
    CHECK(tc_error(tc, 0, 0) ==
          "[opt] TC(0, 0): tensor cores have no bfloat16 accumulator (a bfloat16 matmul "
          "accumulates in float32 there)");
}

TEST_CASE("tensor cores: float16 and bfloat16 matmuls on EMU are warp mma.sync") {
    struct Shape3 {
        std::vector<int64_t> a, b;
    };
    const std::vector<Shape3> shapes = {
        {{32, 48}, {48, 24}},
        {{2, 16, 32}, {2, 32, 8}}, // a batch axis stays a grid axis
        {{3, 16, 32}, {32, 8}},    // the right operand broadcast over the batch
        {{20, 24}, {24, 13}},      // M, N, K padded up to 32, 16 and 32 (gated loads and stores)
        {{3, 5}, {5, 7}},
        {{20, 24}, {24, 10}},   // N even, padded: stores of column pairs, gated
        {{256, 64}, {64, 128}}, // staged through shared memory (the heuristics' TC(3422, 72))
    };
    for (DType dt : {DType::Float16, DType::BFloat16}) {
        for (const Shape3& s : shapes) {
            INFO(dt.name() << " " << shape_str(s.a) << " @ " << shape_str(s.b));
            int64_t na = 1, nb = 1;
            for (int64_t d : s.a) na *= d;
            for (int64_t d : s.b) nb *= d;
            const Tensor a = Tensor::from_vector(a_values(na), s.a, dt),
                         b = Tensor::from_vector(b_values(nb), s.b, dt);
            // With an epilogue that reads a buffer too (a bias): its loads at padded columns
            // must not happen either.
            std::vector<float> biasv;
            for (int64_t i = 0; i < s.b.back(); ++i) biasv.push_back(static_cast<float>(i % 5) - 2);
            const Tensor bias = Tensor::from_vector(biasv, {s.b.back()}, dt);
            const std::vector<float> cpu = (a.matmul(b) + bias).to_vector<float>();
            Tensor e = a.to("EMU").matmul(b.to("EMU")) + bias.to("EMU");
            e.realize();
            // Exact products and float32 sums on both sides, summed in another order: one
            // rounding to the 16-bit type apart at most.
            const std::vector<float> got = e.to_vector<float>();
            REQUIRE(got.size() == cpu.size());
            size_t far = 0;
            for (size_t i = 0; i < got.size(); ++i)
                if (std::fabs(got[i] - cpu[i]) > 1e-2f * (1 + std::fabs(cpu[i]))) ++far;
            CHECK(far == 0);
            REQUIRE(e.kernels().size() == 1);
            const std::string& ptx = e.kernels()[0].source;
            CHECK(ptx.find(dt == DType::Float16
                               ? "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
                               : "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") !=
                  std::string::npos);
            // Column pairs stored as one 32-bit word where N is even.
            CHECK((count_of(ptx, "st.global.b32") > 0) == (s.b.back() % 2 == 0));
            CHECK(ptxas(ptx, "sm_80") == "");
            CHECK(ptxas(ptx, "sm_90") == "");
        }
    }
}

TEST_CASE("tensor cores: the TC opt's errors") {
    const Tensor a = Tensor::ones({16, 16}, DType::Float16),
                 b = Tensor::ones({16, 8}, DType::Float16);
    const std::vector<ScheduledKernel> ks = schedule_graph(a.matmul(b).uop());
    REQUIRE(ks.size() == 1);
    const codegen::Opt tc{codegen::OptOp::Tc, 0, 0};
    codegen::OptKernel cpu(codegen::prepare_for_opts(ks[0].ast), codegen::DeviceLimits{});
    CHECK(error_of([&] { cpu.apply(tc); }) ==
          "[opt] TC(0, 0): the CPU device has no tensor cores (a GPU of sm_80 or later has)");
    const Tensor f = Tensor::ones({16, 16}), g = Tensor::ones({16, 8});
    const std::vector<ScheduledKernel> k32 = schedule_graph(f.matmul(g).uop());
    codegen::OptKernel emu32(codegen::prepare_for_opts(k32[0].ast), runtime::emu_limits());
    CHECK(error_of([&] { emu32.apply(tc); }) ==
          "[opt] TC(0, 0): the kernel is not a matmul of Float16 or BFloat16 operands (one sum "
          "over one axis of products of two 16-bit loads)");
    // (Data, not ones(): a product of constants folds away, and there is no load to match.)
    const Tensor c =
        Tensor::from_vector(std::vector<float>(16 * 24, 0.5f), {16, 24}, DType::Float16);
    const Tensor d = Tensor::from_vector(std::vector<float>(24 * 8, 0.5f), {24, 8}, DType::Float16);
    const std::vector<ScheduledKernel> k24 = schedule_graph(c.matmul(d).uop());
    codegen::OptKernel emu24(codegen::prepare_for_opts(k24[0].ast), runtime::emu_limits());
    emu24.apply({codegen::OptOp::Upcast, 1, 2});
    CHECK(error_of([&] { emu24.apply(tc); }) ==
          "[opt] TC(0, 0): TC comes first: the kernel has opts applied already");
}

TEST_CASE("tensor cores: a warp's rows x columns of 16 x 8 blocks (TC tiles) on EMU") {
    // Each (rows, columns) a warp may take, on sizes they divide and on sizes padded up to them.
    struct Case {
        int64_t m, k, n;
    };
    const codegen::DeviceLimits lim = runtime::emu_limits();
    for (const Case c : {Case{64, 48, 64}, Case{128, 32, 64}, Case{40, 24, 20}}) {
        const auto [a, b] = stored_operands(c.m, c.k, c.n, false, false, DType::Float16);
        // Small whole numbers over 8 and 4: every product and sum is exact in float32.
        const std::vector<float> want = a.matmul(b).to_vector<float>();
        const std::vector<ScheduledKernel> ks = schedule_graph(a.matmul(b).uop());
        REQUIRE(ks.size() == 1);
        REQUIRE(ks[0].params.size() == 3);
        for (int64_t tiles : {0, 17, 18, 33, 34, 66, 36, 68, -68}) {
            if (tiles < 0 && (c.m % 128 != 0 || c.n % 64 != 0)) continue; // 2 x 2 warps fit
            INFO(c.m << " x " << c.k << " x " << c.n << ", tiles " << tiles);
            // -68: 4 x 4 blocks a warp and 2 x 2 warps a thread block (LOCAL on both).
            std::vector<codegen::Opt> opts{{codegen::OptOp::Tc, 0, std::abs(tiles)}};
            if (tiles < 0)
                opts.insert(opts.end(),
                            {{codegen::OptOp::Local, 1, 2}, {codegen::OptOp::Local, 0, 2}});
            const codegen::LoweredKernel low =
                codegen::lower_kernel_opt("r", ks[0].ast, lim, &opts);
            tiles = std::abs(tiles);
            const int64_t tm = tiles == 0 ? 1 : tiles / 16, tn = tiles == 0 ? 1 : tiles % 16;
            const int64_t warps = opts.size() == 1 ? 1 : 4;
            // The lane is the block's x: a warp is 32 consecutive threads.
            CHECK(low.block == (warps == 1 ? std::array<int64_t, 3>{32, 1, 1}
                                           : std::array<int64_t, 3>{32, 2, 2}));
            CHECK(low.grid[0] * low.grid[1] * warps ==
                  (c.m + 16 * tm - 1) / (16 * tm) * ((c.n + 8 * tn - 1) / (8 * tn)));
            const auto k = runtime::compile_emu_kernel("r_tiles", low.program, 32 * warps);
            // NaN where nothing is written.
            const Tensor out =
                Tensor::from_vector(std::vector<float>(static_cast<size_t>(c.m * c.n), NAN),
                                    {c.m, c.n}, DType::Float16);
            const auto bufs = matmul_buffers(ks[0], out, a, b);
            runtime::emu_launch(*k, bufs.data(), nullptr, low.grid, low.block);
            CHECK(out.to_vector<float>() == want);
            // One mma per block a k-step, and the accumulator is the mma's C: no float adds.
            const std::string& ptx = k->source();
            CHECK(count_of(ptx, "mma.sync") == static_cast<size_t>(tm * tn));
            CHECK(ptx.find("add.rn.f32") == std::string::npos);
            CHECK(ptxas(ptx, "sm_80") == "");
        }
    }
    const std::vector<ScheduledKernel> ks = schedule_graph(
        Tensor::from_vector(std::vector<float>(16 * 16, 1), {16, 16}, DType::Float16)
            .matmul(Tensor::from_vector(std::vector<float>(16 * 8, 1), {16, 8}, DType::Float16))
            .uop());
    codegen::OptKernel k(codegen::prepare_for_opts(ks[0].ast), lim);
    CHECK(tc_error(k, 0, 19) ==
          "[opt] TC(0, 19): the warp's tiles are 16 * rows + columns, each 1, 2, 4 or 8, got 19");
}

TEST_CASE("tensor cores: operands staged through shared memory (TC(stage, tiles)) on EMU") {
    // TC(100 ks + 10 wm + wn, tiles): wm x wn warps a block copy k-steps of 16 ks of A and B to
    // shared memory; each warp reads its fragments there. On sizes that divide and sizes padded
    // up, with A and B each stored along K or across it (a transposed view), and with a float16
    // accumulator.
    struct Case {
        int64_t m, k, n, stage, tiles;
        bool a_t, b_t; // A stored [K, M], B stored [N, K]
        DType acc;
    };
    const codegen::DeviceLimits lim = runtime::emu_limits();
    const Case cases[] = {
        {64, 32, 32, 111, 0, false, false, DType::Float32},
        {128, 64, 128, 222, 72, false, false, DType::Float32},
        {128, 64, 128, 222, 72, true, true, DType::Float32},
        {40, 24, 20, 122, 18, false, true, DType::Float32},  // M, N and K padded
        {40, 24, 21, 122, 18, false, false, DType::Float32}, // N odd
        {40, 40, 20, 422, 33, true, false, DType::Float32},
        {100, 70, 90, 214, 34, false, false, DType::Float32},
        {64, 64, 64, 141, 17, false, false, DType::Float16},
        {48, 80, 40, 412, 0, true, true, DType::Float16},
        // cp.async pipelines of 2, 3 and 4 tiles (fewer k-steps than tiles in the last)
        {128, 64, 128, 2222, 72, false, false, DType::Float32},
        {128, 64, 128, 3122, 72, true, true, DType::Float32},
        {40, 24, 20, 3122, 18, false, true, DType::Float32},
        {100, 70, 90, 4214, 34, false, false, DType::Float16},
        {64, 16, 64, 4122, 34, false, false, DType::Float32},
        // 55.5 KiB of tiles: dynamic shared memory (PTX .extern .shared)
        {128, 96, 128, 3222, 72, false, false, DType::Float32},
        // What the heuristics take for large matmuls: 256 x 128 blocks (float32 accumulation)
        // and 256 x 256 (float16), both in dynamic shared memory
        {256, 64, 128, 3442, 72, false, false, DType::Float32},
        {256, 32, 256, 3244, 72, false, false, DType::Float16},
        // N odd in a pipeline: B's elements copied one at a time, through registers
        {40, 24, 21, 3122, 18, false, false, DType::Float32},
    };
    size_t dynamic = 0; // cases over 48 KiB of shared memory
    for (const Case& c : cases) {
        INFO(c.m << " x " << c.k << " x " << c.n << ", TC(" << c.stage << ", " << c.tiles
                 << "), A^T " << c.a_t << ", B^T " << c.b_t << ", acc " << c.acc.name());
        const auto [a0, b0] = stored_operands(c.m, c.k, c.n, c.a_t, c.b_t, DType::Float16);
        // Small whole numbers over 8 and 4: every product and sum is exact, in float16 too.
        const TcOnEmu run =
            tc_on_emu(a0, b0, c.a_t, c.b_t, c.acc, c.stage, c.tiles, lim, "r_staged");
        const codegen::LoweredKernel& low = run.low;
        const int64_t tm = c.tiles == 0 ? 1 : c.tiles / 16, tn = c.tiles == 0 ? 1 : c.tiles % 16;
        const int64_t pipe = c.stage / 1000, sk = c.stage / 100 % 10, wm = c.stage / 10 % 10,
                      wn = c.stage % 10;
        // The lane is x; y and z are the warps.
        CHECK(low.block[0] == 32);
        CHECK(low.block[1] * low.block[2] == wm * wn);
        CHECK(low.grid[0] * low.grid[1] == (c.m + 16 * tm * wm - 1) / (16 * tm * wm) *
                                               ((c.n + 8 * tn * wn - 1) / (8 * tn * wn)));
        CHECK(run.got == run.want);
        const auto& k = run.kernel;
        // One barrier a k-step; ks x tm x tn mma; the fragments come from shared memory.
        const std::string& ptx = k->source();
        CHECK(count_of(ptx, "bar.sync") == 1);
        CHECK(count_of(ptx, "mma.sync") == static_cast<size_t>(sk * tm * tn));
        // Each fragment is one ldmatrix (A: 4 matrices, B: 2), transposed where the operand's
        // tile runs across K (A stored [K, M], B stored [K, N], copied in vectors along M or N:
        // not for an odd N, whose elements are copied one at a time into a tile along K); no
        // other shared loads.
        const bool b_across = !c.b_t && c.n % 2 == 0;
        size_t lda = 0, ldb = 0;
        for (const UOp& u : low.program)
            if (u.op() == Op::LdMatrix) {
                const auto& arg = u.arg_as<std::vector<int64_t>>();
                lda += arg == std::vector<int64_t>{4, c.a_t ? 1 : 0} ? 1 : 0;
                ldb += arg == std::vector<int64_t>{2, b_across ? 1 : 0} ? 1 : 0;
            }
        CHECK(lda == static_cast<size_t>(sk * tm));
        CHECK(ldb == static_cast<size_t>(sk * tn));
        CHECK(count_of(ptx, "ldmatrix.sync.aligned.m8n8") > 0);
        CHECK(count_of(ptx, "ld.shared") == 0);
        // An accumulator's two neighbouring columns are one 32-bit store where N is even; an odd
        // N (whose padding would split a pair) stores 16 bits at a time.
        const bool pairs = c.n % 2 == 0;
        CHECK(count_of(ptx, "st.global.b32") == static_cast<size_t>(pairs ? 2 * tm * tn : 0));
        CHECK(count_of(ptx, "st.global.b16") == static_cast<size_t>(pairs ? 0 : 4 * tm * tn));
        CHECK(ptxas(ptx, "sm_80") == "");
        CHECK(ptxas(ptx, "sm_90") == "");
        CHECK((ptx.find(".extern .shared") != std::string::npos) ==
              (runtime::dynamic_shared_bytes(low.program) > 0));
        dynamic += runtime::dynamic_shared_bytes(low.program) > 0 ? 1 : 0;
        // A row-major A of K a multiple of 8 is copied 16 bytes at a time: through registers,
        // or with cp.async (the prologue's tiles, then one k-step ahead in the loop).
        if (!c.a_t && c.k % 8 == 0)
            CHECK(count_of(ptx, pipe == 0 ? "st.shared.v4" : "cp.async.cg.shared.global") > 0);
        if (pipe == 0) CHECK(count_of(ptx, "cp.async") == 0);
        if (pipe != 0) {
            // A commit after each of the prologue's tiles but the last, and the loop's wait.
            const int64_t steps = (c.k + 16 * sk - 1) / (16 * sk);
            size_t waits = 0;
            for (const UOp& u : low.program) waits += u.op() == Op::AsyncWait ? 1 : 0;
            CHECK(waits == static_cast<size_t>(std::min(pipe - 1, steps)));
        }
    }
    CHECK(dynamic == 3);
    const Tensor a = Tensor::from_vector(std::vector<float>(64 * 64, 1), {64, 64}, DType::Float16);
    const std::vector<ScheduledKernel> ks = schedule_graph(a.matmul(a).uop());
    codegen::OptKernel k(codegen::prepare_for_opts(ks[0].ast), lim);
    CHECK(tc_error(k, 22, 0) == "[opt] TC(22, 0): " + kBadStaging + "22");
    CHECK(tc_error(k, 1111, 0) == "[opt] TC(1111, 0): " + kBadStaging + "1111");
    // A: 2 x 512 rows of 64 + 8; B (stored along N): 2 x 64 rows of 256 + 8; 2 bytes each.
    CHECK(tc_error(k, 444, 136) ==
          "[opt] TC(444, 136): the staged tiles need 215040 bytes of shared memory, over the EMU "
          "device's 166912");
    k.apply({codegen::OptOp::Tc, 122, 34});
    CHECK(error_of([&] {
              k.apply({codegen::OptOp::Upcast, 0, 2});
          }) == "[opt] UPCAST(0, 2): TC(122, 34) staged the operands through shared memory for its "
                "block of warps: no opt may follow it");
}

TEST_CASE("tensor cores: Hopper's warpgroup mma (TC(10000 + stage, n)) on EMU as an H100") {
    // wm x wn warpgroups of 128 threads, each 64 x n outputs, read their operands from 128-byte
    // swizzled tiles in shared memory (wgmma.mma_async): K-major tiles where the operand runs
    // along K, MN-major ones where it runs across; padded sizes; both accumulators; bfloat16.
    // EMU runs the kernel under an sm_90 device's limits; ptxas checks its sm_90a PTX.
    struct Case {
        int64_t m, k, n, stage, cols;
        bool a_t, b_t; // A stored [K, M], B stored [N, K]
        DType in, acc;
    };
    codegen::DeviceLimits lim = codegen::gpu_limits("H100", 90);
    lim.shared_bytes = 227 * 1024; // an H100's opt-in maximum
    const DType f16 = DType::Float16, bf16 = DType::BFloat16, f32 = DType::Float32;
    const Case cases[] = {
        {64, 64, 64, 10411, 64, false, false, f16, f32},
        {64, 64, 64, 10411, 64, true, true, f16, f32},
        {64, 128, 128, 12411, 128, false, true, f16, f32},
        {128, 64, 128, 10421, 64, true, false, bf16, f32},
        {100, 72, 120, 12422, 64, false, false, f16, f32}, // M, N and K padded
        {128, 192, 256, 13412, 128, false, false, f16, f16},
        {64, 64, 256, 14411, 256, false, true, bf16, f32},
        // An mma kept in flight while the next k-step's is issued (copies 1 or 2 steps ahead)
        {128, 192, 128, 23421, 64, false, false, f16, f32},
        {96, 200, 120, 23411, 128, true, false, f16, f32}, // padded
        {64, 256, 256, 24412, 128, false, true, f16, f16},
        {64, 64, 128, 24411, 128, false, false, bf16, f32},  // fewer k-steps than the lead
        {128, 320, 256, 24421, 256, false, false, f16, f32}, // the heuristics' Hopper choice
    };
    // The case's matmul of a0 and b0 (as stored) on EMU: the CPU's product exactly.
    const auto check = [&](const Case& c, const Tensor& a0, const Tensor& b0) {
        INFO(c.m << " x " << c.k << " x " << c.n << ", TC(" << c.stage << ", " << c.cols
                 << "), A^T " << c.a_t << ", B^T " << c.b_t << ", " << c.in.name() << ", acc "
                 << c.acc.name());
        const TcOnEmu run = tc_on_emu(a0, b0, c.a_t, c.b_t, c.acc, c.stage, c.cols, lim, "r_wgmma");
        const codegen::LoweredKernel& low = run.low;
        const codegen::TcStage st = codegen::TcStage::decode(c.stage);
        CHECK(low.block[0] * low.block[1] * low.block[2] == 128 * st.wm * st.wn);
        CHECK(low.grid[0] * low.grid[1] == (c.m + 64 * st.wm - 1) / (64 * st.wm) *
                                               ((c.n + c.cols * st.wn - 1) / (c.cols * st.wn)));
        CHECK(run.got == run.want);
        const auto& k = run.kernel;
        // One WGMMA a k-step: 4 wgmma.mma_async of m64nNk16, each operand transposed where
        // its tile runs across K; a proxy fence before each barrier.
        const std::string& ptx = k->source();
        CHECK(ptx.find(".target sm_90a") != std::string::npos);
        const std::string shape = "wgmma.mma_async.sync.aligned.m64n" + std::to_string(c.cols) +
                                  "k16." + (c.acc == f16 ? "f16" : "f32") + "." +
                                  (c.in == bf16 ? "bf16" : "f16");
        CHECK(count_of(ptx, shape) == 4);
        CHECK(count_of(ptx, std::string(", p, 1, 1, ") + (c.a_t ? "1" : "0") + ", " +
                                (c.b_t ? "0" : "1") + ";") == 4);
        CHECK(count_of(ptx, "fence.proxy.async.shared::cta") == count_of(ptx, "bar.sync"));
        // In flight: each k-step waits for the one before; the last is waited for after the loop.
        const bool in_flight = st.wg == 2;
        CHECK(count_of(ptx, "wgmma.wait_group.sync.aligned 1;") == (in_flight ? 1u : 0u));
        CHECK(count_of(ptx, "wgmma.wait_group.sync.aligned 0;") == 1);
        // ptxas keeps the mma asynchronous: no serialization warning.
        CHECK(ptxas_output(ptx, "sm_90a").find("wgmma") == std::string::npos);
        CHECK(count_of(ptx, "ldmatrix") == 0);
        CHECK(count_of(ptx, "mma.sync") == 0);
        CHECK(ptxas(ptx, "sm_90a") == "");
    };
    for (const Case& c : cases) {
        const auto [a0, b0] = stored_operands(c.m, c.k, c.n, c.a_t, c.b_t, c.in);
        check(c, a0, b0);
    }
    // A float16 accumulator is rounded after each k-step of 16, as each wgmma's float16
    // registers are: 2048 + 63 x 0.0625 stays 2048 (float16's step there is 2), as the CPU's
    // sum does (summed in float32 over all 64 k and rounded once, it would be 2052).
    std::vector<float> big(64 * 64, 0.0625f);
    for (size_t r = 0; r < 64; ++r) big[r * 64] = 2048;
    const Tensor a16 = Tensor::from_vector(big, {64, 64}, f16);
    const Tensor ones = Tensor::from_vector(std::vector<float>(64 * 64, 1), {64, 64}, f16);
    REQUIRE(a16.matmul(ones, f16).to_vector<float>() == std::vector<float>(64 * 64, 2048));
    check({64, 64, 64, 10411, 64, false, false, f16, f16}, a16, ones);
    // Not on an sm_80 device; a warpgroup's columns; operands that cannot be copied 16 bytes
    // at a time.
    const Tensor a = Tensor::from_vector(std::vector<float>(64 * 64, 1), {64, 64}, f16);
    const std::vector<ScheduledKernel> ks = schedule_graph(a.matmul(a).uop());
    codegen::OptKernel emu(codegen::prepare_for_opts(ks[0].ast), runtime::emu_limits());
    CHECK(tc_error(emu, 10411, 64) ==
          "[opt] TC(10411, 64): the EMU device (sm_80) has no warpgroup mma (wgmma: sm_90)");
    codegen::OptKernel h(codegen::prepare_for_opts(ks[0].ast), lim);
    CHECK(tc_error(h, 10411, 72) ==
          "[opt] TC(10411, 72): a warpgroup's columns are 64, 128 or 256, got 72");
    // 2 x 2 warpgroups of 64 x 256 float32 outputs: 128 accumulator registers in each of 512
    // threads, which have 128 each (an H200's driver asked for 154); float16's 64 fit.
    CHECK(tc_error(h, 12422, 256) ==
          "[opt] TC(12422, 256): 4 warpgroups of 64 x 256 float32 outputs: each thread holds 128 "
          "accumulator registers and about 32 more, over the 128 a block of 512 threads gives "
          "each (a wgmma's accumulator cannot spill)");
    for (const auto& [stage, cols] : {std::pair{12422, 128}, std::pair{12412, 256}}) {
        codegen::OptKernel fits(codegen::prepare_for_opts(ks[0].ast), lim);
        CHECK(tc_error(fits, stage, cols) == "<no error>");
    }
    CHECK(tc_error(h, 10211, 64) == "[opt] TC(10211, 64): " + kBadStaging + "10211");
    CHECK(tc_error(h, 22411, 64) == "[opt] TC(22411, 64): " + kBadStaging + "22411");
    const Tensor odd = Tensor::from_vector(std::vector<float>(64 * 60, 1), {64, 60}, f16);
    const std::vector<ScheduledKernel> ko = schedule_graph(odd.matmul(odd.transpose()).uop());
    codegen::OptKernel ho(codegen::prepare_for_opts(ko[0].ast), lim);
    CHECK(tc_error(ho, 10411, 64) ==
          "[opt] TC(10411, 64): warpgroups copy their operands 16 bytes at a time: each "
          "must run along K or along its rows or columns, in whole runs of 8 elements");
}

TEST_CASE("tensor cores: staged, with batch axes that stay loops in every thread") {
    // Two symbolic batch axes: one gets a grid dim, the other stays a loop around the block's
    // copies, k-steps and stores, so a barrier after the k-steps keeps the next batch's first
    // copies off the tiles other warps still read (without it EMU reports the race).
    const Dim p = Dim::variable("p", 1, 4), q = Dim::variable("q", 1, 4);
    const int64_t pv = 2, qv = 3, m = 32, k = 48, n = 16;
    std::vector<float> av(static_cast<size_t>(pv * qv * m * k)), bv(static_cast<size_t>(k * n));
    for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>((i * 7) % 5) - 2;
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>((i * 3) % 7) - 3;
    const Tensor a = Tensor::from_vector(av, {p.bind(pv), q.bind(qv), m, k}, DType::Float16);
    const Tensor b = Tensor::from_vector(bv, {k, n}, DType::Float16);
    const Tensor prod = a.matmul(b);
    const std::vector<float> want =
        Tensor::from_vector(av, {pv, qv, m, k}, DType::Float16).matmul(b).to_vector<float>();
    const std::vector<UOp> topo = prod.uop().toposort();
    const SymbolicShapes sym = infer_symbolic_shapes(topo);
    const std::vector<ScheduledKernel> ks = schedule_graph(prod.uop(), &sym);
    REQUIRE(ks.size() == 1);
    // Warps, and (on an sm_90 device) warpgroups.
    const codegen::DeviceLimits h100 = codegen::gpu_limits("H100", 90);
    for (const auto& [stage, tiles] :
         {std::pair<int64_t, int64_t>{122, 0}, {2122, 0}, {12411, 64}}) {
        INFO("TC(" << stage << ", " << tiles << ")");
        const codegen::DeviceLimits lim = stage > 10000 ? h100 : runtime::emu_limits();
        std::vector<codegen::Opt> opts{{codegen::OptOp::Tc, stage, tiles}};
        const codegen::LoweredKernel low = codegen::lower_kernel_opt("r", ks[0].ast, lim, &opts);
        size_t barriers = 0, sym_loops = 0;
        for (const UOp& u : low.program) {
            barriers += u.op() == Op::Barrier ? 1 : 0;
            sym_loops += u.op() == Op::Range && !u.src(0).is_const() ? 1 : 0;
        }
        CHECK(sym_loops == 1);
        CHECK(barriers == 2);
        const auto kern = runtime::compile_emu_kernel("r_batch", low.program,
                                                      low.block[0] * low.block[1] * low.block[2]);
        const Tensor out = Tensor::from_vector(std::vector<float>(want.size(), NAN), {pv, qv, m, n},
                                               DType::Float16);
        const auto bufs = matmul_buffers(ks[0], out, a, b);
        const std::map<std::string, int64_t> values{{"p", pv}, {"q", qv}};
        std::array<int64_t, 3> grid = low.grid;
        for (size_t d = 0; d < 3; ++d)
            if (!low.grid_size[d].is_null()) grid[d] = evaluate(low.grid_size[d], values);
        const int64_t vars[2] = {pv, qv};
        runtime::emu_launch(*kern, bufs.data(), vars, grid, low.block, lim);
        CHECK(out.to_vector<float>() == want);
    }
}

TEST_CASE("EMU: reports staged tensor cores with one buffer, and an mma left in flight") {
    // k-step t + 1's copies overwrite what k-step t's fragments read, with no barrier between
    // (two buffers taken in turn are what makes one barrier a k-step enough).
    const Tensor a = Tensor::from_vector(std::vector<float>(32 * 64, 1), {32, 64}, DType::Float16);
    const Tensor b = Tensor::from_vector(std::vector<float>(64 * 8, 1), {64, 8}, DType::Float16);
    const std::vector<ScheduledKernel> ks = schedule_graph(a.matmul(b).uop());
    const auto race = [&](int64_t stage) {
        std::vector<codegen::Opt> opts{{codegen::OptOp::Tc, stage, 0}};
        codegen::set_tc_single_buffer_for_testing(true);
        const codegen::LoweredKernel low =
            codegen::lower_kernel_opt("r", ks[0].ast, runtime::emu_limits(), &opts);
        codegen::set_tc_single_buffer_for_testing(false);
        const auto k = runtime::compile_emu_kernel("r_one_buffer", low.program, 32);
        const Tensor out =
            Tensor::from_vector(std::vector<float>(32 * 8, NAN), {32, 8}, DType::Float16);
        const auto bufs = matmul_buffers(ks[0], out, a, b);
        return error_of(
            [&] { runtime::emu_launch(*k, bufs.data(), nullptr, low.grid, low.block); });
    };
    // Copies through registers: thread 1 runs on to k-step 1 and copies A's row 0, k 8 .. 15
    // (shared byte 16) over what lane 16's ldmatrix row (matrix 2: rows 0 .. 7 at k 8) read in
    // k-step 0.
    CHECK(race(111) ==
          "[emu] kernel r_one_buffer: block (0, 0, 0), thread (1, 0, 0): shared-memory race: "
          "STORE of shared byte 16 read by thread (16, 0, 0) since the last barrier");
    // A cp.async pipeline of 2: k-step 0 issues step 1's copies into the tile its own fragments
    // read. Thread 1's ldmatrix row (A's row 1) is read, then thread 2's copy claims it (a
    // cp.async may write any time until its wait).
    CHECK(race(2111) ==
          "[emu] kernel r_one_buffer: block (0, 0, 0), thread (2, 0, 0): shared-memory race: "
          "STORE of shared byte 48 read by thread (1, 0, 0) since the last barrier");
    // Warpgroups (sm_90), a pipeline of 2: k-step 0 issues step 1's copies into the tile its
    // WGMMA then reads (the WGMMA's reads are no thread's, so thread 0's own copy of A's row 0,
    // k 0 .. 7 races with them too).
    const codegen::DeviceLimits h100 = codegen::gpu_limits("H100", 90);
    const auto wg_race = [&](int64_t stage, int64_t kk, void (*bug)(bool)) {
        const Tensor a2 = Tensor::from_vector(std::vector<float>(static_cast<size_t>(64 * kk), 1),
                                              {64, kk}, DType::Float16);
        const Tensor b2 = Tensor::from_vector(std::vector<float>(static_cast<size_t>(kk * 64), 1),
                                              {kk, 64}, DType::Float16);
        const std::vector<ScheduledKernel> k2 = schedule_graph(a2.matmul(b2).uop());
        std::vector<codegen::Opt> opts{{codegen::OptOp::Tc, stage, 64}};
        bug(true);
        const codegen::LoweredKernel low = codegen::lower_kernel_opt("r", k2[0].ast, h100, &opts);
        bug(false);
        const auto k = runtime::compile_emu_kernel("r_wg_race", low.program, 128);
        const Tensor out =
            Tensor::from_vector(std::vector<float>(64 * 64, NAN), {64, 64}, DType::Float16);
        const auto bufs = matmul_buffers(k2[0], out, a2, b2);
        return error_of(
            [&] { runtime::emu_launch(*k, bufs.data(), nullptr, low.grid, low.block, h100); });
    };
    CHECK(
        wg_race(12411, 128, &codegen::set_tc_single_buffer_for_testing) ==
        "[emu] kernel r_wg_race: block (0, 0, 0), the WGMMA of the warpgroup of thread (0, 0, 0): "
        "shared-memory race: LOAD of shared byte 0 written by thread (0, 0, 0) since the last "
        "barrier");
    // An mma kept in flight (pipeline of 3) while k-step 1's copies run 2 steps ahead (of 4),
    // into the tile k-step 0's mma still reads: its reads count in every epoch until its wait,
    // and thread 0's copy of A's row 0, k 0 .. 7 meets them. With the copies 1 step ahead, none.
    CHECK(wg_race(23411, 256, &codegen::set_tc_full_lead_for_testing) ==
          "[emu] kernel r_wg_race: block (0, 0, 0), thread (0, 0, 0): shared-memory race: STORE "
          "of shared byte 0 read by the WGMMA of the warpgroup of thread (0, 0, 0) since the last "
          "barrier");
    CHECK(wg_race(23411, 256, [](bool) {}) == "<no error>");
    // The same kernel with its WGMMA_WAIT taken out (its uses read the accumulator it tied):
    // the last k-step's mma is still in flight when the threads store and exit.
    {
        const Tensor a2 =
            Tensor::from_vector(std::vector<float>(64 * 256, 1), {64, 256}, DType::Float16);
        const Tensor b2 =
            Tensor::from_vector(std::vector<float>(256 * 64, 1), {256, 64}, DType::Float16);
        const std::vector<ScheduledKernel> k2 = schedule_graph(a2.matmul(b2).uop());
        std::vector<codegen::Opt> opts{{codegen::OptOp::Tc, 23411, 64}};
        const codegen::LoweredKernel low = codegen::lower_kernel_opt("r", k2[0].ast, h100, &opts);
        std::vector<UOp> program;
        UOpMap<UOp> now;
        size_t waits = 0;
        for (const UOp& u : low.program) {
            std::vector<UOp> srcs;
            for (const UOp& s : u.srcs()) srcs.push_back(now.at(s));
            if (u.op() == Op::WgmmaWait) {
                ++waits;
                now.emplace(u, srcs.at(0));
                continue;
            }
            program.push_back(with_srcs(u, std::move(srcs)));
            now.emplace(u, program.back());
        }
        CHECK(waits == 1);
        const auto k = runtime::compile_emu_kernel("r_no_wait", program, 128);
        const Tensor out =
            Tensor::from_vector(std::vector<float>(64 * 64, NAN), {64, 64}, DType::Float16);
        const auto bufs = matmul_buffers(k2[0], out, a2, b2);
        CHECK(error_of([&] {
                  runtime::emu_launch(*k, bufs.data(), nullptr, low.grid, low.block, h100);
              }) == "[emu] kernel r_no_wait: block (0, 0, 0), thread (0, 0, 0): its warpgroup's "
                    "WGMMA is still in flight at the kernel's end (no WGMMA_WAIT, "
                    "wgmma.wait_group 0, retired it)");
    }
}

TEST_CASE("tensor cores: a fragment's two 16-bit values along K are one 32-bit load") {
    // A is contiguous along K: its fragment pairs are single loads; B of a matmul with a
    // transposed right operand (x @ w^T, w stored [N, K]) too. Odd K (padded) keeps 16-bit loads.
    const auto half = [](int64_t r, int64_t c, int seed) {
        std::vector<float> v;
        for (int64_t i = 0; i < r * c; ++i)
            v.push_back(static_cast<float>((i * (37 + seed)) % 17 - 8) / 8);
        return Tensor::from_vector(v, {r, c}, DType::Float16);
    };
    struct Case {
        Tensor a, b;
        bool transpose_b; // b is w, stored [N, K], and the matmul reads it as w^T on EMU
        size_t u32, u16;  // 32-bit and 16-bit global loads in the PTX (4 x 8 blocks a warp)
    };
    const Tensor a = half(64, 32, 0), b = half(32, 64, 1), w = half(64, 32, 2);
    const Tensor a_odd = half(64, 30, 3), b_odd = half(30, 64, 4);
    for (const Case& c : {Case{a, b, false, 4 * 4, 8 * 4}, Case{a, w, true, 4 * 4 + 8 * 2, 0},
                          Case{a_odd, b_odd, false, 0, 0}}) {
        INFO(shape_str(c.a.shape())
             << " @ " << shape_str(c.b.shape()) << (c.transpose_b ? "^T" : ""));
        const Tensor be = c.b.to("EMU");
        Tensor e = c.a.to("EMU").matmul(c.transpose_b ? be.transpose() : be);
        e.realize();
        CHECK(e.to_vector<float>() ==
              c.a.matmul(c.transpose_b ? c.b.transpose() : c.b).to_vector<float>());
        const std::string& ptx = e.kernels().at(0).source;
        if (c.u32 + c.u16 > 0) { // (an odd K is padded: LLVM may still pair a few loads)
            CHECK(count_of(ptx, "ld.global.nc.u32") == c.u32);
            CHECK(count_of(ptx, "ld.global.nc.u16") == c.u16);
        }
        CHECK(ptxas(ptx, "sm_80") == "");
    }
}
