// The float32 EXP2/LOG2 decompositions (codegen stage "decompositions") against libm: within
// 2 ulp over a dense sweep, and exact on the special values.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tempura/tempura.hpp"

using tempura::Tensor;

namespace {

// Distance in units in the last place between two finite floats of the same sign.
int64_t ulps(float a, float b) {
    int32_t ia, ib;
    std::memcpy(&ia, &a, 4);
    std::memcpy(&ib, &b, 4);
    return std::llabs(static_cast<int64_t>(ia) - static_cast<int64_t>(ib));
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
