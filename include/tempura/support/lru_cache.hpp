#pragma once
// A thread-safe cache with a byte budget and least-recently-used eviction: the plan and kernel
// caches. The budget is TEMPURA_CACHE_MB (default 512) for each cache, read at every insert.
// Evicted values are destroyed after the lock is released: a value's destructor may take other
// locks (a compiled kernel's frees its JIT code under the JIT's lock).
#include <cstddef>
#include <cstdint>
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

template <class V>
class LruCache {
  public:
    // The value under `key` (now the most recently used), or nullopt.
    std::optional<V> find(const std::string& key) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = index_.find(key);
        if (it == index_.end()) return std::nullopt;
        order_.splice(order_.begin(), order_, it->second);
        return it->second->value;
    }

    // Inserts `value` costing `bytes` under `key` unless the key is present: returns what is
    // cached under it then. Evicts least recently used entries past the budget (never the new
    // one, so a single entry larger than the budget still works once).
    V insert(const std::string& key, V value, size_t bytes) {
        std::vector<V> dead; // destroyed after the lock (declared first, so it dies last)
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = index_.find(key); it != index_.end()) {
            order_.splice(order_.begin(), order_, it->second);
            return it->second->value;
        }
        order_.push_front(Entry{key, value, bytes});
        index_.emplace(key, order_.begin());
        bytes_ += bytes;
        const size_t budget = cache_budget_bytes();
        while (bytes_ > budget && order_.size() > 1) {
            Entry& last = order_.back();
            bytes_ -= last.bytes;
            dead.push_back(std::move(last.value));
            index_.erase(last.key);
            order_.pop_back();
            ++evictions_;
        }
        return value;
    }

    void clear() {
        std::list<Entry> dead; // destroyed after the lock
        std::lock_guard<std::mutex> lock(mu_);
        index_.clear();
        dead.swap(order_);
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
    };
    std::mutex mu_;
    std::list<Entry> order_; // most recently used first
    std::unordered_map<std::string, typename std::list<Entry>::iterator> index_;
    size_t bytes_ = 0, evictions_ = 0;
};

} // namespace tempura
