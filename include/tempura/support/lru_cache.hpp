#pragma once
// A thread-safe cache with least-recently-used eviction: the plan, kernel and gradient-walk
// caches. Every cache of the process (and the freed-block pools of runtime/buffer.cpp) shares one
// byte budget, TEMPURA_CACHE_MB (default 512), read at every insert: what they hold together
// stays within it. Each entry is stamped with a process-wide tick when it is used; past the
// budget the entry used least recently, in whichever cache it is, is evicted first. Evicted
// values are destroyed after the locks are released: a value's destructor may take other locks
// (a compiled kernel's frees its JIT code under the JIT's lock).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tempura/support/env.hpp"

namespace tempura {

// TEMPURA_CACHE_MB in bytes (1 MiB to 1 TiB; 512 MiB when unset).
inline size_t cache_budget_bytes() {
    return static_cast<size_t>(env::get_int("TEMPURA_CACHE_MB", 512, 1, int64_t{1} << 20)) << 20;
}

struct LruStats {
    size_t entries = 0, bytes = 0, evictions = 0;
};

// One participant in the shared budget.
class BudgetedCache {
  public:
    static constexpr uint64_t kEmpty = std::numeric_limits<uint64_t>::max();
    virtual ~BudgetedCache() = default;
    // The tick of the least recently used entry, or kEmpty.
    virtual uint64_t oldest_tick() = 0;
    // Evicts the least recently used entry if its tick is below `before`; whether it did.
    virtual bool evict_oldest(uint64_t before) = 0;
};

// The shared budget: the bytes every participant holds, the tick, and the participants.
class CacheLedger {
  public:
    static CacheLedger& get() {
        static auto* l = new CacheLedger; // outlives the caches' static destructors
        return *l;
    }
    uint64_t next_tick() { return tick_.fetch_add(1, std::memory_order_relaxed) + 1; }
    void charge(size_t bytes) { bytes_.fetch_add(bytes, std::memory_order_relaxed); }
    void release(size_t bytes) { bytes_.fetch_sub(bytes, std::memory_order_relaxed); }
    size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
    // Whether `more` bytes fit beside what is held now.
    bool fits(size_t more) const { return bytes() + more <= cache_budget_bytes(); }

    void add(BudgetedCache* c) {
        std::lock_guard<std::mutex> l(mu_);
        caches_.push_back(c);
    }
    void remove(BudgetedCache* c) {
        std::lock_guard<std::mutex> l(mu_);
        std::erase(caches_, c);
    }
    // Evicts least recently used entries, across every participant, until the held bytes fit
    // the budget; entries used at or after `keep` (the one just inserted) stay. Called with no
    // cache lock held; a participant's lock is taken one at a time.
    void trim(uint64_t keep) {
        const size_t budget = cache_budget_bytes();
        std::lock_guard<std::mutex> l(mu_);
        while (bytes() > budget) {
            BudgetedCache* victim = nullptr;
            uint64_t oldest = BudgetedCache::kEmpty;
            for (BudgetedCache* c : caches_)
                if (const uint64_t t = c->oldest_tick(); t < oldest) {
                    oldest = t;
                    victim = c;
                }
            if (victim == nullptr || oldest >= keep || !victim->evict_oldest(keep)) break;
        }
    }

  private:
    std::mutex mu_;
    std::vector<BudgetedCache*> caches_;
    std::atomic<size_t> bytes_{0};
    std::atomic<uint64_t> tick_{0};
};

template <class V>
class LruCache final : public BudgetedCache {
  public:
    LruCache() { CacheLedger::get().add(this); }
    ~LruCache() override {
        CacheLedger::get().remove(this);
        clear();
    }
    LruCache(const LruCache&) = delete;
    LruCache& operator=(const LruCache&) = delete;

    // The value under `key` (now the most recently used), or nullopt.
    std::optional<V> find(const std::string& key) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = index_.find(key);
        if (it == index_.end()) return std::nullopt;
        order_.splice(order_.begin(), order_, it->second);
        it->second->tick = CacheLedger::get().next_tick();
        return it->second->value;
    }

    // Inserts `value` costing `bytes` under `key` unless the key is present: returns what is
    // cached under it then. Evicts least recently used entries (of this cache or another) past
    // the shared budget, never the new one, so a single entry larger than the budget still works
    // once.
    V insert(const std::string& key, V value, size_t bytes) {
        CacheLedger& ledger = CacheLedger::get();
        const uint64_t tick = ledger.next_tick();
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (auto it = index_.find(key); it != index_.end()) {
                order_.splice(order_.begin(), order_, it->second);
                it->second->tick = tick;
                return it->second->value;
            }
            order_.push_front(Entry{key, value, bytes, tick});
            index_.emplace(key, order_.begin());
            bytes_ += bytes;
            ledger.charge(bytes);
        }
        ledger.trim(tick);
        return value;
    }

    uint64_t oldest_tick() override {
        std::lock_guard<std::mutex> lock(mu_);
        return order_.empty() ? kEmpty : order_.back().tick;
    }
    bool evict_oldest(uint64_t before) override {
        std::optional<V> dead; // destroyed after the lock (declared first, so it dies last)
        std::lock_guard<std::mutex> lock(mu_);
        if (order_.empty() || order_.back().tick >= before) return false;
        Entry& last = order_.back();
        bytes_ -= last.bytes;
        CacheLedger::get().release(last.bytes);
        dead.emplace(std::move(last.value));
        index_.erase(last.key);
        order_.pop_back();
        ++evictions_;
        return true;
    }

    void clear() {
        std::list<Entry> dead; // destroyed after the lock
        std::lock_guard<std::mutex> lock(mu_);
        index_.clear();
        dead.swap(order_);
        CacheLedger::get().release(bytes_);
        bytes_ = 0;
    }

    LruStats stats() {
        std::lock_guard<std::mutex> lock(mu_);
        return LruStats{order_.size(), bytes_, evictions_};
    }

  private:
    struct Entry {
        std::string key;
        V value;
        size_t bytes;
        uint64_t tick; // when last used (CacheLedger's clock)
    };
    std::mutex mu_;
    std::list<Entry> order_; // most recently used first
    std::unordered_map<std::string, typename std::list<Entry>::iterator> index_;
    size_t bytes_ = 0, evictions_ = 0;
};

} // namespace tempura
