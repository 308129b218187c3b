// Imported ONNX models, forward pass at batch 8, on the default device (TEMPURA_DEVICE: CPU, EMU
// or CUDA). The models are the ones scripts/onnx_models.py exports with random weights (resnet18,
// mobilenet_v2, bert; the test suite writes them to build/<preset>/tests/onnx_models, and
// TEMPURA_ONNX_MODELS names another folder), each with PyTorch's own outputs beside it: every row
// first checks that Tempura's output agrees with them (max_rel_err, over outputs of magnitude
// > 1e-3), then times one forward pass: run() on the inputs, the output realized and copied to the
// host (which waits for the device). Counters: kernels (launched per pass), first_s (the first
// pass: the graph built, every kernel compiled).
//
// The peer: on the CPU, bench_models runs the same architectures beside libtorch in one process.
// On a GPU, scripts/torch_gpu_models.py times PyTorch (CUDA, float32, TF32 off) on the same
// architectures at the same batch; the GPU bundle (scripts/gpu_bundle_run.sh) runs both in one
// call and prints the two figures together.
//
// Run:  TEMPURA_DEVICE=CUDA build/release/bench/bench_onnx --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <tempura/onnx.hpp>
#include <tempura/tempura.hpp>

namespace {

using tempura::Tensor;

std::string models_dir() {
    if (const char* d = std::getenv("TEMPURA_ONNX_MODELS")) return d;
    return "build/release/tests/onnx_models"; // from the repository root
}

struct Case {
    std::string name;
    std::vector<std::string> inputs;
};

void BM_OnnxForward(benchmark::State& state, const Case& c) {
    const std::string dir = models_dir();
    const std::string base = dir + "/" + c.name;
    if (!std::filesystem::exists(base + ".onnx") ||
        !std::filesystem::exists(base + ".b8.out0.pb")) {
        state.SkipWithError(
            ("SKIPPED: no " + base + ".onnx (scripts/onnx_models.py writes it)").c_str());
        return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto model = tempura::onnx::Model::load(base + ".onnx");
    std::map<std::string, Tensor> feed;
    for (size_t k = 0; k < c.inputs.size(); ++k)
        feed.emplace(c.inputs[k],
                     tempura::onnx::read_tensor(base + ".b8.in" + std::to_string(k) + ".pb"));
    const std::string out_name = model.output_names().at(0);
    auto forward = [&] {
        Tensor y = model.run(feed).at(out_name);
        std::vector<float> v = y.to_vector<float>();
        return std::make_pair(y, v);
    };
    const auto [first, got] = forward();
    const double first_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::vector<float> want =
        tempura::onnx::read_tensor(base + ".b8.out0.pb").to_vector<float>();
    double max_rel = want.size() == got.size() ? 0.0 : INFINITY;
    for (size_t k = 0; k < std::min(want.size(), got.size()); ++k)
        if (std::abs(want[k]) > 1e-3)
            max_rel = std::max(max_rel,
                               std::abs(static_cast<double>(got[k]) - want[k]) / std::abs(want[k]));
    for (auto _ : state) benchmark::DoNotOptimize(forward().second.data());
    state.counters["max_rel_err"] = max_rel;
    state.counters["kernels"] = static_cast<double>(first.kernels().size());
    state.counters["first_s"] = first_s;
    state.SetLabel(tempura::default_device());
}

const bool registered = [] {
    for (const Case& c : {Case{"resnet18", {"input"}}, Case{"mobilenet_v2", {"input"}},
                          Case{"bert", {"input_ids", "attention_mask"}}})
        benchmark::RegisterBenchmark(("BM_OnnxForward/" + c.name + "/batch8").c_str(),
                                     [c](benchmark::State& s) { BM_OnnxForward(s, c); })
            ->Unit(benchmark::kMillisecond)
            ->MinTime(1.0);
    return true;
}();

} // namespace

BENCHMARK_MAIN();
