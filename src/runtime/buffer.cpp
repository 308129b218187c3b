// runtime::Buffer and the process-wide registry of live buffers.
#include "tempura/runtime/buffer.hpp"

#include <atomic>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "tempura/error.hpp"

namespace tempura::runtime {

namespace {

struct Registry {
    std::mutex mu;
    std::unordered_map<int64_t, std::weak_ptr<Buffer>> live;
};

// Leaked on purpose: buffers held by static objects may die after main() returns, and their
// destructors still unregister themselves.
Registry& registry() {
    static Registry* r = new Registry;
    return *r;
}

std::atomic<int64_t> next_id{1};

} // namespace

Buffer::Buffer(DType dtype, int64_t numel) : dtype_(dtype), numel_(numel), nbytes_(0), id_(0) {
    if (dtype.is_ptr || dtype.count != 1 || dtype.scalar == Scalar::Void ||
        dtype.scalar == Scalar::Index)
        fail("buffer", "cannot hold elements of dtype " + dtype.name());
    if (numel < 0) fail("buffer", "negative element count " + std::to_string(numel));
    const auto item = static_cast<uint64_t>(dtype.itemsize());
    const uint64_t limit = std::numeric_limits<int64_t>::max() / 2;
    if (static_cast<uint64_t>(numel) > limit / item)
        fail("buffer", std::to_string(numel) + " elements of " + dtype.name() + " are too many");
    nbytes_ = static_cast<size_t>(static_cast<uint64_t>(numel) * item);
    // Round the allocation up to whole 64-byte lines (and at least one), so that a zero-sized
    // buffer still has a valid pointer and vector loads at the tail stay inside the block.
    const size_t alloc = (nbytes_ + kAlignment - 1) / kAlignment * kAlignment + kAlignment;
    try {
        data_ = ::operator new (alloc, std::align_val_t{kAlignment});
    } catch (const std::bad_alloc&) {
        fail("buffer", "cannot allocate " + std::to_string(nbytes_) + " bytes");
    }
    std::memset(data_, 0, alloc);
    id_ = next_id.fetch_add(1, std::memory_order_relaxed);
}

Buffer::~Buffer() {
    {
        Registry& r = registry();
        std::lock_guard lock(r.mu);
        // Only erase our own entry: the id is unique, so any entry under it is ours.
        r.live.erase(id_);
    }
    ::operator delete (data_, std::align_val_t{kAlignment});
}

std::shared_ptr<Buffer> make_buffer(DType dtype, int64_t numel) {
    auto b = std::make_shared<Buffer>(dtype, numel);
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    r.live[b->id()] = b;
    return b;
}

void register_buffer(const std::shared_ptr<Buffer>& buffer) {
    if (!buffer) fail("buffer", "cannot register a null buffer");
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    r.live[buffer->id()] = buffer;
}

std::shared_ptr<Buffer> lookup_buffer(int64_t id) {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    auto it = r.live.find(id);
    if (it != r.live.end())
        if (auto b = it->second.lock()) return b;
    fail("buffer", "no live buffer with id " + std::to_string(id));
}

size_t live_buffer_count() {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    size_t n = 0;
    for (const auto& [id, w] : r.live) n += !w.expired();
    return n;
}

} // namespace tempura::runtime
