// Row fusion: see row_fusion.hpp.
#include "schedule/row_fusion.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include "tempura/ir/ops.hpp"

namespace tempura::row_fusion {

namespace {

// The reduced axes of a reduce that have a size above 1 in its input.
std::vector<int64_t> real_axes(const UOp& reduce) {
    std::vector<int64_t> out;
    const Shape& in = reduce.src(0).shape();
    for (int64_t a : reduce.arg_as<ReduceArg>().axes)
        if (in[static_cast<size_t>(a)] != 1) out.push_back(a);
    return out;
}

Shape reduced_shape(Shape full, const std::vector<int64_t>& axes) {
    for (int64_t a : axes) full[static_cast<size_t>(a)] = 1;
    return full;
}

bool elementwise(const UOp& n) { return is_alu(n.op()) || n.op() == Op::Contiguous; }

} // namespace

int Walker::intern(Context c) {
    for (size_t i = 0; i < contexts_.size(); ++i) {
        const Context& o = contexts_[i];
        if (o.full == c.full && o.axes == c.axes && o.output == c.output && o.bcast == c.bcast)
            return static_cast<int>(i);
    }
    contexts_.push_back(std::move(c));
    return static_cast<int>(contexts_.size() - 1);
}

std::vector<int64_t> Walker::grown(const UOp& expand) {
    std::vector<int64_t> g;
    const Shape& in = expand.src(0).shape();
    const Shape& out = expand.shape();
    for (size_t d = 0; d < in.size() && d < out.size(); ++d)
        if (in[d] == 1 && out[d] != 1) g.push_back(static_cast<int64_t>(d));
    return g;
}

State Walker::root(const UOp& k) {
    if (!k.has_shape()) return {};
    if (k.op() == Op::ReduceAxis) {
        const std::vector<int64_t> axes = real_axes(k);
        if (axes.empty() || !k.src(0).has_shape()) return {};
        return {intern({k.src(0).shape(), axes, false, false}), false};
    }
    return {intern({k.shape(), {}, true, false}), false};
}

std::vector<int64_t> Walker::grown_row_axes(const UOp& n, const State& s) const {
    if (s.ctx < 0 || n.op() != Op::Expand) return {};
    const Context& c = contexts_[static_cast<size_t>(s.ctx)];
    if (c.bcast || n.shape() != c.full) return {};
    std::vector<int64_t> g = grown(n);
    if (g.empty()) return {};
    if (c.output) {
        // The grown axes must be the row's innermost ones of size above 1: the reduce's value
        // then uses only the outer output loops, and is computed once per row.
        for (size_t d = 0; d < c.full.size(); ++d)
            if (c.full[d] != 1 &&
                std::find(g.begin(), g.end(), static_cast<int64_t>(d)) == g.end() &&
                static_cast<int64_t>(d) > g.front())
                return {};
        return g;
    }
    return g == c.axes ? g : std::vector<int64_t>{};
}

bool Walker::row_broadcast(const UOp& n, const State& s) const {
    return !grown_row_axes(n, s).empty();
}

bool Walker::fused(const UOp& n, const State& s) const {
    if (s.ctx < 0 || n.op() != Op::ReduceAxis || !n.src(0).has_shape()) return false;
    const Context& c = contexts_[static_cast<size_t>(s.ctx)];
    return c.bcast && n.src(0).shape() == c.full && real_axes(n) == c.axes;
}

State Walker::next(const UOp& n, const State& s) {
    if (fused(n, s)) {
        const Context c = contexts_[static_cast<size_t>(s.ctx)];
        return {intern({c.full, c.axes, false, false}), true};
    }
    // A reduce inlined here (a loss's sum over log_softmax's rows) starts its input's row.
    if (n.op() == Op::ReduceAxis) {
        const State r = root(n);
        return {r.ctx, s.under};
    }
    if (s.ctx < 0) return {-1, s.under};
    const Context c = contexts_[static_cast<size_t>(s.ctx)];
    if (!c.bcast) {
        if (elementwise(n) && n.has_shape() && n.shape() == c.full) return s;
        if (const std::vector<int64_t> g = grown_row_axes(n, s); !g.empty())
            return {intern({c.full, g, false, true}), s.under};
        return {-1, s.under};
    }
    if (elementwise(n) && n.has_shape() && n.shape() == reduced_shape(c.full, c.axes)) return s;
    return {-1, s.under};
}

bool fuses_row(const UOp& v) {
    if (!is_alu(v.op()) || !v.has_shape()) return false;
    Walker w;
    std::vector<std::pair<UOp, State>> stack{{v, w.root(v)}};
    std::set<std::pair<const UOpNode*, int>> seen;
    while (!stack.empty()) {
        auto [n, s] = stack.back();
        stack.pop_back();
        if (s.ctx < 0) continue;
        const std::pair<const UOpNode*, int> key{n.get(), s.ctx};
        if (!seen.insert(key).second) continue;
        if (w.fused(n, s)) return true;
        if (seen.size() > 4096) return false; // (bounded: a graph this wide is left as it is)
        const State below = w.next(n, s);
        for (const UOp& src : n.srcs()) stack.emplace_back(src, below);
    }
    return false;
}

} // namespace tempura::row_fusion
