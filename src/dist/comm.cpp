// The MPI runtime of tempura::dist: a communication thread makes every MPI call (the process asks
// for MPI_THREAD_SERIALIZED). realize hands it collectives (start), it posts them as non-blocking
// MPI operations in the order they came, tests them while the plan's kernels run, and wakes the
// steps that wait for them. On three duplicates of MPI_COMM_WORLD: the data, the first-run shape
// checks (so a check never matches another rank's data), and a control channel on which ranks
// say that they stop (an uncaught exception, finalize, exit) and answer the pings a rank sends
// when a collective waited too long, so that it can name the rank that is gone.
#include "comm.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tempura/error.hpp"
#include "tempura/ir/shape.hpp"
#include "tempura/realize/collective.hpp"
#include "tempura/runtime/buffer.hpp"
#include "tempura/support/env.hpp"
#include "tensor/convert.hpp"

#ifdef TEMPURA_HAVE_MPI
#include <dlfcn.h>
#include <mpi.h>

#include "tempura/backend/cuda.hpp"
#include "tempura/realize/device.hpp"
#endif

namespace tempura::dist::detail {

namespace {

// The launcher's variables (OpenMPI, PMIx, Slurm, MPICH): what rank(), world_size() and
// local_rank() say before init() (and without MPI). Not TEMPURA_* variables: read here.
const char* const kRankVars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", nullptr};
const char* const kSizeVars[] = {"OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", nullptr};
const char* const kLocalRankVars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                      "SLURM_LOCALID", nullptr};

int env_int(const char* const* names, int fallback) {
    for (const char* const* n = names; *n != nullptr; ++n)
        if (const char* v = std::getenv(*n); v != nullptr && *v != '\0') return std::atoi(v);
    return fallback;
}

} // namespace

int comm_local_rank() { return env_int(kLocalRankVars, 0); }

#ifndef TEMPURA_HAVE_MPI

void comm_init() { fail("dist", kBuiltWithoutMpi); }
bool comm_initialized() { return false; }
void comm_finalize() {}
int comm_rank() { return env_int(kRankVars, 0); }
int comm_size() { return env_int(kSizeVars, 1); }
CommStats comm_stats() { return {}; }

#else

namespace {

using Clock = std::chrono::steady_clock;

const char* kind_name(int64_t k) {
    static const char* const names[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter"};
    return k >= 0 && k < 4 ? names[k] : "collective";
}

// What a rank calls, as the first run's check compares it: kind, reduce op, root,
// deterministic, dtype, rank, then up to 6 dims (the 6th the product of the rest).
constexpr int kDescLen = 12;
using Desc = std::array<int64_t, kDescLen>;

std::string describe(const Desc& d) {
    DType dt = DType::Float32;
    dt.scalar = static_cast<Scalar>(d[4]);
    Shape shape(d.begin() + 6, d.begin() + 6 + std::min<int64_t>(d[5], 6));
    return std::string(kind_name(d[0])) + " of " + dt.name() + " " + shape_str(shape);
}

// Control messages: a ping (a = token), its answer (a = token, b = the collectives this rank
// has started, text = what it is doing), a rank that stops for good (text = why), one that
// finalizes (a = the collectives it started), and the receipt of a stop (so that the stopping
// rank lingers until the others know).
enum : int64_t { kPing = 1, kPong, kStopped, kFinalizing, kStopSeen };
struct Ctl {
    int64_t type = 0, a = 0, b = 0;
    char text[488] = {};
};
static_assert(sizeof(Ctl) == 512);

Ctl make_ctl(int64_t type, int64_t a, int64_t b, const std::string& text = "") {
    Ctl c;
    c.type = type;
    c.a = a;
    c.b = b;
    std::strncpy(c.text, text.c_str(), sizeof c.text - 1);
    return c;
}

struct Job {
    int64_t kind = 0, reduce = 0, root = 0, world = 1;
    bool deterministic = false, check = false;
    DType dtype = DType::Float32;
    Shape shape;
    int64_t numel = 0, out_numel = 0, seq = 0;
    bool check_only = false; // a CUDA collective's first-run check (NCCL moves its data)
    std::shared_ptr<runtime::Buffer> in, out;
    std::vector<unsigned char> stage_in, stage_out, gathered;
    void* send = nullptr;
    void* recv = nullptr;
    Desc desc{};
    std::vector<int64_t> descs;
    // The communication thread's.
    // 0 new, 1 checking, 4 checked (its data waits for the jobs before it), 2 moving data, 3 done.
    // Data moves in the order the jobs came on every rank: MPI pairs collectives by order.
    int state = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    Clock::time_point started;
    // Completion.
    std::mutex mu;
    std::condition_variable cv;
    bool done = false, copied_back = false, wait_counted = false;
    std::string error;

    std::string what() const {
        return std::string(kind_name(kind)) + " #" + std::to_string(seq) + " of " + dtype.name() +
               " " + shape_str(shape);
    }
    bool via_gather() const {
        return (kind == 0 || kind == 3) && (deterministic || dtype.is_16bit_float());
    }
};

MPI_Datatype mpi_type(DType dt) {
    switch (dt.scalar) {
    case Scalar::Bool: return MPI_C_BOOL;
    case Scalar::Int8: return MPI_INT8_T;
    case Scalar::Int16: return MPI_INT16_T;
    case Scalar::Int32: return MPI_INT32_T;
    case Scalar::Int64: return MPI_INT64_T;
    case Scalar::UInt8: return MPI_UINT8_T;
    case Scalar::UInt16: return MPI_UINT16_T;
    case Scalar::UInt32: return MPI_UINT32_T;
    case Scalar::UInt64: return MPI_UINT64_T;
    case Scalar::Float32: return MPI_FLOAT;
    case Scalar::Float64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
    }
}

MPI_Op mpi_op(int64_t reduce, DType dt) {
    if (dt.is_bool()) return reduce == 2 ? MPI_LAND : MPI_LOR;
    return reduce == 0 ? MPI_SUM : reduce == 1 ? MPI_MAX : MPI_MIN;
}

template <class T>
T combine(int64_t reduce, T a, T b) {
    if constexpr (std::is_same_v<T, bool>) {
        return reduce == 2 ? (a && b) : (a || b);
    } else {
        if (reduce == 0) return static_cast<T>(a + b);
        if (reduce == 1) return a < b ? b : a;
        return b < a ? b : a;
    }
}

// out[i] = x_0[i] (+) x_1[i] (+) ... in rank order, x_r = the r-th block of `gathered` (each
// `stride` elements) from element `offset`.
template <class T>
void fold(const Job& j, int64_t n, int64_t stride, int64_t offset) {
    const T* g = reinterpret_cast<const T*>(j.gathered.data());
    T* out = static_cast<T*>(j.recv);
    for (int64_t i = 0; i < n; ++i) {
        T acc = g[offset + i];
        for (int64_t r = 1; r < j.world; ++r)
            acc = combine(j.reduce, acc, g[r * stride + offset + i]);
        out[i] = acc;
    }
}

// 16-bit floats: each step in float32, rounded back (as a kernel adds two of them).
template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void fold16(const Job& j, int64_t n, int64_t stride, int64_t offset) {
    const auto* g = reinterpret_cast<const uint16_t*>(j.gathered.data());
    auto* out = static_cast<uint16_t*>(j.recv);
    for (int64_t i = 0; i < n; ++i) {
        uint16_t acc = g[offset + i];
        for (int64_t r = 1; r < j.world; ++r)
            acc = FromF(combine(j.reduce, ToF(acc), ToF(g[r * stride + offset + i])));
        out[i] = acc;
    }
}

void local_reduce(const Job& j, int64_t n, int64_t stride, int64_t offset) {
    switch (j.dtype.scalar) {
    case Scalar::Bool: return fold<bool>(j, n, stride, offset);
    case Scalar::Int8: return fold<int8_t>(j, n, stride, offset);
    case Scalar::Int16: return fold<int16_t>(j, n, stride, offset);
    case Scalar::Int32: return fold<int32_t>(j, n, stride, offset);
    case Scalar::Int64: return fold<int64_t>(j, n, stride, offset);
    case Scalar::UInt8: return fold<uint8_t>(j, n, stride, offset);
    case Scalar::UInt16: return fold<uint16_t>(j, n, stride, offset);
    case Scalar::UInt32: return fold<uint32_t>(j, n, stride, offset);
    case Scalar::UInt64: return fold<uint64_t>(j, n, stride, offset);
    case Scalar::Float32: return fold<float>(j, n, stride, offset);
    case Scalar::Float64: return fold<double>(j, n, stride, offset);
    case Scalar::Float16:
        return fold16<tempura::detail::half_to_float, tempura::detail::float_to_half>(j, n, stride,
                                                                                      offset);
    case Scalar::BFloat16:
        return fold16<tempura::detail::bf16_to_float, tempura::detail::float_to_bf16>(j, n, stride,
                                                                                      offset);
    default: fail("dist", "internal: no reduction for " + j.dtype.name());
    }
}

// NCCL, when libnccl.so.2 (or TEMPURA_LIBNCCL; "none": never) loads: CUDA buffers' collectives are
// queued on Tempura's stream of their device, in order with its kernels. The entry points Tempura
// uses, by their C signatures (nccl.h's enums as ints).
struct NcclId {
    char bytes[128];
};
struct Nccl {
    void* lib = nullptr;
    int (*get_unique_id)(NcclId*) = nullptr;
    int (*comm_init_rank)(void**, int, NcclId, int) = nullptr;
    int (*all_reduce)(const void*, void*, size_t, int, int, void*, void*) = nullptr;
    int (*broadcast)(const void*, void*, size_t, int, int, void*, void*) = nullptr;
    int (*all_gather)(const void*, void*, size_t, int, void*, void*) = nullptr;
    int (*reduce_scatter)(const void*, void*, size_t, int, int, void*, void*) = nullptr;
    const char* (*error_string)(int) = nullptr;

    bool load() {
        const std::string path = env::get_string("TEMPURA_LIBNCCL");
        if (path == "none") return false;
        // No NCCL is no error (CUDA collectives go through host memory), unless the user named
        // the library: then why it did not load is said once, as the CUDA driver's loader says.
        const bool named = !path.empty();
        const std::string file = named ? path : "libnccl.so.2";
        dlerror(); // clear a stale error
        lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr) {
            if (named) {
                const char* e = dlerror();
                env::warn_once("[dist] TEMPURA_LIBNCCL=" + path + " cannot be loaded (" +
                               (e != nullptr ? e : "dlopen failed") +
                               "): CUDA collectives go through host memory");
            }
            return false;
        }
        std::string missing;
        auto sym = [&](auto& f, const char* name) {
            f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(lib, name));
            if (f == nullptr && missing.empty()) missing = name;
            return f != nullptr;
        };
        if (sym(get_unique_id, "ncclGetUniqueId") && sym(comm_init_rank, "ncclCommInitRank") &&
            sym(all_reduce, "ncclAllReduce") && sym(broadcast, "ncclBroadcast") &&
            sym(all_gather, "ncclAllGather") && sym(reduce_scatter, "ncclReduceScatter") &&
            sym(error_string, "ncclGetErrorString"))
            return true;
        if (named)
            env::warn_once("[dist] TEMPURA_LIBNCCL=" + path + " has no " + missing +
                           ": CUDA collectives go through host memory");
        dlclose(lib);
        lib = nullptr;
        return false;
    }
    void check(int result, const char* what) const {
        if (result != 0)
            fail("dist", std::string(what) + " failed: " + error_string(result) + " (NCCL error " +
                             std::to_string(result) + ")");
    }
};

// nccl.h's ncclDataType_t, or -1 where NCCL has no such type (int16, uint16, bool, and the
// 16-bit floats, which Tempura sums in float32 on the host).
int nccl_type(DType dt) {
    switch (dt.scalar) {
    case Scalar::Int8: return 0;
    case Scalar::UInt8: return 1;
    case Scalar::Int32: return 2;
    case Scalar::UInt32: return 3;
    case Scalar::Int64: return 4;
    case Scalar::UInt64: return 5;
    case Scalar::Float32: return 7;
    case Scalar::Float64: return 8;
    default: return -1;
    }
}

class Runtime final : public CollectiveRunner {
  public:
    int rank = 0, size = 1;
    double timeout = 60;
    MPI_Comm data = MPI_COMM_NULL, check = MPI_COMM_NULL, ctl = MPI_COMM_NULL;
    std::atomic<int64_t> stat_collectives{0}, stat_bytes{0}, stat_wait_ns{0}, stat_nccl{0};

    Nccl nccl;
    std::map<int, void*> nccl_comms; // per CUDA ordinal

    void launch() {
        thread_ = std::thread([this] { loop(); });
    }

    std::shared_ptr<void> start(const UOp& node, std::shared_ptr<runtime::Buffer> in,
                                std::shared_ptr<runtime::Buffer> out, bool first) override {
        const auto& a = node.arg_as<std::vector<int64_t>>();
        if (nccl.lib != nullptr && !in->on_host() && runtime::is_cuda(in->device()) &&
            nccl_type(node.dtype()) >= 0 && a.at(4) == 0)
            if (auto t = start_nccl(node, in, out, first)) return t;
        stat_collectives.fetch_add(1);
        stat_bytes.fetch_add(static_cast<int64_t>(in->nbytes()));
        return enqueue(
            make_job(a, node.dtype(), node.src(0).shape(), std::move(in), std::move(out), first));
    }

    std::shared_ptr<Job> make_job(const std::vector<int64_t>& a, DType dtype, const Shape& shape,
                                  std::shared_ptr<runtime::Buffer> in,
                                  std::shared_ptr<runtime::Buffer> out, bool first) {
        auto j = std::make_shared<Job>();
        j->kind = a.at(0);
        j->reduce = a.at(1);
        j->root = a.at(2);
        j->world = a.at(3);
        j->deterministic = a.at(4) != 0;
        j->check = first;
        j->dtype = dtype;
        j->shape = shape;
        j->numel = in->numel();
        j->out_numel = out->numel();
        if (j->world != size)
            fail(kind_name(j->kind), "the graph was built for " + std::to_string(j->world) +
                                         " ranks, this job has " + std::to_string(size));
        const size_t in_bytes = in->nbytes(), out_bytes = out->nbytes();
        if (in_bytes > INT32_MAX)
            fail(kind_name(j->kind), std::to_string(in_bytes) +
                                         " bytes in one collective, MPI counts stop at 2^31 - 1 "
                                         "(split the tensor)");
        if (in->on_host()) {
            j->send = in->data();
        } else { // a device's memory: through the host (no NCCL in this build's runtime)
            j->stage_in.resize(in_bytes);
            in->copy_to_host(j->stage_in.data(), in_bytes);
            j->send = j->stage_in.data();
        }
        if (out->on_host()) {
            j->recv = out->data();
        } else {
            j->stage_out.resize(out_bytes);
            j->recv = j->stage_out.data();
        }
        j->in = std::move(in);
        j->out = std::move(out);
        j->desc = Desc{j->kind,
                       j->reduce,
                       j->root,
                       j->deterministic ? 1 : 0,
                       static_cast<int64_t>(j->dtype.scalar),
                       static_cast<int64_t>(j->shape.size())};
        for (size_t d = 0; d < j->shape.size(); ++d) {
            if (d < 6)
                j->desc[6 + d] = j->shape[d];
            else
                j->desc[11] *= j->shape[d];
        }
        return j;
    }

    std::shared_ptr<Job> enqueue(std::shared_ptr<Job> j) {
        // Nothing is thrown while mu_ is held: an uncaught exception ends in on_terminate, whose
        // announce_stop takes mu_ on this same thread.
        std::string broken;
        {
            std::lock_guard<std::mutex> l(mu_);
            broken = broken_;
            // The thread no longer runs: a job queued now would never finish.
            if (broken.empty() && stopping_)
                broken = "[dist] " +
                         (stop_why_.empty() ? std::string("the runtime stopped") : stop_why_) +
                         ": no collective can start";
            if (broken.empty()) {
                j->seq = ++started_;
                queue_.push_back(j);
            }
        }
        if (!broken.empty()) throw Error(broken);
        cv_.notify_one();
        return j;
    }

    // A CUDA buffer's collective through NCCL, queued on the device's stream after the kernel
    // that wrote its source; the kernels after it on the stream run after it. The first run's
    // shape check goes through MPI (the descriptors only).
    std::shared_ptr<void> start_nccl(const UOp& node, const std::shared_ptr<runtime::Buffer>& in,
                                     const std::shared_ptr<runtime::Buffer>& out, bool first) {
        const auto& a = node.arg_as<std::vector<int64_t>>();
        if (a.at(3) != size)
            fail(kind_name(a[0]), "the graph was built for " + std::to_string(a[3]) +
                                      " ranks, this job has " + std::to_string(size));
        const int ordinal = runtime::cuda_ordinal(in->device());
        cuda::Context& ctx = cuda::driver().context(ordinal);
        if (first) {
            auto none = runtime::make_buffer(DType::UInt8, 0);
            auto j = make_job(a, node.dtype(), node.src(0).shape(), none, none, true);
            j->check_only = true;
            wait(enqueue(j));
        }
        void* comm = nccl_comm(ordinal, ctx);
        if (comm == nullptr) return nullptr; // NCCL could not start: through host memory
        const int type = nccl_type(node.dtype());
        const int op = a[1] == 0 ? 0 : a[1] == 1 ? 2 : 3; // ncclSum, ncclMax, ncclMin
        const void* send = reinterpret_cast<const void*>(in->address());
        void* recv = reinterpret_cast<void*>(out->address());
        const auto n = static_cast<size_t>(in->numel());
        void* stream = ctx.stream();
        switch (a[0]) {
        case 0:
            nccl.check(nccl.all_reduce(send, recv, n, type, op, comm, stream), "ncclAllReduce");
            break;
        case 1:
            nccl.check(nccl.broadcast(send, recv, n, type, static_cast<int>(a[2]), comm, stream),
                       "ncclBroadcast");
            break;
        case 2:
            nccl.check(nccl.all_gather(send, recv, n, type, comm, stream), "ncclAllGather");
            break;
        default:
            nccl.check(nccl.reduce_scatter(send, recv, static_cast<size_t>(out->numel()), type, op,
                                           comm, stream),
                       "ncclReduceScatter");
        }
        stat_collectives.fetch_add(1);
        stat_bytes.fetch_add(static_cast<int64_t>(in->nbytes()));
        stat_nccl.fetch_add(1);
        auto done = std::make_shared<Job>();
        done->done = true; // ordered on the stream: nothing to wait for on the host
        return done;
    }

    // The device's NCCL communicator, made by every rank at its first CUDA collective there:
    // rank 0's unique id is broadcast over MPI.
    void* nccl_comm(int ordinal, cuda::Context& ctx) {
        if (auto it = nccl_comms.find(ordinal); it != nccl_comms.end()) return it->second;
        auto id_in = runtime::make_buffer(DType::UInt8, sizeof(NcclId));
        auto id_out = runtime::make_buffer(DType::UInt8, sizeof(NcclId));
        if (rank == 0)
            nccl.check(nccl.get_unique_id(static_cast<NcclId*>(id_in->data())), "ncclGetUniqueId");
        wait(enqueue(make_job({1, 0, 0, size, 0}, DType::UInt8,
                              Shape{static_cast<int64_t>(sizeof(NcclId))}, id_in, id_out, false)));
        NcclId id;
        std::memcpy(&id, id_out->data(), sizeof id);
        ctx.synchronize(); // the device's context current on this thread, its work done
        void* comm = nullptr;
        if (const int r = nccl.comm_init_rank(&comm, size, id, rank); r != 0) {
            // An NCCL that cannot drive this device (another CUDA than its own, the mock driver):
            // the collectives go through host memory, as without NCCL.
            env::warn_once(std::string("[dist] NCCL could not start on CUDA:") +
                           std::to_string(ordinal) + " (ncclCommInitRank: " + nccl.error_string(r) +
                           "): CUDA collectives go through host memory");
            nccl.lib = nullptr;
            return nullptr;
        }
        nccl_comms.emplace(ordinal, comm);
        return comm;
    }

    void wait(const std::shared_ptr<void>& ticket) override {
        Job& j = *static_cast<Job*>(ticket.get());
        std::string error;
        std::unique_lock<std::mutex> l(j.mu);
        if (!j.done) {
            const auto t0 = Clock::now();
            j.cv.wait(l, [&] { return j.done; });
            // Once per job: steps that wait for it at once (a level run in parallel) are one
            // stall of the plan.
            if (!j.wait_counted)
                stat_wait_ns.fetch_add(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0)
                        .count());
            j.wait_counted = true;
        }
        error = j.error;
        if (error.empty() && !j.copied_back && !j.stage_out.empty()) {
            // A device error thrown here leaves copied_back false (j.mu is no lock the
            // terminate handler takes).
            j.out->copy_from_host(j.recv, j.out->nbytes());
        }
        if (error.empty()) j.copied_back = true;
        l.unlock();
        if (!error.empty()) throw Error(error); // not under j.mu (see enqueue)
    }

    // From any thread: tells every other rank that this one stops for `why`, then waits (at
    // most 2 s) until they have seen it, so that they report it before the launcher ends them.
    // It runs in the terminate handler, perhaps on a thread that holds mu_ (nothing here throws
    // under mu_, but a terminate can come from anywhere): mu_ is only tried, for at most 200 ms
    // (the communication thread holds it for moments), and the notice is skipped without it.
    void announce_stop(const std::string& why) {
        std::unique_lock<std::mutex> l(mu_, std::defer_lock);
        if (!try_lock_briefly(l)) return;
        if (!thread_.joinable() || stopping_) return;
        for (int r = 0; r < size; ++r)
            if (r != rank) outbox_.emplace_back(r, make_ctl(kStopped, started_, 0, why));
        l.unlock();
        cv_.notify_one();
        const auto until = Clock::now() + std::chrono::seconds(2);
        if (!try_lock_briefly(l)) return;
        cv_done_.wait_until(l, until, [&] { return stop_seen_ + 1 >= size; });
    }

    // Stops the communication thread; with `finalizing`, first tells the others.
    void shutdown(bool finalizing) {
        {
            std::lock_guard<std::mutex> l(mu_);
            if (!thread_.joinable()) return;
            if (finalizing)
                for (int r = 0; r < size; ++r)
                    if (r != rank) outbox_.emplace_back(r, make_ctl(kFinalizing, started_, 0));
            stopping_ = true;
            stop_why_ = finalizing ? "dist::finalize() ran" : "the process exited";
        }
        cv_.notify_one();
        thread_.join();
    }

    bool faulted() {
        std::lock_guard<std::mutex> l(mu_);
        return !broken_.empty() || peer_stopped_;
    }

  private:
    static bool try_lock_briefly(std::unique_lock<std::mutex>& l) {
        const auto until = Clock::now() + std::chrono::milliseconds(200);
        while (!l.try_lock()) {
            if (Clock::now() >= until) return false;
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        return true;
    }

    // ---- shared with the calling threads, under mu_ ----------------------------------------
    std::mutex mu_;
    std::condition_variable cv_, cv_done_;
    std::deque<std::shared_ptr<Job>> queue_;
    std::deque<std::pair<int, Ctl>> outbox_;
    int64_t started_ = 0;
    bool stopping_ = false, peer_stopped_ = false;
    std::string stop_why_; // what set stopping_
    int stop_seen_ = 0;
    std::string broken_; // the first fault: every later collective fails with it
    std::thread thread_;

    // ---- the communication thread's -----------------------------------------------------------
    std::deque<std::shared_ptr<Job>> fresh_; // taken from queue_, not yet posted
    std::vector<std::shared_ptr<Job>> active_;
    Ctl in_ctl_;
    MPI_Request ctl_req_ = MPI_REQUEST_NULL;
    std::list<std::pair<std::unique_ptr<Ctl>, MPI_Request>> sends_;
    int64_t posted_ = 0;                // collectives posted to MPI
    std::vector<std::string> stopped_;  // per rank: why it stopped, or empty
    std::vector<int64_t> finalized_at_; // per rank: its collectives at finalize, or -1
    bool diagnosing_ = false;
    Clock::time_point diag_until_;
    int64_t token_ = 0;
    std::vector<int64_t> pong_seq_;
    std::vector<std::string> pong_text_;

    void finish(Job& j, const std::string& error) {
        {
            std::lock_guard<std::mutex> l(j.mu);
            j.error = error;
            j.done = true;
            j.state = 3;
        }
        j.cv.notify_all();
    }

    void set_broken(const std::string& why) {
        std::lock_guard<std::mutex> l(mu_);
        if (broken_.empty()) broken_ = why;
    }

    // Fails every job in flight (and, through broken_, every later one) with `why`.
    void fail_all(const std::string& why) {
        set_broken(why);
        for (auto& j : active_)
            if (j->state != 3) finish(*j, why);
        active_.clear();
        diagnosing_ = false;
    }

    std::string of_n(int r) const {
        return "rank " + std::to_string(r) + " of " + std::to_string(size);
    }

    void send_ctl(int to, const Ctl& c) {
        auto buf = std::make_unique<Ctl>(c);
        MPI_Request req;
        MPI_Isend(buf.get(), sizeof(Ctl), MPI_BYTE, to, static_cast<int>(c.type), ctl, &req);
        sends_.emplace_back(std::move(buf), req);
    }

    // Why a job cannot run because a rank is gone, or empty.
    std::string gone_for(const Job& j) const {
        for (int r = 0; r < size; ++r) {
            if (!stopped_[r].empty())
                return "[dist] " + of_n(r) + " stopped: " + stopped_[r] + "; rank " +
                       std::to_string(rank) + " was in " + j.what();
            if (finalized_at_[r] >= 0 && finalized_at_[r] < j.seq)
                return "[dist] " + of_n(r) + " stopped: it called dist::finalize() after " +
                       std::to_string(finalized_at_[r]) + " collectives; rank " +
                       std::to_string(rank) + " waits in " + j.what();
        }
        return "";
    }

    void post(Job& j) {
        j.started = Clock::now();
        if (j.check) {
            j.descs.resize(static_cast<size_t>(kDescLen * size));
            MPI_Iallgather(j.desc.data(), kDescLen, MPI_INT64_T, j.descs.data(), kDescLen,
                           MPI_INT64_T, check, &j.req);
            j.state = 1;
            return;
        }
        j.state = 4;
    }

    void post_data(Job& j) {
        posted_ = std::max(posted_, j.seq);
        const int bytes = static_cast<int>(j.in->nbytes());
        const int count = static_cast<int>(j.numel);
        j.state = 2;
        if (j.via_gather()) {
            j.gathered.resize(static_cast<size_t>(bytes) * static_cast<size_t>(size));
            MPI_Iallgather(j.send, bytes, MPI_BYTE, j.gathered.data(), bytes, MPI_BYTE, data,
                           &j.req);
            return;
        }
        switch (j.kind) {
        case 0:
            MPI_Iallreduce(j.send, j.recv, count, mpi_type(j.dtype), mpi_op(j.reduce, j.dtype),
                           data, &j.req);
            return;
        case 1:
            if (rank == j.root) std::memcpy(j.recv, j.send, static_cast<size_t>(bytes));
            MPI_Ibcast(j.recv, bytes, MPI_BYTE, static_cast<int>(j.root), data, &j.req);
            return;
        case 2:
            MPI_Iallgather(j.send, bytes, MPI_BYTE, j.recv, bytes, MPI_BYTE, data, &j.req);
            return;
        default:
            MPI_Ireduce_scatter_block(j.send, j.recv, static_cast<int>(j.out_numel),
                                      mpi_type(j.dtype), mpi_op(j.reduce, j.dtype), data, &j.req);
        }
    }

    // Advances a job by what MPI has done; returns whether it is finished. `first`: no job before
    // it is still to post its data.
    bool progress(Job& j, bool first) {
        if (j.state == 4) {
            if (first) post_data(j);
            return false;
        }
        int flag = 0;
        MPI_Test(&j.req, &flag, MPI_STATUS_IGNORE);
        if (!flag) return false;
        if (j.state == 1) {
            bool same = true;
            for (int r = 0; r < size; ++r)
                same = same && std::equal(j.desc.begin(), j.desc.end(),
                                          j.descs.begin() + static_cast<ptrdiff_t>(r) * kDescLen);
            if (same && j.check_only) {
                finish(j, "");
                return true;
            }
            if (!same) {
                std::string msg = "ranks disagree on collective #" + std::to_string(j.seq) + ":";
                for (int r = 0; r < size; ++r) {
                    Desc d;
                    std::copy_n(j.descs.begin() + static_cast<ptrdiff_t>(r) * kDescLen, kDescLen,
                                d.begin());
                    msg += std::string(r ? "," : "") + " rank " + std::to_string(r) + " has " +
                           describe(d);
                }
                finish(j, "[" + std::string(kind_name(j.kind)) + "] " + msg);
                return true;
            }
            j.state = 4;
            if (first) post_data(j);
            return false;
        }
        if (j.via_gather()) {
            if (j.kind == 0)
                local_reduce(j, j.numel, j.numel, 0);
            else
                local_reduce(j, j.out_numel, j.numel, rank * j.out_numel);
        }
        finish(j, "");
        return true;
    }

    void handle(const Ctl& c, int from) {
        switch (c.type) {
        case kPing: {
            std::string doing = "computing";
            for (auto& j : active_)
                if (j->state != 3) {
                    doing = "waiting in " + j->what();
                    break;
                }
            send_ctl(from, make_ctl(kPong, c.a, posted_, doing));
            break;
        }
        case kPong:
            if (diagnosing_ && c.a == token_) {
                pong_seq_[from] = c.b;
                pong_text_[from] = c.text;
            }
            break;
        case kStopped: {
            stopped_[from] = c.text;
            send_ctl(from, make_ctl(kStopSeen, 0, 0));
            {
                std::lock_guard<std::mutex> l(mu_);
                peer_stopped_ = true;
            }
            if (!active_.empty()) fail_all(gone_for(*active_.front()));
            break;
        }
        case kFinalizing: {
            finalized_at_[from] = c.a;
            std::vector<std::shared_ptr<Job>> keep;
            for (auto& j : active_) {
                if (j->seq > c.a) {
                    const std::string why = gone_for(*j);
                    set_broken(why);
                    finish(*j, why);
                } else {
                    keep.push_back(j);
                }
            }
            active_ = std::move(keep);
            break;
        }
        case kStopSeen: {
            {
                std::lock_guard<std::mutex> l(mu_);
                ++stop_seen_;
            }
            cv_done_.notify_all();
            break;
        }
        default: break;
        }
    }

    // A collective waited too long: ask every rank what it is doing, name who is gone.
    void diagnose(const Job& j, Clock::time_point now) {
        const double window = std::min(1.0, timeout / 4);
        if (!diagnosing_) {
            if (now - j.started < std::chrono::duration<double>(timeout - window)) return;
            diagnosing_ = true;
            ++token_;
            diag_until_ = now + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(window));
            std::fill(pong_seq_.begin(), pong_seq_.end(), -1);
            pong_seq_[rank] = posted_;
            for (int r = 0; r < size; ++r)
                if (r != rank) send_ctl(r, make_ctl(kPing, token_, 0));
            return;
        }
        bool all = true;
        for (int r = 0; r < size; ++r) all = all && pong_seq_[r] >= 0;
        if (!all && now < diag_until_) return;
        char secs[32];
        std::snprintf(secs, sizeof secs, "%g s", timeout);
        std::string who, msg;
        std::vector<int> silent, behind;
        for (int r = 0; r < size; ++r) {
            if (pong_seq_[r] < 0)
                silent.push_back(r);
            else if (pong_seq_[r] < j.seq)
                behind.push_back(r);
        }
        const std::string me =
            "rank " + std::to_string(rank) + " waited " + secs + " in " + j.what();
        if (!silent.empty()) {
            msg = "[dist] " + of_n(silent[0]) +
                  " stopped: it does not answer (it died, or hangs "
                  "outside Tempura); " +
                  me;
            for (size_t i = 1; i < silent.size(); ++i)
                msg += "; rank " + std::to_string(silent[i]) + " does not answer either";
        } else if (!behind.empty()) {
            const int b = behind[0];
            msg = "[dist] " + of_n(b) + " stopped: it answers but has started only " +
                  std::to_string(pong_seq_[b]) + " collectives (" + pong_text_[b] + "); " + me;
        } else {
            msg = "[dist] " + j.what() + " did not finish within " + secs +
                  ", though every rank answers and has reached it (do all ranks run the same "
                  "collectives in the same order?)";
        }
        fail_all(msg);
    }

    // One round of the communication thread: new jobs posted, jobs in flight advanced, control
    // messages read and sent. Returns whether the runtime stops.
    bool turn() {
        std::deque<std::pair<int, Ctl>> out;
        bool stop;
        {
            std::unique_lock<std::mutex> l(mu_);
            if (queue_.empty() && outbox_.empty() && active_.empty() && !stopping_)
                cv_.wait_for(l, std::chrono::milliseconds(1));
            fresh_.swap(queue_);
            out.swap(outbox_);
            stop = stopping_;
        }
        for (auto& [to, c] : out) send_ctl(to, c);
        for (; !fresh_.empty(); fresh_.pop_front()) {
            const std::shared_ptr<Job>& j = fresh_.front();
            std::string broken;
            {
                std::lock_guard<std::mutex> l(mu_);
                broken = broken_;
            }
            if (broken.empty()) broken = gone_for(*j);
            if (!broken.empty()) {
                set_broken(broken);
                finish(*j, broken);
                continue;
            }
            post(*j);
            active_.push_back(j);
        }
        bool first = true;
        for (size_t i = 0; i < active_.size();) {
            const bool finished = progress(*active_[i], first);
            first = first && (finished || active_[i]->state == 2);
            if (finished)
                active_.erase(active_.begin() + static_cast<ptrdiff_t>(i));
            else
                ++i;
        }
        for (int flag = 1; flag;) {
            MPI_Status st;
            MPI_Test(&ctl_req_, &flag, &st);
            if (!flag) break;
            const Ctl c = in_ctl_;
            MPI_Irecv(&in_ctl_, sizeof(Ctl), MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, ctl, &ctl_req_);
            handle(c, st.MPI_SOURCE);
        }
        if (!active_.empty()) diagnose(*active_.front(), Clock::now());
        for (auto it = sends_.begin(); it != sends_.end();) {
            int flag = 0;
            MPI_Test(&it->second, &flag, MPI_STATUS_IGNORE);
            it = flag ? sends_.erase(it) : std::next(it);
        }
        return stop;
    }

    // The communication thread itself failed: every job in flight and every later one fails
    // with the reason, and the other ranks are told that this one stops (rather than each
    // waiting for the timeout to find it silent).
    void die(const std::string& what) {
        const std::string why =
            what.rfind('[', 0) == 0 ? what : "[dist] the communication thread failed: " + what;
        fail_all(why);
        for (auto& j : fresh_)
            if (j->state != 3) finish(*j, why);
        fresh_.clear();
        {
            std::lock_guard<std::mutex> l(mu_);
            stopping_ = true; // no notice is sent after this one (nothing reads the outbox)
        }
        send_stopped("its communication thread failed: " + what);
    }

    // On the communication thread: tells every other rank that this one stopped for `why` (they
    // fail what waits for it, and do not wait for it in MPI_Finalize).
    void send_stopped(const std::string& why) {
        int64_t started = 0;
        {
            std::lock_guard<std::mutex> l(mu_);
            started = started_;
        }
        for (int r = 0; r < size; ++r)
            if (r != rank) send_ctl(r, make_ctl(kStopped, started, 0, why));
    }

    void loop() {
        stopped_.assign(static_cast<size_t>(size), "");
        finalized_at_.assign(static_cast<size_t>(size), -1);
        pong_seq_.assign(static_cast<size_t>(size), -1);
        pong_text_.assign(static_cast<size_t>(size), "");
        MPI_Irecv(&in_ctl_, sizeof(Ctl), MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, ctl, &ctl_req_);
        for (;;) {
            bool stop = false;
            try {
                stop = turn();
            } catch (const std::exception& e) {
                die(e.what());
                break;
            } catch (...) {
                die("an exception that is not a std::exception");
                break;
            }
            if (stop) {
                // A thread in wait() for a job still in flight would wait for ever.
                if (!active_.empty()) {
                    std::string why;
                    {
                        std::lock_guard<std::mutex> l(mu_);
                        why = stop_why_;
                    }
                    fail_all("[dist] " + why + " with collectives in flight (" +
                             active_.front()->what() + ")");
                    // This rank now ends without MPI_Finalize (its requests in flight never
                    // complete): the others are told it stopped, so that they do not wait for
                    // it in theirs (a rank that finalized while another of its threads waited
                    // in a collective left the other rank hanging in MPI_Finalize).
                    send_stopped(why + " with collectives in flight");
                }
                break;
            }
            // Polling: MPI moves non-blocking collectives only inside its calls. The first
            // 200 us of a job yield between polls (a short collective ends with little delay),
            // later ones sleep (a long one leaves the cores to the kernels).
            if (!active_.empty()) {
                if (Clock::now() - active_.front()->started < std::chrono::microseconds(200))
                    std::this_thread::yield();
                else
                    std::this_thread::sleep_for(std::chrono::microseconds(20));
            }
        }
        // The last control messages (finalize's notice) leave before MPI goes; the rest is
        // dropped (a rank that is gone never takes them).
        const auto until = Clock::now() + std::chrono::seconds(1);
        while (!sends_.empty() && Clock::now() < until) {
            for (auto it = sends_.begin(); it != sends_.end();) {
                int flag = 0;
                MPI_Test(&it->second, &flag, MPI_STATUS_IGNORE);
                it = flag ? sends_.erase(it) : std::next(it);
            }
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
        MPI_Cancel(&ctl_req_);
    }
};

Runtime* g_rt = nullptr; // lives for the process (the thread is joined at finalize or exit)
bool g_finalized = false;
std::terminate_handler g_prev_terminate = nullptr;

void on_terminate() {
    std::string why = "std::terminate was called";
    if (std::exception_ptr e = std::current_exception()) {
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& x) {
            why = std::string("it threw an uncaught exception: ") + x.what();
        } catch (...) {
            why = "it threw an uncaught exception";
        }
    }
    if (g_rt != nullptr && !g_finalized) g_rt->announce_stop(why);
    if (g_prev_terminate != nullptr) g_prev_terminate();
    std::abort();
}

void at_exit() {
    if (g_rt == nullptr || g_finalized) return;
    g_rt->announce_stop("it exited without calling dist::finalize()");
    g_rt->shutdown(false);
}

} // namespace

void comm_init() {
    if (g_rt != nullptr) return;
    if (g_finalized) fail("dist", "init() after finalize(): MPI cannot start twice in a process");
    int ready = 0;
    MPI_Initialized(&ready);
    if (!ready) {
        int provided = 0;
        if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            fail("dist", "MPI_Init_thread failed");
        if (provided < MPI_THREAD_SERIALIZED)
            fail("dist", "this MPI gives thread level " + std::to_string(provided) +
                             ", Tempura's communication thread needs MPI_THREAD_SERIALIZED");
    }
    auto* rt = new Runtime;
    MPI_Comm_rank(MPI_COMM_WORLD, &rt->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &rt->size);
    MPI_Comm_dup(MPI_COMM_WORLD, &rt->data);
    MPI_Comm_dup(MPI_COMM_WORLD, &rt->check);
    MPI_Comm_dup(MPI_COMM_WORLD, &rt->ctl);
    rt->timeout = static_cast<double>(env::get_int("TEMPURA_DIST_TIMEOUT", 60, 1, 7 * 24 * 3600));
    rt->nccl.load();
    rt->launch();
    g_rt = rt;
    set_collective_runner(rt);
    g_prev_terminate = std::set_terminate(on_terminate);
    std::atexit(at_exit);
}

bool comm_initialized() { return g_rt != nullptr && !g_finalized; }

void comm_finalize() {
    if (g_rt == nullptr || g_finalized) return;
    const bool faulted = g_rt->faulted();
    g_rt->shutdown(!faulted);
    set_collective_runner(nullptr);
    g_finalized = true;
    // After a fault MPI_Finalize would wait for ranks that are gone, and with collectives that
    // were still in flight (failed by the shutdown) for requests that never complete: the
    // process ends without it.
    if (!faulted && !g_rt->faulted()) MPI_Finalize();
}

int comm_rank() { return comm_initialized() ? g_rt->rank : env_int(kRankVars, 0); }

int comm_size() { return comm_initialized() ? g_rt->size : env_int(kSizeVars, 1); }

CommStats comm_stats() {
    if (g_rt == nullptr) return {};
    return CommStats{g_rt->stat_collectives.load(), g_rt->stat_bytes.load(),
                     static_cast<double>(g_rt->stat_wait_ns.load()) * 1e-9, g_rt->stat_nccl.load()};
}

#endif

} // namespace tempura::dist::detail
