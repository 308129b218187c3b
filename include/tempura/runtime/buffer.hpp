#pragma once
// runtime::Buffer: a block of host memory holding `numel` elements of one dtype, 64-byte aligned
// and zero-initialized. Buffers get a process-unique id; the tensor-level graph refers to them by
// that id (a BUFFER node's arg is {id, numel}), and lookup_buffer() finds a live one again.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tempura/ir/dtype.hpp"

namespace tempura::runtime {

class Buffer {
  public:
    static constexpr size_t kAlignment = 64;

    // Throws tempura::Error for a negative numel, a non-scalar dtype or a size that cannot be
    // allocated. numel 0 is allowed (data() is still a valid, aligned pointer). The elements are
    // zero unless `zero` is false (for outputs a kernel writes in full). Memory comes from a
    // process-wide cache of freed blocks when one of the size is there.
    Buffer(DType dtype, int64_t numel, bool zero = true);
    ~Buffer();
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    void* data() { return data_; }
    const void* data() const { return data_; }
    DType dtype() const { return dtype_; }
    int64_t numel() const { return numel_; }
    size_t nbytes() const { return nbytes_; }
    int64_t id() const { return id_; }
    // The device whose memory this is (realize/device.hpp's index: 0 is the CPU). EMU's memory
    // is host memory too; the tag is what keeps tensors of different devices apart.
    int device() const { return device_; }
    void set_device(int d) { device_ = d; }

  private:
    DType dtype_;
    int64_t numel_;
    size_t nbytes_;
    int64_t id_;
    void* data_ = nullptr;
    int device_ = 0;
};

// A new buffer, registered so that lookup_buffer(id) finds it while it lives.
std::shared_ptr<Buffer> make_buffer(DType dtype, int64_t numel, bool zero = true);

// Registers a buffer made without make_buffer (idempotent), so that lookup_buffer finds it.
void register_buffer(const std::shared_ptr<Buffer>& buffer);

// The live buffer with this id (process-wide registry of weak references, thread-safe).
// Throws tempura::Error if no buffer with that id is alive.
std::shared_ptr<Buffer> lookup_buffer(int64_t id);

// Number of buffers alive in the registry (for leak tests).
size_t live_buffer_count();

} // namespace tempura::runtime
