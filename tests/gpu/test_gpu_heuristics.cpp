// The GPU heuristics' choices: for matmuls of float32 (no tensor cores) the operands staged through
// shared memory (SMEM, tests/gpu/test_smem_matmul.cpp), or, under 32 rows or columns, each thread
// a 4 x 4 tile of outputs, a block of threads over the tiles; for float16 ones tensor cores, a warp
// 4 x 4 mma blocks; for reductions along rows a group of threads a row. Checked by the opts they
// pick, the values EMU computes against the CPU's, and the PTX through ptxas.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../support.hpp"
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

// The heuristics' opts for t's last kernel under `lim` (EMU's limits by default).
std::string gpu_heuristics(const Tensor& t,
                           const codegen::DeviceLimits& lim = runtime::emu_limits()) {
    const auto ks = schedule_graph(t.uop());
    REQUIRE(!ks.empty());
    return codegen::to_string(
        codegen::heuristic_opts(codegen::prepare_for_opts(ks.back().ast), lim));
}

} // namespace

TEST_CASE("GPU heuristics: a float32 matmul under 32 rows is tiled 4 x 4 per thread, unstaged") {
    // 128 rows and 96 or 40 columns: staged through shared memory (SMEM), blocks of 32 x 32.
    const Tensor a128 = Tensor::from_vector(ramp(128 * 64, 0.1f), {128, 64});
    const Tensor b96 = Tensor::from_vector(ramp(64 * 96, 0.07f), {64, 96});
    CHECK(gpu_heuristics(a128.matmul(b96)) == "[SMEM(34, 3161616)]");
    // Under 32 rows: each thread 4 x 4 outputs, the block of threads over them.
    const Tensor a = Tensor::from_vector(ramp(16 * 64, 0.1f), {16, 64});
    const Tensor b = Tensor::from_vector(ramp(64 * 96, 0.07f), {64, 96});
    CHECK(gpu_heuristics(a.matmul(b)) == "[UPCAST(1, 4), UPCAST(0, 4), LOCAL(1, 8), LOCAL(0, 4)]");
    // Columns 80 = 4 x 20: four threads across them, four down the rows.
    const Tensor b40 = Tensor::from_vector(ramp(64 * 80, 0.07f), {64, 80});
    CHECK(gpu_heuristics(a.matmul(b40)) ==
          "[UPCAST(1, 4), UPCAST(0, 4), LOCAL(1, 4), LOCAL(0, 4)]");
    // Sizes that no tile of 4 divides: the plain coalesced block over the columns.
    const Tensor odd_a = Tensor::from_vector(ramp(30 * 20, 0.1f), {30, 20});
    const Tensor odd_b = Tensor::from_vector(ramp(20 * 50, 0.07f), {20, 50});
    CHECK(gpu_heuristics(odd_a.matmul(odd_b)) == "[LOCAL(1, 2)]");
    // A reduce whose operands are not broadcast along two output axes (a row sum) is no
    // matmul: it keeps its grouped reduce, interleaved (coalesced), the rest of 16 unrolled.
    CHECK(gpu_heuristics(Tensor::from_vector(ramp(4 * 4096, 0.1f), {4, 4096}).sum(1)) ==
          "[GROUP(1, 256), UNROLL(1, 16)]");

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
        // 8 x 4 = 32 threads a block (one linear thread index), each with 16 accumulators.
        CHECK(g.kernels()[0].source.find(".maxntid 32, 1, 1") != std::string::npos);
    }
}

TEST_CASE("GPU heuristics: reductions along rows are grouped, along columns are not") {
    // Many outputs, each a contiguous row (softmax's reduces): a block of threads a row.
    const Tensor rows = Tensor::from_vector(ramp(2048 * 1024, 0.001f), {2048, 1024});
    CHECK(gpu_heuristics(rows.sum(1)) == "[GROUP(1, 256), UNROLL(1, 4)]");
    CHECK(gpu_heuristics(rows.max(1)) == "[GROUP(1, 256), UNROLL(1, 4)]");
    // Rows of 96: 32 threads (a warp) a row, 3 elements each.
    const Tensor short_rows = Tensor::from_vector(ramp(2048 * 128, 0.001f), {2048, 128});
    CHECK(gpu_heuristics(short_rows.sum(1)) == "[GROUP(1, 32), UNROLL(1, 4)]");
    // A column sum with many outputs: neighbouring threads read neighbouring columns already,
    // four columns each (16-byte loads).
    CHECK(gpu_heuristics(rows.sum(0)) == "[UPCAST(0, 4), LOCAL(0, 256)]");
    // Rows under 128 elements: one thread a row.
    const Tensor tiny = Tensor::from_vector(ramp(4096 * 64, 0.001f), {4096, 64});
    CHECK(gpu_heuristics(tiny.sum(1)) == "[LOCAL(0, 256)]");
    // Elementwise: four neighbouring elements a thread, one 16-byte load and store each.
    const Tensor v = Tensor::from_vector(ramp(8192, 0.01f));
    CHECK(gpu_heuristics(v * 2.0f + 1.0f) == "[UPCAST(0, 4), LOCAL(0, 256)]");
    Tensor e = v.to("EMU") * 2.0f + 1.0f;
    e.realize();
    CHECK(e.to_vector<float>() == (v * 2.0f + 1.0f).to_vector<float>());
    CHECK(e.kernels().at(0).source.find("ld.global.nc.v4.f32") != std::string::npos);
    CHECK(e.kernels().at(0).source.find("st.global.v4.f32") != std::string::npos);
    CHECK(ptxas(e.kernels().at(0).source, "sm_80") == "");
    check_close(rows.to("EMU").sum(0).to_vector<float>(), rows.sum(0).to_vector<float>(), 1e-5f);
    // The values, on EMU.
    for (const Tensor& t : {rows, short_rows}) {
        check_close(t.to("EMU").sum(1).to_vector<float>(), t.sum(1).to_vector<float>(), 1e-5f);
        check_close(t.to("EMU").softmax(1).to_vector<float>(), t.softmax(1).to_vector<float>(),
                    1e-6f);
    }
}

TEST_CASE("GPU heuristics: a float16 matmul takes tensor cores, staged where blocks tile it") {
    const auto half = [](int64_t r, int64_t c) {
        return Tensor::from_vector(ramp(r * c, 0.01f), {r, c}, DType::Float16);
    };
    // Operands staged through shared memory by a pipeline of 3 tiles, each warp 64 x 64: blocks
    // of 256 x 128 (float32 accumulator) or 256 x 256 (float16) where 128 or more of them tile
    // the output, else 128 x 128.
    const Tensor wide = half(4096, 64), tall = half(64, 4096);
    CHECK(gpu_heuristics(wide.matmul(tall)) == "[TC(3442, 72)]");
    CHECK(gpu_heuristics(wide.matmul(tall, DType::Float16)) == "[TC(3244, 72)]");
    CHECK(gpu_heuristics(half(1024, 64).matmul(half(64, 1024))) == "[TC(3422, 72)]");
    CHECK(gpu_heuristics(wide.matmul(half(64, 1024), DType::Float16)) == "[TC(3224, 72)]");
    CHECK(gpu_heuristics(half(256, 64).matmul(half(64, 128))) == "[TC(3422, 72)]");
    // Sizes that blocks would tile only padded take no staging (a block's padding is work).
    CHECK(gpu_heuristics(half(4080, 64).matmul(half(64, 4096))).rfind("[TC(0, ", 0) == 0);
    CHECK(gpu_heuristics(wide.matmul(half(64, 4088))).rfind("[TC(0, ", 0) == 0);
    // Where no 128 x 128 blocks tile it: each warp 4 x 8 blocks of 16 x 8, 2 x 2 warps a block
    // where they divide (192 rows are 3 warps of 64: 2 warps a block along the columns only).
    CHECK(gpu_heuristics(half(192, 64).matmul(half(64, 128))) == "[TC(0, 72), LOCAL(1, 2)]");
    // 64 columns are 8 blocks of 8: one warp across; 256 rows, four warps of 64, two a block.
    CHECK(gpu_heuristics(half(256, 64).matmul(half(64, 64))) == "[TC(0, 72), LOCAL(0, 2)]");
    // 48 rows are 3 blocks of 16: one block a warp down the rows; 24 columns, 3 blocks of 8.
    CHECK(gpu_heuristics(half(48, 32).matmul(half(32, 24))) == "[TC(0, 0)]");
    // 32 x 64: 2 x 8 blocks, one warp takes them all.
    CHECK(gpu_heuristics(half(32, 32).matmul(half(32, 64))) == "[TC(0, 40)]");
    // The values, on EMU, with the tiles and warps the heuristics chose.
    for (const auto& [m, k, n] :
         std::vector<std::array<int64_t, 3>>{{256, 64, 128}, {192, 64, 128}, {48, 32, 24}}) {
        const Tensor a = half(m, k), b = half(k, n);
        Tensor e = a.to("EMU").matmul(b.to("EMU"));
        e.realize();
        check_close(e.to_vector<float>(), a.matmul(b).to_vector<float>(), 1e-2f);
    }
}

TEST_CASE(
    "GPU heuristics: an sm_90 GPU takes warpgroup mma where it tiles (not with TEMPURA_WGMMA=0)") {
    const auto half = [](int64_t r, int64_t c) {
        return Tensor::from_vector(ramp(r * c, 0.01f), {r, c}, DType::Float16);
    };
    codegen::DeviceLimits h100 = codegen::gpu_limits("H100", 90);
    h100.shared_bytes = 227 * 1024; // an H100's opt-in maximum, as its CUDA limits say
    const Tensor wide = half(4096, 64), tall = half(64, 4096);
    {
        // With TEMPURA_WGMMA=0: warps of mma.sync, staged.
        const EnvVar off("TEMPURA_WGMMA", "0");
        CHECK(gpu_heuristics(wide.matmul(tall), h100) == "[TC(3442, 72)]");
    }
    // Blocks of 128 x 256 (two warpgroups of 64 x 256) by a pipeline of 4 tiles, an mma in
    // flight, for either accumulator; 3 tiles where the device has 163 KiB.
    CHECK(gpu_heuristics(wide.matmul(tall), h100) == "[TC(24421, 256)]");
    CHECK(gpu_heuristics(wide.matmul(tall, DType::Float16), h100) == "[TC(24421, 256)]");
    CHECK(gpu_heuristics(wide.matmul(tall), codegen::gpu_limits("H100", 90)) == "[TC(23421, 256)]");
    // Fewer than 128 such blocks (32 here), or N not a multiple of 256 (4224): as before.
    CHECK(gpu_heuristics(half(1024, 64).matmul(half(64, 1024)), h100) == "[TC(3422, 72)]");
    CHECK(gpu_heuristics(wide.matmul(half(64, 4224)), h100) == "[TC(3442, 72)]");
    // EMU (sm_80) has no wgmma.
    CHECK(gpu_heuristics(wide.matmul(tall)) == "[TC(3442, 72)]");
}
