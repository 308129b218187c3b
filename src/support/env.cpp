// Reading TEMPURA_* variables, with one warning per unusable value.
#include "tempura/support/env.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

namespace tempura::env {

namespace {

struct Warnings {
    std::mutex mu;
    std::set<std::string> said;
    std::vector<std::string> order;
};
Warnings& warnings() {
    static auto* w = new Warnings; // never destroyed: static destructors may still warn
    return *w;
}

} // namespace

void warn_once(const std::string& message) {
    Warnings& w = warnings();
    {
        std::lock_guard<std::mutex> lock(w.mu);
        if (w.said.size() >= 1024 || !w.said.insert(message).second) return; // bounded
        w.order.push_back(message);
    }
    std::fprintf(stderr, "tempura: %s\n", message.c_str());
}

std::vector<std::string> warnings_given() {
    Warnings& w = warnings();
    std::lock_guard<std::mutex> lock(w.mu);
    return w.order;
}

int64_t get_int(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
    const char* e = std::getenv(name);
    if (e == nullptr || *e == '\0') return fallback;
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    const std::string use = "; using " + std::to_string(fallback);
    if (end == e || *end != '\0' || errno == ERANGE) {
        warn_once(std::string("ignoring ") + name + "=" + e + " (not an integer)" + use);
        return fallback;
    }
    if (v < lo || v > hi) {
        warn_once(std::string("ignoring ") + name + "=" + e + " (expected " + std::to_string(lo) +
                  " to " + std::to_string(hi) + ")" + use);
        return fallback;
    }
    return v;
}

bool get_flag(const char* name) {
    const char* e = std::getenv(name);
    if (e == nullptr || *e == '\0') return false;
    const std::string v = e;
    if (v == "0") return false;
    if (v == "1") return true;
    warn_once(std::string("ignoring ") + name + "=" + v + " (expected 0 or 1); using 0");
    return false;
}

std::string get_string(const char* name) {
    const char* e = std::getenv(name);
    return e == nullptr ? std::string() : std::string(e);
}

int debug_level() { return static_cast<int>(get_int("TEMPURA_DEBUG", 0, 0, 7)); }

} // namespace tempura::env
