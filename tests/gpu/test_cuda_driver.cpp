// The CUDA driver loaded at run time: its errors on machines without CUDA (these run everywhere)
// and, where a GPU is usable, memory, PTX modules and launches ("cuda device:" cases).
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "../support.hpp"
#include "real_gpu.hpp"
#include "tempura/backend/cuda.hpp"

namespace cuda = tempura::cuda;

namespace {

const char* const kStub = "/usr/local/cuda/lib64/stubs/libcuda.so";

// Whether the dynamic loader finds a library of this name here (it is then left loaded).
bool loadable(const char* name) {
    void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return false;
    dlclose(h);
    return true;
}

// Whether a library with this soname is loaded in the process now.
bool resident(const char* soname) {
    void* h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
    if (h == nullptr) return false;
    dlclose(h);
    return true;
}

} // namespace

TEST_CASE("cuda driver: a library that is not there") {
    CHECK(error_of([] { cuda::Driver::load("/nonexistent/libcuda.so.1"); }) ==
          "[cuda] no CUDA driver: /nonexistent/libcuda.so.1 not found");
    CHECK(error_of([] { cuda::Driver::load("libtempura_no_such_driver.so.1"); }) ==
          "[cuda] no CUDA driver: libtempura_no_such_driver.so.1 not found");
}

TEST_CASE("cuda driver: libcuda.so.1 absent") {
    if (loadable("libcuda.so.1")) {
        MESSAGE("SKIPPED: libcuda.so.1 is installed here");
        return;
    }
    CHECK(error_of([] { cuda::Driver::load("libcuda.so.1"); }) ==
          "[cuda] no CUDA driver: libcuda.so.1 not found");
}

TEST_CASE("cuda driver: TEMPURA_LIBCUDA names the library driver() loads") {
    // Decide cuda_usable() first, with the variable as the process got it.
    (void)cuda::cuda_usable();
    const char* old = std::getenv("TEMPURA_LIBCUDA");
    const std::string saved = old ? old : "";
    setenv("TEMPURA_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    const std::string error = error_of([] { cuda::driver(); });
    if (old)
        setenv("TEMPURA_LIBCUDA", saved.c_str(), 1);
    else
        unsetenv("TEMPURA_LIBCUDA");
    if (error == "<no error>") {
        MESSAGE("SKIPPED: the process-wide driver was loaded already");
        return;
    }
    CHECK(error == "[cuda] no CUDA driver: /nonexistent/libcuda.so.1 not found");
}

TEST_CASE("cuda driver: a file that is not a library") {
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("tempura_not_a_library_" + std::to_string(getpid()) + ".so"))
                                 .string();
    {
        // Longer than an ELF header, so that glibc reads the header and rejects it.
        std::ofstream out(path);
        for (int i = 0; i < 64; ++i) out << "not an ELF file\n";
    }
    const std::string error = error_of([&] { cuda::Driver::load(path); });
    std::filesystem::remove(path);
    INFO(error);
    const std::string prefix = "[cuda] no CUDA driver: " + path + " cannot be loaded (";
    CHECK(error == prefix + path + ": invalid ELF header)"); // glibc's dlerror in parentheses
}

TEST_CASE("cuda driver: a library without the driver's entry points") {
    CHECK(error_of([] { cuda::Driver::load("libm.so.6"); }) ==
          "[cuda] the CUDA driver libm.so.6 lacks cuInit");
}

TEST_CASE("cuda driver: the toolkit's stub library") {
    if (!std::filesystem::exists(kStub)) {
        MESSAGE("SKIPPED: no CUDA toolkit stub at " << kStub);
        return;
    }
    const bool was_resident = resident("libcuda.so.1");
    // The stub answers every call, cuGetErrorName and cuGetErrorString included, with
    // CUDA_ERROR_STUB_LIBRARY: the name and description come from Tempura's own table.
    CHECK(error_of([] { cuda::Driver::load(kStub); }) ==
          std::string("[cuda] cuInit failed: CUDA_ERROR_STUB_LIBRARY (CUDA driver is a stub "
                      "library): ") +
              kStub + " is the CUDA toolkit's stub library, not a real driver");
    // A library that failed to load is closed again: the stub (soname libcuda.so.1) must not
    // stand in for the real driver when driver() opens libcuda.so.1 later.
    if (!was_resident) CHECK_FALSE(resident("libcuda.so.1"));
}

TEST_CASE("cuda driver: usability is decided without throwing") {
    bool usable = true;
    std::vector<std::string> names;
    CHECK_NOTHROW(usable = cuda::cuda_usable());
    CHECK_NOTHROW(names = cuda::cuda_device_names());
    CHECK(usable == !names.empty());
    CHECK(usable == cuda::cuda_unusable_reason().empty());
    for (size_t i = 0; i < names.size(); ++i) CHECK(names[i] == "CUDA:" + std::to_string(i));
    if (!loadable("libcuda.so.1") && std::getenv("TEMPURA_LIBCUDA") == nullptr) {
        CHECK_FALSE(usable);
        CHECK(names.empty());
        CHECK(cuda::cuda_unusable_reason() == "[cuda] no CUDA driver: libcuda.so.1 not found");
    }
    if (!usable) MESSAGE("CUDA not usable: " << cuda::cuda_unusable_reason());
}

// --- on a GPU --------------------------------------------------------------------------------

namespace {

// Writes threadIdx.x to out[threadIdx.x]; sm_80 PTX runs on sm_80 and every later GPU.
const char* const kTidPtx = R"(
.version 8.0
.target sm_80
.address_size 64

.visible .entry write_tid(
    .param .u64 write_tid_param_0
)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [write_tid_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r1;
    ret;
}
)";

// Well-formed PTX that ptxas rejects: %r5 is used but never declared.
const char* const kBadPtx = R"(
.version 8.0
.target sm_80
.address_size 64

.visible .entry bad_kernel()
{
    .reg .b32 %r<2>;
    mov.u32 %r5, 1;
    ret;
}
)";

bool gpu_or_skip() { return real_gpu_or_skip(); }

} // namespace

TEST_CASE("cuda device: properties") {
    if (!gpu_or_skip()) return;
    cuda::Driver& d = cuda::driver();
    CHECK(d.version() >= 12000);
    REQUIRE(d.device_count() >= 1);
    const std::string name = d.device_name(0);
    CHECK_FALSE(name.empty());
    const int cc = d.compute_capability(0);
    CHECK(cc >= 30);
    const cuda::Limits l = d.limits(0);
    CHECK(l.max_threads_per_block >= 512);
    CHECK(l.max_block[0] >= 512);
    CHECK(l.max_grid[0] >= 65535);
    CHECK(l.shared_per_block >= 48 * 1024);
    CHECK(l.shared_optin >= l.shared_per_block);
    CHECK(l.warp_size == 32);
    CHECK(l.sm_count >= 1);
    MESSAGE("CUDA:0 is " << name << ", sm_" << cc << ", " << l.sm_count << " SMs, driver "
                         << d.version());
    CHECK(error_of([&] { d.device_name(d.device_count()); }) ==
          "[cuda] no device CUDA:" + std::to_string(d.device_count()) + " (" +
              std::to_string(d.device_count()) + " found)");
    CHECK(&d.context(0) == &d.context(0));
}

TEST_CASE("cuda device: 1 MiB to the device and back") {
    if (!gpu_or_skip()) return;
    cuda::Context& ctx = cuda::driver().context(0);
    const size_t n = size_t{1} << 20;
    std::vector<uint8_t> host(n), back(n, 0xAA);
    for (size_t i = 0; i < n; ++i) host[i] = static_cast<uint8_t>((i * 131 + 7) ^ (i >> 8));
    const cuda::CUdeviceptr a = ctx.alloc(n), b = ctx.alloc(n);
    ctx.copy_to_device(a, host.data(), n);
    ctx.copy_device(b, a, n);
    ctx.copy_to_host(back.data(), b, n);
    CHECK(back == host);
    ctx.memset0(b, n / 2);
    ctx.copy_to_host(back.data(), b, n);
    bool zeros = true, rest = true;
    for (size_t i = 0; i < n / 2; ++i) zeros = zeros && back[i] == 0;
    for (size_t i = n / 2; i < n; ++i) rest = rest && back[i] == host[i];
    CHECK(zeros);
    CHECK(rest);
    ctx.free(a);
    ctx.free(b);
    CHECK(ctx.alloc(0) == 0);
    ctx.free(0);
}

TEST_CASE("cuda device: a hand-written PTX kernel writes threadIdx.x") {
    if (!gpu_or_skip()) return;
    cuda::Driver& d = cuda::driver();
    if (d.compute_capability(0) < 80) {
        MESSAGE("SKIPPED: CUDA:0 is older than sm_80");
        return;
    }
    cuda::Context& ctx = d.context(0);
    cuda::Module m = ctx.load_ptx(kTidPtx, "write_tid");
    REQUIRE(m);
    CHECK(m.function() != nullptr);
    CHECK(m.kernel_name() == "write_tid");
    const cuda::CUdeviceptr out = ctx.alloc(64 * sizeof(int32_t));
    ctx.memset0(out, 64 * sizeof(int32_t));
    cuda::CUdeviceptr arg = out;
    void* args[] = {&arg};
    ctx.launch(m, {1, 1, 1}, {64, 1, 1}, 0, args);
    std::vector<int32_t> got(64, -1);
    ctx.copy_to_host(got.data(), out, 64 * sizeof(int32_t));
    for (int i = 0; i < 64; ++i) CHECK(got[static_cast<size_t>(i)] == i);
    ctx.synchronize();
    ctx.free(out);

    CHECK(error_of([&] { ctx.get_function(m, "no_such_kernel"); })
              .rfind("[cuda] kernel no_such_kernel: cuModuleGetFunction failed: "
                     "CUDA_ERROR_NOT_FOUND (",
                     0) == 0);
    // A launch the driver refuses names the kernel: 2048 threads exceed every GPU's block.
    CHECK(error_of([&] {
              ctx.launch(m, {1, 1, 1}, {2048, 1, 1}, 0, args);
          }).rfind("[cuda] kernel write_tid: cuLaunchKernel failed: CUDA_ERROR_", 0) == 0);
    cuda::Module moved = std::move(m);
    CHECK_FALSE(m);
    CHECK(moved);
    moved.reset();
    CHECK_FALSE(moved);
}

TEST_CASE("cuda device: invalid PTX reports the JIT log") {
    if (!gpu_or_skip()) return;
    cuda::Context& ctx = cuda::driver().context(0);
    const std::string error = error_of([&] { ctx.load_ptx(kBadPtx, "bad_kernel"); });
    MESSAGE(error);
    const std::string prefix =
        "[cuda] kernel bad_kernel: cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (";
    CHECK(error.rfind(prefix, 0) == 0);
    // The JIT's error log follows the description: ptxas names the line and the register.
    const size_t log = error.find("): ");
    REQUIRE(log != std::string::npos);
    CHECK(error.find("ptxas", log) != std::string::npos);
    CHECK(error.find("%r5", log) != std::string::npos);
}
