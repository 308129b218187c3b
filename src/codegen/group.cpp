// Stage "group reduce" (GPU devices): a REDUCE whose ranges include a GROUP range (the threads of
// a block sharing the reduce) becomes each thread's partial reduce, stored to shared memory
// (DEFINE_LOCAL), a BARRIER, and the reduce of the partials, read back after the barrier.
#include <atomic>
#include <vector>

#include "ranges.hpp"
#include "tempura/codegen/stages.hpp"
#include "tempura/error.hpp"

namespace tempura::codegen {

namespace {

using detail::size_of;
using detail::type_of;

std::atomic<bool> g_keep_barrier{true};

} // namespace

void set_group_barrier_for_testing(bool keep) { g_keep_barrier.store(keep); }

UOp lower_group_reduces(const UOp& ast) {
    bool any = false;
    int64_t next_id = 0, next_local = 0;
    for (const UOp& u : ast.toposort()) {
        if (u.op() == Op::Range) {
            any = any || type_of(u) == AxisType::GroupReduce;
            next_id = std::max(next_id, u.arg_as<RangeArg>().axis_id + 1);
        }
    }
    if (!any) return ast;
    const bool barrier = g_keep_barrier.load();
    // An output range of symbolic size may stay a loop around the group (gpu dims gives it a
    // grid dim only when one is free and large enough): then the next iteration's partials must
    // wait until every thread has read this one's, a second barrier.
    // So must a grouped reduce nested in another reduce's loop (its partials are stored again
    // each iteration of the outer reduce).
    bool looped = false;
    for (const UOp& u : ast.toposort())
        looped = looped || (u.op() == Op::Range && type_of(u) != AxisType::Reduce &&
                            type_of(u) != AxisType::GroupReduce && !u.src(0).is_const());
    for (const UOp& v : detail::nested_reduces(ast))
        for (size_t i = 1; i < v.srcs().size(); ++i)
            looped = looped ||
                     (v.src(i).op() == Op::Range && type_of(v.src(i)) == AxisType::GroupReduce);
    return rebuild_graph(ast, [&](const UOp& u, std::vector<UOp> srcs) {
        if (u.op() != Op::Reduce) return with_srcs(u, std::move(srcs));
        UOp group;
        std::vector<UOp> rest{srcs[0]};
        for (size_t i = 1; i < srcs.size(); ++i) {
            if (srcs[i].op() == Op::Range && type_of(srcs[i]) == AxisType::GroupReduce)
                group = srcs[i];
            else
                rest.push_back(srcs[i]);
        }
        if (group.is_null()) return with_srcs(u, std::move(srcs));
        const DType dt = u.dtype();
        const int64_t g = size_of(group);
        // Each thread's share of the reduce.
        const UOp partial = rest.size() > 1
                                ? UOp::make(Op::Reduce, dt, std::move(rest), u.arg(), u.location())
                                : rest[0];
        const UOp buf = UOp::make(Op::DefineLocal, dt.ptr(AddrSpace::Local), {},
                                  std::vector<int64_t>{g, next_local++});
        const UOp put = UOp::make(Op::Store, DType::Void,
                                  {UOp::make(Op::Index, buf.dtype(), {buf, group}), partial});
        const UOp after = barrier ? UOp::make(Op::Barrier, DType::Void, {put}) : put;
        // Every thread reduces the g partials (the output store is gated to thread 0 by gpu
        // dims, since it does not use the group's range).
        const UOp k = detail::make_range(g, next_id++, AxisType::Reduce);
        const UOp read =
            UOp::make(Op::Load, dt,
                      {UOp::make(Op::Index, buf.dtype(),
                                 {UOp::make(Op::After, buf.dtype(), {buf, after}), k})});
        const UOp total = UOp::make(Op::Reduce, dt, {read, k}, u.arg(), u.location());
        if (!looped || !barrier) return total;
        return UOp::make(Op::After, dt, {total, UOp::make(Op::Barrier, DType::Void, {total})});
    });
}

} // namespace tempura::codegen
