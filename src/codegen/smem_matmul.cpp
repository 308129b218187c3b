// The SMEM opt: a matmul of Float32 operands on a GPU's threads (no tensor cores take float32),
// its operands staged through shared memory and each thread's outputs held in a register tile.
//
// SMEM(16 tm + tn, 1000000 p + 10000 bk + 100 lm + ln) (SmemTile): a block of lm x ln threads
// (ty, tx; tx the block's x) computes bm x bn = (lm tm) x (ln tn) outputs, thread (ty, tx) the
// tm x tn of rows ty tm + ti and columns tx tn + tj of the block's. The kernel loops over k-steps
// of bk:
//   1. the block's threads copy A's bm x bk elements and B's bk x bn into shared memory, each
//      tile laid out with M (N) contiguous: element (k, r) at k ld + r, ld = bm + 4 (bn + 4), so
//      that rows stay 16-byte aligned and a warp writing down a column (an operand stored along
//      K, transposed into the tile) hits different banks. Neighbouring threads copy neighbouring
//      elements of the operand as stored. Without a pipeline (p = 0) the copies go through
//      registers (16-byte loads where the operand runs along K or along its rows or columns)
//      into two tiles taken in turn, k-step t into tile t % 2, then one BARRIER: a thread past
//      step t's barrier has every copy of step t, and no thread can still read tile t % 2 of
//      step t - 2, since it passed step t - 1's barrier after those reads. With a pipeline of p
//      tiles (2, 3 or 4) the copies are cp.async (16 bytes along M or N, 4 bytes where a copy
//      transposes): tiles 0 .. p - 2 before the loop; k-step t waits for its own tile
//      (ASYNC_WAIT), a BARRIER, issues step t + p - 1's copies into the tile step t - 1 read,
//      and computes while they are in flight;
//   2. for each k of the step (a loop), the thread reads its tm values of A and tn of B from
//      the tiles (16-byte loads of 4 neighbours along a tile row) and updates its tm x tn
//      accumulators with one fused multiply-add each, in k order: the same products and sums
//      as the plain loop, bit for bit.
// Every loaded value serves tn (A) or tm (B) accumulators; every element of A the block reads
// from global memory serves its bn columns. M, N and K are padded up to bm, bn and bk: the copies
// read zeros past them (gated loads, or cp.async's zero fill; the tiles are written whole each
// step), and the stores past M and N do not happen. After the loop each thread applies the
// kernel's epilogue (a bias, an activation, a cast) to its accumulators and stores them, up to 4
// neighbouring columns as one vector store where the output runs along N.
#include <algorithm>
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

// Lanes of a vector value.
std::vector<UOp> lanes_of(const UOp& vec, DType scalar) {
    std::vector<UOp> out;
    for (int64_t e = 0; e < vec.dtype().count; ++e)
        out.push_back(UOp::make(Op::Gep, scalar, {vec}, std::vector<int64_t>{e}));
    return out;
}

// The parts of a matmul kernel of Float32 operands (matmul_parts.hpp).
Matmul parse_matmul(const UOp& ast, const std::string& what) {
    const std::string not_matmul =
        what + "the kernel is not a matmul of Float32 operands (one sum over one axis of the "
               "products of two float32 loads)";
    Matmul mm = detail::find_matmul_reduce(ast, not_matmul);
    if (mm.store.src(0).op() != Op::Index || mm.red.dtype() != DType::Float32)
        fail("opt", not_matmul);
    for (size_t s = 0; s < 2; ++s) {
        const UOp& l = mm.red.src(0).src(s);
        if (l.op() != Op::Load || l.dtype() != DType::Float32 || l.srcs().size() != 1 ||
            l.src(0).op() != Op::Index)
            fail("opt", not_matmul);
        mm.loads[s] = l;
    }
    detail::find_matmul_axes(mm, "SMEM", what, not_matmul);
    return mm;
}

} // namespace

UOp smem_matmul_ast(const UOp& ast, const DeviceLimits& lim, int64_t& next_axis, int64_t tile,
                    int64_t block, const std::string& what) {
    const SmemTile st = SmemTile::decode(tile, block);
    if (tile < 0 || block < 0 || !st.valid() || st.tile() != tile || st.block() != block)
        fail("opt", what +
                        "the tile is 16 * rows + columns (each 1, 2, 4 or 8) and the block "
                        "1000000 * pipeline tiles (0, 2, 3 or 4) + 10000 * k-step (4, 8, 16 or "
                        "32) + 100 * row threads + column threads (each a power of two up to 32, "
                        "at least 32 threads), got " +
                        std::to_string(tile) + " and " + std::to_string(block));
    if (!lim.gpu || !lim.has_shared)
        fail("opt", what + "the " + lim.name +
                        " device has no shared memory to stage a matmul's operands in (a GPU has)");
    if (st.pipe != 0 && lim.sm < 80)
        fail("opt", what + "the " + lim.name + " device has no cp.async (sm_80 and later have)");
    const int64_t tm = st.tm, tn = st.tn, lm = st.lm, ln = st.ln, bk = st.bk, pipe = st.pipe;
    const int64_t bm = lm * tm, bn = ln * tn, threads = lm * ln;
    const int64_t tiles_n = pipe == 0 ? 2 : pipe;
    detail::check_block_threads(lim, threads, what);
    // Tile rows are 4 elements longer than the tile is wide: 16-byte aligned still, and the
    // copies that write a column of a tile (an operand stored along K) hit different banks.
    const int64_t lda = bm + 4, ldb = bn + 4;
    const int64_t shared = tiles_n * bk * (lda + ldb) * 4;
    detail::check_block_shared(lim, shared, what);
    const Matmul mm = parse_matmul(ast, what);
    const UOp &store = mm.store, &red = mm.red, &k = mm.k, &i = mm.i, &j = mm.j;
    const UOp* loads = mm.loads;
    const std::vector<UOp>& batch = mm.batch;
    const int64_t m = size_of(i), n = size_of(j), kk = size_of(k);
    const int64_t mp = round_up(m, bm), np = round_up(n, bn), kp = round_up(kk, bk),
                  steps = kp / bk;

    const UOp it = make_range(mp / bm, i.arg_as<RangeArg>().axis_id, AxisType::Loop);
    const UOp jt = make_range(np / bn, j.arg_as<RangeArg>().axis_id, AxisType::Loop);
    const UOp kt = make_range(steps, k.arg_as<RangeArg>().axis_id, AxisType::Reduce);
    const UOp kq = make_range(bk, next_axis++, AxisType::Reduce);
    const UOp ty = make_range(lm, next_axis++, AxisType::Local);
    const UOp tx = make_range(ln, next_axis++, AxisType::Local);
    const UOp flat = ty * idx(ln) + tx;
    const auto tile_of = [&](const UOp& step) { return steps > 1 ? step % idx(tiles_n) : idx(0); };

    // One operand's tiles: `extent` (bm or bn) elements of its outer axis `r` from `base` by bk,
    // tiles_n of them, element (k, x) of a tile at k ld + x.
    struct Tile {
        UOp load, r, base, smem;
        int64_t extent = 0, size = 0, padded = 0, ld = 0;
        int64_t vec = 1;      // elements a copy
        bool along_k = false; // neighbouring threads copy neighbouring k (else neighbouring r)
    };
    const auto plan = [&](const UOp& load, const UOp& r, const UOp& base, int64_t extent,
                          int64_t size, int64_t padded, int64_t ld, int64_t id) {
        Tile t{load, r, base, {}, extent, size, padded, ld};
        // Vectors of up to 4 neighbours where the operand runs along K (or else along r) and a
        // vector never straddles the padding.
        const auto contiguous = [&](const UOp& along, int64_t sz, int64_t padded_sz, int64_t run) {
            return vector_width(load, along, sz, padded_sz, run, 4, /*ungated=*/true);
        };
        const UOp& index = load.src(0);
        t.along_k = linear_coefficient(index.src(1), k) == 1;
        // cp.async cannot transpose: an operand along K is copied 4 bytes at a time then.
        if (t.along_k)
            t.vec = pipe == 0 ? contiguous(k, kk, kp, bk) : 1;
        else
            t.vec = contiguous(r, size, padded, extent);
        t.smem = UOp::make(Op::DefineLocal, DType::Float32.ptr(AddrSpace::Local), {},
                           std::vector<int64_t>{tiles_n * bk * ld, id});
        return t;
    };
    const Tile ta = plan(loads[0], i, it * idx(bm), bm, m, mp, lda, 0);
    const Tile tb = plan(loads[1], j, jt * idx(bn), bn, n, np, ldb, 1);

    // k-step `step`'s copies of tile t into `dst` (its array, or the array read through an
    // AFTER), none where `skip` (a step past the last) is false: thread u of the block takes
    // units u, u + threads, ...; cp.async where `async`, else a load and stores.
    const auto copy = [&](const Tile& t, const UOp& step, const UOp& dst, const UOp& skip,
                          bool async) {
        std::vector<UOp> out;
        const int64_t run = (t.along_k ? bk : t.extent) / t.vec; // copies a run
        const int64_t units = (t.along_k ? t.extent : bk) * run;
        for (int64_t c = 0; c * threads < units; ++c) {
            const UOp u = flat + idx(c * threads);
            const UOp q = u / idx(run), p = (u % idx(run)) * idx(t.vec);
            const UOp x = t.along_k ? q : p; // along r, within the tile
            const UOp kx = t.along_k ? p : q;
            const UOp outer = t.base + x, kg = step * idx(bk) + kx;
            // The last round of copies may have fewer units than threads.
            const UOp some =
                units % threads != 0 && (c + 1) * threads > units ? u < idx(units) : UOp();
            const UOp pad = both(inside(outer, t.size, t.padded), inside(kg, kk, kp));
            const Subs subs{{t.r, outer}, {k, kg}};
            const UOp go = both(skip, some); // whether this thread copies
            const UOp at_tile = tile_of(step) * idx(bk * t.ld) + kx * idx(t.ld) + x;
            // One vector of the tile's row where the copy runs along r, else one element a row.
            const bool row_vector = !t.along_k && t.vec > 1;
            const auto dst_index = [&](const UOp& offset, int64_t v) {
                const DType pdt =
                    v == 1 ? DType::Float32.ptr(AddrSpace::Local)
                           : DType::Float32.vec(static_cast<uint16_t>(v)).ptr(AddrSpace::Local);
                const UOp sidx = UOp::make(Op::Index, pdt, {dst, offset});
                return go.is_null() ? sidx : with_gate(sidx, go);
            };
            if (async) {
                // cp.async: the padding reads as zeros (src-size 0).
                UOp src =
                    t.vec == 1 ? at(t.load.src(0), subs) : vector_index(t.load, t.vec, subs, UOp());
                if (!pad.is_null()) src = with_gate(src, pad);
                out.push_back(
                    UOp::make(Op::CopyAsync, DType::Void, {dst_index(at_tile, t.vec), src}));
                continue;
            }
            const UOp gate = both(go, pad);
            std::vector<UOp> values;
            if (t.vec == 1) {
                const UOp src = at(t.load.src(0), subs);
                values.push_back(UOp::make(Op::Load, DType::Float32,
                                           {gate.is_null() ? src : with_gate(src, gate)}));
            } else {
                values =
                    lanes_of(UOp::make(Op::Load, DType::Float32.vec(static_cast<uint16_t>(t.vec)),
                                       {vector_index(t.load, t.vec, subs, gate)}),
                             DType::Float32);
            }
            if (row_vector) {
                out.push_back(UOp::make(
                    Op::Store, DType::Void,
                    {dst_index(at_tile, t.vec),
                     UOp::make(Op::Vectorize, DType::Float32.vec(static_cast<uint16_t>(t.vec)),
                               values)}));
                continue;
            }
            // Along K: each element to its own row of the tile (the tile runs along r).
            for (int64_t e = 0; e < t.vec; ++e)
                out.push_back(UOp::make(
                    Op::Store, DType::Void,
                    {dst_index(at_tile + idx(e * t.ld), 1), values[static_cast<size_t>(e)]}));
        }
        return out;
    };
    // The copies: without a pipeline through registers into two tiles taken in turn, k-step t
    // into tile t % 2, then one BARRIER; with a pipeline of p tiles by cp.async, p - 1 k-steps
    // ahead (matmul_parts.hpp).
    const UOp smem[2] = {ta.smem, tb.smem};
    const detail::StagedCopies copies = detail::staged_copies(
        pipe, pipe - 1, steps, kt, batch, smem,
        [&](int operand, const UOp& step, const UOp& dst, const UOp& skip, bool async) {
            return copy(operand == 0 ? ta : tb, step, dst, skip, async);
        });

    // The thread's `count` values of tile t at k-step kt's k = kq, from `first` along r.
    const auto read = [&](const Tile& t, const UOp& first, int64_t count) {
        const UOp after = detail::read_after(t.smem, copies);
        const int64_t v = std::min<int64_t>(count, 4);
        std::vector<UOp> out;
        for (int64_t g = 0; g < count / v; ++g) {
            const UOp off = tile_of(kt) * idx(bk * t.ld) + kq * idx(t.ld) + first + idx(g * v);
            if (v == 1) {
                out.push_back(UOp::make(
                    Op::Load, DType::Float32,
                    {UOp::make(Op::Index, DType::Float32.ptr(AddrSpace::Local), {after, off})}));
                continue;
            }
            const DType vt = DType::Float32.vec(static_cast<uint16_t>(v));
            const UOp vec = UOp::make(
                Op::Load, vt, {UOp::make(Op::Index, vt.ptr(AddrSpace::Local), {after, off})});
            for (const UOp& l : lanes_of(vec, DType::Float32)) out.push_back(l);
        }
        return out;
    };
    const std::vector<UOp> av = read(ta, ty * idx(tm), tm), bv = read(tb, tx * idx(tn), tn);
    // The accumulators: the sum over (kt, kq) of the products, one fused multiply-add a k.
    std::vector<UOp> accs;
    for (int64_t ti = 0; ti < tm; ++ti)
        for (int64_t tj = 0; tj < tn; ++tj)
            accs.push_back(UOp::make(
                Op::Reduce, DType::Float32,
                {av[static_cast<size_t>(ti)] * bv[static_cast<size_t>(tj)], kt, kq}, red.arg()));
    detail::barrier_after_batch_loop(accs, batch);

    // The stores: the epilogue at each of the thread's outputs, vo neighbouring columns as one
    // vector store where the output runs along N from a multiple of vo and the padding, if any,
    // never splits a vector.
    std::unordered_set<const UOpNode*> in_reduce;
    for (const UOp& u : red.toposort()) in_reduce.insert(u.get());
    int64_t vo = 1;
    for (int64_t v = std::min<int64_t>(tn, 4); v >= 2 && vo == 1; v /= 2)
        if (runs_along(store, j, v, /*ungated=*/true) && (np == n || n % v == 0)) vo = v;
    std::vector<UOp> stores;
    for (int64_t ti = 0; ti < tm; ++ti) {
        const UOp row = it * idx(bm) + ty * idx(tm) + idx(ti);
        for (int64_t tj = 0; tj < tn; tj += vo) {
            const UOp col = jt * idx(bn) + tx * idx(tn) + idx(tj);
            const UOp g = both(inside(row, m, mp), inside(col, n, np));
            const UOp epilogue = detail::gate_epilogue(store.src(1), in_reduce, g);
            std::vector<UOp> vals;
            for (int64_t d = 0; d < vo; ++d)
                vals.push_back(detail::epilogue_at(
                    mm, epilogue, accs[static_cast<size_t>(ti * tn + tj + d)], row, col + idx(d)));
            stores.push_back(detail::store_at(mm, row, col, g, vals));
        }
    }
    std::vector<UOp> end_srcs{UOp::make(Op::Group, DType::Void, stores)};
    end_srcs.insert(end_srcs.end(), batch.begin(), batch.end());
    end_srcs.insert(end_srcs.end(), {it, jt, ty, tx});
    return UOp::sink({UOp::make(Op::End, DType::Void, end_srcs)});
}

std::vector<Opt> smem_heuristic_opts(const UOp& ast, const DeviceLimits& lim) {
    if (!lim.gpu || !lim.has_shared) return {};
    Matmul mm;
    try {
        mm = parse_matmul(ast, "");
    } catch (const Error&) {
        return {};
    }
    const int64_t m = size_of(mm.i), n = size_of(mm.j), kk = size_of(mm.k);
    if (m < 32 || n < 32) return {};
    int64_t batch = 1;
    for (const UOp& r : mm.batch)
        if (r.src(0).is_const()) batch *= size_of(r);
    // Blocks of 16 x 16 threads: 128 x 128 outputs (8 x 8 a thread, k-steps of 8), 64 x 64
    // (4 x 4, k-steps of 16) or 32 x 32 (2 x 2): the largest of which there are at least 128
    // (about an H100's 132 SMs) with at most a quarter more outputs than M x N once padded, else
    // the smallest; the copies by a cp.async pipeline of 3 tiles (about 25 KiB of them). These
    // are the usual shapes of a float32 GEMM's thread blocks on a GPU; they have not been timed
    // on one yet (bench_gpu's BM_MatmulF32 and BEAM over smem_matmul_variants will), only
    // checked on EMU.
    const SmemTile cands[] = {{8, 8, 16, 16, 8, 3}, {4, 4, 16, 16, 16, 3}, {2, 2, 16, 16, 16, 3}};
    const size_t count = sizeof cands / sizeof cands[0];
    for (size_t c = 0; c < count; ++c) {
        SmemTile t = cands[c];
        // No k-step longer than K needs (K = 5 takes 8).
        while (t.bk > 4 && t.bk / 2 >= kk) t.bk /= 2;
        const int64_t bm = t.lm * t.tm, bn = t.ln * t.tn;
        const int64_t mp = (m + bm - 1) / bm * bm, np = (n + bn - 1) / bn * bn;
        const int64_t blocks = batch * (mp / bm) * (np / bn);
        if (c + 1 < count && (blocks < 128 || 4 * mp * np > 5 * m * n)) continue;
        if (OptKernel k(ast, lim); k.try_apply({OptOp::Smem, t.tile(), t.block()}))
            return k.applied();
    }
    return {};
}

} // namespace tempura::codegen
