// Kernel split and rangeify (docs/KERNEL_IR.md §1 in, kernel ASTs out).
#include "tempura/schedule/schedule.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "schedule/row_fusion.hpp"
#include "tempura/codegen/stages.hpp"
#include "tempura/error.hpp"
#include "tempura/rewrite/graph_rewrite.hpp"
#include "tempura/rewrite/trace.hpp"
#include "tempura/schedule/rules.hpp"
#include "tempura/schedule/symbolic_shapes.hpp"
#include "tempura/support/hash.hpp"
#include "tempura/symbolic/simplify.hpp"

namespace tempura {

std::vector<ScheduledKernel> schedule_rewritten(const UOp& root, const SymbolicShapes* sym);
std::vector<std::vector<UOp>> fusable_roots(const UOp& sink,
                                            const std::unordered_set<const UOpNode*>& is_mat,
                                            const SymbolicShapes* sym);

namespace {

bool same_dims(const std::vector<UOp>& a, const std::vector<UOp>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (!a[i].same(b[i])) return false;
    return true;
}

bool is_one(const UOp& d) { return d.is_const() && d.const_value() == 1; }

// Whether a COLLECTIVE's source is an input's buffer (through reshapes): then no kernel copies it.
bool collective_reads_buffer(const UOp& c) {
    UOp s = c.src(0);
    while (s.op() == Op::Reshape) s = s.src(0);
    return s.op() == Op::Buffer;
}

// Whether an EXPAND grows a dim (a fixed 1 becomes more, or a variable's size).
bool grows(const UOp& expand, const SymbolicShapes* sym) {
    const Shape& in = expand.src(0).shape();
    const Shape& out = expand.shape();
    if (sym != nullptr && !sym->empty()) {
        const std::vector<UOp> i = sym->of(expand.src(0)), o = sym->of(expand);
        for (size_t d = 0; d < i.size() && d < o.size(); ++d)
            if (is_one(i[d]) && !is_one(o[d])) return true;
        return false;
    }
    for (size_t d = 0; d < in.size() && d < out.size(); ++d)
        if (in[d] == 1 && out[d] != 1) return true;
    return false;
}

std::vector<UOp> dims_of(const UOp& node, const SymbolicShapes* sym);

// Whether a PAD adds elements (its gate is not always true).
bool pads(const UOp& n) {
    if (n.op() != Op::Pad) return false;
    for (int64_t p : n.arg_as<std::vector<int64_t>>())
        if (p > 0) return true;
    return false;
}

// What computing one element of `v` costs, in ALU operations (a transcendental about 8, a
// division 4), counting the elementwise nodes that its kernel would compute with it (it stops at
// buffers, reduces and what is materialized); stops counting at `enough`.
int elementwise_cost(const UOp& v, const std::unordered_set<const UOpNode*>& is_mat, int enough) {
    int cost = 0;
    std::unordered_set<const UOpNode*> seen;
    std::vector<UOp> stack{v};
    while (!stack.empty() && cost < enough) {
        UOp n = stack.back();
        stack.pop_back();
        if (!seen.insert(n.get()).second) continue;
        if (!n.same(v) && is_mat.count(n.get())) continue;
        const Op op = n.op();
        if (op == Op::Buffer || op == Op::ReduceAxis || op == Op::Contiguous) continue;
        if (is_alu(op)) {
            switch (op) {
            case Op::Exp2:
            case Op::Log2:
            case Op::Sin:
            case Op::Cos:
            case Op::Erf:
            case Op::Pow: cost += 8; break;
            case Op::Fdiv:
            case Op::Recip:
            case Op::Sqrt:
            case Op::Idiv:
            case Op::Mod: cost += 4; break;
            default: cost += 1;
            }
        }
        for (const UOp& s : n.srcs()) stack.push_back(s);
    }
    return cost;
}

// The values a reduce's kernel would compute again and again: an operand of the reduce's
// elementwise input that an EXPAND grows along an axis the reduce keeps, while the value itself
// runs along a reduced axis. Its loop then sits inside the kept axis's loop (a matmul's left
// operand, recomputed for every block of output columns). Such a value is worth its own kernel
// when it is expensive (the softmax gradient a backward matmul reads: an exp and a division per
// element).
void expensive_expanded_operands(const UOp& reduce,
                                 const std::unordered_set<const UOpNode*>& is_mat,
                                 const SymbolicShapes* sym, std::vector<UOp>& out) {
    constexpr int kExpensive = 8;
    const auto& axes = reduce.arg_as<ReduceArg>().axes;
    const UOp& in = reduce.src(0);
    if (!in.has_shape()) return;
    const Shape& full = in.shape();
    std::unordered_set<const UOpNode*> seen;
    std::vector<UOp> stack{in};
    while (!stack.empty()) {
        UOp n = stack.back();
        stack.pop_back();
        if (!seen.insert(n.get()).second || is_mat.count(n.get())) continue;
        if (n.op() == Op::Expand && n.shape() == full && grows(n, sym)) {
            const std::vector<UOp> i = dims_of(n.src(0), sym), o = dims_of(n, sym);
            bool keeps_grown = false, runs_reduced = false;
            for (size_t d = 0; d < i.size() && d < o.size(); ++d) {
                const bool reduced =
                    std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
                if (is_one(i[d]) && !is_one(o[d]) && !reduced) keeps_grown = true;
                if (!is_one(i[d]) && reduced) runs_reduced = true;
            }
            if (!keeps_grown || !runs_reduced) continue;
            UOp v = n.src(0);
            while (v.op() == Op::Reshape || v.op() == Op::Permute) v = v.src(0);
            if (is_alu(v.op()) && !is_mat.count(v.get()) &&
                elementwise_cost(v, is_mat, kExpensive) >= kExpensive)
                out.push_back(v);
            continue;
        }
        // Only through elementwise nodes of the reduce input's shape: the axes stay the same.
        if (n.same(in) || (is_alu(n.op()) && n.has_shape() && n.shape() == full))
            for (const UOp& s : n.srcs())
                if (s.has_shape() && s.shape() == full) stack.push_back(s);
    }
}

// Whether a reduce is matmul-like: an operand of its elementwise input is grown by an EXPAND
// along an axis the reduce keeps (a matmul's left operand along the output columns).
bool grows_kept_axis(const UOp& reduce, const SymbolicShapes* sym) {
    const auto& axes = reduce.arg_as<ReduceArg>().axes;
    const UOp& in = reduce.src(0);
    if (!in.has_shape()) return false;
    const Shape& full = in.shape();
    std::unordered_set<const UOpNode*> seen;
    std::vector<UOp> stack{in};
    while (!stack.empty()) {
        UOp n = stack.back();
        stack.pop_back();
        if (!seen.insert(n.get()).second) continue;
        if (n.op() == Op::Expand && n.shape() == full && grows(n, sym)) {
            const std::vector<UOp> i = dims_of(n.src(0), sym), o = dims_of(n, sym);
            for (size_t d = 0; d < i.size() && d < o.size(); ++d)
                if (is_one(i[d]) && !is_one(o[d]) &&
                    std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end())
                    return true;
            continue;
        }
        if (n.same(in) || (is_alu(n.op()) && n.has_shape() && n.shape() == full))
            for (const UOp& s : n.srcs())
                if (s.has_shape() && s.shape() == full) stack.push_back(s);
    }
    return false;
}

std::vector<UOp> find_materialized(const UOp& root, const SymbolicShapes* sym) {
    // A REDUCE_AXIS that two kernels would each recompute (a matmul's logits read by softmax's
    // max, sum and output kernels) is materialized too: found by counting which kernels reach
    // each inlined reduce, then repeated until no reduce is shared.
    // A SINK root is several roots realized together (tempura::realize({a, b})).
    const std::vector<UOp> roots = root.op() == Op::Sink ? root.srcs() : std::vector<UOp>{root};
    std::unordered_set<const UOpNode*> shared;
    // (Row fusion decides on concrete shapes: a graph with symbolic dims keeps its reduces apart.)
    const bool fuse_rows = sym == nullptr || sym->empty();
    // Row-fused values read through a growing EXPAND (below): found in one round, each is a
    // kernel root from the next round on, before any kernel that reads it is walked (a kernel
    // walked before it was found would count its reduces as read by two kernels).
    std::vector<UOp> row_roots;
    std::unordered_set<const UOpNode*> is_row_root;
    // row_fusion::fuses_row depends on its node alone: asked again on every visit of a growing
    // EXPAND, in every kernel and round, it is walked once a node (bounded by the graph).
    std::unordered_map<const UOpNode*, bool> fuses_row_memo;
    const auto fuses_row = [&](const UOp& v) {
        const auto [it, fresh] = fuses_row_memo.try_emplace(v.get(), false);
        if (fresh) it->second = row_fusion::fuses_row(v);
        return it->second;
    };
    for (;;) {
        std::vector<UOp> mat;
        std::unordered_set<const UOpNode*> is_mat;
        bool new_row_root = false;
        for (const UOp& r : roots)
            if (is_mat.insert(r.get()).second) mat.push_back(r);
        for (const UOp& r : row_roots)
            if (is_mat.insert(r.get()).second) mat.push_back(r);
        std::unordered_map<const UOpNode*, std::unordered_set<const UOpNode*>> reached_by;
        std::unordered_map<const UOpNode*, UOp> reduce_node;
        std::vector<UOp> work = mat;
        while (!work.empty()) {
            UOp k = work.back();
            work.pop_back();
            if (k.op() == Op::Collective) {
                // A collective is a step of its own that reads a buffer: its source is computed
                // by a kernel (or is an input's buffer already).
                if (const UOp& s = k.src(0);
                    !collective_reads_buffer(k) && is_mat.insert(s.get()).second) {
                    mat.push_back(s);
                    work.push_back(s);
                }
                continue;
            }
            // A kernel whose output costs a transcendental or more an element (a matmul's gelu
            // epilogue) computes it once per output of the matmul-like reduces it reaches
            // directly, inside their register tiles: scalar when the reduce vectorizes along
            // its reduce axis (x w^T, both operands contiguous along K), 32 scalar divisions a
            // tile. Such a reduce gets its own kernel; the epilogue then runs elementwise,
            // vectorized along the output.
            constexpr int kExpensiveEpilogue = 8;
            const bool expensive_epilogue =
                k.op() != Op::ReduceAxis &&
                elementwise_cost(k, is_mat, kExpensiveEpilogue) >= kExpensiveEpilogue;
            // Row fusion (row_fusion.hpp) tracks where the walk stands: a reduce broadcast
            // back along its reduced axes stays in this kernel, and one read inside such a
            // fused reduce's input (its own loop over the row) is materialized instead of being
            // computed again in every loop.
            row_fusion::Walker rows;
            std::set<std::tuple<const UOpNode*, bool, row_fusion::State>> seen;
            std::vector<std::tuple<UOp, bool, row_fusion::State>> stack{
                {k, false, fuse_rows ? rows.root(k) : row_fusion::State{}}};
            while (!stack.empty()) {
                auto [n, expanded, row] = stack.back();
                stack.pop_back();
                if (!seen.insert({n.get(), expanded, row}).second) continue;
                if (!n.same(k)) {
                    if (is_mat.count(n.get())) continue;
                    if (n.op() == Op::Contiguous || n.op() == Op::ScatterAdd ||
                        n.op() == Op::Collective ||
                        (n.op() == Op::ReduceAxis &&
                         (expanded || shared.count(n.get()) || (row.under && !rows.fused(n, row)) ||
                          (expensive_epilogue && !rows.fused(n, row) &&
                           grows_kept_axis(n, sym))))) {
                        is_mat.insert(n.get());
                        mat.push_back(n);
                        work.push_back(n);
                        continue;
                    }
                    if (n.op() == Op::ReduceAxis) {
                        reached_by[n.get()].insert(k.get());
                        reduce_node.emplace(n.get(), n);
                    }
                }
                if (n.op() == Op::ReduceAxis) {
                    std::vector<UOp> operands;
                    expensive_expanded_operands(n, is_mat, sym, operands);
                    for (const UOp& v : operands)
                        if (is_mat.insert(v.get()).second) {
                            mat.push_back(v);
                            work.push_back(v);
                            // (A row-fused one is a row root: see row_roots.)
                            if (fuse_rows && !is_row_root.count(v.get()) && fuses_row(v)) {
                                is_row_root.insert(v.get());
                                row_roots.push_back(v);
                                new_row_root = true;
                            }
                        }
                }
                if (n.op() == Op::Buffer) continue;
                // A row-fused value read through a growing EXPAND (a layer_norm's output, the
                // next matmul's operand) gets its own kernel: one pass over each row.
                if (fuse_rows && n.op() == Op::Expand && grows(n, sym) &&
                    !rows.row_broadcast(n, row)) {
                    UOp v = n.src(0);
                    while (v.op() == Op::Reshape || v.op() == Op::Permute) v = v.src(0);
                    if (!is_mat.count(v.get()) && fuses_row(v)) {
                        is_mat.insert(v.get());
                        mat.push_back(v);
                        work.push_back(v);
                        if (is_row_root.insert(v.get()).second) {
                            row_roots.push_back(v);
                            new_row_root = true;
                        }
                        continue;
                    }
                }
                // A gathered source is read at data-dependent places, its index possibly many
                // times over: a reduce under either is computed once, not per element. A reduce
                // under a PAD that adds elements would run under the padding's gate, over the
                // padded grid (a convolution inside the next convolution's padded input): the
                // gate makes every load a gated scalar one and the kernel gets no opts, so it is
                // computed in its own kernel and the padding reads its buffer.
                bool e = expanded || n.op() == Op::Gather || n.op() == Op::ScatterAdd ||
                         (n.op() == Op::Expand && grows(n, sym) && !rows.row_broadcast(n, row)) ||
                         pads(n);
                // (A reduce root's state is its input's row already.)
                const row_fusion::State below =
                    n.same(k) && k.op() == Op::ReduceAxis ? row : rows.next(n, row);
                for (const UOp& s : n.srcs()) stack.emplace_back(s, e, below);
            }
        }
        if (new_row_root) continue; // the round again, the new row roots walked first
        bool more = false;
        for (const auto& [node, kernels] : reached_by)
            if (kernels.size() >= 2 && !is_mat.count(node))
                more = shared.insert(node).second || more;
        if (!more) return mat;
    }
}

UOp idx_const(int64_t v) { return UOp::index(v); }

UOp times(const UOp& a, const UOp& b) {
    if (a.is_const() && b.is_const()) return idx_const(a.const_value() * b.const_value());
    if (is_one(a)) return b;
    if (is_one(b)) return a;
    return a * b;
}

// Row-major linear index of `idx` over `dims` (dims of size 1 contribute nothing), from
// position `from` to `to`.
UOp linear_index(const std::vector<UOp>& idx, const std::vector<UOp>& dims, size_t from = 0,
                 size_t to = SIZE_MAX) {
    UOp lin, stride = idx_const(1);
    for (size_t d = std::min(to, dims.size()); d-- > from;) {
        if (!is_one(dims[d])) {
            UOp term = times(idx[d], stride);
            lin = lin.is_null() ? term : term + lin;
        }
        stride = times(stride, dims[d]);
    }
    return lin.is_null() ? idx_const(0) : lin;
}

UOp times_simplified(const UOp& a, const UOp& b) {
    const UOp p = times(a, b);
    return p.is_const() ? p : simplify(p);
}

// A RESHAPE's source and result dims in groups whose products are the same expression (so the
// grouping holds for every value of the variables), in order; dims of a fixed size 1 belong to
// none. The sizes at this graph's values only guide which side grows. nullopt when the products
// do not meet (or a size is 0).
std::optional<std::vector<ReshapeGroup>> dim_groups(const std::vector<UOp>& in,
                                                    const std::vector<UOp>& out, const Shape& iv,
                                                    const Shape& ov) {
    for (int64_t v : iv)
        if (v == 0) return std::nullopt;
    std::vector<ReshapeGroup> gs;
    size_t i = 0, j = 0;
    while (i < in.size() || j < out.size()) {
        if (i < in.size() && is_one(in[i])) {
            ++i;
            continue;
        }
        if (j < out.size() && is_one(out[j])) {
            ++j;
            continue;
        }
        if (i == in.size() || j == out.size()) return std::nullopt;
        ReshapeGroup g{{i}, {j}};
        UOp pi = in[i], po = out[j];
        int64_t vi = iv[i++], vo = ov[j++];
        while (!pi.same(po)) {
            if (vi <= vo && i < in.size()) {
                g.in.push_back(i);
                pi = times_simplified(pi, in[i]);
                vi *= iv[i++];
            } else if (j < out.size()) {
                g.out.push_back(j);
                po = times_simplified(po, out[j]);
                vo *= ov[j++];
            } else {
                return std::nullopt;
            }
        }
        gs.push_back(std::move(g));
    }
    return gs;
}

// The dims of a node as Index UOps: symbolic ones (symbolic shapes) or its shape's CONSTs.
std::vector<UOp> dims_of(const UOp& node, const SymbolicShapes* sym) {
    if (sym != nullptr) return sym->of(node);
    std::vector<UOp> d;
    for (int64_t v : node.shape()) d.push_back(idx_const(v));
    return d;
}

// The number of elements of `dims`, or -1 when it is symbolic.
int64_t const_numel(const std::vector<UOp>& dims) {
    int64_t n = 1;
    for (const UOp& d : dims) {
        if (!d.is_const()) return -1;
        n *= d.const_value();
    }
    return n;
}

struct Rangeifier {
    const SymbolicShapes* sym;
    std::unordered_set<const UOpNode*> materialized;
    UOp output;
    std::vector<UOp>& params;
    UOpMap<UOp> param_of; // tensor node -> PARAM
    int64_t next_axis = 0;
    struct KeyHash {
        size_t operator()(const std::vector<const UOpNode*>& k) const {
            uint64_t h = k.size();
            for (const UOpNode* p : k) h = hash_combine(h, reinterpret_cast<uintptr_t>(p));
            return static_cast<size_t>(hash_finalize(h));
        }
    };
    std::unordered_map<std::vector<const UOpNode*>, UOp, KeyHash> memo;
    std::vector<UOp> keep; // keeps memo keys alive
    std::unordered_map<std::vector<const UOpNode*>, UOp, KeyHash> reduce_ranges;

    UOp param(const UOp& node, DType dt, int64_t numel) {
        if (auto it = param_of.find(node); it != param_of.end()) return it->second;
        const int64_t slot = static_cast<int64_t>(params.size());
        UOp p = UOp::make(Op::Param, dt.ptr(), {}, std::vector<int64_t>{slot, numel});
        params.push_back(node);
        param_of.emplace(node, p);
        return p;
    }

    std::vector<UOp> dims(const UOp& node) const { return dims_of(node, sym); }

    UOp load(const UOp& node, const std::vector<UOp>& idx, const UOp& gate) {
        const std::vector<UOp> shape = dims(node);
        const int64_t numel = const_numel(shape);
        UOp p = param(node, node.dtype(), numel);
        const UOp offset = linear_index(idx, shape);
        UOp index = UOp::make(Op::Index, p.dtype(), {p, offset});
        // The gate keeps a load from reading outside its buffer (where a PAD's padding or a
        // gather's miss is, the value is the PAD's or gather's own zero). A load whose offset
        // lies inside the buffer wherever it is evaluated needs none: a batch norm's mean under
        // a padded conv input is read per channel, ungated, so the code generator can hoist
        // what it computes from it out of the loops over the padded axes.
        // (Unknown bounds are the int64 extremes, outside any buffer.)
        if (!gate.is_null() && numel > 0 && offset.vmin() >= 0 && offset.vmax() < numel)
            return UOp::make(Op::Load, node.dtype(), {index});
        if (gate.is_null()) return UOp::make(Op::Load, node.dtype(), {index});
        UOp alt = node.dtype().is_float() ? UOp::constant_f(node.dtype(), 0.0)
                                          : UOp::constant(node.dtype(), 0);
        return UOp::make(Op::Load, node.dtype(), {index, gate, alt});
    }

    // One step of lowering `node` at `idx` under `gate`. Movement ops and other pass-throughs
    // continue with their source (Step::next); PAD, REDUCE_AXIS and ALU ops first need lowered
    // sources and finish in `combine`. No recursion: a 100,000-deep chain is a long loop.
    struct Task {
        Task(UOp n, std::vector<UOp> i, UOp g)
            : node(std::move(n)), idx(std::move(i)), gate(std::move(g)) {}
        UOp node;
        std::vector<UOp> idx;
        UOp gate;
        std::vector<std::vector<const UOpNode*>> keys; // memo entries this task's value answers
        enum Kind : uint8_t { Eval, Alu, Pad, Reduce, Gather } kind = Eval;
        std::vector<UOp> srcs;    // ALU: the sources lowered so far
        std::vector<UOp> src_idx; // PAD, REDUCE_AXIS: the index of the source
        UOp valid, zero;          // PAD: the validity condition and the padding value
        std::vector<UOp> ranges;
    };

    UOp lower(const UOp& root, const std::vector<UOp>& root_idx, const UOp& root_gate) {
        std::vector<Task> stack;
        stack.emplace_back(root, root_idx, root_gate);
        UOp value; // the value of the task just finished
        for (;;) {
            Task& t = stack.back();
            bool finished = false;
            if (t.kind == Task::Eval) {
                std::vector<const UOpNode*> key{t.node.get(), t.gate.get()};
                for (const UOp& i : t.idx) key.push_back(i.get());
                if (auto it = memo.find(key); it != memo.end()) {
                    value = it->second;
                    finished = true;
                } else {
                    keep.push_back(t.node);
                    if (!t.gate.is_null()) keep.push_back(t.gate);
                    for (const UOp& i : t.idx) keep.push_back(i);
                    t.keys.push_back(std::move(key));
                    std::optional<UOp> done = step(t);
                    if (done) {
                        value = std::move(*done);
                        finished = true;
                    } else if (t.kind != Task::Eval) {
                        // Lower the first source the combination needs: an ALU op's sources
                        // at its own index, PAD's and REDUCE_AXIS's at the index step() made.
                        // GATHER: its index first, at the gather's own index.
                        Task child(t.node.src(t.kind == Task::Gather ? 1 : 0), t.idx, t.gate);
                        if (t.kind != Task::Alu && t.kind != Task::Gather)
                            child.idx = std::move(t.src_idx);
                        if (t.kind == Task::Pad)
                            child.gate = t.gate.is_null() ? t.valid : t.gate & t.valid;
                        stack.push_back(std::move(child));
                    }
                    // else: step() turned t into its source's task; go on with it.
                }
            }
            while (finished) {
                for (auto& k : stack.back().keys) memo.emplace(std::move(k), value);
                stack.pop_back();
                if (stack.empty()) return value;
                Task& parent = stack.back();
                switch (parent.kind) {
                case Task::Pad:
                    value = UOp::alu(Op::Where, {parent.valid, value, parent.zero});
                    break;
                case Task::Reduce: {
                    std::vector<UOp> srcs{value};
                    srcs.insert(srcs.end(), parent.ranges.begin(), parent.ranges.end());
                    value = UOp::make(Op::Reduce, parent.node.dtype(), std::move(srcs),
                                      parent.node.arg_as<ReduceArg>().op);
                    break;
                }
                case Task::Alu:
                    parent.srcs.push_back(value);
                    if (parent.srcs.size() < parent.node.srcs().size()) {
                        stack.emplace_back(parent.node.src(parent.srcs.size()), parent.idx,
                                           parent.gate);
                        finished = false;
                        continue;
                    }
                    value = UOp::make(parent.node.op(), parent.node.dtype(), parent.srcs);
                    break;
                case Task::Gather: {
                    // The index's value is the source's index along the axis: the source is
                    // read there under the gate 0 <= j < n, and the gather is 0 elsewhere (a
                    // PAD's combination from here on). The address never leaves the buffer.
                    const auto axis =
                        static_cast<size_t>(parent.node.arg_as<std::vector<int64_t>>()[0]);
                    const UOp j = UOp::make(Op::Cast, DType::Index, {value});
                    const UOp n = dims(parent.node.src(0))[axis];
                    parent.valid = (idx_const(-1) < j) & (j < n);
                    parent.zero = parent.node.dtype().is_float()
                                      ? UOp::constant_f(parent.node.dtype(), 0.0)
                                      : UOp::constant(parent.node.dtype(), 0);
                    parent.kind = Task::Pad;
                    std::vector<UOp> in_idx = parent.idx;
                    in_idx[axis] = j;
                    UOp gate = parent.gate.is_null() ? parent.valid : parent.gate & parent.valid;
                    stack.emplace_back(parent.node.src(0), std::move(in_idx), std::move(gate));
                    finished = false;
                    continue;
                }
                case Task::Eval: break; // not reached: an Eval task has no child pending
                }
            }
        }
    }

    // Lowers t.node one step: its value, or nullopt after either turning t into its source's
    // task (a pass-through: t.node and t.idx replaced) or setting t.kind to the combination it
    // needs, with the source's index in t.src_idx (PAD, REDUCE_AXIS).
    std::optional<UOp> step(Task& t) {
        const UOp node = t.node;
        const std::vector<UOp>& idx = t.idx;
        if (node.op() == Op::Buffer || (!node.same(output) && materialized.count(node.get())))
            return load(node, idx, t.gate);
        const std::vector<UOp> out = dims(node);
        auto pass = [&](std::vector<UOp> in_idx) -> std::optional<UOp> {
            t.node = node.src(0);
            t.idx = std::move(in_idx);
            return std::nullopt;
        };
        switch (node.op()) {
        case Op::Const: return node;
        case Op::Contiguous: return pass(idx);
        case Op::Gather: t.kind = Task::Gather; return std::nullopt;
        case Op::Reshape: {
            const std::vector<UOp> in = dims(node.src(0));
            if (same_dims(in, out)) return pass(idx);
            // By groups of dims with equal products: a dim that is its own group keeps its
            // index; in a group, flatten over the new dims and unflatten over the old (the
            // outermost needs no modulo). Symbolic folds the div/mod.
            std::vector<UOp> in_idx(in.size(), idx_const(0));
            const auto groups = dim_groups(in, out, node.src(0).shape(), node.shape());
            if (!groups) {
                // No groups (a size 0, or dims whose products only agree at these values):
                // one group of everything, right whenever the sizes agree.
                const UOp lin = linear_index(idx, out);
                UOp stride = idx_const(1);
                for (size_t d = in.size(); d-- > 0;) {
                    if (is_one(in[d])) continue;
                    in_idx[d] = (is_one(stride) ? lin : lin / stride) % in[d];
                    stride = times(stride, in[d]);
                }
                return pass(std::move(in_idx));
            }
            for (const ReshapeGroup& g : *groups) {
                if (g.in.size() == 1 && g.out.size() == 1) {
                    in_idx[g.in[0]] = idx[g.out[0]];
                    continue;
                }
                const UOp lin = linear_index(idx, out, g.out.front(), g.out.back() + 1);
                UOp stride = idx_const(1);
                for (size_t k = g.in.size(); k-- > 0;) {
                    const size_t d = g.in[k];
                    if (is_one(in[d])) continue;
                    const UOp q = is_one(stride) ? lin : lin / stride;
                    in_idx[d] = k == 0 ? q : q % in[d];
                    stride = times(stride, in[d]);
                }
            }
            return pass(std::move(in_idx));
        }
        case Op::Expand: {
            const std::vector<UOp> in = dims(node.src(0));
            std::vector<UOp> in_idx(idx);
            for (size_t d = 0; d < in.size(); ++d)
                if (is_one(in[d])) in_idx[d] = idx_const(0);
            return pass(std::move(in_idx));
        }
        case Op::Permute: {
            const auto& perm = node.arg_as<std::vector<int64_t>>();
            std::vector<UOp> in_idx(idx.size());
            for (size_t i = 0; i < perm.size(); ++i) in_idx[static_cast<size_t>(perm[i])] = idx[i];
            return pass(std::move(in_idx));
        }
        case Op::Shrink: {
            const auto& b = node.arg_as<std::vector<int64_t>>();
            std::vector<UOp> in_idx(idx.size());
            for (size_t d = 0; d < idx.size(); ++d)
                in_idx[d] = b[2 * d] == 0 ? idx[d] : idx[d] + b[2 * d];
            return pass(std::move(in_idx));
        }
        case Op::Flip: {
            const auto& f = node.arg_as<std::vector<int64_t>>();
            std::vector<UOp> in_idx(idx);
            for (size_t d = 0; d < idx.size(); ++d)
                if (f[d] != 0) in_idx[d] = (out[d] - 1) - idx[d];
            return pass(std::move(in_idx));
        }
        case Op::Pad: {
            const auto& p = node.arg_as<std::vector<int64_t>>();
            const std::vector<UOp> in = dims(node.src(0));
            std::vector<UOp> in_idx(idx.size());
            UOp valid;
            for (size_t d = 0; d < idx.size(); ++d) {
                const int64_t b = p[2 * d], e = p[2 * d + 1];
                in_idx[d] = b == 0 ? idx[d] : idx[d] - b;
                auto conj = [&](const UOp& c) { valid = valid.is_null() ? c : valid & c; };
                if (b > 0) conj(b - 1 < idx[d]);
                if (e > 0) conj(idx[d] < b + in[d]);
            }
            if (valid.is_null()) return pass(std::move(in_idx));
            t.kind = Task::Pad;
            t.valid = valid;
            t.zero = node.dtype().is_float() ? UOp::constant_f(node.dtype(), 0.0)
                                             : UOp::constant(node.dtype(), 0);
            t.src_idx = std::move(in_idx);
            return std::nullopt;
        }
        case Op::ReduceAxis: {
            const auto& ra = node.arg_as<ReduceArg>();
            const std::vector<UOp> in = dims(node.src(0));
            std::vector<UOp> in_idx(idx);
            std::vector<UOp> ranges;
            for (int64_t a : ra.axes) {
                const auto d = static_cast<size_t>(a);
                if (in[d].is_const() && in[d].const_value() == 0)
                    return codegen::reduce_identity(ra.op, node.dtype());
                if (is_one(in[d])) {
                    in_idx[d] = idx_const(0);
                    continue;
                }
                // Reductions of one source at one index over one axis share the loop (a max
                // and a sum of x: one pass over x), under one gate: a PAD's gate pushed into a
                // reduce's loads makes it another reduce, which may sit inside the loops the
                // gate reads while the ungated one does not (sum(x) padded and summed, times
                // sum(x)), and one range cannot be two loops.
                std::vector<const UOpNode*> rkey{node.src(0).get(), t.gate.get()};
                rkey.push_back(reinterpret_cast<const UOpNode*>(static_cast<uintptr_t>(d) + 1));
                for (const UOp& i : idx) rkey.push_back(i.get());
                UOp& shared = reduce_ranges[rkey];
                if (shared.is_null()) {
                    shared = UOp::make(Op::Range, DType::Index, {in[d]},
                                       RangeArg{next_axis++, AxisType::Reduce});
                    keep.push_back(node.src(0));
                    keep.insert(keep.end(), idx.begin(), idx.end());
                }
                UOp r = shared;
                in_idx[d] = r;
                ranges.push_back(r);
            }
            if (ranges.empty()) return pass(std::move(in_idx));
            t.kind = Task::Reduce;
            t.ranges = std::move(ranges);
            t.src_idx = std::move(in_idx);
            return std::nullopt;
        }
        default: break;
        }
        if (is_alu(node.op())) {
            t.kind = Task::Alu;
            t.srcs.clear();
            t.srcs.reserve(node.srcs().size());
            return std::nullopt;
        }
        fail("rangeify", "cannot rangeify a " + std::string(op_name(node.op())) + " node");
    }
};

std::string kernel_name(const UOp& ast, const std::vector<UOp>& out) {
    std::vector<UOp> reduces; // by axis id: the order rangeify made them in
    for (const UOp& u : ast.toposort())
        if (u.op() == Op::Range && u.arg_as<RangeArg>().type == AxisType::Reduce)
            reduces.push_back(u);
    std::sort(reduces.begin(), reduces.end(), [](const UOp& a, const UOp& b) {
        return a.arg_as<RangeArg>().axis_id < b.arg_as<RangeArg>().axis_id;
    });
    const bool has_reduce = !reduces.empty();
    std::string reduce_dims;
    for (const UOp& r : reduces) {
        reduce_dims += '_';
        reduce_dims += r.src(0).render();
    }
    std::string n = has_reduce ? "r" : "E";
    bool any = false;
    for (const UOp& d : out)
        if (!is_one(d)) {
            n += '_';
            n += d.render();
            any = true;
        }
    if (!any) n += "_1";
    return n + reduce_dims;
}

} // namespace

UOp rangeify(const UOp& output, const std::vector<UOp>& materialized, std::vector<UOp>& params,
             const SymbolicShapes* sym) {
    return rangeify_outputs({output}, materialized, params, sym);
}

UOp rangeify_outputs(const std::vector<UOp>& outputs, const std::vector<UOp>& materialized,
                     std::vector<UOp>& params, const SymbolicShapes* sym) {
    if (sym != nullptr && sym->empty()) sym = nullptr;
    const UOp& output = outputs.front();
    Rangeifier r{sym, {}, outputs.size() == 1 ? output : UOp(), params, {}, 0, {}, {}, {}};
    // The outputs of a multi-output kernel are computed here, each once (the lowering memo
    // shares an output another one reads), not loaded.
    for (const UOp& m : materialized) r.materialized.insert(m.get());
    if (outputs.size() > 1)
        for (const UOp& o : outputs) r.materialized.erase(o.get());
    const std::vector<UOp> out = dims_of(output, sym);
    params.clear();
    std::vector<UOp> out_params;
    for (const UOp& o : outputs) out_params.push_back(r.param(o, o.dtype(), const_numel(out)));
    // A loop per dim of `dims` (none for a dim of 1): the index, and the ranges made.
    const auto loops = [&](const std::vector<UOp>& dims, std::vector<UOp>& made) {
        std::vector<UOp> at(dims.size());
        for (size_t d = 0; d < dims.size(); ++d) {
            if (is_one(dims[d])) {
                at[d] = idx_const(0);
                continue;
            }
            at[d] = UOp::make(Op::Range, DType::Index, {dims[d]},
                              RangeArg{r.next_axis++, AxisType::Loop});
            made.push_back(at[d]);
        }
        return at;
    };
    const auto end = [](UOp effect, const std::vector<UOp>& made) {
        if (made.empty()) return effect;
        std::vector<UOp> srcs{std::move(effect)};
        srcs.insert(srcs.end(), made.begin(), made.end());
        return UOp::make(Op::End, DType::Void, std::move(srcs));
    };
    if (output.op() == Op::ScatterAdd) {
        // Two loop nests: out = base over out's dims; then, serially over the index's dims K,
        // out[K with K[axis] := j] += src[K] for j = index[K] in [0, n) (a gated load and
        // store). The read of out goes through AFTER(out, K ranges): tied to the loops, never
        // hoisted out of them (an index the same for every K adds each time).
        const UOp& p = out_params[0];
        const auto axis = static_cast<size_t>(output.arg_as<std::vector<int64_t>>()[0]);
        std::vector<UOp> r1, r2;
        const std::vector<UOp> i1 = loops(out, r1);
        const UOp copy = UOp::make(Op::Store, DType::Void,
                                   {UOp::make(Op::Index, p.dtype(), {p, linear_index(i1, out)}),
                                    r.lower(output.src(0), i1, UOp())});
        const std::vector<UOp> kdims = dims_of(output.src(1), sym);
        // An empty index adds nothing: the kernel is the copy. (Its loop of 0 trips would
        // fold to the constant 0, and the index's load be hoisted out of it, reading element
        // 0 of an empty buffer.)
        for (const UOp& d : kdims)
            if (d.is_const() && d.const_value() == 0) return UOp::sink({end(copy, r1)});
        std::vector<UOp> k = loops(kdims, r2);
        const UOp j = UOp::make(Op::Cast, DType::Index, {r.lower(output.src(1), k, UOp())});
        const UOp valid = (idx_const(-1) < j) & (j < out[axis]);
        const UOp v = r.lower(output.src(2), k, UOp());
        k[axis] = j;
        const UOp off = linear_index(k, out);
        std::vector<UOp> after_srcs{p};
        after_srcs.insert(after_srcs.end(), r2.begin(), r2.end());
        const UOp zero = output.dtype().is_float() ? UOp::constant_f(output.dtype(), 0.0)
                                                   : UOp::constant(output.dtype(), 0);
        const UOp cur =
            UOp::make(Op::Load, output.dtype(),
                      {UOp::make(Op::Index, p.dtype(),
                                 {UOp::make(Op::After, p.dtype(), std::move(after_srcs)), off}),
                       valid, zero});
        const UOp add = UOp::make(
            Op::Store, DType::Void,
            {UOp::make(Op::Index, p.dtype(), {p, off, valid}), UOp::alu(Op::Add, {cur, v})});
        return UOp::sink({end(copy, r1), end(add, r2)});
    }
    std::vector<UOp> ranges;
    const std::vector<UOp> idx = loops(out, ranges);
    std::vector<UOp> stores;
    for (size_t i = 0; i < outputs.size(); ++i) {
        UOp value = r.lower(outputs[i], idx, UOp());
        const UOp& p = out_params[i];
        stores.push_back(UOp::make(
            Op::Store, DType::Void,
            {UOp::make(Op::Index, p.dtype(), {p, linear_index(idx, out)}), std::move(value)}));
    }
    const UOp store =
        stores.size() == 1 ? stores[0] : UOp::make(Op::Group, DType::Void, std::move(stores));
    if (ranges.empty()) return UOp::sink({store});
    std::vector<UOp> end_srcs{store};
    end_srcs.insert(end_srcs.end(), ranges.begin(), ranges.end());
    return UOp::sink({UOp::make(Op::End, DType::Void, std::move(end_srcs))});
}

namespace {

// Whether `from`'s kernel reads `to` through another kernel's output (a materialized node that is
// neither): then the two cannot be one kernel.
bool reads_through_other(const UOp& from, const UOp& to,
                         const std::unordered_set<const UOpNode*>& is_mat,
                         const std::unordered_set<const UOpNode*>& group) {
    std::set<std::pair<const UOpNode*, bool>> seen;
    std::vector<std::pair<UOp, bool>> stack;
    for (const UOp& s : from.srcs()) stack.emplace_back(s, false);
    while (!stack.empty()) {
        auto [n, via] = stack.back();
        stack.pop_back();
        if (!seen.insert({n.get(), via}).second || n.op() == Op::Buffer) continue;
        if (n.same(to)) {
            if (via) return true;
            continue;
        }
        const bool other = is_mat.count(n.get()) != 0 && group.count(n.get()) == 0;
        for (const UOp& s : n.srcs()) stack.emplace_back(s, via || other);
    }
    return false;
}

} // namespace

// The roots of a SINK that can share one kernel: groups (of two or more) with the same dims,
// none of which reads another through a third kernel.
std::vector<std::vector<UOp>> fusable_roots(const UOp& sink,
                                            const std::unordered_set<const UOpNode*>& is_mat,
                                            const SymbolicShapes* sym) {
    std::vector<std::vector<UOp>> groups;
    std::vector<std::vector<UOp>> dims;
    std::vector<std::set<const UOpNode*>> reads;
    std::vector<bool> reducing;
    std::unordered_set<const UOpNode*> seen;
    // What a root's kernel reduces (the sources of the reduces it reaches before a materialized
    // node), with the materialized nodes it reads and itself: roots whose kernels reduce share
    // one only where these meet (a max and a sum of one input, a mean and the variance that
    // reads it, a parameter's update and its optimizer state's, both reading its gradient).
    // Unrelated reductions (two layers' weight gradients of one shape) in one loop nest would
    // leave all but one without the opts (vector lanes) of a reduce.
    const auto reads_of = [&](const UOp& r, bool& reduces) {
        std::set<const UOpNode*> out{r.get()};
        std::unordered_set<const UOpNode*> visited;
        std::vector<UOp> stack{r};
        while (!stack.empty()) {
            const UOp n = stack.back();
            stack.pop_back();
            if (!visited.insert(n.get()).second || n.op() == Op::Buffer) continue;
            if (!n.same(r) && is_mat.count(n.get()) != 0) {
                out.insert(n.get());
                continue;
            }
            if (n.op() == Op::ReduceAxis) {
                reduces = true;
                out.insert(n.src(0).get());
            }
            for (const UOp& s : n.srcs()) stack.push_back(s);
        }
        return out;
    };
    for (const UOp& r : sink.srcs()) {
        if (!seen.insert(r.get()).second || r.op() == Op::Buffer || !r.has_shape() ||
            numel(r.shape()) == 0 || r.op() == Op::ScatterAdd || r.op() == Op::Collective)
            continue;
        const std::vector<UOp> d = dims_of(r, sym);
        bool reduces = false;
        const std::set<const UOpNode*> rd = reads_of(r, reduces);
        const auto meets = [&](size_t g) {
            if (!reduces || !reducing[g]) return true;
            return std::any_of(rd.begin(), rd.end(),
                               [&](const UOpNode* u) { return reads[g].count(u) != 0; });
        };
        size_t g = 0;
        while (g < groups.size() && !(same_dims(dims[g], d) && meets(g))) ++g;
        if (g == groups.size()) {
            groups.emplace_back();
            dims.push_back(d);
            reads.emplace_back();
            reducing.push_back(false);
        }
        reads[g].insert(rd.begin(), rd.end());
        reducing[g] = reducing[g] || reduces;
        groups[g].push_back(r);
    }
    std::vector<std::vector<UOp>> out;
    for (std::vector<UOp>& g : groups) {
        if (g.size() < 2) continue;
        std::unordered_set<const UOpNode*> members;
        for (const UOp& m : g) members.insert(m.get());
        bool ok = true;
        for (const UOp& a : g)
            for (const UOp& b : g)
                if (ok && !a.same(b)) ok = !reads_through_other(a, b, is_mat, members);
        if (ok) out.push_back(std::move(g));
    }
    return out;
}

std::vector<UOp> materialization_points(const UOp& root) {
    return find_materialized(root, nullptr);
}

std::vector<ScheduledKernel> schedule_graph(const UOp& original_root, const SymbolicShapes* sym) {
    // A graph with symbolic dims is scheduled as it is: its dims were inferred on these nodes
    // (and its plan is keyed by them), and the early rewrites decide on concrete sizes.
    if (sym != nullptr && !sym->empty()) return schedule_rewritten(original_root, sym);
    // The early rewrites (movement folds, split reduce) first; the kernel computing the
    // rewritten root reports the original root as its output.
    RewriteOptions o;
    o.bottom_up = true;
    const UOp root = trace::stage("early rewrites", original_root, [&] {
        return graph_rewrite(original_root, early_rewrites(), {}, o);
    });
    std::vector<ScheduledKernel> kernels = schedule_rewritten(root, nullptr);
    if (root.same(original_root)) return kernels;
    UOpMap<UOp> back;
    if (root.op() == Op::Sink)
        for (size_t i = 0; i < root.srcs().size(); ++i)
            back.emplace(root.src(i), original_root.src(i));
    else
        back.emplace(root, original_root);
    // Every kernel reading a rewritten root reads the original's buffer too (a root that
    // another root reads: g and p - g / 2 realized together, g's reshapes folded away).
    for (ScheduledKernel& k : kernels)
        for (size_t o = 0; o < k.params.size(); ++o)
            if (auto it = back.find(k.params[o]); it != back.end()) {
                k.params[o] = it->second;
                if (o == 0) k.output = it->second;
            }
    return kernels;
}

std::vector<ScheduledKernel> schedule_rewritten(const UOp& root, const SymbolicShapes* sym) {
    if (sym != nullptr && sym->empty()) sym = nullptr;
    std::vector<UOp> mat = find_materialized(root, sym);
    std::unordered_set<const UOpNode*> is_mat;
    for (const UOp& m : mat) is_mat.insert(m.get());
    const std::vector<UOp> topo = root.toposort();
    // Roots realized together whose dims are the same become one kernel (one pass over what
    // they read): several stores in one loop nest.
    const std::vector<std::vector<UOp>> fused =
        root.op() == Op::Sink ? fusable_roots(root, is_mat, sym) : std::vector<std::vector<UOp>>{};
    std::unordered_map<const UOpNode*, size_t> group_of;
    for (size_t g = 0; g < fused.size(); ++g)
        for (const UOp& m : fused[g]) group_of[m.get()] = g;
    std::vector<size_t> remaining(fused.size());
    for (size_t g = 0; g < fused.size(); ++g) remaining[g] = fused[g].size();
    std::vector<ScheduledKernel> out;
    // Sources come before users in toposort: a kernel follows the kernels it reads.
    for (const UOp& u : topo) {
        if (!is_mat.count(u.get()) || u.op() == Op::Buffer) continue;
        if (auto g = group_of.find(u.get()); g != group_of.end()) {
            // The fused kernel goes where its last output is: after all that they read.
            if (--remaining[g->second] > 0) continue;
            const std::vector<UOp>& outs = fused[g->second];
            ScheduledKernel k;
            k.output = outs.front();
            k.outputs = outs.size();
            // (the traced input, a SINK of the roots, is built only when a trace is recorded)
            k.ast = trace::stage("rangeify", trace::current() ? UOp::sink(outs) : UOp(),
                                 [&] { return rangeify_outputs(outs, mat, k.params, sym); });
            k.name = kernel_name(k.ast, dims_of(k.output, sym));
            if (trace::Recorder* r = trace::current()) r->rename_last("rangeify " + k.name);
            out.push_back(std::move(k));
            continue;
        }
        ScheduledKernel k;
        k.output = u;
        if (u.op() == Op::Collective) {
            // No kernel: realize runs it between the kernels that write its source and read it.
            UOp src = u.src(0);
            if (collective_reads_buffer(u))
                while (src.op() == Op::Reshape) src = src.src(0);
            k.params = {u, src};
            static constexpr const char* kNames[] = {"all_reduce", "broadcast", "all_gather",
                                                     "reduce_scatter"};
            k.name = kNames[u.arg_as<std::vector<int64_t>>().at(0)];
            out.push_back(std::move(k));
            continue;
        }
        if (numel(u.shape()) == 0) {
            k.params = {u};
            k.name = "empty";
            out.push_back(std::move(k)); // nothing to compute; the buffer is empty
            continue;
        }
        k.ast = trace::stage("rangeify", u, [&] { return rangeify(u, mat, k.params, sym); });
        k.name = kernel_name(k.ast, dims_of(u, sym));
        if (trace::Recorder* r = trace::current()) r->rename_last("rangeify " + k.name);
        out.push_back(std::move(k));
    }
    return out;
}

} // namespace tempura
