// The persistent thread pool behind parallel_for.
#include "tempura/runtime/thread_pool.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "tempura/support/env.hpp"

namespace tempura::runtime {

size_t thread_count() {
    static const size_t n = [] {
        const unsigned h = std::thread::hardware_concurrency();
        const int64_t hw = h == 0 ? 1 : static_cast<int64_t>(h);
        const int64_t v = env::get_int("TEMPURA_THREADS", hw, 1, INT64_MAX);
        // More workers than a few per hardware thread only slow kernels down, and a huge count
        // (TEMPURA_THREADS=100000) would exhaust the user's process limit.
        const int64_t cap = kMaxThreadsPerHardwareThread * hw;
        if (v > cap) {
            env::warn_once("TEMPURA_THREADS=" + std::to_string(v) + " is more than " +
                           std::to_string(kMaxThreadsPerHardwareThread) + " x the " +
                           std::to_string(hw) + " hardware threads; using " + std::to_string(cap));
            return static_cast<size_t>(cap);
        }
        return static_cast<size_t>(v);
    }();
    return n;
}

namespace {

class Pool {
  public:
    explicit Pool(size_t workers) {
        for (size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
    }
    ~Pool() {
        {
            std::lock_guard<std::mutex> l(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto& t : threads_) t.join();
    }

    void run(size_t n, const std::function<void(size_t)>& task) {
        std::unique_lock<std::mutex> caller(run_mu_); // one parallel_for at a time
        {
            std::lock_guard<std::mutex> l(mu_);
            task_ = &task;
            n_ = n;
            next_.store(0);
            done_ = 0;
            error_ = nullptr;
            generation_.fetch_add(1, std::memory_order_release);
        }
        cv_.notify_all();
        drain();
        std::unique_lock<std::mutex> l(mu_);
        // Also wait for every worker to leave drain(): a late one must not take indices of the
        // next run with this run's task.
        done_cv_.wait(l, [&] { return done_ == n_ && active_ == 0; });
        task_ = nullptr;
        if (error_) std::rethrow_exception(error_);
    }

  private:
    void drain() {
        for (;;) {
            const size_t i = next_.fetch_add(1);
            if (i >= n_) return;
            std::exception_ptr err;
            try {
                (*task_)(i);
            } catch (...) {
                err = std::current_exception();
            }
            std::lock_guard<std::mutex> l(mu_);
            if (err && !error_) error_ = err;
            if (++done_ == n_) done_cv_.notify_all();
        }
    }
    void work() {
        uint64_t seen = 0;
        for (;;) {
            // Spin a little before sleeping: plans run kernels back to back, and waking a
            // sleeping thread costs tens of microseconds, as much as a small kernel.
            const auto until = std::chrono::steady_clock::now() + kSpin;
            while (generation_.load(std::memory_order_acquire) == seen) {
                for (int i = 0; i < 64; ++i) pause();
                if (std::chrono::steady_clock::now() > until) break;
            }
            {
                std::unique_lock<std::mutex> l(mu_);
                cv_.wait(l, [&] { return stop_ || (generation_ != seen && task_ != nullptr); });
                if (stop_) return;
                seen = generation_;
                ++active_;
            }
            drain();
            std::lock_guard<std::mutex> l(mu_);
            if (--active_ == 0) done_cv_.notify_all();
        }
    }

    std::vector<std::thread> threads_;
    std::mutex mu_, run_mu_;
    std::condition_variable cv_, done_cv_;
    const std::function<void(size_t)>* task_ = nullptr;
    size_t n_ = 0, done_ = 0, active_ = 0;
    std::atomic<size_t> next_{0};
    std::atomic<uint64_t> generation_{0};
    // Like OpenMP's default wait policy: a plan's kernels come back to back, and a worker that
    // went to sleep takes tens of microseconds to wake (as long as a small kernel runs).
    static constexpr std::chrono::microseconds kSpin{300};
    static void pause() {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    bool stop_ = false;
    std::exception_ptr error_;
};

Pool& pool() {
    static Pool p(thread_count() > 1 ? thread_count() - 1 : 0);
    return p;
}

} // namespace

void parallel_for(size_t n, const std::function<void(size_t)>& task) {
    if (n == 0) return;
    if (n == 1 || thread_count() == 1) {
        for (size_t i = 0; i < n; ++i) task(i);
        return;
    }
    pool().run(n, task);
}

} // namespace tempura::runtime
