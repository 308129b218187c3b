// The codegen stages for correct scalar code: symbolic, index dtype lowering, decompositions,
// and linearize (with remove-reduce and add-loads).
#include "tempura/codegen/stages.hpp"

#include "codegen/row_threads.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>

#include "tempura/codegen/rules.hpp"
#include "tempura/error.hpp"
#include "tempura/ir/bounds.hpp"
#include "tempura/rewrite/graph_rewrite.hpp"
#include "tempura/rewrite/trace.hpp"
#include "tempura/support/env.hpp"
#include "tempura/symbolic/simplify.hpp"

namespace tempura::codegen {

namespace {

using env::debug_level;

// A float CONST of value 0 (a WMMA's C operand before the accumulator takes its place).
bool is_zero_f(const UOp& u) {
    const auto* v = u.is_const() ? std::get_if<double>(&u.arg()) : nullptr;
    return v != nullptr && *v == 0.0;
}

// A chain of WMMA or WGMMA (each one the next one's C operand: a k-step's mma in k order) whose
// first C is zero, rebuilt onto `acc` in place of that zero; null when `v` is no such chain.
UOp wmma_onto(const UOp& v, const UOp& acc) {
    std::vector<UOp> chain;
    for (UOp u = v; !u.is_null(); u = u.src(2)) {
        if (u.op() != Op::Wmma && u.op() != Op::Wgmma) return {};
        chain.push_back(u);
        if (is_zero_f(u.src(2))) break;
    }
    UOp out = acc;
    for (auto c = chain.rbegin(); c != chain.rend(); ++c)
        out = UOp::make(c->op(), c->dtype(), {c->src(0), c->src(1), out}, c->arg());
    return out;
}

} // namespace

UOp reduce_identity(Op op, DType dt) {
    switch (op) {
    case Op::Add: return dt.is_float() ? UOp::constant_f(dt, 0.0) : UOp::constant(dt, 0);
    case Op::Mul: return dt.is_float() ? UOp::constant_f(dt, 1.0) : UOp::constant(dt, 1);
    case Op::Max:
        if (dt.is_float()) return UOp::constant_f(dt, -std::numeric_limits<double>::infinity());
        return UOp::constant(dt, dt.min());
    default: fail("reduce", "no identity for reduce op " + std::string(op_name(op)));
    }
}

UOp symbolic(const UOp& ast) {
    RewriteOptions o;
    o.bottom_up = true;
    return graph_rewrite(ast, symbolic_rules(), nullptr, o);
}

UOp lower_index_dtype(const UOp& ast) {
    // Which dtype is global by nature (every index must fit); the rewrite is a rule group.
    bool fits32 = true;
    for (const UOp& u : ast.toposort())
        if (u.dtype() == DType::Index && (u.vmin() < std::numeric_limits<int32_t>::min() ||
                                          u.vmax() > std::numeric_limits<int32_t>::max()))
            fits32 = false;
    IndexDType ctx{fits32 ? DType::Int32 : DType::Int64};
    RewriteOptions o;
    o.bottom_up = true;
    return graph_rewrite(ast, index_dtype_lowering(), ctx, o);
}

UOp decompose(const UOp& ast) {
    RewriteOptions o;
    o.bottom_up = true;
    return graph_rewrite(ast, early_decompositions(), {}, o);
}

namespace {

// Linearize: places each op in the outermost open loop that holds all the ranges it uses.
class Linearizer {
  public:
    std::vector<UOp> run(const UOp& ast) {
        for (const UOp& u : ast.toposort())
            if (u.op() == Op::Reduce) {
                reduces_.push_back(u);
                std::vector<const UOpNode*>& inner = inner_reduces_[u];
                std::vector<UOp>& in_order = inner_in_order_[u];
                for (const UOp& n : u.toposort())
                    if (n.op() == Op::Reduce && !n.same(u)) {
                        inner.push_back(n.get());
                        in_order.push_back(n);
                    }
            }
        scopes_.push_back(Scope{UOp(), {}, next_scope_++});
        for (const UOp& s : ast.srcs()) emit_effect(s);
        return std::move(scopes_[0].ops);
    }

  private:
    struct Scope {
        UOp range;
        std::vector<UOp> ops;
        int id;
    };
    struct Placed {
        UOp value;
        int scope_id;
    };
    std::vector<Scope> scopes_;
    int next_scope_ = 0;
    int64_t next_reg_ = 0;
    UOpMemo<Placed> placed_;
    UOpMemo<uint64_t> mask_cache_;
    UOpMap<int> range_bit_;
    std::vector<UOp> reduces_;                          // every REDUCE of the kernel, sources first
    UOpMap<std::vector<const UOpNode*>> inner_reduces_; // the REDUCEs inside each REDUCE
    UOpMap<std::vector<UOp>> inner_in_order_;           // the same, sources first

    bool scope_open(int id) const {
        for (const auto& s : scopes_)
            if (s.id == id) return true;
        return false;
    }

    // Which ranges a node uses (a REDUCE hides its own). Sources are computed first in an
    // explicit post-order walk, so a deep chain does not recurse once per node.
    uint64_t mask(const UOp& root) {
        if (const uint64_t* m = mask_cache_.find(root)) return *m;
        std::vector<std::pair<const UOp*, size_t>> stack{{&root, 0}};
        while (!stack.empty()) {
            auto& [u, i] = stack.back();
            if (i < u->srcs().size()) {
                const UOp& s = u->src(i++);
                if (!mask_cache_.contains(s)) stack.emplace_back(&s, 0);
                continue;
            }
            const UOp* done = u;
            stack.pop_back();
            if (!mask_cache_.contains(*done)) mask_cache_.emplace(*done, mask_of_sources(*done));
        }
        return *mask_cache_.find(root);
    }
    // A node's mask from its sources' (all computed).
    uint64_t mask_of_sources(const UOp& u) {
        uint64_t m = 0;
        if (u.op() == Op::Range) {
            auto it = range_bit_.find(u);
            if (it == range_bit_.end()) {
                if (range_bit_.size() >= 64) fail("linearize", "more than 64 ranges in a kernel");
                it = range_bit_.emplace(u, static_cast<int>(range_bit_.size())).first;
            }
            m = uint64_t{1} << it->second;
            m |= *mask_cache_.find(u.src(0));
        } else if (u.op() == Op::Reduce) {
            m = *mask_cache_.find(u.src(0));
            for (size_t i = 1; i < u.srcs().size(); ++i) m &= ~mask_of_range(u.src(i));
        } else {
            for (const UOp& s : u.srcs()) m |= *mask_cache_.find(s);
        }
        return m;
    }
    uint64_t mask_of_range(const UOp& r) {
        mask(r);
        return uint64_t{1} << range_bit_.at(r);
    }

    // The innermost open scope among those of the ranges in m.
    size_t scope_for(uint64_t m) {
        size_t level = 0;
        for (size_t i = 1; i < scopes_.size(); ++i)
            if (m & mask_of_range(scopes_[i].range)) level = i;
        // Every range used must be open.
        uint64_t open = 0;
        for (size_t i = 1; i < scopes_.size(); ++i) open |= mask_of_range(scopes_[i].range);
        if ((m & ~open) != 0) fail("linearize", "an op uses a range outside its loop");
        return level;
    }

    void place(const UOp& original, const UOp& value, size_t level) {
        scopes_[level].ops.push_back(value);
        placed_.set(original, Placed{value, scopes_[level].id});
    }

    void open(const UOp& range) {
        const UOp end = value(range.src(0));
        UOp r = end.same(range.src(0)) ? range : range.replace_srcs({end});
        scopes_.push_back(Scope{r, {}, next_scope_++});
        placed_.set(range, Placed{r, scopes_.back().id});
    }
    UOp close() {
        Scope s = std::move(scopes_.back());
        scopes_.pop_back();
        auto& parent = scopes_.back().ops;
        parent.push_back(s.range);
        parent.insert(parent.end(), s.ops.begin(), s.ops.end());
        UOp end = UOp::make(Op::End, DType::Void, {s.range});
        parent.push_back(end);
        return end;
    }

    bool is_placed(const UOp& u) const {
        const Placed* p = placed_.find(u);
        return p != nullptr && scope_open(p->scope_id);
    }

    // The program value of a node, emitting it (and its sources) where it belongs. Sources are
    // emitted first by an explicit post-order walk, in the order a recursive emission would
    // take (a REDUCE is emitted when the walk reaches it; a RANGE must be open already), so a
    // deep chain does not recurse once per node.
    UOp value(const UOp& u) {
        if (is_placed(u)) return placed_.find(u)->value;
        if (u.op() == Op::Reduce) return emit_reduce(u);
        if (u.op() == Op::Range) fail("linearize", "a RANGE used outside its loop");
        std::vector<std::pair<const UOp*, size_t>> stack{{&u, 0}};
        while (!stack.empty()) {
            auto& [n, i] = stack.back();
            if (i < n->srcs().size()) {
                const UOp& s = n->src(i++);
                if (is_placed(s) || s.op() == Op::Range) continue;
                if (s.op() == Op::Reduce)
                    emit_reduce(s);
                else
                    stack.emplace_back(&s, 0);
                continue;
            }
            const UOp* done = n;
            stack.pop_back();
            if (done != &u && !is_placed(*done)) value_of_placed_sources(*done);
        }
        return value_of_placed_sources(u);
    }

    // Emits u, whose non-REDUCE sources are placed (or are REDUCEs and RANGEs, which value()
    // emits or rejects).
    UOp value_of_placed_sources(const UOp& u) {
        std::vector<UOp> srcs;
        srcs.reserve(u.srcs().size());
        bool same = true;
        for (const UOp& s : u.srcs()) {
            srcs.push_back(value(s));
            same = same && srcs.back().same(s);
        }
        UOp v = same ? u : u.replace_srcs(std::move(srcs));
        place(u, v, scope_for(mask(u)));
        return v;
    }

    // The REDUCEs that can share red's loops here: the same ranges, not placed yet, computable
    // in the open scopes and independent of each other's results (the expander's unrolled
    // copies of one reduce: one loop with several accumulators instead of one loop each).
    std::vector<UOp> siblings(const UOp& red) {
        std::vector<UOp> group{red};
        uint64_t open = 0;
        for (size_t i = 1; i < scopes_.size(); ++i) open |= mask_of_range(scopes_[i].range);
        for (const UOp& s : reduces_) {
            if (s.same(red) || s.srcs().size() != red.srcs().size() || placed_.contains(s))
                continue;
            bool same_ranges = true;
            for (size_t i = 1; i < s.srcs().size() && same_ranges; ++i)
                same_ranges = s.src(i).same(red.src(i));
            if (!same_ranges || (mask(s) & ~open) != 0) continue;
            auto inside = [&](const UOp& outer, const UOp& x) {
                const auto& in = inner_reduces_.at(outer);
                return std::find(in.begin(), in.end(), x.get()) != in.end();
            };
            bool independent = true;
            for (const UOp& g : group) independent = independent && !inside(s, g) && !inside(g, s);
            if (independent) group.push_back(s);
        }
        return group;
    }

    // REDUCE(v, ranges) -> acc = identity; for ranges: acc = op(acc, v); then load acc. Sibling
    // REDUCEs over the same ranges share the loops, each with its own accumulator.
    UOp emit_reduce(const UOp& red) {
        // A REDUCE inside red's value that uses none of red's ranges (GROUP's partial reduce,
        // read back after a barrier inside the final reduce's loop) is computed once, before
        // red's loops, not again in every iteration of them.
        {
            uint64_t own = 0, open_now = 0;
            for (size_t i = 1; i < red.srcs().size(); ++i) own |= mask_of_range(red.src(i));
            for (size_t i = 1; i < scopes_.size(); ++i) open_now |= mask_of_range(scopes_[i].range);
            for (const UOp& in : inner_in_order_.at(red))
                if (!is_placed(in) && (mask(in) & own) == 0 && (mask(in) & ~open_now) == 0)
                    emit_reduce(in);
        }
        const std::vector<UOp> group = siblings(red);
        const size_t here = scopes_.size() - 1;
        const UOp zero = value(UOp::constant(DType::Int32, 0));
        struct Acc {
            UOp acc, slot, init;
        };
        std::vector<Acc> accs;
        for (const UOp& g : group) {
            const DType dt = g.dtype();
            const UOp acc = value(UOp::make(Op::DefineReg, dt.ptr(AddrSpace::Reg), {},
                                            std::vector<int64_t>{1, next_reg_++}));
            const UOp slot = value(UOp::make(Op::Index, acc.dtype(), {acc, zero}));
            const UOp init = UOp::make(Op::Store, DType::Void,
                                       {slot, value(reduce_identity(g.arg_as<Op>(), dt))});
            place(init, init, here);
            accs.push_back({acc, slot, init});
        }
        for (size_t i = 1; i < red.srcs().size(); ++i) open(red.src(i));
        for (size_t k = 0; k < group.size(); ++k) {
            const UOp& g = group[k];
            std::vector<UOp> deps{accs[k].acc, accs[k].init};
            for (size_t i = 1; i < g.srcs().size(); ++i) deps.push_back(g.src(i));
            // Inside the loops the accumulator is read through AFTER(acc, init, ranges): ordered
            // after the init store and tied to the reduce ranges, so it is never hoisted out.
            const UOp cur = value(
                UOp::make(Op::Load, g.dtype(),
                          {UOp::make(Op::Index, accs[k].acc.dtype(),
                                     {UOp::make(Op::After, accs[k].acc.dtype(), deps), zero})}));
            // A sum of products accumulates with one fused multiply-add a step (MULACC, as the
            // mulacc stage fuses a * b + c elsewhere: the renderer contracts nothing), and a sum
            // of tensor-core products in the mma's C operand.
            const UOp& v = g.src(0);
            const bool sum = g.arg_as<Op>() == Op::Add;
            const UOp onto = sum ? wmma_onto(v, cur) : UOp();
            const UOp next = sum && v.op() == Op::Mul && v.dtype().is_float()
                                 ? value(UOp::alu(Op::MulAcc, {v.src(0), v.src(1), cur}))
                             : !onto.is_null() ? value(onto)
                                               : value(UOp::alu(g.arg_as<Op>(), {cur, v}));
            scopes_.back().ops.push_back(UOp::make(Op::Store, DType::Void, {accs[k].slot, next}));
        }
        UOp end;
        for (size_t i = 1; i < red.srcs().size(); ++i) end = close();
        uint64_t open_mask = 0;
        for (size_t i = 1; i <= here; ++i) open_mask |= mask_of_range(scopes_[i].range);
        UOp first;
        for (size_t k = 0; k < group.size(); ++k) {
            const UOp& g = group[k];
            // After the loops: read it through AFTER(acc, END).
            const UOp done = UOp::make(Op::After, accs[k].acc.dtype(), {accs[k].acc, end});
            const UOp idx = UOp::make(Op::Index, accs[k].acc.dtype(), {done, zero});
            const UOp result = UOp::make(Op::Load, g.dtype(), {idx});
            place(done, done, here);
            place(idx, idx, here);
            place(result, result, here);
            placed_.set(g, Placed{result, scopes_[here].id});
            // The loops ran inside every scope open here, so the result lives there: users must
            // be placed no further out, even when the reduced value uses none of those ranges.
            mask_cache_.set(g, mask(g) | open_mask);
            if (k == 0) first = result;
        }
        return first;
    }

    // Effects: END (loops around a computation), STORE (gated stores become IF/ENDIF), SINK.
    void emit_effect(const UOp& u) {
        if (u.op() == Op::End) {
            // A REDUCE that uses only the outer loops of the END (a row's max or sum, fused into
            // the kernel that writes the row) runs once at the level of the loops it uses, before
            // the inner ones open, not again in every iteration of them.
            // (On a GPU, a row's reduces use none of the loops left: the rows and the threads
            // are block and thread indices.)
            std::vector<UOp> pending;
            for (const UOp& n : u.src(0).toposort())
                if (n.op() == Op::Reduce) pending.push_back(n);
            for (size_t i = 1; i < u.srcs().size(); ++i) {
                uint64_t open_now = 0;
                for (size_t j = 1; j < scopes_.size(); ++j)
                    open_now |= mask_of_range(scopes_[j].range);
                for (const UOp& r : pending)
                    if (!is_placed(r) && (mask(r) & ~open_now) == 0) emit_reduce(r);
                open(u.src(i));
            }
            emit_effect(u.src(0));
            for (size_t i = 1; i < u.srcs().size(); ++i) close();
            return;
        }
        if (u.op() == Op::Store) {
            const UOp& index = u.src(0);
            UOp v = value(u.src(1));
            if (index.srcs().size() == 3) {
                UOp gate = value(index.src(2));
                UOp ptr = value(index.src(0));
                UOp off = value(index.src(1));
                UOp iff = UOp::make(Op::If, DType::Void, {gate});
                UOp idx = UOp::make(Op::Index, index.dtype(), {ptr, off});
                auto& ops = scopes_.back().ops;
                ops.push_back(iff);
                ops.push_back(idx);
                ops.push_back(UOp::make(Op::Store, DType::Void, {idx, v}));
                ops.push_back(UOp::make(Op::EndIf, DType::Void, {iff}));
                return;
            }
            UOp idx = value(index);
            scopes_.back().ops.push_back(UOp::make(Op::Store, DType::Void, {idx, v}));
            return;
        }
        if (u.op() == Op::Sink || u.op() == Op::Group) {
            for (const UOp& s : u.srcs()) emit_effect(s);
            return;
        }
        fail("linearize", "unexpected " + std::string(op_name(u.op())) + " at the top of a kernel");
    }
};

} // namespace

std::vector<UOp> linearize(const UOp& ast) { return Linearizer().run(ast); }

std::string render_linear(const std::vector<UOp>& program) {
    std::string out;
    UOpMap<size_t> num;
    int depth = 0;
    for (const UOp& u : program) {
        if (u.op() == Op::End || u.op() == Op::EndIf) --depth;
        const size_t n = num.size();
        num.emplace(u, n);
        std::string line = std::string(static_cast<size_t>(2 * std::max(depth, 0)), ' ') + "%" +
                           std::to_string(n) + " = " + std::string(op_name(u.op())) + " " +
                           u.dtype().name();
        for (const UOp& s : u.srcs()) {
            auto it = num.find(s);
            line += it == num.end() ? " ?" : " %" + std::to_string(it->second);
        }
        if (u.arg().index() != 0) line += "  " + arg_to_string(u.arg());
        out += line + "\n";
        if (u.op() == Op::Range || u.op() == Op::If) ++depth;
    }
    return out;
}

namespace {

template <const pattern::RuleTable& (*Table)()>
UOp rewrite_stage(const UOp& a, KernelState&) {
    RewriteOptions o;
    o.bottom_up = true;
    return graph_rewrite(a, Table(), {}, o);
}
UOp symbolic_stage(const UOp& a, KernelState&) { return symbolic(a); }
UOp split_ranges_stage(const UOp& a, KernelState&) { return split_ranges(a); }
UOp simplify_ranges_stage(const UOp& a, KernelState&) { return simplify_ranges(a); }
UOp apply_opts_stage(const UOp& a, KernelState& k) {
    k.out.opts = k.opts != nullptr   ? *k.opts
                 : noopt_requested() ? std::vector<Opt>{}
                                     : heuristic_opts(a, k.limits);
    if (debug_level() >= 3)
        std::fprintf(stderr, "opts %s: %s\n", k.name.c_str(), to_string(k.out.opts).c_str());
    return apply_opts(a, k.out.opts, k.limits);
}
UOp expand_stage(const UOp& a, KernelState& k) { return expand(a, k.limits.vector_bytes); }
UOp threads_stage(const UOp& a, KernelState& k) { return lower_threads(a, k.out.threads); }
UOp group_stage(const UOp& a, KernelState& k) {
    if (!k.limits.gpu) return a;
    // A row-fused kernel without opts (the heuristics pick none for it): one block a row.
    return lower_group_reduces(k.out.opts.empty() ? row_threads(a, k.limits) : a);
}
UOp gpu_dims_stage(const UOp& a, KernelState& k) {
    if (!k.limits.gpu) return a;
    return gpu_dims(a, k.limits, k.name, k.out.grid, k.out.block, &k.out.grid_size);
}
UOp index_dtype_stage(const UOp& a, KernelState&) { return lower_index_dtype(a); }

// The index of the first stage that runs after opts are chosen.
constexpr size_t kApplyOpts = 4;

} // namespace

const std::vector<Stage>& pipeline() {
    static const std::vector<Stage> stages = {
        {"symbolic", symbolic_stage},
        {"early decompositions", rewrite_stage<early_decompositions>},
        {"split ranges", split_ranges_stage},
        {"simplify ranges", simplify_ranges_stage},
        {"apply opts", apply_opts_stage}, // kApplyOpts
        {"post-opt symbolic", symbolic_stage},
        {"group reduce", group_stage},
        {"gated loads", rewrite_stage<gated_loads>},
        {"expander", expand_stage},
        {"vector folds", rewrite_stage<vector_folds>},
        {"thread lowering", threads_stage},
        {"gpu dims", gpu_dims_stage},
        {"mulacc", rewrite_stage<mulacc_fusion>},
        {"index dtype lowering", index_dtype_stage},
        {"post-index symbolic", symbolic_stage},
        {"late decompositions", rewrite_stage<late_decompositions>},
        {"cpu lowering", rewrite_stage<cpu_lowering>},
    };
    return stages;
}

namespace {

// Runs stages [from, to) of the pipeline on k.ast, dumping each at TEMPURA_DEBUG >= 5.
void run_stages(KernelState& k, size_t from, size_t to) {
    const bool dump = debug_level() >= 5;
    const auto& stages = pipeline();
    for (size_t i = from; i < to && i < stages.size(); ++i) {
        k.ast = trace::stage(stages[i].name, k.ast, [&] { return stages[i].run(k.ast, k); });
        if (dump)
            std::fprintf(stderr, "=== %s: %s\n%s", k.name.c_str(), stages[i].name,
                         k.ast.tree().c_str());
    }
}

// TEMPURA_CHECK_ACCESS=1 (the tests set it): every load and store that no gate guards must lie
// inside its buffer by the bounds of its offset; a gated one (or one inside an IF: PADTO's
// guard) is guarded by its gate. A kernel that breaks this fails here with an internal error
// instead of reading outside a buffer.
void check_accesses(const std::string& name, const std::vector<UOp>& program) {
    int in_if = 0;
    for (const UOp& u : program) {
        in_if += u.op() == Op::If ? 1 : u.op() == Op::EndIf ? -1 : 0;
        if (in_if > 0 || (u.op() != Op::Load && u.op() != Op::Store)) continue;
        const UOp& idx = u.src(0);
        if (idx.op() != Op::Index || idx.srcs().size() != 2) continue; // a gated INDEX
        if (u.op() == Op::Load && u.srcs().size() > 1) continue;       // a gated LOAD
        const UOp& p = idx.src(0);
        if (p.op() != Op::Param) continue;
        const auto& a = p.arg_as<std::vector<int64_t>>();
        // A symbolic size; or none: a loop over an empty buffer runs 0 times.
        if (a.size() < 2 || a[1] <= 0) continue;
        const UOp& off = idx.src(1);
        const int64_t lanes = u.op() == Op::Load ? u.dtype().count : u.src(1).dtype().count;
        const bool unknown = off.vmin() == kUnknownMin || off.vmax() == kUnknownMax;
        if (unknown || off.vmin() < 0 || off.vmax() + lanes > a[1])
            fail("lowering", "internal: kernel " + name + " has an ungated " +
                                 std::string(op_name(u.op())) + " of buffer " +
                                 std::to_string(a[0]) + " (" + std::to_string(a[1]) +
                                 " elements) at offsets [" +
                                 (unknown ? std::string("unknown")
                                          : std::to_string(off.vmin()) + ", " +
                                                std::to_string(off.vmax() + lanes - 1)) +
                                 "]");
    }
}

} // namespace

UOp prepare_for_opts(const UOp& ast) {
    // realize() asks for the same kernel's prepared AST several times in a row (the opts
    // heuristics or BEAM's cache key and search, then lowering): the last answer is kept per
    // thread, so a large kernel is simplified once.
    thread_local std::pair<UOp, UOp> last;
    if (!last.first.is_null() && last.first.same(ast)) return last.second;
    KernelState k{"", ast, DeviceLimits{}, nullptr, {}};
    for (size_t i = 0; i < kApplyOpts; ++i) k.ast = pipeline()[i].run(k.ast, k);
    last = {ast, k.ast};
    return k.ast;
}

LoweredKernel lower_kernel_opt(const std::string& name, const UOp& ast, const DeviceLimits& limits,
                               const std::vector<Opt>* opts) {
    KernelState k{name, ast, limits, opts, {}};
    if (debug_level() >= 5)
        std::fprintf(stderr, "=== %s: rangeify\n%s", name.c_str(), ast.tree().c_str());
    if (debug_level() >= 5 || trace::current() != nullptr) {
        run_stages(k, 0, pipeline().size()); // every stage, each dumped or traced
    } else {
        // The stages before opts through the per-thread cache (the heuristics or BEAM ran them).
        k.ast = prepare_for_opts(ast);
        run_stages(k, kApplyOpts, pipeline().size());
    }
    k.out.program = linearize(k.ast);
    static const bool check = env::get_flag("TEMPURA_CHECK_ACCESS");
    if (check) check_accesses(name, k.out.program);
    if (debug_level() >= 5)
        std::fprintf(stderr, "=== %s: linearize\n%s", name.c_str(),
                     render_linear(k.out.program).c_str());
    return std::move(k.out);
}

} // namespace tempura::codegen
