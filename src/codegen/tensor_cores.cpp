// The TC opt: a matmul kernel of 16-bit float operands rebuilt around the warp-level tensor-core
// multiply-add WMMA (PTX mma.sync.m16n8k16, float32 or float16 accumulation). A warp of 32 threads
// (a LOCAL range) computes a 16 x 8 block of the output; each thread holds the fragments the PTX
// layout gives its lane (groupID = lane / 4, tid = lane % 4):
//   A (16 x 16, row): a_r at row groupID + 8 ((r >> 1) & 1), column 2 tid + (r & 1) + 8 (r >> 2)
//   B (16 x 8, col):  b_r at row 2 tid + (r & 1) + 8 (r >> 1), column groupID
//   C, D (16 x 8):    c_r at row groupID + 8 (r >> 1), column 2 tid + (r & 1)
// TC(0, tiles) gives each warp tm x tn such blocks (tiles = 16 tm + tn; 0 is 1 x 1): a
// k-step loads tm A fragments and tn B fragments and issues tm tn mma, each fragment serving
// tn (or tm) of them, and each block's accumulator is the mma's C operand. The warps read their
// fragments from global memory.
// TC(stage, tiles), stage = 1000 p + 100 ks + 10 wm + wn (TcStage): a block of wm x wn warps
// copies k-steps of 16 ks of A and B into shared memory, through registers into two tiles taken
// in turn (p = 0) or by a cp.async pipeline of p tiles, and each warp reads every fragment there
// with one ldmatrix (the staged branch below says how the steps are ordered).
// TC(10000 + stage, n) (Hopper, sm_90): a block of wm x wn warpgroups (4 warps, 128 threads),
// each computing 64 x n outputs with WGMMA (wgmma.mma_async.m64nNk16), which reads both operands
// from shared memory itself. The tiles are then stored in the 128-byte swizzle the hardware
// reads: k-steps of 64, the 16-byte unit u of row r of a tile (128 bytes) at unit u ^ (r % 8).
// A tile running along K (K-major) holds rows of the operand's outer axis (M or N), one row of
// 64 k a row of the tile; a tile running along M or N (MN-major) holds 64-column atoms of 64
// rows of k each, atom after atom. Each warpgroup's accumulator thread t (warp q = t / 32,
// lane l = t % 32) holds register r at row 16 q + l / 4 + 8 ((r >> 1) & 1) and column
// 8 (r >> 2) + 2 (l % 4) + (r & 1), as n / 8 blocks of the mma layout above. Each k-step's
// WGMMA waits for its mma, or (TC(20000 + stage, n)) only for the previous k-step's, keeping its
// own in flight, reading its tile, until the next k-step's; the copies then run pipe - 2 k-steps
// ahead (into the tile whose mma was waited for before the barrier), and a WGMMA_WAIT after the
// loop waits for the last.
#include <algorithm>
#include <atomic>
#include <string>
#include <unordered_set>
#include <vector>

#include "matmul_parts.hpp"
#include "ranges.hpp"
#include "tempura/codegen/opts.hpp"
#include "tempura/error.hpp"
#include "tempura/symbolic/simplify.hpp"

namespace tempura::codegen {

using namespace detail; // ranges.hpp, matmul_parts.hpp

namespace {

std::atomic<bool> g_single_buffer{false};
std::atomic<bool> g_full_lead{false};

// The two 16-bit elements at k and k + 1 (an even k) are one aligned 32-bit word, one load.
bool pairs_along(const UOp& load, const UOp& k) {
    return runs_along(load, k, 2, /*ungated=*/false);
}

// Lanes 0 and 1 of one 2-element load of `load`'s buffer at `subs` (its first element).
std::pair<UOp, UOp> pair_load(const UOp& load, const Subs& subs, const UOp& gate) {
    const UOp two = UOp::make(Op::Load, load.dtype().vec(2), {vector_index(load, 2, subs, gate)});
    return {UOp::make(Op::Gep, load.dtype(), {two}, std::vector<int64_t>{0}),
            UOp::make(Op::Gep, load.dtype(), {two}, std::vector<int64_t>{1})};
}

} // namespace

void set_tc_single_buffer_for_testing(bool single) { g_single_buffer.store(single); }
void set_tc_full_lead_for_testing(bool full) { g_full_lead.store(full); }

UOp tensor_core_ast(const UOp& ast, const DeviceLimits& lim, int64_t& next_axis, int64_t stage,
                    int64_t tiles, const std::string& what) {
    // 0: fragments read from global memory, one warp a block (LOCAL may add more); else the
    // operands staged through shared memory (TcStage).
    const bool staged = stage != 0;
    const TcStage st = staged ? TcStage::decode(stage) : TcStage{0, 1, 1, 1};
    const int64_t pipe = st.pipe, ks = st.ks, wm = st.wm, wn = st.wn;
    const bool wg = st.wg != 0, inflight = st.wg == 2;
    // A warpgroup's 64 x n outputs are, thread by thread, 1 x n / 8 blocks of 16 x 8 (in
    // each warp's rows).
    int64_t tm = 1, tn = wg ? tiles / 8 : 1;
    if (!wg && tiles != 0) {
        tm = tiles / 16;
        tn = tiles % 16;
    }
    const auto power_of_two = [](int64_t v, int64_t most) {
        return v >= 1 && v <= most && (v & (v - 1)) == 0;
    };
    if (!wg && (tiles < 0 || !power_of_two(tm, 8) || !power_of_two(tn, 8)))
        fail("opt", what + "the warp's tiles are 16 * rows + columns, each 1, 2, 4 or 8, got " +
                        std::to_string(tiles));
    if (staged && (!st.valid() || stage < 0 || stage >= 30000))
        fail("opt", what +
                        "the staging is 0 or 1000 * pipeline tiles (0, 2, 3 or 4) + 100 * "
                        "k-steps + 10 * row warps + column warps (each 1, 2 or 4), or 10000 + "
                        "that for warpgroups (k-steps 4), 20000 + that for warpgroups keeping an "
                        "mma in flight (pipelines of 3 or 4), got " +
                        std::to_string(stage));
    if (wg && tiles != 64 && tiles != 128 && tiles != 256)
        fail("opt",
             what + "a warpgroup's columns are 64, 128 or 256, got " + std::to_string(tiles));
    if (!lim.gpu || lim.sm < 80)
        fail("opt", what + "the " + lim.name +
                        " device has no tensor cores (a GPU of sm_80 or "
                        "later has)");
    if (wg && lim.sm < 90)
        fail("opt", what + "the " + lim.name + " device (sm_" + std::to_string(lim.sm) +
                        ") has no warpgroup mma (wgmma: sm_90)");
    const std::string not_matmul =
        what + "the kernel is not a matmul of Float16 or BFloat16 operands (one sum over one "
               "axis of products of two 16-bit loads)";
    detail::Matmul mm = detail::find_matmul_reduce(ast, not_matmul);
    const UOp &store = mm.store, &red = mm.red, &k = mm.k;
    // The accumulator: float32 (products of the loads cast to float32), or Float16 (products of
    // the Float16 loads themselves: the mma's 16-bit accumulator; the hardware has no BFloat16
    // one).
    const DType acc_t = red.dtype();
    if (acc_t == DType::BFloat16)
        fail("opt", what + "tensor cores have no bfloat16 accumulator (a bfloat16 matmul "
                           "accumulates in float32 there)");
    if (acc_t != DType::Float32 && acc_t != DType::Float16) fail("opt", not_matmul);
    if (wg) {
        // One wgmma names a thread's whole accumulator (n / 2 float32 registers, or n / 4 of
        // float16 pairs), and ptxas cannot spill any of it: with the descriptors and addresses
        // beside it (26 more registers for n = 256 on an H200's driver) it must fit the share
        // of the block's 65536 registers that each of its threads gets (255 at most).
        const int64_t threads = 128 * wm * wn,
                      acc_regs = acc_t == DType::Float32 ? tiles / 2 : tiles / 4;
        const int64_t budget = std::min<int64_t>(255, 65536 / threads);
        if (acc_regs + 32 > budget)
            fail("opt", what + std::to_string(wm * wn) + " warpgroups of 64 x " +
                            std::to_string(tiles) + " " + acc_t.name() +
                            " outputs: each thread holds " + std::to_string(acc_regs) +
                            " accumulator registers and about 32 more, over the " +
                            std::to_string(budget) + " a block of " + std::to_string(threads) +
                            " threads gives each (a wgmma's accumulator cannot spill)");
    }
    for (size_t s = 0; s < 2; ++s) {
        const UOp& c = red.src(0).src(s);
        const UOp& l = acc_t == DType::Float32 && c.op() == Op::Cast ? c.src(0) : c;
        if (l.op() != Op::Load || !l.dtype().is_16bit_float() ||
            (acc_t == DType::Float16 && l.dtype() != acc_t))
            fail("opt", not_matmul);
        mm.loads[s] = l;
    }
    const UOp* loads = mm.loads;
    const DType in = loads[0].dtype();
    if (loads[1].dtype() != in) fail("opt", not_matmul);
    // The output axes: i in the left operand only (rows), j in the right one only (columns);
    // the others (a batch) stay as they are.
    detail::find_matmul_axes(mm, "TC", what, not_matmul);
    const UOp &i = mm.i, &j = mm.j;
    const std::vector<UOp>& batch = mm.batch;
    // Sizes that are not multiples of a block's rows (16 tm wm), columns (8 tn wn) and k-step
    // (16 ks) are padded up (PADTO): the loads past M, N or K read 0 (gated), and the stores past
    // M or N do not happen.
    const int64_t m = size_of(i), n = size_of(j), kk = size_of(k);
    const int64_t bm = (wg ? 64 : 16 * tm) * wm, bn = 8 * tn * wn, bk = 16 * ks;
    const int64_t mp = round_up(m, bm), np = round_up(n, bn), kp = round_up(kk, bk);

    const UOp it = make_range(mp / bm, i.arg_as<RangeArg>().axis_id, AxisType::Loop);
    const UOp jt = make_range(np / bn, j.arg_as<RangeArg>().axis_id, AxisType::Loop);
    const UOp kt = make_range(kp / bk, k.arg_as<RangeArg>().axis_id, AxisType::Reduce);
    // `load` at the given rows/columns, gated where they may lie in the padding.
    const auto gated = [](const UOp& load, const UOp& gate) {
        if (gate.is_null()) return load;
        return UOp::make(Op::Load, load.dtype(), {with_gate(load.src(0), gate)});
    };
    // Staged: the block's warps are LOCAL ranges of this rewrite (row warps outer), the lane
    // innermost (gpu dims makes it the block's x).
    const UOp wr = staged ? make_range(wm, next_axis++, AxisType::Local) : UOp();
    const UOp wc = staged ? make_range(wn, next_axis++, AxisType::Local) : UOp();
    // A warpgroup's 128 threads (warp q = lane / 32 of its rows) or a warp's 32.
    const UOp lane = make_range(wg ? 128 : 32, next_axis++, AxisType::Local);
    const UOp l32 = wg ? lane % idx(32) : lane;
    const UOp grp = l32 / idx(4), tid = l32 % idx(4);
    // The first row and column of tile (ti, tj) of the warp, in the output and (staged) in the
    // block's tile.
    const auto local_row0 = [&](int64_t ti) {
        if (wg) return wr * idx(64) + (lane / idx(32)) * idx(16);
        return staged ? wr * idx(16 * tm) + idx(16 * ti) : idx(16 * ti);
    };
    const auto local_col0 = [&](int64_t tj) {
        return staged ? wc * idx(8 * tn) + idx(8 * tj) : idx(8 * tj);
    };
    const auto row0 = [&](int64_t ti) { return it * idx(bm) + local_row0(ti); };
    const auto col0 = [&](int64_t tj) { return jt * idx(bn) + local_col0(tj); };

    // Fragment register r's row (A) or column (B) offset along k within a k-step of 16, and
    // A's row / B's column offset within the 16 x 8 block.
    const auto a_k = [&](int64_t r) { return tid * idx(2) + idx((r & 1) + 8 * (r >> 2)); };
    const auto a_row = [&](int64_t r) { return grp + idx(8 * ((r >> 1) & 1)); };
    const auto b_k = [&](int64_t r) { return tid * idx(2) + idx((r & 1) + 8 * (r >> 1)); };

    // One operand's fragment: `lanes` values, lane r read by `read(r, pairs)`, which returns
    // one value or (pairs, r even) the values of lanes r and r + 1.
    const auto fragment = [&](int64_t lanes, bool pairs, const auto& read) {
        std::vector<UOp> v;
        for (int64_t r = 0; r < lanes; r += pairs ? 2 : 1) {
            const std::vector<UOp> got = read(r);
            v.insert(v.end(), got.begin(), got.end());
        }
        return UOp::make(Op::Vectorize, in.vec(static_cast<uint16_t>(lanes)), v);
    };
    // Per k sub-step s (staged: ks of them a barrier) the warp's tm A and tn B fragments.
    std::vector<std::vector<UOp>> afrag(static_cast<size_t>(ks)), bfrag(static_cast<size_t>(ks));
    UOp wgmma; // warpgroups: the k-step's WGMMA
    if (!staged) {
        // A fragment register's two values (k and k + 1, k even) are one 32-bit load where the
        // operand is contiguous along k (A row-major, B stored transposed) and K is unpadded.
        const bool a_pairs = kp == kk && pairs_along(loads[0], k);
        const bool b_pairs = kp == kk && pairs_along(loads[1], k);
        const auto global_read = [&](const UOp& load, bool pairs, const Subs& subs,
                                     const UOp& gate) {
            if (!pairs) return std::vector<UOp>{gated(at(load, subs), gate)};
            const auto [lo, hi] = pair_load(load, subs, gate);
            return std::vector<UOp>{lo, hi};
        };
        for (int64_t ti = 0; ti < tm; ++ti)
            afrag[0].push_back(fragment(8, a_pairs, [&](int64_t r) {
                const UOp row = row0(ti) + a_row(r), col = kt * idx(16) + a_k(r);
                return global_read(loads[0], a_pairs, {{i, row}, {k, col}},
                                   both(inside(row, m, mp), inside(col, kk, kp)));
            }));
        for (int64_t tj = 0; tj < tn; ++tj)
            bfrag[0].push_back(fragment(4, b_pairs, [&](int64_t r) {
                const UOp row = kt * idx(16) + b_k(r), col = col0(tj) + grp;
                return global_read(loads[1], b_pairs, {{k, row}, {j, col}},
                                   both(inside(row, kk, kp), inside(col, n, np)));
            }));
    } else {
        // The block's threads copy each operand's tile of a k-step (bm x bk of A, bk x bn of
        // B) to shared memory, and every warp reads its fragments there. Without a pipeline,
        // k-step t's copies (through registers) go to tile t % 2, then one BARRIER: no thread can
        // still read that tile, as all passed the barrier after their reads of step t - 2 (two
        // tiles taken in turn are what makes one barrier a k-step enough). With a pipeline of p
        // tiles, the copies are cp.async: tiles 0 .. p - 2 before the loop; k-step t waits until
        // its own tile has landed (ASYNC_WAIT leaves p - 2 groups in flight), a BARRIER, then
        // issues step t + p - 1's copies to the tile step t - 1 read (every thread is past it)
        // and reads step t's fragments while they are in flight. Warpgroups that keep an mma in
        // flight copy one step less far ahead (lead below): tiles 0 .. p - 3 before the loop,
        // step t + p - 2's copies to the tile of step t - 2, whose mma every warpgroup waited for
        // in step t - 1, before the barrier.
        const int64_t threads = (wg ? 128 : 32) * wm * wn, steps = kp / bk;
        const int64_t tiles_n = pipe == 0 ? 2 : pipe;
        const bool single = g_single_buffer.load(); // tests: every step in tile 0
        const auto tile_of = [&](const UOp& step) { return single ? idx(0) : step % idx(tiles_n); };
        const int64_t group = wg ? 128 : 32; // threads a warpgroup or a warp
        const UOp flat = lane + wc * idx(group) + wr * idx(group * wn);
        struct Tile {
            UOp load, r, base;            // the operand's load, its outer range, block offset
            int64_t size = 0, padded = 0; // of the outer range
            UOp smem;                     // DEFINE_LOCAL of tiles_n tiles
            int64_t ld = 0;               // elements between rows of a tile
            int64_t tile = 0;             // elements of one tile
            bool kmajor = true;           // rows of the tile run along the operand's outer axis
            int64_t vec = 1;              // elements a copy
            int64_t run = 0, units = 0;   // copies a tile row, and a tile
        };
        int64_t local_id = 0, shared = 0;
        // Operand `load` whose outer axis `r` (i or j) has size `size` (`padded`), `extent` rows
        // or columns a block from `base`.
        const auto plan = [&](const UOp& load, const UOp& r, const UOp& base, int64_t extent,
                              int64_t size, int64_t padded) {
            // Copies of `vec` neighbouring elements (16 bytes at most) where the operand is
            // contiguous along k (or else along r) and the vector never straddles the padding.
            const auto contiguous = [&](const UOp& along, int64_t sz, int64_t padded_sz,
                                        int64_t run) {
                return vector_width(load, along, sz, padded_sz, run, 8, /*ungated=*/false);
            };
            Tile t;
            t.load = load;
            t.r = r;
            t.base = base;
            t.size = size;
            t.padded = padded;
            t.vec = contiguous(k, kk, kp, bk);
            if (t.vec == 1) {
                t.vec = contiguous(r, size, padded, extent);
                t.kmajor = t.vec == 1;
            }
            // Warpgroups: swizzled tiles of 64 k a row (K-major), or atoms of 64 columns of 64
            // rows (MN-major), copied 16 bytes at a time.
            if (wg && t.vec != 8)
                fail("opt", what + "warpgroups copy their operands 16 bytes at a time: each must "
                                   "run along K or along its rows or columns, in whole runs of 8 "
                                   "elements");
            // Rows an odd number of 16-byte units apart (8 elements more where the data is an
            // even number): the 8 rows of 16 bytes an ldmatrix phase reads start in different
            // banks (8 units span the 32 banks), and rows stay 16-byte aligned. (The swizzle
            // does that for warpgroups' unpadded rows, whose tiles start 1024-byte aligned.)
            const int64_t width = t.kmajor ? bk : extent;
            t.ld = width + (!wg && width / 8 % 2 == 0 ? 8 : 0);
            t.tile = (t.kmajor ? extent : bk) * t.ld;
            shared += tiles_n * t.tile * in.itemsize();
            std::vector<int64_t> arg{tiles_n * t.tile, local_id++};
            if (wg) arg.push_back(1024);
            t.smem = UOp::make(Op::DefineLocal, in.ptr(AddrSpace::Local), {}, std::move(arg));
            t.run = (t.kmajor ? bk : extent) / t.vec; // copies a tile row
            t.units = (t.kmajor ? extent : bk) * t.run;
            return t;
        };
        // The element of tile `t` at its row `row`, `at_row` along it: rows of ld elements, or
        // (warpgroups) 128-byte swizzled rows, 16-byte unit u of row r at unit u ^ (r % 8), in
        // atoms of 64 columns where the tile runs across K.
        const auto at_tile = [&](const Tile& t, const UOp& row, const UOp& at_row) {
            if (!wg) return row * idx(t.ld) + at_row;
            const auto swz = [&](const UOp& unit) { return (unit ^ (row % idx(8))) * idx(8); };
            if (t.kmajor) return row * idx(64) + swz(at_row / idx(8));
            return (at_row / idx(64)) * idx(64 * bk) + row * idx(64) +
                   swz((at_row / idx(8)) % idx(8));
        };
        // The copies of k-step `step`'s tile of `t` into shared memory `dst` (the array, or
        // read through an AFTER), none where `skip` (a step past the last) is false; cp.async
        // where asked for and the copy is 4 bytes or more, else a load and a store.
        const auto copy = [&](const Tile& t, const UOp& step, const UOp& dst, const UOp& skip,
                              bool async) {
            std::vector<UOp> out;
            const auto v = static_cast<uint16_t>(t.vec);
            for (int64_t c = 0; c * threads < t.units; ++c) {
                const UOp u = flat + idx(c * threads);
                const UOp row = u / idx(t.run), at_row = (u % idx(t.run)) * idx(t.vec);
                const UOp outer = t.base + (t.kmajor ? row : at_row);
                const UOp kk_at = step * idx(bk) + (t.kmajor ? at_row : row);
                const Subs subs{{t.r, outer}, {k, kk_at}};
                // The last round of copies may have fewer units than threads.
                const UOp some = t.units % threads != 0 && (c + 1) * threads > t.units
                                     ? u < idx(t.units)
                                     : UOp();
                const UOp pad = both(inside(outer, t.size, t.padded), inside(kk_at, kk, kp));
                UOp sidx = UOp::make(Op::Index, in.vec(v).ptr(AddrSpace::Local),
                                     {dst, tile_of(step) * idx(t.tile) + at_tile(t, row, at_row)});
                const UOp go = both(skip, some); // whether this thread copies
                if (!go.is_null()) sidx = with_gate(sidx, go);
                if (async && t.vec * in.itemsize() >= 4) {
                    // cp.async: padding reads as zeros (src-size 0).
                    out.push_back(UOp::make(Op::CopyAsync, DType::Void,
                                            {sidx, vector_index(t.load, t.vec, subs, pad)}));
                    continue;
                }
                const UOp value = UOp::make(Op::Load, in.vec(v),
                                            {vector_index(t.load, t.vec, subs, both(go, pad))});
                out.push_back(UOp::make(Op::Store, DType::Void, {sidx, value}));
            }
            return out;
        };
        const Tile ta = plan(loads[0], i, it * idx(bm), bm, m, mp);
        const Tile tb = plan(loads[1], j, jt * idx(bn), bn, n, np);
        detail::check_block_shared(lim, shared, what);
        detail::check_block_threads(lim, threads, what);
        // Copies run `lead` k-steps ahead: pipe - 1, or pipe - 2 where a k-step's mma is still
        // in flight (reading its tile) while the next k-step's copies are issued.
        const int64_t lead = pipe - 1 - (inflight && !g_full_lead.load() ? 1 : 0);
        const UOp smem[2] = {ta.smem, tb.smem};
        const detail::StagedCopies copies = detail::staged_copies(
            pipe, lead, steps, kt, batch, smem,
            [&](int operand, const UOp& step, const UOp& dst, const UOp& skip, bool async) {
                return copy(operand == 0 ? ta : tb, step, dst, skip, async);
            });
        // A fragment is one LDMATRIX of 8 x 8 matrices (A: 4, B: 2), read after the barrier
        // (and after the step's copies in flight, so that they are issued first), transposed
        // where the tile runs across k: lane 8 q + r gives the address of row r of matrix q,
        // whose block of 8 along the operand's outer axis is `ob` and along k `kb`.
        const UOp q = lane / idx(8), r8 = lane % idx(8);
        const UOp after_a = detail::read_after(ta.smem, copies);
        const UOp after_b = detail::read_after(tb.smem, copies);
        if (wg) {
            // The warpgroup's operands from their first elements in the k-step's tiles: A's 64
            // rows, B's n columns (K-major: rows of 64; MN-major: atoms of 64 x 64).
            const auto first = [&](const Tile& t, const UOp& after, const UOp& at) {
                return UOp::make(Op::Index, in.ptr(AddrSpace::Local),
                                 {after, tile_of(kt) * idx(t.tile) + at * idx(bk)});
            };
            wgmma =
                UOp::make(Op::Wgmma, acc_t.vec(static_cast<uint16_t>(tiles / 2)),
                          {first(ta, after_a, wr * idx(64)), first(tb, after_b, wc * idx(tiles)),
                           UOp::constant_f(acc_t.vec(static_cast<uint16_t>(tiles / 2)), 0.0)},
                          std::vector<int64_t>{tiles, ks, ta.kmajor ? 0 : 1, tb.kmajor ? 0 : 1,
                                               inflight ? 1 : 0});
        }
        const auto ldmatrix = [&](const Tile& t, const UOp& after, int64_t count, const UOp& outer0,
                                  const UOp& k0, const UOp& ob, const UOp& kb) {
            const UOp o = outer0 + ob * idx(8) + (t.kmajor ? r8 : idx(0));
            const UOp kq = k0 + kb * idx(8) + (t.kmajor ? idx(0) : r8);
            const UOp off =
                tile_of(kt) * idx(t.tile) + (t.kmajor ? o * idx(t.ld) + kq : kq * idx(t.ld) + o);
            const UOp row = UOp::make(Op::Index, in.vec(8).ptr(AddrSpace::Local), {after, off});
            return UOp::make(Op::LdMatrix, in.vec(static_cast<uint16_t>(2 * count)), {row},
                             std::vector<int64_t>{count, t.kmajor ? 0 : 1});
        };
        for (int64_t sub = 0; sub < ks && !wg; ++sub) {
            // A's registers a0 .. a7 are matrices (rows, k) (0, 0), (8, 0), (0, 8), (8, 8);
            // B's b0 .. b3 (k 0 and 8) of its 8 columns. Lanes 16 .. 31 of B's give the same
            // addresses as 0 .. 15 (an x2 reads only those).
            for (int64_t ti = 0; ti < tm; ++ti)
                afrag[static_cast<size_t>(sub)].push_back(ldmatrix(
                    ta, after_a, 4, local_row0(ti), idx(16 * sub), q % idx(2), q / idx(2)));
            for (int64_t tj = 0; tj < tn; ++tj)
                bfrag[static_cast<size_t>(sub)].push_back(
                    ldmatrix(tb, after_b, 2, local_col0(tj), idx(16 * sub), idx(0), q % idx(2)));
        }
    }
    std::unordered_set<const UOpNode*> in_reduce;
    for (const UOp& u : red.toposort()) in_reduce.insert(u.get());
    // Each block's accumulator: the k sub-steps' mma in k order, each accumulating onto the one
    // before; the first's C is zero, which linearize makes the accumulator.
    std::vector<UOp> accs;
    if (wg) {
        // The last k-step's mma may still be in flight: waited for before the stores.
        accs.push_back(UOp::make(Op::Reduce, wgmma.dtype(), {wgmma, kt}, red.arg()));
        if (inflight) accs[0] = UOp::make(Op::WgmmaWait, accs[0].dtype(), {accs[0]});
    }
    for (int64_t ti = 0; ti < tm && !wg; ++ti)
        for (int64_t tj = 0; tj < tn; ++tj) {
            UOp mma = UOp::constant_f(acc_t.vec(4), 0.0);
            for (int64_t sub = 0; sub < ks; ++sub)
                mma = UOp::make(Op::Wmma, acc_t.vec(4),
                                {afrag[static_cast<size_t>(sub)][static_cast<size_t>(ti)],
                                 bfrag[static_cast<size_t>(sub)][static_cast<size_t>(tj)], mma},
                                std::vector<int64_t>{16, 8, 16});
            accs.push_back(UOp::make(Op::Reduce, acc_t.vec(4), {mma, kt}, red.arg()));
        }
    // A batch axis of symbolic size that stays a loop: a barrier after the k-loop before the next
    // batch's first copies (matmul_parts.hpp).
    if (staged) detail::barrier_after_batch_loop(accs, batch);
    // Lanes c and c + 1 of an accumulator are neighbouring columns of one row: one 2-element
    // store where the output runs along the columns from an even offset (a 32-bit store of a
    // 16-bit output) and the padding, if any, never splits a pair (N even).
    const bool pair_out = runs_along(store, j, 2, /*ungated=*/false) && (np == n || n % 2 == 0);
    std::vector<UOp> stores;
    for (int64_t ti = 0; ti < tm; ++ti)
        for (int64_t tj = 0; tj < tn; ++tj) {
            // A warpgroup's one accumulator holds its blocks of 16 x 8 4 lanes each.
            const UOp& acc = accs[wg ? 0 : static_cast<size_t>(ti * tn + tj)];
            const int64_t lane0 = wg ? 4 * tj : 0;
            for (int64_t c = 0; c < 4; c += pair_out ? 2 : 1) {
                const UOp row = row0(ti) + grp + idx(8 * (c >> 1));
                const UOp col = col0(tj) + tid * idx(2) + idx(c & 1);
                const UOp g = both(inside(row, m, mp), inside(col, n, np));
                // The epilogue's own loads (a bias, a residual) gated (not the fragments' loads
                // inside the reduce: the warp shares them). One gate serves a pair.
                const UOp epilogue = detail::gate_epilogue(store.src(1), in_reduce, g);
                // The epilogue's value at lane c + d (column col + d).
                std::vector<UOp> vals;
                for (int64_t d = 0; d < (pair_out ? 2 : 1); ++d) {
                    const UOp lane_value =
                        UOp::make(Op::Gep, acc_t, {acc}, std::vector<int64_t>{lane0 + c + d});
                    vals.push_back(
                        detail::epilogue_at(mm, epilogue, lane_value, row, col + idx(d)));
                }
                stores.push_back(detail::store_at(mm, row, col, g, vals));
            }
        }
    std::vector<UOp> end_srcs{UOp::make(Op::Group, DType::Void, stores)};
    end_srcs.insert(end_srcs.end(), batch.begin(), batch.end());
    end_srcs.insert(end_srcs.end(), {it, jt});
    if (staged) end_srcs.insert(end_srcs.end(), {wr, wc});
    end_srcs.push_back(lane);
    return UOp::sink({UOp::make(Op::End, DType::Void, end_srcs)});
}

} // namespace tempura::codegen
