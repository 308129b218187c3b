// The range stages before apply-opts (split ranges, simplify ranges), then the ones after it:
// the expander (UPCAST/UNROLL ranges -> vector lanes and unrolled copies, folded to the host's
// vector width, with load collapse, split stores and horizontal reduction), THREAD lowering and
// MULACC fusion (a rule group, rules.hpp). The order is pipeline() in stages.cpp.
#include <algorithm>
#include <unordered_map>

#include "codegen/ranges.hpp"
#include "tempura/codegen/rules.hpp"
#include "tempura/codegen/stages.hpp"
#include "tempura/error.hpp"
#include "tempura/rewrite/graph_rewrite.hpp"
#include "tempura/symbolic/simplify.hpp"

namespace tempura::codegen {

namespace detail {

bool contains(const UOp& u, const UOp& r) {
    for (const UOp& n : u.toposort())
        if (n.same(r)) return true;
    return false;
}

UOp replace_range(const UOp& ast, const UOp& r, const UOp& value, const std::vector<UOp>& repl) {
    return replace_ranges(ast, {{r, value, repl}}, false);
}

UOp replace_ranges(const UOp& ast, const std::vector<RangeValue>& subs, bool drop_bare_ends) {
    auto sub_of = [&](const UOp& u) -> const RangeValue* {
        if (u.op() != Op::Range) return nullptr;
        for (const RangeValue& s : subs)
            if (s.range.same(u)) return &s;
        return nullptr;
    };
    return rebuild_graph(ast, [&](const UOp& u, std::vector<UOp> srcs) {
        if (const RangeValue* s = sub_of(u)) return s->value;
        if (u.op() != Op::End && u.op() != Op::Reduce) return with_srcs(u, std::move(srcs));
        std::vector<UOp> listed{srcs[0]};
        for (size_t i = 1; i < srcs.size(); ++i) {
            if (const RangeValue* s = sub_of(u.src(i)))
                listed.insert(listed.end(), s->listed.begin(), s->listed.end());
            else
                listed.push_back(srcs[i]);
        }
        if (drop_bare_ends && u.op() == Op::End && listed.size() == 1) return listed[0];
        return with_srcs(u, std::move(listed));
    });
}

std::vector<UOp> nested_reduces(const UOp& ast) {
    const std::vector<UOp> topo = ast.toposort();
    std::vector<UOp> out;
    UOpMap<uint64_t> uses; // the loop reduce ranges each node's value uses, one bit each
    size_t bits = 0;
    for (const UOp& u : topo) {
        uint64_t m = 0;
        for (const UOp& s : u.srcs()) m |= uses.at(s);
        if (u.op() == Op::Range && type_of(u) == AxisType::Reduce) {
            if (bits == 64) {
                out.clear();
                for (const UOp& v : topo)
                    if (v.op() == Op::Reduce) out.push_back(v);
                return out;
            }
            m |= uint64_t{1} << bits++;
        }
        if (u.op() == Op::Reduce) {
            uint64_t own = 0;
            for (size_t k = 1; k < u.srcs().size(); ++k) own |= uses.at(u.src(k));
            if ((uses.at(u.src(0)) & ~own) != 0) out.push_back(u);
            m &= ~own;
        }
        uses.emplace(u, m);
    }
    return out;
}

int64_t next_axis_id(const std::vector<UOp>& topo) {
    int64_t next = 0;
    for (const UOp& u : topo)
        if (u.op() == Op::Range) next = std::max(next, u.arg_as<RangeArg>().axis_id + 1);
    return next;
}
int64_t next_axis_id(const UOp& ast) { return next_axis_id(ast.toposort()); }

} // namespace detail

namespace {

using detail::contains;
using detail::is_expanded;
using detail::replace_range;
using detail::size_of;
using detail::type_of;

bool has_divmod_of(const UOp& u, const UOp& r) {
    for (const UOp& n : u.toposort())
        if ((n.op() == Op::Idiv || n.op() == Op::Mod) && contains(n, r)) return true;
    return false;
}

UOp combine(Op op, std::vector<UOp> vals) {
    while (vals.size() > 1) {
        std::vector<UOp> next;
        for (size_t i = 0; i + 1 < vals.size(); i += 2)
            next.push_back(UOp::make(op, vals[i].dtype(), {vals[i], vals[i + 1]}));
        if (vals.size() % 2) next.push_back(vals.back());
        vals = std::move(next);
    }
    return vals[0];
}

} // namespace

// ---- split ranges ----------------------------------------------------------------------------

UOp split_ranges(const UOp& ast) {
    // RANGE(n) % c with c dividing n: the range becomes outer * c + inner (both loops), so the
    // modulo (and the division beside it) fold away.
    UOp cur = ast;
    for (int guard = 0; guard < 16; ++guard) {
        UOp r;
        int64_t c = 0;
        for (const UOp& u : cur.toposort())
            if (u.op() == Op::Mod && u.src(0).op() == Op::Range && u.src(1).is_const() &&
                u.src(0).src(0).is_const() && !is_expanded(u.src(0))) {
                const int64_t n = size_of(u.src(0)), m = u.src(1).const_value();
                if (m > 1 && m < n && n % m == 0) {
                    r = u.src(0);
                    c = m;
                    break;
                }
            }
        if (r.is_null()) break;
        const int64_t next = detail::next_axis_id(cur);
        const RangeArg ra = r.arg_as<RangeArg>();
        const UOp outer = UOp::make(Op::Range, DType::Index, {UOp::index(size_of(r) / c)}, ra);
        const UOp inner =
            UOp::make(Op::Range, DType::Index, {UOp::index(c)}, RangeArg{next, ra.type});
        cur = symbolic(replace_range(cur, r, outer * UOp::index(c) + inner, {outer, inner}));
    }
    return cur;
}

// ---- simplify ranges -------------------------------------------------------------------------

UOp simplify_ranges(const UOp& ast) {
    // Adjacent ranges of one END or REDUCE merge into one when every index using them
    // simplifies without a division or modulo of the merged range.
    UOp cur = ast;
    for (bool changed = true; changed;) {
        changed = false;
        for (const UOp& u : cur.toposort()) {
            if (u.op() != Op::End && u.op() != Op::Reduce) continue;
            for (size_t i = 1; i + 1 < u.srcs().size() && !changed; ++i) {
                const UOp a = u.src(i), b = u.src(i + 1);
                if (a.op() != Op::Range || b.op() != Op::Range || type_of(a) != type_of(b) ||
                    is_expanded(a) || is_expanded(b) || !a.src(0).is_const() ||
                    !b.src(0).is_const())
                    continue;
                const int64_t na = size_of(a), nb = size_of(b);
                const UOp m =
                    UOp::make(Op::Range, DType::Index, {UOp::index(na * nb)}, a.arg_as<RangeArg>());
                // a -> m / nb, b -> m % nb
                UOp t = replace_range(cur, a, m / UOp::index(nb), {m});
                UOp mod_b = m % UOp::index(nb);
                // b disappears from the lists; its value is m % nb.
                t = replace_range(t, b, mod_b, {});
                t = simplify_kernel_indices(t);
                if (has_divmod_of(t, m)) continue;
                cur = t;
                changed = true;
            }
            if (changed) break;
        }
    }
    return cur;
}

UOp simplify_kernel_indices(const UOp& ast) {
    // Simplify each INDEX's offset and gate on its own (the symbolic stage's rules, applied to
    // the index arithmetic only).
    return rebuild_graph(ast, [](const UOp& u, std::vector<UOp> srcs) {
        if (u.op() == Op::Index)
            for (size_t i = 1; i < srcs.size(); ++i) srcs[i] = simplify(srcs[i]);
        return with_srcs(u, std::move(srcs));
    });
}

// ---- the expander --------------------------------------------------------------------------

namespace {

class Expander {
  public:
    // `topo`: ast.toposort(). (Each walk over a large kernel costs: the expander walks it once
    // here, and once more when the vector axis is folded.)
    Expander(const UOp& ast, std::vector<UOp> topo, int64_t vector_bytes)
        : vector_bytes_(vector_bytes), topo_(std::move(topo)) {
        // The vector axis: the expanded range created first (smallest axis id).
        for (const UOp& u : topo_)
            if (is_expanded(u)) {
                if (vaxis_.is_null() ||
                    u.arg_as<RangeArg>().axis_id < vaxis_.arg_as<RangeArg>().axis_id)
                    vaxis_ = u;
            }
        ast_ = ast;
        if (!vaxis_.is_null()) fold_width();
        vn_ = vaxis_.is_null() ? 1 : size_of(vaxis_);
        more_vector_axes();
        for (const UOp& u : topo_)
            if (is_expanded(u) && !is_vax(u)) {
                pos_.emplace(u, unrolled_.size());
                unrolled_.push_back(u);
            }
        if (unrolled_.size() > 62) fail("expander", "more than 62 unrolled ranges in a kernel");
    }

    UOp run() {
        std::vector<int64_t> zero(unrolled_.size(), 0);
        return ex(ast_, zero);
    }

  private:
    static constexpr uint64_t kV = uint64_t{1} << 63;

    // More vector axes: an expanded range as wide as the vector axis that no value uses together
    // with another vector axis (a REDUCE hides its own ranges) becomes lanes too. A row-fused
    // kernel (softmax: the max's loop, the sum's loop, the output's) so gets vector lanes in each
    // of its loops over the row, where the first one alone would leave the others unrolled
    // scalars. Lane l of every value is then the value at l of the vector axis it uses.
    void more_vector_axes() {
        vaxes_.clear();
        if (vaxis_.is_null()) return;
        vaxes_.push_back(vaxis_);
        std::vector<UOp> cand{vaxis_};
        for (const UOp& u : topo_)
            if (is_expanded(u) && !u.same(vaxis_) && u.src(0).is_const() && size_of(u) == vn_ &&
                std::none_of(folded_hi_.begin(), folded_hi_.end(),
                             [&](const UOp& h) { return h.same(u); }))
                cand.push_back(u); // (a folded range's hi part strides: its lo is the lanes)
        if (cand.size() < 2 || cand.size() > 63) return;
        std::unordered_map<const UOpNode*, uint64_t> m;
        std::vector<uint64_t> together(cand.size(), 0);
        for (const UOp& u : topo_) {
            uint64_t x = 0;
            for (size_t b = 0; b < cand.size(); ++b)
                if (u.same(cand[b])) x = uint64_t{1} << b;
            if (x == 0 && u.op() != Op::End) {
                for (const UOp& s : u.srcs()) x |= m[s.get()];
                if (u.op() == Op::Reduce) {
                    x = m[u.src(0).get()];
                    for (size_t i = 1; i < u.srcs().size(); ++i) x &= ~m[u.src(i).get()];
                }
            }
            m[u.get()] = x;
            // A reduce over two of them reduces over both, whatever its value reads: shared
            // lanes would count a range its value does not read once, not size times (a sum of
            // a constant over two unrolled ranges of 2 came out half).
            uint64_t y = 0;
            if (u.op() == Op::Reduce)
                for (size_t i = 1; i < u.srcs().size(); ++i)
                    for (size_t b = 0; b < cand.size(); ++b)
                        if (u.src(i).same(cand[b])) y |= uint64_t{1} << b;
            for (size_t b = 0; b < cand.size(); ++b) {
                if (x & (uint64_t{1} << b)) together[b] |= x & ~(uint64_t{1} << b);
                if (y & (uint64_t{1} << b)) together[b] |= y & ~(uint64_t{1} << b);
            }
        }
        uint64_t taken = 1;
        for (size_t b = 1; b < cand.size(); ++b)
            if ((together[b] & taken) == 0) {
                taken |= uint64_t{1} << b;
                vaxes_.push_back(cand[b]);
            }
    }
    bool is_vax(const UOp& u) const {
        for (const UOp& v : vaxes_)
            if (u.same(v)) return true;
        return false;
    }
    // Whether e uses any vector axis: one walk over e, each node tested against them all.
    bool has_vax(const UOp& e) const {
        if (vaxes_.empty()) return false;
        for (const UOp& n : e.toposort())
            if (is_vax(n)) return true;
        return false;
    }

    // Devectorizer fold: a vector axis wider than the host's registers becomes unrolled copies
    // of register-wide vectors (hi * width + lo); one that does not split evenly is unrolled.
    void fold_width() {
        int64_t itemsize = 4;
        for (const UOp& u : topo_)
            if (u.op() == Op::Store || u.op() == Op::Load)
                itemsize = std::max<int64_t>(
                    itemsize, (u.op() == Op::Store ? u.src(1).dtype() : u.dtype()).itemsize());
        const int64_t w = std::max<int64_t>(1, vector_bytes_ / itemsize);
        const int64_t n = size_of(vaxis_);
        if (n <= w) return;
        if (n % w != 0) {
            vaxis_ = UOp(); // no vector lanes: everything unrolls
            return;
        }
        // Every expanded range as wide as the vector axis is split alike: more_vector_axes()
        // makes lanes of those as wide as the (folded) vector axis, so a row-fused kernel's
        // reduce loops keep their lanes when a wide dtype (an Int64 mask) halves the width.
        // (Unsplit, they were 16 unrolled scalars each: a causal softmax ran 9x slower.)
        std::vector<UOp> wide;
        for (const UOp& u : topo_)
            if (is_expanded(u) && (u.same(vaxis_) || (u.src(0).is_const() && size_of(u) == n)))
                wide.push_back(u);
        int64_t next = detail::next_axis_id(topo_);
        UOp folded;
        for (const UOp& r : wide) {
            // lo keeps the range's id (the vector axis keeps the smallest); hi gets a new one.
            const UOp lo =
                UOp::make(Op::Range, DType::Index, {UOp::index(w)}, r.arg_as<RangeArg>());
            const UOp hi = UOp::make(Op::Range, DType::Index, {UOp::index(n / w)},
                                     RangeArg{next++, type_of(r)});
            ast_ = replace_range(ast_, r, hi * UOp::index(w) + lo, {hi, lo});
            folded_hi_.push_back(hi);
            if (r.same(vaxis_)) folded = lo;
        }
        vaxis_ = folded;
        topo_ = ast_.toposort();
    }

    // Which expanded ranges a node depends on (bit i: unrolled_[i]; kV: the vector axis). A
    // REDUCE hides its own ranges, an END all of them. Sources first, by an explicit post-order
    // walk: a deep chain does not recurse once per node.
    uint64_t deps(const UOp& root) {
        if (const uint64_t* d = deps_.find(root)) return *d;
        std::vector<std::pair<const UOp*, size_t>> stack{{&root, 0}};
        while (!stack.empty()) {
            auto& [u, i] = stack.back();
            // The vector axis and the unrolled ranges are leaves here, END hides everything.
            const bool leaf = is_vax(*u) || pos_.contains(*u) || u->op() == Op::End;
            if (!leaf && i < u->srcs().size()) {
                const UOp& s = u->src(i++);
                if (!deps_.contains(s)) stack.emplace_back(&s, 0);
                continue;
            }
            const UOp* done = u;
            stack.pop_back();
            if (!deps_.contains(*done)) deps_.emplace(*done, deps_of_sources(*done));
        }
        return *deps_.find(root);
    }
    // A node's dependencies from its sources' (all computed).
    uint64_t deps_of_sources(const UOp& u) const {
        if (is_vax(u)) return kV;
        if (const size_t* p = pos_.find(u)) return uint64_t{1} << *p;
        if (u.op() == Op::End) return 0;
        uint64_t m = 0;
        if (u.op() == Op::Reduce) {
            m = *deps_.find(u.src(0));
            for (size_t i = 1; i < u.srcs().size(); ++i) m &= ~*deps_.find(u.src(i));
            return m;
        }
        for (const UOp& s : u.srcs()) m |= *deps_.find(s);
        return m;
    }

    std::vector<int64_t> project(const UOp& u, const std::vector<int64_t>& a) {
        const uint64_t d = deps(u);
        std::vector<int64_t> p(a.size(), 0);
        for (size_t i = 0; i < a.size(); ++i)
            if (d & (uint64_t{1} << i)) p[i] = a[i];
        return p;
    }

    // A scalar expression with the unrolled ranges set by `a` (the vector axis stays a range).
    UOp subst_unrolled(const UOp& e, const std::vector<int64_t>& a) {
        std::unordered_map<const UOpNode*, UOp> m;
        for (size_t i = 0; i < unrolled_.size(); ++i)
            if (deps(e) & (uint64_t{1} << i)) m.emplace(unrolled_[i].get(), UOp::index(a[i]));
        return m.empty() ? e : e.substitute(m);
    }
    UOp lane(const UOp& e, int64_t l) {
        std::unordered_map<const UOpNode*, UOp> m;
        for (const UOp& v : vaxes_) m.emplace(v.get(), UOp::index(l));
        return simplify(e.substitute(m));
    }

    UOp broadcast(const UOp& s) {
        if (s.dtype().count != 1) return s;
        return UOp::make(Op::Vectorize, s.dtype().vec(static_cast<uint16_t>(vn_)),
                         std::vector<UOp>(static_cast<size_t>(vn_), s));
    }

    // The offset with the vector axis as a unit-stride term: returns the lane-0 offset, or null.
    UOp contiguous_base(const UOp& idx) {
        const UOp s = simplify(idx);
        int found = 0;
        for (const auto& [mono, coef] : linear_terms(s)) {
            if (!has_vax(mono)) continue;
            if (!is_vax(mono) || coef != 1) return UOp();
            ++found;
        }
        if (found != 1) return UOp();
        return lane(s, 0);
    }

    // The offset with the vector axis as one term of a small constant stride (2 to 4: a
    // stride-2 pool's or convolution's window rows): returns the lane-0 offset and sets
    // `stride`, or null.
    UOp strided_base(const UOp& idx, int64_t& stride) {
        const UOp s = simplify(idx);
        int found = 0;
        for (const auto& [mono, coef] : linear_terms(s)) {
            if (!has_vax(mono)) continue;
            if (!is_vax(mono) || coef < 2 || coef > 4) return UOp();
            stride = coef;
            ++found;
        }
        if (found != 1) return UOp();
        return lane(s, 0);
    }

    using Key = std::pair<const UOpNode*, std::vector<int64_t>>;
    struct KeyHash {
        size_t operator()(const Key& k) const {
            uint64_t h = reinterpret_cast<uintptr_t>(k.first) * 0x9E3779B97F4A7C15ull;
            for (int64_t v : k.second) h = (h ^ static_cast<uint64_t>(v)) * 0x100000001B3ull;
            return static_cast<size_t>(h ^ (h >> 29));
        }
    };

    // The expansion of u with the unrolled ranges set by a0. The (node, assignment) pairs that
    // build() reads are expanded first, by an explicit post-order walk over what needs() lists,
    // so a deep chain does not recurse once per node: inside build() every source is a lookup.
    UOp ex(const UOp& u, const std::vector<int64_t>& a0) {
        Key key{u.get(), project(u, a0)};
        if (const UOp* hit = memo_find(u, key.second)) return *hit;
        struct Frame {
            UOp u;
            std::vector<int64_t> a;
            bool listed;
        };
        std::vector<Frame> stack;
        stack.push_back({u, std::move(key.second), false});
        while (!stack.empty()) {
            if (memo_find(stack.back().u, stack.back().a) != nullptr) {
                stack.pop_back();
                continue;
            }
            if (!stack.back().listed) {
                stack.back().listed = true;
                const Frame f = stack.back(); // needs() may grow the stack below
                for (auto& [n, b] : needs(f.u, f.a)) {
                    std::vector<int64_t> pb = project(n, b);
                    if (memo_find(n, pb) == nullptr) stack.push_back({n, std::move(pb), false});
                }
                continue;
            }
            Frame f = std::move(stack.back());
            stack.pop_back();
            UOp v = build(f.u, f.a);
            memo_put(f.u, std::move(f.a), std::move(v));
        }
        return *memo_find(u, project(u, a0));
    }

    // The expansion ex() computed before build() ran: build() and the functions it calls read
    // their sources' expansions only through here, so nothing in them recurses.
    UOp got(const UOp& u, const std::vector<int64_t>& a0) {
        const UOp* hit = memo_find(u, project(u, a0));
        if (hit == nullptr)
            fail("expander", "internal: " + std::string(op_name(u.op())) +
                                 " was not expanded before its user (needs() misses a case)");
        return *hit;
    }

    // What build(u, a) passes to ex(): the same cases and conditions, without building.
    std::vector<std::pair<UOp, std::vector<int64_t>>> needs(const UOp& u,
                                                            const std::vector<int64_t>& a) {
        std::vector<std::pair<UOp, std::vector<int64_t>>> out;
        if (is_vax(u) || pos_.contains(u)) return out;
        switch (u.op()) {
        case Op::Load: {
            const LoadPlan p = load_plan(u, a);
            if (!p.vector) {
                for (const UOp& s : u.src(0).srcs()) out.emplace_back(s, a);
                for (size_t i = 1; i < u.srcs().size(); ++i) out.emplace_back(u.src(i), a);
                return out;
            }
            out.emplace_back(u.src(0).src(0), a);
            if (!p.base.is_null()) {
                if (!p.gate.is_null()) out.emplace_back(p.gate, a);
                if (!p.gate.is_null() && !p.alt.is_null()) out.emplace_back(p.alt, a);
            } else if (!p.gate.is_null() && !p.alt_s.is_null() && has_vax(p.alt_s)) {
                out.emplace_back(p.alt, a);
            }
            return out;
        }
        case Op::Store: {
            const UOp& index = u.src(0);
            out.emplace_back(index.src(0), a);
            out.emplace_back(u.src(1), a);
            const StorePlan p = store_plan(u, a);
            if (!p.vector) {
                for (size_t i = 1; i < index.srcs().size(); ++i) out.emplace_back(index.src(i), a);
            } else if (!p.base.is_null() && !p.gate.is_null()) {
                out.emplace_back(index.src(2), a);
            }
            return out;
        }
        case Op::Reduce: {
            std::vector<UOp> expanded;
            for (size_t i = 1; i < u.srcs().size(); ++i)
                if (!is_vax(u.src(i)) && is_expanded(u.src(i))) expanded.push_back(u.src(i));
            for (auto& b : assignments(expanded, a)) out.emplace_back(u.src(0), std::move(b));
            return out;
        }
        case Op::End: {
            std::vector<UOp> expanded;
            for (size_t i = 1; i < u.srcs().size(); ++i)
                if (!is_vax(u.src(i)) && is_expanded(u.src(i))) expanded.push_back(u.src(i));
            const std::vector<int64_t> zero(unrolled_.size(), 0);
            for (auto& b : assignments(expanded, zero)) out.emplace_back(u.src(0), std::move(b));
            return out;
        }
        default:
            for (const UOp& s : u.srcs()) out.emplace_back(s, a);
            return out;
        }
    }

    UOp build(const UOp& u, const std::vector<int64_t>& a) {
        if (is_vax(u)) {
            std::vector<UOp> lanes;
            for (int64_t l = 0; l < vn_; ++l) lanes.push_back(UOp::index(l));
            return UOp::make(Op::Vectorize, DType::Index.vec(static_cast<uint16_t>(vn_)), lanes);
        }
        if (const size_t* p = pos_.find(u)) return UOp::index(a[*p]);
        switch (u.op()) {
        case Op::Load: return load(u, a);
        case Op::Reduce: return reduce(u, a);
        case Op::End: return end(u);
        case Op::Store: return store(u, a);
        default: break;
        }
        const bool vec = (deps(u) & kV) != 0;
        std::vector<UOp> srcs;
        bool same = true;
        for (const UOp& s : u.srcs()) {
            UOp e = got(s, a);
            if (vec && is_alu(u.op())) e = broadcast(e);
            same = same && e.same(s);
            srcs.push_back(std::move(e));
        }
        // GROUP gathers the stores of a kernel that writes several outputs: its sources were
        // expanded above, and it stays one GROUP.
        if (!vec || u.op() == Op::Group) return same ? u : u.replace_srcs(std::move(srcs));
        if (!is_alu(u.op()))
            fail("expander",
                 "cannot expand " + std::string(op_name(u.op())) + " along a vector axis");
        return UOp::make(u.op(), u.dtype().vec(static_cast<uint16_t>(vn_)), std::move(srcs),
                         u.arg());
    }

    // What load() decides before it expands anything (needs() reads it too).
    struct LoadPlan {
        bool vector = false;
        UOp idx, gate, alt, gate_s, base, alt_s;
    };
    LoadPlan load_plan(const UOp& u, const std::vector<int64_t>& a) {
        const UOp& index = u.src(0);
        if (index.op() != Op::Index || u.srcs().size() == 2 || u.srcs().size() > 3)
            fail("expander", "expects LOAD(INDEX(...)) or LOAD(INDEX(...), gate, alt) in a kernel "
                             "AST, got a LOAD with " +
                                 std::to_string(u.srcs().size()) + " sources");
        LoadPlan p;
        p.vector = (deps(u) & kV) != 0;
        if (!p.vector) return p;
        p.idx = subst_unrolled(index.src(1), a);
        // One gate for both forms: INDEX(ptr, i, gate), and LOAD(INDEX, gate, alt).
        p.gate = index.srcs().size() == 3 ? index.src(2) : UOp();
        if (u.srcs().size() == 3) p.gate = p.gate.is_null() ? u.src(1) : (p.gate & u.src(1));
        p.alt = u.srcs().size() == 3 ? u.src(2) : UOp();
        p.gate_s = p.gate.is_null() ? UOp() : subst_unrolled(p.gate, a);
        const bool gate_uniform = p.gate_s.is_null() || !has_vax(p.gate_s);
        // A gate that differs between the lanes (a padded row: the lanes over the padding are
        // off) still makes one load of a buffer's consecutive numbers, the lanes masked (the
        // renderers read only the lanes on); other memory, and bools, load lane by lane.
        const bool masked_ok = index.src(0).op() == Op::Param && !u.dtype().is_bool();
        p.base = gate_uniform || masked_ok ? contiguous_base(p.idx) : UOp();
        p.alt_s = p.alt.is_null() ? UOp() : subst_unrolled(p.alt, a);
        return p;
    }

    UOp load(const UOp& u, const std::vector<int64_t>& a) {
        const UOp& index = u.src(0);
        const LoadPlan p = load_plan(u, a);
        if (!p.vector) {
            std::vector<UOp> is, ls;
            for (const UOp& s : index.srcs()) is.push_back(got(s, a));
            ls.push_back(UOp::make(Op::Index, index.dtype(), is));
            for (size_t i = 1; i < u.srcs().size(); ++i) ls.push_back(got(u.src(i), a));
            return UOp::make(Op::Load, u.dtype(), ls);
        }
        const UOp ptr = got(index.src(0), a);
        const UOp &idx = p.idx, &gate = p.gate, &alt = p.alt, &gate_s = p.gate_s, &base = p.base;
        const DType vdt = u.dtype().vec(static_cast<uint16_t>(vn_));
        auto zero = [&] {
            return u.dtype().is_float() ? UOp::constant_f(u.dtype(), 0.0)
                                        : UOp::constant(u.dtype(), 0);
        };
        if (!base.is_null()) {
            // Load collapse: one vector load of consecutive elements.
            const DType pdt =
                ptr.dtype().base().vec(static_cast<uint16_t>(vn_)).ptr(ptr.dtype().addrspace);
            const UOp vidx = UOp::make(Op::Index, pdt, {ptr, base});
            if (gate.is_null()) return UOp::make(Op::Load, vdt, {vidx});
            const UOp g = got(gate, a);
            const UOp alt_v = broadcast(alt.is_null() ? zero() : got(alt, a));
            return UOp::make(Op::Load, vdt, {vidx, g, alt_v});
        }
        // Lanes a small constant stride apart in a buffer (a stride-2 pool's window rows): one
        // load of the span they cover, then every stride-th lane (a shuffle), where the span
        // provably lies inside the buffer. Lane by lane, a 16-lane row of a pool's taps was 16
        // scalar loads and inserts.
        // (Ungated loads only: a gate's and alt's expansions are not listed for a gather.)
        if (int64_t stride = 0; gate.is_null() && index.src(0).op() == Op::Param &&
                                !u.dtype().is_bool() && u.dtype().count == 1) {
            const UOp b0 = strided_base(idx, stride);
            const auto& pa = index.src(0).arg_as<std::vector<int64_t>>();
            const int64_t span = stride * vn_;
            if (!b0.is_null() && pa.size() >= 2 && b0.vmin() >= 0 && b0.vmax() + span <= pa[1] &&
                span <= 64) {
                const DType pdt =
                    ptr.dtype().base().vec(static_cast<uint16_t>(span)).ptr(ptr.dtype().addrspace);
                const UOp wide = UOp::make(Op::Load, u.dtype().vec(static_cast<uint16_t>(span)),
                                           {UOp::make(Op::Index, pdt, {ptr, b0})});
                std::vector<int64_t> picks;
                for (int64_t l = 0; l < vn_; ++l) picks.push_back(l * stride);
                return UOp::make(Op::Gep, vdt, {wide}, picks);
            }
        }
        // A gather: one scalar load per lane.
        const UOp& alt_s = p.alt_s;
        std::vector<UOp> lanes;
        for (int64_t l = 0; l < vn_; ++l) {
            const UOp li = UOp::make(Op::Index, index.dtype(), {ptr, lane(idx, l)});
            if (gate.is_null()) {
                lanes.push_back(UOp::make(Op::Load, u.dtype(), {li}));
                continue;
            }
            UOp al = alt_s.is_null() ? zero() : alt_s;
            if (!alt_s.is_null() && has_vax(al))
                al = UOp::make(Op::Gep, u.dtype(), {broadcast(got(alt, a))},
                               std::vector<int64_t>{l});
            lanes.push_back(UOp::make(Op::Load, u.dtype(), {li, lane(gate_s, l), al}));
        }
        return UOp::make(Op::Vectorize, vdt, lanes);
    }

    // What store() decides before it expands anything (needs() reads it too).
    struct StorePlan {
        bool vector = false;
        UOp idx, gate, base;
    };
    StorePlan store_plan(const UOp& u, const std::vector<int64_t>& a) {
        const UOp& index = u.src(0);
        StorePlan p;
        p.vector = ((deps(index) | deps(u.src(1))) & kV) != 0;
        if (!p.vector) return p;
        p.idx = subst_unrolled(index.src(1), a);
        p.gate = index.srcs().size() == 3 ? subst_unrolled(index.src(2), a) : UOp();
        const bool gate_uniform = p.gate.is_null() || !has_vax(p.gate);
        p.base = gate_uniform ? contiguous_base(p.idx) : UOp();
        return p;
    }

    UOp store(const UOp& u, const std::vector<int64_t>& a) {
        const UOp& index = u.src(0);
        const UOp ptr = got(index.src(0), a);
        const UOp value = got(u.src(1), a);
        const StorePlan p = store_plan(u, a);
        if (!p.vector) {
            std::vector<UOp> is{ptr};
            for (size_t i = 1; i < index.srcs().size(); ++i) is.push_back(got(index.src(i), a));
            return UOp::make(Op::Store, DType::Void,
                             {UOp::make(Op::Index, index.dtype(), is), value});
        }
        const UOp &idx = p.idx, &gate = p.gate, &base = p.base;
        if (!base.is_null()) {
            std::vector<UOp> is{ptr, base};
            if (!gate.is_null()) is.push_back(got(index.src(2), a));
            const DType pdt =
                ptr.dtype().base().vec(static_cast<uint16_t>(vn_)).ptr(ptr.dtype().addrspace);
            return UOp::make(Op::Store, DType::Void,
                             {UOp::make(Op::Index, pdt, is), broadcast(value)});
        }
        // Split store: one scalar store per lane.
        std::vector<UOp> stores;
        for (int64_t l = 0; l < vn_; ++l) {
            std::vector<UOp> is{ptr, lane(idx, l)};
            if (!gate.is_null()) is.push_back(lane(gate, l));
            const UOp v = value.dtype().count == 1 ? value
                                                   : UOp::make(Op::Gep, value.dtype().vec(1),
                                                               {value}, std::vector<int64_t>{l});
            stores.push_back(
                UOp::make(Op::Store, DType::Void, {UOp::make(Op::Index, index.dtype(), is), v}));
        }
        return UOp::make(Op::Group, DType::Void, stores);
    }

    // Every assignment of the unrolled ranges in `rs`, on top of `a`.
    std::vector<std::vector<int64_t>> assignments(const std::vector<UOp>& rs,
                                                  const std::vector<int64_t>& a) {
        std::vector<std::vector<int64_t>> out{a};
        for (const UOp& r : rs) {
            const size_t* p = pos_.find(r);
            if (p == nullptr) continue;
            std::vector<std::vector<int64_t>> next;
            for (const auto& x : out)
                for (int64_t v = 0; v < size_of(r); ++v) {
                    auto y = x;
                    y[*p] = v;
                    next.push_back(std::move(y));
                }
            out = std::move(next);
        }
        return out;
    }

    UOp reduce(const UOp& u, const std::vector<int64_t>& a) {
        const Op op = u.arg_as<Op>();
        std::vector<UOp> loops, expanded;
        bool over_v = false;
        for (size_t i = 1; i < u.srcs().size(); ++i) {
            const UOp& r = u.src(i);
            if (is_vax(r))
                over_v = true;
            else if (is_expanded(r))
                expanded.push_back(r);
            else
                loops.push_back(r);
        }
        // Unrolled copies combine first (a tree), then the loops accumulate.
        std::vector<UOp> vals;
        for (const auto& b : assignments(expanded, a)) vals.push_back(got(u.src(0), b));
        UOp t = combine(op, vals);
        if (over_v) t = broadcast(t);
        UOp r = t;
        if (!loops.empty()) {
            std::vector<UOp> srcs{t};
            srcs.insert(srcs.end(), loops.begin(), loops.end());
            r = UOp::make(Op::Reduce, t.dtype(), std::move(srcs), op);
        }
        if (!over_v) return r;
        // Horizontal reduction of the vector accumulator.
        std::vector<UOp> lanes;
        for (int64_t l = 0; l < vn_; ++l)
            lanes.push_back(UOp::make(Op::Gep, r.dtype().vec(1), {r}, std::vector<int64_t>{l}));
        return combine(op, lanes);
    }

    UOp end(const UOp& u) {
        std::vector<UOp> loops, expanded;
        for (size_t i = 1; i < u.srcs().size(); ++i) {
            const UOp& r = u.src(i);
            if (is_expanded(r)) {
                if (!is_vax(r)) expanded.push_back(r);
            } else {
                loops.push_back(r);
            }
        }
        std::vector<UOp> effects;
        const std::vector<int64_t> zero(unrolled_.size(), 0);
        for (const auto& b : assignments(expanded, zero)) effects.push_back(got(u.src(0), b));
        UOp body = effects.size() == 1 ? effects[0] : UOp::make(Op::Group, DType::Void, effects);
        if (loops.empty()) return body;
        std::vector<UOp> srcs{body};
        srcs.insert(srcs.end(), loops.begin(), loops.end());
        return UOp::make(Op::End, DType::Void, std::move(srcs));
    }

    int64_t vector_bytes_;
    std::vector<UOp> topo_;      // ast_.toposort()
    std::vector<UOp> folded_hi_; // fold_width's outer parts (unrolled, never lanes)
    UOp ast_, vaxis_;
    std::vector<UOp> vaxes_; // the vector axis first, then the others (more_vector_axes)
    int64_t vn_ = 1;
    std::vector<UOp> unrolled_;
    UOpMemo<size_t> pos_;
    UOpMemo<uint64_t> deps_;
    // The expansions by (node, projected assignment): those with no unrolled range set (every
    // one of a kernel with vector lanes only) in a flat table, the others hashed with theirs.
    UOpMemo<UOp> memo0_;
    std::unordered_map<Key, UOp, KeyHash> memo_;
    static bool all_zero(const std::vector<int64_t>& a) {
        return std::all_of(a.begin(), a.end(), [](int64_t v) { return v == 0; });
    }
    const UOp* memo_find(const UOp& u, const std::vector<int64_t>& a) const {
        if (all_zero(a)) return memo0_.find(u);
        auto it = memo_.find(Key{u.get(), a});
        return it == memo_.end() ? nullptr : &it->second;
    }
    void memo_put(const UOp& u, std::vector<int64_t> a, UOp v) {
        if (all_zero(a))
            memo0_.emplace(u, std::move(v));
        else
            memo_.emplace(Key{u.get(), std::move(a)}, std::move(v));
    }
};

} // namespace

UOp expand(const UOp& ast, int64_t vector_bytes) {
    std::vector<UOp> topo = ast.toposort();
    if (std::none_of(topo.begin(), topo.end(), [](const UOp& u) { return is_expanded(u); }))
        return ast;
    return Expander(ast, std::move(topo), vector_bytes).run();
}

// ---- THREAD lowering -----------------------------------------------------------------------

UOp lower_threads(const UOp& ast, int64_t& threads) {
    threads = 1;
    UOp t;
    for (const UOp& u : ast.toposort())
        if (u.op() == Op::Range && type_of(u) == AxisType::Thread) {
            if (!t.is_null()) fail("lower_threads", "more than one THREAD range in a kernel");
            t = u;
        }
    if (t.is_null()) return ast;
    threads = size_of(t);
    const UOp core = UOp::variable("core", 0, threads - 1);
    return replace_range(ast, t, core, {});
}

// ---- MULACC --------------------------------------------------------------------------------

UOp fuse_mulacc(const UOp& ast) {
    RewriteOptions o;
    o.bottom_up = true;
    return graph_rewrite(ast, mulacc_fusion(), {}, o);
}

} // namespace tempura::codegen
