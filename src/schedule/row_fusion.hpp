// Row fusion (internal to the scheduler): reductions that feed one another over the same rows
// share one kernel. A reduce whose result is broadcast back along its reduced axes (softmax's
// max in x - max, layer_norm's mean in x - mean) is not materialized when its reader is, through
// elementwise ops only, either a reduce over the same input shape and axes (the sum of
// exp(x - max)) or the kernel's output, whose reduced axes are its innermost ones (the divide).
// The reduces then run as sequential loops over one output row inside the kernel (the linearizer
// places each loop at the outermost loop level that holds the ranges it uses).
#pragma once

#include <cstdint>
#include <vector>

#include "tempura/ir/shape.hpp"
#include "tempura/ir/uop.hpp"

namespace tempura::row_fusion {

// Where the scheduler's walk over one kernel's graph stands with respect to row fusion. A
// context is a row (nodes of the full shape reached through elementwise ops from the kernel's
// output or from a reduce's input) or a broadcast row (nodes of the reduced shape below an EXPAND
// that grows exactly the reduced axes).
struct State {
    int ctx = -1;       // the context (Walker::contexts), -1: none
    bool under = false; // inside a fused reduce's input: a reduce read here would be recomputed
    bool operator<(const State& o) const { return ctx != o.ctx ? ctx < o.ctx : under < o.under; }
};

class Walker {
  public:
    // The state at kernel root k (its output, or a materialized reduce: its input's row).
    State root(const UOp& k);
    // The state k's walk gives the sources of n reached in state s; n's own kind decides.
    State next(const UOp& n, const State& s);
    // Whether n, an EXPAND reached in state s, broadcasts a row's reduce back along the reduced
    // axes (then it does not count as a growing EXPAND: the reduce below it stays inlined).
    bool row_broadcast(const UOp& n, const State& s) const;
    // Whether n, a REDUCE_AXIS reached in state s, is a fused row reduce.
    bool fused(const UOp& n, const State& s) const;

  private:
    struct Context {
        Shape full;                // the row's full shape
        std::vector<int64_t> axes; // the reduced axes (of size > 1); empty for an output row
        bool output = false;       // the kernel's output row: any innermost axes may be reduced
        bool bcast = false;        // below a broadcast: nodes of the reduced shape
    };
    std::vector<Context> contexts_;
    int intern(Context c);
    // The axes an EXPAND grows (of size > 1 in its result, 1 in its source).
    static std::vector<int64_t> grown(const UOp& expand);
    std::vector<int64_t> grown_row_axes(const UOp& n, const State& s) const;
};

// Whether v, as a kernel's output, would fuse a row reduce (a layer_norm's output read by a
// matmul through an EXPAND: it is then worth its own kernel, one pass over each row, rather than
// its reduces each a kernel and its normalization computed again in the matmul). Looks through
// elementwise nodes only, on a walk (and Walker) of its own: the answer depends on v alone, so
// the scheduler keeps it for the rest of its call.
bool fuses_row(const UOp& v);

} // namespace tempura::row_fusion
