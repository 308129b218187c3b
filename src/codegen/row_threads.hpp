#pragma once
// Private to src/codegen: a row-fused kernel (the scheduler's row fusion: softmax's max, sum and
// output loops over each row) on a GPU. One block a row: its T threads share each reduce
// through shared memory (as GROUP does) and then write T neighbouring outputs at a time, all on
// one thread index.
#include <vector>

#include "tempura/codegen/opts.hpp"
#include "tempura/ir/uop.hpp"

namespace tempura::codegen {

// A row-fused kernel, as the CPU heuristic (opts.cpp) and row_threads() both see it: j, the
// innermost of its END's ranges that opts can split (not expanded, of a constant size), and
// reds, the other such ranges its REDUCEs list, in the order they list them (OptKernel's axes);
// no REDUCE's value uses j (each reduce runs once a row, not once an output) and no load uses j
// together with a reduce range. A null j where `ast` is not one.
struct RowFusedPlan {
    UOp j;
    std::vector<UOp> reds;
};
RowFusedPlan row_fused_plan(const UOp& ast);

// Whether `ast` is a row-fused kernel that row_threads() lays out (the GPU heuristics then pick
// no opts for it).
bool row_threads_apply(const UOp& ast, const DeviceLimits& limits);

// The kernel with its innermost output range j and every reduce range r split over one range t
// of T threads (GroupReduce: lower_group_reduces gives each reduce its partials in shared
// memory): j = j' T + t, r = r' T + t. `ast` unchanged where row_threads_apply() is false.
UOp row_threads(const UOp& ast, const DeviceLimits& limits);

} // namespace tempura::codegen
