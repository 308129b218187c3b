// Autograd: the gradient rule group (one rule per op of the tensor-level graph, giving the
// adjoints of its sources from the adjoint of its result), the walk that applies it from a loss
// towards the leaves in reverse topological order, and the Tensor API on top (requires_grad,
// backward, grad, detach, assign, NoGrad, gradients).
//
// The backward graph is built from the forward graph's own nodes: it is lazy, and forward,
// backward and an optimizer's update fuse and schedule like any other graph.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <numbers>
#include <unordered_map>
#include <unordered_set>

#include "tempura/error.hpp"
#include "tempura/pattern/table.hpp"
#include "tempura/realize/realize.hpp"
#include "tempura/support/lru_cache.hpp"
#include "tempura/tensor/tensor.hpp"
#include "tensor_impl.hpp"

namespace tempura {

// ---- NoGrad -------------------------------------------------------------------------------------

namespace {
thread_local int no_grad_depth = 0;
} // namespace

NoGrad::NoGrad() { ++no_grad_depth; }
NoGrad::~NoGrad() { --no_grad_depth; }
bool NoGrad::active() { return no_grad_depth > 0; }

// ---- the leaf registry ----------------------------------------------------------------------
// A requires-grad tensor's current buffer (by id) -> its shared state; likewise a tensor that
// tracked gradients when it was realized (its state keeps the graph that computed it). Weak: the
// registry keeps no tensor alive; an entry whose state died, or whose tensor has another buffer now
// (after assign), is stale and dropped when the map has doubled since the last sweep.

namespace {

class Leaves {
  public:
    void add(const std::shared_ptr<Tensor::Shared>& s) {
        const auto& b = s->core.buffer;
        if (!b) return;
        std::lock_guard<std::mutex> l(mu_);
        map_[b->id()] = s;
        if (map_.size() >= sweep_at_) {
            std::erase_if(map_,
                          [](const auto& kv) { return live(kv.first, kv.second) == nullptr; });
            sweep_at_ = std::max<size_t>(64, 2 * map_.size());
        }
    }
    // The live leaf whose current buffer has this id, or null.
    std::shared_ptr<Tensor::Shared> find(int64_t id) {
        std::lock_guard<std::mutex> l(mu_);
        auto it = map_.find(id);
        return it == map_.end() ? nullptr : live(id, it->second);
    }

  private:
    static std::shared_ptr<Tensor::Shared> live(int64_t id,
                                                const std::weak_ptr<Tensor::Shared>& w) {
        auto s = w.lock();
        if (!s || !s->core.buffer || s->core.buffer->id() != id) return nullptr;
        if (!s->requires_grad && s->core.graph.is_null()) return nullptr;
        return s;
    }
    std::mutex mu_;
    std::unordered_map<int64_t, std::weak_ptr<Tensor::Shared>> map_;
    size_t sweep_at_ = 64;
};

Leaves& leaves() {
    static auto* l = new Leaves; // outlives static destructors
    return *l;
}

} // namespace

void detail::register_leaf(const std::shared_ptr<Tensor::Shared>& s) { leaves().add(s); }

// ---- the gradient rule group ------------------------------------------------------------------

namespace {

using namespace tempura::pattern;

// What a gradient rule gets: the adjoint of the node's result; `symbolic` for graphs of
// symbolic dims (broadcasts then keep their EXPANDs, as the forward graph does).
struct GradCtx {
    UOp grad;
    bool symbolic = false;
};

Tensor wrap(const UOp& u, bool symbolic) {
    return TensorAccess::make(u, u.shape(), TensorAccess::no_buffers(), symbolic);
}

// A rule's view of its node: the adjoint g of the result, the result itself and the sources,
// as tensors (so that the adjoints are written with the tensor ops: broadcasting and all).
struct Adj {
    const UOp& node;
    Tensor g, out;
    std::vector<Tensor> x;
    Tensor scalar(double v) const { return tempura::detail::scalar_like(g, v); }
    Tensor zeros() const { return Tensor::zeros(g.shape(), g.dtype()); }
};

using Grads = std::vector<std::optional<Tensor>>;

// The rule's right-hand side: the adjoints F gives, one per source (none for a source that takes
// no gradient), as SINK(adjoint or empty SINK, ...), which the walk below unpacks.
template <Grads (*F)(const Adj&)>
std::optional<UOp> adjoint(Match& m) {
    const GradCtx& c = m.context<GradCtx>();
    const UOp& n = *m.root;
    Adj a{n, wrap(c.grad, c.symbolic), wrap(n, c.symbolic), {}};
    for (const UOp& s : n.srcs()) a.x.push_back(wrap(s, c.symbolic));
    const Grads gs = F(a);
    std::vector<UOp> out;
    for (size_t i = 0; i < n.srcs().size(); ++i) {
        if (i < gs.size() && gs[i]) {
            if (gs[i]->shape() != n.src(i).shape() || gs[i]->dtype() != n.src(i).dtype())
                fail("backward", "internal: the " + std::string(op_name(n.op())) +
                                     " rule gave an adjoint of " + shape_str(gs[i]->shape()) +
                                     " for a source of " + shape_str(n.src(i).shape()));
            out.push_back(gs[i]->uop());
        } else {
            out.push_back(UOp::sink({}));
        }
    }
    return UOp::sink(std::move(out));
}

constexpr double kLn2 = std::numbers::ln2;

// d(-x) = -g
Grads neg_adj(const Adj& a) { return {-a.g}; }
// d 2^x = 2^x ln 2
Grads exp2_adj(const Adj& a) { return {a.g * a.out * a.scalar(kLn2)}; }
// d log2 x = 1 / (x ln 2)
Grads log2_adj(const Adj& a) { return {a.g / (a.x[0] * a.scalar(kLn2))}; }
Grads sin_adj(const Adj& a) { return {a.g * a.x[0].cos()}; }
Grads cos_adj(const Adj& a) { return {-(a.g * a.x[0].sin())}; }
// d erf x = 2/sqrt(pi) e^(-x^2)
Grads erf_adj(const Adj& a) {
    return {a.g * a.scalar(2.0 / std::sqrt(std::numbers::pi)) * (-(a.x[0] * a.x[0])).exp()};
}
// d sqrt x = 1 / (2 sqrt x)
Grads sqrt_adj(const Adj& a) { return {a.g / (a.out * a.scalar(2.0))}; }
// d (1/x) = -1/x^2
Grads recip_adj(const Adj& a) { return {-(a.g * a.out * a.out)}; }
// trunc (and floor, ceil, round built on it) is flat almost everywhere: 0, as PyTorch.
Grads trunc_adj(const Adj& a) { return {a.zeros()}; }
// Only float sources get here (the walk never sends a gradient into an integer or bool value).
Grads cast_adj(const Adj& a) { return {a.g.cast(a.x[0].dtype())}; }
Grads add_adj(const Adj& a) { return {a.g, a.g}; }
Grads sub_adj(const Adj& a) { return {a.g, -a.g}; }
Grads mul_adj(const Adj& a) { return {a.g * a.x[1], a.g * a.x[0]}; }
// d(x/y) = g/y, -g x/y^2 = -(g/y) (x/y)
Grads fdiv_adj(const Adj& a) {
    const Tensor gy = a.g / a.x[1];
    return {gy, -(gy * a.out)};
}
// x mod y = x - trunc(x/y) y (C's fmod): 1 and -trunc(x/y)
Grads mod_adj(const Adj& a) { return {a.g, -(a.g * (a.x[0] / a.x[1]).trunc())}; }
// max(x, y): the larger source takes the gradient; on a tie each takes half (as tinygrad).
Grads max_adj(const Adj& a) {
    const Tensor& x = a.x[0];
    const Tensor& y = a.x[1];
    const Tensor half = a.g * a.scalar(0.5), zero = a.scalar(0.0);
    const Tensor tie = x == y;
    return {where(tie, half, where(x > y, a.g, zero)), where(tie, half, where(y > x, a.g, zero))};
}
// where(c, x, y): c takes none.
Grads where_adj(const Adj& a) {
    const Tensor zero = a.scalar(0.0);
    return {std::nullopt, where(a.x[0], a.g, zero), where(a.x[0], zero, a.g)};
}
// x^y: y x^(y-1) (0 where y = 0, as PyTorch) and x^y ln x (0 where x = 0 and y >= 0).
Grads pow_adj(const Adj& a) {
    const Tensor& x = a.x[0];
    const Tensor& y = a.x[1];
    const Tensor zero = a.scalar(0.0);
    const Tensor dx = where(y == zero, zero, a.g * y * x.pow(y - a.scalar(1.0)));
    const Tensor dy = where(logical_and(x == zero, y >= zero), zero, a.g * a.out * x.log());
    return {dx, dy};
}
// CUSTOM_GRAD(value, x, d): x takes g * d (g expanded to x's shape); the value and the derivative
// take none. The value's own graph (the composite's building blocks) is never differentiated:
// a branch a `where` inside it did not take, 0 * inf in its chain rule, cannot leak a NaN.
Grads custom_grad_adj(const Adj& a) {
    if (const auto* p = std::get_if<std::vector<int64_t>>(&a.node.arg())) {
        auto [dx, dw] = tempura::detail::custom_vjp(a.g, a.x[1], a.x[2], *p);
        return Grads{std::nullopt, std::move(dx), std::move(dw)};
    }
    return {std::nullopt, a.g.expand(a.x[1].shape()) * a.x[2], std::nullopt};
}
// MULACC(x, y, z) = x y + z
Grads mulacc_adj(const Adj& a) { return {a.g * a.x[1], a.g * a.x[0], a.g}; }

// ---- movement: each adjoint is the inverse movement of g ----
Grads reshape_adj(const Adj& a) { return {a.g.reshape(a.x[0].shape())}; }
Grads permute_adj(const Adj& a) {
    const auto& p = a.node.arg_as<std::vector<int64_t>>();
    Shape inv(p.size());
    for (size_t i = 0; i < p.size(); ++i) inv[static_cast<size_t>(p[i])] = static_cast<int64_t>(i);
    return {a.g.permute(inv)};
}
// EXPAND (same rank; dims of size 1 grow): g summed over the grown dims, kept as 1.
Grads expand_adj(const Adj& a) {
    const Shape& in = a.x[0].shape();
    const Shape& out = a.node.shape();
    Shape axes;
    for (size_t i = 0; i < in.size(); ++i)
        if (in[i] != out[i]) axes.push_back(static_cast<int64_t>(i));
    if (axes.empty()) return {a.g};
    return {a.g.sum(axes, true).reshape(in)};
}
Grads pad_adj(const Adj& a) {
    const auto& p = a.node.arg_as<std::vector<int64_t>>();
    const Shape& in = a.x[0].shape();
    std::vector<std::pair<int64_t, int64_t>> b;
    for (size_t i = 0; i < in.size(); ++i) b.push_back({p[2 * i], p[2 * i] + in[i]});
    return {a.g.shrink(b)};
}
Grads shrink_adj(const Adj& a) {
    const auto& s = a.node.arg_as<std::vector<int64_t>>();
    const Shape& in = a.x[0].shape();
    std::vector<std::pair<int64_t, int64_t>> p;
    for (size_t i = 0; i < in.size(); ++i) p.push_back({s[2 * i], in[i] - s[2 * i + 1]});
    return {a.g.pad(p)};
}
Grads flip_adj(const Adj& a) {
    const auto& f = a.node.arg_as<std::vector<int64_t>>();
    Shape axes;
    for (size_t i = 0; i < f.size(); ++i)
        if (f[i]) axes.push_back(static_cast<int64_t>(i));
    return {a.g.flip(axes)};
}
// A materialization point forward is one backward: a chain of stages each reading two places of
// the one before (a sorting network) would otherwise be recomputed exponentially.
Grads contiguous_adj(const Adj& a) { return {a.g.contiguous()}; }

// ---- data-dependent indexing: each is the other's adjoint (the index takes none) ----
Grads gather_adj(const Adj& a) {
    const int64_t axis = a.node.arg_as<std::vector<int64_t>>()[0];
    const Tensor& x = a.x[0];
    return {Tensor::zeros(x.shape(), x.dtype()).scatter_add(axis, a.x[1], a.g), std::nullopt};
}
Grads scatter_add_adj(const Adj& a) {
    const int64_t axis = a.node.arg_as<std::vector<int64_t>>()[0];
    return {a.g, std::nullopt, a.g.gather(axis, a.x[1])};
}

// ---- reductions (REDUCE_AXIS keeps reduced dims as 1, so g and the result expand to x) ----
Grads reduce_adj(const Adj& a) {
    const auto& ra = a.node.arg_as<ReduceArg>();
    const Tensor& x = a.x[0];
    const Shape& in = x.shape();
    const Tensor g = a.g.expand(in);
    // REDUCE_AXIS of t by `op` over the node's axes (dims kept as 1).
    const auto reduce = [&](const Tensor& t, Op op) {
        return TensorAccess::derive(
            t, UOp::make(Op::ReduceAxis, t.dtype(), {t.uop()}, ReduceArg{op, ra.axes}),
            a.node.shape());
    };
    switch (ra.op) {
    case Op::Add: return {g};
    case Op::Max: {
        // Ties split the gradient equally (as tinygrad): each maximum takes g / count.
        const Tensor is_max = (x == a.out.expand(in)).cast(x.dtype());
        return {is_max / reduce(is_max, Op::Add).expand(in) * g};
    }
    case Op::Mul: {
        // d prod / d x_i = the product of the others, without dividing by a zero: with no zero
        // in the slice prod / x_i; with exactly one, the product of the nonzeros at the zero and
        // 0 elsewhere; with more, 0.
        const Tensor zero = a.scalar(0.0), one = a.scalar(1.0);
        const Tensor is_zero = x == zero;
        const Tensor zeros = reduce(is_zero.cast(x.dtype()), Op::Add).expand(in);
        const Tensor nonzero_prod = reduce(where(is_zero, one, x), Op::Mul).expand(in);
        const Tensor others =
            where(is_zero, where(zeros == one, nonzero_prod, zero),
                  where(zeros == zero, nonzero_prod / where(is_zero, one, x), zero));
        return {others * g};
    }
    default: fail("backward", "no gradient for REDUCE_AXIS of " + std::string(op_name(ra.op)));
    }
}

// clang-format off
inline constexpr auto gradient_rules = rules(
    rule(op<Op::Neg>(x), adjoint<neg_adj>),                   // -g
    rule(op<Op::Exp2>(x), adjoint<exp2_adj>),                 // g 2^x ln 2
    rule(op<Op::Log2>(x), adjoint<log2_adj>),                 // g / (x ln 2)
    rule(op<Op::Sin>(x), adjoint<sin_adj>),                   // g cos x
    rule(op<Op::Cos>(x), adjoint<cos_adj>),                   // -g sin x
    rule(op<Op::Erf>(x), adjoint<erf_adj>),                   // g 2/sqrt(pi) e^(-x^2)
    rule(op<Op::Sqrt>(x), adjoint<sqrt_adj>),                 // g / (2 sqrt x)
    rule(op<Op::Recip>(x), adjoint<recip_adj>),               // -g / x^2
    rule(op<Op::Trunc>(x), adjoint<trunc_adj>),               // 0
    rule(op<Op::Cast>(x), adjoint<cast_adj>),                 // g in the source's dtype
    rule(op<Op::Add>(x, y), adjoint<add_adj>),                // g, g
    rule(op<Op::Sub>(x, y), adjoint<sub_adj>),                // g, -g
    rule(op<Op::Mul>(x, y), adjoint<mul_adj>),                // g y, g x
    rule(op<Op::Fdiv>(x, y), adjoint<fdiv_adj>),              // g / y, -g x / y^2
    rule(op<Op::Mod>(x, y), adjoint<mod_adj>),                // g, -g trunc(x / y)
    rule(op<Op::Max>(x, y), adjoint<max_adj>),                // to the larger; ties halve
    rule(op<Op::Where>(x, y, z), adjoint<where_adj>),         // -, where(c, g, 0), where(c, 0, g)
    rule(op<Op::Pow>(x, y), adjoint<pow_adj>),                // g y x^(y-1), g x^y ln x
    rule(op<Op::MulAcc>(x, y, z), adjoint<mulacc_adj>),       // g y, g x, g
    rule(op<Op::CustomGrad>(x, y, z), adjoint<custom_grad_adj>), // -, g d, -
    rule(op<Op::Reshape>(x), adjoint<reshape_adj>),           // reshape back
    rule(op<Op::Permute>(x), adjoint<permute_adj>),           // the inverse permutation
    rule(op<Op::Expand>(x), adjoint<expand_adj>),             // summed over the grown dims
    rule(op<Op::Pad>(x), adjoint<pad_adj>),                   // shrink away the padding
    rule(op<Op::Shrink>(x), adjoint<shrink_adj>),             // pad back with zeros
    rule(op<Op::Flip>(x), adjoint<flip_adj>),                 // flip back
    rule(op<Op::Contiguous>(x), adjoint<contiguous_adj>),     // g, materialized
    rule(op<Op::Gather>(x, y), adjoint<gather_adj>),          // scatter_add of g into zeros
    rule(op<Op::ScatterAdd>(x, y, z), adjoint<scatter_add_adj>), // g, -, g gathered
    rule(op<Op::ReduceAxis>(x), adjoint<reduce_adj>));        // sum: g; max: to the maxima; prod
// clang-format on

const RuleTable& gradient_table() { return frozen<gradient_rules>(); }

// Which ops take a gradient through to their float sources (the others are leaves or have none).
bool differentiable(const UOp& u) { return !gradient_table().for_op(u.op()).empty(); }

// The walk: the nodes below root in topological order (sources first), not entering DETACH,
// without recursion (graphs can be deep).
std::vector<UOp> grad_toposort(const UOp& root) {
    std::vector<UOp> order;
    std::unordered_set<const UOpNode*> seen; // pushed once: on the stack or done
    std::vector<std::pair<UOp, size_t>> stack{{root, 0}};
    seen.insert(root.get());
    while (!stack.empty()) {
        auto& [u, i] = stack.back();
        const bool leaf = u.op() == Op::Detach || u.op() == Op::Buffer;
        if (!leaf && i < u.srcs().size()) {
            const UOp s = u.src(i++);
            if (seen.insert(s.get()).second) stack.push_back({s, 0});
            continue;
        }
        order.push_back(u);
        stack.pop_back();
    }
    return order;
}

struct WalkResult {
    UOpMap<UOp> grads;    // per target reached: its adjoint
    std::string blocked;  // an op that stopped a gradient on its way to a target, if any
    bool touched = false; // whether any target is below the root at all
};

// Applies the gradient rules from root (adjoint root_grad) in reverse topological order (topo:
// grad_toposort(root)); only nodes on a differentiable path to a target get an adjoint.
WalkResult walk(const UOp& root, const std::vector<UOp>& topo, const UOp& root_grad,
                const UOpMap<bool>& targets, bool symbolic) {
    // reach: the node is float and a differentiable path leads from it to a target; touch: some
    // path does (through anything but DETACH).
    UOpMap<std::pair<bool, bool>> flow;
    WalkResult r;
    for (const UOp& u : topo) {
        const bool target = targets.count(u) > 0;
        bool reach = target, touch = target;
        if (u.op() != Op::Detach && u.op() != Op::Buffer)
            for (const UOp& s : u.srcs()) {
                const auto& [sr, st] = flow.at(s);
                touch = touch || st;
                reach = reach || (sr && differentiable(u));
            }
        reach = reach && u.dtype().is_float();
        if (touch && !reach && r.blocked.empty() && u.dtype().is_float())
            r.blocked = std::string(op_name(u.op())) + " of " + u.src(0).dtype().name();
        flow.emplace(u, std::pair{reach, touch});
    }
    r.touched = flow.at(root).second;
    if (!flow.at(root).first) return r;
    UOpMap<UOp> adj;
    adj.emplace(root, root_grad);
    GradCtx ctx;
    ctx.symbolic = symbolic;
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
        const UOp& u = *it;
        auto a = adj.find(u);
        if (a == adj.end()) continue;
        if (targets.count(u)) r.grads.emplace(u, a->second);
        if (u.op() == Op::Buffer || u.op() == Op::Const || u.op() == Op::Detach) continue;
        ctx.grad = a->second;
        // The gradient's nodes name the user's line of the forward node they differentiate.
        const CallSiteOverride site(&u.location());
        const std::optional<UOp> out = gradient_table().rewrite_once(u, &ctx);
        if (!out) fail("backward", "no gradient rule for " + std::string(op_name(u.op())));
        for (size_t i = 0; i < u.srcs().size(); ++i) {
            const UOp& s = u.src(i);
            const UOp& g = out->src(i);
            if (g.op() == Op::Sink || !flow.at(s).first) continue;
            auto [pos, fresh] = adj.emplace(s, g);
            if (!fresh) pos->second = UOp::alu(Op::Add, {pos->second, g});
        }
        adj.erase(u); // done: its adjoint is no longer needed
    }
    return r;
}

// ---- recorded walks ---------------------------------------------------------------------------
// A training loop builds the same forward graph every step: new nodes (the parameters have new
// buffers), the same structure. The walk then builds the same gradient graph, through the
// tensor ops of every rule. So the gradient graph a walk built is recorded once per structure, as
// the nodes it added (op, dtype, arg and sources by position), and a graph of that structure
// later rebuilds them directly: the same nodes the walk would build (hash-consing makes them the
// same UOps), without the rules' tensor-level work. The key is the structure of the graph and of
// the seed (a BUFFER by its size, not its id), which nodes are targets, and the symbolic flag.
struct WalkRecipe {
    struct Node {
        Op op;
        DType dtype;
        Arg arg;
        std::vector<uint32_t> srcs; // < n_known: a node of the graph or seed; else a new one
        std::source_location loc;
    };
    size_t n_known = 0;
    std::vector<Node> nodes;
    std::vector<std::pair<uint32_t, uint32_t>> grads; // target's position -> its adjoint's
    std::string blocked;
    bool touched = false;
};

std::atomic<size_t> g_walks_replayed{0}, g_walks_recorded{0};

LruCache<std::shared_ptr<const WalkRecipe>>& walk_recipes() {
    static auto* c = [] {
        auto* cache = new LruCache<std::shared_ptr<const WalkRecipe>>;
        on_clear_caches([] { walk_recipes().clear(); });
        return cache;
    }();
    return *c;
}

// The graph's and the seed's nodes, sources first (all of them: a BUFFER's dims, what a DETACH
// hides), and the key of their structure.
std::string walk_key(const std::vector<UOp>& known, const UOpMap<bool>& targets, bool symbolic) {
    std::string key = structure_key(known, "backward", [](const UOp& u, std::string& k) {
        if (u.op() != Op::Buffer) return false;
        const int64_t numel = u.arg_as<std::vector<int64_t>>().at(1);
        k.append(reinterpret_cast<const char*>(&numel), sizeof numel);
        return true;
    });
    for (const UOp& u : known) key += targets.count(u) ? 'T' : '.';
    key += symbolic ? 'S' : 'C';
    return key;
}

// The recipe of a walk's result, or null when the gradient graph reaches a BUFFER or variable of
// its own (its identity would be this graph's, not the structure's).
std::shared_ptr<const WalkRecipe> record_walk(const std::vector<UOp>& known, const WalkResult& r) {
    auto rec = std::make_shared<WalkRecipe>();
    rec->n_known = known.size();
    rec->blocked = r.blocked;
    rec->touched = r.touched;
    std::unordered_map<const UOpNode*, uint32_t> pos;
    pos.reserve(known.size() * 2);
    for (size_t i = 0; i < known.size(); ++i) pos.emplace(known[i].get(), static_cast<uint32_t>(i));
    for (const auto& [target, grad] : r.grads) {
        // The adjoint's new nodes, sources first, without recursion.
        std::vector<std::pair<UOp, size_t>> stack;
        if (!pos.count(grad.get())) stack.push_back({grad, 0});
        while (!stack.empty()) {
            auto& [u, i] = stack.back();
            if (i < u.srcs().size()) {
                const UOp s = u.src(i++);
                if (!pos.count(s.get())) stack.push_back({s, 0});
                continue;
            }
            if (!pos.count(u.get())) {
                if (u.op() == Op::Buffer || u.op() == Op::DefineVar) return nullptr;
                WalkRecipe::Node n{u.op(), u.dtype(), u.arg(), {}, u.location()};
                for (const UOp& s : u.srcs()) n.srcs.push_back(pos.at(s.get()));
                pos.emplace(u.get(), static_cast<uint32_t>(known.size() + rec->nodes.size()));
                rec->nodes.push_back(std::move(n));
            }
            stack.pop_back();
        }
        rec->grads.emplace_back(pos.at(target.get()), pos.at(grad.get()));
    }
    return rec;
}

WalkResult replay_walk(const WalkRecipe& rec, const std::vector<UOp>& known) {
    std::vector<UOp> made;
    made.reserve(rec.nodes.size());
    auto at = [&](uint32_t i) -> const UOp& {
        return i < rec.n_known ? known[i] : made[i - rec.n_known];
    };
    std::vector<UOp> srcs;
    const CallSiteOverride recorded_sites(nullptr); // each node keeps its recorded location
    for (const WalkRecipe::Node& n : rec.nodes) {
        srcs.clear();
        for (uint32_t i : n.srcs) srcs.push_back(at(i));
        made.push_back(UOp::make(n.op, n.dtype, srcs, n.arg, n.loc));
    }
    WalkResult r;
    r.blocked = rec.blocked;
    r.touched = rec.touched;
    for (const auto& [target, grad] : rec.grads) r.grads.emplace(at(target), at(grad));
    return r;
}

// walk(), answered from a recorded walk of the same structure when there is one.
WalkResult cached_walk(const UOp& root, const std::vector<UOp>& topo, const UOp& root_grad,
                       const UOpMap<bool>& targets, bool symbolic) {
    std::vector<UOp> known = root.toposort();
    {
        std::unordered_set<const UOpNode*> in(known.size());
        for (const UOp& u : known) in.insert(u.get());
        for (const UOp& u : root_grad.toposort())
            if (in.insert(u.get()).second) known.push_back(u);
    }
    const std::string key = walk_key(known, targets, symbolic);
    if (const auto hit = walk_recipes().find(key)) {
        ++g_walks_replayed;
        return replay_walk(**hit, known);
    }
    WalkResult r = walk(root, topo, root_grad, targets, symbolic);
    if (auto rec = record_walk(known, r)) {
        const size_t bytes = key.size() + rec->nodes.size() * (sizeof(WalkRecipe::Node) + 16);
        walk_recipes().insert(key, std::move(rec), bytes);
        ++g_walks_recorded;
    }
    return r;
}

// The graph gradients walk for t: t's graph, where every buffer of a realized tracking tensor
// is replaced by the graph that computed it (bounded rounds: such graphs may read others).
struct AutogradGraph {
    UOp root;
    std::vector<UOp> topo;                        // grad_toposort(root)
    std::shared_ptr<const Tensor::Buffers> bufs;  // what root reads
    UOpMap<std::shared_ptr<Tensor::Shared>> leaf; // its BUFFERs that require a gradient
};

AutogradGraph autograd_graph(const Tensor& t) {
    const auto& c = TensorAccess::core(t);
    AutogradGraph g{c.graph.is_null() ? c.uop : c.graph,
                    {},
                    c.graph.is_null() ? c.buffers : c.graph_buffers,
                    {}};
    for (int round = 0; round < 1000; ++round) {
        g.topo = grad_toposort(g.root);
        g.leaf.clear();
        std::unordered_map<const UOpNode*, UOp> repl;
        for (const UOp& u : g.topo) {
            if (u.op() != Op::Buffer) continue;
            const auto& a = u.arg_as<std::vector<int64_t>>();
            auto s = leaves().find(a.at(0));
            if (!s) continue;
            if (s->requires_grad) {
                g.leaf.emplace(u, std::move(s));
                continue;
            }
            repl.emplace(u.get(),
                         UOp::make(Op::Reshape, u.dtype(), {s->core.graph}, Shape{a.at(1)}));
            g.bufs = TensorAccess::merge("backward", g.bufs, s->core.graph_buffers);
        }
        if (repl.empty()) break;
        g.root = g.root.substitute(repl);
    }
    return g;
}

void check_loss(const char* op, const Tensor& loss) {
    if (loss.numel() != 1)
        fail(op, "needs a tensor with one element, got shape " + shape_str(loss.shape()) + " (" +
                     std::to_string(loss.numel()) + " elements)");
    if (!loss.dtype().is_float()) fail(op, "needs a float tensor, got " + loss.dtype().name());
}

// The adjoint of a one-element loss: ones of its shape.
UOp seed_of(const Tensor& loss) { return Tensor::ones(loss.shape(), loss.dtype()).uop(); }

std::string blocked_note(const WalkResult& r) {
    return r.blocked.empty() ? ""
                             : " (it reaches one only through " + r.blocked +
                                   ", which has no gradient: comparisons, integer and bool ops, "
                                   "argmax)";
}

} // namespace

// ---- the Tensor API ---------------------------------------------------------------------------

GradCacheStats grad_cache_stats() {
    return GradCacheStats{walk_recipes().stats().entries, g_walks_replayed.load(),
                          g_walks_recorded.load()};
}

Tensor& Tensor::requires_grad(bool on) {
    if (!on) {
        if (shared_) {
            std::lock_guard<std::mutex> l(shared_->mu);
            shared_->requires_grad = false;
            shared_->core.tracks_grad = false;
            shared_->grad.reset();
            shared_->pending.clear();
        }
        return *this;
    }
    if (!dtype().is_float())
        fail("requires_grad", "only float tensors take gradients, got " + dtype().name());
    realize(); // a leaf is a buffer
    Shared& s = TensorAccess::share(*this);
    s.requires_grad = true;
    s.core.tracks_grad = true;
    tempura::detail::register_leaf(shared_);
    return *this;
}

bool Tensor::requires_grad_enabled() const { return shared_ && shared_->requires_grad; }

Tensor Tensor::grad(std::source_location loc) const {
    const UserCall site(loc);
    if (!requires_grad_enabled())
        fail("grad", "this tensor does not require a gradient (call requires_grad() on it before "
                     "computing the loss)");
    std::lock_guard<std::mutex> l(shared_->mu);
    if (!shared_->grad) return Tensor::zeros(shape_, dtype());
    return *shared_->grad;
}

void Tensor::zero_grad() const {
    if (!shared_) return;
    std::lock_guard<std::mutex> l(shared_->mu);
    shared_->grad.reset();
    shared_->pending.clear();
}

Tensor Tensor::detach(std::source_location loc) const {
    const UserCall site(loc);
    Tensor t = TensorAccess::make(UOp::make(Op::Detach, dtype(), {uop()}), shape_,
                                  TensorAccess::buffers(*this), TensorAccess::symbolic(*this));
    return t;
}

Tensor& Tensor::assign(const Tensor& value, std::source_location loc) {
    const UserCall site(loc);
    if (value.dtype() != dtype())
        fail("assign", "dtype mismatch: the tensor is " + dtype().name() + ", the value " +
                           value.dtype().name());
    const auto broadcasts = [&] {
        try {
            return broadcast_shapes(value.shape(), shape_) == shape_;
        } catch (const Error&) {
            return false;
        }
    };
    if (!broadcasts())
        fail("assign", "cannot assign a value of shape " + shape_str(value.shape()) +
                           " to a tensor of shape " + shape_str(shape_));
    Tensor v = tempura::detail::broadcast_to(value, shape_);
    // The value of another leaf is copied, so that the two keep separate buffers (and
    // gradients); any other value's buffer becomes this tensor's.
    if (v.is_realized() && TensorAccess::shared(v)) {
        NoGrad ng;
        v = v.detach().contiguous();
    }
    v.realize();
    TensorAccess::rebind(*this, v);
    return *this;
}

void TensorAccess::rebind(Tensor& t, const Tensor& value) {
    Tensor::Shared& s = share(t);
    const bool tracks = s.requires_grad;
    s.core = value.core();
    s.core.tracks_grad = tracks || value.core().tracks_grad;
    if (tracks) { // a leaf: gradients stop at it
        s.core.graph = UOp();
        s.core.graph_buffers.reset();
    }
    if (tracks) tempura::detail::register_leaf(t.shared_);
}

void Tensor::backward(std::source_location loc) const {
    const UserCall site(loc);
    check_loss("backward", *this);
    const AutogradGraph graph = autograd_graph(*this);
    // The leaves below the loss that require a gradient, by their BUFFER node.
    UOpMap<bool> targets;
    for (const auto& [node, s] : graph.leaf) targets.emplace(node, true);
    if (targets.empty())
        fail("backward", "the tensor does not depend on any tensor that requires a gradient "
                         "(call requires_grad() on the parameters; detach() and NoGrad cut the "
                         "graph)");
    const WalkResult r =
        cached_walk(graph.root, graph.topo, seed_of(*this), targets, TensorAccess::symbolic(*this));
    if (r.grads.empty())
        fail("backward", "no gradient reaches a tensor that requires one" + blocked_note(r));
    // In the graph's order, the same at every step of a training loop (the leaf map's order
    // follows the buffers' addresses): realizing the loss with these gradients then finds the
    // same plan every step.
    std::vector<tempura::detail::LeafGrad> adds;
    for (const UOp& n : graph.topo) {
        auto leaf = graph.leaf.find(n);
        if (leaf == graph.leaf.end()) continue;
        auto g = r.grads.find(n);
        if (g == r.grads.end()) continue;
        adds.emplace_back(leaf->second, TensorAccess::make(g->second, g->second.shape(), graph.bufs,
                                                           TensorAccess::symbolic(*this)));
    }
    tempura::detail::add_to_grads(const_cast<Tensor&>(*this), adds);
}

void tempura::detail::add_to_grads(Tensor& loss, const std::vector<LeafGrad>& grads) {
    // The loss's own state (shared by its copies from now on: sharing changes no value) lists
    // the leaves its gradients wait in.
    Tensor::Shared& self = TensorAccess::share(loss);
    for (const auto& [s, g] : grads) {
        std::lock_guard<std::mutex> l(s->mu);
        const Shape& dims = s->core.uop.shape();
        const Tensor add = g.shape() == dims ? g : g.reshape(dims);
        s->grad = s->grad ? *s->grad + add : add;
        s->pending.push_back(loss);
        // Bounded: many backward() calls without a step realize the sum now and then, so that
        // the lazy graph does not grow without end.
        if (s->pending.size() >= 8) {
            s->grad->realize();
            s->pending.clear();
        }
    }
    std::lock_guard<std::mutex> l(self.mu);
    for (const auto& [s, g] : grads) self.grads_waiting.push_back(s);
}

bool tempura::detail::realize_with_pending_grads(Tensor& loss) {
    const std::shared_ptr<Tensor::Shared>& ls = TensorAccess::shared(loss);
    if (!ls) return false;
    std::vector<std::weak_ptr<Tensor::Shared>> waiting;
    {
        std::lock_guard<std::mutex> l(ls->mu);
        waiting.swap(ls->grads_waiting);
    }
    // The leaves whose lazy gradient still waits on this loss, and those gradients.
    std::vector<std::shared_ptr<Tensor::Shared>> leaves;
    std::vector<Tensor> grads;
    for (const auto& w : waiting) {
        std::shared_ptr<Tensor::Shared> s = w.lock();
        if (!s) continue;
        std::lock_guard<std::mutex> l(s->mu);
        const bool waits = std::any_of(s->pending.begin(), s->pending.end(), [&](const Tensor& t) {
            return TensorAccess::shared(t) == ls;
        });
        if (!waits || !s->grad || s->grad->is_realized()) continue;
        if (std::find(leaves.begin(), leaves.end(), s) != leaves.end()) continue;
        leaves.push_back(s);
        grads.push_back(*s->grad);
    }
    if (leaves.empty()) return false;
    std::vector<UOp> lazy;
    std::vector<std::reference_wrapper<Tensor>> all{loss};
    for (Tensor& g : grads) {
        lazy.push_back(g.uop());
        all.push_back(g);
    }
    tempura::realize(all);
    for (size_t i = 0; i < leaves.size(); ++i) {
        std::lock_guard<std::mutex> l(leaves[i]->mu);
        // Unless another backward() added to it meanwhile (it then reads the old sum lazily).
        if (!leaves[i]->grad || !leaves[i]->grad->uop().same(lazy[i])) continue;
        leaves[i]->grad = grads[i];
        leaves[i]->pending.clear();
    }
    return true;
}

std::vector<Tensor> gradients(const Tensor& loss, const std::vector<Tensor>& params,
                              std::source_location loc) {
    const UserCall site(loc);
    check_loss("gradients", loss);
    UOpMap<bool> targets;
    // A realized parameter is found by its BUFFER (every view of it in the loss counts).
    const auto node_of = [](const Tensor& p) {
        const UOp& u = p.uop();
        return p.is_realized() && u.op() == Op::Reshape ? u.src(0) : u;
    };
    for (const Tensor& p : params) {
        if (!p.dtype().is_float())
            fail("gradients", "only float tensors take gradients, got " + p.dtype().name());
        targets.emplace(node_of(p), true);
    }
    const AutogradGraph graph = autograd_graph(loss);
    const WalkResult r =
        cached_walk(graph.root, graph.topo, seed_of(loss), targets, TensorAccess::symbolic(loss));
    if (r.grads.empty() && r.touched && !r.blocked.empty())
        fail("gradients", "no gradient reaches the parameters" + blocked_note(r));
    std::vector<Tensor> out;
    for (const Tensor& p : params) {
        auto g = r.grads.find(node_of(p));
        if (g == r.grads.end()) {
            out.push_back(Tensor::zeros(p.shape(), p.dtype()));
            continue;
        }
        out.push_back(TensorAccess::make(g->second, g->second.shape(), graph.bufs,
                                         TensorAccess::symbolic(loss))
                          .reshape(p.shape()));
    }
    return out;
}

} // namespace tempura
