#pragma once
// The CUDA driver API, loaded at run time with dlopen: Tempura builds, links and runs on machines
// without CUDA, and finds the driver (libcuda.so.1, or TEMPURA_LIBCUDA) only when a GPU is used.
// This header names no CUDA type from cuda.h: the few handles it needs are declared here as
// opaque pointers and integers of the same size, so neither Tempura nor its users need the CUDA
// toolkit to compile.
//
// Errors are tempura::Error, "[cuda] ...":
//   [cuda] no CUDA driver: libcuda.so.1 not found
//   [cuda] the CUDA driver <path> lacks <symbol>
//   [cuda] cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)
//   [cuda] kernel E_4_16: cuLaunchKernel failed: <NAME> (<description>)
#include <array>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tempura::cuda {

// The driver's types, as cuda.h declares them on 64-bit Linux (the handles are pointers to
// incomplete structs there too; these are distinct types, never mixed with cuda.h's).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;

// The CUresult values Tempura looks at or names itself (cuda.h's CUDA_ERROR_*).
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;

// What one device allows (cuDeviceGetAttribute).
struct Limits {
    int max_threads_per_block = 0;
    int max_block[3] = {0, 0, 0};
    int max_grid[3] = {0, 0, 0};
    int shared_per_block = 0; // bytes a block gets without opting in
    int shared_optin = 0;     // bytes a block may get with cuFuncSetAttribute
    int warp_size = 0;
    int sm_count = 0;
};

class Driver;
class Context;

// A module loaded from PTX and the kernel looked up in it; unloaded when destroyed. It must not
// outlive the Driver whose Context loaded it (the process-wide driver() lives forever).
class Module {
  public:
    Module() = default;
    ~Module();
    Module(Module&& other) noexcept;
    Module& operator=(Module&& other) noexcept;
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;

    explicit operator bool() const { return module_ != nullptr; }
    CUmodule handle() const { return module_; }
    CUfunction function() const { return function_; }               // the kernel load_ptx named
    const std::string& kernel_name() const { return kernel_name_; } // for error messages
    const std::string& info_log() const { return info_log_; }       // the JIT's info log
    Context* context() const { return context_; }

    // Unloads now (nothing when empty).
    void reset() noexcept;

  private:
    friend class Context;
    Module(Context* context, CUmodule module, CUfunction function, std::string kernel_name,
           std::string info_log)
        : context_(context), module_(module), function_(function),
          kernel_name_(std::move(kernel_name)), info_log_(std::move(info_log)) {}

    Context* context_ = nullptr;
    CUmodule module_ = nullptr;
    CUfunction function_ = nullptr;
    std::string kernel_name_, info_log_;
};

// One device's primary context (retained once, for the Driver's lifetime) and the one stream
// Tempura queues its work on. Every call first makes the context current on the calling thread,
// so any thread may use it. Thread-safe as the driver is; the caller orders its own work.
class Context {
  public:
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    int ordinal() const { return ordinal_; }
    Driver& driver() const { return driver_; }
    CUcontext handle() const { return context_; }
    CUstream stream() const { return stream_; }

    // Device memory. alloc(0) returns 0, and free(0) does nothing.
    CUdeviceptr alloc(size_t bytes);
    void free(CUdeviceptr ptr);
    // Copies queued after the work already on the stream; copy_to_host waits for that work and
    // returns once `dst` holds the bytes.
    void copy_to_device(CUdeviceptr dst, const void* src, size_t bytes);
    void copy_to_host(void* dst, CUdeviceptr src, size_t bytes);
    void copy_device(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
    void memset0(CUdeviceptr dst, size_t bytes);

    // JIT-compiles `ptx` for this device and looks up `kernel_name` in it. A PTX error throws
    // "[cuda] kernel <name>: cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (...): <JIT log>".
    Module load_ptx(const std::string& ptx, const std::string& kernel_name);
    // Another function of a loaded module.
    CUfunction get_function(const Module& module, const std::string& name);

    // Lets `function` take up to `bytes` of dynamic shared memory at launch: more than 48 KiB
    // needs this opt-in (cuFuncSetAttribute) first. Once per function: the amount a kernel
    // declares is its own, so the runtime opts in when it loads the kernel, not at each launch.
    void opt_in_shared(CUfunction function, const std::string& kernel_name, unsigned bytes);
    // Queues `function` on the stream. `args[i]` points at the i-th kernel parameter's value.
    // A launch over 48 KiB of dynamic shared memory needs opt_in_shared first (the driver
    // refuses it otherwise). Errors of the kernel itself surface at the next synchronizing call.
    void launch(CUfunction function, const std::string& kernel_name,
                const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block,
                unsigned shared_bytes, void** args);
    void launch(const Module& module, const std::array<unsigned, 3>& grid,
                const std::array<unsigned, 3>& block, unsigned shared_bytes, void** args) {
        launch(module.function(), module.kernel_name(), grid, block, shared_bytes, args);
    }

    // Waits for everything queued on the stream. A kernel that failed while it ran is reported
    // here, with the kernels queued since the last wait: "[cuda] CUDA:0: cuStreamSynchronize
    // failed: <error> (after kernel r_64_16, the last of 3 queued since the stream last waited)".
    void synchronize();

  private:
    friend class Driver;
    friend class Module;
    Context(Driver& driver, int ordinal);
    void make_current();
    void unload(CUmodule module) noexcept;

    Driver& driver_;
    int ordinal_;
    CUdevice device_ = 0;
    CUcontext context_ = nullptr;
    CUstream stream_ = nullptr;
    // The kernels queued since the last wait (an asynchronous error belongs to one of them).
    std::mutex queued_mu_;
    std::string last_kernel_;
    size_t queued_ = 0;
};

// A loaded, initialized CUDA driver library.
class Driver {
  public:
    // dlopens `path` (a file name searched as dlopen does, or a path), resolves every entry point
    // Tempura uses and calls cuInit. Throws tempura::Error naming what went wrong; nothing stays
    // loaded then.
    static std::unique_ptr<Driver> load(const std::string& path);
    ~Driver();
    Driver(const Driver&) = delete;
    Driver& operator=(const Driver&) = delete;

    const std::string& path() const { return path_; }
    void* library() const { return handle_; } // dlopen's handle, for entry points not wrapped here
    int version() const { return version_; }  // cuDriverGetVersion: 1000*major + 10*minor

    int device_count() const { return device_count_; }
    std::string device_name(int ordinal);
    int compute_capability(int ordinal); // 10*major + minor: 90 for sm_90
    Limits limits(int ordinal);

    // The device's context, created on first use and kept until the Driver goes.
    Context& context(int ordinal);

    // "<NAME> (<description>)" for a CUresult, from the driver where it can say, else from
    // Tempura's own table of common codes.
    std::string describe(CUresult result) const;

    struct Api; // the resolved entry points (src/backend/cuda/driver_api.hpp)
    const Api& api() const { return *api_; }

  private:
    friend class Context;
    Driver(std::string path, void* handle, std::unique_ptr<Api> api);
    CUdevice device(int ordinal);
    int attribute(int attr, CUdevice device);

    std::string path_;
    void* handle_;
    std::unique_ptr<Api> api_;
    int version_ = 0;
    int device_count_ = 0;
    struct Contexts;
    std::unique_ptr<Contexts> contexts_;
};

// The process-wide driver: TEMPURA_LIBCUDA when set, else libcuda.so.1. Loaded on the first call
// that succeeds and never unloaded; a failed load throws and is tried again on the next call.
Driver& driver();

// Whether CUDA can run here: the driver loads, cuInit succeeds and there is a device. Never
// throws; decided once per process.
bool cuda_usable();
// {"CUDA:0", "CUDA:1", ...}, empty when !cuda_usable(). Decided once per process.
std::vector<std::string> cuda_device_names();
// Why !cuda_usable() (the error driver() threw, or that there is no device); "" when usable.
const std::string& cuda_unusable_reason();

} // namespace tempura::cuda
