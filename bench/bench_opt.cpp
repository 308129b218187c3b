// The optimizing-codegen benchmarks: each workload measured beside its baseline in this binary,
// with the ratio printed as a counter of the Tempura row. float32 throughout.
//
// Run:  OPENBLAS_CORETYPE=SkylakeX build/release/bench/bench_opt
//       (OpenBLAS 0.3.21 takes this Zen 5 CPU for Haswell without it; leave TEMPURA_THREADS and
//       OMP_NUM_THREADS unset so that Tempura's pool and the OpenMP peers use every core.)
//       The peers' loops and Eigen are compiled with -march=native (CMakeLists.txt), as
//       Tempura's JIT compiles for the host; the labels name the ISA and thread counts. The
//       binary re-executes itself with OMP_WAIT_POLICY=passive unless it is set (see main()).
//
//   BM_Triad            a*b + c over 2^24 elements (a cached plan: the graph is rebuilt from the
//                       same realized inputs and realized each iteration). Peer: an OpenMP
//                       STREAM-style loop into a preallocated output (it reads Tempura's input
//                       buffers). GB/s = 16 N bytes / time (3 reads + 1 write). GBps_ratio =
//                       tempura_GBps / loop_GBps (1 = parity, higher is better).
//   BM_Sum              x.sum() over 2^24 elements. Peer: an OpenMP reduction loop (four vector
//                       accumulators per thread). GB/s = 4 N bytes read / time; GBps_ratio =
//                       tempura_GBps / loop_GBps.
//   BM_Softmax          softmax along the last axis of [4096, 1024]. Peers: the memory floor (an
//                       OpenMP loop reading the input twice and writing once, no transcendental
//                       math: row max, then x - max) and a hand-written OpenMP softmax (std::exp).
//                       ms_ratio_floor = tempura_ms / floor_ms (target: <= 2), ms_ratio_loop =
//                       tempura_ms / loop_ms (lower is better).
//   BM_Matmul           [1024, 1024] @ [1024, 1024]. Peers: OpenBLAS cblas_sgemm and Eigen
//                       (row-major maps; the label says how many threads each used).
//                       GFLOP/s = 2 N^3 / time; GFLOPs_ratio_blas / _eigen = tempura / peer
//                       (1 = parity, higher is better).
//   BM_Mlp              softmax(relu(x @ W1^T + b1) @ W2^T + b2), batch 64, 784 -> 128 -> 10,
//                       warm (cached plan). Peer: the same forward pass with OpenBLAS sgemm (the
//                       faster of 1 thread and all threads). ms_ratio_blas = tempura_ms /
//                       openblas_ms; ms_ratio_target = tempura_ms / 0.1 ms (the target).
//   BM_ColdCompile      realize() of graphs whose shapes change every iteration, so the plan and
//                       kernel caches miss: elementwise, a row reduction, a matmul, a softmax (3
//                       kernels) and all four in turn. ms_per_kernel = realize time / kernels
//                       compiled (median; it includes running the tiny kernels); llvm_ms and
//                       front_ms split one kernel's compile into LLVM (compile_ms() of
//                       runtime::compile_cpu_kernel) and schedule + lower_kernel_opt with the
//                       host's heuristic opts (what realize() does), measured untimed on another
//                       fresh shape.
//   BM_*_Loop, BM_*_Floor, BM_*_OpenBLAS, BM_*_Eigen
//                       the peers on their own, as ordinary benchmark rows.
//
// Tempura rows use manual timing (steady_clock around building the graph and realize(); making
// the inputs and freeing the result are outside it). One iteration of a Tempura row is a round:
// a few Tempura runs, then as many runs of each peer, so that both see the same load on this
// shared machine. Counters are medians over all runs of all rounds; the Time column is the mean
// of the rounds' Tempura medians, and the CPU column of a Tempura row counts its peers too
// (ignore it). Ratios `*_best` compare the fastest run of each side instead (STREAM's rule):
// on a busy machine a two-thread static OpenMP loop often waits a scheduler quantum (4 ms) for
// a preempted thread, which the medians of short peers show and the best runs do not. Every
// workload's result, Tempura's and the peers', is checked once before timing; a wrong result
// stops the row with an error (and a line on stderr), and so does a timed run whose result
// differs from the checked one.

// GCC 12 with -march=native warns falsely inside avx512fintrin.h (_mm512_undefined_ps) where
// Eigen's GEBP kernels use it: the warning's location is the header, so it is silenced for the
// headers only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <tempura/backend/llvm_cpu.hpp>
#include <tempura/codegen/stages.hpp>
#include <tempura/runtime/thread_pool.hpp>
#include <tempura/schedule/schedule.hpp>
#include <tempura/tempura.hpp>

#include "../examples/mnist_synthetic.hpp"
#include "bench_common.hpp"

#if defined(TEMPURA_HAVE_OPENMP)
#include <omp.h>
#define TEMPURA_OMP_PRAGMA(...) _Pragma(#__VA_ARGS__)
#define OMP(...) TEMPURA_OMP_PRAGMA(omp __VA_ARGS__)
#else
#define OMP(...)
#endif

#if defined(TEMPURA_HAVE_OPENBLAS)
#include <cblas.h>
#endif

#if defined(TEMPURA_HAVE_EIGEN)
#include <Eigen/Dense>
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

using bench::Clock;
using bench::median;
using bench::ms_between;
using tempura::Shape;
using tempura::Tensor;

constexpr int64_t kStreamN = int64_t{1} << 24;
constexpr int64_t kSoftmaxRows = 4096, kSoftmaxCols = 1024;
constexpr int64_t kMatN = 1024;
constexpr int64_t kBatch = 64, kIn = 784, kHidden = 128, kClasses = 10;
constexpr double kMlpTargetMs = 0.1;
constexpr double kSoftmaxTargetRatio = 2.0;
// The OpenMP peers hand out work in 64 chunks (dynamic schedule), as Tempura's pool hands out
// its tasks: on this VM a woken thread can start a millisecond late, and a static schedule
// would make the other wait for it instead of taking over its share.
constexpr int64_t kChunkElems = kStreamN / 64, kChunkRows = kSoftmaxRows / 64;

// ---- helpers ------------------------------------------------------------------------------------

// Peer threads (libgomp, OpenBLAS) spin for a while after their work; let them go to sleep so
// they do not steal the cores from what is measured next.
constexpr int kOmpSettleMs = 50, kBlasSettleMs = 200;
void quiesce() { std::this_thread::sleep_for(std::chrono::milliseconds(kBlasSettleMs)); }

double best(const std::vector<double>& v) {
    return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

double gbps(double bytes, double ms) { return ms > 0 ? bytes / ms / 1e6 : 0; }
double gflops(double flops, double ms) { return ms > 0 ? flops / ms / 1e6 : 0; }

int omp_threads() {
#if defined(TEMPURA_HAVE_OPENMP)
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// The vector ISA this file (the peers' loops, Eigen) was compiled for: -march=native when the
// compiler takes it (CMakeLists.txt), as Tempura's JIT compiles for the host.
const char* isa() {
#if defined(__AVX512F__)
    return "AVX-512";
#elif defined(__AVX2__)
    return "AVX2";
#else
    return "SSE2";
#endif
}

std::string omp_label() {
#if defined(TEMPURA_HAVE_OPENMP)
    const char* wait = std::getenv("OMP_WAIT_POLICY");
    return "loop: OpenMP " + std::to_string(omp_threads()) + " threads (" +
           (wait ? wait : "default") + " wait), " + isa();
#else
    return std::string("loop: serial (no OpenMP), ") + isa();
#endif
}

std::string tempura_label() {
    return "tempura: " + std::to_string(tempura::runtime::thread_count()) + " pool threads";
}

// Multiples of 1/256 in [-1, 1]: products of two are exact in float, and sums of up to 2^16
// of them stay exact while the partial sums stay below 2^16, so the sums of these checks do not
// depend on the order of the additions.
std::vector<float> dyadic_floats(int64_t n, uint64_t seed) {
    return bench::grid_floats(n, seed, 256);
}

const float* data_of(const Tensor& t) { return static_cast<const float*>(t.buffer()->data()); }

size_t compiles_so_far() { return tempura::runtime::cpu_kernel_cache_stats().misses; }

// A 64-byte aligned float array (like runtime::Buffer), first touched by the OpenMP threads in
// the static schedule the loops use.
struct AlignedFloats {
    float* p = nullptr;
    int64_t n = 0;
    explicit AlignedFloats(int64_t count) : n(count) {
        p = static_cast<float*>(
            ::operator new (static_cast<size_t>(n) * sizeof(float), std::align_val_t{64}));
        float* q = p;
        OMP(parallel for schedule(static))
        for (int64_t i = 0; i < count; ++i) q[i] = 0.0f;
    }
    ~AlignedFloats() { ::operator delete (p, std::align_val_t{64}); }
    AlignedFloats(const AlignedFloats&) = delete;
    AlignedFloats& operator=(const AlignedFloats&) = delete;
};

bool close(float got, double want, double rtol, double atol) {
    return std::isfinite(got) &&
           std::fabs(static_cast<double>(got) - want) <= atol + rtol * std::fabs(want);
}

void no_setup() {}

// A peer: `run` is timed; `setup` (untimed) runs before each block of runs; after a block the
// peer's threads are left `settle_ms` to stop spinning (libgomp spins for some ms after a
// parallel region, OpenBLAS's pthreads for about 2^28 cycles) before Tempura runs again.
struct Peer {
    std::function<void()> run;
    int settle_ms;
    std::function<void()> setup;
    int reps = 0; // runs per round; 0: as many as Tempura's
    std::vector<double> ms;

    Peer(std::function<void()> fn, int settle, std::function<void()> before = no_setup)
        : run(std::move(fn)), settle_ms(settle), setup(std::move(before)) {}
    double median_ms() const { return median(ms); }
    double best_ms() const { return ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end()); }
};

bool same_result(const Tensor& r, const std::vector<float>& expect) {
    if (r.numel() != static_cast<int64_t>(expect.size())) return false;
    const float* p = data_of(r);
    const size_t step = std::max<size_t>(expect.size() / 4096, 1);
    for (size_t i = 0; i < expect.size(); i += step)
        if (!close(p[i], expect[i], 1e-5, 1e-7)) {
            std::fprintf(stderr, "element %zu: %g, first run %g\n", i, static_cast<double>(p[i]),
                         static_cast<double>(expect[i]));
            return false;
        }
    return true;
}

void settle(const std::vector<Peer>& peers) {
    int ms = 0;
    for (const Peer& p : peers) ms = std::max(ms, p.settle_ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// One benchmark iteration is one round: `reps` timed runs of build().realize() (the graph is
// rebuilt from the same realized inputs each time: the plan is cached), then `reps` runs of each
// peer. Rounds alternate Tempura and its peers so that both see the same machine (this host is
// shared); the counters are medians over every run of every round, and the row's time is the
// mean over rounds of each round's median. Fails the row if a run compiled a kernel, or if a
// round's last result differs from `expect` (Tempura's checked first result) on 4096 sampled
// elements. The caller has realized the graph once already (its check), so the plan exists.
template <class Build>
bool run_rounds(benchmark::State& state, Build build, int reps, std::vector<Peer>& peers,
                const std::vector<float>& expect, std::vector<double>& tempura_ms) {
    for (Peer& p : peers) { // warm-up: threads started, caches and pages touched
        p.setup();
        p.run();
    }
    settle(peers);
    const size_t compiles = compiles_so_far();
    for (auto _ : state) {
        std::vector<double> round;
        Tensor r;
        for (int i = 0; i < reps; ++i) {
            r = Tensor(); // the previous result is freed outside the timing
            const auto t0 = Clock::now();
            r = build();
            r.realize();
            const auto t1 = Clock::now();
            benchmark::DoNotOptimize(r.buffer()->data());
            round.push_back(ms_between(t0, t1));
        }
        if (!same_result(r, expect)) {
            state.SkipWithError("a timed realize() gave another result than the checked one");
            return false;
        }
        tempura_ms.insert(tempura_ms.end(), round.begin(), round.end());
        state.SetIterationTime(median(round) / 1e3);
        for (Peer& p : peers) {
            p.setup();
            for (int i = 0; i < (p.reps > 0 ? p.reps : reps); ++i) {
                const auto t0 = Clock::now();
                p.run();
                p.ms.push_back(ms_between(t0, Clock::now()));
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(p.settle_ms));
        }
    }
    if (compiles_so_far() != compiles) {
        state.SkipWithError("a warm realize compiled a kernel: the plan was not cached");
        return false;
    }
    return true;
}

// ---- 1. triad -----------------------------------------------------------------------------------

// The workloads' inputs live in objects that are never destroyed (the *_data() functions): a
// Tensor destroyed by a static destructor at exit frees UOp nodes after the main thread's
// thread_local state in src/uop.cpp (free_node's Releaser) is gone, which corrupts the heap.

struct TriadData {
    Tensor a = Tensor::from_vector(dyadic_floats(kStreamN, 1));
    Tensor b = Tensor::from_vector(dyadic_floats(kStreamN, 2));
    Tensor c = Tensor::from_vector(dyadic_floats(kStreamN, 3));
    AlignedFloats out{kStreamN};
};
TriadData& triad_data() {
    static TriadData* d = new TriadData; // never destroyed (see the triad section)
    return *d;
}

// The peer reads Tempura's own input buffers (same memory, same alignment).
void triad_loop(const float* a, const float* b, const float* c, float* out, int64_t n) {
    OMP(parallel for simd schedule(dynamic, kChunkElems))
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i] + c[i];
}

constexpr double kTriadBytes = 16.0 * static_cast<double>(kStreamN);

void BM_Triad(benchmark::State& state) {
    TriadData& d = triad_data();
    const float *pa = data_of(d.a), *pb = data_of(d.b), *pc = data_of(d.c);
    const std::vector<float> got = (d.a * d.b + d.c).to_vector<float>();
    {
        triad_loop(pa, pb, pc, d.out.p, kStreamN);
        for (int64_t i = 0; i < kStreamN; ++i) {
            const double want = static_cast<double>(pa[i]) * pb[i] + pc[i]; // exact (dyadic)
            if (!close(got[static_cast<size_t>(i)], want, 1e-6, 0) ||
                !close(d.out.p[i], want, 1e-6, 0)) {
                std::fprintf(stderr, "triad: element %lld: tempura %g, loop %g, want %g\n",
                             static_cast<long long>(i),
                             static_cast<double>(got[static_cast<size_t>(i)]),
                             static_cast<double>(d.out.p[i]), want);
                state.SkipWithError("a*b+c is wrong");
                return;
            }
        }
    }
    std::vector<Peer> peers = {{[&] { triad_loop(pa, pb, pc, d.out.p, kStreamN); }, kOmpSettleMs}};
    std::vector<double> ms;
    if (!run_rounds(
            state, [&] { return d.a * d.b + d.c; }, 5, peers, got, ms))
        return;
    const double t = median(ms), loop = peers[0].median_ms();
    state.counters["tempura_ms"] = t;
    state.counters["tempura_GBps"] = gbps(kTriadBytes, t);
    state.counters["loop_GBps"] = gbps(kTriadBytes, loop);
    state.counters["GBps_ratio"] = loop / t;
    state.counters["GBps_ratio_best"] = peers[0].best_ms() / best(ms);
    state.SetLabel(tempura_label() + "; " + omp_label());
}
BENCHMARK(BM_Triad)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(12);

void BM_Triad_Loop(benchmark::State& state) {
    TriadData& d = triad_data();
    const float *pa = data_of(d.a), *pb = data_of(d.b), *pc = data_of(d.c);
    for (auto _ : state) {
        triad_loop(pa, pb, pc, d.out.p, kStreamN);
        benchmark::ClobberMemory();
    }
    state.counters["GBps"] = benchmark::Counter(
        kTriadBytes * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
    state.SetLabel(omp_label());
    quiesce();
}
BENCHMARK(BM_Triad_Loop)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);

// ---- 2. sum -------------------------------------------------------------------------------------

struct SumData {
    Tensor x = Tensor::from_vector(dyadic_floats(kStreamN, 4));
};
SumData& sum_data() {
    static SumData* d = new SumData; // never destroyed (see the triad section)
    return *d;
}

// Four 16-float vector accumulators per thread, kept in registers (GCC vector extension): a
// single `omp simd reduction(+ : s)` is bound by the add latency and reaches about 75% of this
// here, an accumulator array kept in memory about half. n must be a multiple of 64 and x
// 64-byte aligned.
typedef float Floats16 __attribute__((vector_size(64), may_alias));
float sum_loop(const float* x, int64_t n) {
    float total = 0;
    const int64_t blocks = n / 64;
    OMP(parallel reduction(+ : total)) {
        Floats16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
        OMP(for schedule(dynamic, kChunkElems / 64))
        for (int64_t b = 0; b < blocks; ++b) {
            const Floats16* p = reinterpret_cast<const Floats16*>(x + b * 64);
            a0 += p[0];
            a1 += p[1];
            a2 += p[2];
            a3 += p[3];
        }
        const Floats16 a = (a0 + a1) + (a2 + a3);
        float s = 0;
        for (int j = 0; j < 16; ++j) s += a[j];
        total += s;
    }
    return total;
}

constexpr double kSumBytes = 4.0 * static_cast<double>(kStreamN);

void BM_Sum(benchmark::State& state) {
    SumData& d = sum_data();
    const float* px = data_of(d.x);
    const float got = d.x.sum().item<float>();
    {
        double want = 0; // exact: dyadic values, partial sums far below 2^16
        for (int64_t i = 0; i < kStreamN; ++i) want += px[i];
        const float loop = sum_loop(px, kStreamN);
        if (!close(got, want, 1e-6, 1e-3) || !close(loop, want, 1e-6, 1e-3)) {
            std::fprintf(stderr, "sum: tempura %.6f, loop %.6f, want %.6f\n",
                         static_cast<double>(got), static_cast<double>(loop), want);
            state.SkipWithError("x.sum() is wrong");
            return;
        }
    }
    std::vector<Peer> peers = {
        {[&] { benchmark::DoNotOptimize(sum_loop(px, kStreamN)); }, kOmpSettleMs}};
    std::vector<double> ms;
    if (!run_rounds(
            state, [&] { return d.x.sum(); }, 10, peers, {got}, ms))
        return;
    const double t = median(ms), loop = peers[0].median_ms();
    state.counters["tempura_ms"] = t;
    state.counters["tempura_GBps"] = gbps(kSumBytes, t);
    state.counters["loop_GBps"] = gbps(kSumBytes, loop);
    state.counters["GBps_ratio"] = loop / t;
    state.counters["GBps_ratio_best"] = peers[0].best_ms() / best(ms);
    state.SetLabel(tempura_label() + "; " + omp_label());
}
BENCHMARK(BM_Sum)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(12);

void BM_Sum_Loop(benchmark::State& state) {
    const float* px = data_of(sum_data().x);
    for (auto _ : state) benchmark::DoNotOptimize(sum_loop(px, kStreamN));
    state.counters["GBps"] = benchmark::Counter(
        kSumBytes * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
    state.SetLabel(omp_label());
    quiesce();
}
BENCHMARK(BM_Sum_Loop)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);

// ---- 3. softmax ---------------------------------------------------------------------------------

struct SoftmaxData {
    Tensor x; // values in [-4, 4]
    AlignedFloats out{kSoftmaxRows * kSoftmaxCols};
    SoftmaxData() {
        std::vector<float> v = dyadic_floats(kSoftmaxRows * kSoftmaxCols, 5);
        for (float& f : v) f *= 4.0f;
        x = Tensor::from_vector(v, {kSoftmaxRows, kSoftmaxCols});
    }
};
SoftmaxData& softmax_data() {
    static SoftmaxData* d = new SoftmaxData; // never destroyed (see the triad section)
    return *d;
}

float row_max(const float* x, int64_t n) {
    float m = -std::numeric_limits<float>::infinity();
    OMP(simd reduction(max : m))
    for (int64_t j = 0; j < n; ++j) m = std::max(m, x[j]);
    return m;
}

// The memory floor: reads the input twice and writes once, no transcendental math.
void softmax_floor(const float* x, float* y, int64_t rows, int64_t cols) {
    OMP(parallel for schedule(dynamic, kChunkRows))
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        const float m = row_max(xr, cols);
        OMP(simd)
        for (int64_t j = 0; j < cols; ++j) yr[j] = xr[j] - m;
    }
}

// A hand-written softmax: row max, exp and sum (std::exp, scalar), scale.
void softmax_loop(const float* x, float* y, int64_t rows, int64_t cols) {
    OMP(parallel for schedule(dynamic, kChunkRows))
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        const float m = row_max(xr, cols);
        float s = 0;
        for (int64_t j = 0; j < cols; ++j) s += yr[j] = std::exp(xr[j] - m);
        const float inv = 1.0f / s;
        OMP(simd)
        for (int64_t j = 0; j < cols; ++j) yr[j] *= inv;
    }
}

void BM_Softmax(benchmark::State& state) {
    SoftmaxData& d = softmax_data();
    const float* px = data_of(d.x);
    Tensor first = d.x.softmax(-1);
    const std::vector<float> got = first.to_vector<float>();
    const size_t kernels = first.kernels().size();
    {
        softmax_loop(px, d.out.p, kSoftmaxRows, kSoftmaxCols);
        for (int64_t r = 0; r < kSoftmaxRows; ++r) {
            const float* xr = px + r * kSoftmaxCols;
            double m = -1e30, s = 0;
            for (int64_t j = 0; j < kSoftmaxCols; ++j) m = std::max(m, double{xr[j]});
            for (int64_t j = 0; j < kSoftmaxCols; ++j) s += std::exp(double{xr[j]} - m);
            for (int64_t j = 0; j < kSoftmaxCols; ++j) {
                const int64_t i = r * kSoftmaxCols + j;
                const double want = std::exp(double{xr[j]} - m) / s;
                if (!close(got[static_cast<size_t>(i)], want, 1e-4, 1e-9) ||
                    !close(d.out.p[i], want, 1e-4, 1e-9)) {
                    std::fprintf(stderr, "softmax: [%lld, %lld]: tempura %g, loop %g, want %g\n",
                                 static_cast<long long>(r), static_cast<long long>(j),
                                 static_cast<double>(got[static_cast<size_t>(i)]),
                                 static_cast<double>(d.out.p[i]), want);
                    state.SkipWithError("softmax is wrong");
                    return;
                }
            }
        }
    }
    std::vector<Peer> peers = {
        {[&] { softmax_floor(px, d.out.p, kSoftmaxRows, kSoftmaxCols); }, kOmpSettleMs},
        {[&] { softmax_loop(px, d.out.p, kSoftmaxRows, kSoftmaxCols); }, kOmpSettleMs}};
    std::vector<double> ms;
    if (!run_rounds(
            state, [&] { return d.x.softmax(-1); }, 5, peers, got, ms))
        return;
    const double t = median(ms), floor = peers[0].median_ms(), loop = peers[1].median_ms();
    state.counters["tempura_ms"] = t;
    state.counters["kernels"] = static_cast<double>(kernels);
    state.counters["floor_ms"] = floor;
    state.counters["loop_ms"] = loop;
    state.counters["ms_ratio_floor"] = t / floor;
    state.counters["ms_ratio_loop"] = t / loop;
    state.counters["ms_ratio_floor_best"] = best(ms) / peers[0].best_ms();
    state.counters["target_ratio_floor"] = kSoftmaxTargetRatio;
    state.SetLabel(tempura_label() + "; " + omp_label());
}
BENCHMARK(BM_Softmax)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(12);

void BM_Softmax_Floor(benchmark::State& state) {
    SoftmaxData& d = softmax_data();
    const float* px = data_of(d.x);
    for (auto _ : state) {
        softmax_floor(px, d.out.p, kSoftmaxRows, kSoftmaxCols);
        benchmark::ClobberMemory();
    }
    state.SetLabel(omp_label() + ", read 2x + write 1x");
    quiesce();
}
BENCHMARK(BM_Softmax_Floor)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);

void BM_Softmax_Loop(benchmark::State& state) {
    SoftmaxData& d = softmax_data();
    const float* px = data_of(d.x);
    for (auto _ : state) {
        softmax_loop(px, d.out.p, kSoftmaxRows, kSoftmaxCols);
        benchmark::ClobberMemory();
    }
    state.SetLabel(omp_label() + ", std::exp");
    quiesce();
}
BENCHMARK(BM_Softmax_Loop)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);

// ---- 4. matmul ----------------------------------------------------------------------------------

struct MatmulData {
    Tensor a = Tensor::from_vector(dyadic_floats(kMatN * kMatN, 6), {kMatN, kMatN});
    Tensor b = Tensor::from_vector(dyadic_floats(kMatN * kMatN, 7), {kMatN, kMatN});
    AlignedFloats out{kMatN * kMatN};
};
MatmulData& matmul_data() {
    static MatmulData* d = new MatmulData; // never destroyed (see the triad section)
    return *d;
}

constexpr double kMatFlops = 2.0 * kMatN * kMatN * kMatN;

// Checks c = a @ b on 512 sampled entries against a double-precision dot product.
bool matmul_ok(const float* a, const float* b, const float* c, const char* who) {
    uint64_t s = 12345;
    for (int k = 0; k < 512; ++k) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const int64_t i = static_cast<int64_t>(s >> 33) % kMatN,
                      j = static_cast<int64_t>(s >> 13) % kMatN;
        double want = 0, mag = 0;
        for (int64_t t = 0; t < kMatN; ++t) {
            want += static_cast<double>(a[i * kMatN + t]) * b[t * kMatN + j];
            mag += std::fabs(static_cast<double>(a[i * kMatN + t]) * b[t * kMatN + j]);
        }
        const float got = c[i * kMatN + j];
        if (!std::isfinite(got) || std::fabs(got - want) > 1e-5 * mag + 1e-6) {
            std::fprintf(stderr, "matmul (%s): [%lld, %lld] = %g, want %g\n", who,
                         static_cast<long long>(i), static_cast<long long>(j),
                         static_cast<double>(got), want);
            return false;
        }
    }
    return true;
}

#if defined(TEMPURA_HAVE_OPENBLAS)
void matmul_openblas(const float* a, const float* b, float* c) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kMatN, kMatN, kMatN, 1.0f, a, kMatN, b,
                kMatN, 0.0f, c, kMatN);
}
#endif

#if defined(TEMPURA_HAVE_EIGEN)
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
void matmul_eigen(const float* a, const float* b, float* c) {
    Eigen::Map<const RowMatrix> ma(a, kMatN, kMatN), mb(b, kMatN, kMatN);
    Eigen::Map<RowMatrix> mc(c, kMatN, kMatN);
    mc.noalias() = ma * mb;
}
// Eigen is compiled with this file's flags: the label names its SIMD level.
std::string eigen_label() {
    const std::string simd = std::string(", ") + Eigen::SimdInstructionSetsInUse();
#if defined(EIGEN_HAS_OPENMP)
    return "eigen: " + std::to_string(Eigen::nbThreads()) + " threads (OpenMP)" + simd;
#else
    return "eigen: 1 thread (no OpenMP)" + simd;
#endif
}
#endif

void BM_Matmul(benchmark::State& state) {
    MatmulData& d = matmul_data();
    const float *pa = data_of(d.a), *pb = data_of(d.b);
    std::string label = tempura_label();
    const std::vector<float> got = d.a.dot(d.b).to_vector<float>();
    if (!matmul_ok(pa, pb, got.data(), "tempura")) {
        state.SkipWithError("a.dot(b) is wrong");
        return;
    }
    std::vector<Peer> peers;
#if defined(TEMPURA_HAVE_OPENBLAS)
    openblas_set_num_threads(omp_threads());
    matmul_openblas(pa, pb, d.out.p);
    if (!matmul_ok(pa, pb, d.out.p, "openblas")) {
        state.SkipWithError("the OpenBLAS peer is wrong");
        return;
    }
    peers.push_back({[&] { matmul_openblas(pa, pb, d.out.p); }, kBlasSettleMs,
                     [] { openblas_set_num_threads(omp_threads()); }});
    label += "; openblas: " + std::to_string(openblas_get_num_threads()) + " threads";
#endif
#if defined(TEMPURA_HAVE_EIGEN)
    matmul_eigen(pa, pb, d.out.p);
    if (!matmul_ok(pa, pb, d.out.p, "eigen")) {
        state.SkipWithError("the Eigen peer is wrong");
        return;
    }
    peers.push_back({[&] { matmul_eigen(pa, pb, d.out.p); }, kOmpSettleMs});
    label += "; " + eigen_label();
#endif
    for (Peer& p : peers) p.reps = 5; // Tempura's runs are one per round (they are long)
    std::vector<double> ms;
    if (!run_rounds(
            state, [&] { return d.a.dot(d.b); }, 1, peers, got, ms))
        return;
    const double t = median(ms);
    state.counters["tempura_GFLOPs"] = gflops(kMatFlops, t);
#if defined(TEMPURA_HAVE_OPENBLAS)
    state.counters["blas_GFLOPs"] = gflops(kMatFlops, peers.front().median_ms());
    state.counters["GFLOPs_ratio_blas"] = peers.front().median_ms() / t;
    state.counters["GFLOPs_ratio_blas_best"] = peers.front().best_ms() / best(ms);
#endif
#if defined(TEMPURA_HAVE_EIGEN)
    state.counters["eigen_GFLOPs"] = gflops(kMatFlops, peers.back().median_ms());
    state.counters["GFLOPs_ratio_eigen"] = peers.back().median_ms() / t;
#endif
    state.SetLabel(label);
}
BENCHMARK(BM_Matmul)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(8);

#if defined(TEMPURA_HAVE_OPENBLAS)
void BM_Matmul_OpenBLAS(benchmark::State& state) {
    MatmulData& d = matmul_data();
    openblas_set_num_threads(omp_threads());
    for (auto _ : state) matmul_openblas(data_of(d.a), data_of(d.b), d.out.p);
    state.counters["GFLOPs"] = benchmark::Counter(
        kMatFlops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
    state.SetLabel("openblas: " + std::to_string(openblas_get_num_threads()) + " threads");
    quiesce();
}
BENCHMARK(BM_Matmul_OpenBLAS)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
#endif

#if defined(TEMPURA_HAVE_EIGEN)
void BM_Matmul_Eigen(benchmark::State& state) {
    MatmulData& d = matmul_data();
    for (auto _ : state) matmul_eigen(data_of(d.a), data_of(d.b), d.out.p);
    state.counters["GFLOPs"] = benchmark::Counter(
        kMatFlops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
    state.SetLabel(eigen_label());
    quiesce();
}
BENCHMARK(BM_Matmul_Eigen)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
#endif

// ---- 5. the MLP forward pass --------------------------------------------------------------------

// y = x @ W^T + b with W stored [out, in], as examples/mlp.cpp.
struct Dense {
    int64_t in, out;
    std::vector<float> w, b;
    Tensor tw, tb;
    Dense(int64_t in_features, int64_t out_features, mnist_synthetic::Rng& rng)
        : in(in_features), out(out_features) {
        const float bound = 1.0f / std::sqrt(static_cast<float>(in));
        for (int64_t i = 0; i < in * out; ++i) w.push_back(rng.uniform(-bound, bound));
        for (int64_t i = 0; i < out; ++i) b.push_back(rng.uniform(-bound, bound));
        tw = Tensor::from_vector(w, {out, in});
        tb = Tensor::from_vector(b);
    }
};

struct MlpData {
    mnist_synthetic::Rng rng{2024};
    Dense fc1{kIn, kHidden, rng}, fc2{kHidden, kClasses, rng};
    std::vector<float> images = mnist_synthetic::images(kBatch, rng);
    Tensor x = Tensor::from_vector(images, {kBatch, kIn});

    Tensor forward() const {
        const Tensor h = (x.dot(fc1.tw.transpose(0, 1)) + fc1.tb).relu();
        return (h.dot(fc2.tw.transpose(0, 1)) + fc2.tb).softmax(-1);
    }
};
MlpData& mlp_data() {
    static MlpData* d = new MlpData; // never destroyed (see the triad section)
    return *d;
}

void softmax_rows(float* z, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float* row = z + r * cols;
        const float m = *std::max_element(row, row + cols);
        float s = 0;
        for (int64_t j = 0; j < cols; ++j) s += row[j] = std::exp(row[j] - m);
        for (int64_t j = 0; j < cols; ++j) row[j] /= s;
    }
}

#if defined(TEMPURA_HAVE_OPENBLAS)
// The peer: bias rows, sgemm (accumulating onto them), ReLU, sgemm, softmax.
struct MlpBlas {
    std::vector<float> h = std::vector<float>(static_cast<size_t>(kBatch * kHidden)),
                       z = std::vector<float>(static_cast<size_t>(kBatch * kClasses));
    void run(const MlpData& m) {
        for (int64_t r = 0; r < kBatch; ++r)
            std::copy(m.fc1.b.begin(), m.fc1.b.end(), h.begin() + r * kHidden);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kBatch, kHidden, kIn, 1.0f,
                    m.images.data(), kIn, m.fc1.w.data(), kIn, 1.0f, h.data(), kHidden);
        for (float& v : h) v = std::max(v, 0.0f);
        for (int64_t r = 0; r < kBatch; ++r)
            std::copy(m.fc2.b.begin(), m.fc2.b.end(), z.begin() + r * kClasses);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kBatch, kClasses, kHidden, 1.0f,
                    h.data(), kHidden, m.fc2.w.data(), kHidden, 1.0f, z.data(), kClasses);
        softmax_rows(z.data(), kBatch, kClasses);
    }
};
#endif

void BM_Mlp(benchmark::State& state) {
    MlpData& d = mlp_data();
    std::string label = tempura_label();
    Tensor first = d.forward();
    const std::vector<float> got = first.to_vector<float>();
    const size_t kernels = first.kernels().size();
    {
        // Reference: double-precision dense layers (examples/mnist_synthetic.hpp), then softmax.
        const auto h =
            mnist_synthetic::dense(d.images, d.fc1.w, d.fc1.b, kBatch, kIn, kHidden, true);
        auto want = mnist_synthetic::dense(h, d.fc2.w, d.fc2.b, kBatch, kHidden, kClasses, false);
        softmax_rows(want.data(), kBatch, kClasses);
        std::vector<float> peer = want;
#if defined(TEMPURA_HAVE_OPENBLAS)
        MlpBlas blas;
        blas.run(d);
        peer = blas.z;
#endif
        for (size_t i = 0; i < want.size(); ++i)
            if (!close(got[i], want[i], 1e-4, 1e-6) || !close(peer[i], want[i], 1e-4, 1e-6)) {
                std::fprintf(stderr, "mlp: probability %zu: tempura %g, peer %g, want %g\n", i,
                             static_cast<double>(got[i]), static_cast<double>(peer[i]),
                             static_cast<double>(want[i]));
                state.SkipWithError("the MLP's probabilities are wrong");
                return;
            }
    }
    std::vector<Peer> peers;
#if defined(TEMPURA_HAVE_OPENBLAS)
    MlpBlas blas;
    peers.push_back({[&] { blas.run(d); }, 0, [] { openblas_set_num_threads(1); }});
    peers.push_back(
        {[&] { blas.run(d); }, kBlasSettleMs, [] { openblas_set_num_threads(omp_threads()); }});
#endif
    std::vector<double> ms;
    if (!run_rounds(
            state, [&] { return d.forward(); }, 50, peers, got, ms))
        return;
    const double t = median(ms);
    state.counters["tempura_ms"] = t;
    state.counters["kernels"] = static_cast<double>(kernels);
    state.counters["target_ms"] = kMlpTargetMs;
    state.counters["ms_ratio_target"] = t / kMlpTargetMs;
#if defined(TEMPURA_HAVE_OPENBLAS)
    const double one = peers[0].median_ms(), all = peers[1].median_ms();
    const double blas_ms = std::min(one, all);
    state.counters["blas_ms"] = blas_ms;
    state.counters["ms_ratio_blas"] = t / blas_ms;
    state.counters["ms_ratio_blas_best"] =
        best(ms) / std::min(peers[0].best_ms(), peers[1].best_ms());
    label += "; openblas: " + std::to_string(one <= all ? 1 : omp_threads()) + " thread(s)";
#endif
    state.SetLabel(label);
}
BENCHMARK(BM_Mlp)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(12);

#if defined(TEMPURA_HAVE_OPENBLAS)
void BM_Mlp_OpenBLAS(benchmark::State& state) {
    MlpData& d = mlp_data();
    MlpBlas blas;
    const int threads = static_cast<int>(state.range(0));
    openblas_set_num_threads(threads);
    for (auto _ : state) {
        blas.run(d);
        benchmark::DoNotOptimize(blas.z.data());
    }
    state.SetLabel("openblas: " + std::to_string(threads) + " thread(s)");
    quiesce();
}
BENCHMARK(BM_Mlp_OpenBLAS)
    ->Arg(1)
    ->Arg(omp_threads())
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);
#endif

// ---- 6. cold compile ----------------------------------------------------------------------------

// A size never used before in this process: shapes change every time, so plans and kernels miss.
int64_t g_fresh = 0;
int64_t fresh() { return ++g_fresh; }

// 0: elementwise a*b+c [4096+k]; 1: row sums of [32, 64+k]; 2: [8+k, 64] @ [64, 48];
// 3: softmax over rows of [8, 64+k] (several kernels). Inputs are made before the timing.
struct ColdGraph {
    std::vector<Tensor> in;
    int64_t kind;
    ColdGraph(int64_t which, int64_t k) : kind(which) {
        switch (which) {
        case 1: in = {Tensor::from_vector(dyadic_floats(32 * (64 + k), 8), {32, 64 + k})}; break;
        case 2:
            in = {Tensor::from_vector(dyadic_floats((8 + k) * 64, 9), {8 + k, 64}),
                  Tensor::from_vector(dyadic_floats(64 * 48, 10), {64, 48})};
            break;
        case 3: in = {Tensor::from_vector(dyadic_floats(8 * (64 + k), 11), {8, 64 + k})}; break;
        default:
            for (uint64_t s = 12; s < 15; ++s)
                in.push_back(Tensor::from_vector(dyadic_floats(4096 + k, s)));
        }
    }
    Tensor build() const {
        switch (kind) {
        case 1: return in[0].sum(1);
        case 2: return in[0].dot(in[1]);
        case 3: return in[0].softmax(-1);
        default: return in[0] * in[1] + in[2];
        }
    }
};

void BM_ColdCompile(benchmark::State& state) {
    const int64_t which = state.range(0);    // 4: the four kinds in turn
    ColdGraph(0, fresh()).build().realize(); // JIT start-up, if nothing compiled before
    std::vector<double> per_kernel, compiled, llvm_ms, front_ms;
    int64_t iter = 0;
    for (auto _ : state) {
        const int64_t kind = which == 4 ? iter++ % 4 : which;
        const ColdGraph g(kind, fresh()), staged(kind, fresh()); // inputs: outside the timing
        const size_t before = compiles_so_far();
        const auto t0 = Clock::now();
        Tensor r = g.build();
        r.realize();
        const auto t1 = Clock::now();
        // Kernels compiled; should a fresh shape ever hit the kernel cache (shape-generic
        // kernels), kernels_compiled shows it and the time is shared by the plan's kernels.
        const size_t n = compiles_so_far() - before;
        const size_t share = n > 0 ? n : std::max<size_t>(r.kernels().size(), 1);
        benchmark::DoNotOptimize(r.buffer()->data());
        state.SetIterationTime(ms_between(t0, t1) / 1e3);
        per_kernel.push_back(ms_between(t0, t1) / static_cast<double>(share));
        compiled.push_back(static_cast<double>(n));

        // The same stages on another fresh shape, untimed: front end vs LLVM per kernel.
        const auto s0 = Clock::now();
        const auto kernels = tempura::schedule_graph(staged.build().uop());
        std::vector<std::vector<tempura::UOp>> lowered;
        for (const auto& sk : kernels)
            if (!sk.ast.is_null())
                lowered.push_back(tempura::codegen::lower_kernel_opt(
                                      sk.name, sk.ast, tempura::runtime::host_limits())
                                      .program);
        const auto s1 = Clock::now();
        double llvm = 0;
        for (const auto& program : lowered)
            llvm += tempura::runtime::compile_cpu_kernel("bench_opt_stage", program)->compile_ms();
        if (!lowered.empty()) {
            const double k = static_cast<double>(lowered.size());
            front_ms.push_back(ms_between(s0, s1) / k);
            llvm_ms.push_back(llvm / k);
        }
    }
    state.counters["ms_per_kernel"] = median(per_kernel);
    state.counters["kernels_compiled"] = median(compiled);
    state.counters["llvm_ms"] = median(llvm_ms);
    state.counters["front_ms"] = median(front_ms);
    static const char* const labels[] = {"a*b+c [4096+k]", "sum(x, 1) [32, 64+k]",
                                         "[8+k, 64] @ [64, 48]", "softmax [8, 64+k]",
                                         "all four in turn"};
    state.SetLabel(labels[which]);
}
BENCHMARK(BM_ColdCompile)
    ->DenseRange(0, 4)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(24);

} // namespace

// libgomp reads OMP_WAIT_POLICY when it loads, before main(). Its default (spin at barriers
// before sleeping) is pathological on this VM: a spinning vCPU is descheduled by the host, and a
// two-thread loop then waits a whole scheduler quantum (a 1.4 ms loop took 8 ms). Tempura's pool
// sleeps on a condition variable; so that the OpenMP peers wait the same way, the binary runs
// itself again with OMP_WAIT_POLICY=passive unless the caller set the variable.
int main(int argc, char** argv) {
#if defined(TEMPURA_HAVE_OPENMP)
    if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        execv("/proc/self/exe", argv); // returns only on failure: then go on as we are
    }
#endif
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
