// runtime::Buffer and the process-wide registry of live buffers.
#include "tempura/runtime/buffer.hpp"

#include <atomic>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

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

// Freed blocks kept for reuse, by size: a plan re-run allocates its outputs again, and fresh
// memory from the OS costs a page fault per 4 KiB on first touch (tens of milliseconds for a
// 64 MiB output, more than the kernel writing it).
struct BlockCache {
    static constexpr size_t kMaxBytes = size_t{1} << 30;
    std::mutex mu;
    std::unordered_map<size_t, std::vector<void*>> free;
    size_t bytes = 0;
};
BlockCache& block_cache() {
    static BlockCache* c = new BlockCache;
    return *c;
}

void* take_block(size_t alloc) {
    BlockCache& c = block_cache();
    {
        std::lock_guard lock(c.mu);
        auto it = c.free.find(alloc);
        if (it != c.free.end() && !it->second.empty()) {
            void* p = it->second.back();
            it->second.pop_back();
            c.bytes -= alloc;
            return p;
        }
    }
    try {
        return ::operator new (alloc, std::align_val_t{Buffer::kAlignment});
    } catch (const std::bad_alloc&) {
        fail("buffer", "cannot allocate " + std::to_string(alloc) + " bytes");
    }
}

void give_block(void* p, size_t alloc) {
    BlockCache& c = block_cache();
    {
        std::lock_guard lock(c.mu);
        if (c.bytes + alloc <= BlockCache::kMaxBytes) {
            c.free[alloc].push_back(p);
            c.bytes += alloc;
            return;
        }
    }
    ::operator delete (p, std::align_val_t{Buffer::kAlignment});
}

} // namespace

Buffer::Buffer(DType dtype, int64_t numel, bool zero)
    : dtype_(dtype), numel_(numel), nbytes_(0), id_(0) {
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
    data_ = take_block(alloc);
    if (zero)
        std::memset(data_, 0, alloc);
    else
        std::memset(static_cast<char*>(data_) + alloc - kAlignment, 0, kAlignment);
    id_ = next_id.fetch_add(1, std::memory_order_relaxed);
}

Buffer::~Buffer() {
    {
        Registry& r = registry();
        std::lock_guard lock(r.mu);
        // Only erase our own entry: the id is unique, so any entry under it is ours.
        r.live.erase(id_);
    }
    give_block(data_, (nbytes_ + kAlignment - 1) / kAlignment * kAlignment + kAlignment);
}

std::shared_ptr<Buffer> make_buffer(DType dtype, int64_t numel, bool zero) {
    auto b = std::make_shared<Buffer>(dtype, numel, zero);
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
