#pragma once
// Helpers shared by the benchmark programs: medians, timing a callable, reproducible inputs.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;

inline double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median wall time of fn() over `reps` runs, after one warm-up run.
inline double median_ms(const std::function<void()>& fn, int reps) {
    fn();
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) {
        const auto t0 = Clock::now();
        fn();
        ms.push_back(ms_between(t0, Clock::now()));
    }
    return median(ms);
}

// n multiples of 1/steps in [-1, 1] from a fixed generator (the same on every machine).
inline std::vector<float> grid_floats(int64_t n, uint64_t seed, int64_t steps) {
    std::vector<float> v(static_cast<size_t>(n));
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (float& x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x = static_cast<float>(static_cast<int64_t>(s >> 40) % (2 * steps + 1) - steps) /
            static_cast<float>(steps);
    }
    return v;
}

// n floats in [-1, 1], multiples of 1/1000.
inline std::vector<float> random_floats(int64_t n, uint64_t seed) {
    return grid_floats(n, seed, 1000);
}

} // namespace bench
