// The GPU heuristics' choices for matmuls of float32 (no tensor cores): each thread a 4 x 4 tile
// of outputs, a block of threads over the tiles; checked by the opts they pick, the values EMU
// computes against the CPU's, and the PTX through ptxas.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ptxas.hpp"
#include "tempura/backend/gpu.hpp"
#include "tempura/codegen/opts.hpp"
#include "tempura/codegen/stages.hpp"
#include "tempura/schedule/schedule.hpp"
#include "tempura/tempura.hpp"

using namespace tempura;

namespace {

std::vector<float> ramp(int64_t n, float scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        v[static_cast<size_t>(i)] = static_cast<float>((i * 37) % 17) * scale - 1.0f;
    return v;
}

// The heuristics' opts for t's last kernel under EMU's limits.
std::string gpu_heuristics(const Tensor& t) {
    const auto ks = schedule_graph(t.uop());
    REQUIRE(!ks.empty());
    return codegen::to_string(
        codegen::heuristic_opts(codegen::prepare_for_opts(ks.back().ast), runtime::emu_limits()));
}

} // namespace

TEST_CASE("GPU heuristics: a float32 matmul is tiled 4 x 4 per thread, 16 x 16 threads a block") {
    const Tensor a = Tensor::from_vector(ramp(128 * 64, 0.1f), {128, 64});
    const Tensor b = Tensor::from_vector(ramp(64 * 96, 0.07f), {64, 96});
    CHECK(gpu_heuristics(a.matmul(b)) == "[UPCAST(1, 4), UPCAST(0, 4), LOCAL(1, 8), LOCAL(0, 16)]");
    // Columns 40 = 4 x 10: two threads across them, sixteen down the rows.
    const Tensor b40 = Tensor::from_vector(ramp(64 * 40, 0.07f), {64, 40});
    CHECK(gpu_heuristics(a.matmul(b40)) ==
          "[UPCAST(1, 4), UPCAST(0, 4), LOCAL(1, 2), LOCAL(0, 16)]");
    // Sizes that no tile of 4 divides: the plain coalesced block over the columns.
    const Tensor odd_a = Tensor::from_vector(ramp(30 * 20, 0.1f), {30, 20});
    const Tensor odd_b = Tensor::from_vector(ramp(20 * 50, 0.07f), {20, 50});
    CHECK(gpu_heuristics(odd_a.matmul(odd_b)) == "[LOCAL(1, 2)]");
    // A reduce whose operands are not broadcast along two output axes (a row sum) is no
    // matmul: it keeps its grouped reduce.
    CHECK(gpu_heuristics(Tensor::from_vector(ramp(4 * 4096, 0.1f), {4, 4096}).sum(1)) ==
          "[GROUPTOP(1, 256)]");

    SUBCASE("the tiled kernels compute what the CPU computes, batched too, and assemble") {
#ifndef TEMPURA_PTXAS
        MESSAGE(
            "SKIPPED: ptxas checks (CMake found no CUDA toolkit); the values are still checked");
#endif
        const Tensor ba = Tensor::from_vector(ramp(3 * 32 * 48, 0.1f), {3, 32, 48});
        const Tensor bb = Tensor::from_vector(ramp(3 * 48 * 16, 0.05f), {3, 48, 16});
        for (const auto& [x, y] :
             std::vector<std::pair<Tensor, Tensor>>{{a, b}, {a, b40}, {odd_a, odd_b}, {ba, bb}}) {
            Tensor g = x.to("EMU").matmul(y.to("EMU"));
            g.realize();
            const std::vector<float> got = g.to_vector<float>();
            const std::vector<float> want = x.matmul(y).to_vector<float>();
            REQUIRE(got.size() == want.size());
            size_t bad = 0;
            for (size_t i = 0; i < got.size(); ++i)
                bad += !(std::fabs(got[i] - want[i]) <= 1e-5f * (1.0f + std::fabs(want[i])));
            CHECK(bad == 0);
            REQUIRE(g.kernels().size() == 1);
            const std::string& ptx = g.kernels()[0].source;
            CHECK(ptxas(ptx, "sm_80") == "");
            CHECK(ptxas(ptx, "sm_90") == "");
        }
        Tensor g = a.to("EMU").matmul(b.to("EMU"));
        g.realize();
        // 8 x 16 = 128 threads a block (one linear thread index), each with 16 accumulators.
        CHECK(g.kernels()[0].source.find(".maxntid 128, 1, 1") != std::string::npos);
    }
}
