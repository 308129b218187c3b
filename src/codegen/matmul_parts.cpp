#include "matmul_parts.hpp"

#include <algorithm>
#include <unordered_map>

#include "ranges.hpp"
#include "tempura/error.hpp"
#include "tempura/pattern/predicate.hpp"
#include "tempura/symbolic/simplify.hpp"

namespace tempura::codegen::detail {

bool runs_along(const UOp& access, const UOp& r, int64_t v, bool ungated) {
    const UOp& index = access.src(0);
    if (ungated && index.srcs().size() != 2) return false;
    return linear_coefficient(index.src(1), r) == 1 &&
           pattern::is_multiple_of(simplify(replace_range(index.src(1), r, idx(0), {})), v);
}

int64_t vector_width(const UOp& load, const UOp& along, int64_t size, int64_t padded, int64_t run,
                     int64_t max_vec, bool ungated) {
    for (int64_t v = max_vec; v >= 2; v /= 2)
        if (run % v == 0 && size % v == 0 && (padded - size) % v == 0 &&
            runs_along(load, along, v, ungated))
            return v;
    return int64_t{1};
}

UOp at(UOp u, const Subs& subs) {
    for (const auto& [r, v] : subs) u = replace_range(u, r, v, {});
    return u;
}

UOp vector_index(const UOp& access, int64_t v, const Subs& subs, const UOp& gate) {
    const UOp& index = access.src(0);
    const UOp& buf = index.src(0);
    const DType pdt = buf.dtype().base().vec(static_cast<uint16_t>(v)).ptr(buf.dtype().addrspace);
    const UOp vidx = UOp::make(Op::Index, pdt, {buf, at(index.src(1), subs)});
    return gate.is_null() ? vidx : with_gate(vidx, gate);
}

UOp both(const UOp& p, const UOp& q) { return p.is_null() ? q : q.is_null() ? p : (p & q); }

UOp inside(const UOp& v, int64_t size, int64_t padded) {
    return padded == size ? UOp() : v < UOp::index(size);
}

Matmul find_matmul_reduce(const UOp& ast, const std::string& not_matmul) {
    Matmul mm;
    if (ast.op() != Op::Sink || ast.srcs().size() != 1 || ast.src(0).op() != Op::End)
        fail("opt", not_matmul);
    mm.end = ast.src(0);
    mm.store = mm.end.src(0);
    if (mm.store.op() != Op::Store) fail("opt", not_matmul);
    for (const UOp& u : mm.store.src(1).toposort())
        if (u.op() == Op::Reduce) {
            if (!mm.red.is_null()) fail("opt", not_matmul);
            mm.red = u;
        }
    if (mm.red.is_null() || mm.red.arg_as<Op>() != Op::Add || mm.red.srcs().size() != 2 ||
        mm.red.src(0).op() != Op::Mul)
        fail("opt", not_matmul);
    mm.k = mm.red.src(1);
    return mm;
}

void find_matmul_axes(Matmul& mm, const std::string& opt, const std::string& what,
                      const std::string& not_matmul) {
    const UOp& k = mm.k;
    if (k.op() != Op::Range || !k.src(0).is_const() || type_of(k) != AxisType::Reduce)
        fail("opt", not_matmul);
    // The innermost axes in one operand only are i and j (a batch axis of one operand only,
    // further out, is a batch like the others).
    for (size_t e = 1; e < mm.end.srcs().size(); ++e) {
        const UOp& r = mm.end.src(e);
        if (r.op() != Op::Range) continue;
        if (type_of(r) != AxisType::Loop && type_of(r) != AxisType::Global)
            fail("opt", what + opt + " comes first: the kernel has opts applied already");
        const bool in_a = contains(mm.loads[0], r), in_b = contains(mm.loads[1], r);
        UOp* slot = in_a && !in_b ? &mm.i : in_b && !in_a ? &mm.j : nullptr;
        if (slot == nullptr) {
            mm.batch.push_back(r);
            continue;
        }
        if (!slot->is_null()) mm.batch.push_back(*slot);
        *slot = r;
    }
    if (mm.i.is_null() || mm.j.is_null() || !contains(mm.loads[0], k) ||
        !contains(mm.loads[1], k) || !mm.i.src(0).is_const() || !mm.j.src(0).is_const())
        fail("opt", not_matmul);
}

void check_block_threads(const DeviceLimits& lim, int64_t threads, const std::string& what) {
    if (threads > lim.max_threads_per_block)
        fail("opt", what + std::to_string(threads) + " threads a block exceed the " + lim.name +
                        " device's " + std::to_string(lim.max_threads_per_block));
}

void check_block_shared(const DeviceLimits& lim, int64_t shared, const std::string& what) {
    if (shared > lim.shared_bytes)
        fail("opt", what + "the staged tiles need " + std::to_string(shared) +
                        " bytes of shared memory, over the " + lim.name + " device's " +
                        std::to_string(lim.shared_bytes));
}

StagedCopies staged_copies(int64_t pipe, int64_t lead, int64_t steps, const UOp& kt,
                           const std::vector<UOp>& batch, const UOp smem[2], const CopyFn& copy) {
    // Both operands' copies of k-step `step`, A's first.
    const auto copies = [&](const UOp& step, const auto& dst, const UOp& skip, bool async) {
        std::vector<UOp> x = copy(0, step, dst(smem[0]), skip, async);
        const std::vector<UOp> y = copy(1, step, dst(smem[1]), skip, async);
        x.insert(x.end(), y.begin(), y.end());
        return x;
    };
    StagedCopies out;
    if (pipe == 0) {
        // Two tiles taken in turn (k-step t in tile t % 2) make one barrier a k-step enough: a
        // thread past step t's barrier has finished its reads of step t - 1, and every thread is
        // past step t - 1's when any writes tile t % 2 again, in step t + 2.
        out.barrier = UOp::make(Op::Barrier, DType::Void,
                                copies(
                                    kt, [](const UOp& s) { return s; }, UOp(), false));
        return out;
    }
    // The prologue's tiles, a group each (an ASYNC_WAIT that waits for nothing commits one; the
    // next tile's copies follow it), the last one committed by the loop's first wait. Then k-step
    // t's wait retires the groups of tiles 0 .. t exactly.
    const int64_t ready = std::min(lead, steps); // tiles the prologue copies
    UOp commit;
    std::vector<UOp> last;
    for (int64_t s = 0; s < ready; ++s) {
        // Tied to the batch ranges too: an operand the batch does not index (a shared weight)
        // must still be copied again in each trip of a batch loop.
        std::vector<UOp> ties = batch;
        if (!commit.is_null()) ties.push_back(commit);
        const auto dst = [&](const UOp& sm) {
            if (ties.empty()) return sm;
            std::vector<UOp> deps(1, sm);
            deps.insert(deps.end(), ties.begin(), ties.end());
            return UOp::make(Op::After, sm.dtype(), std::move(deps));
        };
        last = copies(UOp::index(s), dst, UOp(), true);
        if (s + 1 < ready)
            commit = UOp::make(Op::AsyncWait, DType::Void, last, std::vector<int64_t>{pipe});
    }
    last.push_back(kt);
    const UOp wait = UOp::make(Op::AsyncWait, DType::Void, last, std::vector<int64_t>{ready - 1});
    out.barrier = UOp::make(Op::Barrier, DType::Void, {wait});
    const UOp ahead = kt + UOp::index(lead);
    const UOp skip = steps > lead ? ahead < UOp::index(steps) : UOp::constant(DType::Bool, 0);
    const UOp barrier = out.barrier;
    out.in_flight = copies(
        ahead,
        [&](const UOp& sm) {
            return UOp::make(Op::After, sm.dtype(), {sm, barrier});
        },
        skip, true);
    return out;
}

UOp read_after(const UOp& smem, const StagedCopies& copies) {
    std::vector<UOp> deps{smem, copies.barrier};
    deps.insert(deps.end(), copies.in_flight.begin(), copies.in_flight.end());
    return UOp::make(Op::After, smem.dtype(), std::move(deps));
}

void barrier_after_batch_loop(std::vector<UOp>& accs, const std::vector<UOp>& batch) {
    const bool looped =
        std::any_of(batch.begin(), batch.end(), [](const UOp& r) { return !r.src(0).is_const(); });
    if (!looped) return;
    const UOp done = UOp::make(Op::Barrier, DType::Void, accs);
    for (UOp& a : accs) a = UOp::make(Op::After, a.dtype(), {a, done});
}

UOp gate_epilogue(const UOp& epilogue, const std::unordered_set<const UOpNode*>& in_reduce,
                  const UOp& gate) {
    if (gate.is_null()) return epilogue;
    return rebuild_graph(epilogue, [&](const UOp& u, std::vector<UOp> srcs) {
        if (in_reduce.count(u.get()) != 0) return u;
        if (u.op() != Op::Load || srcs[0].op() != Op::Index) return with_srcs(u, std::move(srcs));
        srcs[0] = with_gate(srcs[0], gate);
        return with_srcs(u, std::move(srcs));
    });
}

UOp epilogue_at(const Matmul& mm, const UOp& epilogue, const UOp& acc, const UOp& row,
                const UOp& col) {
    std::unordered_map<const UOpNode*, UOp> swap{{mm.red.get(), acc}};
    return at(epilogue.substitute(swap), {{mm.i, row}, {mm.j, col}});
}

UOp store_at(const Matmul& mm, const UOp& row, const UOp& col, const UOp& gate,
             const std::vector<UOp>& values) {
    if (values.size() > 1) {
        const auto v = static_cast<uint16_t>(values.size());
        return UOp::make(Op::Store, DType::Void,
                         {vector_index(mm.store, v, {{mm.i, row}, {mm.j, col}}, gate),
                          UOp::make(Op::Vectorize, mm.store.src(1).dtype().vec(v), values)});
    }
    UOp index = at(mm.store.src(0), {{mm.i, row}, {mm.j, col}});
    if (!gate.is_null()) index = with_gate(index, gate);
    return UOp::make(Op::Store, DType::Void, {index, values[0]});
}

} // namespace tempura::codegen::detail
