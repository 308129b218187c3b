#pragma once
// Shared by the examples that check themselves: reproducible synthetic data, and realizing a
// result while comparing it with the reference interpreter (a plain-loop evaluation of the same
// graph).
#include <cmath>
#include <cstdio>
#include <vector>

#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

namespace example {

// n values in [-scale, scale] from a fixed generator.
inline std::vector<float> synthetic(int64_t n, float scale, unsigned seed) {
    std::vector<float> v(static_cast<size_t>(n));
    unsigned s = seed;
    for (float& x : v) {
        s = s * 1103515245u + 12345u;
        x = (static_cast<float>((s >> 16) % 2001) / 1000.0f - 1.0f) * scale;
    }
    return v;
}

// Realizes `out`, prints the kernels that ran and the largest difference from the reference
// interpreter; returns that difference.
inline double realize_and_check(tempura::Tensor& out, const char* what) {
    const std::vector<double> want = tempura::reference_eval(out.uop());
    out.realize();
    std::printf("%s: %zu kernels\n", what, out.kernels().size());
    for (const auto& k : out.kernels()) std::printf("  %s\n", k.name.c_str());
    const std::vector<float> got = out.to_vector<float>();
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::fmax(worst, std::fabs(got[i] - want[i]));
    return worst;
}

} // namespace example
