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

const std::vector<std::string>& names() {
    static const std::vector<std::string> n = {"CPU", "EMU"};
    return n;
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
    for (size_t i = 0; i < names().size(); ++i)
        if (names()[i] == name) return static_cast<int>(i);
    if (name == "CUDA" || name.rfind("CUDA:", 0) == 0) {
        if (!cuda::cuda_usable())
            fail("device", name + ": no usable CUDA device here (devices: " + listing() + ")");
        fail("device", name + ": running kernels on CUDA devices is not implemented yet; the "
                              "GPU code path runs on EMU");
    }
    fail("device", "unknown device '" + name + "' (devices: " + listing() + ")");
}

std::string different_devices(int a, int b) {
    return "tensors on different devices: " + device_name(a) + " and " + device_name(b);
}

const std::string& device_name(int index) {
    if (index < 0 || index >= static_cast<int>(names().size()))
        fail("device", "internal: no device of index " + std::to_string(index));
    return names()[static_cast<size_t>(index)];
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
    fail("device", "internal: no device of index " + std::to_string(index));
}

} // namespace runtime

std::vector<std::string> devices() { return runtime::names(); }

void set_default_device(const std::string& device) {
    runtime::g_default.store(runtime::device_index(device), std::memory_order_release);
}

std::string default_device() { return runtime::device_name(runtime::default_device_index()); }

} // namespace tempura
