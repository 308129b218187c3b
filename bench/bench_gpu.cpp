// The CUDA benchmarks: Tempura's kernels on "CUDA" (CUDA:0) beside what the device itself can
// do, measured in the same run.
//
// Run:  build/release/bench/bench_gpu        (scripts/gpu_check.sh runs it after the tests)
//
//   BM_CopyDtoD         cuMemcpyDtoD of 2^26 floats (256 MiB) on Tempura's context: the device's
//                       copy bandwidth, GB/s = 2 x bytes / time (a read and a write). The other
//                       memory-bound rows are reported as a ratio to it (1 = as fast as a copy).
//   BM_Triad            a*b + c over 2^26 floats (a cached plan, realized each iteration).
//                       GB/s = 16 N bytes / best time; GBps_ratio_dtod = GB/s / the best copy's.
//   BM_Sum              x.sum() over 2^26 floats. GB/s = 4 N / time; GBps_ratio_dtod as above.
//   BM_Softmax          softmax along the last axis of [4096, 4096] floats. GB/s = 8 N / time
//                       (read once, write once: the floor), GBps_ratio_dtod as above.
//   BM_MatmulF16/32     [4096, 4096] @ [4096, 4096] in float16 (float32 accumulation: tensor
//                       cores). TFLOP/s = 2 N^3 / best time. Beside it cuBLAS's cublasGemmEx on the
//                       same device buffers (libcublas.so.13 or libcublas.so, dlopened: no
//                       link-time dependency): TFLOPs_ratio_cublas = Tempura / cuBLAS (1 = parity).
//                       Without cuBLAS the row says so in its label.
//   BM_MatmulF16/16     the same with float16 accumulation (matmul(b, DType::Float16); cuBLAS
//                       with CUBLAS_COMPUTE_16F).
//   BM_MatmulF32        [4096, 4096] @ [4096, 4096] in float32: no tensor cores, the operands
//                       staged through shared memory into register tiles (the SMEM opt). Beside
//                       it cuBLAS's cublasGemmEx with CUDA_R_32F operands and CUBLAS_COMPUTE_32F
//                       (plain float32, not TF32: the handle's default math mode).
//
// Each iteration ends when the device is done (the stream synchronized): the time is the
// kernels', plus Tempura's per-realize host work (a cached plan). With no usable CUDA device every
// row stops with SkipWithError and the reason.
//
// Every row also checks its result once, untimed: max_abs_err against the same program on the
// CPU (Triad, Softmax), rel_err against a float64 sum (Sum), rel_err = |C - C_cublas| / |C_cublas|
// (Frobenius norms) against cuBLAS's product (MatmulF16, MatmulF32). A figure with a wrong result
// is no figure: look at these first.
#include <dlfcn.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tempura/backend/cuda.hpp"
#include "tempura/tempura.hpp"

using namespace tempura;

namespace {

constexpr int64_t kN = int64_t{1} << 26;
constexpr int64_t kSoftmax = 4096;
constexpr int64_t kMatmul = 4096;

// Why the CUDA rows cannot run here ("" when they can).
std::string unusable() {
    if (!cuda::cuda_usable()) return "no usable CUDA device: " + cuda::cuda_unusable_reason();
    for (const std::string& d : devices())
        if (d == "CUDA:0") return "";
    try {
        set_default_device("CUDA:0"); // says why CUDA:0 is refused (its arch)
    } catch (const Error& e) {
        return e.what();
    }
    return "CUDA:0 is not usable";
}

bool skip_without_gpu(benchmark::State& state) {
    const std::string why = unusable();
    if (why.empty()) return false;
    state.SkipWithError(why.c_str());
    return true;
}

cuda::Context& context() { return cuda::driver().context(0); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<float> values(int64_t n, float scale, uint32_t seed = 12345) {
    std::vector<float> v(static_cast<size_t>(n));
    uint32_t s = seed;
    for (float& x : v) {
        s = s * 1664525u + 1013904223u;
        x = scale * (static_cast<float>(s >> 8) / 16777216.0f - 0.5f);
    }
    return v;
}

// The device's copy bandwidth in GB/s, measured once per process (the ratio's denominator).
double dtod_gbps() {
    static const double gbps = [] {
        cuda::Context& ctx = context();
        const size_t bytes = static_cast<size_t>(kN) * sizeof(float);
        const cuda::CUdeviceptr a = ctx.alloc(bytes), b = ctx.alloc(bytes);
        ctx.memset0(a, bytes);
        ctx.copy_device(b, a, bytes); // warm-up
        ctx.synchronize();
        double best = 0;
        for (int i = 0; i < 10; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            ctx.copy_device(b, a, bytes);
            ctx.synchronize();
            best = std::max(best, 2.0 * static_cast<double>(bytes) / seconds_since(t0) / 1e9);
        }
        ctx.free(a);
        ctx.free(b);
        return best;
    }();
    return gbps;
}

// Runs `step` (which realizes on CUDA:0) once untimed (compiling), then once per iteration,
// waiting for the device each time. Returns the fastest iteration's seconds.
template <class F>
double timed_runs(benchmark::State& state, F&& step) {
    step();
    context().synchronize();
    double best = 1e30;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        step();
        context().synchronize();
        const double s = seconds_since(t0);
        state.SetIterationTime(s);
        best = std::min(best, s);
    }
    return best;
}

// Times `step` with timed_runs and reports GB/s for `bytes` moved per run and its ratio to the
// device's copy bandwidth.
template <class F>
void memory_bound(benchmark::State& state, double bytes, F&& step) {
    const double dtod = dtod_gbps();
    const double best = timed_runs(state, step);
    const double gbps = bytes / best / 1e9; // the best run, as the copy's is
    state.counters["GB/s"] = gbps;
    state.counters["dtod_GB/s"] = dtod;
    state.counters["GBps_ratio_dtod"] = gbps / dtod;
    state.SetLabel(cuda::driver().device_name(0));
}

double max_abs_diff(const std::vector<float>& x, const std::vector<float>& y) {
    if (x.size() != y.size()) return 1e30;
    double m = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double d = std::abs(static_cast<double>(x[i]) - static_cast<double>(y[i]));
        m = std::isnan(d) ? 1e30 : std::max(m, d);
    }
    return m;
}

double rel_diff(const std::vector<float>& x, const std::vector<float>& ref) {
    if (x.size() != ref.size()) return 1e30;
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double d = static_cast<double>(x[i]) - static_cast<double>(ref[i]);
        num += d * d;
        den += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
    }
    return std::isnan(num) ? 1e30 : std::sqrt(num / den);
}

void BM_CopyDtoD(benchmark::State& state) {
    if (skip_without_gpu(state)) return;
    cuda::Context& ctx = context();
    const size_t bytes = static_cast<size_t>(kN) * sizeof(float);
    const cuda::CUdeviceptr a = ctx.alloc(bytes), b = ctx.alloc(bytes);
    ctx.memset0(a, bytes);
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        ctx.copy_device(b, a, bytes);
        ctx.synchronize();
        state.SetIterationTime(seconds_since(t0));
    }
    ctx.free(a);
    ctx.free(b);
    state.counters["GB/s"] = benchmark::Counter(2.0 * static_cast<double>(bytes),
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
    state.SetLabel(cuda::driver().device_name(0));
}

void BM_Triad(benchmark::State& state) {
    if (skip_without_gpu(state)) return;
    const Tensor a = Tensor::from_vector(values(kN, 1)).to("CUDA"),
                 b = Tensor::from_vector(values(kN, 2)).to("CUDA"),
                 c = Tensor::from_vector(values(kN, 3)).to("CUDA");
    memory_bound(state, 16.0 * static_cast<double>(kN), [&] {
        Tensor r = a * b + c;
        r.realize();
    });
    const Tensor ha = a.to("CPU"), hb = b.to("CPU"), hc = c.to("CPU");
    state.counters["max_abs_err"] =
        max_abs_diff((a * b + c).to_vector<float>(), (ha * hb + hc).to_vector<float>());
}

void BM_Sum(benchmark::State& state) {
    if (skip_without_gpu(state)) return;
    const Tensor x = Tensor::from_vector(values(kN, 1)).to("CUDA");
    memory_bound(state, 4.0 * static_cast<double>(kN), [&] {
        Tensor r = x.sum();
        r.realize();
    });
    double ref = 0;
    for (const float v : values(kN, 1)) ref += v;
    state.counters["rel_err"] = std::abs(x.sum().item<float>() - ref) / std::abs(ref);
}

void BM_Softmax(benchmark::State& state) {
    if (skip_without_gpu(state)) return;
    const Tensor x =
        Tensor::from_vector(values(kSoftmax * kSoftmax, 8), {kSoftmax, kSoftmax}).to("CUDA");
    memory_bound(state, 8.0 * static_cast<double>(kSoftmax * kSoftmax), [&] {
        Tensor r = x.softmax(1);
        r.realize();
    });
    state.counters["max_abs_err"] =
        max_abs_diff(x.softmax(1).to_vector<float>(), x.to("CPU").softmax(1).to_vector<float>());
}

// cuBLAS, dlopened. The enum values are cublas_api.h's and library_types.h's.
struct Cublas {
    using Handle = void*;
    int (*create)(Handle*) = nullptr;
    int (*destroy)(Handle) = nullptr;
    int (*set_stream)(Handle, cuda::CUstream) = nullptr;
    int (*gemm_ex)(Handle, int, int, int, int, int, const void*, const void*, int, int, const void*,
                   int, int, const void*, void*, int, int, int, int) = nullptr;
    std::string library;
    static constexpr int kOpN = 0;          // CUBLAS_OP_N
    static constexpr int kR16F = 2;         // CUDA_R_16F
    static constexpr int kR32F = 0;         // CUDA_R_32F
    static constexpr int kCompute16F = 64;  // CUBLAS_COMPUTE_16F
    static constexpr int kCompute32F = 68;  // CUBLAS_COMPUTE_32F
    static constexpr int kGemmDefault = -1; // CUBLAS_GEMM_DEFAULT

    // Loads it; "" or why not.
    std::string load() {
        void* h = nullptr;
        for (const char* name : {"libcublas.so.13", "libcublas.so"}) {
            h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
            if (h != nullptr) {
                library = name;
                break;
            }
        }
        if (h == nullptr) return "cuBLAS not found (libcublas.so.13, libcublas.so)";
        create = reinterpret_cast<decltype(create)>(dlsym(h, "cublasCreate_v2"));
        destroy = reinterpret_cast<decltype(destroy)>(dlsym(h, "cublasDestroy_v2"));
        set_stream = reinterpret_cast<decltype(set_stream)>(dlsym(h, "cublasSetStream_v2"));
        gemm_ex = reinterpret_cast<decltype(gemm_ex)>(dlsym(h, "cublasGemmEx"));
        if (!create || !destroy || !set_stream || !gemm_ex)
            return library + " lacks cublasCreate_v2, cublasSetStream_v2 or cublasGemmEx";
        return "";
    }
};

// Tempura's n x n x n matmul of `in` operands with `acc` accumulation beside cuBLAS's.
void matmul_vs_cublas(benchmark::State& state, DType in, DType acc) {
    if (skip_without_gpu(state)) return;
    const int64_t n = kMatmul;
    const bool f16_acc = acc == DType::Float16;
    const bool f32 = in == DType::Float32;
    const Tensor a = Tensor::from_vector(values(n * n, 1), {n, n}, in).to("CUDA");
    const Tensor b = Tensor::from_vector(values(n * n, 1, 777), {n, n}, in).to("CUDA");
    const double flops =
        2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
    auto step = [&] {
        Tensor r = a.matmul(b, acc);
        r.realize();
    };
    const double tflops = flops / timed_runs(state, step) / 1e12; // the best run
    state.counters["TFLOP/s"] = tflops;
    std::string label = cuda::driver().device_name(0) + (f16_acc ? "; acc float16" : "");

    // cuBLAS on the same inputs. Row-major C = A B is column-major C^T = B^T A^T: B first.
    Cublas blas;
    if (const std::string why = blas.load(); !why.empty()) {
        state.SetLabel(label + "; " + why);
        return;
    }
    Cublas::Handle h = nullptr;
    if (blas.create(&h) != 0) {
        state.SetLabel(label + "; cublasCreate failed");
        return;
    }
    blas.set_stream(h, context().stream());
    // cuBLAS writes a tensor of its own (NaN until it does): Tempura's result is Tempura's.
    const Tensor out =
        Tensor::from_vector(std::vector<float>(static_cast<size_t>(n * n), NAN), {n, n}, in)
            .to("CUDA");
    const auto ptr = [](const Tensor& t) {
        return reinterpret_cast<void*>(static_cast<uintptr_t>(t.buffer()->address()));
    };
    // alpha and beta are of the compute type: float, or float16's bits (1.0 is 0x3c00).
    const float alpha = 1, beta = 0;
    const uint16_t alpha16 = 0x3c00, beta16 = 0;
    const int ni = static_cast<int>(n);
    const int type = f32 ? Cublas::kR32F : Cublas::kR16F;
    auto gemm = [&] {
        return blas.gemm_ex(h, Cublas::kOpN, Cublas::kOpN, ni, ni, ni,
                            f16_acc ? static_cast<const void*>(&alpha16) : &alpha, ptr(b), type, ni,
                            ptr(a), type, ni, f16_acc ? static_cast<const void*>(&beta16) : &beta,
                            ptr(out), type, ni, f16_acc ? Cublas::kCompute16F : Cublas::kCompute32F,
                            Cublas::kGemmDefault);
    };
    if (gemm() != 0) {
        blas.destroy(h);
        state.SetLabel(label + "; cublasGemmEx failed");
        return;
    }
    context().synchronize();
    double best_blas = 0;
    for (int i = 0; i < 20; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        gemm();
        context().synchronize();
        best_blas = std::max(best_blas, flops / seconds_since(t0) / 1e12);
    }
    blas.destroy(h);
    state.counters["rel_err"] =
        rel_diff(a.matmul(b, acc).to_vector<float>(), out.to_vector<float>());
    state.counters["cublas_TFLOP/s"] = best_blas;
    state.counters["TFLOPs_ratio_cublas"] = tflops / best_blas;
    state.SetLabel(label + "; " + blas.library);
}

// state.range(0): the accumulator's bits, 32 or 16.
void BM_MatmulF16(benchmark::State& state) {
    matmul_vs_cublas(state, DType::Float16, state.range(0) == 16 ? DType::Float16 : DType::Float32);
}

void BM_MatmulF32(benchmark::State& state) {
    matmul_vs_cublas(state, DType::Float32, DType::Float32);
}

BENCHMARK(BM_CopyDtoD)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Triad)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Sum)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Softmax)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MatmulF16)->Arg(32)->Arg(16)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MatmulF32)->UseManualTime()->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
