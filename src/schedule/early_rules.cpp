// The scheduler's early rewrites as a rule group (include/tempura/schedule/rules.hpp): movement
// folds and the split of big reductions, each rule a line with the algebra it states.
#include "tempura/schedule/rules.hpp"

namespace tempura {

namespace {

using namespace tempura::pattern;
using Ints = std::vector<int64_t>;

UOp movement(Op op, const UOp& x, Ints arg, const UOp& like) {
    return UOp::make(op, like.dtype(), {x}, std::move(arg), like.location());
}

// A movement op that changes nothing, or nullopt.
std::optional<UOp> identity_movement(const UOp& u) {
    const UOp& x = u.src(0);
    const Ints& a = u.arg_as<Ints>();
    switch (u.op()) {
    case Op::Reshape:
    case Op::Expand:
        if (u.shape() == x.shape()) return x;
        return std::nullopt;
    case Op::Permute:
        for (size_t i = 0; i < a.size(); ++i)
            if (a[i] != static_cast<int64_t>(i)) return std::nullopt;
        return x;
    case Op::Pad:
        for (int64_t p : a)
            if (p != 0) return std::nullopt;
        return x;
    case Op::Shrink:
        for (size_t i = 0; i < a.size() / 2; ++i)
            if (a[2 * i] != 0 || a[2 * i + 1] != x.shape()[i]) return std::nullopt;
        return x;
    case Op::Flip:
        for (int64_t f : a)
            if (f != 0) return std::nullopt;
        return x;
    default: return std::nullopt;
    }
}

// RESHAPE(RESHAPE(x, s1), s2) = RESHAPE(x, s2); EXPAND(EXPAND(x, s1), s2) = EXPAND(x, s2).
UOp outer_only(const UOp& u) { return movement(u.op(), u.src(0).src(0), u.arg_as<Ints>(), u); }

// PERMUTE(PERMUTE(x, p), q) = PERMUTE(x, p[q[i]]).
UOp compose_permutes(const UOp& u) {
    const Ints& q = u.arg_as<Ints>();
    const Ints& p = u.src(0).arg_as<Ints>();
    Ints r(q.size());
    for (size_t i = 0; i < q.size(); ++i) r[i] = p[static_cast<size_t>(q[i])];
    return movement(Op::Permute, u.src(0).src(0), std::move(r), u);
}

// The largest g <= 256 dividing n with n / g >= 256 (1: none).
int64_t groups_of(int64_t n) {
    for (int64_t c = 256; c > 1; --c)
        if (n % c == 0 && n / c >= 256) return c;
    return 1;
}

// Split reduce: a reduction to a few outputs over many elements has no output axis for THREAD
// to share among cores. The reduced elements, n = g * m, are reshaped into (g, m); a first
// kernel reduces the m into g partial results, a second reduces those. Reduced axes that are
// adjacent are split as one (a sum of a whole [512, 512] tensor is 256 partials of 1024);
// otherwise the reduced axis with the most groups is. Only for an associative combining op: the
// partial results regroup the reduction. When the axes are adjacent the partial reduce is never
// split again: it has g * outputs > 16 outputs, or (g <= 16) m has no divisor that would have
// made a larger g.
std::optional<UOp> split_reduce(const UOp& u) {
    constexpr int64_t kMinReduce = int64_t{1} << 16, kMaxOutputs = 16;
    const Shape& in = u.src(0).shape();
    const auto& ra = u.arg_as<ReduceArg>();
    if (!is_associative(ra.op) || ra.axes.empty()) return std::nullopt;
    int64_t red = 1;
    for (int64_t a : ra.axes) red *= in[static_cast<size_t>(a)];
    const int64_t outs = numel(in) / std::max<int64_t>(red, 1);
    if (red < kMinReduce || outs > kMaxOutputs) return std::nullopt;
    const auto first = static_cast<size_t>(ra.axes.front());
    const bool adjacent = static_cast<size_t>(ra.axes.back()) - first + 1 == ra.axes.size();
    Shape split_shape(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(first));
    Ints inner, outer;
    if (adjacent) {
        const int64_t g = groups_of(red);
        if (g == 1) return std::nullopt;
        split_shape.push_back(g);
        split_shape.push_back(red / g);
        split_shape.insert(split_shape.end(),
                           in.begin() + static_cast<std::ptrdiff_t>(ra.axes.back()) + 1, in.end());
        inner = {static_cast<int64_t>(first) + 1};
        outer = {static_cast<int64_t>(first)};
    } else {
        int64_t d = -1, g = 1;
        for (int64_t a : ra.axes) {
            const int64_t c = groups_of(in[static_cast<size_t>(a)]);
            if (c > g) g = c, d = a;
        }
        if (d < 0) return std::nullopt;
        split_shape.clear();
        for (size_t i = 0; i < in.size(); ++i) {
            if (static_cast<int64_t>(i) == d) split_shape.push_back(g);
            split_shape.push_back(static_cast<int64_t>(i) == d ? in[i] / g : in[i]);
        }
        for (int64_t a : ra.axes) inner.push_back(a < d ? a : a + 1);
        outer = {d};
    }
    const DType dt = u.dtype();
    const UOp x = UOp::make(Op::Reshape, dt, {u.src(0)}, split_shape);
    const UOp part = UOp::make(Op::Contiguous, dt,
                               {UOp::make(Op::ReduceAxis, dt, {x}, ReduceArg{ra.op, inner})});
    const UOp total = UOp::make(Op::ReduceAxis, dt, {part}, ReduceArg{ra.op, outer});
    return UOp::make(Op::Reshape, dt, {total}, u.shape());
}

inline constexpr OpSet kMovement =
    op_set<Op::Reshape, Op::Permute, Op::Expand, Op::Pad, Op::Shrink, Op::Flip>();

// clang-format off
inline constexpr auto early = rules(
    rule(ops_in<kMovement>(x), identity_movement),                          // a no-op move is x
    rule(op<Op::Reshape>(op<Op::Reshape>(x)), outer_only),                  // reshape of reshape
    rule(op<Op::Expand>(op<Op::Expand>(x)), outer_only),                    // expand of expand
    rule(op<Op::Permute>(op<Op::Permute>(x)), compose_permutes),            // p then q: p[q[i]]
    rule(op<Op::ReduceAxis>(x), split_reduce));                             // big -> two kernels
// clang-format on

} // namespace

const pattern::RuleTable& early_rewrites() { return pattern::frozen<early>(); }

} // namespace tempura
