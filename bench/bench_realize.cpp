// realize() end to end, graph to result, each figure beside a peer measured in this binary.
//
//   BM_ColdRealizeFma      a*b+c+k on 1M floats with a new constant k each iteration, so every
//                          realize misses the plan and kernel caches: schedule + codegen + LLVM
//                          compile + run. Peer: a hand-written C++ loop computing the same.
//   BM_WarmRealizeFma      a*b+c on 1M floats, fresh input tensors each iteration (plan cache hit:
//                          allocate + run). Peer: the hand-written loop.
//   BM_TinyRealizeOverhead the same structure re-realized on 16-element inputs: what realize()
//                          costs per kernel when the work is nothing. Target: DESIGN's 5 us.
//                          viz_off_pct: what TEMPURA_VIZ, unset, adds to it (target < 1%).
//   BM_MlpForwardWarm      softmax(relu(x @ W1^T + b1) @ W2^T + b2), batch 64, 784-128-10, warm.
//                          Peers: the same forward pass as plain C++ loops, and with OpenBLAS
//                          sgemm (one thread, like a Tempura kernel) when libopenblas is found.
//   BM_CompileTimePerKernel a new constant per iteration, tiny tensors: every kernel is compiled;
//                          realize time / kernels compiled. Target: 10 ms per kernel. Arg 3
//                          splits the pipeline into schedule, lower (codegen stages) and LLVM.
//
// Timing is manual (steady_clock around graph building + realize(); making input tensors is
// outside it). Counters are medians over the iterations: `*_ms` / `*_us` are Tempura's figures,
// `peer_*` the peer's, `ratio_*` Tempura over the peer (or over the target): below 1 is faster.
//
// Run:  OPENBLAS_CORETYPE=SkylakeX build/release/bench/bench_realize
// (OpenBLAS 0.3.21 takes this Zen 5 CPU for Haswell without it.)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <tempura/backend/llvm_cpu.hpp>
#include <tempura/codegen/stages.hpp>
#include <tempura/realize/viz.hpp>
#include <tempura/rewrite/trace.hpp>
#include <tempura/schedule/schedule.hpp>
#include <tempura/tempura.hpp>

#include "bench_common.hpp"

#if defined(TEMPURA_HAVE_OPENBLAS)
#include <cblas.h>
#endif

namespace {

using bench::Clock;
using bench::median;
using bench::median_ms;
using bench::ms_between;
using bench::random_floats;
using tempura::Shape;
using tempura::Tensor;

constexpr int64_t kBig = int64_t{1} << 20; // 1M floats
constexpr int64_t kTiny = 16;
constexpr double kTargetOverheadUs = 5.0; // DESIGN: per-kernel launch overhead
constexpr double kTargetCompileMs = 10.0; // DESIGN: compile time of a small kernel

// A constant that never repeats within the process, so a graph holding it misses every cache.
float g_next_constant = 1.0f;
float next_constant() { return g_next_constant += 1.0f; }

size_t compiles_so_far() { return tempura::runtime::cpu_kernel_cache_stats().misses; }

// The peer of a*b+c(+k): a plain loop into a newly allocated output, as realize() allocates one.
std::unique_ptr<float[]> fma_loop(const float* a, const float* b, const float* c, float k,
                                  int64_t n) {
    std::unique_ptr<float[]> out(new float[static_cast<size_t>(n)]);
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i] + c[i] + k;
    return out;
}

bool close(float x, float y) { return std::fabs(x - y) <= 1e-5f * (1.0f + std::fabs(y)); }

// ---- (a) cold realize ---------------------------------------------------------------------------

void BM_ColdRealizeFma(benchmark::State& state) {
    const std::vector<float> ha = random_floats(kBig, 1), hb = random_floats(kBig, 2),
                             hc = random_floats(kBig, 3);
    const Tensor a = Tensor::from_vector(ha), b = Tensor::from_vector(hb),
                 c = Tensor::from_vector(hc);
    {
        // The process's first compile also creates the JIT; keep it out, and check the result.
        Tensor r = a * b + c + next_constant();
        const float k = g_next_constant;
        const std::vector<float> got = r.to_vector<float>();
        for (int64_t i = 0; i < kBig; i += 4099)
            if (!close(got[static_cast<size_t>(i)],
                       ha[static_cast<size_t>(i)] * hb[static_cast<size_t>(i)] +
                           hc[static_cast<size_t>(i)] + k)) {
                state.SkipWithError("a*b+c+k is wrong");
                return;
            }
    }
    std::vector<double> ms;
    size_t kernels = 0;
    for (auto _ : state) {
        const float k = next_constant();
        const size_t before = compiles_so_far();
        const auto t0 = Clock::now();
        Tensor r = a * b + c + k;
        r.realize();
        const auto t1 = Clock::now();
        if (compiles_so_far() == before) {
            state.SkipWithError("the realize hit the kernel cache: not cold");
            return;
        }
        kernels = r.kernels().size();
        benchmark::DoNotOptimize(r.buffer());
        ms.push_back(ms_between(t0, t1));
        state.SetIterationTime(ms.back() / 1e3);
    }
    const double peer = median_ms(
        [&] { benchmark::DoNotOptimize(fma_loop(ha.data(), hb.data(), hc.data(), 0.5f, kBig)); },
        50);
    state.counters["median_ms"] = median(ms);
    state.counters["kernels"] = static_cast<double>(kernels);
    state.counters["peer_loop_ms"] = peer;
    state.counters["ratio_vs_loop"] = median(ms) / peer;
}
BENCHMARK(BM_ColdRealizeFma)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(30);

// ---- (b) warm realize ---------------------------------------------------------------------------

void BM_WarmRealizeFma(benchmark::State& state) {
    const std::vector<float> ha = random_floats(kBig, 4), hb = random_floats(kBig, 5),
                             hc = random_floats(kBig, 6);
    {
        Tensor r = Tensor::from_vector(ha) * Tensor::from_vector(hb) + Tensor::from_vector(hc);
        const std::vector<float> got = r.to_vector<float>(); // builds the plan: later ones hit
        for (int64_t i = 0; i < kBig; i += 4099) {
            const size_t j = static_cast<size_t>(i);
            if (!close(got[j], ha[j] * hb[j] + hc[j])) {
                state.SkipWithError("a*b+c is wrong");
                return;
            }
        }
    }
    std::vector<double> ms;
    const size_t compiles = compiles_so_far();
    for (auto _ : state) {
        const Tensor a = Tensor::from_vector(ha), b = Tensor::from_vector(hb),
                     c = Tensor::from_vector(hc); // fresh buffers, outside the timing
        const auto t0 = Clock::now();
        Tensor r = a * b + c;
        r.realize();
        const auto t1 = Clock::now();
        benchmark::DoNotOptimize(r.buffer());
        ms.push_back(ms_between(t0, t1));
        state.SetIterationTime(ms.back() / 1e3);
    }
    if (compiles_so_far() != compiles) state.SkipWithError("a warm realize compiled a kernel");
    const double peer = median_ms(
        [&] { benchmark::DoNotOptimize(fma_loop(ha.data(), hb.data(), hc.data(), 0.0f, kBig)); },
        50);
    state.counters["median_ms"] = median(ms);
    state.counters["peer_loop_ms"] = peer;
    state.counters["ratio_vs_loop"] = median(ms) / peer;
}
BENCHMARK(BM_WarmRealizeFma)->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(1.0);

// ---- (c) per-kernel overhead on tiny tensors ----------------------------------------------------

// Arg 0: a*b+c (one kernel). Arg 1: softmax over 16 elements (several kernels).
Tensor tiny_graph(int64_t which, const Tensor& a, const Tensor& b, const Tensor& c) {
    return which == 0 ? a * b + c : (a * b + c).softmax(-1);
}

void BM_TinyRealizeOverhead(benchmark::State& state) {
    const int64_t which = state.range(0);
    const std::vector<float> ha = random_floats(kTiny, 7), hb = random_floats(kTiny, 8),
                             hc = random_floats(kTiny, 9);
    Tensor warm = tiny_graph(which, Tensor::from_vector(ha), Tensor::from_vector(hb),
                             Tensor::from_vector(hc));
    warm.realize();
    const size_t kernels = warm.kernels().size();
    const size_t compiles = compiles_so_far();
    std::vector<double> us;
    us.reserve(1 << 20);
    for (auto _ : state) {
        const Tensor a = Tensor::from_vector(ha), b = Tensor::from_vector(hb),
                     c = Tensor::from_vector(hc);
        const auto t0 = Clock::now();
        Tensor r = tiny_graph(which, a, b, c);
        r.realize();
        const auto t1 = Clock::now();
        benchmark::DoNotOptimize(r.buffer());
        us.push_back(ms_between(t0, t1) * 1e3);
        state.SetIterationTime(us.back() / 1e6);
    }
    if (compiles_so_far() != compiles) state.SkipWithError("a warm realize compiled a kernel");
    const double per_kernel = median(us) / static_cast<double>(kernels);
    const double peer_us = 1e3 * median_ms(
                                     [&] {
                                         benchmark::DoNotOptimize(fma_loop(ha.data(), hb.data(),
                                                                           hc.data(), 0.0f, kTiny));
                                     },
                                     2000);
    state.counters["median_us"] = median(us);
    state.counters["kernels"] = static_cast<double>(kernels);
    state.counters["us_per_kernel"] = per_kernel;
    state.counters["target_us"] = kTargetOverheadUs;
    state.counters["ratio_to_target"] = per_kernel / kTargetOverheadUs;
    state.counters["peer_loop_us"] = peer_us; // a*b+c as a loop (for scale)
    // What TEMPURA_VIZ costs a realize while unset: the call's scope, which records nothing
    // (one atomic load), and the recorder lookup of each graph_rewrite (a thread-local load).
    const double viz_off_ns = 1e6 *
                              median_ms(
                                  [] {
                                      for (int i = 0; i < 1000; ++i) {
                                          const tempura::viz::CallScope scope;
                                          benchmark::DoNotOptimize(tempura::trace::current());
                                      }
                                  },
                                  200) /
                              1000;
    state.counters["viz_off_ns"] = viz_off_ns;
    state.counters["viz_off_pct"] = 100 * viz_off_ns / (median(us) * 1e3);
    state.SetLabel(which == 0 ? "a*b+c [16]" : "softmax(a*b+c) [16]");
}
BENCHMARK(BM_TinyRealizeOverhead)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond)
    ->UseManualTime()
    ->MinTime(1.0);

// ---- (d) the MLP forward pass
// ---------------------------------------------------------------------

constexpr int64_t kBatch = 64, kIn = 784, kHidden = 128, kClasses = 10;

struct Mlp {
    std::vector<float> w1 = random_floats(kHidden * kIn, 11), b1 = random_floats(kHidden, 12),
                       w2 = random_floats(kClasses * kHidden, 13), b2 = random_floats(kClasses, 14);
    Tensor tw1 = Tensor::from_vector(w1, {kHidden, kIn}), tb1 = Tensor::from_vector(b1),
           tw2 = Tensor::from_vector(w2, {kClasses, kHidden}), tb2 = Tensor::from_vector(b2);

    Mlp() {
        for (float& w : w1) w *= 1.0f / 28.0f; // ~ +-1/sqrt(784), keeps the logits moderate
        for (float& w : w2) w *= 1.0f / 11.3f;
        tw1 = Tensor::from_vector(w1, {kHidden, kIn});
        tw2 = Tensor::from_vector(w2, {kClasses, kHidden});
    }
    Tensor forward(const Tensor& x) const {
        const Tensor h = (x.dot(tw1.transpose(0, 1)) + tb1).relu();
        return (h.dot(tw2.transpose(0, 1)) + tb2).softmax(-1);
    }
};

void softmax_rows(float* z) {
    for (int64_t r = 0; r < kBatch; ++r) {
        float* row = z + r * kClasses;
        const float m = *std::max_element(row, row + kClasses);
        float s = 0;
        for (int64_t j = 0; j < kClasses; ++j) s += row[j] = std::exp(row[j] - m);
        for (int64_t j = 0; j < kClasses; ++j) row[j] /= s;
    }
}

// The peer: the same forward pass as plain loops (the order Tempura's kernels use).
std::vector<float> mlp_loops(const Mlp& m, const std::vector<float>& x) {
    std::vector<float> h(static_cast<size_t>(kBatch * kHidden)),
        z(static_cast<size_t>(kBatch * kClasses));
    for (int64_t r = 0; r < kBatch; ++r)
        for (int64_t j = 0; j < kHidden; ++j) {
            float acc = 0;
            for (int64_t k = 0; k < kIn; ++k)
                acc += x[static_cast<size_t>(r * kIn + k)] * m.w1[static_cast<size_t>(j * kIn + k)];
            h[static_cast<size_t>(r * kHidden + j)] =
                std::max(acc + m.b1[static_cast<size_t>(j)], 0.0f);
        }
    for (int64_t r = 0; r < kBatch; ++r)
        for (int64_t j = 0; j < kClasses; ++j) {
            float acc = 0;
            for (int64_t k = 0; k < kHidden; ++k)
                acc += h[static_cast<size_t>(r * kHidden + k)] *
                       m.w2[static_cast<size_t>(j * kHidden + k)];
            z[static_cast<size_t>(r * kClasses + j)] = acc + m.b2[static_cast<size_t>(j)];
        }
    softmax_rows(z.data());
    return z;
}

#if defined(TEMPURA_HAVE_OPENBLAS)
std::vector<float> mlp_openblas(const Mlp& m, const std::vector<float>& x) {
    std::vector<float> h(static_cast<size_t>(kBatch * kHidden)),
        z(static_cast<size_t>(kBatch * kClasses));
    for (int64_t r = 0; r < kBatch; ++r)
        std::copy(m.b1.begin(), m.b1.end(), h.begin() + r * kHidden);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kBatch, kHidden, kIn, 1.0f, x.data(), kIn,
                m.w1.data(), kIn, 1.0f, h.data(), kHidden);
    for (float& v : h) v = std::max(v, 0.0f);
    for (int64_t r = 0; r < kBatch; ++r)
        std::copy(m.b2.begin(), m.b2.end(), z.begin() + r * kClasses);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kBatch, kClasses, kHidden, 1.0f, h.data(),
                kHidden, m.w2.data(), kHidden, 1.0f, z.data(), kClasses);
    softmax_rows(z.data());
    return z;
}
#endif

void BM_MlpForwardWarm(benchmark::State& state) {
    const Mlp m;
    const std::vector<float> hx = random_floats(kBatch * kIn, 15);
    Tensor first = m.forward(Tensor::from_vector(hx, {kBatch, kIn}));
    const std::vector<float> got = first.to_vector<float>(), want = mlp_loops(m, hx);
    for (size_t i = 0; i < got.size(); ++i)
        if (std::fabs(got[i] - want[i]) > 1e-4f) {
            state.SkipWithError("the MLP's probabilities differ from the loop peer");
            return;
        }
    const size_t kernels = first.kernels().size();
    const size_t compiles = compiles_so_far();
    std::vector<double> ms;
    for (auto _ : state) {
        const Tensor x = Tensor::from_vector(hx, {kBatch, kIn});
        const auto t0 = Clock::now();
        Tensor p = m.forward(x);
        p.realize();
        const auto t1 = Clock::now();
        benchmark::DoNotOptimize(p.buffer());
        ms.push_back(ms_between(t0, t1));
        state.SetIterationTime(ms.back() / 1e3);
    }
    if (compiles_so_far() != compiles) state.SkipWithError("a warm realize compiled a kernel");
    const double med = median(ms);
    const double loops = median_ms([&] { benchmark::DoNotOptimize(mlp_loops(m, hx)); }, 20);
    state.counters["median_ms"] = med;
    state.counters["kernels"] = static_cast<double>(kernels);
    state.counters["ms_per_kernel"] = med / static_cast<double>(kernels);
    state.counters["peer_loops_ms"] = loops;
    state.counters["ratio_vs_loops"] = med / loops;
#if defined(TEMPURA_HAVE_OPENBLAS)
    openblas_set_num_threads(1);
    const double blas = median_ms([&] { benchmark::DoNotOptimize(mlp_openblas(m, hx)); }, 50);
    state.counters["peer_openblas_ms"] = blas;
    state.counters["ratio_vs_openblas"] = med / blas;
#endif
}
BENCHMARK(BM_MlpForwardWarm)->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(1.0);

// The MLP's first realize: every cache emptied first (tempura::clear_caches()), so each
// iteration schedules, lowers and compiles all its kernels, then runs them. The peer is the
// same first realize with the kernels compiled one after another (TEMPURA_COMPILE_THREADS=1),
// measured in the same run; the default compiles independent kernels on the worker threads.
void BM_MlpFirstRealize(benchmark::State& state) {
    const Mlp m;
    const std::vector<float> hx = random_floats(kBatch * kIn, 16);
    const Tensor x = Tensor::from_vector(hx, {kBatch, kIn});
    m.forward(x).realize(); // JIT start-up
    auto first_ms = [&](const char* threads) {
        if (threads != nullptr)
            ::setenv("TEMPURA_COMPILE_THREADS", threads, 1);
        else
            ::unsetenv("TEMPURA_COMPILE_THREADS");
        tempura::clear_caches();
        const auto t0 = Clock::now();
        Tensor p = m.forward(x);
        p.realize();
        const auto t1 = Clock::now();
        benchmark::DoNotOptimize(p.buffer());
        return std::make_pair(ms_between(t0, t1), p.kernels().size());
    };
    std::vector<double> par, ser;
    size_t kernels = 0;
    for (auto _ : state) {
        const auto [ms, n] = first_ms(nullptr);
        par.push_back(ms);
        kernels = n;
        ser.push_back(first_ms("1").first);
        state.SetIterationTime(ms / 1e3);
    }
    ::unsetenv("TEMPURA_COMPILE_THREADS");
    state.counters["median_ms"] = median(par);
    state.counters["kernels"] = static_cast<double>(kernels);
    state.counters["peer_serial_compile_ms"] = median(ser);
    state.counters["ratio_vs_serial"] = median(par) / median(ser);
}
BENCHMARK(BM_MlpFirstRealize)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(10);

// The MLP over batch sizes 1..16, caches emptied first: with the batch a variable
// (Dim::variable, one plan and one compile for every size) against the peer, plain shapes
// (a plan and kernels per size), in the same run. Then one warm forward pass at batch 64, both
// ways: the price of kernels whose row loop is not a size the optimizer can split.
void BM_MlpSymbolicBatch(benchmark::State& state) {
    const Mlp m;
    const tempura::Dim batch = tempura::Dim::variable("batch", 1, 1024);
    const std::vector<float> hx = random_floats(kBatch * kIn, 16);
    auto x_of = [&](int64_t b, bool symbolic) {
        const std::vector<float> part(hx.begin(), hx.begin() + b * kIn);
        return symbolic ? Tensor::from_vector(part, {batch.bind(b), kIn})
                        : Tensor::from_vector(part, {b, kIn});
    };
    m.forward(x_of(2, false)).realize(); // JIT start-up
    auto sweep_ms = [&](bool symbolic) {
        tempura::clear_caches();
        const auto t0 = Clock::now();
        for (int64_t b = 1; b <= 16; ++b) {
            Tensor p = m.forward(x_of(b, symbolic));
            p.realize();
            benchmark::DoNotOptimize(p.buffer());
        }
        return ms_between(t0, Clock::now());
    };
    auto warm_ms = [&](bool symbolic) {
        const Tensor x = x_of(kBatch, symbolic);
        m.forward(x).realize();
        std::vector<double> t;
        for (int i = 0; i < 20; ++i) {
            const auto t0 = Clock::now();
            Tensor p = m.forward(x);
            p.realize();
            t.push_back(ms_between(t0, Clock::now()));
        }
        return median(t);
    };
    std::vector<double> sym, plain, wsym, wplain;
    for (auto _ : state) {
        sym.push_back(sweep_ms(true));
        plain.push_back(sweep_ms(false));
        wsym.push_back(warm_ms(true));
        wplain.push_back(warm_ms(false));
        state.SetIterationTime(sym.back() / 1e3);
    }
    state.counters["sweep_1_16_ms"] = median(sym);
    state.counters["peer_plain_sweep_ms"] = median(plain);
    state.counters["ratio_vs_plain"] = median(sym) / median(plain);
    state.counters["warm_b64_ms"] = median(wsym);
    state.counters["peer_plain_warm_b64_ms"] = median(wplain);
    state.counters["warm_ratio_vs_plain"] = median(wsym) / median(wplain);
}
BENCHMARK(BM_MlpSymbolicBatch)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(3);

// tempura::realize({max, sum}) of one [4096, 1024] input (one kernel, one pass over it) against
// the peer, the two realized one after the other (two kernels, two passes), warm, same run.
void BM_MaxSumTogether(benchmark::State& state) {
    const Tensor x = Tensor::from_vector(random_floats(4096 * 1024, 31), {4096, 1024});
    auto together = [&] {
        Tensor mx = x.max(1), sm = x.sum(1);
        const auto t0 = Clock::now();
        tempura::realize({mx, sm});
        return ms_between(t0, Clock::now());
    };
    auto apart = [&] {
        Tensor mx = x.max(1), sm = x.sum(1);
        const auto t0 = Clock::now();
        mx.realize();
        sm.realize();
        return ms_between(t0, Clock::now());
    };
    together();
    apart();
    std::vector<double> t, a;
    for (auto _ : state) {
        t.push_back(together());
        a.push_back(apart());
        state.SetIterationTime(t.back() / 1e3);
    }
    state.counters["median_ms"] = median(t);
    state.counters["peer_apart_ms"] = median(a);
    state.counters["ratio_vs_apart"] = median(t) / median(a);
}
BENCHMARK(BM_MaxSumTogether)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(20);

// ---- (e) compile time per kernel
// ------------------------------------------------------------------

// A graph over tiny inputs holding the constant k in every kernel.
// 0: elementwise a*b+k [16]; 1: reduction sum(a*k) over rows of [16, 16];
// 2: softmax(a*k) over rows of [4, 16] (several kernels); 3: like 0, pipeline split in stages.
Tensor compile_graph(int64_t which, const Tensor& a16, const Tensor& b16, const Tensor& m16x16,
                     const Tensor& m4x16, float k) {
    switch (which) {
    case 1: return (m16x16 * k).sum(1);
    case 2: return (m4x16 * k).softmax(-1);
    default: return a16 * b16 + k;
    }
}

void BM_CompileTimePerKernel(benchmark::State& state) {
    const int64_t which = state.range(0);
    const Tensor a16 = Tensor::from_vector(random_floats(16, 21)),
                 b16 = Tensor::from_vector(random_floats(16, 22)),
                 m16x16 = Tensor::from_vector(random_floats(256, 23), {16, 16}),
                 m4x16 = Tensor::from_vector(random_floats(64, 24), {4, 16});
    compile_graph(which, a16, b16, m16x16, m4x16, next_constant()).realize(); // JIT start-up
    std::vector<double> per_kernel, schedule_ms, lower_ms, llvm_ms;
    for (auto _ : state) {
        const float k = next_constant();
        const size_t before = compiles_so_far();
        const auto t0 = Clock::now();
        Tensor r = compile_graph(which, a16, b16, m16x16, m4x16, k);
        if (which == 3) {
            // The stages realize() runs before running: schedule, lower, compile (no run).
            const auto kernels = tempura::schedule_graph(r.uop());
            const auto t1 = Clock::now();
            std::vector<std::vector<tempura::UOp>> lowered;
            for (const auto& sk : kernels)
                if (!sk.ast.is_null())
                    lowered.push_back(tempura::codegen::lower_kernel_opt(
                                          sk.name, sk.ast, tempura::runtime::host_limits())
                                          .program);
            const auto t2 = Clock::now();
            double llvm = 0;
            for (size_t i = 0; i < lowered.size(); ++i)
                llvm +=
                    tempura::runtime::compile_cpu_kernel("bench_stage", lowered[i])->compile_ms();
            const auto t3 = Clock::now();
            const double n = static_cast<double>(lowered.size());
            schedule_ms.push_back(ms_between(t0, t1) / n);
            lower_ms.push_back(ms_between(t1, t2) / n);
            llvm_ms.push_back(llvm / n);
            per_kernel.push_back(ms_between(t0, t3) / n);
            state.SetIterationTime(ms_between(t0, t3) / 1e3);
        } else {
            r.realize();
            const auto t1 = Clock::now();
            per_kernel.push_back(ms_between(t0, t1) /
                                 static_cast<double>(compiles_so_far() - before));
            state.SetIterationTime(ms_between(t0, t1) / 1e3);
        }
        if (compiles_so_far() == before) {
            state.SkipWithError("no kernel was compiled");
            return;
        }
    }
    const double med = median(per_kernel);
    state.counters["median_ms_per_kernel"] = med;
    state.counters["target_ms"] = kTargetCompileMs;
    state.counters["ratio_to_target"] = med / kTargetCompileMs;
    if (which == 3) {
        state.counters["schedule_ms"] = median(schedule_ms);
        state.counters["lower_ms"] = median(lower_ms);
        state.counters["llvm_ms"] = median(llvm_ms);
    }
    static const char* const labels[] = {"a*b+k [16]", "sum(a*k, 1) [16,16]", "softmax(a*k) [4,16]",
                                         "a*b+k [16], by stage"};
    state.SetLabel(labels[which]);
}
BENCHMARK(BM_CompileTimePerKernel)
    ->DenseRange(0, 3)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(30);

} // namespace

BENCHMARK_MAIN();
