// Stage "gpu dims" (codegen stage 12 of the reference pipeline): on a GPU, the kernel's output
// loops become block and thread indices (SPECIAL), within the device's grid and block limits.
#include <algorithm>
#include <string>
#include <vector>

#include "ranges.hpp"
#include "tempura/codegen/opts.hpp"
#include "tempura/codegen/stages.hpp"
#include "tempura/error.hpp"

namespace tempura::codegen {

namespace {

using detail::contains;
using detail::size_of;
using detail::type_of;
using detail::with_gate;

UOp special(int64_t kind, int64_t dim, const UOp& size) {
    return UOp::make(Op::Special, DType::Index, {size}, std::vector<int64_t>{kind, dim});
}
UOp special(int64_t kind, int64_t dim, int64_t size) {
    return special(kind, dim, UOp::index(size));
}

// The value of each range of `ranges` (outer to inner, sizes `sizes`) when they are laid out
// over one index space of kind `kind` (0 blocks, 1 threads) within `limit` per dim. Up to three
// ranges that each fit get a dim of their own, the innermost x; more, or one that does not fit,
// are merged into one linear index, split exactly over x, y and z, and recovered by division and
// modulo. Sets `dims` to the launch size.
std::vector<UOp> lay_out(const std::vector<int64_t>& sizes, int64_t kind,
                         const std::array<int64_t, 3>& limit, std::array<int64_t, 3>& dims,
                         const std::string& kernel, std::array<bool, 3>* used = nullptr) {
    dims = {1, 1, 1};
    std::array<bool, 3> taken{false, false, false};
    std::vector<UOp> vals(sizes.size());
    const size_t n = sizes.size();
    bool direct = n <= 3;
    for (size_t i = 0; i < n && direct; ++i) direct = sizes[i] <= limit[n - 1 - i];
    if (direct) {
        for (size_t i = 0; i < n; ++i) {
            const auto d = static_cast<int64_t>(n - 1 - i);
            dims[static_cast<size_t>(d)] = sizes[i];
            taken[static_cast<size_t>(d)] = true; // (a range of size 1 too)
            vals[i] = special(kind, d, sizes[i]);
        }
        if (used != nullptr) *used = taken;
        return vals;
    }
    // Merged: one linear index over x (and y, z where x alone cannot hold it), split exactly:
    // x the largest divisor of the total within its limit that leaves a y and z that fit.
    int64_t total = 1;
    for (int64_t s : sizes) total *= s;
    bool found = false;
    for (int64_t x = std::min(total, limit[0]); x >= 1 && !found; --x) {
        if (total % x != 0) continue;
        const int64_t rest = total / x;
        for (int64_t y = std::min(rest, limit[1]); y >= 1; --y)
            if (rest % y == 0 && rest / y <= limit[2]) {
                dims = {x, y, rest / y};
                found = true;
                break;
            }
    }
    if (!found)
        fail("gpudims", "kernel " + kernel + ": " + std::to_string(total) + " " +
                            (kind == 0 ? "blocks" : "threads") +
                            " cannot be laid out within the limits (" + std::to_string(limit[0]) +
                            ", " + std::to_string(limit[1]) + ", " + std::to_string(limit[2]) +
                            ")");
    if (used != nullptr) *used = {true, dims[1] > 1, dims[2] > 1};
    UOp id = special(kind, 0, dims[0]);
    if (dims[1] > 1) id = id + special(kind, 1, dims[1]) * UOp::index(dims[0]);
    if (dims[2] > 1) id = id + special(kind, 2, dims[2]) * UOp::index(dims[0] * dims[1]);
    int64_t stride = 1;
    for (size_t i = n; i-- > 0;) {
        UOp v = stride == 1 ? id : id / UOp::index(stride);
        if (i > 0) v = v % UOp::index(sizes[i]);
        vals[i] = v;
        stride *= sizes[i];
    }
    return vals;
}

} // namespace

UOp gpu_dims(const UOp& ast, const DeviceLimits& lim, const std::string& kernel,
             std::array<int64_t, 3>& grid, std::array<int64_t, 3>& block,
             std::array<UOp, 3>* grid_size) {
    grid = {1, 1, 1};
    block = {1, 1, 1};
    if (grid_size != nullptr) *grid_size = {};
    // A scatter's read-add-write loop is ordered (two of its updates may hit one element): the
    // kernel keeps its loops and runs as one thread. (Atomic adds would let it spread.)
    if (reads_what_it_writes(ast)) return ast;
    // The output ranges in the order the kernel's ENDs list them (outer to inner).
    std::vector<UOp> global, local, sym_global;
    const std::vector<UOp> nodes = ast.toposort();
    // A kernel that names its grid (Global ranges, as row threads do) keeps its Loop ranges
    // loops in every thread; otherwise they are the grid.
    const bool named_grid = std::any_of(nodes.begin(), nodes.end(), [](const UOp& u) {
        return u.op() == Op::Range && type_of(u) == AxisType::Global;
    });
    for (const UOp& u : nodes) {
        if (u.op() != Op::End) continue;
        for (size_t i = 1; i < u.srcs().size(); ++i) {
            const UOp& r = u.src(i);
            if (r.op() != Op::Range) continue;
            const AxisType t = type_of(r);
            const bool is_global = (t == AxisType::Loop && !named_grid) || t == AxisType::Global ||
                                   t == AxisType::Thread;
            if (!is_global && t != AxisType::Local) continue;
            // A global range of symbolic size may get a grid dim of its own, sized at launch
            // (below); a LOCAL one cannot (the block size is fixed).
            if (!r.src(0).is_const() && !is_global) continue;
            std::vector<UOp>& into = !r.src(0).is_const() ? sym_global : is_global ? global : local;
            if (std::none_of(into.begin(), into.end(), [&](const UOp& x) { return x.same(r); }))
                into.push_back(r);
        }
    }
    // GROUP's range: threads of the block too (after any LOCAL ones).
    for (const UOp& u : nodes)
        if (u.op() == Op::Range && type_of(u) == AxisType::GroupReduce &&
            std::none_of(local.begin(), local.end(), [&](const UOp& x) { return x.same(u); }))
            local.push_back(u);
    // A warp's lane (the TC opt's LOCAL range of 32 that a WMMA's fragments use) must be the
    // block's x, innermost: the hardware's warp is 32 consecutive threads of the block, and an
    // mma.sync takes its lanes from them. (Laid out outermost behind other LOCAL ranges, a
    // "warp" was threads 32 apart, and each mma mixed the fragments of four warps.)
    const auto wmma =
        std::find_if(nodes.begin(), nodes.end(), [](const UOp& u) { return u.op() == Op::Wmma; });
    if (wmma != nodes.end()) {
        const auto lane = std::find_if(local.begin(), local.end(), [&](const UOp& r) {
            return size_of(r) == 32 && contains(wmma->src(0), r);
        });
        if (lane != local.end()) std::rotate(lane, lane + 1, local.end());
    }
    if (global.empty() && local.empty() && sym_global.empty()) return ast;
    std::vector<int64_t> gs, ls;
    for (const UOp& r : global) gs.push_back(size_of(r));
    for (const UOp& r : local) ls.push_back(size_of(r));
    int64_t threads = 1;
    for (int64_t s : ls) threads *= s;
    if (threads > lim.max_threads_per_block)
        fail("gpudims", "kernel " + kernel + ": " + std::to_string(threads) +
                            " threads per block exceed the device's limit of " +
                            std::to_string(lim.max_threads_per_block));
    std::array<int64_t, 3> block_limit = lim.max_block;
    block_limit[0] = std::min(block_limit[0], lim.max_threads_per_block);
    std::array<bool, 3> grid_used{false, false, false};
    const std::vector<UOp> gv = lay_out(gs, 0, lim.max_grid, grid, kernel, &grid_used);
    const std::vector<UOp> lv = lay_out(ls, 1, block_limit, block, kernel);
    // Ranges of symbolic size take the grid dims the fixed ones left free, z first, each when
    // its size is at least 1 and at most the dim's limit over the variable's whole range; the
    // launch reads the size from the variables. The others stay loops in every thread.
    std::vector<std::pair<UOp, UOp>> sym_values;
    if (grid_size != nullptr)
        for (size_t d = 3; d-- > 0 && !sym_global.empty();) {
            if (grid_used[d]) continue;
            const UOp r = sym_global.back();
            const UOp& size = r.src(0);
            if (size.vmin() < 1 || size.vmax() > lim.max_grid[d]) continue;
            sym_global.pop_back();
            (*grid_size)[d] = size;
            sym_values.emplace_back(r, special(0, static_cast<int64_t>(d), size));
        }

    // A store that does not depend on a local range is done by the range's first thread only.
    UOp out = ast;
    if (!local.empty()) {
        out = rebuild_graph(out, [&](const UOp& u, std::vector<UOp> srcs) {
            if (u.op() != Op::Store || u.src(0).op() != Op::Index)
                return with_srcs(u, std::move(srcs));
            UOp gate;
            for (const UOp& r : local)
                if (!contains(u.src(0), r)) {
                    const UOp first = r == 0;
                    gate = gate.is_null() ? first : (gate & first);
                }
            if (gate.is_null()) return with_srcs(u, std::move(srcs));
            srcs[0] = with_gate(srcs[0], gate);
            return with_srcs(u, std::move(srcs));
        });
    }
    // The ranges become indices in one walk; an END left with no range to close is its store.
    std::vector<detail::RangeValue> subs;
    for (size_t i = 0; i < global.size(); ++i) subs.push_back({global[i], gv[i], {}});
    for (size_t i = 0; i < local.size(); ++i) subs.push_back({local[i], lv[i], {}});
    for (const auto& [r, v] : sym_values) subs.push_back({r, v, {}});
    return detail::replace_ranges(out, subs, true);
}

DeviceLimits gpu_limits(const std::string& name, int sm) {
    DeviceLimits d;
    d.name = name;
    d.gpu = true;
    d.vector_bytes = 16; // ld.global.v4.f32
    d.threads = 1;
    d.has_shared = true;
    d.max_upcast = 16;
    d.max_threads_per_block = 1024;
    d.max_block = {1024, 1024, 64};
    d.max_grid = {2147483647, 65535, 65535};
    // With opt-in (dynamic shared memory over 48 KiB): an A100's 163 KiB, the least of the
    // sm_80-and-later parts (an H100 has 227; a CUDA device's limits say its own).
    d.shared_bytes = 163 * 1024;
    d.warp_size = 32;
    d.sm = sm;
    return d;
}

} // namespace tempura::codegen
