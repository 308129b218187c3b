#pragma once
// runtime::Buffer: `numel` elements of one dtype, zero-initialized, in host memory (64-byte
// aligned) or in a device's own memory (a CUDA GPU's), which host code reaches only through
// copies. Buffers get a process-unique id; the tensor-level graph refers to them by that id (a
// BUFFER node's arg is {id, numel}), and lookup_buffer() finds a live one again.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tempura/ir/dtype.hpp"

namespace tempura::runtime {

// The memory of a device that is not the host's: how buffers on it are allocated, freed and
// copied. The runtime knows devices only by index (realize/device.hpp's); the device table
// registers one Allocator per device with memory of its own, so that this layer never names a
// backend. Addresses are the device's (a CUdeviceptr for CUDA), never host pointers.
class Allocator {
  public:
    virtual ~Allocator() = default;
    virtual std::string name() const = 0; // the device, for messages ("CUDA:0")
    // `bytes` > 0. Throws tempura::Error when the device has no room.
    virtual uint64_t alloc(size_t bytes) = 0;
    // Never throws: buffers are freed from destructors, also while the process exits.
    virtual void free(uint64_t address, size_t bytes) noexcept = 0;
    virtual void zero(uint64_t address, size_t bytes) = 0;
    virtual void copyin(uint64_t dst, const void* src, size_t bytes) = 0;
    // Returns once `dst` holds the bytes (after the work queued before that writes them).
    virtual void copyout(void* dst, uint64_t src, size_t bytes) = 0;
    virtual void copy(uint64_t dst, uint64_t src, size_t bytes) = 0; // within the device
};

// Makes buffers of `device` live in `allocator`'s memory from now on (once per device, before
// its first buffer; a second registration for the same device is ignored). Allocators live for
// the process.
void register_allocator(int device, std::unique_ptr<Allocator> allocator);
// The device's allocator, or null when its buffers are host memory (CPU, EMU).
Allocator* allocator_of(int device);

class Buffer {
  public:
    static constexpr size_t kAlignment = 64;

    // Throws tempura::Error for a negative numel, a non-scalar dtype or a size that cannot be
    // allocated. numel 0 is allowed (the buffer still has a valid, aligned address). The elements
    // are zero unless `zero` is false (for outputs a kernel writes in full). Memory comes from a
    // process-wide cache of freed blocks of the device when one of the size is there.
    Buffer(DType dtype, int64_t numel, bool zero = true, int device = 0);
    ~Buffer();
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    // Host memory only: a buffer in device memory throws "[buffer] buffer 7 is in CUDA:0's
    // memory, not the host's (copy it)": a device address is no pointer the host may follow.
    void* data();
    const void* data() const;
    // Whether data() may be used (the memory is the host's).
    bool on_host() const { return allocator_ == nullptr; }
    // The address kernels get: data() for host memory, the device's address otherwise.
    uint64_t address() const { return address_; }

    // Copies between the buffer and host memory (`bytes` <= nbytes(), from the start), or the
    // first nbytes() bytes of another buffer (holding at least as many): memcpy for host memory,
    // the device's copies otherwise (through the host between two devices with memory of their
    // own).
    void copy_from_host(const void* src, size_t bytes);
    void copy_to_host(void* dst, size_t bytes) const;
    void copy_from(const Buffer& src);

    DType dtype() const { return dtype_; }
    int64_t numel() const { return numel_; }
    size_t nbytes() const { return nbytes_; }
    int64_t id() const { return id_; }
    // The device whose memory this is (realize/device.hpp's index: 0 is the CPU). EMU's memory
    // is host memory too; the tag is what keeps tensors of different devices apart.
    int device() const { return device_; }

  private:
    [[noreturn]] void not_on_host() const;

    DType dtype_;
    int64_t numel_;
    size_t nbytes_;
    size_t alloc_ = 0; // bytes taken from the device (a whole number of 64-byte lines)
    int64_t id_;
    uint64_t address_ = 0;
    int device_ = 0;
    Allocator* allocator_ = nullptr;
};

// The buffer's bytes as the host may read them: data() for host memory, else a copy of them in
// `staging` (which the caller keeps while it reads).
const void* host_bytes(const Buffer& b, std::vector<unsigned char>& staging);

// A new buffer on `device`, registered so that lookup_buffer(id) finds it while it lives.
std::shared_ptr<Buffer> make_buffer(DType dtype, int64_t numel, bool zero = true, int device = 0);

// Registers a buffer made without make_buffer (idempotent), so that lookup_buffer finds it.
void register_buffer(const std::shared_ptr<Buffer>& buffer);

// The live buffer with this id (process-wide registry of weak references, thread-safe).
// Throws tempura::Error if no buffer with that id is alive.
std::shared_ptr<Buffer> lookup_buffer(int64_t id);

// Frees every cached block of every device (tempura::clear_caches does): the memory of buffers
// that died goes back to the host or the device.
void release_cached_blocks();

// Number of buffers alive in the registry (for leak tests).
size_t live_buffer_count();

} // namespace tempura::runtime
