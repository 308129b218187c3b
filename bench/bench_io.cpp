// Loading a 512 MB safetensors file (32 float32 tensors of 16 MB) against a plain read() of the
// same file into one buffer, in the same run (the file in the page cache for both: the first
// iteration warms it). Medians; ratio = load / read. The target: ratio <= 1.5.
//
//   load_ms   tempura::io::load_safetensors: the file mapped, each tensor copied once from the
//             mapping into its buffer (the tensors realized, on the CPU);
//   read_ms   open + read() of the whole file into a new buffer of its size + close.
//
// Run:  build/release/bench/bench_io --benchmark_repetitions=5
// --benchmark_report_aggregates_only=true The file goes to $TMPDIR (default /tmp) and is removed at
// the end.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>

#include <tempura/io.hpp>
#include <tempura/tempura.hpp>

#include "bench_common.hpp"

namespace {

using tempura::Tensor;

constexpr int64_t kTensors = 32, kElems = 4 * 1024 * 1024; // 32 x 16 MB

bool g_created = false;

const std::string& file() {
    static const std::string path = [] {
        g_created = true;
        const char* dir = std::getenv("TMPDIR");
        std::string p = std::string(dir && *dir ? dir : "/tmp") + "/tempura_bench_io_" +
                        std::to_string(::getpid()) + ".safetensors";
        std::map<std::string, Tensor> tensors;
        for (int64_t i = 0; i < kTensors; ++i) {
            Tensor t = Tensor::rand({kElems});
            t.realize();
            tensors.emplace("layer" + std::to_string(i) + ".weight", t);
        }
        tempura::io::save_safetensors(p, tensors);
        return p;
    }();
    return path;
}

struct Cleanup {
    ~Cleanup() {
        if (g_created) std::remove(file().c_str());
    }
};

// read() of the whole file into `into` (a new buffer of the file's size when null).
size_t read_whole(const std::string& path, char* into = nullptr) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) std::abort();
    const auto size = static_cast<size_t>(::lseek(fd, 0, SEEK_END));
    ::lseek(fd, 0, SEEK_SET);
    std::unique_ptr<char[]> fresh;
    if (!into) {
        fresh.reset(new char[size]);
        into = fresh.get();
    }
    size_t got = 0;
    while (got < size) {
        const ssize_t r = ::read(fd, into + got, size - got);
        if (r <= 0) std::abort();
        got += static_cast<size_t>(r);
    }
    ::close(fd);
    benchmark::DoNotOptimize(into);
    return got;
}

size_t load_all(const std::string& path) {
    auto t = tempura::io::load_safetensors(path);
    size_t n = 0;
    for (auto& [k, v] : t) n += static_cast<size_t>(v.numel()) * 4;
    benchmark::DoNotOptimize(t);
    return n;
}

// Fresh memory on both sides (what loading a model once costs): the allocator's cached blocks
// released before each load, a new buffer for each read().
void BM_load_vs_read_512MB_fresh_memory(benchmark::State& state) {
    const std::string& path = file();
    double load = 0, read = 0;
    for (auto _ : state) {
        load = bench::median_ms(
            [&] {
                tempura::clear_caches();
                load_all(path);
            },
            5);
        read = bench::median_ms([&] { read_whole(path); }, 5);
        state.SetIterationTime((load + read) / 1000);
    }
    state.counters["load_ms"] = load;
    state.counters["read_ms"] = read;
    state.counters["ratio"] = load / read;
}
BENCHMARK(BM_load_vs_read_512MB_fresh_memory)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// Memory already faulted in on both sides (a loop that loads again): the allocator's cached
// blocks reused, one read() buffer touched once and reused.
void BM_load_vs_read_512MB_warm_memory(benchmark::State& state) {
    const std::string& path = file();
    const size_t size = std::filesystem::file_size(path);
    std::unique_ptr<char[]> buf(new char[size]);
    std::memset(buf.get(), 1, size);
    double load = 0, read = 0;
    for (auto _ : state) {
        load = bench::median_ms([&] { load_all(path); }, 5);
        read = bench::median_ms([&] { read_whole(path, buf.get()); }, 5);
        state.SetIterationTime((load + read) / 1000);
    }
    state.counters["load_ms"] = load;
    state.counters["read_ms"] = read;
    state.counters["ratio"] = load / read;
}
BENCHMARK(BM_load_vs_read_512MB_warm_memory)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

} // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    Cleanup cleanup;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
