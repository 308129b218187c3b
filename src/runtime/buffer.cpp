// runtime::Buffer and the process-wide registry of live buffers.
#include "tempura/runtime/buffer.hpp"

#include <array>
#include <atomic>
#include <cstring>
#include <iterator>
#include <limits>
#include <list>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "tempura/error.hpp"
#include "tempura/support/lru_cache.hpp"

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

// Device allocators by device index (register_allocator); leaked with the process.
constexpr size_t kMaxDevices = 64;
std::array<std::atomic<Allocator*>, kMaxDevices> g_allocators{};

void free_block(Allocator* a, uint64_t p, size_t alloc) {
    if (a != nullptr)
        a->free(p, alloc);
    else
        ::operator delete (reinterpret_cast<void*>(p), std::align_val_t{Buffer::kAlignment});
}

// Freed blocks kept for reuse, by device and size: a plan re-run allocates its outputs again, and
// fresh host memory costs a page fault per 4 KiB on first touch (tens of milliseconds for a
// 64 MiB output, more than the kernel writing it); a device allocation costs a driver call that
// waits for the device. Host blocks are pointers; a device's are its addresses. The blocks share
// TEMPURA_CACHE_MB with the plan and kernel caches (support/lru_cache.hpp): a block is kept only
// while it fits beside what they hold, and the least recently freed block goes first when an
// entry of theirs needs the room.
struct BlockCache final : BudgetedCache {
    static constexpr size_t kMaxBytes = size_t{1} << 30; // per device
    struct Block {
        Allocator* allocator;
        size_t bytes;
        uint64_t address;
        uint64_t tick;
    };
    using Order = std::list<Block>; // least recently freed first
    struct Pool {
        std::unordered_map<size_t, std::vector<Order::iterator>> free;
        size_t bytes = 0;
    };
    std::mutex mu;
    Order order;
    std::unordered_map<Allocator*, Pool> pools; // nullptr: host memory

    BlockCache() { CacheLedger::get().add(this); }
    // Takes block `it` out (under mu).
    void unlink(Order::iterator it) {
        Pool& pool = pools[it->allocator];
        auto& v = pool.free[it->bytes];
        std::erase(v, it);
        pool.bytes -= it->bytes;
        CacheLedger::get().release(it->bytes);
        order.erase(it);
    }
    uint64_t oldest_tick() override {
        std::lock_guard lock(mu);
        return order.empty() ? kEmpty : order.front().tick;
    }
    bool evict_oldest(uint64_t before) override {
        Block b{};
        {
            std::lock_guard lock(mu);
            if (order.empty() || order.front().tick >= before) return false;
            b = order.front();
            unlink(order.begin());
        }
        free_block(b.allocator, b.address, b.bytes);
        return true;
    }
};
BlockCache& block_cache() {
    static BlockCache* c = new BlockCache;
    return *c;
}

uint64_t cached_block(Allocator* a, size_t alloc) {
    BlockCache& c = block_cache();
    std::lock_guard lock(c.mu);
    BlockCache::Pool& pool = c.pools[a];
    auto it = pool.free.find(alloc);
    if (it == pool.free.end() || it->second.empty()) return 0;
    const uint64_t p = it->second.back()->address;
    c.unlink(it->second.back());
    return p;
}

// Frees every cached block of a device (nullptr: the host's).
void drop_cached_blocks(Allocator* a) {
    std::vector<BlockCache::Block> dead;
    {
        BlockCache& c = block_cache();
        std::lock_guard lock(c.mu);
        for (auto it = c.order.begin(); it != c.order.end();) {
            auto next = std::next(it);
            if (it->allocator == a) {
                dead.push_back(*it);
                c.unlink(it);
            }
            it = next;
        }
    }
    for (const BlockCache::Block& b : dead) free_block(b.allocator, b.address, b.bytes);
}

uint64_t take_block(Allocator* a, size_t alloc) {
    if (const uint64_t p = cached_block(a, alloc)) return p;
    if (a != nullptr) {
        try {
            return a->alloc(alloc);
        } catch (const Error&) {
            drop_cached_blocks(a); // the cached blocks may be what fills the device
        }
        return a->alloc(alloc);
    }
    try {
        return reinterpret_cast<uint64_t>(
            ::operator new (alloc, std::align_val_t{Buffer::kAlignment}));
    } catch (const std::bad_alloc&) {
        fail("buffer", "cannot allocate " + std::to_string(alloc) + " bytes");
    }
}

void give_block(Allocator* a, uint64_t p, size_t alloc) {
    {
        BlockCache& c = block_cache();
        CacheLedger& ledger = CacheLedger::get();
        std::lock_guard lock(c.mu);
        BlockCache::Pool& pool = c.pools[a];
        if (pool.bytes + alloc <= BlockCache::kMaxBytes && ledger.fits(alloc)) {
            c.order.push_back(BlockCache::Block{a, alloc, p, ledger.next_tick()});
            pool.free[alloc].push_back(std::prev(c.order.end()));
            pool.bytes += alloc;
            ledger.charge(alloc);
            return;
        }
    }
    free_block(a, p, alloc);
}

} // namespace

void register_allocator(int device, std::unique_ptr<Allocator> allocator) {
    if (device < 0 || static_cast<size_t>(device) >= kMaxDevices)
        fail("buffer", "no room for an allocator of device " + std::to_string(device));
    Allocator* expected = nullptr;
    if (g_allocators[static_cast<size_t>(device)].compare_exchange_strong(expected,
                                                                          allocator.get()))
        allocator.release(); // lives for the process: buffers may be freed after main()
}

Allocator* allocator_of(int device) {
    if (device < 0 || static_cast<size_t>(device) >= kMaxDevices) return nullptr;
    return g_allocators[static_cast<size_t>(device)].load(std::memory_order_acquire);
}

Buffer::Buffer(DType dtype, int64_t numel, bool zero, int device)
    : dtype_(dtype), numel_(numel), nbytes_(0), id_(0), device_(device),
      allocator_(allocator_of(device)) {
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
    // buffer still has a valid address and vector loads at the tail stay inside the block.
    alloc_ = (nbytes_ + kAlignment - 1) / kAlignment * kAlignment + kAlignment;
    address_ = take_block(allocator_, alloc_);
    if (allocator_ != nullptr) {
        // Kernels never read past nbytes (EMU checks that of the same programs): only the
        // elements need zeroing.
        try {
            if (zero) allocator_->zero(address_, alloc_);
        } catch (...) {
            give_block(allocator_, address_, alloc_);
            throw;
        }
    } else if (zero) {
        std::memset(reinterpret_cast<void*>(address_), 0, alloc_);
    } else {
        std::memset(reinterpret_cast<char*>(address_) + alloc_ - kAlignment, 0, kAlignment);
    }
    id_ = next_id.fetch_add(1, std::memory_order_relaxed);
}

Buffer::~Buffer() {
    {
        Registry& r = registry();
        std::lock_guard lock(r.mu);
        // Only erase our own entry: the id is unique, so any entry under it is ours.
        r.live.erase(id_);
    }
    give_block(allocator_, address_, alloc_);
}

void Buffer::not_on_host() const {
    fail("buffer", "buffer " + std::to_string(id_) + " is in " + allocator_->name() +
                       "'s memory, not the host's (copy it)");
}

void* Buffer::data() {
    if (allocator_ != nullptr) not_on_host();
    return reinterpret_cast<void*>(address_);
}

const void* Buffer::data() const {
    if (allocator_ != nullptr) not_on_host();
    return reinterpret_cast<const void*>(address_);
}

namespace {
void check_bytes(const char* what, size_t bytes, const Buffer& b) {
    if (bytes > b.nbytes())
        fail("buffer", std::string(what) + " " + std::to_string(bytes) + " bytes of buffer " +
                           std::to_string(b.id()) + ", which holds " + std::to_string(b.nbytes()));
}
} // namespace

void Buffer::copy_from_host(const void* src, size_t bytes) {
    check_bytes("copying", bytes, *this);
    if (bytes == 0) return;
    if (allocator_ != nullptr)
        allocator_->copyin(address_, src, bytes);
    else
        std::memcpy(reinterpret_cast<void*>(address_), src, bytes);
}

void Buffer::copy_to_host(void* dst, size_t bytes) const {
    check_bytes("reading", bytes, *this);
    if (bytes == 0) return;
    if (allocator_ != nullptr)
        allocator_->copyout(dst, address_, bytes);
    else
        std::memcpy(dst, reinterpret_cast<const void*>(address_), bytes);
}

void Buffer::copy_from(const Buffer& src) {
    if (src.nbytes_ < nbytes_)
        fail("buffer", "copying buffer " + std::to_string(src.id_) + " (" +
                           std::to_string(src.nbytes_) + " bytes) into buffer " +
                           std::to_string(id_) + " (" + std::to_string(nbytes_) + " bytes)");
    if (nbytes_ == 0) return;
    if (src.allocator_ == nullptr) {
        copy_from_host(src.data(), nbytes_);
    } else if (allocator_ == nullptr) {
        src.copy_to_host(data(), nbytes_);
    } else if (src.allocator_ == allocator_) {
        allocator_->copy(address_, src.address_, nbytes_);
    } else {
        std::vector<unsigned char> staging(nbytes_); // two devices: through the host
        src.copy_to_host(staging.data(), nbytes_);
        copy_from_host(staging.data(), nbytes_);
    }
}

const void* host_bytes(const Buffer& b, std::vector<unsigned char>& staging) {
    if (b.on_host()) return b.data();
    staging.resize(b.nbytes());
    b.copy_to_host(staging.data(), staging.size());
    return staging.data();
}

std::shared_ptr<Buffer> make_buffer(DType dtype, int64_t numel, bool zero, int device) {
    auto b = std::make_shared<Buffer>(dtype, numel, zero, device);
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

void release_cached_blocks() {
    std::vector<Allocator*> devices;
    {
        BlockCache& c = block_cache();
        std::lock_guard lock(c.mu);
        for (const auto& [a, pool] : c.pools) devices.push_back(a);
    }
    for (Allocator* a : devices) drop_cached_blocks(a);
}

size_t live_buffer_count() {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    size_t n = 0;
    for (const auto& [id, w] : r.live) n += !w.expired();
    return n;
}

} // namespace tempura::runtime
