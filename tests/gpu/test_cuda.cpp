// CUDA devices: programs realized on "CUDA" agree exactly with the CPU (integer-valued floats,
// so that every order of summation gives the same answer). Without a GPU they run on the tests'
// mock driver ("cuda mock:" cases; ctest gpu_cuda_mock loads it through TEMPURA_LIBCUDA), whose
// launches run the same programs on EMU, and whose records show what Tempura asked of the driver.
// Where a real GPU is usable the same programs run on it ("cuda realize:" cases).
#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <doctest/doctest.h>

#include "../error_at.hpp"
#include "../support.hpp"
#include "default_device.hpp"
#include "matmul_buffers.hpp"
#include "mock_cuda.hpp"
#include "mock_run.hpp"
#include "ptxas.hpp"
#include "real_gpu.hpp"
#include "tempura/backend/cuda.hpp"
#include "tempura/backend/gpu.hpp"
#include "tempura/codegen/stages.hpp"
#include "tempura/realize/beam.hpp"
#include "tempura/realize/device.hpp"
#include "tempura/schedule/schedule.hpp"
#include "tempura/tempura.hpp"
#include "tempura/tensor/reference.hpp"

using namespace tempura;

namespace {

// The mock driver's own interface, from the library the process loaded as its driver.
struct Mock {
    TempuraMockCountersFn counters_fn = nullptr;
    TempuraMockLaunchesFn launches_fn = nullptr;
    TempuraMockModuleCountFn module_count = nullptr;
    TempuraMockModulePtxFn module_ptx = nullptr;
    TempuraMockLastRefusalFn last_refusal = nullptr;

    TempuraMockCounters counters() const {
        TempuraMockCounters c{};
        counters_fn(&c);
        return c;
    }
    TempuraMockLaunch last_launch() const {
        TempuraMockLaunch l{};
        launches_fn(&l, 1);
        return l;
    }
};

// Whether the process's driver is the mock (then `m` is its interface).
bool driver_is_mock(Mock* m = nullptr) {
    if (!cuda::cuda_usable()) return false;
    void* lib = cuda::driver().library();
    Mock mock;
    mock.counters_fn = reinterpret_cast<TempuraMockCountersFn>(dlsym(lib, "tempura_mock_counters"));
    mock.launches_fn = reinterpret_cast<TempuraMockLaunchesFn>(dlsym(lib, "tempura_mock_launches"));
    mock.module_count =
        reinterpret_cast<TempuraMockModuleCountFn>(dlsym(lib, "tempura_mock_module_count"));
    mock.module_ptx =
        reinterpret_cast<TempuraMockModulePtxFn>(dlsym(lib, "tempura_mock_module_ptx"));
    mock.last_refusal =
        reinterpret_cast<TempuraMockLastRefusalFn>(dlsym(lib, "tempura_mock_last_refusal"));
    if (mock.counters_fn == nullptr || mock.launches_fn == nullptr ||
        mock.module_count == nullptr || mock.module_ptx == nullptr || mock.last_refusal == nullptr)
        return false;
    if (m != nullptr) *m = mock;
    return true;
}

bool mock_or_skip(Mock& m) {
    if (driver_is_mock(&m)) return true;
    // ctest's mock entries set this: there, a driver that is not the mock is a failure, not a
    // skip (a broken TEMPURA_LIBCUDA must not pass by running nothing).
    if (const char* e = std::getenv("TEMPURA_EXPECT_MOCK"); e != nullptr && *e == '1')
        FAIL("TEMPURA_EXPECT_MOCK=1, but the CUDA driver loaded is not the mock ("
             << TEMPURA_MOCK_CUDA << ")");
    MESSAGE("SKIPPED: the mock CUDA driver is not this process's driver (ctest runs these cases "
            "as gpu_cuda_mock, with TEMPURA_LIBCUDA="
            << TEMPURA_MOCK_CUDA << ")");
    return false;
}

// Whether the environment variable `name` is `value`; else says SKIPPED (the ctest entry
// `test` runs the case with it set) and returns false.
bool env_is_or_skip(const char* name, const char* value, const char* test) {
    const char* v = std::getenv(name);
    if (v != nullptr && std::string(v) == value) return true;
    // (one std::string: doctest prints a bare const char* as a pointer)
    const std::string why = std::string("SKIPPED: ") + name + " is not " + value +
                            " here (ctest runs this case as " + test + ")";
    MESSAGE(why);
    return false;
}

// Integer values in [-range, range], as floats: every sum of a few thousand is exact.
std::vector<float> ints(size_t n, uint32_t seed, int range) {
    std::vector<float> v(n);
    uint32_t s = seed;
    for (float& x : v) {
        s = s * 1664525u + 1013904223u;
        x = static_cast<float>(static_cast<int>((s >> 8) % static_cast<uint32_t>(2 * range + 1)) -
                               range);
    }
    return v;
}

// Each kernel's PTX is for sm_90 (the arch the device reports) and ptxas accepts it.
void check_ptx(const Tensor& t, const std::string& arch) {
    REQUIRE_FALSE(t.kernels().empty());
    for (const KernelInfo& k : t.kernels()) {
        INFO(k.name);
        CHECK(k.source.find(".target " + arch) != std::string::npos);
        CHECK(ptxas(k.source, arch) == "");
    }
}

// The programs every CUDA device must get right, against the CPU, on `dev`.
void check_programs(const std::string& dev) {
    const std::string arch = "sm_" + std::to_string(cuda::driver().compute_capability(
                                         runtime::cuda_ordinal(runtime::device_index(dev))));
    SUBCASE("elementwise") {
        const size_t n = 1000; // not a whole number of blocks
        const Tensor a = Tensor::from_vector(ints(n, 1, 8)), b = Tensor::from_vector(ints(n, 2, 8)),
                     c = Tensor::from_vector(ints(n, 3, 8));
        Tensor r = a.to(dev) * b.to(dev) + c.to(dev);
        r.realize();
        CHECK(r.device() == runtime::device_name(runtime::device_index(dev)));
        CHECK(r.kernels().at(0).backend == r.device());
        CHECK(r.to_vector<float>() == (a * b + c).to_vector<float>());
        check_ptx(r, arch);
        const Tensor ia = a.cast(DType::Int32), ib = b.cast(DType::Int32);
        CHECK((ia.to(dev) * ib.to(dev) - ia.to(dev)).to_vector<int32_t>() ==
              (ia * ib - ia).to_vector<int32_t>());
        CHECK((a.to(dev) > b.to(dev)).to_vector<bool>() == (a > b).to_vector<bool>());
    }
    SUBCASE("a reduction to few outputs: GROUP, shared memory and a barrier") {
        const Tensor x = Tensor::from_vector(ints(4 * 4096, 4, 6), {4, 4096});
        Tensor s = x.to(dev).sum(1);
        s.realize();
        CHECK(s.to_vector<float>() == x.sum(1).to_vector<float>());
        REQUIRE(s.kernels().size() == 1);
        const std::string& ptx = s.kernels()[0].source;
        CHECK(ptx.find(".shared") != std::string::npos);
        CHECK(ptx.find("bar.sync") != std::string::npos);
        check_ptx(s, arch);
        CHECK(x.to(dev).max(1).to_vector<float>() == x.max(1).to_vector<float>());
        CHECK(x.to(dev).sum().item<float>() == x.sum().item<float>());
    }
    SUBCASE("a float16 matmul on tensor cores") {
        const Tensor a = Tensor::from_vector(ints(32 * 48, 5, 3), {32, 48}, DType::Float16);
        const Tensor b = Tensor::from_vector(ints(48 * 24, 6, 3), {48, 24}, DType::Float16);
        Tensor m = a.to(dev).matmul(b.to(dev));
        m.realize();
        CHECK(m.dtype() == DType::Float16);
        CHECK(m.to_vector<float>() == a.matmul(b).to_vector<float>());
        REQUIRE(m.kernels().size() == 1);
        CHECK(m.kernels()[0].source.find("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") !=
              std::string::npos);
        check_ptx(m, arch);
    }
    SUBCASE("a float32 matmul staged through shared memory (SMEM)") {
        const Tensor a = Tensor::from_vector(ints(96 * 80, 11, 4), {96, 80});
        const Tensor b = Tensor::from_vector(ints(80 * 72, 12, 4), {80, 72});
        Tensor m = a.to(dev).matmul(b.to(dev));
        m.realize();
        CHECK(m.to_vector<float>() == a.matmul(b).to_vector<float>());
        REQUIRE(m.kernels().size() == 1);
        const std::string& ptx = m.kernels()[0].source;
        CHECK(count_of(ptx, "bar.sync") == 1);
        CHECK(count_of(ptx, "ld.shared") > 0);
        check_ptx(m, arch);
    }
    SUBCASE("a symbolic size: one kernel for every batch, the grid sized at launch") {
        const Dim batch = Dim::variable("batch", 1, 64);
        const Tensor w = Tensor::from_vector(ints(16 * 32, 7, 4), {16, 32}).to(dev);
        const Tensor bias = Tensor::from_vector(ints(32, 8, 4), {32}).to(dev);
        std::string ptx;
        for (int64_t bs : {1, 5, 17, 40}) {
            const std::vector<float> xv = ints(static_cast<size_t>(bs * 16), 9, 4);
            const Tensor x = Tensor::from_vector(xv, {batch.bind(bs), 16}).to(dev);
            Tensor y = (x.matmul(w) + bias).relu();
            y.realize();
            const Tensor xc = Tensor::from_vector(xv, {bs, 16});
            CHECK(y.to_vector<float>() ==
                  (xc.matmul(w.to("CPU")) + bias.to("CPU")).relu().to_vector<float>());
            if (ptx.empty()) ptx = y.kernels().at(0).source;
            CHECK(y.kernels().at(0).source == ptx);
        }
        CHECK(ptx.find("%ctaid.z") != std::string::npos);
        CHECK(ptxas(ptx, arch) == "");
    }
    SUBCASE("to(), to_vector, item and the host's reads of device memory") {
        const std::vector<float> v = ints(257, 10, 100);
        const Tensor c = Tensor::from_vector(v);
        const Tensor g = c.to(dev);
        CHECK(g.to(dev).buffer() == g.buffer()); // already there
        CHECK(g.to_vector<float>() == v);
        CHECK(g.to("CPU").to_vector<float>() == v);
        CHECK(g.to("EMU").to_vector<float>() == v);
        CHECK(g.to("EMU").to(dev).to_vector<float>() == v);
        CHECK(g.cast(DType::Float64).to_vector<double>() ==
              c.cast(DType::Float64).to_vector<double>());
        {
            const DefaultDevice d(dev);
            const Tensor made = Tensor::from_vector(v);
            CHECK(made.device() == g.device());
            CHECK(made.to_vector<float>() == v);
            CHECK(Tensor::arange(100).to_vector<float>() == Tensor::arange(100).to_vector<float>());
            const Tensor e = Tensor::eye(5, DType::Int32);
            CHECK(e.device() == g.device());
            std::vector<int32_t> eye(25, 0);
            for (size_t i = 0; i < 5; ++i) eye[i * 5 + i] = 1;
            CHECK(e.to_vector<int32_t>() == eye);
            CHECK(Tensor::zeros({3}).to_vector<float>() == std::vector<float>{0, 0, 0});
            CHECK((Tensor::arange(10) * 2.0f).sum().item<float>() == 90.0f);
        }
        // The reference interpreter reads device buffers through copies.
        CHECK(reference_eval((g * 2.0f).uop()) == reference_eval((c * 2.0f).uop()));
        // A device address is not a host pointer.
        const std::string id = std::to_string(g.buffer()->id());
        CHECK(error_of([&] { (void)g.buffer()->data(); }) ==
              "[buffer] buffer " + id + " is in " + g.device() + "'s memory, not the host's " +
                  "(copy it)");
        CHECK_FALSE(g.buffer()->on_host());
    }
    SUBCASE("tensors on different devices do not mix") {
        const Tensor c = Tensor::from_vector(std::vector<float>{1, 2, 3, 4});
        const Tensor g = c.to(dev);
        const std::string name = g.device();
        const int add_line = __LINE__ + 1;
        const std::string add_err = error_of([&] { (void)(c + g); });
        CHECK(add_err == at_line(add_line, "[add] tensors on different devices: CPU and " + name));
        const int mul_line = __LINE__ + 1;
        const std::string mul_err = error_of([&] { (void)(g * c.to("EMU")); });
        CHECK(mul_err ==
              at_line(mul_line, "[mul] tensors on different devices: " + name + " and EMU"));
        CHECK(error_of([&] {
                  Tensor x = c * 2.0f, y = g * 2.0f;
                  realize({x, y});
              }) == "[realize] tensors on different devices: CPU and " + name);
        CHECK((g + 1.0f).to_vector<float>() == std::vector<float>{2, 3, 4, 5});
    }
}

// The grid and block EMU's lowering gives the graph's one kernel.
std::pair<std::array<int64_t, 3>, std::array<int64_t, 3>> emu_dims(const Tensor& t) {
    const std::vector<ScheduledKernel> ks = schedule_graph(t.uop());
    REQUIRE(ks.size() == 1);
    const codegen::DeviceLimits lim = runtime::emu_limits();
    const std::vector<codegen::Opt> opts = codegen::beam_or_heuristic(ks[0].name, ks[0].ast, lim);
    const codegen::LoweredKernel low = codegen::lower_kernel_opt(ks[0].name, ks[0].ast, lim, &opts);
    return {low.grid, low.block};
}

// `make()`'s tensor realized with TEMPURA_BEAM=width, BEAM's cache in a folder of its own (removed
// after), and the BEAM counters before and after; the caches are cleared before and after.
template <class F>
std::tuple<Tensor, codegen::BeamStats, codegen::BeamStats> with_beam(const char* width,
                                                                     const F& make) {
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("tempura_beam_cuda_" + std::to_string(getpid())))
            .string();
    setenv("TEMPURA_CACHE_DIR", dir.c_str(), 1);
    setenv("TEMPURA_BEAM", width, 1);
    clear_caches();
    const codegen::BeamStats before = codegen::beam_stats();
    Tensor t = make();
    t.realize();
    const codegen::BeamStats after = codegen::beam_stats();
    unsetenv("TEMPURA_BEAM");
    unsetenv("TEMPURA_CACHE_DIR");
    std::filesystem::remove_all(dir);
    clear_caches();
    return {t, before, after};
}

// Every tensor-core variant (BEAM's starting points: tiles, warps, staging, pipelines, and on
// sm_90 warpgroups) of an m x k x n float16 matmul's kernel, compiled for CUDA:0 and launched on
// its buffers: small whole numbers, so every sum is exact and the product is the CPU's bit for
// bit.
void check_tensor_core_variants(int64_t m, int64_t k, int64_t n) {
    const EnvVar wgmma("TEMPURA_WGMMA", "1"); // the warpgroup variants too, on sm_90
    const Tensor a =
        Tensor::from_vector(ints(static_cast<size_t>(m * k), 11, 3), {m, k}, DType::Float16);
    const Tensor b =
        Tensor::from_vector(ints(static_cast<size_t>(k * n), 12, 3), {k, n}, DType::Float16);
    const std::vector<float> want = a.matmul(b).to_vector<float>();
    const std::vector<ScheduledKernel> ks = schedule_graph(a.matmul(b).uop());
    REQUIRE(ks.size() == 1);
    const codegen::DeviceLimits lim = runtime::device_limits(runtime::device_index("CUDA"));
    const auto variants = codegen::tensor_core_variants(codegen::prepare_for_opts(ks[0].ast), lim);
    CHECK(variants.size() > 40);
    const Tensor ad = a.to("CUDA"), bd = b.to("CUDA");
    for (const std::vector<codegen::Opt>& v : variants) {
        INFO(m << " x " << k << " x " << n << " " << codegen::to_string(v));
        std::vector<codegen::Opt> opts = v;
        const codegen::LoweredKernel low =
            codegen::lower_kernel_opt(ks[0].name, ks[0].ast, lim, &opts);
        const auto kern = runtime::compile_cuda_kernel(
            ks[0].name, low.program, low.block[0] * low.block[1] * low.block[2], 0);
        // NaN where nothing is written.
        Tensor out = Tensor::from_vector(std::vector<float>(static_cast<size_t>(m * n), NAN),
                                         {m, n}, DType::Float16)
                         .to("CUDA");
        const auto bufs = matmul_buffers(ks[0], out, a, b, ad, bd);
        runtime::cuda_launch(*kern, bufs.data(), nullptr, low.grid, low.block);
        CHECK(out.to_vector<float>() == want);
    }
}

// Every SMEM variant (BEAM's starting points for a float32 matmul: register tiles, blocks of
// threads, k-steps) of an m x k x n float32 matmul's kernel, compiled for CUDA:0 and launched on
// its buffers: small whole numbers, so every sum is exact and the product is the CPU's.
void check_smem_variants(int64_t m, int64_t k, int64_t n) {
    const Tensor a = Tensor::from_vector(ints(static_cast<size_t>(m * k), 13, 3), {m, k});
    const Tensor b = Tensor::from_vector(ints(static_cast<size_t>(k * n), 14, 3), {k, n});
    const std::vector<float> want = a.matmul(b).to_vector<float>();
    const std::vector<ScheduledKernel> ks = schedule_graph(a.matmul(b).uop());
    REQUIRE(ks.size() == 1);
    const codegen::DeviceLimits lim = runtime::device_limits(runtime::device_index("CUDA"));
    const auto variants = codegen::smem_matmul_variants(codegen::prepare_for_opts(ks[0].ast), lim);
    CHECK(variants.size() == 96);
    const Tensor ad = a.to("CUDA"), bd = b.to("CUDA");
    for (const std::vector<codegen::Opt>& v : variants) {
        INFO(m << " x " << k << " x " << n << " " << codegen::to_string(v));
        std::vector<codegen::Opt> opts = v;
        const codegen::LoweredKernel low =
            codegen::lower_kernel_opt(ks[0].name, ks[0].ast, lim, &opts);
        const auto kern = runtime::compile_cuda_kernel(
            ks[0].name, low.program, low.block[0] * low.block[1] * low.block[2], 0);
        Tensor out =
            Tensor::from_vector(std::vector<float>(static_cast<size_t>(m * n), NAN), {m, n})
                .to("CUDA");
        const auto bufs = matmul_buffers(ks[0], out, a, b, ad, bd);
        runtime::cuda_launch(*kern, bufs.data(), nullptr, low.grid, low.block);
        CHECK(out.to_vector<float>() == want);
    }
}

} // namespace

TEST_CASE("cuda mock: the device, its limits and its name") {
    Mock m;
    if (!mock_or_skip(m)) return;
    CHECK(devices() == std::vector<std::string>{"CPU", "EMU", "CUDA:0"});
    {
        const DefaultDevice d("CUDA");
        CHECK(default_device() == "CUDA:0");
        CHECK(Tensor::ones({2}).device() == "CUDA:0");
    }
    CHECK(Tensor::ones({2}).to("CUDA:0").device() == "CUDA:0");
    CHECK(error_of([] { set_default_device("CUDA:1"); }) ==
          "[device] unknown device 'CUDA:1' (devices: CPU, EMU, CUDA:0)");
    const codegen::DeviceLimits lim = runtime::device_limits(runtime::device_index("CUDA"));
    CHECK(lim.name == "CUDA:0");
    CHECK(lim.gpu);
    CHECK(lim.sm == 90);
    CHECK(lim.max_threads_per_block == 1024);
    CHECK(lim.max_block == std::array<int64_t, 3>{1024, 1024, 64});
    CHECK(lim.max_grid == std::array<int64_t, 3>{2147483647, 65535, 65535});
    CHECK(lim.shared_bytes == 227 * 1024); // with opt-in: the device's attribute 97
    CHECK(lim.warp_size == 32);
    CHECK(runtime::cuda_device_tag(0) == "Tempura mock GPU sm_90");
}

TEST_CASE("cuda mock: programs agree with the CPU, and the PTX is the device's") {
    Mock m;
    if (!mock_or_skip(m)) return;
#ifndef TEMPURA_PTXAS
    MESSAGE("SKIPPED: ptxas checks of the loaded PTX (no CUDA toolkit found by CMake)");
#endif
    const size_t modules_before = m.module_count();
    check_programs("CUDA");
    // Every module the driver got is sm_90 PTX that ptxas accepts, and nothing was refused.
    for (size_t i = modules_before; i < m.module_count(); ++i) {
        const std::string ptx = m.module_ptx(i);
        CHECK(ptx.find(".target sm_90") != std::string::npos);
        CHECK(ptxas(ptx, "sm_90") == "");
    }
    const TempuraMockCounters c = m.counters();
    INFO(m.last_refusal());
    CHECK(c.bad_calls == 0);
    CHECK(mock_run_error() == "");
}

TEST_CASE("cuda mock: copies only where the host reads, launches as EMU's, memory freed") {
    Mock m;
    if (!mock_or_skip(m)) return;
    clear_caches();
    const size_t n = 3000;
    const std::vector<float> av = ints(n, 11, 8), bv = ints(n, 12, 8), cv = ints(n, 13, 8);
    {
        const DefaultDevice d("CUDA");
        TempuraMockCounters before = m.counters();
        const Tensor a = Tensor::from_vector(av), b = Tensor::from_vector(bv),
                     c = Tensor::from_vector(cv);
        TempuraMockCounters after = m.counters();
        // One copy in per tensor, nothing zeroed first (the copy fills it).
        CHECK(after.htod - before.htod == 3);
        CHECK(after.htod_bytes - before.htod_bytes == 3 * n * sizeof(float));
        CHECK(after.memsets == before.memsets);
        CHECK(after.launches == before.launches);

        before = m.counters();
        Tensor r = a * b + c;
        r.realize();
        after = m.counters();
        // The kernel is queued: no copy, no wait.
        CHECK(after.launches - before.launches == 1);
        CHECK(after.htod == before.htod);
        CHECK(after.dtoh == before.dtoh);
        CHECK(after.syncs == before.syncs);
        const TempuraMockLaunch launch = m.last_launch();
        const auto [grid, block] = emu_dims(a * b + c);
        CHECK(std::string(launch.kernel) == r.kernels().at(0).name);
        for (size_t i = 0; i < 3; ++i) {
            CHECK(launch.grid[i] == grid[i]);
            CHECK(launch.block[i] == block[i]);
        }
        CHECK(launch.shared_bytes == 0); // shared arrays are static in the PTX

        before = m.counters();
        std::vector<float> want(n);
        for (size_t i = 0; i < n; ++i) want[i] = av[i] * bv[i] + cv[i];
        CHECK(r.to_vector<float>() == want);
        after = m.counters();
        CHECK(after.dtoh - before.dtoh == 1);
        CHECK(after.dtoh_bytes - before.dtoh_bytes == n * sizeof(float));
        CHECK(after.syncs - before.syncs == 1); // waits for the kernel, then copies

        // A grouped reduction launches as EMU lowers it too.
        const Tensor x = Tensor::from_vector(ints(4 * 4096, 14, 6), {4, 4096});
        Tensor s = x.sum(1);
        s.realize();
        const TempuraMockLaunch sl = m.last_launch();
        const auto [sgrid, sblock] = emu_dims(x.sum(1));
        for (size_t i = 0; i < 3; ++i) {
            CHECK(sl.grid[i] == sgrid[i]);
            CHECK(sl.block[i] == sblock[i]);
        }
        CHECK(sl.block[0] * sl.block[1] * sl.block[2] > 1);

        // Through the host and back: one copy out, one copy in.
        before = m.counters();
        const Tensor moved = r.to("CPU").to("CUDA");
        after = m.counters();
        CHECK(after.dtoh - before.dtoh == 1);
        CHECK(after.htod - before.htod == 1);
        CHECK(moved.to_vector<float>() == want);
        // Between two buffers of the device: a device-to-device copy, nothing through the host.
        const auto src = r.buffer();
        const auto dst = runtime::make_buffer(src->dtype(), src->numel(), false, src->device());
        before = m.counters();
        dst->copy_from(*src);
        after = m.counters();
        CHECK(after.dtod - before.dtod == 1);
        CHECK(after.htod == before.htod);
        CHECK(after.dtoh == before.dtoh);
        std::vector<float> back(n);
        dst->copy_to_host(back.data(), n * sizeof(float));
        CHECK(back == want);
    }
    // Every tensor is gone: once the cached blocks are freed, so is every allocation.
    clear_caches();
    const TempuraMockCounters c = m.counters();
    CHECK(c.live_allocs == 0);
    CHECK(c.live_bytes == 0);
    CHECK(c.allocs == c.frees);
    CHECK(c.allocs > 0);
    INFO(m.last_refusal());
    CHECK(c.bad_calls == 0);
}

TEST_CASE("cuda mock: the driver's errors name the kernel, and a failed kernel shows at the sync") {
    Mock m;
    if (!mock_or_skip(m)) return;
    cuda::Context& ctx = cuda::driver().context(0);
    // PTX for another arch: the JIT's error log is in the message.
    const std::string sm80 = ".version 8.0\n.target sm_80\n.address_size 64\n"
                             ".visible .entry k(\n    .param .u64 k_param_0\n)\n{\n    ret;\n}\n";
    CHECK(error_of([&] { ctx.load_ptx(sm80, "k"); }) ==
          "[cuda] kernel k: cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (a PTX JIT "
          "compilation failed): mock ptxas fatal   : '.target sm_80' is not this device's sm_90");
    std::string sm90 = sm80;
    sm90.replace(sm90.find("sm_80"), 5, "sm_90");
    cuda::Module mod = ctx.load_ptx(sm90, "k");
    CHECK(mod.info_log() ==
          "mock ptxas info    : " + std::to_string(sm90.size()) + " bytes of PTX for sm_90");
    cuda::CUdeviceptr out = ctx.alloc(64);
    void* args[] = {&out};
    // A launch the driver refuses names the kernel and the driver's error.
    CHECK(error_of([&] {
              ctx.launch(mod, {1, 1, 1}, {1, 1, 128}, 0, args);
          }) ==
          "[cuda] kernel k: cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE (invalid argument)");
    // A kernel that fails while it runs (here: one Tempura did not compile, which the mock
    // cannot run) is reported by the next call that waits for it.
    ctx.launch(mod, {1, 1, 1}, {32, 1, 1}, 0, args);
    std::vector<char> host(64);
    CHECK(error_of([&] { ctx.copy_to_host(host.data(), out, 64); }) ==
          "[cuda] CUDA:0: cuStreamSynchronize failed: CUDA_ERROR_LAUNCH_FAILED (unspecified "
          "launch failure) (after kernel k, the last of 1 queued since the stream last waited)");
    CHECK(mock_run_error() == "[mock] no EMU kernel for the function launched");
    clear_mock_run_error();
    CHECK_NOTHROW(ctx.copy_to_host(host.data(), out, 64)); // reported once
    ctx.free(out);
    // Tempura's own launch checks the device's limits before the driver sees it.
    const Tensor x = Tensor::from_vector(std::vector<float>{1, 2}).to("CUDA");
    Tensor y = x + 1.0f;
    y.realize();
    const std::vector<ScheduledKernel> ks = schedule_graph((x + 1.0f).uop());
    REQUIRE(ks.size() == 1);
    const codegen::DeviceLimits lim = runtime::device_limits(runtime::device_index("CUDA"));
    const codegen::LoweredKernel low = codegen::lower_kernel_opt(ks[0].name, ks[0].ast, lim);
    const auto k = runtime::compile_cuda_kernel(ks[0].name, low.program,
                                                low.block[0] * low.block[1] * low.block[2], 0);
    void* bufs[2] = {reinterpret_cast<void*>(y.buffer()->address()),
                     reinterpret_cast<void*>(x.buffer()->address())};
    CHECK(error_of([&] {
              runtime::cuda_launch(*k, bufs, nullptr, {1, 1, 1}, {2048, 1, 1});
          }) == "[cuda] kernel " + ks[0].name +
                    ": block (2048, 1, 1) is outside the device's limits (1024, 1024, 64)");
    // The PTX declares its buffers 16-byte aligned: an address that is not is refused.
    void* shifted[2] = {bufs[0], static_cast<char*>(bufs[1]) + 4};
    CHECK(error_of([&] { runtime::cuda_launch(*k, shifted, nullptr, low.grid, low.block); }) ==
          "[cuda] kernel " + ks[0].name +
              ": buffer 1 is not 16-byte aligned (the kernel's loads assume it)");
    CHECK(error_of([&] { k->run(bufs, nullptr); }) ==
          "[cuda] a CUDA kernel runs on its device through cuda_launch, not on the host");
    CHECK(m.counters().bad_calls == 0);
}

TEST_CASE("cuda mock: BEAM times candidates on the CUDA device, never on EMU") {
    Mock m;
    if (!mock_or_skip(m)) return;
    const size_t launches = m.counters().launches;
    const Tensor x = Tensor::from_vector(ints(64 * 256, 15, 5), {64, 256});
    const auto [s, before, after] = with_beam("2", [&] { return x.to("CUDA").sum(1); });
    CHECK(s.to_vector<float>() == x.sum(1).to_vector<float>());
    CHECK(after.searches == before.searches + 1);
    CHECK(after.candidates_timed > before.candidates_timed);
    // Every timed candidate ran on the device: a warm-up and its samples, as launches.
    CHECK(m.counters().launches - launches > after.candidates_timed - before.candidates_timed);
    CHECK(m.counters().bad_calls == 0);
    const std::vector<ScheduledKernel> ks = schedule_graph(x.sum(1).uop());
    REQUIRE(ks.size() == 1);
    CHECK(
        error_of([&] { codegen::beam_search(ks[0].name, ks[0].ast, runtime::emu_limits(), 2); }) ==
        "[beam] EMU: BEAM times kernels on the CPU or a CUDA GPU, and EMU's timings would say "
        "nothing about a GPU");
}

TEST_CASE("cuda mock: BEAM starts a float16 matmul from its tensor-core variants") {
    Mock m;
    if (!mock_or_skip(m)) return;
    const Tensor a = Tensor::from_vector(ints(64 * 32, 7, 3), {64, 32}, DType::Float16);
    const Tensor b = Tensor::from_vector(ints(32 * 64, 5, 2), {32, 64}, DType::Float16);
    const std::vector<ScheduledKernel> ks = schedule_graph(a.matmul(b).uop());
    REQUIRE(ks.size() == 1);
    const codegen::DeviceLimits lim = runtime::device_limits(runtime::device_index("CUDA"));
    // With TEMPURA_WGMMA=0, no warpgroup variants.
    size_t without = 0;
    std::string key_without;
    {
        const EnvVar off("TEMPURA_WGMMA", "0");
        without = codegen::tensor_core_variants(codegen::prepare_for_opts(ks[0].ast), lim).size();
        key_without = codegen::beam_cache_key(ks[0].ast, lim, 1);
    }
    // A search with them is cached apart from one without.
    CHECK(codegen::beam_cache_key(ks[0].ast, lim, 1) != key_without);
    const std::vector<std::vector<codegen::Opt>> variants =
        codegen::tensor_core_variants(codegen::prepare_for_opts(ks[0].ast), lim);
    CHECK(without == 103);
    // 6 warp tiles, 2 of them also with 2 x 2 warps (the others leave one block row), and every
    // staged one (4 pipelines x 3 k-steps x 4 blocks of warps x 2 warp tiles, but for the one
    // over the device's 227 KiB of shared memory: 4 x 4 warps of 64 x 64 in 4 tiles of k-steps
    // of 64, 276 KiB).
    // Then, the device being an sm_90 one, the warpgroup (wgmma) variants: 3 pipelines x 4
    // blocks of warpgroups x 2 widths, but for the three over 227 KiB (1 x 2 of 64 x 256 in 4
    // tiles, 2 x 2 of 64 x 256 in 3 or 4) and 2 x 2 of 64 x 256 in 2 (128 float32 accumulator
    // registers in each of 512 threads: more than the block's registers allow); and with an
    // mma kept in flight, the 13 of them in pipelines of 3 or 4.
    size_t staged = 0, warpgroups = 0;
    for (const auto& v : variants) {
        staged += v[0].axis != 0 && v[0].axis < 10000 ? 1 : 0;
        warpgroups += v[0].axis >= 10000 ? 1 : 0;
    }
    CHECK(variants.size() - staged - warpgroups == 8);
    CHECK(variants[1] == std::vector<codegen::Opt>{{codegen::OptOp::Tc, 0, 34},
                                                   {codegen::OptOp::Local, 1, 2},
                                                   {codegen::OptOp::Local, 0, 2}});
    CHECK(staged == 95);
    CHECK(warpgroups == 33);
    CHECK(variants.front() == std::vector<codegen::Opt>{{codegen::OptOp::Tc, 0, 34}});
    CHECK(variants[103 - 1] == std::vector<codegen::Opt>{{codegen::OptOp::Tc, 4444, 68}});
    CHECK(variants.back() == std::vector<codegen::Opt>{{codegen::OptOp::Tc, 24422, 128}});
    // A float32 matmul takes none.
    const std::vector<ScheduledKernel> k32 =
        schedule_graph(Tensor::from_vector(ints(64 * 32, 7, 3), {64, 32})
                           .matmul(Tensor::from_vector(ints(32 * 64, 5, 2), {32, 64}))
                           .uop());
    CHECK(codegen::tensor_core_variants(codegen::prepare_for_opts(k32[0].ast), lim).empty());

    if (kTestUnderAsan) {
        // The search over 274 candidates on the mock's emulator takes over 5 minutes under
        // AddressSanitizer; the float32 case below runs the same search there.
        MESSAGE("SKIPPED under AddressSanitizer: BEAM's search over the tensor-core variants");
        return;
    }
    const auto [r, before, after] =
        with_beam("1", [&] { return a.to("CUDA").matmul(b.to("CUDA")); });
    CHECK(r.to_vector<float>() == a.matmul(b).to_vector<float>());
    // Every variant was timed (the kernel with no opts and the heuristics' choice too).
    CHECK(after.candidates_timed - before.candidates_timed >= variants.size());
    CHECK(m.counters().bad_calls == 0);
}

TEST_CASE("cuda mock: a kernel over 48 KiB of shared memory opts in and takes it at launch") {
    Mock m;
    if (!mock_or_skip(m)) return;
    // Staged tensor cores with a pipeline of 3 tiles of 128 x 32 (A) and 32 x 128 (B, rows of
    // 128 + 8): 3 x (128 x 40 + 32 x 136) x 2 bytes.
    const Tensor a = Tensor::from_vector(ints(128 * 256, 3, 4), {128, 256}, DType::Float16);
    const Tensor b = Tensor::from_vector(ints(256 * 128, 4, 4), {256, 128}, DType::Float16);
    const std::vector<ScheduledKernel> ks = schedule_graph(a.matmul(b).uop());
    REQUIRE(ks.size() == 1);
    const codegen::DeviceLimits lim = runtime::device_limits(runtime::device_index("CUDA"));
    std::vector<codegen::Opt> opts{{codegen::OptOp::Tc, 3222, 72}};
    const codegen::LoweredKernel low = codegen::lower_kernel_opt(ks[0].name, ks[0].ast, lim, &opts);
    CHECK(runtime::dynamic_shared_bytes(low.program) == 56832);
    runtime::clear_cuda_kernel_cache(); // loaded here, not found loaded by an earlier case
    const size_t sets = m.counters().attributes_set;
    const auto k = runtime::compile_cuda_kernel(ks[0].name, low.program,
                                                low.block[0] * low.block[1] * low.block[2], 0);
    CHECK(k->source().find(".extern .shared .align 16 .b8 dsmem[];") != std::string::npos);
    CHECK(ptxas(k->source(), "sm_90") == "");
    const Tensor ad = a.to("CUDA"), bd = b.to("CUDA");
    Tensor out = Tensor::zeros({128, 128}, DType::Float16).to("CUDA");
    out.realize();
    const auto bufs = matmul_buffers(ks[0], out, a, b, ad, bd);
    // Opted in once, when the kernel was loaded; the launches (two here) ask for it.
    CHECK(m.counters().attributes_set == sets + 1);
    for (int i = 0; i < 2; ++i) {
        runtime::cuda_launch(*k, bufs.data(), nullptr, low.grid, low.block);
        CHECK(m.last_launch().shared_bytes == 56832);
        CHECK(out.to_vector<float>() == a.matmul(b).to_vector<float>());
    }
    CHECK(m.counters().attributes_set == sets + 1);
    // Static shared memory (a GROUP's partials, under 48 KiB) takes none at launch.
    Tensor s = Tensor::from_vector(ints(4 * 4096, 5, 3), {4, 4096}).to("CUDA").sum(1);
    s.realize();
    CHECK(m.last_launch().shared_bytes == 0);
    CHECK(m.counters().bad_calls == 0);
}

TEST_CASE("cuda mock: an sm_90 GPU realizes a float16 matmul on warpgroup mma where it tiles") {
    Mock m;
    if (!mock_or_skip(m)) return;
    clear_caches();
    // The smallest output 128 blocks of 128 x 256 tile: the heuristics' TC(24421, 256) on the
    // mock's H100 (227 KiB), through realize, the opt-in of 192 KiB, the launch and EMU.
    const Tensor a = Tensor::from_vector(ints(2048 * 64, 21, 3), {2048, 64}, DType::Float16);
    const Tensor b = Tensor::from_vector(ints(64 * 2048, 22, 3), {64, 2048}, DType::Float16);
    Tensor r = a.to("CUDA").matmul(b.to("CUDA"));
    r.realize();
    REQUIRE(r.kernels().size() == 1);
    check_ptx(r, "sm_90a");
    CHECK(count_of(r.kernels()[0].source, "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16") ==
          4);
    const TempuraMockLaunch l = m.last_launch();
    CHECK(std::array<unsigned, 3>{l.grid[0], l.grid[1], l.grid[2]} ==
          std::array<unsigned, 3>{8, 16, 1});
    CHECK(l.block[0] * l.block[1] * l.block[2] == 256);
    CHECK(l.shared_bytes == 4 * (128 + 256) * 64 * 2);
    CHECK(r.to_vector<float>() == a.matmul(b).to_vector<float>());
    CHECK(m.counters().bad_calls == 0);
    clear_caches();
}

TEST_CASE("cuda mock: every tensor-core variant computes the product") {
    Mock m;
    if (!mock_or_skip(m)) return;
    check_tensor_core_variants(64, 48, 40); // K and N padded
    CHECK(m.counters().bad_calls == 0);
}

TEST_CASE("cuda realize: every tensor-core variant agrees with the CPU on a real GPU") {
    if (!real_gpu_or_skip()) return;
    const int cc = cuda::driver().compute_capability(0);
    if (cc < 80 || cc > 90) {
        MESSAGE("SKIPPED: CUDA:0 is sm_" << cc << ", outside sm_80 .. sm_90");
        return;
    }
    check_tensor_core_variants(256, 320, 192);
    check_tensor_core_variants(200, 136, 100); // M, N and K padded
}

TEST_CASE("cuda mock: every float32 SMEM variant computes the product") {
    Mock m;
    if (!mock_or_skip(m)) return;
    check_smem_variants(70, 40, 50); // M, N and K padded
    CHECK(m.counters().bad_calls == 0);
}

TEST_CASE("cuda mock: BEAM starts a float32 matmul from its SMEM variants") {
    Mock m;
    if (!mock_or_skip(m)) return;
    const Tensor a = Tensor::from_vector(ints(64 * 32, 7, 3), {64, 32});
    const Tensor b = Tensor::from_vector(ints(32 * 64, 5, 2), {32, 64});
    const std::vector<ScheduledKernel> ks = schedule_graph(a.matmul(b).uop());
    REQUIRE(ks.size() == 1);
    const codegen::DeviceLimits lim = runtime::device_limits(runtime::device_index("CUDA"));
    const auto variants = codegen::smem_matmul_variants(codegen::prepare_for_opts(ks[0].ast), lim);
    // 2 ways of copying x 4 register tiles x 4 blocks of threads x 3 k-steps, all within the
    // device's limits.
    CHECK(variants.size() == 96);
    CHECK(variants.front() == std::vector<codegen::Opt>{{codegen::OptOp::Smem, 68, 81616}});
    CHECK(variants.back() == std::vector<codegen::Opt>{{codegen::OptOp::Smem, 136, 3320808}});
    const auto [r, before, after] =
        with_beam("1", [&] { return a.to("CUDA").matmul(b.to("CUDA")); });
    CHECK(r.to_vector<float>() == a.matmul(b).to_vector<float>());
    // Every variant was timed (the kernel with no opts and the heuristics' choice too).
    CHECK(after.candidates_timed - before.candidates_timed >= variants.size());
    CHECK(m.counters().bad_calls == 0);
}

TEST_CASE("cuda realize: every float32 SMEM variant agrees with the CPU on a real GPU") {
    if (!real_gpu_or_skip()) return;
    const int cc = cuda::driver().compute_capability(0);
    if (cc < 80 || cc > 90) {
        MESSAGE("SKIPPED: CUDA:0 is sm_" << cc << ", outside sm_80 .. sm_90");
        return;
    }
    check_smem_variants(256, 320, 192);
    check_smem_variants(200, 136, 100); // M, N and K padded
}

TEST_CASE("cuda realize: programs agree with the CPU on a real GPU") {
    if (!real_gpu_or_skip()) return;
    const int cc = cuda::driver().compute_capability(0);
    if (cc < 80 || cc > 90) {
        CHECK(error_of([] { set_default_device("CUDA"); }).find("is sm_") != std::string::npos);
        MESSAGE("SKIPPED: CUDA:0 is sm_" << cc << ", outside sm_80 .. sm_90");
        return;
    }
    CHECK(devices().at(2) == "CUDA:0");
    check_programs("CUDA");
}

TEST_CASE("cuda mock: TEMPURA_DEVICE=CUDA makes CUDA:0 the default device") {
    Mock m;
    if (!mock_or_skip(m)) return;
    if (!env_is_or_skip("TEMPURA_DEVICE", "CUDA", "gpu_cuda_mock_default")) return;
    CHECK(default_device() == "CUDA:0");
    const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4});
    CHECK(x.device() == "CUDA:0");
    Tensor s = (x * x).sum();
    s.realize();
    CHECK(s.kernels().at(0).backend == "CUDA:0");
    CHECK(s.item<float>() == 30.0f);
}

TEST_CASE("cuda mock: a GPU outside sm_80 .. sm_90 is refused by name") {
    Mock m;
    if (!mock_or_skip(m)) return;
    if (!env_is_or_skip("TEMPURA_MOCK_SM", "75", "gpu_cuda_mock_sm75")) return;
    CHECK(cuda::cuda_usable()); // the driver works; Tempura's PTX path does not cover the GPU
    CHECK(devices() == std::vector<std::string>{"CPU", "EMU"});
    const std::string why = "CUDA:0 (Tempura mock GPU) is sm_75: Tempura's PTX path supports "
                            "sm_80 .. sm_90 only";
    CHECK(error_of([] { set_default_device("CUDA"); }) == "[device] CUDA: " + why);
    const int to_line = __LINE__ + 1;
    const std::string to_err = error_of([] { Tensor::ones({2}).to("CUDA:0"); });
    CHECK(to_err == at_line(to_line, "[device] CUDA:0: " + why));
    CHECK(error_of([] { runtime::cuda_limits(0); }) == "[cuda] " + why);
}
