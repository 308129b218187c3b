// CUDA devices: their limits, their memory as runtime buffers use it, and GPU programs compiled to
// PTX for the device's arch, loaded into its context and launched on its stream
// (include/tempura/backend/gpu.hpp).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <mutex>
#include <unordered_map>

#include "tempura/backend/cuda.hpp"
#include "tempura/backend/gpu.hpp"
#include "tempura/error.hpp"
#include "tempura/support/lru_cache.hpp"

namespace tempura::runtime {

namespace {

std::string label(int ordinal) { return "CUDA:" + std::to_string(ordinal); }

} // namespace

codegen::DeviceLimits cuda_limits(int ordinal) {
    cuda::Driver& d = cuda::driver();
    const int sm = d.compute_capability(ordinal);
    if (sm < 80 || sm > 90)
        fail("cuda", label(ordinal) + " (" + d.device_name(ordinal) + ") is sm_" +
                         std::to_string(sm) + ": Tempura's PTX path supports sm_80 .. sm_90 only");
    const cuda::Limits l = d.limits(ordinal);
    codegen::DeviceLimits lim = codegen::gpu_limits(label(ordinal), sm);
    lim.max_threads_per_block = l.max_threads_per_block;
    for (size_t i = 0; i < 3; ++i) {
        lim.max_block[i] = l.max_block[i];
        lim.max_grid[i] = l.max_grid[i];
    }
    // A kernel over 48 KiB takes its shared memory dynamically, opted into at launch.
    lim.shared_bytes = std::max<int64_t>(l.shared_optin, l.shared_per_block);
    lim.warp_size = l.warp_size;
    return lim;
}

std::string cuda_device_tag(int ordinal) {
    cuda::Driver& d = cuda::driver();
    return d.device_name(ordinal) + " sm_" + std::to_string(d.compute_capability(ordinal));
}

// --- memory ----------------------------------------------------------------------------------

namespace {

class CudaAllocator final : public Allocator {
  public:
    explicit CudaAllocator(int ordinal) : ordinal_(ordinal) {}
    std::string name() const override { return label(ordinal_); }
    uint64_t alloc(size_t bytes) override { return context().alloc(bytes); }
    void free(uint64_t address, size_t) noexcept override {
        // At process exit the driver may be shutting down already; the memory goes with it.
        try {
            context().free(address);
        } catch (...) {
        }
    }
    void zero(uint64_t address, size_t bytes) override { context().memset0(address, bytes); }
    void copyin(uint64_t dst, const void* src, size_t bytes) override {
        context().copy_to_device(dst, src, bytes);
    }
    void copyout(void* dst, uint64_t src, size_t bytes) override {
        context().copy_to_host(dst, src, bytes);
    }
    void copy(uint64_t dst, uint64_t src, size_t bytes) override {
        context().copy_device(dst, src, bytes);
    }

  private:
    cuda::Context& context() const { return cuda::driver().context(ordinal_); }
    int ordinal_;
};

} // namespace

std::unique_ptr<Allocator> make_cuda_allocator(int ordinal) {
    return std::make_unique<CudaAllocator>(ordinal);
}

// --- kernels ---------------------------------------------------------------------------------

namespace {

// A module loaded for one program, shared by the kernels of every name it is cached under. It
// remembers the program, so that emu_kernel_of can compile the same one for EMU.
struct Loaded {
    cuda::Module module;
    std::string entry; // the PTX's .entry
    std::vector<UOp> linear;
    int64_t block_threads = 0;
    int64_t dynamic_shared = 0; // bytes of shared memory given at launch (over 48 KiB)
    ~Loaded();
};

// Loaded modules by their function (emu_kernel_of). Weak: the map keeps no module loaded.
struct Functions {
    std::mutex mu;
    std::unordered_map<cuda::CUfunction, std::weak_ptr<const Loaded>> by_function;
};
Functions& functions() {
    static auto* f = new Functions; // outlives static destructors, like the caches
    return *f;
}

Loaded::~Loaded() {
    {
        Functions& f = functions();
        std::lock_guard lock(f.mu);
        // A later module may have been given the same handle: erase only an entry that is gone.
        auto it = f.by_function.find(module.function());
        if (it != f.by_function.end() && it->second.expired()) f.by_function.erase(it);
    }
    // Launches are queued: a plan may have launched this kernel just before the cache dropped it
    // (clear_caches(), an eviction). The driver does not promise that an unload waits for them,
    // so the stream is drained first. An error here belongs to the kernel that failed and is
    // reported by the next call that waits; a destructor cannot throw it.
    if (module && module.context() != nullptr) {
        try {
            module.context()->synchronize();
        } catch (...) {
        }
    }
    // (the module unloads after this body, outside the lock)
}

[[noreturn]] void not_on_host(void* const*, const int64_t*) {
    fail("cuda", "a CUDA kernel runs on its device through cuda_launch, not on the host");
}

class CudaKernel final : public CompiledKernel {
  public:
    CudaKernel(const std::string& name, std::string ptx, double compile_ms, size_t buffers,
               size_t vars, std::shared_ptr<const Loaded> loaded, int ordinal)
        : CompiledKernel(name, loaded->entry, std::move(ptx), compile_ms, &not_on_host, buffers,
                         vars),
          loaded_(std::move(loaded)), ordinal_(ordinal) {}
    const std::shared_ptr<const Loaded>& loaded() const { return loaded_; }
    int ordinal() const { return ordinal_; }

  private:
    std::shared_ptr<const Loaded> loaded_;
    int ordinal_;
};

LruCache<std::shared_ptr<const CompiledKernel>>& cuda_cache() {
    static auto* c = new LruCache<std::shared_ptr<const CompiledKernel>>; // outlives statics
    return *c;
}

// The name after ".entry " in PTX (the renderer's sanitized kernel name).
std::string ptx_entry(const std::string& ptx, const std::string& kernel) {
    const size_t at = ptx.find(".entry ");
    if (at == std::string::npos) fail("cuda", "kernel " + kernel + ": the PTX has no .entry");
    size_t end = at + 7;
    while (end < ptx.size() && (std::isalnum(static_cast<unsigned char>(ptx[end])) != 0 ||
                                ptx[end] == '_' || ptx[end] == '$'))
        ++end;
    return ptx.substr(at + 7, end - at - 7);
}

} // namespace

void clear_cuda_kernel_cache() { cuda_cache().clear(); }

std::shared_ptr<const CompiledKernel> compile_cuda_kernel(const std::string& name,
                                                          const std::vector<UOp>& linear,
                                                          int64_t block_threads, int ordinal) {
    std::string key =
        label(ordinal) + ":" + std::to_string(block_threads) + ":" + structure_key(linear, "cuda");
    if (auto hit = cuda_cache().find(key)) {
        const auto& k = static_cast<const CudaKernel&>(**hit);
        if (k.name() == name) return *hit;
        return std::make_shared<const CudaKernel>(
            name, k.source(), k.compile_ms(), k.buffer_count(), k.var_count(), k.loaded(), ordinal);
    }
    const codegen::DeviceLimits lim = cuda_limits(ordinal);
    const auto t0 = std::chrono::steady_clock::now();
    std::string ptx = render_ptx(name, linear, lim.sm, block_threads);
    auto loaded = std::make_shared<Loaded>();
    loaded->entry = ptx_entry(ptx, name);
    loaded->module = cuda::driver().context(ordinal).load_ptx(ptx, loaded->entry);
    loaded->linear = linear;
    loaded->block_threads = block_threads;
    loaded->dynamic_shared = dynamic_shared_bytes(linear);
    cuda::driver().context(ordinal).opt_in_shared(loaded->module.function(), loaded->entry,
                                                  static_cast<unsigned>(loaded->dynamic_shared));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    // The PTX's parameters, as the renderer declares them: a pointer per buffer slot up to the
    // highest, then an int64 per DEFINE_VAR.
    size_t buffers = 0, vars = 0;
    for (const UOp& u : linear) {
        if (u.op() == Op::DefineVar) ++vars;
        if (u.op() == Op::Param)
            buffers =
                std::max(buffers, static_cast<size_t>(u.arg_as<std::vector<int64_t>>().at(0)) + 1);
    }
    {
        Functions& f = functions();
        std::lock_guard lock(f.mu);
        f.by_function[loaded->module.function()] = loaded;
    }
    auto k = std::make_shared<const CudaKernel>(name, std::move(ptx), ms, buffers, vars,
                                                std::move(loaded), ordinal);
    const size_t bytes = key.size() + k->source().size() + 1024;
    return cuda_cache().insert(key, std::move(k), bytes);
}

void cuda_launch(const CompiledKernel& kernel, void* const* buffers, const int64_t* vars,
                 const std::array<int64_t, 3>& grid, const std::array<int64_t, 3>& block) {
    const auto* k = dynamic_cast<const CudaKernel*>(&kernel);
    if (k == nullptr)
        fail("cuda", "kernel " + kernel.name() + " was not compiled for a CUDA device");
    // Launches are frequent and the limits do not change: read once per device.
    static std::mutex mu;
    static auto* limits = new std::unordered_map<int, codegen::DeviceLimits>; // outlives statics
    codegen::DeviceLimits lim;
    {
        std::lock_guard lock(mu);
        auto it = limits->find(k->ordinal());
        if (it == limits->end())
            it = limits->emplace(k->ordinal(), cuda_limits(k->ordinal())).first;
        lim = it->second;
    }
    check_launch("cuda", kernel, lim, grid, block);
    // The kernel's parameters: each points at its value (cuLaunchKernel copies them).
    const size_t nb = kernel.buffer_count(), nv = kernel.var_count();
    std::vector<cuda::CUdeviceptr> addresses(nb);
    std::vector<int64_t> values(vars, vars + nv);
    std::vector<void*> params(nb + nv);
    for (size_t i = 0; i < nb; ++i) {
        addresses[i] = reinterpret_cast<cuda::CUdeviceptr>(buffers[i]);
        // The PTX declares every buffer 16-byte aligned (its vector loads rely on it): a
        // buffer is an allocation of its own, which cuMemAlloc aligns to 256 bytes.
        if (addresses[i] % 16 != 0)
            fail("cuda", "kernel " + kernel.name() + ": buffer " + std::to_string(i) +
                             " is not 16-byte aligned (the kernel's loads assume it)");
        params[i] = &addresses[i];
    }
    for (size_t i = 0; i < nv; ++i) params[nb + i] = &values[i];
    auto u = [](int64_t x) { return static_cast<unsigned>(x); }; // within limits: checked
    cuda::driver()
        .context(k->ordinal())
        .launch(k->loaded()->module.function(), kernel.name(), {u(grid[0]), u(grid[1]), u(grid[2])},
                {u(block[0]), u(block[1]), u(block[2])}, u(k->loaded()->dynamic_shared),
                params.data());
}

std::shared_ptr<const CompiledKernel> emu_kernel_of(cuda::CUfunction function) {
    std::shared_ptr<const Loaded> loaded;
    {
        Functions& f = functions();
        std::lock_guard lock(f.mu);
        auto it = f.by_function.find(function);
        if (it != f.by_function.end()) loaded = it->second.lock();
    }
    if (!loaded) return nullptr;
    return compile_emu_kernel(loaded->entry, loaded->linear, loaded->block_threads);
}

} // namespace tempura::runtime
