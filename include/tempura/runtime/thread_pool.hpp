#pragma once
// A persistent pool of worker threads (TEMPURA_THREADS, default: the hardware's cores), started
// once and reused: independent kernels of a plan run on it, and later the THREAD opt.
#include <cstddef>
#include <functional>

namespace tempura::runtime {

// The number of threads parallel work may use (TEMPURA_THREADS, else hardware_concurrency).
size_t thread_count();

// Runs task(i) for i in [0, n) on the pool and the calling thread; returns when all are done.
// The first exception thrown by a task is rethrown here.
void parallel_for(size_t n, const std::function<void(size_t)>& task);

} // namespace tempura::runtime
