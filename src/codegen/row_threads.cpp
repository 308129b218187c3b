// Row threads: see row_threads.hpp.
#include "codegen/row_threads.hpp"

#include <algorithm>
#include <numeric>
#include <utility>
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
    UOp end;               // the kernel's one END
    UOp j;                 // the innermost output range
    std::vector<UOp> reds; // the reduce ranges
    int64_t threads = 1;
};

// The plan for a row-fused kernel (row_fused_plan) with one END (a store over plain loops) and
// every REDUCE over one constant reduce range. threads = 1 when it is none.
Plan plan(const UOp& ast, const DeviceLimits& lim) {
    Plan p;
    UOp end;
    bool has_reds = false;
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
                has_reds = true;
            else if (type_of(u) != AxisType::Loop)
                return {};
            break;
        case Op::Wmma:
        case Op::DefineLocal:
        case Op::Barrier: return {};
        default: break;
        }
    }
    if (end.is_null() || !has_reds || end.srcs().size() < 2 || end.src(0).op() != Op::Store)
        return {};
    const UOp j = end.srcs().back();
    if (j.op() != Op::Range || !contains(end.src(0).src(0), j)) return {};
    // (Every range constant and a loop or a reduce: row_fused_plan's j is the END's last range,
    // its reds every reduce range.)
    RowFusedPlan rp = row_fused_plan(ast);
    if (rp.j.is_null() || !rp.j.same(j)) return {};
    // A reduce nested in another's loop cannot share t with the outer one: its group reduce over
    // t would mix the outer range's values (a = a' T + t) with its own.
    if (!detail::nested_reduces(ast).empty()) return {};
    p.end = end;
    p.j = std::move(rp.j);
    p.reds = std::move(rp.reds);
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

RowFusedPlan row_fused_plan(const UOp& ast) {
    const auto splittable = [](const UOp& r) {
        return !detail::is_expanded_type(type_of(r)) && r.src(0).is_const();
    };
    UOp end;
    for (const UOp& s : ast.srcs())
        if (s.op() == Op::End) {
            end = s;
            break;
        }
    if (end.is_null()) return {};
    std::vector<UOp> outs;
    for (size_t i = 1; i < end.srcs().size(); ++i)
        if (splittable(end.src(i))) outs.push_back(end.src(i));
    if (outs.empty()) return {};
    RowFusedPlan p;
    p.j = outs.back();
    const std::vector<UOp> topo = ast.toposort();
    for (const UOp& u : topo)
        if (u.op() == Op::Reduce)
            for (size_t i = 1; i < u.srcs().size(); ++i) {
                const UOp& r = u.src(i);
                const auto same = [&](const UOp& a) { return a.same(r); };
                if (splittable(r) && std::none_of(outs.begin(), outs.end(), same) &&
                    std::none_of(p.reds.begin(), p.reds.end(), same))
                    p.reds.push_back(r);
            }
    if (p.reds.empty()) return {};
    for (const UOp& u : topo)
        if (u.op() == Op::Reduce && contains(u.src(0), p.j)) return {};
    for (const UOp& l : topo) {
        if (l.op() != Op::Load || !contains(l.src(0), p.j)) continue;
        for (const UOp& r : p.reds)
            if (contains(l.src(0), r)) return {};
    }
    return p;
}

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
    // The grid is the rows: the END's other output ranges become Global, which keeps j' a loop
    // in the block (gpu dims gives Loop ranges grid dims only where no range is Global). A grid
    // dim for j' made each of its blocks compute the row's reduces again (softmax over rows of
    // 4096 on an H200: 16 blocks a row, 0.019x the copy bandwidth).
    for (size_t i = 1; i < p.end.srcs().size(); ++i) {
        const UOp& r = p.end.src(i);
        if (r.op() != Op::Range || r.same(p.j) || type_of(r) != AxisType::Loop) continue;
        const UOp g = make_range(size_of(r), r.arg_as<RangeArg>().axis_id, AxisType::Global);
        out = replace_range(out, r, g, {g});
    }
    // j = j' T + t: the END keeps j', a loop (t is a thread index, laid out by gpu dims).
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
