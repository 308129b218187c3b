#pragma once
// Private to src/codegen: small facts about RANGEs and the one way to replace a range in a
// kernel AST, shared by the opts and the range stages.
#include <vector>

#include "tempura/ir/uop.hpp"

namespace tempura::codegen::detail {

inline AxisType type_of(const UOp& r) { return r.arg_as<RangeArg>().type; }
inline bool is_expanded_type(AxisType t) { return t == AxisType::Upcast || t == AxisType::Unroll; }
inline bool is_expanded(const UOp& r) {
    return r.op() == Op::Range && is_expanded_type(type_of(r));
}
inline int64_t size_of(const UOp& r) { return r.src(0).const_value(); }

// A RANGE of a constant size.
inline UOp make_range(int64_t size, int64_t id, AxisType t) {
    return UOp::make(Op::Range, DType::Index, {UOp::index(size)}, RangeArg{id, t});
}

// `index` (an INDEX) with `gate` ANDed into its gate (added when it has none).
inline UOp with_gate(const UOp& index, const UOp& gate) {
    std::vector<UOp> is(index.srcs().begin(), index.srcs().end());
    if (is.size() > 2)
        is[2] = is[2] & gate;
    else
        is.push_back(gate);
    return with_srcs(index, std::move(is));
}

// Whether `r` is `u` or one of its sources, transitively.
bool contains(const UOp& u, const UOp& r);

// `ast` with range `r` replaced by `value` where it is used as a value and by the list `repl`
// where an END or REDUCE names it.
UOp replace_range(const UOp& ast, const UOp& r, const UOp& value, const std::vector<UOp>& repl);

// Several ranges replaced in one walk over `ast`: each by its value, and by its `listed` ranges
// where an END or REDUCE names it. With `drop_bare_ends`, an END left with no range to close is
// its store. (A large kernel pays for each walk: GPU dims replaces all its ranges at once.)
struct RangeValue {
    UOp range, value;
    std::vector<UOp> listed;
};
UOp replace_ranges(const UOp& ast, const std::vector<RangeValue>& subs, bool drop_bare_ends);

// The REDUCEs of `ast` whose value uses a loop reduce range (AxisType::Reduce) that they do not
// reduce themselves: each sits in the loop of the REDUCE over that range and runs once an
// iteration (the max over a of the sum over k of x[a, k]). Found bottom up, without recursion;
// with more than 64 such ranges, every REDUCE (the safe answer for its callers).
std::vector<UOp> nested_reduces(const UOp& ast);

// One more than the largest RANGE axis id in `ast` (0 when it has none): a fresh axis id.
int64_t next_axis_id(const UOp& ast);
// The same from the kernel's toposort, when the caller has walked it already.
int64_t next_axis_id(const std::vector<UOp>& topo);

} // namespace tempura::codegen::detail
