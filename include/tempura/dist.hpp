#pragma once
// tempura::dist: training on several processes, on one host or many, over OpenMPI (processes,
// hosts, CPU buffers) and NCCL for CUDA buffers when libnccl.so.2 loads (TEMPURA_LIBNCCL names
// another; without it CUDA buffers go through host memory and MPI). Launch the program with
// mpirun (or srun) and call dist::init() first.
//
// Collectives are nodes of the lazy graph: all_reduce(x) builds a node that realize() runs as a
// step of its own between kernels, started (non-blocking MPI) as soon as its source is computed
// and waited for only by the first kernel that reads its result, so independent kernels run
// while the bytes move, and the kernels on either side still fuse with their neighbours.
// Gradients do not flow through a collective (its result is detached).
//
// Faults: a rank that throws an uncaught exception, calls finalize() or exits early tells the
// others, whose collective then fails at once; a rank that dies (SIGKILL) or stops answering is
// found when a collective waits longer than TEMPURA_DIST_TIMEOUT seconds (default 60). Either
// way the waiting ranks throw tempura::Error "[dist] rank 2 of 4 stopped: ...", never hang. The
// first run of each collective of a plan compares dtype and shape across ranks (a small
// all_gather) and throws "[all_reduce] ranks disagree: ..." naming each rank's.
//
// Built without MPI (no libopenmpi-dev at configure time), init() throws an error that says so.
// No MPI header is included here.
#include <cstdint>
#include <memory>
#include <vector>

#include "tempura/error.hpp"
#include "tempura/nn/module.hpp"
#include "tempura/tensor/tensor.hpp"

namespace tempura::dist {

// Whether this build has MPI.
bool available();
// Starts MPI (once; MPI_THREAD_SERIALIZED, a communication thread makes every MPI call) and the
// runtime that realizes collectives. Throws "[dist] Tempura was built without MPI ..." in a
// build without it.
void init();
bool initialized();
// This process's rank and the number of ranks: MPI's after init(); before it, what the launcher
// set (mpirun's OMPI_COMM_WORLD_RANK/SIZE, Slurm's SLURM_PROCID/SLURM_NTASKS), else 0 and 1.
int rank();
int world_size();
// The rank among the processes of this host (a GPU per process: CUDA:<local_rank>).
int local_rank();
// Tells the other ranks, stops the runtime and finalizes MPI. After a fault (a collective threw)
// it does not wait for the others (MPI_Finalize would): the process then exits with its error.
void finalize();

enum class ReduceOp { Sum, Mean, Max, Min };

// Every rank gets the reduction of every rank's x (same shape and dtype on each). Mean is the
// sum divided by the world size (integer division for integer dtypes); bool takes Sum and Max
// as logical or, Min as logical and. deterministic: the sum is taken in rank order
// (((x0 + x1) + x2) ...), the same bits on every run and every process count's grouping,
// through an all_gather and a local sum (the world size times the bytes of an all_reduce).
// float16 and bfloat16 always go that way (MPI has no such type), summed in float32 and rounded
// at each step.
Tensor all_reduce(const Tensor& x, ReduceOp op = ReduceOp::Sum, bool deterministic = false);
// Every rank gets root's x.
Tensor broadcast(const Tensor& x, int root = 0);
// The ranks' x concatenated along `axis` in rank order.
Tensor all_gather(const Tensor& x, int64_t axis = 0);
// The reduction of every rank's x, split along dim 0 into world_size parts: rank r gets part r
// (dim 0 must divide evenly).
Tensor reduce_scatter(const Tensor& x, ReduceOp op = ReduceOp::Sum, bool deterministic = false);
// Returns once every rank called it.
void barrier();

// Communication totals of this process since init(), for benchmarks: collectives run, bytes
// they sent, and the time the plan's steps spent waiting for them (wait_seconds: time a kernel
// or the plan's end was blocked on an unfinished collective).
struct CommStats {
    int64_t collectives = 0;
    int64_t bytes = 0;
    double wait_seconds = 0;
    int64_t nccl = 0; // of the collectives, those NCCL ran (CUDA buffers, with NCCL loaded)
};
CommStats comm_stats();

// This rank's share of the indices [0, size), as torch.utils.data.DistributedSampler: with
// shuffle, a permutation drawn from (seed, epoch) (the same on every rank); without drop_last,
// the list is padded with its first indices to a multiple of the world size, so every rank gets
// the same number; rank r takes positions r, r + W, r + 2W, ...
class DistributedSampler {
  public:
    explicit DistributedSampler(int64_t size, bool shuffle = true, uint64_t seed = 0,
                                bool drop_last = false, int rank = -1, int world_size = -1);
    void set_epoch(int64_t epoch) { epoch_ = epoch; }
    std::vector<int64_t> indices() const;
    int64_t num_samples() const;

  private:
    int64_t size_, epoch_ = 0;
    bool shuffle_, drop_last_;
    uint64_t seed_;
    int rank_, world_;
};

// Data-parallel training: every rank holds the whole model and runs it on its own batch; after
// backward() every gradient is the mean over the ranks, so an optimizer step on each rank keeps
// the replicas equal.
//   - The constructor broadcasts rank 0's parameters and buffers.
//   - backward(loss) computes this rank's gradients and averages them in buckets of about
//     bucket_mb megabytes (the parameters in reverse order, as they become ready in the backward
//     pass), each a flat all_reduce node: the optimizer's step() realizes forward, backward,
//     the bucket all_reduces and the updates as one plan, where a bucket's exchange starts as
//     soon as the kernels computing its gradients have run, while the rest of the backward pass
//     runs, and the updates that read it wait for it.
//   - deterministic: each bucket is summed in rank order (all_reduce's deterministic), so a step
//     is the same bits as a single process summing the ranks' gradients in that order.
struct DataParallelOptions {
    double bucket_mb = 25;
    bool deterministic = false;
    // false: backward() computes (realizes) this rank's gradients at once, and the step's plan
    // only exchanges and applies them, with nothing left to overlap (a baseline for measuring
    // the overlap, as bench_dist does).
    bool overlap = true;
};

class DataParallel {
  public:
    using Options = DataParallelOptions;
    explicit DataParallel(nn::Module& module, Options options = {});
    explicit DataParallel(std::vector<Tensor> parameters, Options options = {});
    DataParallel(nn::Module& module, bool deterministic)
        : DataParallel(module, Options{25, deterministic, true}) {}

    // The module's forward pass (throws for a DataParallel made from a parameter list).
    Tensor forward(const Tensor& x);
    Tensor operator()(const Tensor& x) { return forward(x); }
    // loss.backward() for this rank's batch, with every parameter's gradient averaged across the
    // ranks (added to what it had accumulated, as backward() does).
    void backward(const Tensor& loss);

    // The buckets: indices into parameters(), in launch order.
    const std::vector<std::vector<size_t>>& buckets() const { return buckets_; }
    const std::vector<Tensor>& parameters() const { return params_; }

  private:
    void make_buckets();
    nn::Module* module_ = nullptr;
    std::vector<Tensor> params_;
    Options options_;
    std::vector<std::vector<size_t>> buckets_;
};

} // namespace tempura::dist
