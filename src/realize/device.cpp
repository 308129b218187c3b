// The device table: names, the default device, and each device's limits.
#include "tempura/realize/device.hpp"

#include <atomic>
#include <mutex>

#include "tempura/backend/cuda.hpp"
#include "tempura/backend/gpu.hpp"
#include "tempura/backend/llvm_cpu.hpp"
#include "tempura/error.hpp"
#include "tempura/support/env.hpp"

namespace tempura {

namespace runtime {

namespace {

// The devices whose memory is the host's; CUDA devices follow them, CUDA:n at kCuda0 + n.
const std::vector<std::string>& host_names() {
    static const std::vector<std::string> n = {"CPU", "EMU"};
    return n;
}

// A CUDA device Tempura can run on: its limits (and so its arch) are accepted. Asked only
// where CUDA devices are named or listed, so that a program that never uses one never loads the
// driver. Decided once per device; registers the device's allocator then.
struct CudaDevices {
    std::vector<std::string> names;   // CUDA:0 .. CUDA:n-1, as the driver counts them
    std::vector<std::string> refused; // per ordinal: why it cannot be used, "" when it can
    std::vector<codegen::DeviceLimits> limits;
};
const CudaDevices& cuda_devices() {
    static const CudaDevices c = [] {
        CudaDevices c;
        c.names = cuda::cuda_device_names();
        for (size_t i = 0; i < c.names.size(); ++i) {
            const int ordinal = static_cast<int>(i);
            codegen::DeviceLimits lim;
            std::string why;
            try {
                lim = cuda_limits(ordinal);
                register_allocator(kCuda0 + ordinal, make_cuda_allocator(ordinal));
            } catch (const Error& e) {
                why = e.what();
                if (why.rfind("[cuda] ", 0) == 0) why.erase(0, 7);
            }
            c.refused.push_back(why);
            c.limits.push_back(lim);
        }
        return c;
    }();
    return c;
}

std::string listing() {
    std::string s;
    for (const std::string& d : devices()) s += (s.empty() ? "" : ", ") + d;
    return s;
}

// -1 until the first use reads TEMPURA_DEVICE.
std::atomic<int> g_default{-1};
// DeviceScope's device for this thread; -1 when none is open.
thread_local int t_scope = -1;

} // namespace

int device_index(const std::string& name) {
    for (size_t i = 0; i < host_names().size(); ++i)
        if (host_names()[i] == name) return static_cast<int>(i);
    if (name == "CUDA" || name.rfind("CUDA:", 0) == 0) {
        const CudaDevices& c = cuda_devices();
        if (c.names.empty())
            fail("device", name + ": no usable CUDA device here (devices: " + listing() + ")");
        const std::string canonical = name == "CUDA" ? "CUDA:0" : name;
        for (size_t i = 0; i < c.names.size(); ++i) {
            if (c.names[i] != canonical) continue;
            if (!c.refused[i].empty()) fail("device", name + ": " + c.refused[i]);
            return kCuda0 + static_cast<int>(i);
        }
        fail("device", "unknown device '" + name + "' (devices: " + listing() + ")");
    }
    fail("device", "unknown device '" + name + "' (devices: " + listing() + ")");
}

std::string different_devices(int a, int b) {
    return "tensors on different devices: " + device_name(a) + " and " + device_name(b);
}

const std::string& device_name(int index) {
    if (index >= 0 && index < static_cast<int>(host_names().size()))
        return host_names()[static_cast<size_t>(index)];
    // A CUDA index comes from device_index, which decided the CUDA devices already.
    if (is_cuda(index)) {
        const CudaDevices& c = cuda_devices();
        if (static_cast<size_t>(index - kCuda0) < c.names.size())
            return c.names[static_cast<size_t>(index - kCuda0)];
    }
    fail("device", "internal: no device of index " + std::to_string(index));
}

DeviceScope::DeviceScope(int index) : saved_(t_scope) { t_scope = index; }
DeviceScope::~DeviceScope() { t_scope = saved_; }

int default_device_index() {
    if (t_scope >= 0) return t_scope;
    int d = g_default.load(std::memory_order_acquire);
    if (d >= 0) return d;
    const std::string env = env::get_string("TEMPURA_DEVICE");
    int want = kCpu;
    if (!env.empty()) {
        try {
            want = device_index(env);
        } catch (const Error& e) {
            env::warn_once("ignoring TEMPURA_DEVICE=" + env + " (" + e.what() + "); using CPU");
        }
    }
    int expected = -1;
    g_default.compare_exchange_strong(expected, want, std::memory_order_acq_rel);
    return g_default.load(std::memory_order_acquire);
}

codegen::DeviceLimits device_limits(int index) {
    if (index == kEmu) return emu_limits();
    if (index == kCpu) return host_limits();
    if (is_cuda(index)) {
        device_name(index); // checks it
        return cuda_devices().limits[static_cast<size_t>(index - kCuda0)];
    }
    fail("device", "internal: no device of index " + std::to_string(index));
}

} // namespace runtime

std::vector<std::string> devices() {
    std::vector<std::string> d = runtime::host_names();
    const runtime::CudaDevices& c = runtime::cuda_devices();
    for (size_t i = 0; i < c.names.size(); ++i)
        if (c.refused[i].empty()) d.push_back(c.names[i]);
    return d;
}

void set_default_device(const std::string& device) {
    runtime::g_default.store(runtime::device_index(device), std::memory_order_release);
}

std::string default_device() { return runtime::device_name(runtime::default_device_index()); }

} // namespace tempura
