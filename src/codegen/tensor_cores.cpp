// The TC opt: a matmul kernel of 16-bit float operands rebuilt around the warp-level tensor-core
// multiply-add WMMA (PTX mma.sync.m16n8k16, float32 or float16 accumulation). A warp of 32 threads
// (a LOCAL range) computes a 16 x 8 block of the output; each thread holds the fragments the PTX
// layout gives its lane (groupID = lane / 4, tid = lane % 4):
//   A (16 x 16, row): a_r at row groupID + 8 ((r >> 1) & 1), column 2 tid + (r & 1) + 8 (r >> 2)
//   B (16 x 8, col):  b_r at row 2 tid + (r & 1) + 8 (r >> 1), column groupID
//   C, D (16 x 8):    c_r at row groupID + 8 (r >> 1), column 2 tid + (r & 1)
// TC(0, tiles) gives each warp tm x tn such blocks (tiles = 16 tm + tn; 0 is 1 x 1): a
// k-step loads tm A fragments and tn B fragments and issues tm tn mma, each fragment serving
// tn (or tm) of them, and each block's accumulator is the mma's C operand.
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ranges.hpp"
#include "tempura/codegen/opts.hpp"
#include "tempura/error.hpp"
#include "tempura/pattern/predicate.hpp"
#include "tempura/symbolic/simplify.hpp"

namespace tempura::codegen {

namespace {

using detail::contains;
using detail::make_range;
using detail::replace_range;
using detail::size_of;
using detail::type_of;
using detail::with_gate;

UOp idx(int64_t v) { return UOp::index(v); }

// `u` with ranges replaced by values (in order).
UOp at(UOp u, const std::vector<std::pair<UOp, UOp>>& subs) {
    for (const auto& [r, v] : subs) u = replace_range(u, r, v, {});
    return u;
}

// Whether `load`'s index is contiguous along `k` (coefficient 1) and even where k is 0, so
// even wherever k is: then the two 16-bit elements at k and k + 1 (an even k) are one aligned
// 32-bit word, one load.
bool pairs_along(const UOp& load, const UOp& k) {
    const UOp& idx = load.src(0).src(1);
    return linear_coefficient(idx, k) == 1 &&
           pattern::is_multiple_of(simplify(replace_range(idx, k, UOp::index(0), {})), 2);
}

// Lanes 0 and 1 of one 2-element load of `load`'s buffer at `subs` (its first element).
std::pair<UOp, UOp> pair_load(const UOp& load, const std::vector<std::pair<UOp, UOp>>& subs,
                              const UOp& gate) {
    const UOp& index = load.src(0);
    const UOp& buf = index.src(0);
    const DType pdt = buf.dtype().base().vec(2).ptr(buf.dtype().addrspace);
    UOp vidx = UOp::make(Op::Index, pdt, {buf, at(index.src(1), subs)});
    if (!gate.is_null()) vidx = with_gate(vidx, gate);
    const UOp two = UOp::make(Op::Load, load.dtype().vec(2), {vidx});
    return {UOp::make(Op::Gep, load.dtype(), {two}, std::vector<int64_t>{0}),
            UOp::make(Op::Gep, load.dtype(), {two}, std::vector<int64_t>{1})};
}

} // namespace

UOp tensor_core_ast(const UOp& ast, const DeviceLimits& lim, int64_t& next_axis, int64_t tiles,
                    const std::string& what) {
    const int64_t tm = tiles == 0 ? 1 : tiles / 16, tn = tiles == 0 ? 1 : tiles % 16;
    const auto power_of_two = [](int64_t v) { return v >= 1 && v <= 8 && (v & (v - 1)) == 0; };
    if (tiles < 0 || !power_of_two(tm) || !power_of_two(tn))
        fail("opt", what + "the warp's tiles are 16 * rows + columns, each 1, 2, 4 or 8, got " +
                        std::to_string(tiles));
    if (!lim.gpu || lim.sm < 80)
        fail("opt", what + "the " + lim.name +
                        " device has no tensor cores (a GPU of sm_80 or "
                        "later has)");
    const std::string not_matmul =
        what + "the kernel is not a matmul of Float16 or BFloat16 operands (one sum over one "
               "axis of products of two 16-bit loads)";
    if (ast.op() != Op::Sink || ast.srcs().size() != 1 || ast.src(0).op() != Op::End)
        fail("opt", not_matmul);
    const UOp& end = ast.src(0);
    const UOp& store = end.src(0);
    if (store.op() != Op::Store) fail("opt", not_matmul);
    UOp red;
    for (const UOp& u : store.src(1).toposort())
        if (u.op() == Op::Reduce) {
            if (!red.is_null()) fail("opt", not_matmul);
            red = u;
        }
    if (red.is_null() || red.arg_as<Op>() != Op::Add || red.srcs().size() != 2 ||
        red.src(0).op() != Op::Mul)
        fail("opt", not_matmul);
    // The accumulator: float32 (products of the loads cast to float32), or Float16 (products of
    // the Float16 loads themselves: the mma's 16-bit accumulator; the hardware has no BFloat16
    // one).
    const DType acc_t = red.dtype();
    if (acc_t == DType::BFloat16)
        fail("opt", what + "tensor cores have no bfloat16 accumulator (a bfloat16 matmul "
                           "accumulates in float32 there)");
    if (acc_t != DType::Float32 && acc_t != DType::Float16) fail("opt", not_matmul);
    const UOp& k = red.src(1);
    UOp loads[2];
    for (size_t s = 0; s < 2; ++s) {
        const UOp& c = red.src(0).src(s);
        const UOp& l = acc_t == DType::Float32 && c.op() == Op::Cast ? c.src(0) : c;
        if (l.op() != Op::Load || !l.dtype().is_16bit_float() ||
            (acc_t == DType::Float16 && l.dtype() != acc_t))
            fail("opt", not_matmul);
        loads[s] = l;
    }
    const DType in = loads[0].dtype();
    if (loads[1].dtype() != in) fail("opt", not_matmul);
    if (!k.src(0).is_const() || type_of(k) != AxisType::Reduce) fail("opt", not_matmul);
    // The output axes: i in the left operand only (rows), j in the right one only (columns);
    // the others (a batch) stay as they are.
    // The innermost such axes are i and j (a batch axis of one operand only, further out, is
    // a batch like the others).
    UOp i, j;
    std::vector<UOp> batch;
    for (size_t e = 1; e < end.srcs().size(); ++e) {
        const UOp& r = end.src(e);
        if (r.op() != Op::Range) continue;
        if (type_of(r) != AxisType::Loop && type_of(r) != AxisType::Global)
            fail("opt", what + "TC comes first: the kernel has opts applied already");
        const bool in_a = contains(loads[0], r), in_b = contains(loads[1], r);
        UOp* slot = in_a && !in_b ? &i : in_b && !in_a ? &j : nullptr;
        if (slot == nullptr) {
            batch.push_back(r);
            continue;
        }
        if (!slot->is_null()) batch.push_back(*slot);
        *slot = r;
    }
    // A's rows must be the left operand: swap when the kernel reads them the other way.
    if (i.is_null() || j.is_null() || !contains(loads[0], k) || !contains(loads[1], k))
        fail("opt", not_matmul);
    if (!i.src(0).is_const() || !j.src(0).is_const()) fail("opt", not_matmul);
    // Sizes that are not multiples of a warp's rows (16 tm), columns (8 tn) and 16 are padded
    // up (PADTO): the fragments' loads past M, N or K read 0 (gated), and the stores past M or N
    // do not happen.
    const int64_t m = size_of(i), n = size_of(j), kk = size_of(k);
    const auto up = [](int64_t v, int64_t to) { return (v + to - 1) / to * to; };
    const int64_t mp = up(m, 16 * tm), np = up(n, 8 * tn), kp = up(kk, 16);

    const UOp it = make_range(mp / (16 * tm), i.arg_as<RangeArg>().axis_id, AxisType::Loop);
    const UOp jt = make_range(np / (8 * tn), j.arg_as<RangeArg>().axis_id, AxisType::Loop);
    const UOp kt = make_range(kp / 16, k.arg_as<RangeArg>().axis_id, AxisType::Reduce);
    // `load` at the given rows/columns, gated where they may lie in the padding.
    const auto gated = [](const UOp& load, const UOp& gate) {
        if (gate.is_null()) return load;
        return UOp::make(Op::Load, load.dtype(), {with_gate(load.src(0), gate)});
    };
    const auto inside = [](const UOp& v, int64_t size, int64_t padded) {
        return padded == size ? UOp() : v < idx(size);
    };
    const auto both = [](const UOp& p, const UOp& q) {
        return p.is_null() ? q : q.is_null() ? p : (p & q);
    };
    const UOp lane = make_range(32, next_axis++, AxisType::Local);
    const UOp grp = lane / idx(4), tid = lane % idx(4);
    // The first row and column of tile (ti, tj) of the warp's block.
    const auto row0 = [&](int64_t ti) { return it * idx(16 * tm) + idx(16 * ti); };
    const auto col0 = [&](int64_t tj) { return jt * idx(8 * tn) + idx(8 * tj); };

    // A fragment's registers hold k and k + 1 (an even k): where the operand is contiguous along
    // k (A row-major, B stored transposed), and K needs no padding, each is one 32-bit load.
    const bool a_pairs = kp == kk && pairs_along(loads[0], k);
    const bool b_pairs = kp == kk && pairs_along(loads[1], k);
    // One operand's fragment: `lanes` values of `load` at the row and column position(r) gives
    // lane r, each load gated where it may lie in the padding; with pairs, lanes r and r + 1
    // (r even) are one 2-element load (pairs need K unpadded, so a pair shares its gate).
    const auto fragment = [&](const UOp& load, bool pairs, int64_t lanes, const auto& position) {
        std::vector<UOp> v;
        for (int64_t r = 0; r < lanes; r += pairs ? 2 : 1) {
            const auto [subs, gate] = position(r);
            if (pairs) {
                const auto [lo, hi] = pair_load(load, subs, gate);
                v.push_back(lo);
                v.push_back(hi);
            } else {
                v.push_back(gated(at(load, subs), gate));
            }
        }
        return UOp::make(Op::Vectorize, in.vec(static_cast<uint16_t>(lanes)), v);
    };
    using Position = std::pair<std::vector<std::pair<UOp, UOp>>, UOp>;
    std::vector<UOp> afrag, bfrag;
    for (int64_t ti = 0; ti < tm; ++ti)
        afrag.push_back(fragment(loads[0], a_pairs, 8, [&](int64_t r) {
            const UOp row = row0(ti) + grp + idx(8 * ((r >> 1) & 1));
            const UOp col = kt * idx(16) + tid * idx(2) + idx((r & 1) + 8 * (r >> 2));
            return Position{{{i, row}, {k, col}}, both(inside(row, m, mp), inside(col, kk, kp))};
        }));
    for (int64_t tj = 0; tj < tn; ++tj)
        bfrag.push_back(fragment(loads[1], b_pairs, 4, [&](int64_t r) {
            const UOp row = kt * idx(16) + tid * idx(2) + idx((r & 1) + 8 * (r >> 1));
            const UOp col = col0(tj) + grp;
            return Position{{{k, row}, {j, col}}, both(inside(row, kk, kp), inside(col, n, np))};
        }));
    const UOp zero = UOp::constant_f(acc_t.vec(4), 0.0);
    std::unordered_set<const UOpNode*> in_reduce;
    for (const UOp& u : red.toposort()) in_reduce.insert(u.get());
    std::vector<UOp> stores;
    for (int64_t ti = 0; ti < tm; ++ti)
        for (int64_t tj = 0; tj < tn; ++tj) {
            const UOp mma =
                UOp::make(Op::Wmma, acc_t.vec(4),
                          {afrag[static_cast<size_t>(ti)], bfrag[static_cast<size_t>(tj)], zero},
                          std::vector<int64_t>{16, 8, 16});
            const UOp acc = UOp::make(Op::Reduce, acc_t.vec(4), {mma, kt}, red.arg());
            for (int64_t c = 0; c < 4; ++c) {
                const UOp row = row0(ti) + grp + idx(8 * (c >> 1));
                const UOp col = col0(tj) + tid * idx(2) + idx(c & 1);
                const UOp lane_value = UOp::make(Op::Gep, acc_t, {acc}, std::vector<int64_t>{c});
                std::unordered_map<const UOpNode*, UOp> swap{{red.get(), lane_value}};
                UOp index = at(store.src(0), {{i, row}, {j, col}});
                UOp epilogue = store.src(1);
                const UOp g = both(inside(row, m, mp), inside(col, n, np));
                if (!g.is_null()) {
                    // The epilogue's own loads (a bias, a residual) at padded positions read
                    // nothing: the value is computed before the store's IF. (Not the fragments'
                    // loads inside the reduce: the warp shares them.)
                    epilogue = rebuild_graph(epilogue, [&](const UOp& u, std::vector<UOp> srcs) {
                        if (in_reduce.count(u.get()) != 0) return u;
                        if (u.op() != Op::Load || srcs[0].op() != Op::Index)
                            return with_srcs(u, std::move(srcs));
                        srcs[0] = with_gate(srcs[0], g);
                        return with_srcs(u, std::move(srcs));
                    });
                    index = with_gate(index, g);
                }
                const UOp value = at(epilogue.substitute(swap), {{i, row}, {j, col}});
                stores.push_back(UOp::make(Op::Store, DType::Void, {index, value}));
            }
        }
    std::vector<UOp> end_srcs{UOp::make(Op::Group, DType::Void, stores)};
    end_srcs.insert(end_srcs.end(), batch.begin(), batch.end());
    end_srcs.insert(end_srcs.end(), {it, jt, lane});
    return UOp::sink({UOp::make(Op::End, DType::Void, end_srcs)});
}

} // namespace tempura::codegen
