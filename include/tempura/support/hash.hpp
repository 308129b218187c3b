#pragma once
// The one hash mixer of the project: node hashes (the intern table), the rangeifier's memo keys
// and the BEAM cache's keys all go through these.
#include <cstdint>

namespace tempura {

// Folds v into the running hash h (boost::hash_combine's 64-bit form).
constexpr uint64_t hash_combine(uint64_t h, uint64_t v) {
    return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 12) + (h >> 4));
}

// Avalanches a hash so every input bit reaches every output bit (splitmix64's finalizer).
constexpr uint64_t hash_finalize(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

} // namespace tempura
