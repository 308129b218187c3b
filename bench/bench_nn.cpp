// The tensor surface's layers against their peers, in one run (medians; ratio = Tempura / peer,
// below 1 is faster):
//   BM_Conv2d     3x3 conv, 64 -> 64 channels, 56x56, batch 8, padding 1, float32; the peer is
//                 im2col + OpenBLAS sgemm in this binary (skipped without OpenBLAS), and
//                 oneDNN's direct convolution (libdnnl-dev; absent without it).
//   BM_LayerNorm  layer_norm over [rows, cols] ([4096, 1024], [4096, 4096], [512, 256]); the peer
//   is the time to read the input once and
//                 write the output once (memcpy of the bytes).
//   BM_Softmax    softmax over [4096, 1024], [4096, 4096] and [2048, 128], same peer.
//   BM_Gelu       gelu over 2^24 floats; the peer is a*b+c over 2^24 floats in Tempura (the
//                 bandwidth figure the issue compares it with).
//   BM_Sort       sort of 2^20 floats; the peer is std::sort on one thread.
//   BM_Embedding  nn::embedding of 16384 tokens from [50000, 256], and its gradient
//                 (scatter_add); the peers are hand-written loops.
// Each benchmark checks Tempura's values once against a direct computation before timing.
//
// Run:  OPENBLAS_CORETYPE=SkylakeX build/release/bench/bench_nn
// (the bandwidth peers are noisy on a loaded machine: quote medians of runs on a quiet one)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <tempura/tempura.hpp>

#include "bench_common.hpp"

#if defined(TEMPURA_HAVE_OPENBLAS)
#include <cblas.h>
#endif
#if defined(TEMPURA_HAVE_DNNL)
#include <dnnl.hpp>
#if DNNL_VERSION_MAJOR >= 3 // the operation descriptors below are oneDNN 2's (Debian 12's 2.6)
#undef TEMPURA_HAVE_DNNL
#endif
#endif

namespace {

using bench::median_ms;
using bench::random_floats;
using tempura::Shape;
using tempura::Tensor;
namespace nn = tempura::nn;

constexpr int64_t kN = 8, kC = 64, kH = 56, kW = 56, kK = 3;

void BM_Conv2d(benchmark::State& state) {
#if !defined(TEMPURA_HAVE_OPENBLAS)
    state.SkipWithError("built without OpenBLAS: no peer");
    return;
#else
    const auto x = random_floats(kN * kC * kH * kW, 1), w = random_floats(kC * kC * kK * kK, 2);
    const Tensor xt = Tensor::from_vector(x, {kN, kC, kH, kW});
    const Tensor wt = Tensor::from_vector(w, {kC, kC, kK, kK});
    nn::ConvOptions o;
    o.padding = {1};
    std::vector<float> got;
    auto run = [&] { got = nn::conv2d(xt, wt, o).to_vector<float>(); };
    // im2col [C*K*K, H*W] per image, then W [C, C*K*K] @ cols.
    std::vector<float> cols(static_cast<size_t>(kC * kK * kK * kH * kW)),
        peer(static_cast<size_t>(kN * kC * kH * kW));
    auto im2col_gemm = [&] {
        for (int64_t n = 0; n < kN; ++n) {
            const float* img = x.data() + n * kC * kH * kW;
            for (int64_t c = 0; c < kC; ++c)
                for (int64_t a = 0; a < kK; ++a)
                    for (int64_t e = 0; e < kK; ++e) {
                        float* row = cols.data() + ((c * kK + a) * kK + e) * kH * kW;
                        for (int64_t i = 0; i < kH; ++i)
                            for (int64_t j = 0; j < kW; ++j) {
                                const int64_t y = i + a - 1, z = j + e - 1;
                                row[i * kW + j] = y < 0 || y >= kH || z < 0 || z >= kW
                                                      ? 0.0f
                                                      : img[(c * kH + y) * kW + z];
                            }
                    }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kC, kH * kW, kC * kK * kK, 1.0f,
                        w.data(), kC * kK * kK, cols.data(), kH * kW, 0.0f,
                        peer.data() + n * kC * kH * kW, kH * kW);
        }
    };
    run();
    im2col_gemm();
    for (size_t i = 0; i < got.size(); ++i)
        if (std::fabs(got[i] - peer[i]) > 1e-3f * std::max(1.0f, std::fabs(peer[i]))) {
            state.SkipWithError("conv2d differs from im2col + sgemm");
            return;
        }
    const double ms = median_ms(run, 5), blas = median_ms(im2col_gemm, 5);
    for (auto _ : state) state.SetIterationTime(ms / 1e3);
    state.counters["ms"] = ms;
    state.counters["peer_im2col_sgemm_ms"] = blas;
    state.counters["ratio_vs_im2col_sgemm"] = ms / blas;
#if defined(TEMPURA_HAVE_DNNL)
    // oneDNN's direct convolution in the layouts it picks for itself (blocked channels), with the
    // input reordered from NCHW and the output back to NCHW inside the timing (Tempura reads and
    // writes NCHW); the weights are reordered once, outside it, as a framework would.
    using dnnl::memory;
    const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const memory::dims src_dims = {kN, kC, kH, kW}, wei_dims = {kC, kC, kK, kK};
    const auto f32 = memory::data_type::f32;
    const memory::desc any_src(src_dims, f32, memory::format_tag::any),
        any_wei(wei_dims, f32, memory::format_tag::any),
        any_dst(src_dims, f32, memory::format_tag::any);
    const dnnl::convolution_forward::primitive_desc pd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_direct, any_src, any_wei,
                                        any_dst, {1, 1}, {1, 1}, {1, 1}),
        eng);
    std::vector<float> xs = x, ws = w, out(static_cast<size_t>(kN * kC * kH * kW));
    memory user_src({src_dims, f32, memory::format_tag::nchw}, eng, xs.data());
    memory user_wei({wei_dims, f32, memory::format_tag::oihw}, eng, ws.data());
    memory user_dst({src_dims, f32, memory::format_tag::nchw}, eng, out.data());
    memory src(pd.src_desc(), eng), wei(pd.weights_desc(), eng), dst(pd.dst_desc(), eng);
    dnnl::reorder(user_wei, wei).execute(strm, user_wei, wei);
    const dnnl::reorder to_src(user_src, src), from_dst(dst, user_dst);
    const dnnl::convolution_forward conv(pd);
    auto onednn = [&] {
        to_src.execute(strm, user_src, src);
        conv.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
        from_dst.execute(strm, dst, user_dst);
        strm.wait();
    };
    onednn();
    for (size_t i = 0; i < out.size(); ++i)
        if (std::fabs(out[i] - peer[i]) > 1e-3f * std::max(1.0f, std::fabs(peer[i]))) {
            state.SkipWithError("oneDNN's conv2d differs from im2col + sgemm");
            return;
        }
    const double dnn = median_ms(onednn, 5);
    state.counters["peer_onednn_ms"] = dnn;
    state.counters["ratio_vs_onednn"] = ms / dnn;
#endif
#endif
}
BENCHMARK(BM_Conv2d)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);

// Median time of f(x) realized, against a memcpy of the input's and the output's bytes.
template <class F>
void vs_memcpy(benchmark::State& state, F f, int64_t rows, int64_t cols) {
    const auto x = random_floats(rows * cols, 3);
    const Tensor xt = Tensor::from_vector(x, {rows, cols});
    std::vector<float> dst(x.size());
    const double ms = median_ms([&] { f(xt).realize(); }, 9);
    const double copy = median_ms([&] { std::memcpy(dst.data(), x.data(), x.size() * 4); }, 9);
    benchmark::DoNotOptimize(dst.data());
    for (auto _ : state) state.SetIterationTime(ms / 1e3);
    state.counters["ms"] = ms;
    state.counters["peer_read_write_ms"] = copy;
    state.counters["ratio_vs_read_write"] = ms / copy;
}

void BM_LayerNorm(benchmark::State& state) {
    vs_memcpy(
        state, [&](const Tensor& t) { return nn::layer_norm(t, {state.range(1)}); }, state.range(0),
        state.range(1));
}
// [4096, 1024], [4096, 4096], and the transformer models' rows (bench_models: batch 4 x seq 128
// tokens of width 256).
BENCHMARK(BM_LayerNorm)
    ->Args({4096, 1024})
    ->Args({4096, 4096})
    ->Args({512, 256})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(1);

void BM_Softmax(benchmark::State& state) {
    vs_memcpy(
        state, [](const Tensor& t) { return t.softmax(-1); }, state.range(0), state.range(1));
}
// The same shapes, and the models' attention scores ([batch 4 x 4 heads x 128 queries, 128 keys]).
BENCHMARK(BM_Softmax)
    ->Args({4096, 1024})
    ->Args({4096, 4096})
    ->Args({2048, 128})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(1);

void BM_Gelu(benchmark::State& state) {
    constexpr int64_t n = int64_t{1} << 24;
    const Tensor x = Tensor::from_vector(random_floats(n, 4));
    const Tensor a = Tensor::from_vector(random_floats(n, 5)),
                 b = Tensor::from_vector(random_floats(n, 6));
    const double ms = median_ms([&] { x.gelu().realize(); }, 7);
    const double fma = median_ms([&] { (a * b + x).realize(); }, 7);
    // Bytes moved: gelu reads 4n and writes 4n; a*b+c reads 12n and writes 4n.
    const double gelu_gbs = 8.0 * n / ms / 1e6, fma_gbs = 16.0 * n / fma / 1e6;
    for (auto _ : state) state.SetIterationTime(ms / 1e3);
    state.counters["gelu_GBps"] = gelu_gbs;
    state.counters["peer_fma_GBps"] = fma_gbs;
    state.counters["bandwidth_ratio"] = gelu_gbs / fma_gbs;
}
BENCHMARK(BM_Gelu)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);

// Reports ms as the benchmark's time, beside its peer and their ratio.
void report(benchmark::State& state, double ms, const std::string& peer, double peer_ms) {
    for (auto _ : state) state.SetIterationTime(ms / 1e3);
    state.counters["ms"] = ms;
    state.counters["peer_" + peer + "_ms"] = peer_ms;
    state.counters["ratio_vs_" + peer] = ms / peer_ms;
}

// nn::embedding of 16384 tokens from a [50000, 256] table (a data-dependent load per element),
// and its gradient (scatter_add into zeros: a serial kernel); the peers are hand-written loops:
// a memcpy per row, and a zeroed table plus a row-add per token.
void BM_Embedding(benchmark::State& state) {
    constexpr int64_t v = 50000, d = 256, n = 16384;
    const auto table = random_floats(v * d, 7);
    std::vector<int32_t> ids(n);
    for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 7919) % v);
    const Tensor tt = Tensor::from_vector(table, {v, d});
    const Tensor it = Tensor::from_vector(ids, {n});
    const Tensor g = Tensor::from_vector(random_floats(n * d, 8), {n, d});
    const std::vector<float> got = nn::embedding(it, tt).to_vector<float>();
    const double ms = median_ms([&] { nn::embedding(it, tt).realize(); }, 7);
    std::vector<float> out(static_cast<size_t>(n * d)), grad(static_cast<size_t>(v * d));
    const double loop = median_ms(
        [&] {
            for (int64_t i = 0; i < n; ++i)
                std::memcpy(&out[i * d], &table[static_cast<size_t>(ids[i]) * d], d * 4);
            benchmark::DoNotOptimize(out.data());
        },
        7);
    if (got != out) {
        state.SkipWithError("embedding differs from the loop");
        return;
    }
    const Tensor zeros = Tensor::zeros({v, d});
    const double back_ms = median_ms(
        [&] {
            zeros.scatter_add(0, it.reshape({n, 1}).expand({n, d}), g).realize();
        },
        7);
    const std::vector<float> gv = g.to_vector<float>();
    const double back_loop = median_ms(
        [&] {
            std::fill(grad.begin(), grad.end(), 0.0f);
            for (int64_t i = 0; i < n; ++i)
                for (int64_t j = 0; j < d; ++j) grad[ids[i] * d + j] += gv[i * d + j];
            benchmark::DoNotOptimize(grad.data());
        },
        7);
    const std::vector<float> back =
        zeros.scatter_add(0, it.reshape({n, 1}).expand({n, d}), g).to_vector<float>();
    for (size_t i = 0; i < grad.size(); ++i)
        if (std::fabs(back[i] - grad[i]) > 1e-4f * (1.0f + std::fabs(grad[i]))) {
            state.SkipWithError("the scatter_add gradient differs from the loop");
            return;
        }
    report(state, ms, "loop", loop);
    state.counters["backward_ms"] = back_ms;
    state.counters["peer_backward_loop_ms"] = back_loop;
    state.counters["backward_ratio_vs_loop"] = back_ms / back_loop;
}
BENCHMARK(BM_Embedding)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);

// sort of 2^20 floats (the bitonic network: 210 stages); the peer is std::sort on one thread.
void BM_Sort(benchmark::State& state) {
    constexpr int64_t n = int64_t{1} << 20;
    const auto v = random_floats(n, 9);
    const Tensor t = Tensor::from_vector(v, {n});
    std::vector<float> want = v;
    std::sort(want.begin(), want.end());
    if (t.sort().to_vector<float>() != want) {
        state.SkipWithError("sort differs from std::sort");
        return;
    }
    const double ms = median_ms([&] { t.sort().realize(); }, 5);
    const double peer = median_ms(
        [&] {
            std::vector<float> w = v;
            std::sort(w.begin(), w.end());
            benchmark::DoNotOptimize(w.data());
        },
        5);
    report(state, ms, "std_sort", peer);
}
BENCHMARK(BM_Sort)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);

} // namespace

BENCHMARK_MAIN();
