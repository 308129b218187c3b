// Row threads: see row_threads.hpp.
#include "codegen/row_threads.hpp"

#include <numeric>
#include <vector>

#include "codegen/ranges.hpp"

namespace tempura::codegen {

namespace {

using detail::contains;
using detail::make_range;
using detail::replace_range;
using detail::size_of;
using detail::type_of;

struct Plan {
    UOp j;                 // the innermost output range
    std::vector<UOp> reds; // the reduce ranges
    int64_t threads = 1;
};

// The plan for a row-fused kernel: one END (a store over plain loops), every REDUCE over one
// constant reduce range, and no load that uses the innermost output range together with a
// reduce range. threads = 1 when it is none.
Plan plan(const UOp& ast, const DeviceLimits& lim) {
    Plan p;
    UOp end;
    std::vector<UOp> loads;
    for (const UOp& u : ast.toposort()) {
        switch (u.op()) {
        case Op::End:
            if (!end.is_null()) return {};
            end = u;
            break;
        case Op::Reduce:
            if (u.srcs().size() != 2) return {};
            break;
        case Op::Range:
            if (!u.src(0).is_const()) return {};
            if (type_of(u) == AxisType::Reduce)
                p.reds.push_back(u);
            else if (type_of(u) != AxisType::Loop)
                return {};
            break;
        case Op::Load: loads.push_back(u); break;
        case Op::Wmma:
        case Op::DefineLocal:
        case Op::Barrier: return {};
        default: break;
        }
    }
    if (end.is_null() || p.reds.empty() || end.srcs().size() < 2 || end.src(0).op() != Op::Store)
        return {};
    p.j = end.srcs().back();
    if (p.j.op() != Op::Range || !contains(end.src(0).src(0), p.j)) return {};
    // No reduce's value uses j (a reduce computed once a row, not once an output), and no load
    // j together with a reduce range.
    for (const UOp& u : ast.toposort())
        if (u.op() == Op::Reduce && contains(u.src(0), p.j)) return {};
    for (const UOp& l : loads) {
        if (!contains(l.src(0), p.j)) continue;
        for (const UOp& r : p.reds)
            if (contains(l.src(0), r)) return {};
    }
    // The threads: the largest divisor of every size within the block limit (256 at most).
    int64_t g = size_of(p.j);
    for (const UOp& r : p.reds) g = std::gcd(g, size_of(r));
    const int64_t most = std::min<int64_t>(256, lim.max_threads_per_block);
    for (int64_t t = std::min(g, most); t >= 2; --t)
        if (g % t == 0) {
            p.threads = t;
            break;
        }
    return p;
}

} // namespace

bool row_threads_apply(const UOp& ast, const DeviceLimits& limits) {
    return limits.gpu && limits.has_shared && plan(ast, limits).threads > 1;
}

UOp row_threads(const UOp& ast, const DeviceLimits& limits) {
    if (!limits.gpu || !limits.has_shared) return ast;
    const Plan p = plan(ast, limits);
    if (p.threads <= 1) return ast;
    const int64_t t_n = p.threads;
    const UOp t = make_range(t_n, detail::next_axis_id(ast), AxisType::GroupReduce);
    UOp out = ast;
    // j = j' T + t: the END keeps j' (t is a thread index, laid out by gpu dims).
    const int64_t nj = size_of(p.j);
    if (nj == t_n) {
        out = replace_range(out, p.j, t, {});
    } else {
        const UOp rest = make_range(nj / t_n, p.j.arg_as<RangeArg>().axis_id, AxisType::Loop);
        out = replace_range(out, p.j, rest * UOp::index(t_n) + t, {rest});
    }
    // r = r' T + t, the REDUCE over r' and t: each thread's partial, then the group's total.
    for (const UOp& r : p.reds) {
        const int64_t n = size_of(r);
        if (n == t_n) {
            out = replace_range(out, r, t, {t});
            continue;
        }
        const UOp rest = make_range(n / t_n, r.arg_as<RangeArg>().axis_id, AxisType::Reduce);
        out = replace_range(out, r, rest * UOp::index(t_n) + t, {rest, t});
    }
    return out;
}

} // namespace tempura::codegen
