// Float32 matmuls on the GPU path, staged through shared memory (the SMEM opt): each block's
// threads copy k-steps of A and B into shared memory, a barrier, then every thread updates its
// register tile from there. Checked on EMU against the reference interpreter (small whole
// numbers over 8 and 4: every product and sum is exact, so every order of summation agrees),
// against the unoptimized kernel bit for bit on random floats (the same fused multiply-adds in
// the same order), by the PTX's shared loads and barriers, and through ptxas.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

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
#include "tempura/tensor/reference.hpp"

using namespace tempura;

namespace {

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
std::vector<float> random_values(int64_t n, uint32_t seed) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = d(g);
    return v;
}

std::vector<float> reference(const Tensor& t) {
    std::vector<float> out;
    for (double d : reference_eval(t.uop())) out.push_back(static_cast<float>(d));
    return out;
}

// The matmul a @ b (a0, b0 as stored; read transposed where a_t, b_t) lowered with `opts` for
// EMU and run there into an output of NaN: the lowered kernel, its PTX and the product.
struct OnEmu {
    codegen::LoweredKernel low;
    std::string ptx;
    std::vector<float> got;
};
OnEmu run_on_emu(const Tensor& a0, const Tensor& b0, bool a_t, bool b_t,
                 std::vector<codegen::Opt> opts, const std::string& name) {
    const Tensor a = a_t ? a0.transpose() : a0, b = b_t ? b0.transpose() : b0;
    const Tensor prod = a.matmul(b);
    const std::vector<ScheduledKernel> ks = schedule_graph(prod.uop());
    REQUIRE(ks.size() == 1);
    const codegen::DeviceLimits lim = runtime::emu_limits();
    OnEmu r;
    r.low = codegen::lower_kernel_opt("r", ks[0].ast, lim, &opts);
    const auto kernel = runtime::compile_emu_kernel(
        name, r.low.program, r.low.block[0] * r.low.block[1] * r.low.block[2]);
    r.ptx = kernel->source();
    const Tensor out = Tensor::from_vector(
        std::vector<float>(static_cast<size_t>(prod.numel()), NAN), prod.shape());
    const auto bufs = matmul_buffers(ks[0], out, a0, b0);
    runtime::emu_launch(*kernel, bufs.data(), nullptr, r.low.grid, r.low.block, lim);
    r.got = out.to_vector<float>();
    return r;
}

// The heuristics' opts for t's last kernel under `lim` (EMU's limits by default).
std::string gpu_heuristics(const Tensor& t,
                           const codegen::DeviceLimits& lim = runtime::emu_limits()) {
    const auto ks = schedule_graph(t.uop());
    REQUIRE(!ks.empty());
    return codegen::to_string(
        codegen::heuristic_opts(codegen::prepare_for_opts(ks.back().ast), lim));
}

codegen::Opt smem(int64_t tm, int64_t tn, int64_t lm, int64_t ln, int64_t bk, int64_t pipe = 0) {
    const codegen::SmemTile t{tm, tn, lm, ln, bk, pipe};
    return {codegen::OptOp::Smem, t.tile(), t.block()};
}

} // namespace

TEST_CASE("SMEM: float32 matmuls staged through shared memory on EMU, exact, many shapes") {
#ifndef TEMPURA_PTXAS
    MESSAGE("SKIPPED: ptxas checks (CMake found no CUDA toolkit); the values are still checked");
#endif
    struct Case {
        int64_t m, k, n;
        codegen::SmemTile t;
        bool a_t, b_t; // A stored [K, M], B stored [N, K]
    };
    const Case cases[] = {
        {64, 32, 64, {4, 4, 16, 16, 16}, false, false},
        {128, 64, 128, {8, 8, 16, 16, 8}, false, false},
        {128, 64, 128, {8, 8, 16, 16, 8}, true, true},
        {96, 48, 80, {4, 4, 16, 16, 16}, true, false},
        {64, 40, 96, {4, 8, 16, 8, 8}, false, true},
        // M, N and K padded, odd sizes: copies one element at a time, scalar stores
        {33, 17, 31, {4, 4, 16, 16, 16}, false, false},
        {100, 70, 90, {4, 4, 16, 16, 32}, false, false},
        {7, 5, 3, {2, 2, 16, 16, 4}, false, false},
        {3, 9, 50, {1, 4, 4, 16, 8}, true, true},
        {130, 129, 65, {8, 8, 16, 16, 8}, false, false},
        // blocks of 32 x 8 and 8 x 32 threads, tiles of 8 x 1 and 1 x 8
        {64, 24, 64, {2, 8, 32, 8, 8}, false, false},
        {64, 24, 64, {8, 2, 8, 32, 4}, false, true},
        {256, 16, 8, {8, 1, 32, 8, 16}, false, false},
        {8, 16, 256, {1, 8, 8, 32, 16}, true, false},
        // cp.async pipelines of 2, 3 and 4 tiles: an operand along K copied 4 bytes at a time
        // (transposed into the tile), one along M or N 16 bytes; fewer k-steps than tiles
        {128, 64, 128, {8, 8, 16, 16, 8, 2}, false, false},
        {128, 64, 128, {8, 8, 16, 16, 8, 3}, true, true},
        {96, 48, 80, {4, 4, 16, 16, 16, 4}, true, false},
        {33, 17, 31, {4, 4, 16, 16, 16, 3}, false, false},
        {100, 70, 90, {4, 4, 16, 16, 32, 2}, false, true},
        {64, 16, 64, {4, 4, 16, 16, 8, 4}, false, false},
    };
    for (const Case& c : cases) {
        const codegen::Opt o = smem(c.t.tm, c.t.tn, c.t.lm, c.t.ln, c.t.bk, c.t.pipe);
        INFO(c.m << " x " << c.k << " x " << c.n << ", " << codegen::to_string(o) << ", A^T "
                 << c.a_t << ", B^T " << c.b_t);
        const Tensor a0 =
            Tensor::from_vector(a_values(c.m * c.k), c.a_t ? Shape{c.k, c.m} : Shape{c.m, c.k});
        const Tensor b0 =
            Tensor::from_vector(b_values(c.k * c.n), c.b_t ? Shape{c.n, c.k} : Shape{c.k, c.n});
        const Tensor a = c.a_t ? a0.transpose() : a0, b = c.b_t ? b0.transpose() : b0;
        const OnEmu run = run_on_emu(a0, b0, c.a_t, c.b_t, {o}, "r_smem");
        CHECK(run.got == reference(a.matmul(b)));
        const int64_t bm = c.t.lm * c.t.tm, bn = c.t.ln * c.t.tn;
        // Threads: tx the block's x, ty its y; a block per bm x bn outputs.
        CHECK(run.low.block == std::array<int64_t, 3>{c.t.ln, c.t.lm, 1});
        CHECK(run.low.grid[0] * run.low.grid[1] * run.low.grid[2] ==
              (c.m + bm - 1) / bm * ((c.n + bn - 1) / bn));
        // One barrier a k-step; the register tile reads its operands from shared memory, four
        // neighbours at a time where the tile has four along a row.
        const std::string& ptx = run.ptx;
        CHECK(count_of(ptx, "bar.sync") == 1);
        CHECK(count_of(ptx, "ld.shared") > 0);
        CHECK((count_of(ptx, "ld.shared.v4.f32") > 0) == (c.t.tm >= 4 || c.t.tn >= 4));
        if (c.t.pipe == 0) {
            CHECK(count_of(ptx, "st.shared") > 0);
            CHECK(count_of(ptx, "cp.async") == 0);
        } else {
            // Copies by cp.async only: a commit after each of the prologue's tiles but the
            // last, and the loop's wait.
            CHECK(count_of(ptx, "st.shared") == 0);
            CHECK(count_of(ptx, "cp.async.ca.shared.global") +
                      count_of(ptx, "cp.async.cg.shared.global") >
                  0);
            const int64_t steps = (c.k + c.t.bk - 1) / c.t.bk;
            size_t waits = 0;
            for (const UOp& u : run.low.program) waits += u.op() == Op::AsyncWait ? 1 : 0;
            CHECK(waits == static_cast<size_t>(std::min(c.t.pipe - 1, steps)));
        }
        CHECK(ptxas(ptx, "sm_80") == "");
        CHECK(ptxas(ptx, "sm_90") == "");
    }
}

TEST_CASE("SMEM: the same fused multiply-adds in the same order as the plain loop, bit for bit") {
    // Random floats: the staged kernel's sums round as the unoptimized kernel's do (one FMA a
    // k, in k order), so the two agree bit for bit, padding included.
    for (const auto& [m, k, n] :
         std::vector<std::array<int64_t, 3>>{{64, 64, 64}, {45, 77, 51}, {128, 24, 130}}) {
        INFO(m << " x " << k << " x " << n);
        const Tensor a = Tensor::from_vector(random_values(m * k, 1), {m, k});
        const Tensor b = Tensor::from_vector(random_values(k * n, 2), {k, n});
        const OnEmu plain = run_on_emu(a, b, false, false, {}, "r_plain");
        for (const codegen::Opt& o :
             {smem(4, 4, 16, 16, 16), smem(8, 8, 16, 16, 8), smem(2, 4, 8, 16, 32)}) {
            INFO(codegen::to_string(o));
            const OnEmu staged = run_on_emu(a, b, false, false, {o}, "r_smem");
            CHECK(staged.got == plain.got);
        }
    }
}

TEST_CASE("SMEM: the heuristics stage float32 matmuls; batched and with an epilogue, one kernel") {
#ifndef TEMPURA_PTXAS
    MESSAGE("SKIPPED: ptxas checks (CMake found no CUDA toolkit); the values are still checked");
#endif
    const auto mat = [](int64_t r, int64_t c, bool left) {
        return Tensor::from_vector(left ? a_values(r * c) : b_values(r * c), {r, c});
    };
    // 16 x 16 threads a block: 128 x 128 outputs (8 x 8 a thread, k-steps of 8) where 128 or
    // more such blocks tile the output, else 64 x 64 (4 x 4, k-steps of 16) where 128 of those
    // do, else 32 x 32 (2 x 2), each by a cp.async pipeline of 3 tiles; a padded size takes the
    // next smaller where padding would add more than a quarter.
    CHECK(gpu_heuristics(mat(2048, 64, true).matmul(mat(64, 1024, false))) ==
          "[SMEM(136, 3081616)]");
    CHECK(gpu_heuristics(mat(1024, 64, true).matmul(mat(64, 1024, false))) ==
          "[SMEM(68, 3161616)]");
    CHECK(gpu_heuristics(mat(128, 64, true).matmul(mat(64, 96, false))) == "[SMEM(34, 3161616)]");
    CHECK(gpu_heuristics(mat(2050, 64, true).matmul(mat(64, 1024, false))) ==
          "[SMEM(136, 3081616)]");
    // 129 rows: 128 x 128 blocks would double them, 64 x 64 add half: 32 x 32.
    CHECK(gpu_heuristics(mat(129, 64, true).matmul(mat(64, 16384, false))) ==
          "[SMEM(34, 3161616)]");
    // K of 5: k-steps of 8.
    CHECK(gpu_heuristics(mat(64, 5, true).matmul(mat(5, 64, false))) == "[SMEM(34, 3081616)]");
    // A batch of 8 of 256 x 256: 32 blocks of 128 x 128, 128 of 64 x 64.
    const Tensor ba = Tensor::from_vector(a_values(8 * 256 * 32), {8, 256, 32});
    const Tensor bb = Tensor::from_vector(b_values(8 * 32 * 256), {8, 32, 256});
    CHECK(gpu_heuristics(ba.matmul(bb)) == "[SMEM(68, 3161616)]");
    // Under 32 rows or columns, or not float32: the register tiling without shared memory.
    CHECK(gpu_heuristics(mat(16, 64, true).matmul(mat(64, 256, false))) ==
          "[UPCAST(1, 4), UPCAST(0, 4), LOCAL(1, 16), LOCAL(0, 4)]");
    const Tensor d = Tensor::from_vector(a_values(64 * 64), {64, 64}, DType::Float64);
    CHECK(gpu_heuristics(d.matmul(d)).find("SMEM") == std::string::npos);

    // Through realize on EMU: a matmul, a batched one with a shared weight, one with a bias and
    // a ReLU after it, odd sizes: one kernel each (as on the CPU), the reference's values, the
    // PTX staging through shared memory.
    const Tensor bias = Tensor::from_vector(b_values(70), {70});
    const Tensor w = mat(40, 70, false);
    const auto programs = std::vector<std::pair<std::string, std::function<Tensor(bool)>>>{
        {"matmul",
         [&](bool emu) {
             const Tensor x = mat(200, 72, true), y = mat(72, 136, false);
             return emu ? x.to("EMU").matmul(y.to("EMU")) : x.matmul(y);
         }},
        {"batched, shared weight",
         [&](bool emu) {
             const Tensor x = Tensor::from_vector(a_values(3 * 50 * 40), {3, 50, 40});
             return emu ? x.to("EMU").matmul(w.to("EMU")) : x.matmul(w);
         }},
        {"batched",
         [&](bool emu) { return emu ? ba.to("EMU").matmul(bb.to("EMU")) : ba.matmul(bb); }},
        {"bias and relu",
         [&](bool emu) {
             const Tensor x = mat(90, 40, true);
             return emu ? (x.to("EMU").matmul(w.to("EMU")) + bias.to("EMU")).relu()
                        : (x.matmul(w) + bias).relu();
         }},
    };
    for (const auto& [what, make] : programs) {
        INFO(what);
        const Tensor cpu = make(false);
        const std::vector<float> want = reference(cpu);
        Tensor e = make(true);
        e.realize();
        CHECK(e.to_vector<float>() == want);
        Tensor c = make(false);
        c.realize();
        CHECK(e.kernels().size() == c.kernels().size());
        REQUIRE(e.kernels().size() == 1);
        const std::string& ptx = e.kernels()[0].source;
        CHECK(count_of(ptx, "bar.sync") == 1);
        CHECK(count_of(ptx, "ld.shared") > 0);
        CHECK(ptxas(ptx, "sm_80") == "");
        CHECK(ptxas(ptx, "sm_90") == "");
    }
}

TEST_CASE("SMEM: a symbolic batch that stays a loop in every thread, and the opt's errors") {
    // Two symbolic batch axes: one gets a grid dim, the other stays a loop around the block's
    // copies, k-steps and stores, so a barrier after the k-steps keeps the next batch's first
    // copies off the tiles other threads still read (EMU's race detector would report them).
    const Dim p = Dim::variable("p", 1, 4), q = Dim::variable("q", 1, 4);
    const int64_t pv = 2, qv = 3, m = 40, k = 24, n = 36;
    const Tensor a = Tensor::from_vector(a_values(pv * qv * m * k), {p.bind(pv), q.bind(qv), m, k});
    const Tensor b = Tensor::from_vector(b_values(k * n), {k, n});
    const Tensor prod = a.matmul(b);
    const std::vector<float> want =
        reference(Tensor::from_vector(a_values(pv * qv * m * k), {pv, qv, m, k}).matmul(b));
    const std::vector<UOp> topo = prod.uop().toposort();
    const SymbolicShapes sym = infer_symbolic_shapes(topo);
    const std::vector<ScheduledKernel> ks = schedule_graph(prod.uop(), &sym);
    REQUIRE(ks.size() == 1);
    const codegen::DeviceLimits lim = runtime::emu_limits();
    for (const codegen::Opt& o : {smem(4, 4, 8, 8, 8), smem(2, 2, 16, 16, 8, 3)}) {
        INFO(codegen::to_string(o));
        std::vector<codegen::Opt> opts{o};
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
        const Tensor out =
            Tensor::from_vector(std::vector<float>(want.size(), NAN), {pv, qv, m, n});
        const auto bufs = matmul_buffers(ks[0], out, a, b);
        const std::map<std::string, int64_t> values{{"p", pv}, {"q", qv}};
        std::array<int64_t, 3> grid = low.grid;
        for (size_t d = 0; d < 3; ++d)
            if (!low.grid_size[d].is_null()) grid[d] = evaluate(low.grid_size[d], values);
        const int64_t vars[2] = {pv, qv};
        runtime::emu_launch(*kern, bufs.data(), vars, grid, low.block, lim);
        CHECK(out.to_vector<float>() == want);
    }

    // The errors.
    const Tensor x = Tensor::from_vector(a_values(64 * 64), {64, 64});
    const auto ks2 = schedule_graph(x.matmul(x).uop());
    const UOp prepared = codegen::prepare_for_opts(ks2[0].ast);
    const auto error = [&](const codegen::Opt& o, const codegen::DeviceLimits& l) {
        codegen::OptKernel kern(prepared, l);
        return error_of([&] { kern.apply(o); });
    };
    const std::string bad =
        "the tile is 16 * rows + columns (each 1, 2, 4 or 8) and the block 1000000 * pipeline "
        "tiles (0, 2, 3 or 4) + 10000 * k-step (4, 8, 16 or 32) + 100 * row threads + column "
        "threads (each a power of two up to 32, at least 32 threads), got ";
    CHECK(error({codegen::OptOp::Smem, 68, 161603}, lim) ==
          "[opt] SMEM(68, 161603): " + bad + "68 and 161603");
    CHECK(error({codegen::OptOp::Smem, 67, 161616}, lim) ==
          "[opt] SMEM(67, 161616): " + bad + "67 and 161616");
    CHECK(error({codegen::OptOp::Smem, 68, 1161616}, lim) ==
          "[opt] SMEM(68, 1161616): " + bad + "68 and 1161616");
    CHECK(error({codegen::OptOp::Smem, 68, 40404}, lim) ==
          "[opt] SMEM(68, 40404): " + bad + "68 and 40404");
    CHECK(error({codegen::OptOp::Smem, 68, 161616}, codegen::DeviceLimits{}) ==
          "[opt] SMEM(68, 161616): the CPU device has no shared memory to stage a matmul's "
          "operands in (a GPU has)");
    // 32 x 32 threads of 8 x 8: 256 x 256 outputs, k-steps of 32 in 4 tiles of rows of 256 + 4,
    // for each operand: 4 x 32 x 260 x 2 x 4 bytes.
    CHECK(error({codegen::OptOp::Smem, 136, 4323232}, lim) ==
          "[opt] SMEM(136, 4323232): the staged tiles need 266240 bytes of shared memory, over "
          "the EMU device's 166912");
    const Tensor h = Tensor::from_vector(a_values(64 * 64), {64, 64}, DType::Float16);
    codegen::OptKernel hk(codegen::prepare_for_opts(schedule_graph(h.matmul(h).uop())[0].ast), lim);
    CHECK(error_of([&] {
              hk.apply({codegen::OptOp::Smem, 68, 161616});
          }) ==
          "[opt] SMEM(68, 161616): the kernel is not a matmul of Float32 operands (one sum over "
          "one axis of the products of two float32 loads)");
    codegen::OptKernel kern(prepared, lim);
    kern.apply({codegen::OptOp::Upcast, 0, 4});
    CHECK(error_of([&] {
              kern.apply({codegen::OptOp::Smem, 68, 161616});
          }) == "[opt] SMEM(68, 161616): SMEM comes first: the kernel has opts applied already");
    codegen::OptKernel first(prepared, lim);
    first.apply({codegen::OptOp::Smem, 68, 161616});
    CHECK(error_of([&] {
              first.apply({codegen::OptOp::Upcast, 0, 2});
          }) ==
          "[opt] UPCAST(0, 2): SMEM(68, 161616) staged the operands through shared memory for its "
          "block of threads: no opt may follow it");
}

TEST_CASE("SMEM: random shapes, layouts, epilogues and tilings on EMU against the reference") {
    // 24 random float32 matmuls: M, N and K in [2, 150] (K = 1 is an outer product, no reduce),
    // each operand stored either way, batched or not, a bias and a ReLU or none, under a random
    // tiling (register tile, block of threads, k-step, copies through registers or a pipeline of 2
    // to 4 tiles).
    std::mt19937 g(20261127);
    const auto pick = [&](std::initializer_list<int64_t> v) {
        return *(v.begin() + static_cast<long>(g() % v.size()));
    };
    const auto in = [&](int64_t lo, int64_t hi) {
        return lo + static_cast<int64_t>(g() % static_cast<uint32_t>(hi - lo + 1));
    };
    const codegen::DeviceLimits lim = runtime::emu_limits();
    int ran = 0;
    for (int c = 0; c < 24; ++c) {
        const int64_t m = in(2, 150), k = in(2, 150), n = in(2, 150), batch = pick({1, 1, 3});
        const bool a_t = g() % 2 != 0, b_t = g() % 2 != 0, bias = g() % 2 != 0;
        codegen::SmemTile t{pick({1, 2, 4, 8}),   pick({1, 2, 4, 8}),   pick({4, 8, 16, 32}),
                            pick({4, 8, 16, 32}), pick({4, 8, 16, 32}), pick({0, 2, 3, 4})};
        while (t.lm * t.ln < 32) t.ln *= 2;
        while (t.lm * t.ln > 1024) t.lm /= 2;
        INFO("case " << c << ": " << batch << " x " << m << " x " << k << " x " << n << ", A^T "
                     << a_t << ", B^T " << b_t << ", bias " << bias << ", SMEM(" << t.tile() << ", "
                     << t.block() << ")");
        const Shape as = a_t ? Shape{batch, k, m} : Shape{batch, m, k};
        const Shape bs = b_t ? Shape{n, k} : Shape{k, n};
        const Tensor a0 = Tensor::from_vector(a_values(batch * m * k), as);
        const Tensor b0 = Tensor::from_vector(b_values(k * n), bs);
        const Tensor bv = Tensor::from_vector(b_values(n), {n});
        const auto program = [&](const Tensor& a, const Tensor& b, const Tensor& v) {
            const Tensor p = (a_t ? a.transpose(1, 2) : a).matmul(b_t ? b.transpose() : b);
            return bias ? (p + v).relu() : p;
        };
        const Tensor cpu = program(a0, b0, bv);
        const std::vector<ScheduledKernel> ks = schedule_graph(cpu.uop());
        REQUIRE(ks.size() == 1);
        std::vector<codegen::Opt> opts{{codegen::OptOp::Smem, t.tile(), t.block()}};
        codegen::OptKernel probe(codegen::prepare_for_opts(ks[0].ast), lim);
        if (!probe.try_apply(opts[0])) {
            // Only the device's shared memory refuses a valid tiling of a matmul.
            CHECK(error_of([&] { probe.apply(opts[0]); }).find("bytes of shared memory") !=
                  std::string::npos);
            continue;
        }
        ++ran;
        // The kernel lowered with these opts, run on EMU, against the reference.
        const codegen::LoweredKernel low = codegen::lower_kernel_opt("r", ks[0].ast, lim, &opts);
        const auto kern = runtime::compile_emu_kernel("r_rand", low.program,
                                                      low.block[0] * low.block[1] * low.block[2]);
        const Tensor out = Tensor::from_vector(
            std::vector<float>(static_cast<size_t>(cpu.numel()), NAN), cpu.shape());
        std::vector<void*> bufs;
        for (size_t s = 0; s < ks[0].params.size(); ++s) {
            // The buffer behind the slot's tensor-level node.
            int64_t id = -1;
            for (const UOp& u : ks[0].params[s].toposort())
                if (u.op() == Op::Buffer) id = u.arg_as<std::vector<int64_t>>().at(0);
            const auto is = [&](const Tensor& t) {
                return id == static_cast<int64_t>(t.buffer()->id());
            };
            const Tensor* which = s == 0   ? &out
                                  : is(a0) ? &a0
                                  : is(b0) ? &b0
                                  : is(bv) ? &bv
                                           : nullptr;
            INFO("slot " << s << " buffer " << id << " op " << op_name(ks[0].params[s].op()));
            REQUIRE(which != nullptr);
            bufs.push_back(
                reinterpret_cast<void*>(static_cast<uintptr_t>(which->buffer()->address())));
        }
        runtime::emu_launch(*kern, bufs.data(), nullptr, low.grid, low.block, lim);
        CHECK(out.to_vector<float>() == reference(cpu));
    }
    CHECK(ran >= 20);
}
