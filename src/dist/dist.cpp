// tempura::dist's tensor-level side: collectives as COLLECTIVE nodes of the lazy graph, the
// sampler, and DataParallel (gradient buckets as all_reduce nodes of the training step's plan).
#include "tempura/dist.hpp"

#include <algorithm>
#include <random>

#include "comm.hpp"
#include "tempura/error.hpp"
#include "tempura/tensor/shape.hpp"
#include "tensor/tensor_impl.hpp"

namespace tempura::dist {

bool available() {
#ifdef TEMPURA_HAVE_MPI
    return true;
#else
    return false;
#endif
}

void init() { detail::comm_init(); }
bool initialized() { return detail::comm_initialized(); }
int rank() { return detail::comm_rank(); }
int world_size() { return detail::comm_size(); }
int local_rank() { return detail::comm_local_rank(); }
void finalize() { detail::comm_finalize(); }
CommStats comm_stats() { return detail::comm_stats(); }

namespace {

constexpr int64_t kAllReduce = 0, kBroadcast = 1, kAllGather = 2, kReduceScatter = 3;

void need_init(const char* op) {
    if (!initialized())
        fail(op, available() ? "needs tempura::dist::init() first" : detail::kBuiltWithoutMpi);
}

// The COLLECTIVE node over x (detached: no gradient flows through a collective).
Tensor collective(const char* op, const Tensor& x, int64_t kind, int64_t reduce, int64_t root,
                  bool deterministic) {
    need_init(op);
    if (TensorAccess::symbolic(x)) fail(op, "needs a tensor of fixed dims, not symbolic ones");
    const Tensor d = x.detach();
    const std::vector<int64_t> arg{kind, reduce, root, world_size(), deterministic ? 1 : 0};
    std::string why;
    const auto shape = infer_shape(Op::Collective, {d.uop()}, arg, &why);
    if (!shape) fail(op, shape_str(x.shape()) + ": " + why);
    // A world of one: every collective is the identity (its checks above still ran).
    if (world_size() == 1) return d;
    UOp u = UOp::make(Op::Collective, x.dtype(), {d.uop()}, arg);
    return TensorAccess::derive(d, std::move(u), *shape);
}

int64_t reduce_code(const char* op, ReduceOp r, const Tensor& x) {
    if (r == ReduceOp::Mean && x.dtype().is_bool())
        fail(op, "Mean of a bool tensor has no meaning (use Sum, Max or Min)");
    return r == ReduceOp::Max ? 1 : r == ReduceOp::Min ? 2 : 0;
}

Tensor mean_of(const Tensor& sum, ReduceOp r) {
    if (r != ReduceOp::Mean || world_size() == 1) return sum;
    return sum / Tensor::full({}, static_cast<double>(world_size()), sum.dtype());
}

} // namespace

Tensor all_reduce(const Tensor& x, ReduceOp op, bool deterministic) {
    const int64_t code = reduce_code("all_reduce", op, x);
    return mean_of(collective("all_reduce", x, kAllReduce, code, 0, deterministic), op);
}

Tensor broadcast(const Tensor& x, int root) {
    need_init("broadcast");
    if (root < 0 || root >= world_size())
        fail("broadcast",
             "root " + std::to_string(root) + " is not a rank of " + std::to_string(world_size()));
    return collective("broadcast", x, kBroadcast, 0, root, false);
}

Tensor all_gather(const Tensor& x, int64_t axis) {
    const char* op = "all_gather";
    need_init(op);
    if (x.ndim() == 0) fail(op, "needs a tensor of at least one dim, got a scalar");
    axis = normalize_axis(op, axis, x.ndim());
    const Tensor g = collective(op, x, kAllGather, 0, 0, false); // [W * s0, s1, ...]
    if (axis == 0 || world_size() == 1) return g;
    // The ranks' blocks along dim 0 become blocks along `axis`: [W, s...] with W moved next to
    // s[axis] and merged with it (movement ops: the reader's kernel does it).
    const Shape s = x.shape();
    const int64_t w = world_size();
    Shape split{w};
    split.insert(split.end(), s.begin(), s.end());
    std::vector<int64_t> perm;
    for (int64_t d = 1; d <= axis; ++d) perm.push_back(d);
    perm.push_back(0);
    for (int64_t d = axis + 1; d <= x.ndim(); ++d) perm.push_back(d);
    Shape out = s;
    out[static_cast<size_t>(axis)] *= w;
    return g.reshape(split).permute(perm).reshape(out);
}

Tensor reduce_scatter(const Tensor& x, ReduceOp op, bool deterministic) {
    const int64_t code = reduce_code("reduce_scatter", op, x);
    return mean_of(collective("reduce_scatter", x, kReduceScatter, code, 0, deterministic), op);
}

void barrier() {
    need_init("barrier");
    Tensor t = all_reduce(Tensor::full({1}, 1.0, DType::Int32));
    t.realize();
}

// ---- DistributedSampler -------------------------------------------------------------------

DistributedSampler::DistributedSampler(int64_t size, bool shuffle, uint64_t seed, bool drop_last,
                                       int rank, int world_size)
    : size_(size), shuffle_(shuffle), drop_last_(drop_last), seed_(seed),
      rank_(rank < 0 ? dist::rank() : rank),
      world_(world_size < 0 ? dist::world_size() : world_size) {
    if (size < 0) fail("DistributedSampler", "size " + std::to_string(size) + " is negative");
    if (world_ < 1 || rank_ >= world_)
        fail("DistributedSampler",
             "rank " + std::to_string(rank_) + " is not a rank of " + std::to_string(world_));
}

int64_t DistributedSampler::num_samples() const {
    return drop_last_ ? size_ / world_ : (size_ + world_ - 1) / world_;
}

std::vector<int64_t> DistributedSampler::indices() const {
    std::vector<int64_t> all(static_cast<size_t>(size_));
    for (int64_t i = 0; i < size_; ++i) all[static_cast<size_t>(i)] = i;
    if (shuffle_) {
        // Fisher-Yates over a 64-bit Mersenne Twister seeded by (seed, epoch): the same list on
        // every rank and every standard library (std::shuffle's algorithm is not specified).
        std::mt19937_64 gen(seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch_));
        for (int64_t i = size_ - 1; i > 0; --i) {
            const auto j = static_cast<int64_t>(gen() % static_cast<uint64_t>(i + 1));
            std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(j)]);
        }
    }
    const int64_t total = num_samples() * world_;
    for (int64_t i = size_; i < total && size_ > 0; ++i)
        all.push_back(all[static_cast<size_t>(i - size_)]);
    std::vector<int64_t> mine;
    for (int64_t i = rank_; i < total; i += world_) mine.push_back(all[static_cast<size_t>(i)]);
    return mine;
}

// ---- DataParallel ---------------------------------------------------------------------------

DataParallel::DataParallel(nn::Module& module, Options options)
    : DataParallel(module.parameters(), options) {
    module_ = &module;
    // Buffers (running statistics) start equal too.
    std::vector<std::pair<std::string, Tensor>> bufs = module.named_buffers();
    if (!bufs.empty()) {
        std::vector<Tensor> values;
        for (auto& [name, b] : bufs) values.push_back(broadcast(b, 0));
        std::vector<std::reference_wrapper<Tensor>> refs(values.begin(), values.end());
        realize(refs);
        for (size_t i = 0; i < bufs.size(); ++i) bufs[i].second.assign(values[i]);
    }
}

DataParallel::DataParallel(std::vector<Tensor> parameters, Options options)
    : params_(std::move(parameters)), options_(options) {
    need_init("DataParallel");
    if (!(options_.bucket_mb > 0))
        fail("DataParallel",
             "bucket_mb " + std::to_string(options_.bucket_mb) + " is not positive");
    for (size_t i = 0; i < params_.size(); ++i)
        if (!params_[i].requires_grad_enabled())
            fail("DataParallel", "parameter " + std::to_string(i) + " does not require a gradient");
    // Rank 0's values everywhere: one plan, every broadcast in flight at once.
    std::vector<Tensor> values;
    for (const Tensor& p : params_) values.push_back(broadcast(p, 0));
    std::vector<std::reference_wrapper<Tensor>> refs(values.begin(), values.end());
    realize(refs);
    for (size_t i = 0; i < params_.size(); ++i) params_[i].assign(values[i]);
    make_buckets();
}

void DataParallel::make_buckets() {
    // Reverse order (the last layers' gradients are computed first), one dtype and device per
    // bucket, each at most bucket_mb (a larger parameter is a bucket of its own).
    const auto limit = static_cast<int64_t>(options_.bucket_mb * 1024 * 1024);
    int64_t bytes = 0;
    for (size_t k = params_.size(); k-- > 0;) {
        const Tensor& p = params_[k];
        const int64_t b = p.numel() * p.dtype().itemsize();
        const bool fits = !buckets_.empty() && bytes + b <= limit &&
                          params_[buckets_.back().front()].dtype() == p.dtype() &&
                          params_[buckets_.back().front()].device() == p.device();
        if (!fits) {
            buckets_.emplace_back();
            bytes = 0;
        }
        buckets_.back().push_back(k);
        bytes += b;
    }
}

Tensor DataParallel::forward(const Tensor& x) {
    if (module_ == nullptr)
        fail("DataParallel", "made from a list of parameters: it has no forward pass (call the "
                             "model itself)");
    return module_->forward(x);
}

void DataParallel::backward(const Tensor& loss) {
    // This rank's gradients (lazy), each bucket's flat all_reduce, then each parameter's slice of
    // it divided by the world size: nodes of the graph the optimizer's step realizes.
    std::vector<Tensor> local = gradients(loss, params_);
    if (!options_.overlap) {
        std::vector<std::reference_wrapper<Tensor>> now(local.begin(), local.end());
        Tensor l = loss;
        now.emplace_back(l);
        realize(now);
    }
    std::vector<Tensor> averaged(params_.size());
    if (world_size() == 1) {
        // A world of one: the local gradients are the average (no cat, all_reduce or / 1).
        averaged = std::move(local);
    } else {
        const auto w = static_cast<double>(world_size());
        for (const std::vector<size_t>& bucket : buckets_) {
            std::vector<Tensor> flat;
            for (size_t k : bucket) flat.push_back(local[k].reshape({-1}));
            const Tensor joined = flat.size() == 1 ? flat[0] : Tensor::cat(flat, 0);
            const Tensor sum = all_reduce(joined, ReduceOp::Sum, options_.deterministic);
            const Tensor mean = sum / Tensor::full({}, w, sum.dtype());
            int64_t at = 0;
            for (size_t k : bucket) {
                const int64_t n = params_[k].numel();
                averaged[k] = mean.slice({Slice{at, at + n}}).reshape(params_[k].shape());
                at += n;
            }
        }
    }
    // Added to each parameter's accumulated gradient as backward() adds them: the step realizes
    // the loss with them (and loss.item() before the step realizes them with the loss).
    std::vector<tempura::detail::LeafGrad> adds;
    adds.reserve(params_.size());
    for (size_t k = 0; k < params_.size(); ++k)
        adds.emplace_back(TensorAccess::shared(params_[k]), std::move(averaged[k]));
    tempura::detail::add_to_grads(const_cast<Tensor&>(loss), adds);
}

} // namespace tempura::dist
