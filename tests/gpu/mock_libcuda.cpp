// A mock CUDA driver for the tests (tests/gpu/mock_cuda.hpp): every entry point Tempura resolves
// (src/backend/cuda/driver_api.hpp), over host memory, with one device that reports sm_90 (or
// TEMPURA_MOCK_SM) and an H100's limits. It checks what it is given (addresses inside live
// allocations, copies within them, the PTX's .target against the device's arch, launches within the
// limits) and counts it. Launches run for real: the test process's tempura_mock_cuda_run executes
// the kernel on EMU. A kernel's failure is reported at the next synchronizing call, as a GPU's
// would be.
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mock_cuda.hpp"

namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;

constexpr CUresult kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2, kNotInitialized = 3,
                   kInvalidDevice = 101, kInvalidPtx = 218, kInvalidHandle = 400, kNotFound = 500,
                   kLaunchOutOfResources = 701, kLaunchFailed = 719, kNotSupported = 801;

// The device's compute capability: sm_90, or TEMPURA_MOCK_SM (a test of an arch Tempura refuses).
int sm() {
    static const int v = [] {
        const char* e = std::getenv("TEMPURA_MOCK_SM");
        return e != nullptr && *e != '\0' ? std::atoi(e) : 90;
    }();
    return v;
}
constexpr size_t kMemoryBytes = size_t{8} << 30; // what the mock device "has"

struct Module {
    std::string ptx;
};
struct Function {
    Module* module;
    std::string name;
    int max_dynamic_shared = 48 * 1024; // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
};

struct State {
    std::mutex mu;
    bool initialized = false;
    std::map<CUdeviceptr, size_t> allocations; // base -> bytes
    std::vector<std::unique_ptr<Module>> modules;
    std::vector<std::unique_ptr<Function>> functions;
    std::vector<std::string> ptx_loaded; // every module's PTX, in load order
    std::vector<TempuraMockLaunch> launches;
    TempuraMockCounters counters{};
    CUresult pending = kSuccess; // a launch's failure, reported at the next sync
    std::string last_refusal;
    int contexts = 0, streams = 0;
};
State& state() {
    static State* s = new State; // outlives the test process's static destructors
    return *s;
}

CUresult refuse(State& s, CUresult r, const std::string& why) {
    ++s.counters.bad_calls;
    s.last_refusal = why;
    return r;
}

// Whether [p, p + bytes) lies inside one live allocation.
bool inside(const State& s, CUdeviceptr p, size_t bytes) {
    auto it = s.allocations.upper_bound(p);
    if (it == s.allocations.begin()) return false;
    --it;
    return p >= it->first && p + bytes <= it->first + it->second;
}

// Reports a kernel's failure once, as the next synchronizing call does on a GPU.
CUresult take_pending(State& s) {
    const CUresult r = s.pending;
    s.pending = kSuccess;
    return r;
}

int attribute(int attr) {
    switch (attr) {
    case 1: return 1024;        // max threads per block
    case 2: return 1024;        // block x
    case 3: return 1024;        // block y
    case 4: return 64;          // block z
    case 5: return 2147483647;  // grid x
    case 6: return 65535;       // grid y
    case 7: return 65535;       // grid z
    case 8: return 48 * 1024;   // shared memory per block
    case 10: return 32;         // warp size
    case 16: return 132;        // multiprocessors
    case 75: return sm() / 10;  // compute capability major
    case 76: return sm() % 10;  // compute capability minor
    case 97: return 227 * 1024; // shared memory per block with opt-in
    default: return -1;
    }
}

struct ErrorText {
    CUresult code;
    const char* name;
    const char* text;
};
constexpr ErrorText kErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

// Writes `text` into a JIT log buffer of the options, if the caller gave one.
void write_log(unsigned n, const int* options, void** values, int buffer_opt, int size_opt,
               const std::string& text) {
    char* buffer = nullptr;
    size_t size = 0;
    for (unsigned i = 0; i < n; ++i) {
        if (options[i] == buffer_opt) buffer = static_cast<char*>(values[i]);
        if (options[i] == size_opt) size = reinterpret_cast<uintptr_t>(values[i]);
    }
    if (buffer == nullptr || size == 0) return;
    const size_t k = std::min(size - 1, text.size());
    std::memcpy(buffer, text.data(), k);
    buffer[k] = '\0';
}

} // namespace

#define MOCK_API extern "C" __attribute__((visibility("default")))

// --- the mock's own interface ----------------------------------------------------------------

MOCK_API void tempura_mock_counters(TempuraMockCounters* out) {
    State& s = state();
    std::lock_guard lock(s.mu);
    *out = s.counters;
}

MOCK_API size_t tempura_mock_launches(TempuraMockLaunch* out, size_t max) {
    State& s = state();
    std::lock_guard lock(s.mu);
    const size_t n = std::min(max, s.launches.size());
    std::copy(s.launches.end() - static_cast<std::ptrdiff_t>(n), s.launches.end(), out);
    return n;
}

MOCK_API size_t tempura_mock_module_count() {
    State& s = state();
    std::lock_guard lock(s.mu);
    return s.ptx_loaded.size();
}

MOCK_API const char* tempura_mock_module_ptx(size_t index) {
    State& s = state();
    std::lock_guard lock(s.mu);
    return index < s.ptx_loaded.size() ? s.ptx_loaded[index].c_str() : nullptr;
}

MOCK_API const char* tempura_mock_last_refusal() {
    State& s = state();
    std::lock_guard lock(s.mu);
    return s.last_refusal.c_str();
}

// --- the driver API --------------------------------------------------------------------------

MOCK_API CUresult cuInit(unsigned flags) {
    State& s = state();
    std::lock_guard lock(s.mu);
    if (flags != 0) return refuse(s, kInvalidValue, "cuInit flags");
    s.initialized = true;
    return kSuccess;
}

MOCK_API CUresult cuDriverGetVersion(int* version) {
    *version = 13000;
    return kSuccess;
}

MOCK_API CUresult cuDeviceGetCount(int* count) {
    *count = 1;
    return kSuccess;
}

MOCK_API CUresult cuDeviceGet(int* device, int ordinal) {
    if (ordinal != 0) return kInvalidDevice;
    *device = 0;
    return kSuccess;
}

MOCK_API CUresult cuDeviceGetName(char* name, int len, int device) {
    if (device != 0) return kInvalidDevice;
    std::snprintf(name, static_cast<size_t>(len), "%s", "Tempura mock GPU");
    return kSuccess;
}

MOCK_API CUresult cuDeviceGetAttribute(int* value, int attr, int device) {
    if (device != 0) return kInvalidDevice;
    const int v = attribute(attr);
    if (v < 0) return kInvalidValue;
    *value = v;
    return kSuccess;
}

MOCK_API CUresult cuDevicePrimaryCtxRetain(void** context, int device) {
    State& s = state();
    std::lock_guard lock(s.mu);
    if (!s.initialized) return kNotInitialized;
    if (device != 0) return kInvalidDevice;
    ++s.contexts;
    *context = &s; // any non-null handle
    return kSuccess;
}

MOCK_API CUresult cuDevicePrimaryCtxRelease_v2(int device) {
    State& s = state();
    std::lock_guard lock(s.mu);
    if (device != 0 || s.contexts == 0) return refuse(s, kInvalidValue, "context release");
    --s.contexts;
    return kSuccess;
}

MOCK_API CUresult cuCtxSetCurrent(void* context) {
    return context == &state() ? kSuccess : kInvalidHandle;
}

MOCK_API CUresult cuCtxSynchronize() {
    State& s = state();
    std::lock_guard lock(s.mu);
    ++s.counters.syncs;
    return take_pending(s);
}

MOCK_API CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
    State& s = state();
    std::lock_guard lock(s.mu);
    if (bytes == 0) return refuse(s, kInvalidValue, "cuMemAlloc of 0 bytes");
    if (s.counters.live_bytes + bytes > kMemoryBytes) return kOutOfMemory;
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (p == nullptr) return kOutOfMemory;
    // What fresh device memory holds is unspecified: never zeros the caller could rely on.
    std::memset(p, 0xA5, bytes);
    *ptr = reinterpret_cast<CUdeviceptr>(p);
    s.allocations[*ptr] = bytes;
    ++s.counters.allocs;
    ++s.counters.live_allocs;
    s.counters.live_bytes += bytes;
    return kSuccess;
}

MOCK_API CUresult cuMemFree_v2(CUdeviceptr ptr) {
    State& s = state();
    std::lock_guard lock(s.mu);
    auto it = s.allocations.find(ptr);
    if (it == s.allocations.end()) return refuse(s, kInvalidValue, "cuMemFree of no allocation");
    s.counters.live_bytes -= it->second;
    s.allocations.erase(it);
    std::free(reinterpret_cast<void*>(ptr));
    ++s.counters.frees;
    --s.counters.live_allocs;
    return kSuccess;
}

MOCK_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
    State& s = state();
    std::lock_guard lock(s.mu);
    if (!inside(s, dst, bytes)) return refuse(s, kInvalidValue, "cuMemcpyHtoD out of bounds");
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
    ++s.counters.htod;
    s.counters.htod_bytes += bytes;
    return kSuccess;
}

MOCK_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
    State& s = state();
    std::lock_guard lock(s.mu);
    // The legacy stream's copy waits for the work before it: a failed kernel shows here.
    if (const CUresult r = take_pending(s); r != kSuccess) return r;
    if (!inside(s, src, bytes)) return refuse(s, kInvalidValue, "cuMemcpyDtoH out of bounds");
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    ++s.counters.dtoh;
    s.counters.dtoh_bytes += bytes;
    return kSuccess;
}

// The asynchronous copy and memset must name Tempura's stream: on the legacy default stream a
// synchronize of Tempura's stream would not wait for them (a real GPU's bandwidth read 26x too
// high that way).
MOCK_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                       void* stream) {
    State& s = state();
    std::lock_guard lock(s.mu);
    if (stream == nullptr)
        return refuse(s, kInvalidValue, "cuMemcpyDtoDAsync on the legacy stream");
    if (!inside(s, dst, bytes) || !inside(s, src, bytes))
        return refuse(s, kInvalidValue, "cuMemcpyDtoD out of bounds");
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    ++s.counters.dtod;
    return kSuccess;
}

MOCK_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count,
                                  void* stream) {
    State& s = state();
    std::lock_guard lock(s.mu);
    if (stream == nullptr) return refuse(s, kInvalidValue, "cuMemsetD8Async on the legacy stream");
    if (!inside(s, dst, count)) return refuse(s, kInvalidValue, "cuMemsetD8 out of bounds");
    std::memset(reinterpret_cast<void*>(dst), value, count);
    ++s.counters.memsets;
    return kSuccess;
}

MOCK_API CUresult cuModuleLoadDataEx(void** module, const void* image, unsigned n, int* options,
                                     void** values) {
    State& s = state();
    std::lock_guard lock(s.mu);
    const std::string ptx = static_cast<const char*>(image);
    // The one check of a JIT the mock makes: PTX for another arch than the device's is refused,
    // with an error log as ptxas would write one. (sm_90a, Hopper's own features, is the
    // device's arch too.)
    const std::string want = ".target sm_" + std::to_string(sm());
    const size_t t = ptx.find(".target ");
    size_t after = t + want.size();
    if (t != std::string::npos && after < ptx.size() && ptx[after] == 'a' && sm() == 90) ++after;
    if (t == std::string::npos || ptx.compare(t, want.size(), want) != 0 ||
        (after < ptx.size() && std::isalnum(static_cast<unsigned char>(ptx[after])))) {
        const std::string got =
            t == std::string::npos ? "no .target" : ptx.substr(t, ptx.find('\n', t) - t);
        write_log(n, options, values, 5, 6,
                  "mock ptxas fatal   : '" + got + "' is not this device's sm_" +
                      std::to_string(sm()));
        return kInvalidPtx;
    }
    write_log(n, options, values, 3, 4,
              "mock ptxas info    : " + std::to_string(ptx.size()) + " bytes of PTX for sm_" +
                  std::to_string(sm()));
    s.modules.push_back(std::make_unique<Module>(Module{ptx}));
    s.ptx_loaded.push_back(ptx);
    ++s.counters.modules_loaded;
    *module = s.modules.back().get();
    return kSuccess;
}

MOCK_API CUresult cuModuleUnload(void* module) {
    State& s = state();
    std::lock_guard lock(s.mu);
    for (auto it = s.modules.begin(); it != s.modules.end(); ++it) {
        if (it->get() != module) continue;
        std::erase_if(s.functions, [&](const auto& f) { return f->module == module; });
        s.modules.erase(it);
        ++s.counters.modules_unloaded;
        return kSuccess;
    }
    return refuse(s, kInvalidHandle, "cuModuleUnload of no module");
}

MOCK_API CUresult cuModuleGetFunction(void** function, void* module, const char* name) {
    State& s = state();
    std::lock_guard lock(s.mu);
    for (const auto& m : s.modules) {
        if (m.get() != module) continue;
        if (m->ptx.find(".entry " + std::string(name) + "(") == std::string::npos) return kNotFound;
        s.functions.push_back(std::make_unique<Function>(Function{m.get(), name, 48 * 1024}));
        *function = s.functions.back().get();
        return kSuccess;
    }
    return refuse(s, kInvalidHandle, "cuModuleGetFunction in no module");
}

MOCK_API CUresult cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned shared, void* stream,
                                 void** params, void** extra) {
    TempuraMockLaunch launch{};
    {
        State& s = state();
        std::lock_guard lock(s.mu);
        const Function* f = nullptr;
        for (const auto& x : s.functions)
            if (x.get() == function) f = x.get();
        if (f == nullptr) return refuse(s, kInvalidHandle, "cuLaunchKernel of no function");
        if (stream == nullptr || s.streams == 0 || extra != nullptr || params == nullptr)
            return refuse(s, kInvalidValue, "cuLaunchKernel arguments");
        if (gx < 1 || gy < 1 || gz < 1 || bx < 1 || by < 1 || bz < 1 ||
            static_cast<int64_t>(gx) > attribute(5) || static_cast<int>(gy) > attribute(6) ||
            static_cast<int>(gz) > attribute(7) || static_cast<int>(bx) > attribute(2) ||
            static_cast<int>(by) > attribute(3) || static_cast<int>(bz) > attribute(4))
            return kInvalidValue;
        // Dynamic shared memory over 48 KiB only as far as the function opted in.
        if (static_cast<uint64_t>(bx) * by * bz > static_cast<uint64_t>(attribute(1)) ||
            shared > static_cast<unsigned>(f->max_dynamic_shared))
            return kLaunchOutOfResources;
        std::snprintf(launch.kernel, sizeof launch.kernel, "%s", f->name.c_str());
        launch.grid[0] = gx, launch.grid[1] = gy, launch.grid[2] = gz;
        launch.block[0] = bx, launch.block[1] = by, launch.block[2] = bz;
        launch.shared_bytes = shared;
        s.launches.push_back(launch);
        ++s.counters.launches;
    }
    // The kernel runs now, outside the lock (it reads and writes the mock's memory directly).
    auto run = reinterpret_cast<TempuraMockRunFn>(dlsym(RTLD_DEFAULT, "tempura_mock_cuda_run"));
    const CUresult r =
        run == nullptr ? kNotSupported : run(function, params, launch.grid, launch.block);
    if (r != kSuccess) {
        State& s = state();
        std::lock_guard lock(s.mu);
        if (s.pending == kSuccess) s.pending = r == kNotSupported ? kNotSupported : kLaunchFailed;
    }
    return kSuccess;
}

MOCK_API CUresult cuStreamCreate(void** stream, unsigned flags) {
    State& s = state();
    std::lock_guard lock(s.mu);
    if (flags != 0) return refuse(s, kInvalidValue, "cuStreamCreate flags");
    ++s.streams;
    *stream = &s.streams; // any non-null handle
    return kSuccess;
}

MOCK_API CUresult cuStreamSynchronize(void* stream) {
    State& s = state();
    std::lock_guard lock(s.mu);
    if (stream != &s.streams) return refuse(s, kInvalidHandle, "cuStreamSynchronize handle");
    ++s.counters.syncs;
    return take_pending(s);
}

MOCK_API CUresult cuStreamDestroy_v2(void* stream) {
    State& s = state();
    std::lock_guard lock(s.mu);
    if (stream != &s.streams || s.streams == 0) return refuse(s, kInvalidHandle, "stream destroy");
    --s.streams;
    return kSuccess;
}

MOCK_API CUresult cuGetErrorName(CUresult result, const char** name) {
    for (const ErrorText& e : kErrors)
        if (e.code == result) {
            *name = e.name;
            return kSuccess;
        }
    return kInvalidValue;
}

MOCK_API CUresult cuGetErrorString(CUresult result, const char** text) {
    for (const ErrorText& e : kErrors)
        if (e.code == result) {
            *text = e.text;
            return kSuccess;
        }
    return kInvalidValue;
}

MOCK_API CUresult cuFuncSetAttribute(void* function, int attribute_id, int value) {
    State& s = state();
    std::lock_guard lock(s.mu);
    Function* known = nullptr;
    for (const auto& f : s.functions)
        if (f.get() == function) known = f.get();
    if (known == nullptr) return refuse(s, kInvalidHandle, "cuFuncSetAttribute of no function");
    if (attribute_id != 8 || value < 0 || value > attribute(97)) return kInvalidValue;
    known->max_dynamic_shared = value;
    ++s.counters.attributes_set;
    return kSuccess;
}
