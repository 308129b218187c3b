// Row fusion on the GPU path: softmax, log_softmax, layer_norm and rms_norm are one EMU kernel,
// one block a row whose threads share each reduce through shared memory, with the CPU's values
// and PTX that ptxas assembles.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../support.hpp"
#include "ptxas.hpp"
#include "tempura/codegen/stages.hpp"
#include "tempura/realize/device.hpp"
#include "tempura/schedule/schedule.hpp"
#include "tempura/tempura.hpp"

using namespace tempura;

namespace {

std::vector<float> row_values(size_t n, uint32_t seed) {
    std::vector<float> v(n);
    uint32_t s = seed;
    for (float& x : v) {
        s = s * 1664525u + 1013904223u;
        x = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001 - 1000) / 250.0f;
    }
    return v;
}

} // namespace

TEST_CASE("EMU: row fusion runs softmax and the norms as one kernel, one block a row") {
#ifndef TEMPURA_PTXAS
    MESSAGE("SKIPPED: ptxas checks (CMake found no CUDA toolkit); the values are still checked");
#endif
    const int64_t n = 6, d = 512;
    const Tensor x = Tensor::from_vector(row_values(static_cast<size_t>(n * d), 1), {n, d});
    const Tensor w = Tensor::from_vector(row_values(static_cast<size_t>(d), 2), {d});
    const Tensor b = Tensor::from_vector(row_values(static_cast<size_t>(d), 3), {d});
    const Tensor xe = x.to("EMU"), we = w.to("EMU"), be = b.to("EMU");
    struct Case {
        const char* name;
        Tensor emu, cpu;
        int barriers; // one a reduce
    };
    std::vector<Case> cases{
        {"softmax", xe.softmax(-1), x.softmax(-1), 2},
        {"log_softmax", xe.log_softmax(-1), x.log_softmax(-1), 2},
        {"layer_norm", nn::layer_norm(xe, {d}, we, be, 1e-5), nn::layer_norm(x, {d}, w, b, 1e-5),
         2},
        {"rms_norm", nn::rms_norm(xe, we, 1e-6), nn::rms_norm(x, w, 1e-6), 1},
    };
    for (Case& c : cases) {
        CAPTURE(c.name);
        c.emu.realize();
        REQUIRE(c.emu.kernels().size() == 1);
        const KernelInfo& k = c.emu.kernels()[0];
        CHECK(k.backend == "EMU");
        check_close(c.emu.to_vector<float>(), c.cpu.to_vector<float>(), 2e-6f);
        // 256 threads a row (the largest divisor of 512 within 256): each reduce's partials in
        // shared memory behind a barrier, then the row's outputs 256 at a time.
        CHECK(k.source.find(".maxntid 256, 1, 1") != std::string::npos);
        int bars = 0;
        for (size_t at = k.source.find("bar.sync"); at != std::string::npos;
             at = k.source.find("bar.sync", at + 1))
            ++bars;
        CHECK(bars == c.barriers);
        CHECK(ptxas(k.source, "sm_80") == "");
        CHECK(ptxas(k.source, "sm_90") == "");
    }
    // One block a row, whatever the row's length: the block loops over the row's outputs, 256
    // at a time, after its reduces (a block for each 256 outputs computed the row's reduces once
    // for each). Softmax over rows of 4096: 6 blocks of 256 threads, each 16 times round.
    {
        const Tensor wide = Tensor::from_vector(row_values(6 * 4096, 5), {6, 4096});
        const std::vector<ScheduledKernel> ks = schedule_graph(wide.softmax(1).uop());
        REQUIRE(ks.size() == 1);
        const codegen::LoweredKernel low = codegen::lower_kernel_opt(
            ks[0].name, ks[0].ast, runtime::device_limits(runtime::device_index("EMU")));
        CHECK(low.grid == std::array<int64_t, 3>{6, 1, 1});
        CHECK(low.block == std::array<int64_t, 3>{256, 1, 1});
        Tensor e = wide.to("EMU").softmax(1);
        check_close(e.to_vector<float>(), wide.softmax(1).to_vector<float>(), 2e-6f);
        CHECK(ptxas(e.kernels().at(0).source, "sm_90") == "");
    }
    // A row of a prime length: as many threads as the row has elements, when it fits a block.
    const Tensor odd = Tensor::from_vector(row_values(3 * 37, 4), {3, 37});
    Tensor s = odd.to("EMU").softmax(1);
    s.realize();
    REQUIRE(s.kernels().size() == 1);
    CHECK(s.kernels()[0].source.find(".maxntid 37, 1, 1") != std::string::npos);
    check_close(s.to_vector<float>(), odd.softmax(1).to_vector<float>(), 2e-6f);
}

TEST_CASE("EMU: a reduce nested in another's loop is not laid out over row threads") {
    // The min over rows a of the mean over k of x[a, k], and the max over a of a dot product
    // over k: the inner reduce's value uses a, so one thread index shared by a and k would
    // reduce across rows. (On an H200 both gave wrong values; EMU reported a shared-memory
    // race: random programs 888 and 1021 of the differential suite's default seed.)
    std::vector<float> xv(8), pv(4 * 4 * 3), vv(4);
    for (size_t i = 0; i < xv.size(); ++i)
        xv[i] = static_cast<float>(static_cast<int>(i * 5 % 7) - 3);
    for (size_t i = 0; i < pv.size(); ++i)
        pv[i] = static_cast<float>(static_cast<int>(i * 3 % 5) - 2);
    for (size_t i = 0; i < vv.size(); ++i) vv[i] = static_cast<float>(i) - 1.5f;
    const Tensor x = Tensor::from_vector(xv, {4, 2}), p = Tensor::from_vector(pv, {4, 4, 3}),
                 v = Tensor::from_vector(vv, {4});
    const auto first = [](const Tensor& t) { return 1.0f - (t + t.mean({1}, true).min(0)); };
    const auto second = [](const Tensor& pt, const Tensor& vt) {
        return vt.dot(pt).max({0}).slice({{-3, 1, 2}}) - pt;
    };
    Tensor a = first(x.to("EMU")), b = second(p.to("EMU"), v.to("EMU"));
    a.realize();
    b.realize();
    REQUIRE(a.kernels().size() == 1);
    CHECK(a.kernels()[0].source.find("bar.sync") == std::string::npos);
    CHECK(a.to_vector<float>() == first(x).to_vector<float>());
    CHECK(b.to_vector<float>() == second(p, v).to_vector<float>());
}
