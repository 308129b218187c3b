#pragma once
// Devices: where a tensor's memory lives and where its kernels run. "CPU" (the host, index 0),
// "EMU" (the emulated GPU: the GPU code path, from gpu dims to PTX, run on the CPU; index 1), and
// "CUDA:n" (an NVIDIA GPU of sm_80 .. sm_90 through the CUDA driver; index kCuda0 + n; "CUDA" is
// "CUDA:0"), listed only where the driver loads and reports the device. A CUDA device's memory
// is its own: its buffers are reached from the host through copies.
#include <string>
#include <vector>

#include "tempura/codegen/opts.hpp"

namespace tempura {

// The devices usable here, "CPU" first.
std::vector<std::string> devices();

// The device new tensors are created on ("CPU" unless TEMPURA_DEVICE or set_default_device says
// otherwise). Throws "[device] ..." for a name that is not a usable device.
void set_default_device(const std::string& device);
std::string default_device();

namespace runtime {

inline constexpr int kCpu = 0;
inline constexpr int kEmu = 1;
inline constexpr int kCuda0 = 2; // CUDA:n is kCuda0 + n
inline bool is_cuda(int index) { return index >= kCuda0; }
inline int cuda_ordinal(int index) { return index - kCuda0; }

// The index of a device name ("CPU", "EMU", "CUDA", "CUDA:1"); throws "[device] unknown device
// 'X' (devices: CPU, EMU)" or, for a CUDA device that cannot be used, says why.
int device_index(const std::string& name);
// "tensors on different devices: CPU and EMU": what an op that mixes them says.
std::string different_devices(int a, int b);
// The canonical name of a device index.
const std::string& device_name(int index);
// The default device's index.
int default_device_index();
// While alive, the calling thread's default device is `index`: an op that makes tensors of its
// own (argmax's indices, sort's, one_hot's classes) makes them on its operand's device.
class DeviceScope {
  public:
    explicit DeviceScope(int index);
    ~DeviceScope();
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

  private:
    int saved_;
};
// What the codegen may assume of the device.
codegen::DeviceLimits device_limits(int index);

} // namespace runtime
} // namespace tempura
