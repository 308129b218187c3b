// Stage "apply opts": the optimization actions on a kernel's ranges and the CPU heuristics.
#include "tempura/codegen/opts.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "codegen/ranges.hpp"
#include "codegen/row_threads.hpp"
#include "symbolic/linear.hpp"
#include "tempura/codegen/stages.hpp"
#include "tempura/error.hpp"
#include "tempura/support/env.hpp"
#include "tempura/symbolic/simplify.hpp"

#include <unordered_set>

namespace tempura::codegen {

std::string_view opt_op_name(OptOp op) {
    switch (op) {
    case OptOp::Upcast: return "UPCAST";
    case OptOp::Unroll: return "UNROLL";
    case OptOp::Local: return "LOCAL";
    case OptOp::Group: return "GROUP";
    case OptOp::GroupTop: return "GROUPTOP";
    case OptOp::Thread: return "THREAD";
    case OptOp::NoLocals: return "NOLOCALS";
    case OptOp::Swap: return "SWAP";
    case OptOp::PadTo: return "PADTO";
    case OptOp::Tc: return "TC";
    case OptOp::Smem: return "SMEM";
    }
    return "?";
}

std::string to_string(const Opt& o) {
    if (o.op == OptOp::NoLocals) return "NOLOCALS";
    return std::string(opt_op_name(o.op)) + "(" + std::to_string(o.axis) + ", " +
           std::to_string(o.arg) + ")";
}

std::string to_string(const std::vector<Opt>& opts) {
    std::string s = "[";
    for (size_t i = 0; i < opts.size(); ++i) s += (i ? ", " : "") + to_string(opts[i]);
    return s + "]";
}

bool noopt_requested() { return env::get_flag("TEMPURA_NOOPT"); }

bool wgmma_offered(const DeviceLimits& lim) {
    return lim.gpu && lim.sm >= 90 && env::get_int("TEMPURA_WGMMA", 1, 0, 1) == 1;
}

namespace {

// The heuristics' kernels, kept while they choose a kernel's opts (OptKernel::apply records each
// one it makes): apply_opts then takes the one that matches instead of applying the opts again,
// a second walk over every node of the kernel for each opt.
struct HeuristicsRun {
    struct Applied {
        UOp from;
        DeviceLimits limits;
        std::vector<Opt> opts;
        UOp ast;
    };
    static constexpr size_t kKept = 4;
    bool recording = false;
    std::vector<Applied> kept; // the last kKept, oldest first
};
thread_local HeuristicsRun t_heuristics;

std::vector<Opt> choose_opts(const UOp& ast, const DeviceLimits& lim);

using detail::contains;
using detail::make_range;
using detail::replace_range;
using detail::size_of;
using detail::type_of;
bool is_expanded(AxisType t) { return detail::is_expanded_type(t); }

// The END of a kernel (null when the output is a single element and there is no loop).
UOp find_end(const UOp& ast) {
    for (const UOp& s : ast.srcs())
        if (s.op() == Op::End) return s;
    return UOp();
}

// The kernel with its END's ranges in `order` (expanded ranges keep their place at the end).
UOp reorder_end(const UOp& ast, const std::vector<UOp>& order) {
    const UOp end = find_end(ast);
    std::vector<UOp> srcs{end.src(0)};
    // Loops of a symbolic size are not opt axes: they stay outermost.
    for (size_t i = 1; i < end.srcs().size(); ++i)
        if (!is_expanded(type_of(end.src(i))) && !end.src(i).src(0).is_const())
            srcs.push_back(end.src(i));
    srcs.insert(srcs.end(), order.begin(), order.end());
    for (size_t i = 1; i < end.srcs().size(); ++i)
        if (is_expanded(type_of(end.src(i)))) srcs.push_back(end.src(i));
    const UOp new_end = end.replace_srcs(std::move(srcs));
    if (new_end.same(end)) return ast; // the order it has: no walk over the kernel
    return ast.substitute({{end.get(), new_end}});
}

// PADTO's masks: every INDEX that uses `r` (under a LOAD or the STORE) is gated by `valid`, and
// every REDUCE over `r` is fed its identity where `valid` is false.
UOp mask_padded(const UOp& ast, const UOp& r, const UOp& valid) {
    UOpMap<bool> uses; // whether the original node depends on r
    return rebuild_graph(ast, [&](const UOp& u, std::vector<UOp> srcs) {
        bool use = u.same(r);
        for (const UOp& s : u.srcs()) use = use || uses.at(s);
        uses.emplace(u, use);
        if (u.op() == Op::Index && uses.at(u.src(1))) {
            const UOp gate = srcs.size() == 3 ? (srcs[2] & valid) : valid;
            return UOp::make(Op::Index, u.dtype(), {srcs[0], srcs[1], gate});
        }
        if (u.op() == Op::Reduce)
            for (size_t i = 1; i < u.srcs().size(); ++i)
                if (u.src(i).same(r)) {
                    srcs[0] = UOp::alu(
                        Op::Where, {valid, srcs[0], reduce_identity(u.arg_as<Op>(), u.dtype())});
                    break;
                }
        return with_srcs(u, std::move(srcs));
    });
}

} // namespace

OptKernel::OptKernel(UOp ast, DeviceLimits limits)
    : from_(ast), ast_(std::move(ast)), limits_(std::move(limits)) {
    // Opts never add or remove a load or a store: whether the kernel reads what it writes is
    // decided once, here, not on every refresh.
    serial_ = reads_what_it_writes(ast_);
    refresh();
}

bool reads_what_it_writes(const UOp& ast) {
    const std::vector<UOp> topo = ast.toposort();
    std::unordered_set<const UOpNode*> written;
    for (const UOp& u : topo)
        if (u.op() == Op::Store && u.src(0).op() == Op::Index && u.src(0).src(0).op() == Op::Param)
            written.insert(u.src(0).src(0).get());
    for (const UOp& u : topo) {
        if (u.op() != Op::Load || u.src(0).op() != Op::Index) continue;
        UOp base = u.src(0).src(0);
        if (base.op() == Op::After) base = base.src(0);
        if (written.count(base.get()) != 0) return true;
    }
    return false;
}

void OptKernel::refresh() {
    axes_.clear();
    n_out_ = 0;
    if (serial_) return;
    // One walk over the kernel finds the axis ids in use and the reduce ranges.
    const std::vector<UOp> topo = ast_.toposort();
    next_axis_ = std::max(next_axis_, detail::next_axis_id(topo));
    if (const UOp end = find_end(ast_); !end.is_null())
        for (size_t i = 1; i < end.srcs().size(); ++i)
            if (!is_expanded(type_of(end.src(i))) && end.src(i).src(0).is_const())
                axes_.push_back(end.src(i));
    n_out_ = axes_.size();
    for (const UOp& u : topo)
        if (u.op() == Op::Reduce)
            for (size_t i = 1; i < u.srcs().size(); ++i) {
                const UOp& r = u.src(i);
                // A symbolic size (a variable's loop) is not an axis the opts can split.
                if (is_expanded(type_of(r)) || !r.src(0).is_const()) continue;
                if (std::none_of(axes_.begin(), axes_.end(),
                                 [&](const UOp& a) { return a.same(r); }))
                    axes_.push_back(r);
            }
}

std::vector<int64_t> OptKernel::shape() const {
    std::vector<int64_t> s;
    for (const UOp& a : axes_) s.push_back(size_of(a));
    return s;
}

// The upcast elements an UNROLL of reduce range r multiplies: the expanded ranges that the
// REDUCEs over r use (their values, not descending into other REDUCEs, whose results are one
// value each here). A matmul's reduce uses every upcast output range; a row-fused kernel's max
// over a row uses none of its output loop's lanes, nor the sum's.
namespace {
int64_t reduce_upcast_size(const UOp& ast, const UOp& r) {
    int64_t n = 1;
    std::unordered_set<const UOpNode*> counted;
    for (const UOp& red : ast.toposort()) {
        if (red.op() != Op::Reduce) continue;
        bool over = false;
        for (size_t i = 1; i < red.srcs().size(); ++i) over = over || red.src(i).same(r);
        if (!over) continue;
        std::unordered_set<const UOpNode*> seen;
        std::vector<UOp> stack(red.srcs().begin(), red.srcs().end());
        while (!stack.empty()) {
            const UOp u = stack.back();
            stack.pop_back();
            if (!seen.insert(u.get()).second) continue;
            if (u.op() == Op::Range && is_expanded(type_of(u)) && counted.insert(u.get()).second)
                n *= size_of(u);
            if (u.op() == Op::Reduce) continue;
            for (const UOp& s : u.srcs()) stack.push_back(s);
        }
    }
    return n;
}
} // namespace

int64_t OptKernel::upcast_size() const {
    int64_t n = 1;
    for (const UOp& u : ast_.toposort())
        if (u.op() == Op::Range && is_expanded(type_of(u))) n *= size_of(u);
    return n;
}

int64_t OptKernel::thread_count() const {
    for (const UOp& a : axes_)
        if (type_of(a) == AxisType::Thread) return size_of(a);
    return 1;
}

bool OptKernel::has_vector_axis() const {
    for (const UOp& u : ast_.toposort())
        if (u.op() == Op::Range && is_expanded(type_of(u))) return true;
    return false;
}

void OptKernel::check_axis(const Opt& o, bool output, bool reduce) const {
    const std::string what = to_string(o) + ": ";
    if (o.axis < 0 || o.axis >= static_cast<int64_t>(axes_.size()))
        fail("opt", what + "axis " + std::to_string(o.axis) + " out of range (the kernel has " +
                        std::to_string(axes_.size()) + " axes)");
    const bool is_out = o.axis < static_cast<int64_t>(n_out_);
    if (is_out && !output)
        fail("opt",
             what + "axis " + std::to_string(o.axis) + " is an output axis, not a reduce axis");
    if (!is_out && !reduce)
        fail("opt",
             what + "axis " + std::to_string(o.axis) + " is a reduce axis, not an output axis");
}

UOp OptKernel::split(const UOp& r, int64_t amount, AxisType inner_type, bool thread_outer) {
    const int64_t n = size_of(r);
    const RangeArg ra = r.arg_as<RangeArg>();
    // The part that stays a plain loop keeps the axis id (opts and heuristics find it by id).
    const UOp inner = make_range(amount, thread_outer ? ra.axis_id : next_axis_++, inner_type);
    if (n == amount) {
        ast_ = replace_range(ast_, r, inner, {inner});
        return inner;
    }
    const UOp outer = make_range(n / amount, thread_outer ? next_axis_++ : ra.axis_id,
                                 thread_outer ? AxisType::Thread : ra.type);
    const UOp value = outer * UOp::index(amount) + inner;
    ast_ = replace_range(ast_, r, value, {outer, inner});
    return thread_outer ? outer : inner;
}

bool OptKernel::try_apply(const Opt& o) {
    try {
        apply(o);
        return true;
    } catch (const Error&) {
        return false;
    }
}

void OptKernel::apply(const Opt& o) {
    const std::string what = to_string(o) + ": ";
    if (serial_)
        fail("opt", what + "the kernel reads what it writes (a scatter): it runs serially, with no "
                           "opts");
    for (const Opt& p : applied_) {
        if (p.op == OptOp::Tc && p.axis != 0)
            fail("opt", what + to_string(p) +
                            " staged the operands through shared memory for its block of warps: "
                            "no opt may follow it");
        if (p.op == OptOp::Smem)
            fail("opt", what + to_string(p) +
                            " staged the operands through shared memory for its block of "
                            "threads: no opt may follow it");
    }
    const UOp before = ast_;
    const int64_t next_before = next_axis_;
    auto amount_ok = [&](const UOp& r) {
        if (o.arg < 2)
            fail("opt", what + "the amount must be at least 2, got " + std::to_string(o.arg));
        if (size_of(r) % o.arg != 0)
            fail("opt", what + "axis " + std::to_string(o.axis) + " has size " +
                            std::to_string(size_of(r)) + ", not a multiple of " +
                            std::to_string(o.arg) + " (PADTO first)");
    };
    try {
        switch (o.op) {
        case OptOp::Upcast:
        case OptOp::Unroll: {
            const bool up = o.op == OptOp::Upcast;
            check_axis(o, up, !up);
            const UOp r = axes_[static_cast<size_t>(o.axis)];
            if (type_of(r) == AxisType::Thread)
                fail("opt", what + "axis " + std::to_string(o.axis) + " is the THREAD axis");
            amount_ok(r);
            if (up)
                for (const Opt& p : applied_)
                    if (p.op == OptOp::Group || p.op == OptOp::GroupTop)
                        fail("opt", what +
                                        "an output UPCAST in a kernel with a grouped reduce "
                                        "(one shared partial per thread) is not implemented yet");
            const int64_t have = up ? upcast_size() : reduce_upcast_size(ast_, r);
            if (have * o.arg > limits_.max_upcast)
                fail("opt", what + "the kernel would have " + std::to_string(have * o.arg) +
                                " upcast elements, more than the limit of " +
                                std::to_string(limits_.max_upcast));
            split(r, o.arg, up ? AxisType::Upcast : AxisType::Unroll, false);
            break;
        }
        case OptOp::Local: {
            check_axis(o, true, false);
            if (no_locals_) fail("opt", what + "NOLOCALS was applied before");
            for (const Opt& p : applied_)
                if (p.op == OptOp::Group || p.op == OptOp::GroupTop)
                    fail("opt", what + "the kernel has a grouped reduce already (one group of "
                                       "threads per kernel)");
            const UOp r = axes_[static_cast<size_t>(o.axis)];
            if (type_of(r) != AxisType::Loop && type_of(r) != AxisType::Global)
                fail("opt", what + "axis " + std::to_string(o.axis) + " is not a plain loop");
            amount_ok(r);
            if (o.arg == size_of(r) && !limits_.gpu)
                fail("opt", what + "blocking axis " + std::to_string(o.axis) +
                                " by its whole size changes nothing");
            const UOp inner = split(r, o.arg, AxisType::Local, false);
            refresh();
            std::vector<UOp> order;
            for (size_t i = 0; i < n_out_; ++i)
                if (!axes_[i].same(inner)) order.push_back(axes_[i]);
            order.push_back(inner);
            ast_ = reorder_end(ast_, order);
            break;
        }
        case OptOp::Group:
        case OptOp::GroupTop: {
            check_axis(o, false, true);
            if (!limits_.has_shared)
                fail("opt",
                     what + "the " + limits_.name +
                         " device has no shared memory for a grouped reduce (use THREAD on an "
                         "output axis, or UNROLL)");
            const UOp r = axes_[static_cast<size_t>(o.axis)];
            if (type_of(r) != AxisType::Reduce)
                fail("opt",
                     what + "axis " + std::to_string(o.axis) + " is not a plain reduce loop");
            amount_ok(r);
            for (const UOp& u : ast_.toposort())
                if (u.op() == Op::Range &&
                    (type_of(u) == AxisType::GroupReduce || type_of(u) == AxisType::Local))
                    fail("opt",
                         what + "the kernel has " +
                             (type_of(u) == AxisType::Local ? "LOCAL axes" : "a grouped reduce") +
                             " already (one group of threads per kernel)");
            for (const Opt& p : applied_)
                if (p.op == OptOp::Upcast)
                    fail("opt", what + "a grouped reduce in a kernel with an output UPCAST (one "
                                       "shared partial per thread) is not implemented yet");
            if (o.arg > limits_.max_threads_per_block)
                fail("opt", what + std::to_string(o.arg) + " threads exceed the device's " +
                                std::to_string(limits_.max_threads_per_block) + " per block");
            // The group's threads share the reduce: GROUP interleaves them (thread t takes
            // t, t + g, ...: neighbouring threads read neighbouring elements), GROUPTOP gives
            // each a contiguous run.
            const int64_t n = size_of(r), g = o.arg;
            const RangeArg ra = r.arg_as<RangeArg>();
            const UOp grp = make_range(g, next_axis_++, AxisType::GroupReduce);
            if (n == g) {
                ast_ = replace_range(ast_, r, grp, {grp});
            } else {
                const UOp rest = make_range(n / g, ra.axis_id, AxisType::Reduce);
                const UOp value = o.op == OptOp::GroupTop ? grp * UOp::index(n / g) + rest
                                                          : rest * UOp::index(g) + grp;
                ast_ = replace_range(ast_, r, value, {rest, grp});
            }
            break;
        }
        case OptOp::Thread: {
            check_axis(o, true, false);
            const UOp r = axes_[static_cast<size_t>(o.axis)];
            if (thread_count() > 1) fail("opt", what + "the kernel has a THREAD axis already");
            if (type_of(r) != AxisType::Loop && type_of(r) != AxisType::Global)
                fail("opt", what + "axis " + std::to_string(o.axis) + " is not a plain loop");
            if (o.arg > limits_.threads)
                fail("opt",
                     what + "the device has " + std::to_string(limits_.threads) + " threads");
            amount_ok(r);
            UOp t;
            if (size_of(r) == o.arg) {
                t = make_range(o.arg, r.arg_as<RangeArg>().axis_id, AxisType::Thread);
                ast_ = replace_range(ast_, r, t, {t});
            } else {
                t = split(r, size_of(r) / o.arg, AxisType::Loop, true);
            }
            refresh();
            std::vector<UOp> order{t};
            for (size_t i = 0; i < n_out_; ++i)
                if (!axes_[i].same(t)) order.push_back(axes_[i]);
            ast_ = reorder_end(ast_, order);
            break;
        }
        case OptOp::NoLocals:
            for (const Opt& p : applied_)
                if (p.op == OptOp::Local) fail("opt", "NOLOCALS: LOCAL was applied before");
            no_locals_ = true;
            break;
        case OptOp::Swap: {
            check_axis(o, true, false);
            if (o.arg < 0 || o.arg >= static_cast<int64_t>(axes_.size()))
                fail("opt", what + "axis " + std::to_string(o.arg) +
                                " out of range (the kernel has " + std::to_string(axes_.size()) +
                                " axes)");
            if (o.arg >= static_cast<int64_t>(n_out_))
                fail("opt", what + "axis " + std::to_string(o.arg) +
                                " is a reduce axis, not an output axis");
            if (o.axis == o.arg) fail("opt", what + "an axis cannot be swapped with itself");
            std::vector<UOp> order(axes_.begin(), axes_.begin() + static_cast<long>(n_out_));
            const auto a = static_cast<size_t>(o.axis), b = static_cast<size_t>(o.arg);
            if (type_of(order[a]) == AxisType::Thread || type_of(order[b]) == AxisType::Thread)
                fail("opt", what + "the THREAD axis stays outermost");
            std::swap(order[a], order[b]);
            ast_ = reorder_end(ast_, order);
            break;
        }
        case OptOp::Tc:
            if (!applied_.empty())
                fail("opt", what + "TC comes first: the kernel has opts applied already");
            ast_ = tensor_core_ast(ast_, limits_, next_axis_, o.axis, o.arg, what);
            break;
        case OptOp::Smem:
            if (!applied_.empty())
                fail("opt", what + "SMEM comes first: the kernel has opts applied already");
            ast_ = smem_matmul_ast(ast_, limits_, next_axis_, o.axis, o.arg, what);
            break;
        case OptOp::PadTo: {
            check_axis(o, true, true);
            const UOp r = axes_[static_cast<size_t>(o.axis)];
            if (o.arg < 2)
                fail("opt", what + "the amount must be at least 2, got " + std::to_string(o.arg));
            const int64_t n = size_of(r);
            const int64_t m = (n + o.arg - 1) / o.arg * o.arg;
            if (m == n)
                fail("opt", what + "axis " + std::to_string(o.axis) + " has size " +
                                std::to_string(n) + ", a multiple of " + std::to_string(o.arg) +
                                " already");
            if (m > 2 * n)
                fail("opt", what + "padding axis " + std::to_string(o.axis) + " from " +
                                std::to_string(n) + " to " + std::to_string(m) +
                                " would more than double it");
            const UOp p = make_range(m, r.arg_as<RangeArg>().axis_id, type_of(r));
            ast_ = replace_range(ast_, r, p, {p});
            ast_ = mask_padded(ast_, p, p < UOp::index(n));
            break;
        }
        }
    } catch (...) {
        ast_ = before;
        next_axis_ = next_before;
        refresh();
        throw;
    }
    applied_.push_back(o);
    refresh();
    if (t_heuristics.recording) {
        auto& kept = t_heuristics.kept;
        if (kept.size() == HeuristicsRun::kKept) kept.erase(kept.begin());
        kept.push_back({from_, limits_, applied_, ast_});
    }
}

UOp apply_opts(const UOp& ast, const std::vector<Opt>& opts, const DeviceLimits& limits) {
    // The heuristics just applied these opts to this AST on this thread (the usual case: the
    // apply-opts stage follows them): their result, instead of every opt applied again.
    for (const HeuristicsRun::Applied& a : t_heuristics.kept)
        if (a.from.same(ast) && a.opts == opts && a.limits == limits) {
            UOp out = a.ast;
            t_heuristics.kept.clear();
            return out;
        }
    t_heuristics.kept.clear();
    if (opts.empty()) return ast;
    OptKernel k(ast, limits);
    for (const Opt& o : opts) k.apply(o);
    return k.ast();
}

std::vector<std::pair<UOp, int64_t>> linear_terms(const UOp& e) {
    std::vector<std::pair<UOp, int64_t>> out;
    if (!e.dtype().is_int() || e.dtype().count != 1) {
        out.emplace_back(e, 1);
        return out;
    }
    for (const symbolic::LinTerm& t : symbolic::decompose(e).terms)
        out.emplace_back(t.mono, t.coef);
    return out;
}

int64_t linear_coefficient(const UOp& idx, const UOp& r) {
    int64_t c = 0;
    for (const auto& [mono, coef] : linear_terms(simplify(idx))) {
        if (!contains(mono, r)) continue;
        if (!mono.same(r)) return -1;
        c += coef;
    }
    return c;
}

namespace {

struct Access {
    UOp idx;
    bool store;
};

// The position of the axis with id `id` among k's axes, -1 when it has none.
int64_t index_of(const OptKernel& k, int64_t id) {
    for (size_t i = 0; i < k.axes().size(); ++i)
        if (k.axes()[i].arg_as<RangeArg>().axis_id == id) return static_cast<int64_t>(i);
    return -1;
}

std::vector<Access> accesses(const UOp& ast, DType& out_dtype) {
    std::vector<Access> out;
    for (const UOp& u : ast.toposort()) {
        if (u.op() == Op::Load && u.src(0).op() == Op::Index && u.src(0).src(0).op() == Op::Param)
            out.push_back({u.src(0).src(1), false});
        if (u.op() == Op::Store) {
            out.push_back({u.src(0).src(1), true});
            out_dtype = u.src(1).dtype();
        }
    }
    return out;
}

// The GPU's tiling of a matmul-like kernel that tensor cores did not take (float32 operands):
// a reduce, and output axes along which one operand is
// broadcast while another varies (a matmul's rows for its right operand, its columns for its
// left). Each thread computes a 4 x 4 tile of outputs in registers (UPCAST on two such axes, the
// innermost first: the store's columns), so every loaded value serves four accumulators; a block
// of up to 16 x 16 threads (LOCAL on the same axes) reads neighbouring rows and columns, which
// the caches share. Returns whether it applied anything.
bool gpu_matmul_tiling(OptKernel& k, const std::vector<Access>& acc, const DeviceLimits& lim) {
    const size_t n_out = k.output_axes();
    if (k.axes().size() <= n_out || n_out < 2) return false;
    // The blockable output axes, innermost first.
    std::vector<int64_t> ids;
    for (size_t i = n_out; i-- > 0 && ids.size() < 2;) {
        const UOp& r = k.axes()[i];
        if (!r.src(0).is_const() || size_of(r) % 4 != 0 || size_of(r) < 8) continue;
        bool bcast = false, used = false;
        for (const Access& a : acc) {
            if (a.store) continue;
            const int64_t c = linear_coefficient(a.idx, r);
            (c == 0 ? bcast : used) = true;
        }
        if (bcast && used) ids.push_back(r.arg_as<RangeArg>().axis_id);
    }
    if (ids.size() < 2) return false;
    // Each axis that takes its tile (the upcast limit may refuse the second) gets its threads.
    size_t tiled = 0;
    while (tiled < ids.size() && k.try_apply({OptOp::Upcast, index_of(k, ids[tiled]), 4})) ++tiled;
    if (tiled == 0) return false;
    int64_t threads = 1;
    for (size_t t = 0; t < tiled; ++t) {
        const int64_t i = index_of(k, ids[t]);
        const int64_t n = size_of(k.axes()[static_cast<size_t>(i)]);
        for (int64_t d = 16; d >= 2; d /= 2)
            if (n % d == 0 && threads * d <= std::min<int64_t>(256, lim.max_threads_per_block) &&
                k.try_apply({OptOp::Local, i, d})) {
                threads *= d;
                break;
            }
    }
    return true;
}

// A row-fused kernel (the scheduler's row fusion: softmax's max, sum and output loops over each
// row): reduce axes that no access uses together with the innermost output axis, which the
// store writes contiguously. Every loop over the row gets the same vector lanes (UPCAST of the
// output axis, UNROLL of each reduce axis read contiguously: the expander makes all of them
// lanes), and the rows are shared by the threads. Returns whether it applied.
bool row_fused_cpu_opts(const UOp& ast, OptKernel& k, const std::vector<Access>& acc, int64_t lanes,
                        const DeviceLimits& lim, int64_t work) {
    const size_t n_out = k.output_axes();
    if (n_out == 0 || k.axes().size() == n_out) return false;
    // No reduce's value uses j: each reduce runs once a row (a scan's block sums do not). (k has
    // no opts yet: the plan's j is k's innermost output axis, its reds k's reduce axes.)
    const RowFusedPlan plan = row_fused_plan(ast);
    if (plan.j.is_null()) return false;
    const UOp& j = plan.j;
    const std::vector<UOp>& reds = plan.reds;
    bool store_contig = false;
    std::vector<bool> contig(reds.size(), false), ok(reds.size(), true);
    for (const Access& a : acc) {
        const int64_t cj = linear_coefficient(a.idx, j);
        if (a.store) {
            store_contig = cj == 1;
            continue;
        }
        if (cj != 0 && cj != 1) return false;
        for (size_t r = 0; r < reds.size(); ++r) {
            const int64_t cr = linear_coefficient(a.idx, reds[r]);
            if (cr == 1) contig[r] = true;
            if (cr != 0 && cr != 1) ok[r] = false;
        }
    }
    if (!store_contig) return false;
    int64_t amt = 0;
    for (int64_t d = std::min(lanes, size_of(j)); d >= 4 && amt == 0; --d)
        if (size_of(j) % d == 0) amt = d;
    if (amt == 0) return false;
    std::vector<int64_t> ids;
    for (const UOp& r : reds) ids.push_back(r.arg_as<RangeArg>().axis_id);
    if (!k.try_apply({OptOp::Upcast, static_cast<int64_t>(n_out - 1), amt})) return false;
    for (size_t r = 0; r < reds.size(); ++r) {
        const int64_t i = index_of(k, ids[r]);
        if (i >= 0 && contig[r] && ok[r] && reds[r].src(0).is_const() &&
            size_of(reds[r]) % amt == 0)
            k.try_apply({OptOp::Unroll, i, amt});
    }
    if (lim.threads > 1 && work >= (int64_t{1} << 17))
        for (size_t i = 0; i < k.output_axes(); ++i)
            if (size_of(k.axes()[i]) % lim.threads == 0 &&
                k.try_apply({OptOp::Thread, static_cast<int64_t>(i), lim.threads}))
                break;
    return true;
}

} // namespace

bool tc_warps_2x2(OptKernel& k) {
    std::vector<int64_t> at;
    for (size_t i = 0; i < k.output_axes(); ++i)
        if (type_of(k.axes()[i]) != AxisType::Local) at.push_back(static_cast<int64_t>(i));
    if (at.size() < 2) return false;
    bool both = true;
    for (const int64_t a : {at.back(), at[at.size() - 2]})
        both = size_of(k.axes()[static_cast<size_t>(a)]) % 2 == 0 &&
               k.try_apply({OptOp::Local, a, 2}) && both;
    return both;
}

std::vector<Opt> heuristic_opts(const UOp& ast, const DeviceLimits& lim) {
    // The kernels the heuristics build are kept (the last few, on this thread) for apply_opts.
    t_heuristics.kept.clear();
    t_heuristics.recording = true;
    struct Stop {
        ~Stop() { t_heuristics.recording = false; }
    } stop;
    return choose_opts(ast, lim);
}

namespace {

std::vector<Opt> choose_opts(const UOp& ast, const DeviceLimits& lim) {
    OptKernel k(ast, lim);
    if (k.axes().empty()) return {};
    // A row-fused kernel on a GPU: one block a row, laid out by row_threads() (group reduce).
    if (row_threads_apply(ast, lim)) return {};
    if (lim.gpu) {
        // A matmul of 16-bit floats: tensor cores (padded where the sizes are not multiples of
        // the mma's), staged through shared memory where 128 x 128 blocks tile the output (below).
        // Else each warp takes up to 4 x 8 blocks of 16 x 8 (64 x 64 outputs; a fragment then
        // serves 8 or 4 mma, not 1), as many as divide the block rows and columns, and a thread
        // block 2 x 2 warps where they divide further. On an H100, float16 4096^3 (bench_gpu and
        // a sweep of TC tiles): 1 x 1 12.3 TFLOP/s, 4 x 4 43.8, 8 x 4 51.8, 4 x 8 76.9, and 92.4
        // with the fragments' 16-bit pairs loaded as one word; 8 x 8 spills (255 registers). 2 x 4
        // and 4 x 2 warps a block were slower (81-84).
        if (OptKernel probe(ast, lim); probe.try_apply({OptOp::Tc, 0, 0})) {
            // After TC the output axes end with the block rows, the block columns, the lane.
            const auto loops = [](const OptKernel& o) {
                std::vector<int64_t> at;
                for (size_t i = 0; i < o.output_axes(); ++i)
                    if (type_of(o.axes()[i]) != AxisType::Local)
                        at.push_back(static_cast<int64_t>(i));
                return at;
            };
            std::vector<int64_t> at = loops(probe);
            if (at.size() < 2) return probe.applied();
            const UOp& rows_axis = probe.axes()[static_cast<size_t>(at[at.size() - 2])];
            const UOp& cols_axis = probe.axes()[static_cast<size_t>(at.back())];
            const int64_t rows = size_of(rows_axis), cols = size_of(cols_axis);
            // M and N themselves (rows and cols count blocks of 16 x 8, padded up): the output
            // axes TC kept the ids of.
            const auto unpadded = [&](const UOp& r) {
                const int64_t id = r.arg_as<RangeArg>().axis_id;
                for (const UOp& a : k.axes())
                    if (a.arg_as<RangeArg>().axis_id == id) return size_of(a);
                return int64_t{0};
            };
            const int64_t m = unpadded(rows_axis), n = unpadded(cols_axis);
            // Where whole thread blocks tile the output, the operands staged through shared memory
            // by a cp.async pipeline of 3 tiles, k-steps of 32 or 64, each warp 64 x 64 outputs
            // (TcStage): the largest blocks that still make enough of them to fill a GPU (128,
            // about an H100's 132 SMs), since every block reads its rows of A and columns of B
            // through L2. On an H100, float16 4096^3 (a sweep of the staged variants, medians of
            // 7 x 20 runs): float32 accumulation TC(3442, 72) (256 x 128 blocks) 0.43 ms, the
            // best of 128 x 128 TC(3422, 72) 0.44, TC(4222, 72) 0.46 (ncu: L2 at 88% of its
            // throughput, the limit, and 66% with 256 x 128); float16 accumulation (half the
            // registers) TC(3244, 72) (256 x 256) 0.41 ms, TC(3224, 72) 0.41. Unstaged TC(0, 72)
            // with 2 x 2 warps: 1.43 ms.
            bool f16_acc = false;
            for (const UOp& u : ast.toposort())
                if (u.op() == Op::Reduce) f16_acc = u.dtype() == DType::Float16;
            struct Staged {
                int64_t stage, tiles, min_blocks;
            };
            const std::vector<Staged> staged =
                f16_acc ? std::vector<Staged>{{3244, 72, 128}, {3224, 72, 128}, {3422, 72, 1}}
                        : std::vector<Staged>{{3442, 72, 128}, {3422, 72, 1}};
            // Hopper (unless TEMPURA_WGMMA=0): blocks of 128 x 256, two warpgroups of 64 x 256
            // reading their operands from shared memory (wgmma), k-steps of 64 copied 2 steps ahead
            // by a cp.async pipeline of 4 tiles (192 KiB; 3 tiles, 144 KiB, where the device has
            // less), the last k-step's mma kept in flight: the shape of CUTLASS's default Hopper
            // GEMM tile. Not yet timed on a GPU.
            if (wgmma_offered(lim) && m % 128 == 0 && n % 256 == 0 && m / 128 * (n / 256) >= 128)
                for (const int64_t stage : {24421, 23421})
                    if (OptKernel s(ast, lim); s.try_apply({OptOp::Tc, stage, 256}))
                        return s.applied();
            for (const Staged& c : staged) {
                const TcStage st = TcStage::decode(c.stage);
                // Blocks of wm x wn warps of 64 x 64 that tile M x N, no padding.
                const int64_t bm = 64 * st.wm, bn = 64 * st.wn;
                if (m == 0 || n == 0 || m % bm != 0 || n % bn != 0 ||
                    m / bm * (n / bn) < c.min_blocks)
                    continue;
                if (OptKernel s(ast, lim); s.try_apply({OptOp::Tc, c.stage, c.tiles}))
                    return s.applied();
            }
            int64_t tm = 4, tn = 8;
            while (tm > 1 && rows % tm != 0) tm /= 2;
            while (tn > 1 && cols % tn != 0) tn /= 2;
            if (!k.try_apply({OptOp::Tc, 0, tm == 1 && tn == 1 ? 0 : 16 * tm + tn}))
                return probe.applied();
            tc_warps_2x2(k);
            return k.applied();
        }
        const size_t n_out = k.output_axes();
        // A reduce shared by a group of threads through shared memory: GROUP, interleaved
        // (thread t takes t, t + g, ...), so that a warp's loads are neighbouring elements, then
        // the rest of the reduce UNROLLed (up to 8, or a rest of 16 whole), so that each thread
        // has that many loads in flight, not one load a trip. For a reduction to few outputs (under
        // 1024), which would otherwise keep the GPU to a few threads; and for one along rows (a
        // load contiguous along the reduce: softmax's, a matrix-vector product's) of at least 128
        // elements, where one thread a row would read a column of the matrix at a time. Measured on
        // an H100 (bench_gpu): softmax over [4096, 4096] ran one thread a row at 107 GB/s.
        DType out_dtype = DType::Float32;
        const std::vector<Access> acc = accesses(ast, out_dtype);
        int64_t outputs = 1;
        for (size_t i = 0; i < n_out; ++i) outputs *= size_of(k.axes()[i]);
        auto group_reduce = [&](int64_t min_group) {
            const UOp r = k.axes()[n_out];
            const int64_t n = size_of(r), id = r.arg_as<RangeArg>().axis_id;
            for (int64_t d = 256; d >= min_group; d /= 2) {
                if (n % d != 0 || n < 4 * d ||
                    !k.try_apply({OptOp::Group, static_cast<int64_t>(n_out), d}))
                    continue;
                for (size_t i = 0; i < k.axes().size(); ++i)
                    if (k.axes()[i].arg_as<RangeArg>().axis_id == id)
                        // The rest unrolled whole where it is 16 (BEAM's choice for softmax's
                        // rows of 4096 on an H100: 34.6 us, 8 deep 66.4), else up to 8 deep.
                        for (int64_t u : {16, 8, 4, 2})
                            if ((n / d) % u == 0 && (u < 16 || n / d == 16) &&
                                k.try_apply({OptOp::Unroll, static_cast<int64_t>(i), u}))
                                break;
                return true;
            }
            return false;
        };
        const bool has_reduce = k.axes().size() > n_out && k.axes()[n_out].src(0).is_const();
        if (has_reduce && outputs < 1024 && group_reduce(16)) return k.applied();
        // A float32 matmul: register tiles fed from operands staged through shared memory.
        if (std::vector<Opt> s = smem_heuristic_opts(ast, lim); !s.empty()) return s;
        if (gpu_matmul_tiling(k, acc, lim)) return k.applied();
        if (has_reduce && size_of(k.axes()[n_out]) >= 128) {
            bool along_rows = false;
            for (const Access& a : acc)
                along_rows |= !a.store && linear_coefficient(a.idx, k.axes()[n_out]) == 1;
            if (along_rows && group_reduce(32)) return k.applied();
        }
        if (n_out == 0 || !k.axes()[n_out - 1].src(0).is_const()) return {};
        // Four neighbouring elements a thread where every access is contiguous along the
        // innermost output axis (or does not use it): one 16-byte load or store each. BEAM on an
        // H100 found softmax's elementwise kernel 30% faster so (47.5 against 66.9 us).
        {
            const UOp& r = k.axes()[n_out - 1];
            bool contiguous = true, stored = false;
            for (const Access& a : acc) {
                const int64_t c = linear_coefficient(a.idx, r);
                contiguous &= c == 0 || c == 1;
                stored |= a.store && c == 1;
            }
            if (contiguous && stored && size_of(r) % (4 * 32) == 0 && out_dtype.itemsize() >= 4)
                k.try_apply({OptOp::Upcast, static_cast<int64_t>(n_out - 1), 4});
        }
        // Coalesced thread blocks: the innermost output axis (the store's unit stride) is split
        // into threads of a block, as many as divide it up to 256, so that a warp's 32
        // threads touch neighbouring elements.
        const int64_t size = size_of(k.axes()[n_out - 1]);
        for (int64_t d = std::min<int64_t>(256, lim.max_threads_per_block); d >= 2; d /= 2)
            if (size % d == 0 && k.try_apply({OptOp::Local, static_cast<int64_t>(n_out - 1), d}))
                break;
        return k.applied();
    }
    DType dt = DType::Float32;
    const std::vector<Access> acc = accesses(ast, dt);
    const int64_t lanes =
        std::max<int64_t>(2, lim.vector_bytes / std::max<int64_t>(dt.itemsize(), 4));
    const bool few_registers = lim.vector_bytes < 64; // 16 vector registers (AVX2), not 32
    auto size_at = [&](int64_t i) { return size_of(k.axes()[static_cast<size_t>(i)]); };
    int64_t work = 1;
    for (int64_t s : k.shape()) work *= s;
    if (row_fused_cpu_opts(ast, k, acc, lanes, lim, work)) return k.applied();
    const size_t n_out = k.output_axes();
    const bool has_reduce = k.axes().size() > n_out;
    // How every access uses a range: coefficient per access (-1: not linear).
    auto coeffs = [&](const UOp& r) {
        std::vector<std::pair<int64_t, bool>> c;
        for (const Access& a : acc) c.emplace_back(linear_coefficient(a.idx, r), a.store);
        return c;
    };

    // Lanes along an axis: the register width, or the largest divisor of the axis below it (a
    // 10-wide output row is one 10-lane vector); 0 when none of 4 or more divides it.
    const auto lanes_for = [&](const UOp& r) {
        for (int64_t d = std::min(lanes, size_of(r)); d >= 4; --d)
            if (size_of(r) % d == 0) return d;
        return int64_t{0};
    };
    // The lanes of the innermost reduce axis as a dot product's (every load contiguous along it
    // or broadcast), 0 when it cannot be one.
    const auto reduce_lanes = [&]() -> int64_t {
        const UOp& r = k.axes().back();
        bool contig = false;
        for (auto [c, st] : coeffs(r)) {
            if (st) continue;
            if (c == 1)
                contig = true;
            else if (c != 0)
                return 0;
        }
        return contig ? lanes_for(r) : 0;
    };

    bool vec_out = false, vec_red = false;
    int64_t block_id = -1; // the output axis register blocking split (a matmul's rows)
    int64_t red_id = -1;   // the reduce axis split into vector lanes
    int64_t jo_id = -1;
    UOp lanes_axis; // the axis split into vector lanes, as the accesses' indices name it
    if (n_out > 0) {
        const UOp r = k.axes()[n_out - 1];
        jo_id = r.arg_as<RangeArg>().axis_id;
        // A load strided by a small step (a stride-2 convolution's input) is a gather of
        // neighbouring elements, a few cache lines a vector: still worth vectorizing the
        // output, whose other operand (the weights) is then one broadcast for every lane.
        constexpr int64_t kMaxStride = 4;
        bool store_contig = false, loads_ok = true;
        for (auto [c, st] : coeffs(r)) {
            if (st)
                store_contig = c == 1;
            else if (c < 0 || c > kMaxStride)
                loads_ok = false;
        }
        int64_t amt = lanes_for(r);
        // A reduce whose innermost axis both kinds of load read contiguously, at least twice as
        // wide in lanes, is the better vector axis (the dot-product form below): a weight
        // gradient of 4 x 4 taps over 112 columns ran 4-lane vectors at 35 GFLOP/s, its 3 x 3
        // siblings 14-lane dot products at 100-115.
        if (has_reduce && amt > 0 && amt < lanes && reduce_lanes() >= 2 * amt) amt = 0;
        if (store_contig && loads_ok && amt > 0)
            vec_out = k.try_apply({OptOp::Upcast, static_cast<int64_t>(n_out - 1), amt});
        if (vec_out) lanes_axis = r;
    }
    if (!vec_out && has_reduce) {
        const int64_t a = static_cast<int64_t>(k.axes().size()) - 1;
        const UOp r = k.axes().back();
        if (const int64_t amt = reduce_lanes(); amt > 0) {
            vec_red = k.try_apply({OptOp::Unroll, a, amt});
            red_id = r.arg_as<RangeArg>().axis_id;
            if (vec_red) lanes_axis = r;
        }
    }
    // Neither: an outer output axis that every load in the reduce reads contiguously or not at
    // all (a weight gradient over channels-last input, [Cout, Cin, kh, kw], whose taps are the
    // inner axes), its stores strided. A store per output element after a long reduce costs little
    // against the reduce's vector lanes: a 3 x 3 weight gradient over 8 x 7 x 7 positions ran 210
    // GFLOP/s so, against a separate transposing copy of [Cout, kh, kw, Cin] at 3.6 ms a call.
    // Such a kernel's register tile (below) is one vector wide, not two, since every element is
    // stored alone, with what is fused after the reduce (an optimizer's update:
    // its state gathered and stored per element). ResNet-18's 512 x 512 x 3 x 3 weight gradient
    // with SGD's update compiled in 770-1370 ms two vectors wide, 310-330 one (four such kernels
    // in a training step's first call), and ran 15% slower (medians 22.4 -> 25.8 ms, batch 8).
    bool strided_store = false;
    if (!vec_out && !vec_red && has_reduce && work >= (int64_t{1} << 16)) {
        int64_t reduce_size = 1;
        for (size_t i = n_out; i < k.axes().size(); ++i)
            reduce_size *= size_at(static_cast<int64_t>(i));
        // Loads inside the reduce (their index uses a reduce axis) must be contiguous or
        // broadcast along the lanes; those outside it (an optimizer's update fused after a weight
        // gradient: its state read per element) run once per output, gathers.
        std::vector<bool> in_reduce;
        for (const Access& a : acc) {
            bool uses = false;
            for (size_t i = n_out; i < k.axes().size(); ++i)
                uses |= linear_coefficient(a.idx, k.axes()[i]) != 0;
            in_reduce.push_back(uses);
        }
        for (size_t i = n_out; reduce_size >= 64 && i-- > 0;) {
            const UOp r = k.axes()[i];
            bool contig = false, ok = true;
            const auto cs = coeffs(r);
            for (size_t j = 0; j < cs.size(); ++j) {
                const auto [c, st] = cs[j];
                if (st)
                    ok &= c != 0;
                else if (!in_reduce[j])
                    continue;
                else if (c == 1)
                    contig = true;
                else if (c != 0)
                    ok = false;
            }
            const int64_t amt = lanes_for(r);
            if (!ok || !contig || amt < std::min<int64_t>(lanes, 8)) continue;
            if ((vec_out = k.try_apply({OptOp::Upcast, static_cast<int64_t>(i), amt}))) {
                lanes_axis = r;
                jo_id = r.arg_as<RangeArg>().axis_id;
                strided_store = true;
            }
            break;
        }
    }
    // Register blocking: output axes that some operand is broadcast along (a matmul's rows
    // for the right operand, its columns for the left) become unrolled copies, so each loaded
    // vector serves several accumulators.
    // The axes are tried best reuse first: one along which the vector loads (those that use the
    // lanes' axis) are broadcast, so each loaded vector serves every copy and only scalar
    // broadcasts differ (a convolution's output channels, along which its input is reused,
    // before its batch or rows, along which only the weights are); ties keep the loop order.
    // reuse_only: only axes along which the vector loads are broadcast.
    auto block = [&](int64_t skip_id, int64_t max_axes, std::initializer_list<int64_t> amounts,
                     bool reuse_only = false) {
        int64_t done = 0;
        std::vector<std::pair<int64_t, int64_t>> ranked; // (vector loads reused, id)
        for (size_t i = 0; i < k.output_axes(); ++i) {
            const UOp& r = k.axes()[i];
            if (r.arg_as<RangeArg>().axis_id == skip_id) continue;
            int64_t reuse = 0;
            for (const Access& a : acc)
                if (!a.store && !lanes_axis.is_null() &&
                    linear_coefficient(a.idx, lanes_axis) != 0 && linear_coefficient(a.idx, r) == 0)
                    reuse = 1;
            ranked.emplace_back(reuse, r.arg_as<RangeArg>().axis_id);
        }
        std::stable_sort(ranked.begin(), ranked.end(),
                         [](const auto& a, const auto& b) { return a.first > b.first; });
        std::vector<int64_t> ids;
        for (const auto& [reuse, id] : ranked)
            if (reuse || !reuse_only) ids.push_back(id);
        for (int64_t id : ids) {
            if (done >= max_axes) break;
            const int64_t i = index_of(k, id);
            if (i < 0) continue;
            const UOp r = k.axes()[static_cast<size_t>(i)];
            bool bcast = false, used = false;
            for (auto [c, st] : coeffs(r)) {
                if (st) continue;
                if (c == 0)
                    bcast = true;
                else
                    used = true;
            }
            if (!bcast || !used) continue;
            for (int64_t amt : amounts)
                if (size_of(r) % amt == 0 && k.try_apply({OptOp::Upcast, i, amt})) {
                    ++done;
                    if (block_id < 0) block_id = id;
                    break;
                }
        }
        return done;
    };
    if (vec_out && has_reduce) {
        // 32 vector registers (AVX-512): 2 vectors wide, 8 (or 4, 2) rows, 16 accumulators. A
        // row of an odd number of vectors (784 floats: 49) takes its smallest divisor up to 7 as
        // the width, and as many rows as keep the accumulators a few below the vector registers;
        // the upcast limit allows 7 x 2 with 16 lanes.
        // 16 vector registers (AVX2): 2 x 8 spilled 4 of its accumulators every step and moved
        // the rest around (a 3 x 3 convolution's inner loop: 16 FMAs, 14 copies, 8 spills and
        // reloads). At most 12 accumulators there, beside the loaded vectors and a broadcast:
        // 2 wide x 6 rows, else 3 x 4 (a row of 3 vectors), else 2 x 4, else one vector wide x 8
        // rows (not a row of 7 vectors, a broadcast each: a 1 x 1 convolution over 56 x 56
        // positions whose input rows are 58 apart ran 0.57 ms so, 0.28 ms one wide); the rows
        // along an axis the vector loads are reused over (output channels, not the batch).
        bool tiled = false;
        if (few_registers && !strided_store && index_of(k, jo_id) >= 0) {
            const OptKernel before = k;
            const int64_t j = index_of(k, jo_id);
            const std::pair<int64_t, int64_t> tiles[] = {{2, 6}, {3, 4}, {2, 4}, {1, 8}};
            for (const auto& [w, rows] : tiles) {
                if (size_at(j) % w == 0 && (w == 1 || k.try_apply({OptOp::Upcast, j, w})) &&
                    block(jo_id, 1, {rows}, true) == 1) {
                    tiled = true;
                    break;
                }
                k = before;
                block_id = -1;
            }
        }
        int64_t width = 1;
        if (int64_t j = index_of(k, jo_id); !tiled && j >= 0 && !strided_store) {
            const int64_t n = size_at(j);
            for (int64_t d : {2, 3, 5, 7})
                if (n % d == 0) {
                    if (k.try_apply({OptOp::Upcast, j, d})) width = d;
                    break;
                }
        }
        const int64_t budget = few_registers ? 12 : 28;
        if (!tiled) {
            if (width == 1 || (width == 2 && !few_registers))
                block(jo_id, 1, {8, 4, 2});
            else if (width * 4 <= budget)
                block(jo_id, 1, {4, 2});
            else if (width * 2 <= budget)
                block(jo_id, 1, {2});
        }
    } else if (vec_red) {
        // A dot-product form (both operands contiguous along the reduce): 4 x 4 outputs (4 x 2
        // with 16 vector registers: 4 x 4 spilled); else 4 vectors per iteration.
        const int64_t blocked = block(-1, few_registers ? 1 : 2, {4, 2});
        if (few_registers && blocked == 1) block(block_id, 1, {2});
        if (blocked == 0) {
            const int64_t b = index_of(k, red_id);
            if (b >= 0 && size_at(b) % 4 == 0 && size_at(b) >= 16)
                k.try_apply({OptOp::Unroll, b, 4});
        }
    } else if (vec_out) {
        if (int64_t j = index_of(k, jo_id); j >= 0 && size_at(j) % 4 == 0)
            k.try_apply({OptOp::Upcast, j, 4});
    }
    // Threads: the outermost output axis that splits evenly, when the kernel is big enough.
    if (lim.threads > 1 && work >= (int64_t{1} << 17))
        for (size_t i = 0; i < k.output_axes(); ++i)
            if (size_at(static_cast<int64_t>(i)) % lim.threads == 0 &&
                k.try_apply({OptOp::Thread, static_cast<int64_t>(i), lim.threads}))
                break;
    // Loop order for a matmul-like kernel: the column blocks outside the row blocks, so one
    // block of the right operand stays in cache while every row block passes over it.
    if (vec_out && has_reduce && block_id >= 0) {
        const int64_t i = index_of(k, block_id), j = index_of(k, jo_id);
        if (i >= 0 && j >= 0 && i < j) k.try_apply({OptOp::Swap, i, j});
    }
    return k.applied();
}

} // namespace

} // namespace tempura::codegen
