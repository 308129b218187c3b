#pragma once
// A persistent pool of worker threads (TEMPURA_THREADS, default: the hardware's cores), started
// once and reused: independent kernels of a plan run on it, and later the THREAD opt.
#include <cstddef>
#include <cstdint>
#include <functional>

namespace tempura::runtime {

// At most this many threads per hardware thread, whatever TEMPURA_THREADS asks for.
inline constexpr int64_t kMaxThreadsPerHardwareThread = 4;

// The number of threads parallel work may use: TEMPURA_THREADS (capped at
// kMaxThreadsPerHardwareThread x the hardware threads, with a warning), else
// hardware_concurrency. Read once per process.
size_t thread_count();

// Runs task(i) for i in [0, n) on the pool and the calling thread; returns when all are done.
// The first exception thrown by a task is rethrown here.
void parallel_for(size_t n, const std::function<void(size_t)>& task);

} // namespace tempura::runtime
