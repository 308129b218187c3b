// The CUDA driver, dlopened at run time (include/tempura/backend/cuda.hpp).
#include "tempura/backend/cuda.hpp"

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/driver_api.hpp"
#include "tempura/error.hpp"
#include "tempura/support/env.hpp"

namespace tempura::cuda {

namespace {

struct KnownError {
    CUresult code;
    const char* name;
    const char* description;
};

// Names and descriptions of the codes a user is most likely to meet, for drivers that cannot
// describe them: the toolkit's stub library answers cuGetErrorName and cuGetErrorString with
// CUDA_ERROR_STUB_LIBRARY itself, and a failed cuInit leaves nothing else to ask.
constexpr KnownError kKnownErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER",
     "API call is not supported in the installed CUDA driver"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "PTX JIT compiler library not found"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {710, "CUDA_ERROR_ASSERT", "device-side assert triggered"},
    {715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered"},
    {716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
     "forward compatibility was attempted on non supported HW"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const KnownError* known_error(CUresult result) {
    for (const KnownError& e : kKnownErrors)
        if (e.code == result) return &e;
    return nullptr;
}

std::string describe_with(const Driver::Api& api, CUresult result) {
    const KnownError* known = known_error(result);
    const char* name = nullptr;
    const char* description = nullptr;
    if (api.cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr)
        name = known ? known->name : nullptr;
    if (api.cuGetErrorString(result, &description) != CUDA_SUCCESS || description == nullptr)
        description = known ? known->description : "no description";
    const std::string n = name ? name : "CUresult " + std::to_string(result);
    return n + " (" + description + ")";
}

// "[cuda] <where>: <call> failed: <NAME> (<description>)".
[[noreturn]] void fail_call(const Driver& driver, CUresult result, const char* call,
                            const std::string& where) {
    fail("cuda",
         (where.empty() ? "" : where + ": ") + call + " failed: " + driver.describe(result));
}

std::string device_label(int ordinal) { return "CUDA:" + std::to_string(ordinal); }

template <class F>
void resolve(void* handle, const std::string& path, F& slot, const char* symbol) {
    void* p = dlsym(handle, symbol);
    if (p == nullptr) fail("cuda", "the CUDA driver " + path + " lacks " + symbol);
    slot = reinterpret_cast<F>(p);
}

// The exact symbols: cuda.h #defines the unversioned names of these to their _v2 (and, with
// per-thread default streams, _ptds/_ptsz) variants; Tempura uses the legacy default stream.
void resolve_all(void* handle, const std::string& path, Driver::Api& api) {
    // cuInit first: a library that is not the driver at all is reported as lacking it.
    resolve(handle, path, api.cuInit, "cuInit");
    resolve(handle, path, api.cuDriverGetVersion, "cuDriverGetVersion");
    resolve(handle, path, api.cuDeviceGetCount, "cuDeviceGetCount");
    resolve(handle, path, api.cuDeviceGet, "cuDeviceGet");
    resolve(handle, path, api.cuDeviceGetName, "cuDeviceGetName");
    resolve(handle, path, api.cuDeviceGetAttribute, "cuDeviceGetAttribute");
    resolve(handle, path, api.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    resolve(handle, path, api.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    resolve(handle, path, api.cuCtxSetCurrent, "cuCtxSetCurrent");
    resolve(handle, path, api.cuCtxSynchronize, "cuCtxSynchronize");
    resolve(handle, path, api.cuMemAlloc, "cuMemAlloc_v2");
    resolve(handle, path, api.cuMemFree, "cuMemFree_v2");
    resolve(handle, path, api.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    resolve(handle, path, api.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    resolve(handle, path, api.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    resolve(handle, path, api.cuMemsetD8Async, "cuMemsetD8Async");
    resolve(handle, path, api.cuModuleLoadDataEx, "cuModuleLoadDataEx");
    resolve(handle, path, api.cuModuleUnload, "cuModuleUnload");
    resolve(handle, path, api.cuModuleGetFunction, "cuModuleGetFunction");
    resolve(handle, path, api.cuLaunchKernel, "cuLaunchKernel");
    resolve(handle, path, api.cuStreamCreate, "cuStreamCreate");
    resolve(handle, path, api.cuStreamSynchronize, "cuStreamSynchronize");
    resolve(handle, path, api.cuStreamDestroy, "cuStreamDestroy_v2");
    resolve(handle, path, api.cuGetErrorName, "cuGetErrorName");
    resolve(handle, path, api.cuGetErrorString, "cuGetErrorString");
    resolve(handle, path, api.cuFuncSetAttribute, "cuFuncSetAttribute");
}

// Closes a library that failed to load as the driver; a loaded driver is released instead.
struct LibraryCloser {
    void operator()(void* handle) const { dlclose(handle); }
};

// Dynamic shared memory a kernel gets without opting in (the same on every GPU since sm_20).
constexpr unsigned kSharedWithoutOptin = 48 * 1024;

// The text of a JIT log buffer, without the terminating NUL and trailing blank lines.
std::string log_text(const std::vector<char>& buffer) {
    std::string s(buffer.data(), strnlen(buffer.data(), buffer.size()));
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    return s;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------------

struct Driver::Contexts {
    std::mutex mu;
    std::vector<std::unique_ptr<Context>> by_ordinal;
};

std::unique_ptr<Driver> Driver::load(const std::string& path) {
    dlerror(); // clear a stale error
    // RTLD_NOW: a driver that cannot resolve its own dependencies fails here, not mid-launch.
    std::unique_ptr<void, LibraryCloser> handle(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL));
    if (!handle) {
        const char* e = dlerror();
        const std::string why = e ? e : "";
        // dlopen names the file it could not find first: the library itself, or a dependency of
        // a library that does exist (then it is not "not found").
        const std::string missing = path + ": cannot open shared object file: No such file";
        if (why.empty() || why.rfind(missing, 0) == 0)
            fail("cuda", "no CUDA driver: " + path + " not found");
        fail("cuda", "no CUDA driver: " + path + " cannot be loaded (" + why + ")");
    }
    auto api = std::make_unique<Api>();
    resolve_all(handle.get(), path, *api);

    if (const CUresult r = api->cuInit(0); r != CUDA_SUCCESS) {
        std::string message = "cuInit failed: " + describe_with(*api, r);
        if (r == CUDA_ERROR_STUB_LIBRARY)
            message += ": " + path + " is the CUDA toolkit's stub library, not a real driver";
        fail("cuda", message);
    }
    int version = 0, count = 0;
    if (const CUresult r = api->cuDriverGetVersion(&version); r != CUDA_SUCCESS)
        fail("cuda", "cuDriverGetVersion failed: " + describe_with(*api, r));
    if (const CUresult r = api->cuDeviceGetCount(&count); r != CUDA_SUCCESS)
        fail("cuda", "cuDeviceGetCount failed: " + describe_with(*api, r));

    std::unique_ptr<Driver> driver(new Driver(path, handle.release(), std::move(api)));
    driver->version_ = version;
    driver->device_count_ = count;
    driver->contexts_->by_ordinal.resize(static_cast<size_t>(count));
    return driver;
}

Driver::Driver(std::string path, void* handle, std::unique_ptr<Api> api)
    : path_(std::move(path)), handle_(handle), api_(std::move(api)),
      contexts_(std::make_unique<Contexts>()) {}

// The contexts go first (contexts_ is the last member). The library itself stays loaded: once
// cuInit has run, the driver has threads and exit handlers of its own running its code.
Driver::~Driver() = default;

std::string Driver::describe(CUresult result) const { return describe_with(*api_, result); }

CUdevice Driver::device(int ordinal) {
    if (ordinal < 0 || ordinal >= device_count_)
        fail("cuda", "no device " + device_label(ordinal) + " (" + std::to_string(device_count_) +
                         " found)");
    CUdevice d = 0;
    if (const CUresult r = api_->cuDeviceGet(&d, ordinal); r != CUDA_SUCCESS)
        fail_call(*this, r, "cuDeviceGet", device_label(ordinal));
    return d;
}

int Driver::attribute(int attr, CUdevice device) {
    int value = 0;
    if (const CUresult r = api_->cuDeviceGetAttribute(&value, attr, device); r != CUDA_SUCCESS)
        fail_call(*this, r, "cuDeviceGetAttribute",
                  "attribute " + std::to_string(attr) + " of device " + std::to_string(device));
    return value;
}

std::string Driver::device_name(int ordinal) {
    const CUdevice d = device(ordinal);
    char name[256] = {};
    if (const CUresult r = api_->cuDeviceGetName(name, sizeof name - 1, d); r != CUDA_SUCCESS)
        fail_call(*this, r, "cuDeviceGetName", device_label(ordinal));
    return name;
}

int Driver::compute_capability(int ordinal) {
    const CUdevice d = device(ordinal);
    return 10 * attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d) +
           attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
}

Limits Driver::limits(int ordinal) {
    const CUdevice d = device(ordinal);
    Limits l;
    l.max_threads_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, d);
    for (int i = 0; i < 3; ++i) {
        l.max_block[i] = attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + i, d);
        l.max_grid[i] = attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + i, d);
    }
    l.shared_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, d);
    l.shared_optin = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d);
    l.warp_size = attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE, d);
    l.sm_count = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d);
    return l;
}

Context& Driver::context(int ordinal) {
    if (ordinal < 0 || ordinal >= device_count_) device(ordinal); // throws "no device CUDA:n"
    std::lock_guard lock(contexts_->mu);
    std::unique_ptr<Context>& slot = contexts_->by_ordinal[static_cast<size_t>(ordinal)];
    // Created under the lock so that the primary context is retained once; a constructor that
    // throws has released what it took, and nothing is destroyed here.
    if (!slot) slot.reset(new Context(*this, ordinal));
    return *slot;
}

// ---------------------------------------------------------------------------------------------
// Context
// ---------------------------------------------------------------------------------------------

Context::Context(Driver& driver, int ordinal) : driver_(driver), ordinal_(ordinal) {
    const Driver::Api& api = driver.api();
    device_ = driver.device(ordinal);
    // The primary context is the one the CUDA runtime and other libraries share on this device:
    // memory Tempura allocates is usable by them, and no second context competes for the GPU.
    if (const CUresult r = api.cuDevicePrimaryCtxRetain(&context_, device_); r != CUDA_SUCCESS)
        fail_call(driver, r, "cuDevicePrimaryCtxRetain", device_label(ordinal));
    try {
        make_current();
        // A blocking stream (CU_STREAM_DEFAULT) is ordered with the legacy default stream, where
        // the host-to-device and device-to-host copies run: copies and kernels stay in the order
        // they were issued without events. Device-to-device copies and memsets, which return
        // before they are done, go on this stream, so that synchronize() waits for them.
        if (const CUresult r = api.cuStreamCreate(&stream_, CU_STREAM_DEFAULT); r != CUDA_SUCCESS)
            fail_call(driver, r, "cuStreamCreate", device_label(ordinal));
    } catch (...) {
        api.cuDevicePrimaryCtxRelease(device_);
        throw;
    }
}

Context::~Context() {
    // Errors are ignored: at process exit the driver may already be shutting down.
    const Driver::Api& api = driver_.api();
    if (api.cuCtxSetCurrent(context_) == CUDA_SUCCESS && stream_ != nullptr)
        api.cuStreamDestroy(stream_);
    api.cuDevicePrimaryCtxRelease(device_);
}

void Context::make_current() {
    if (const CUresult r = driver_.api().cuCtxSetCurrent(context_); r != CUDA_SUCCESS)
        fail_call(driver_, r, "cuCtxSetCurrent", device_label(ordinal_));
}

CUdeviceptr Context::alloc(size_t bytes) {
    if (bytes == 0) return 0; // cuMemAlloc rejects 0 bytes
    make_current();
    CUdeviceptr p = 0;
    if (const CUresult r = driver_.api().cuMemAlloc(&p, bytes); r != CUDA_SUCCESS)
        fail("cuda", device_label(ordinal_) + ": cuMemAlloc of " + std::to_string(bytes) +
                         " bytes failed: " + driver_.describe(r));
    return p;
}

void Context::free(CUdeviceptr ptr) {
    if (ptr == 0) return;
    make_current();
    if (const CUresult r = driver_.api().cuMemFree(ptr); r != CUDA_SUCCESS)
        fail_call(driver_, r, "cuMemFree", device_label(ordinal_));
}

void Context::copy_to_device(CUdeviceptr dst, const void* src, size_t bytes) {
    if (bytes == 0) return;
    make_current();
    if (const CUresult r = driver_.api().cuMemcpyHtoD(dst, src, bytes); r != CUDA_SUCCESS)
        fail_call(driver_, r, "cuMemcpyHtoD", device_label(ordinal_));
}

void Context::copy_to_host(void* dst, CUdeviceptr src, size_t bytes) {
    if (bytes == 0) return;
    // Waiting for the stream first reports a failed kernel as the stream's error, not as the
    // copy's, and does not rely on the stream being a blocking one.
    synchronize();
    if (const CUresult r = driver_.api().cuMemcpyDtoH(dst, src, bytes); r != CUDA_SUCCESS)
        fail_call(driver_, r, "cuMemcpyDtoH", device_label(ordinal_));
}

void Context::copy_device(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    if (bytes == 0) return;
    make_current();
    // On the stream, not the legacy default stream: a device-to-device copy returns before it is
    // done, and only then does synchronize() wait for it.
    if (const CUresult r = driver_.api().cuMemcpyDtoDAsync(dst, src, bytes, stream_);
        r != CUDA_SUCCESS)
        fail_call(driver_, r, "cuMemcpyDtoDAsync", device_label(ordinal_));
}

void Context::memset0(CUdeviceptr dst, size_t bytes) {
    if (bytes == 0) return;
    make_current();
    if (const CUresult r = driver_.api().cuMemsetD8Async(dst, 0, bytes, stream_); r != CUDA_SUCCESS)
        fail_call(driver_, r, "cuMemsetD8Async", device_label(ordinal_));
}

Module Context::load_ptx(const std::string& ptx, const std::string& kernel_name) {
    make_current();
    // 64 KiB each: ptxas reports every error of a kernel, and a truncated log still ends in a
    // NUL within the buffer.
    std::vector<char> error_log(64 * 1024, '\0'), info_log(64 * 1024, '\0');
    int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                     CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {
        error_log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(error_log.size() - 1)),
        info_log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(info_log.size() - 1))};
    CUmodule handle = nullptr;
    const CUresult r = driver_.api().cuModuleLoadDataEx(&handle, ptx.c_str(), 4, options, values);
    if (r != CUDA_SUCCESS) {
        const std::string log = log_text(error_log);
        fail("cuda", "kernel " + kernel_name + ": cuModuleLoadDataEx failed: " +
                         driver_.describe(r) + (log.empty() ? "" : ": " + log));
    }
    // Owned from here: a failed lookup below unloads the module again.
    Module module(this, handle, nullptr, kernel_name, log_text(info_log));
    module.function_ = get_function(module, kernel_name);
    return module;
}

CUfunction Context::get_function(const Module& module, const std::string& name) {
    make_current();
    CUfunction f = nullptr;
    if (const CUresult r = driver_.api().cuModuleGetFunction(&f, module.handle(), name.c_str());
        r != CUDA_SUCCESS)
        fail_call(driver_, r, "cuModuleGetFunction", "kernel " + name);
    return f;
}

void Context::opt_in_shared(CUfunction function, const std::string& kernel_name, unsigned bytes) {
    if (bytes <= kSharedWithoutOptin) return;
    make_current();
    if (const CUresult r = driver_.api().cuFuncSetAttribute(
            function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(bytes));
        r != CUDA_SUCCESS)
        fail_call(driver_, r, "cuFuncSetAttribute", "kernel " + kernel_name);
}

void Context::launch(CUfunction function, const std::string& kernel_name,
                     const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block,
                     unsigned shared_bytes, void** args) {
    make_current();
    const Driver::Api& api = driver_.api();
    if (const CUresult r =
            api.cuLaunchKernel(function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                               shared_bytes, stream_, args, nullptr);
        r != CUDA_SUCCESS)
        fail_call(driver_, r, "cuLaunchKernel", "kernel " + kernel_name);
    std::lock_guard lock(queued_mu_);
    last_kernel_ = kernel_name;
    ++queued_;
}

void Context::synchronize() {
    make_current();
    const CUresult r = driver_.api().cuStreamSynchronize(stream_);
    std::string kernel;
    size_t queued = 0;
    {
        std::lock_guard lock(queued_mu_);
        kernel = last_kernel_;
        queued = queued_;
        queued_ = 0;
    }
    if (r == CUDA_SUCCESS) return;
    // The driver names no kernel: the ones queued since the last wait are the suspects.
    std::string after;
    if (queued > 0)
        after = " (after kernel " + kernel + ", the last of " + std::to_string(queued) +
                " queued since the stream last waited)";
    fail("cuda",
         device_label(ordinal_) + ": cuStreamSynchronize failed: " + driver_.describe(r) + after);
}

void Context::unload(CUmodule module) noexcept {
    // Errors are ignored: this runs in destructors, possibly while the driver shuts down.
    const Driver::Api& api = driver_.api();
    api.cuCtxSetCurrent(context_);
    api.cuModuleUnload(module);
}

// ---------------------------------------------------------------------------------------------
// Module
// ---------------------------------------------------------------------------------------------

Module::~Module() { reset(); }

Module::Module(Module&& other) noexcept
    : context_(std::exchange(other.context_, nullptr)),
      module_(std::exchange(other.module_, nullptr)),
      function_(std::exchange(other.function_, nullptr)),
      kernel_name_(std::move(other.kernel_name_)), info_log_(std::move(other.info_log_)) {}

Module& Module::operator=(Module&& other) noexcept {
    if (this != &other) {
        reset();
        context_ = std::exchange(other.context_, nullptr);
        module_ = std::exchange(other.module_, nullptr);
        function_ = std::exchange(other.function_, nullptr);
        kernel_name_ = std::move(other.kernel_name_);
        info_log_ = std::move(other.info_log_);
    }
    return *this;
}

void Module::reset() noexcept {
    if (context_ != nullptr && module_ != nullptr) context_->unload(module_);
    module_ = nullptr;
    function_ = nullptr;
}

// ---------------------------------------------------------------------------------------------
// The process-wide driver
// ---------------------------------------------------------------------------------------------

Driver& driver() {
    // Leaked: modules and device buffers held by static objects may be released after main()
    // returns. A load that throws leaves the static uninitialized, to be tried again.
    static Driver* const d = [] {
        std::string path = env::get_string("TEMPURA_LIBCUDA");
        if (path.empty()) path = "libcuda.so.1";
        return Driver::load(path).release();
    }();
    return *d;
}

namespace {

struct Probe {
    std::vector<std::string> names;
    std::string reason;
};

const Probe& probe() {
    static const Probe p = [] {
        Probe p;
        try {
            Driver& d = driver();
            for (int i = 0; i < d.device_count(); ++i) p.names.push_back(device_label(i));
            if (p.names.empty()) p.reason = "[cuda] no CUDA device (" + d.path() + ")";
        } catch (const std::exception& e) {
            p.names.clear();
            p.reason = e.what();
        } catch (...) {
            p.names.clear();
            p.reason = "[cuda] loading the CUDA driver failed";
        }
        return p;
    }();
    return p;
}

} // namespace

bool cuda_usable() { return !probe().names.empty(); }

std::vector<std::string> cuda_device_names() { return probe().names; }

const std::string& cuda_unusable_reason() { return probe().reason; }

} // namespace tempura::cuda
