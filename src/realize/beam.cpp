// BEAM search: opts chosen by compiling and timing candidates, cached on disk.
#include "tempura/realize/beam.hpp"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "tempura/backend/cuda.hpp"
#include "tempura/backend/gpu.hpp"
#include "tempura/backend/llvm_cpu.hpp"
#include "tempura/codegen/stages.hpp"
#include "tempura/error.hpp"
#include "tempura/realize/device.hpp"
#include "tempura/runtime/buffer.hpp"
#include "tempura/runtime/thread_pool.hpp"
#include "tempura/support/env.hpp"
#include "tempura/support/hash.hpp"
#include "tempura/support/lru_cache.hpp"

namespace tempura::codegen {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kInf = std::numeric_limits<double>::infinity();

constexpr const char* kCacheVersion = "tempura-beam 1";
// A cache file holds a header and a few opts; anything larger is not ours.
constexpr off_t kMaxCacheFileBytes = 64 * 1024;
constexpr int kMaxRounds = 10;
constexpr double kMinProgress = 0.01;   // a round must gain more than 1%
constexpr double kSlowFactor = 10;      // candidates slower than this x the best are stopped
constexpr double kFirstLimitMs = 10000; // the limit of a run while nothing has been timed
constexpr double kMinLimitMs = 0.5;
constexpr int kSamples = 3;       // timed samples per candidate (after a warm-up run)
constexpr double kSlowRunMs = 50; // kernels slower than this get one timed sample
constexpr double kSampleMs = 1.0; // a fast kernel is repeated to fill about this per sample
constexpr size_t kMaxActionAxes = 8;
constexpr int kRechecks = 5; // the best against the heuristics at the end, alternately

std::atomic<size_t> g_searches{0}, g_cache_hits{0}, g_compiled{0}, g_timed{0};

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// ---- the structure of a kernel ----------------------------------------------------------------

// Each node as op, dtype, arg and the positions of its sources in topological order: equal for
// equal kernels however and whenever their UOps were built.
std::string structure_of(const UOp& ast) { return structure_key(ast.toposort(), "beam"); }

uint64_t fnv1a(const std::string& s, uint64_t h) {
    for (unsigned char c : s) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t mix(uint64_t x) { return hash_finalize(x); }

std::string hex128(const std::string& s) {
    const uint64_t a = mix(fnv1a(s, 0xcbf29ce484222325ull));
    const uint64_t b = mix(fnv1a(s, 0x84222325cbf29ce4ull) ^ s.size());
    char buf[33];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(a),
                  static_cast<unsigned long long>(b));
    return buf;
}

// ---- guarded runs -----------------------------------------------------------------------------
// A candidate's warm-up run happens on the searching thread under a one-shot timer: when it runs
// past its limit the timer's signal leaves the kernel's machine code with siglongjmp (a kernel is
// straight-line code over its buffers: no locks, no allocations, nothing to unwind). A candidate
// that faults (SIGSEGV, SIGBUS, SIGFPE: say an integer division by a zero of the random inputs)
// is left the same way and dropped. Signals anywhere else go to the handlers the process had.

sigjmp_buf g_jump;
volatile sig_atomic_t g_armed = 0;
volatile sig_atomic_t g_caught = 0;
volatile pid_t g_tid = 0;

constexpr int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
struct sigaction g_old_fault[4];

void on_signal(int sig) {
    if (g_armed && static_cast<pid_t>(syscall(SYS_gettid)) == g_tid) {
        g_armed = 0;
        g_caught = sig;
        siglongjmp(g_jump, 1);
    }
    // Not ours: a fault elsewhere goes back to the old handler (the faulting instruction runs
    // again and meets it); a stray timer signal is ignored.
    for (size_t i = 0; i < 4; ++i)
        if (sig == kFaultSignals[i]) sigaction(sig, &g_old_fault[i], nullptr);
}

class Guard {
  public:
    Guard() {
        signo_ = SIGRTMIN + 5;
        g_tid = static_cast<pid_t>(syscall(SYS_gettid));
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_NODEFER;
        ok_ = sigaction(signo_, &sa, &old_timer_) == 0;
        if (!ok_) return;
        for (size_t i = 0; i < 4; ++i) sigaction(kFaultSignals[i], &sa, &g_old_fault[i]);
        sigevent sev{};
        sev.sigev_notify = SIGEV_THREAD_ID;
        sev.sigev_signo = signo_;
        sev._sigev_un._tid = g_tid;
        timer_ok_ = timer_create(CLOCK_MONOTONIC, &sev, &timer_) == 0;
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, signo_);
        pthread_sigmask(SIG_UNBLOCK, &s, &old_mask_);
    }
    ~Guard() {
        if (!ok_) return;
        if (timer_ok_) timer_delete(timer_);
        // Drop a timer signal still pending, then give the signals back.
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, signo_);
        pthread_sigmask(SIG_BLOCK, &s, nullptr);
        const timespec zero{0, 0};
        while (sigtimedwait(&s, nullptr, &zero) > 0) {
        }
        sigaction(signo_, &old_timer_, nullptr);
        for (size_t i = 0; i < 4; ++i) sigaction(kFaultSignals[i], &g_old_fault[i], nullptr);
        pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

    enum class Result { Done, TooSlow, Fault };

    // Runs entry(buffers, vars) for each vars in `cores` (null: once with no vars), stopping
    // after limit_ms in all.
    Result run(runtime::CompiledKernel::EntryFn entry, void* const* buffers, int64_t cores,
               double limit_ms) {
        g_caught = 0;
        if (sigsetjmp(g_jump, 1) != 0) {
            disarm();
            return g_caught == signo_ ? Result::TooSlow : Result::Fault;
        }
        arm(limit_ms);
        g_armed = 1;
        if (cores <= 1) {
            entry(buffers, nullptr);
        } else {
            for (int64_t c = 0; c < cores; ++c) entry(buffers, &c);
        }
        g_armed = 0;
        disarm();
        return Result::Done;
    }

  private:
    void arm(double ms) {
        if (!timer_ok_) return;
        itimerspec it{};
        const double ns = std::max(ms, 0.001) * 1e6;
        it.it_value.tv_sec = static_cast<time_t>(ns / 1e9);
        it.it_value.tv_nsec = static_cast<long>(ns - static_cast<double>(it.it_value.tv_sec) * 1e9);
        timer_settime(timer_, 0, &it, nullptr);
    }
    void disarm() {
        if (!timer_ok_) return;
        itimerspec it{};
        timer_settime(timer_, 0, &it, nullptr);
    }

    int signo_ = 0;
    bool ok_ = false, timer_ok_ = false;
    timer_t timer_{};
    struct sigaction old_timer_ {};
    sigset_t old_mask_{};
};

// ---- buffers ----------------------------------------------------------------------------------

uint64_t next_random(uint64_t& s) {
    s += 0x9e3779b97f4a7c15ull;
    return mix(s);
}

// Small values that no kernel chokes on: floats in +-[0.25, 1] (no zeros, no denormals), small
// positive integers (no division by zero, small offsets), random bools.
void fill_random(runtime::Buffer& b, uint64_t seed) {
    uint64_t s = seed;
    const int64_t n = b.numel();
    auto fval = [&] {
        const uint64_t r = next_random(s);
        const double v = 0.25 + 0.75 * static_cast<double>(r >> 11) * 0x1.0p-53;
        return (r & 1) ? -v : v;
    };
    auto ival = [&] { return static_cast<int64_t>(1 + next_random(s) % 4); };
    auto fill = [&](auto* p, auto gen) {
        for (int64_t i = 0; i < n; ++i) p[i] = gen();
    };
    void* d = b.data();
    switch (b.dtype().scalar) {
    case Scalar::Float32:
        fill(static_cast<float*>(d), [&] { return static_cast<float>(fval()); });
        break;
    case Scalar::Float64: fill(static_cast<double*>(d), fval); break;
    case Scalar::Float16:
        // 1.0 .. 1.75 and the negatives: sign, exponent 15, two mantissa bits.
        fill(static_cast<uint16_t*>(d), [&] {
            const uint64_t r = next_random(s);
            return static_cast<uint16_t>(((r & 1) << 15) | 0x3C00 | ((r >> 1) & 3) << 8);
        });
        break;
    case Scalar::BFloat16:
        fill(static_cast<uint16_t*>(d), [&] {
            const uint64_t r = next_random(s);
            return static_cast<uint16_t>(((r & 1) << 15) | 0x3F80 | ((r >> 1) & 3) << 5);
        });
        break;
    case Scalar::Bool:
        fill(static_cast<uint8_t*>(d), [&] { return static_cast<uint8_t>(next_random(s) & 1); });
        break;
    case Scalar::Int8:
    case Scalar::UInt8:
        fill(static_cast<uint8_t*>(d), [&] { return static_cast<uint8_t>(ival()); });
        break;
    case Scalar::Int16:
    case Scalar::UInt16:
        fill(static_cast<uint16_t*>(d), [&] { return static_cast<uint16_t>(ival()); });
        break;
    case Scalar::Int32:
    case Scalar::UInt32:
        fill(static_cast<uint32_t*>(d), [&] { return static_cast<uint32_t>(ival()); });
        break;
    default: fill(static_cast<int64_t*>(d), ival); break;
    }
}

// ---- the search -------------------------------------------------------------------------------

struct Candidate {
    std::vector<Opt> opts;
    double ms = kInf;
};

// The actions tried on every kept kernel, by its axes: vector lanes and unrolled copies, cache
// blocking, threads, loop order and padding. Invalid ones are filtered by try_apply.
std::vector<Opt> actions_for(const OptKernel& k) {
    std::vector<Opt> acts;
    const size_t n_out = std::min(k.output_axes(), kMaxActionAxes);
    const size_t n_all = std::min(k.axes().size(), kMaxActionAxes);
    const auto ax = [](size_t a) { return static_cast<int64_t>(a); };
    for (size_t a = 0; a < n_out; ++a)
        for (int64_t n : {2, 3, 4, 8, 16, 32}) acts.push_back({OptOp::Upcast, ax(a), n});
    for (size_t a = k.output_axes(); a < n_all; ++a)
        for (int64_t n : {2, 3, 4, 8, 16, 32}) acts.push_back({OptOp::Unroll, ax(a), n});
    for (size_t a = 0; a < n_out; ++a)
        for (int64_t n : {2, 4, 8, 16, 32, 64}) acts.push_back({OptOp::Local, ax(a), n});
    if (k.limits().threads > 1)
        for (size_t a = 0; a < n_out; ++a)
            acts.push_back({OptOp::Thread, ax(a), k.limits().threads});
    for (size_t a = 0; a < n_out; ++a)
        for (size_t b = a + 1; b < n_out; ++b) acts.push_back({OptOp::Swap, ax(a), ax(b)});
    for (size_t a = 0; a < n_all; ++a)
        for (int64_t n : {16, 32}) acts.push_back({OptOp::PadTo, ax(a), n});
    return acts;
}

std::string ms_text(double ms) {
    if (!std::isfinite(ms)) return "-";
    char buf[32];
    if (ms < 1)
        std::snprintf(buf, sizeof buf, "%.1f us", ms * 1e3);
    else
        std::snprintf(buf, sizeof buf, "%.2f ms", ms);
    return buf;
}

class Search {
  public:
    Search(const std::string& name, const UOp& ast, const DeviceLimits& limits, int cuda)
        : name_(name), ast_(ast), limits_(limits), prepared_(prepare_for_opts(ast)), cuda_(cuda) {
        tty_ = isatty(STDERR_FILENO) != 0;
        debug_ = env::debug_level();
        uint64_t seed = 1;
        for (const UOp& u : prepared_.toposort()) {
            if (u.op() != Op::Param) continue;
            const auto& a = u.arg_as<std::vector<int64_t>>();
            const auto slot = static_cast<size_t>(a.at(0));
            if (slot >= buffers_.size()) buffers_.resize(slot + 1);
            if (buffers_[slot]) continue;
            // A little slack past the end, so a vector access that strays is not a crash.
            const DType dt = u.dtype().base().scalar_type();
            const int device = cuda_ < 0 ? runtime::kCpu : runtime::kCuda0 + cuda_;
            auto& b = buffers_[slot];
            b = std::make_unique<runtime::Buffer>(dt, a.at(1) + 256, false, device);
            if (b->on_host()) {
                fill_random(*b, seed++);
            } else {
                runtime::Buffer host(dt, b->numel(), false);
                fill_random(host, seed++);
                b->copy_from(host);
            }
        }
        for (const auto& b : buffers_)
            ptrs_.push_back(b ? reinterpret_cast<void*>(b->address()) : nullptr);
    }

    std::vector<Opt> run(int width) {
        const auto t0 = Clock::now();
        std::vector<Opt> heur;
        try {
            heur = heuristic_opts(prepared_, limits_);
            apply_opts(prepared_, heur, limits_);
        } catch (const Error&) {
            heur.clear();
        }
        // Round 0: the heuristics' choice, no opts, and a matmul's tensor-core variants.
        std::vector<std::vector<Opt>> roots{heur, {}};
        for (std::vector<Opt>& o : tensor_core_variants(prepared_, limits_))
            roots.push_back(std::move(o));
        for (std::vector<Opt>& o : smem_matmul_variants(prepared_, limits_))
            roots.push_back(std::move(o));
        std::vector<Candidate> beam;
        for (size_t i = 0; i < roots.size(); ++i) {
            const std::vector<Opt>& o = roots[i];
            OptKernel k(prepared_, limits_);
            bool ok = true;
            for (const Opt& x : o) ok = ok && k.try_apply(x);
            if (!ok || !seen_.insert(structure_of(k.ast())).second) continue;
            beam.push_back({o, evaluate(o)});
            if (i == 0) heur_ms_ = beam.back().ms;
            progress(0, i + 1, roots.size(), false);
        }
        progress(0, roots.size(), roots.size(), true);
        double prev = kInf;
        for (const Candidate& c : beam) prev = std::min(prev, c.ms);
        int round = 0;
        for (round = 1; round <= kMaxRounds; ++round) {
            // This round's candidates first (each a new kernel), so progress can say "of n".
            std::vector<std::vector<Opt>> todo;
            for (const Candidate& parent : beam) {
                OptKernel base(prepared_, limits_);
                for (const Opt& x : parent.opts) base.apply(x);
                for (const Opt& act : actions_for(base)) {
                    OptKernel k = base;
                    if (!k.try_apply(act)) continue;
                    if (!seen_.insert(structure_of(k.ast())).second) continue;
                    todo.push_back(parent.opts);
                    todo.back().push_back(act);
                }
            }
            std::vector<Candidate> children;
            for (size_t i = 0; i < todo.size(); ++i) {
                const double ms = evaluate(todo[i]);
                progress(round, i + 1, todo.size(), false);
                if (std::isfinite(ms)) children.push_back({std::move(todo[i]), ms});
            }
            if (!todo.empty()) progress(round, todo.size(), todo.size(), true);
            if (children.empty()) break;
            std::stable_sort(children.begin(), children.end(),
                             [](const Candidate& a, const Candidate& b) { return a.ms < b.ms; });
            const double round_best = children.front().ms;
            if (children.size() > static_cast<size_t>(width)) children.resize(width);
            beam = std::move(children);
            if (!(round_best < prev * (1 - kMinProgress))) break;
            prev = round_best;
        }
        if (round > kMaxRounds) round = kMaxRounds;
        std::vector<Opt> result = best_.opts;
        std::string recheck;
        if (!std::isfinite(best_.ms)) {
            result = heur; // nothing ran: trust the heuristics
        } else if (result != heur && std::isfinite(heur_ms_)) {
            // Timing noise picks winners too: the best against the heuristics once more, in turn,
            // and the heuristics unless the best is clearly faster.
            double b = kInf, h = kInf;
            for (int i = 0; i < kRechecks; ++i) {
                b = std::min(b, time_opts(result));
                h = std::min(h, time_opts(heur));
            }
            if (!(b < h * (1 - kMinProgress))) result = heur;
            recheck = "; again " + ms_text(b) + " vs " + ms_text(h) + ", " +
                      (result == heur ? "kept the heuristics" : "kept the best");
        }
        if (tty_) std::fputs("\r\033[K", stderr);
        std::fprintf(stderr,
                     "BEAM %s: %s %s (heuristics %s%s), %zu candidates, %d rounds, %.1f s\n",
                     name_.c_str(), ms_text(best_.ms).c_str(), to_string(best_.opts).c_str(),
                     ms_text(heur_ms_).c_str(), recheck.c_str(), count_, round, ms_since(t0) / 1e3);
        return result;
    }

  private:
    // Lowers, compiles and times one candidate: its best time, or infinity when it does not
    // lower, compile or run, or is too slow (it is then stopped early).
    double evaluate(const std::vector<Opt>& opts) {
        ++count_;
        std::string why;
        const double ms = time_opts(opts, true, why);
        if (ms < best_.ms) best_ = {opts, ms};
        if (debug_ >= 2) {
            if (tty_) std::fputs("\r\033[K", stderr);
            std::fprintf(stderr, "BEAM %s: %-80s %s\n", name_.c_str(), to_string(opts).c_str(),
                         std::isfinite(ms) ? ms_text(ms).c_str() : why.c_str());
        }
        return ms;
    }
    double time_opts(const std::vector<Opt>& opts) {
        std::string why;
        return time_opts(opts, false, why);
    }

    double time_opts(const std::vector<Opt>& opts, bool dedupe, std::string& why) {
        LoweredKernel low;
        std::shared_ptr<const runtime::CompiledKernel> ck;
        try {
            ++g_compiled;
            low = lower_kernel_opt(name_, ast_, limits_, &opts);
            ck = cuda_ < 0
                     ? runtime::compile_cpu_kernel(name_, low.program)
                     : runtime::compile_cuda_kernel(
                           name_, low.program, low.block[0] * low.block[1] * low.block[2], cuda_);
        } catch (const std::exception& e) {
            why = std::string("fails to compile: ") + e.what();
            return kInf;
        }
        // The same code as a candidate timed before: the CPU's cache hands out the same machine
        // code, the GPU's the same PTX.
        const size_t code =
            cuda_ < 0 ? std::hash<const void*>()(reinterpret_cast<const void*>(ck->entry()))
                      : std::hash<std::string>()(ck->source());
        if (dedupe && !codes_.insert(code).second) {
            why = "the same machine code as another";
            return kInf;
        }
        // A THREAD kernel's one variable is its core; a GPU kernel has none here.
        bool runnable = ck->buffer_count() <= ptrs_.size() &&
                        ck->var_count() <= (low.threads > 1 && cuda_ < 0 ? 1u : 0u);
        for (size_t i = 0; runnable && i < ck->buffer_count(); ++i) runnable = ptrs_[i] != nullptr;
        if (!runnable) {
            why = "unexpected buffers or variables";
            return kInf;
        }
        ++g_timed;
        const double limit =
            std::isfinite(best_.ms) ? std::max(kSlowFactor * best_.ms, kMinLimitMs) : kFirstLimitMs;
        why = "stopped: slower than " + ms_text(limit);
        // One run of the kernel (queued only, on a GPU), and the wait for the runs queued.
        auto run_once = [&] {
            if (cuda_ >= 0) {
                runtime::cuda_launch(*ck, ptrs_.data(), nullptr, low.grid, low.block);
            } else if (low.threads > 1) {
                runtime::parallel_for(static_cast<size_t>(low.threads), [&](size_t core) {
                    const int64_t var = static_cast<int64_t>(core);
                    ck->run(ptrs_.data(), &var);
                });
            } else {
                ck->run(ptrs_.data(), nullptr);
            }
        };
        auto wait = [&] {
            if (cuda_ >= 0) cuda::driver().context(cuda_).synchronize();
        };
        const auto t0 = Clock::now();
        double warm = 0;
        if (cuda_ >= 0) {
            // A GPU kernel runs unguarded: a fault is the driver's error, reported here (and a
            // context that faulted stays broken: later candidates fail the same way).
            try {
                run_once();
                wait();
            } catch (const Error& e) {
                if (tty_) std::fputs("\r\033[K", stderr);
                std::fprintf(stderr, "BEAM %s: %s failed on random inputs, dropped: %s\n",
                             name_.c_str(), to_string(opts).c_str(), e.what());
                why = std::string("failed: ") + e.what();
                return kInf;
            }
            warm = ms_since(t0);
            if (warm > limit) return kInf;
        } else {
            // Warm-up under the guard: every core's share in turn on this thread.
            const Guard::Result r = guard_.run(ck->entry(), ptrs_.data(), low.threads,
                                               limit * static_cast<double>(low.threads));
            if (r == Guard::Result::Fault) {
                if (tty_) std::fputs("\r\033[K", stderr);
                std::fprintf(stderr, "BEAM %s: %s faulted on random inputs, dropped\n",
                             name_.c_str(), to_string(opts).c_str());
                why = "faulted";
                return kInf;
            }
            if (r == Guard::Result::TooSlow) return kInf;
            warm = ms_since(t0) / static_cast<double>(low.threads);
        }
        const int reps = std::clamp(static_cast<int>(kSampleMs / std::max(warm, 1e-4)), 1, 1000);
        // A slow kernel gets one sample: its warm-up already shows roughly where it ranks.
        const int samples = warm > kSlowRunMs ? 1 : kSamples;
        double best = kInf;
        for (int s = 0; s < samples; ++s) {
            const auto t1 = Clock::now();
            for (int i = 0; i < reps; ++i) run_once();
            wait();
            const double ms = ms_since(t1) / reps;
            best = std::min(best, ms);
            if (ms > limit) return kInf;
        }
        return best;
    }

    // "BEAM r_64_64: round 2, tried 12 of 40, best 0.081 ms [UPCAST(1, 4)]": on a terminal a
    // line that updates in place; elsewhere at TEMPURA_DEBUG >= 1 one line per finished round.
    void progress(int round, size_t tried, size_t total, bool round_done) {
        if (!tty_ && !(debug_ >= 1 && round_done)) return;
        std::fprintf(stderr, "%sBEAM %s: round %d, tried %zu of %zu, best %s %s%s",
                     tty_ ? "\r\033[K" : "", name_.c_str(), round, tried, total,
                     ms_text(best_.ms).c_str(), to_string(best_.opts).c_str(), tty_ ? "" : "\n");
        std::fflush(stderr);
    }

    std::string name_;
    UOp ast_;
    DeviceLimits limits_;
    UOp prepared_;
    bool tty_ = false;
    int debug_ = 0;
    std::vector<std::unique_ptr<runtime::Buffer>> buffers_;
    std::vector<void*> ptrs_;
    Guard guard_;
    std::unordered_set<std::string> seen_; // kernels (after opts) tried, by structure
    std::unordered_set<size_t> codes_;     // machine code (or PTX) timed, by hash
    int cuda_ = -1; // the CUDA device's ordinal that times the candidates; -1: the CPU
    Candidate best_;
    double heur_ms_ = kInf;
    size_t count_ = 0;
};

// ---- the disk cache ---------------------------------------------------------------------------

// The whole of a cache file, or nullopt. The cache folder may hold anything: only a regular file
// of at most kMaxCacheFileBytes is read. The open never blocks (a FIFO would hang a plain open)
// and the type is checked on the opened file itself (a symlink to /dev/zero is a device).
std::optional<std::string> read_small_regular_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return std::nullopt;
    std::optional<std::string> text;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= kMaxCacheFileBytes) {
        std::string buf(static_cast<size_t>(st.st_size) + 1, '\0');
        size_t got = 0;
        for (;;) {
            const ssize_t n = ::read(fd, buf.data() + got, buf.size() - got);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            got += static_cast<size_t>(n);
            if (got == buf.size()) break; // grew while we read: too big now
        }
        if (got < buf.size()) {
            buf.resize(got);
            text = std::move(buf);
        }
    }
    ::close(fd);
    return text;
}

bool read_cache(const std::string& path, std::vector<Opt>& opts) {
    const std::optional<std::string> file = read_small_regular_file(path);
    if (!file) return false;
    const std::string& text = *file;
    const std::string head = std::string(kCacheVersion) + "\n";
    const std::string tail = "end\n";
    if (text.size() < head.size() + tail.size() || text.compare(0, head.size(), head) != 0 ||
        text.compare(text.size() - tail.size(), tail.size(), tail) != 0)
        return false;
    return parse_opts(text.substr(head.size(), text.size() - head.size() - tail.size()), opts);
}

void write_cache(const std::string& path, const std::string& comment,
                 const std::vector<Opt>& opts) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    const std::string tmp = path + ".tmp" + std::to_string(getpid());
    {
        std::ofstream out(tmp, std::ios::trunc);
        if (!out) return;
        out << kCacheVersion << "\n# " << comment << "\n" << format_opts(opts) << "end\n";
        if (!out) return;
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) std::filesystem::remove(tmp, ec);
}

// Marks a cache file as just used, so that trimming removes the least recently used first.
void touch(const std::string& path) { ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

std::mutex g_search_mu;

} // namespace

size_t trim_beam_cache(const std::string& dir, size_t budget_bytes) {
    namespace fs = std::filesystem;
    struct Entry {
        struct timespec used;
        size_t bytes;
        std::string path;
    };
    std::vector<Entry> entries;
    size_t total = 0;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.rfind("beam-", 0) != 0 || name.size() < 9 ||
            name.compare(name.size() - 4, 4, ".txt") != 0)
            continue;
        struct stat st {};
        // lstat: a link is not ours to count or remove, whatever it points at.
        if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        // A file takes at least one 4 KiB block on disk, however few bytes it holds.
        const size_t bytes = (static_cast<size_t>(st.st_size) + 4095) / 4096 * 4096;
        entries.push_back({st.st_mtim, std::max<size_t>(bytes, 4096), it->path().string()});
        total += entries.back().bytes;
    }
    if (total <= budget_bytes) return 0;
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        if (a.used.tv_sec != b.used.tv_sec) return a.used.tv_sec < b.used.tv_sec;
        if (a.used.tv_nsec != b.used.tv_nsec) return a.used.tv_nsec < b.used.tv_nsec;
        return a.path < b.path;
    });
    size_t removed = 0;
    for (const Entry& e : entries) {
        if (total <= budget_bytes) break;
        if (fs::remove(e.path, ec)) ++removed;
        total -= e.bytes;
    }
    return removed;
}

std::string format_opts(const std::vector<Opt>& opts) {
    std::string s;
    for (const Opt& o : opts) {
        s += opt_op_name(o.op);
        if (o.op != OptOp::NoLocals)
            s += " " + std::to_string(o.axis) + " " + std::to_string(o.arg);
        s += "\n";
    }
    return s;
}

bool parse_opts(const std::string& text, std::vector<Opt>& opts) {
    std::vector<Opt> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ls(line);
        std::string name;
        ls >> name;
        Opt o;
        bool known = false;
        for (int i = 0; i <= static_cast<int>(OptOp::Smem); ++i)
            if (opt_op_name(static_cast<OptOp>(i)) == name) {
                o.op = static_cast<OptOp>(i);
                known = true;
            }
        if (!known) return false;
        if (o.op != OptOp::NoLocals && !(ls >> o.axis >> o.arg)) return false;
        std::string rest;
        if (ls >> rest) return false;
        out.push_back(o);
    }
    opts = std::move(out);
    return true;
}

namespace {
// The ordinal of the CUDA device whose limits these are, -1 for the CPU; throws for another GPU
// (EMU), whose timings would say nothing about a GPU.
int timing_device(const DeviceLimits& limits) {
    if (!limits.gpu) return -1;
    if (limits.name.rfind("CUDA:", 0) == 0) {
        const int index = runtime::device_index(limits.name);
        if (runtime::is_cuda(index)) return runtime::cuda_ordinal(index);
    }
    fail("beam", limits.name + ": BEAM times kernels on the CPU or a CUDA GPU, and " + limits.name +
                     "'s timings would say nothing about a GPU");
}
} // namespace

std::string beam_cache_key(const UOp& ast, const DeviceLimits& limits, int width) {
    const int cuda = timing_device(limits);
    std::string key = kCacheVersion;
    key += '\0';
    key += structure_of(prepare_for_opts(ast));
    key += "\nwidth " + std::to_string(width) + "\ndevice " + limits.name + "\nvector " +
           std::to_string(limits.vector_bytes) + "\nthreads " + std::to_string(limits.threads) +
           "\nshared " + std::to_string(limits.has_shared) + "\nupcast " +
           std::to_string(limits.max_upcast);
    // The wgmma variants (TEMPURA_WGMMA=0 leaves them out) widen the search: a pick made with
    // them is not one made without.
    if (wgmma_offered(limits)) key += "\nwgmma";
    // A GPU's float32 matmuls start from their SMEM variants too: picks made before those
    // existed are not reused.
    if (limits.gpu) key += "\nsmem";
    // What ran the timings: this CPU, or the GPU's model (not its ordinal).
    key += cuda < 0 ? "\ncpu " + runtime::host_cpu_name() + " " + runtime::host_cpu_features()
                    : "\ngpu " + runtime::cuda_device_tag(cuda);
    return hex128(key);
}

std::string beam_cache_dir() {
    auto env = [](const char* n) { return env::get_string(n); };
    if (std::string d = env("TEMPURA_CACHE_DIR"); !d.empty()) return d;
    if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/tempura";
    if (std::string d = env("HOME"); !d.empty()) return d + "/.cache/tempura";
    return "";
}

std::string beam_cache_file(const UOp& ast, const DeviceLimits& limits, int width) {
    const std::string dir = beam_cache_dir();
    if (dir.empty()) return "";
    return dir + "/beam-" + beam_cache_key(ast, limits, width) + ".txt";
}

std::vector<Opt> beam_search(const std::string& name, const UOp& ast, const DeviceLimits& limits,
                             int width) {
    if (width < 1) fail("beam", "width must be at least 1, got " + std::to_string(width));
    std::lock_guard<std::mutex> lock(g_search_mu);
    const std::string path = beam_cache_file(ast, limits, width);
    const UOp prepared = prepare_for_opts(ast);
    if (!path.empty()) {
        std::vector<Opt> cached;
        if (read_cache(path, cached)) {
            OptKernel k(prepared, limits);
            bool ok = true;
            for (const Opt& o : cached) ok = ok && k.try_apply(o);
            if (ok) {
                ++g_cache_hits;
                touch(path);
                return cached;
            }
        }
    }
    ++g_searches;
    std::vector<Opt> result;
    {
        Search s(name, ast, limits, timing_device(limits));
        result = s.run(width);
    }
    if (!path.empty()) {
        write_cache(path, name + ", width " + std::to_string(width), result);
        trim_beam_cache(beam_cache_dir(), cache_budget_bytes());
    }
    return result;
}

std::vector<std::vector<Opt>> tensor_core_variants(const UOp& prepared, const DeviceLimits& lim) {
    std::vector<std::vector<Opt>> out;
    if (OptKernel probe(prepared, lim); !probe.try_apply({OptOp::Tc, 0, 0})) return out;
    for (const int64_t tiles : {34, 36, 66, 68, 72, 132}) {
        std::vector<Opt> o{{OptOp::Tc, 0, tiles}};
        OptKernel k(prepared, lim);
        if (!k.try_apply(o[0])) continue;
        out.push_back(o);
        if (tc_warps_2x2(k)) out.push_back(k.applied());
    }
    // Staged: 2 x 2, 2 x 4, 4 x 2 and 4 x 4 warps of 64 x 32 or 64 x 64 outputs, k-steps of 16,
    // 32 or 64, copied through registers or by a cp.async pipeline of 2, 3 or 4 tiles. (Warps of
    // 32 x 32 were never faster than 0.66 ms on an H100, 4096^3; the best of 64 x 64, 0.44.)
    for (const int64_t pipe : {0, 2, 3, 4})
        for (const int64_t ks : {1, 2, 4})
            for (const auto& [wm, wn] :
                 {std::pair{2, 2}, std::pair{2, 4}, std::pair{4, 2}, std::pair{4, 4}})
                for (const int64_t tiles : {68, 72})
                    if (OptKernel k(prepared, lim);
                        k.try_apply({OptOp::Tc, TcStage{pipe, ks, wm, wn}.code(), tiles}))
                        out.push_back(k.applied());
    // Hopper (sm_90): 1 x 1, 2 x 1, 1 x 2 and 2 x 2 warpgroups of 64 x 128 or 64 x 256 outputs
    // (wgmma), k-steps of 64 by a cp.async pipeline of 2, 3 or 4 tiles, each k-step's mma waited
    // for, or (pipelines of 3 and 4) the last one kept in flight; not with TEMPURA_WGMMA=0.
    // (BEAM times candidates, it does not check their products: every one of these gave the
    // CPU's products bit for bit on an H200.)
    if (!wgmma_offered(lim)) return out;
    for (const int64_t wg : {1, 2})
        for (const int64_t pipe : {2, 3, 4})
            for (const auto& [wm, wn] :
                 {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 2}, std::pair{2, 2}})
                for (const int64_t cols : {128, 256})
                    if (OptKernel k(prepared, lim); // (no mma in flight in a pipeline of 2)
                        k.try_apply({OptOp::Tc, TcStage{pipe, 4, wm, wn, wg}.code(), cols}))
                        out.push_back(k.applied());
    return out;
}

std::vector<std::vector<Opt>> smem_matmul_variants(const UOp& prepared, const DeviceLimits& lim) {
    std::vector<std::vector<Opt>> out;
    if (!lim.gpu || !lim.has_shared) return out;
    // Register tiles of 4 x 4 to 8 x 8, blocks of 8 x 8 to 16 x 16 threads, k-steps of 8, 16 or
    // 32, copied through registers or by a cp.async pipeline of 3 tiles (those the device's
    // threads and shared memory allow).
    for (const int64_t pipe : {0, 3})
        for (const auto& [tm, tn] :
             {std::pair{4, 4}, std::pair{4, 8}, std::pair{8, 4}, std::pair{8, 8}})
            for (const auto& [lm, ln] :
                 {std::pair{16, 16}, std::pair{8, 16}, std::pair{16, 8}, std::pair{8, 8}})
                for (const int64_t bk : {8, 16, 32}) {
                    const SmemTile t{tm, tn, lm, ln, bk, pipe};
                    if (OptKernel k(prepared, lim); k.try_apply({OptOp::Smem, t.tile(), t.block()}))
                        out.push_back(k.applied());
                }
    return out;
}

std::vector<Opt> beam_or_heuristic(const std::string& name, const UOp& ast,
                                   const DeviceLimits& limits) {
    if (noopt_requested()) return {};
    // BEAM times a kernel on buffers of its sizes: a kernel of symbolic sizes (DEFINE_VARs)
    // has none, and takes the heuristics.
    bool symbolic = false;
    for (const UOp& u : ast.toposort()) symbolic = symbolic || u.op() == Op::DefineVar;
    // BEAM times kernels on the CPU's JIT or on a CUDA GPU; EMU's kernels take the heuristics
    // (its timings would say nothing about a GPU).
    const bool timed = !limits.gpu || limits.name.rfind("CUDA:", 0) == 0;
    if (const int64_t w = env::get_int("TEMPURA_BEAM", 0, 0, 1024); w >= 1 && !symbolic && timed)
        return beam_search(name, ast, limits, static_cast<int>(w));
    return heuristic_opts(prepare_for_opts(ast), limits);
}

BeamStats beam_stats() {
    return BeamStats{g_searches.load(), g_cache_hits.load(), g_compiled.load(), g_timed.load()};
}

} // namespace tempura::codegen
