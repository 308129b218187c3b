#pragma once
// Microbenchmarks of your own tensor expressions with Google Benchmark (link benchmark::benchmark
// as well as tempura::tempura; this header is not part of tempura.hpp).
//
//   Tensor a = Tensor::randn({1024, 1024}), b = Tensor::randn({1024, 1024});
//   a.realize(); b.realize();
//   tempura::bench::register_realize("matmul_1024", [=] { return a.matmul(b); },
//                                    [&] { my_gemm(...); }, "my_gemm"); // optional: your peer
//   benchmark::Initialize(&argc, argv);
//   benchmark::RunSpecifiedBenchmarks();
//
// Each iteration builds the expression with `make` and realizes it: the plan is warm (the first,
// compiling call runs before the timed loop and is reported apart as first_ms) and the kernels
// run every time (the result is dropped at the end of the iteration, so nothing is reused).
// Counters, per iteration, from the kernels' own counts of float operations and bytes:
//   median_us   the median time of one make() + realize()
//   first_ms    the first call: scheduling, codegen, LLVM and the run
//   kernels     how many kernels one realize runs
//   GFLOP/s     the kernels' float operations over median_us
//   GB/s        the bytes their buffers hold (each read or written once) over median_us
//   baseline_us, ratio  with a baseline: its median, and median_us / baseline_us (below 1:
//               Tempura is faster), both measured in the same run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tempura/tensor/tensor.hpp"

namespace tempura::bench {

struct RealizeOptions {
    std::function<void()> baseline; // a peer to compare with; empty: none
    std::string baseline_name = "baseline";
};

namespace detail {
inline double median_of(std::vector<double> v) {
    if (v.empty()) return 0;
    const size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
    return v[mid];
}
inline double us_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}
} // namespace detail

// The loop itself, for a benchmark function of your own (register it with ->UseManualTime():
// the time of each iteration is measured here, kernels that run on several threads included;
// pass the same FirstCall to every call of your function, or first_ms is a warm call's).
// Google Benchmark calls a benchmark function several times (to choose the iteration count):
// `first` keeps the first call's figures across them.
struct FirstCall {
    bool done = false;
    double ms = 0, flops = 0, bytes = 0;
    size_t kernels = 0;
};

template <class Make>
void realize_each_iteration(benchmark::State& state, Make&& make, const RealizeOptions& opt = {},
                            FirstCall* first = nullptr) {
    using Clock = std::chrono::steady_clock;
    FirstCall local;
    FirstCall& f = first != nullptr ? *first : local;
    if (!f.done) {
        const auto t0 = Clock::now();
        Tensor t = make();
        t.realize();
        f.ms = detail::us_since(t0) / 1e3;
        f.kernels = t.kernels().size();
        for (const KernelInfo& k : t.kernels()) {
            f.flops += k.flops;
            f.bytes += k.bytes;
        }
        f.done = true;
    }
    const double first_ms = f.ms, flops = f.flops, bytes = f.bytes;
    const size_t kernels = f.kernels;
    std::vector<double> us;
    for (auto _ : state) {
        const auto t0 = Clock::now();
        {
            Tensor t = make();
            t.realize();
            benchmark::DoNotOptimize(t.uop());
        } // the result dies here: the next iteration computes it again
        us.push_back(detail::us_since(t0));
        state.SetIterationTime(us.back() / 1e6);
    }
    const double med = detail::median_of(us);
    state.counters["median_us"] = med;
    state.counters["first_ms"] = first_ms;
    state.counters["kernels"] = static_cast<double>(kernels);
    state.counters["GFLOP/s"] = med > 0 ? flops / med / 1e3 : 0;
    state.counters["GB/s"] = med > 0 ? bytes / med / 1e3 : 0;
    if (opt.baseline) {
        opt.baseline(); // warm
        std::vector<double> b;
        // As many runs as fit in about the time the expression took, at least 5 (at most 10,000).
        double spent = 0;
        const double budget = std::max(1e5, med * static_cast<double>(us.size()));
        while (b.size() < 5 || (spent < budget && b.size() < 10000)) {
            const auto t0 = Clock::now();
            opt.baseline();
            b.push_back(detail::us_since(t0));
            spent += b.back();
        }
        const double bmed = detail::median_of(b);
        state.counters[opt.baseline_name + "_us"] = bmed;
        state.counters["ratio"] = bmed > 0 ? med / bmed : 0;
    }
}

// A registered benchmark of `make` (the same counters), in microseconds, with manual time; with
// a baseline, its counter is named <baseline_name>_us.
template <class Make>
benchmark::internal::Benchmark* register_realize(const std::string& name, Make make,
                                                 std::function<void()> baseline = {},
                                                 std::string baseline_name = "baseline") {
    RealizeOptions opt{std::move(baseline), std::move(baseline_name)};
    auto first = std::make_shared<FirstCall>();
    return benchmark::RegisterBenchmark(
               name.c_str(),
               [make = std::move(make), opt = std::move(opt), first](benchmark::State& s) mutable {
                   realize_each_iteration(s, make, opt, first.get());
               })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
}

} // namespace tempura::bench
