#pragma once
// Helpers shared by the project's own tests.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <doctest/doctest.h>

#include "tempura/error.hpp"

// TEMPURA_TEST_ASAN is 1 in a build under AddressSanitizer. The tests that repeat one check over
// many random instances run fewer there: the release build runs them all, and the memory errors
// the sanitizers look for sit on the same code paths, which the fewer instances reach as well.
#if defined(__SANITIZE_ADDRESS__)
#define TEMPURA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEMPURA_TEST_ASAN 1
#endif
#endif
#ifdef TEMPURA_TEST_ASAN
inline constexpr bool kTestUnderAsan = true;
#else
inline constexpr bool kTestUnderAsan = false;
#endif

// Sets an environment variable for its lifetime (nullptr: unsets it), then restores what was
// there (or unsets it).
class EnvVar {
  public:
    EnvVar(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) {
            had_ = true;
            old_ = old;
        }
        if (value != nullptr)
            setenv(name, value, 1);
        else
            unsetenv(name);
    }
    EnvVar(const char* name, const std::string& value) : EnvVar(name, value.c_str()) {}
    ~EnvVar() {
        if (had_)
            setenv(name_.c_str(), old_.c_str(), 1);
        else
            unsetenv(name_.c_str());
    }
    EnvVar(const EnvVar&) = delete;
    EnvVar& operator=(const EnvVar&) = delete;

  private:
    std::string name_, old_;
    bool had_ = false;
};

// How many times `needle` occurs in `hay` (overlapping occurrences too).
inline size_t count_of(const std::string& hay, const std::string& needle) {
    size_t n = 0;
    for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
    return n;
}

// Every element of `got` within tol * (1 + |want|) of `want`'s (NaN never is).
inline void check_close(const std::vector<float>& got, const std::vector<float>& want, float tol) {
    REQUIRE(got.size() == want.size());
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
        if (!(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])))) ++bad;
    CHECK(bad == 0);
}

// A float's place on the line of all floats in order (-0 and +0 at the same place).
inline int64_t ordinal(float a) {
    int32_t i;
    std::memcpy(&i, &a, 4);
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : i;
}

// Distance in units in the last place between two finite floats: how many floats lie between.
inline int64_t ulps(float a, float b) { return std::llabs(ordinal(a) - ordinal(b)); }

// The message of the tempura::Error that f throws, or "<no error>".
template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const tempura::Error& e) {
        return e.what();
    }
    return "<no error>";
}

// What Debian's /usr/bin/python3 prints running `script` (the tests' PyTorch comparisons),
// written to a temporary file named after `tag`; "" when it fails or prints nothing (no torch).
inline std::string run_python(const std::string& script, const std::string& tag) {
    const std::string path = "/tmp/tempura_" + tag + "_" + std::to_string(getpid()) + ".py";
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) return std::string();
    std::fputs(script.c_str(), f);
    std::fclose(f);
    std::FILE* p = popen(("/usr/bin/python3 " + path + " 2>/dev/null").c_str(), "r");
    std::string out;
    if (p != nullptr) {
        char buf[4096];
        while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
        if (pclose(p) != 0) out.clear();
    }
    std::remove(path.c_str());
    return out;
}

// An integer test knob from the environment (e.g. TEMPURA_FUZZ_N), or `fallback` when unset.
inline int64_t env_int(const char* name, int64_t fallback) {
    const char* e = std::getenv(name);
    return e && *e ? std::strtoll(e, nullptr, 0) : fallback;
}

// The random choices of the tests' program generators (seeded, so a failure replays).
class RandomChoices {
  public:
    explicit RandomChoices(uint64_t seed) : rng_(seed) {}

  protected:
    std::mt19937_64 rng_;

    int64_t irange(int64_t lo, int64_t hi) { // inclusive
        return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
    }
    double urand(double lo, double hi) {
        return std::uniform_real_distribution<double>(lo, hi)(rng_);
    }
    bool chance(double p) { return urand(0, 1) < p; }
    // An index drawn with the given weights.
    size_t weighted(const std::vector<int>& w) {
        int total = 0;
        for (int x : w) total += x;
        int r = static_cast<int>(irange(0, total - 1));
        for (size_t i = 0; i < w.size(); ++i) {
            if (r < w[i]) return i;
            r -= w[i];
        }
        return w.size() - 1;
    }
};
