// Data-parallel training steps, run under mpirun (every rank runs every benchmark with a fixed
// iteration count, so that their collectives pair up; rank 0 reports):
//
//   mpirun -np 1 build/release/bench/bench_dist --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
//   mpirun --oversubscribe -np 2 build/release/bench/bench_dist (the same flags)
//
// Per model (the MNIST-style MLP 784 -> 128 -> 10 and a small CNN, conv 1 -> 8 and 8 -> 16 with
// pools and a linear layer on 28 x 28 images; batch 32 per rank, SGD), three rows:
//   local       one process's step on its own batch, no communication (the peer);
//   ddp         the DataParallel step (gradients averaged in one bucket, overlapped with the
//               backward pass in the step's plan);
//   ddp_serial  the same with DataParallel's overlap off: the gradients are computed first, then
//               exchanged with nothing to overlap.
// Counters: ranks; comm_wait (the fraction of the step that a kernel or the plan's end waited for
// an unfinished collective, per rank); weak_eff = local step time / this step time (weak scaling
// efficiency: with every rank on its own core, 1.0 means N ranks train N times the samples in the
// time one process trains its own). On a machine with fewer cores than ranks x threads the ranks
// share cores and the figure measures that contention, not the interconnect.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include <tempura/dist.hpp>
#include <tempura/nn/module.hpp>
#include <tempura/tempura.hpp>

#include "bench_common.hpp"

namespace {

using tempura::Tensor;
namespace dist = tempura::dist;
namespace nn = tempura::nn;

constexpr int64_t kBatch = 32;
// Steps per benchmark (the same on every rank): BENCH_DIST_STEPS, default 30.
int steps_per_run() {
    const char* v = std::getenv("BENCH_DIST_STEPS");
    return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : 30;
}

nn::Sequential make_mlp() {
    return nn::Sequential(nn::Linear(784, 128),
                          nn::Functional([](const Tensor& x) { return x.relu(); }, "ReLU"),
                          nn::Linear(128, 10));
}

nn::Sequential make_cnn() {
    auto relu = [] { return nn::Functional([](const Tensor& x) { return x.relu(); }, "ReLU"); };
    auto pool = [] {
        return nn::Functional(
            [](const Tensor& x) {
                return nn::max_pool2d(x, nn::PoolOptions{{2, 2}});
            },
            "MaxPool2d");
    };
    return nn::Sequential(nn::Conv2d(1, 8, 3), relu(), pool(), nn::Conv2d(8, 16, 3), relu(), pool(),
                          nn::Functional(
                              [](const Tensor& x) {
                                  return x.reshape({x.shape()[0], -1});
                              },
                              "Flatten"),
                          nn::Linear(16 * 5 * 5, 10));
}

// The local step's time per model, for weak_eff (measured first, in the same run).
double g_local_ms[2] = {0, 0};

// mode 0 local, 1 ddp, 2 ddp without overlap.
void step_bench(benchmark::State& state, bool cnn, int mode) {
    tempura::manual_seed(3);
    nn::Sequential model = cnn ? make_cnn() : make_mlp();
    std::unique_ptr<dist::DataParallel> ddp;
    if (mode > 0)
        ddp = std::make_unique<dist::DataParallel>(
            model, dist::DataParallel::Options{25, false, mode == 1});
    nn::SGD opt(model.parameters(), 0.01);
    const tempura::Shape xs = cnn ? tempura::Shape{kBatch, 1, 28, 28} : tempura::Shape{kBatch, 784};
    int64_t n = 1;
    for (int64_t d : xs) n *= d;
    const Tensor x = Tensor::from_vector(bench::random_floats(n, 11 + dist::rank()), xs);
    std::vector<int32_t> labels(kBatch);
    for (int64_t i = 0; i < kBatch; ++i)
        labels[static_cast<size_t>(i)] = static_cast<int32_t>(i % 10);
    const Tensor y = Tensor::from_vector(labels);
    auto step = [&] {
        opt.zero_grad();
        Tensor loss = nn::cross_entropy(model(x), y);
        if (ddp)
            ddp->backward(loss);
        else
            loss.backward();
        opt.step();
    };
    step(); // compiles the plan
    const dist::CommStats before = dist::comm_stats();
    const auto t0 = bench::Clock::now();
    for (auto _ : state) step();
    const double ms = bench::ms_between(t0, bench::Clock::now());
    const dist::CommStats after = dist::comm_stats();
    state.counters["ranks"] = dist::world_size();
    state.counters["comm_wait"] = (after.wait_seconds - before.wait_seconds) * 1e3 / ms;
    const double per_step = ms / static_cast<double>(state.iterations());
    if (mode == 0) g_local_ms[cnn ? 1 : 0] = per_step;
    if (g_local_ms[cnn ? 1 : 0] > 0)
        state.counters["weak_eff"] = g_local_ms[cnn ? 1 : 0] / per_step;
}

// One all_reduce of n floats (a realized tensor) and the kernel reading it: the collective's own
// latency and bandwidth.
void all_reduce_bench(benchmark::State& state, int64_t n) {
    Tensor x = Tensor::from_vector(bench::random_floats(n, 5), {n});
    x.realize();
    auto run = [&] {
        Tensor y = dist::all_reduce(x) + 1.0f;
        y.realize();
    };
    run();
    for (auto _ : state) run();
    state.counters["ranks"] = dist::world_size();
    state.SetBytesProcessed(state.iterations() * n * 4);
}

void register_all() {
    for (int64_t n : {int64_t{1} << 10, int64_t{1} << 17, int64_t{1} << 20})
        benchmark::RegisterBenchmark(("all_reduce/" + std::to_string(n)).c_str(),
                                     [n](benchmark::State& s) { all_reduce_bench(s, n); })
            ->Iterations(200)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
    for (int cnn = 0; cnn < 2; ++cnn)
        for (int mode = 0; mode < 3; ++mode) {
            static const char* const names[] = {"local", "ddp", "ddp_serial"};
            const std::string name = std::string(cnn ? "cnn_step/" : "mlp_step/") + names[mode];
            benchmark::RegisterBenchmark(
                name.c_str(), [cnn, mode](benchmark::State& s) { step_bench(s, cnn != 0, mode); })
                ->Iterations(steps_per_run())
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
        }
}

// Ranks other than 0 run the same benchmarks and report nothing.
class Silent : public benchmark::BenchmarkReporter {
  public:
    bool ReportContext(const Context&) override { return true; }
    void ReportRuns(const std::vector<Run>&) override {}
};

} // namespace

int main(int argc, char** argv) {
    if (!dist::available()) {
        std::printf("bench_dist: SKIPPED (Tempura was built without MPI)\n");
        return 0;
    }
    dist::init();
    benchmark::Initialize(&argc, argv);
    register_all();
    if (dist::rank() == 0) {
        benchmark::RunSpecifiedBenchmarks();
    } else {
        Silent silent;
        benchmark::RunSpecifiedBenchmarks(&silent);
    }
    benchmark::Shutdown();
    dist::finalize();
    return 0;
}
