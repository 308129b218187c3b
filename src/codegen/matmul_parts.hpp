#pragma once
// Private to src/codegen: what the two matmul opts, TC (tensor_cores.cpp) and SMEM
// (smem_matmul.cpp), share: finding a matmul's parts in a kernel AST, the k-loop's staged copies
// into shared memory, and the epilogue's stores.
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tempura/codegen/opts.hpp"
#include "tempura/ir/uop.hpp"

namespace tempura::codegen::detail {

inline UOp idx(int64_t v) { return UOp::index(v); }

// Ranges and the values they take, in order.
using Subs = std::vector<std::pair<UOp, UOp>>;

// `u` with ranges replaced by values (in order).
UOp at(UOp u, const Subs& subs);

// An INDEX of `v` elements of `access`'s buffer (a LOAD's or STORE's INDEX) from its element at
// `subs`, gated by `gate` (none where null).
UOp vector_index(const UOp& access, int64_t v, const Subs& subs, const UOp& gate);

// `v` rounded up to a multiple of `to` (a padded size).
inline int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// Whether `access`'s (a LOAD's or STORE's) index is contiguous along `r` (coefficient 1) and a
// multiple of `v` where r is 0, so a multiple of v wherever r is: then the v elements from any r a
// multiple of v on are one aligned access. With `ungated`, an INDEX with a gate of its own (a
// third source) never is (SMEM's copies and stores; TC looks at the index alone).
bool runs_along(const UOp& access, const UOp& r, int64_t v, bool ungated);

// The elements a copy of `load` along `along` takes: the largest power of two from `max_vec` down
// to 2 that divides the copies a tile row (`run`), the size `size` and the padding
// (`padded` - `size`), so that a vector never straddles the padding, and that `load` runs along
// (runs_along(load, along, v, ungated)); 1 where none does.
int64_t vector_width(const UOp& load, const UOp& along, int64_t size, int64_t padded, int64_t run,
                     int64_t max_vec, bool ungated);

// p & q, either of them where the other is null.
UOp both(const UOp& p, const UOp& q);

// Whether `v` lies below `size`: null (always) where nothing is padded (`padded` == `size`).
UOp inside(const UOp& v, int64_t size, int64_t padded);

// The parts of a matmul kernel: its END and STORE, the one REDUCE (an ADD of a MUL) in the stored
// value, its range k, the two loads the opt found in the product, the output ranges i (in the
// first load only: rows) and j (in the second only: columns), the innermost such, and the others
// (a batch, which stays as it is).
struct Matmul {
    UOp end, store, red, k, loads[2], i, j;
    std::vector<UOp> batch;
};

// Step 1: the END, STORE, REDUCE and k of `ast`, or fail("opt", not_matmul). The caller then finds
// the two loads in red.src(0)'s sources (each opt takes its own dtypes) and sets `loads`.
Matmul find_matmul_reduce(const UOp& ast, const std::string& not_matmul);

// Step 2, once `mm.loads` are set: checks k and sorts the output ranges into i, j and the batch.
// A range the opts have split already fails with what + opt + " comes first: ..."; any other
// kernel that is not a matmul with not_matmul.
void find_matmul_axes(Matmul& mm, const std::string& opt, const std::string& what,
                      const std::string& not_matmul);

// The failures of a block that does not fit the device: too many threads, too much shared memory.
void check_block_threads(const DeviceLimits& lim, int64_t threads, const std::string& what);
void check_block_shared(const DeviceLimits& lim, int64_t shared, const std::string& what);

// The k-loop's copies of both operands' tiles into shared memory: `copy(operand, step, dst, skip,
// async)` gives operand 0's (A) or 1's (B) copies of k-step `step` into `dst` (its DEFINE_LOCAL,
// or that read through an AFTER), none where `skip` (non-null) is false, by cp.async where
// `async`. Without a pipeline (`pipe` 0): k-step kt's copies, then one BARRIER. With a pipeline of
// `pipe` tiles: the first min(lead, steps) k-steps' copies before the loop (tied to the batch
// ranges, so that each trip of a batch loop copies again), each a group; k-step kt waits for its
// own tile, a BARRIER, then issues k-step kt + lead's copies.
struct StagedCopies {
    UOp barrier;                // the k-step's BARRIER, after which its tiles are complete
    std::vector<UOp> in_flight; // the copies issued after it, which reads are ordered after
};
using CopyFn = std::function<std::vector<UOp>(int operand, const UOp& step, const UOp& dst,
                                              const UOp& skip, bool async)>;
StagedCopies staged_copies(int64_t pipe, int64_t lead, int64_t steps, const UOp& kt,
                           const std::vector<UOp>& batch, const UOp smem[2], const CopyFn& copy);

// `smem` read after the k-step's barrier and its copies in flight (so that those are issued
// first).
UOp read_after(const UOp& smem, const StagedCopies& copies);

// Where a batch axis of symbolic size may stay a loop in every thread (gpu dims gives it a grid
// dim only when one is free), the next batch's first copies must wait until every thread has read
// the last k-step's tiles: `accs` each after a barrier after the loop.
void barrier_after_batch_loop(std::vector<UOp>& accs, const std::vector<UOp>& batch);

// The epilogue (the stored value) with its own loads (a bias, a residual; not those in the
// REDUCE, whose nodes are `in_reduce`) gated by `gate`, so that at padded positions they read
// nothing: its value is computed before the store's IF. Unchanged where `gate` is null.
UOp gate_epilogue(const UOp& epilogue, const std::unordered_set<const UOpNode*>& in_reduce,
                  const UOp& gate);

// The epilogue's value at output (row, col): the REDUCE replaced by `acc`.
UOp epilogue_at(const Matmul& mm, const UOp& epilogue, const UOp& acc, const UOp& row,
                const UOp& col);

// The store of `values` (one, or neighbouring columns from `col` as one vector store) at output
// (row, col), gated by `gate` (none where null).
UOp store_at(const Matmul& mm, const UOp& row, const UOp& col, const UOp& gate,
             const std::vector<UOp>& values);

} // namespace tempura::codegen::detail
