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

#include "../support.hpp"
#include "ptxas.hpp"
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
