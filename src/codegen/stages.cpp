// The codegen stages for correct scalar code: symbolic, index dtype lowering, decompositions,
// and linearize (with remove-reduce and add-loads).
#include "tempura/codegen/stages.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "tempura/error.hpp"
#include "tempura/rewrite/graph_rewrite.hpp"
#include "tempura/support/env.hpp"
#include "tempura/symbolic/simplify.hpp"

namespace tempura::codegen {

namespace {

using env::debug_level;

} // namespace

UOp reduce_identity(Op op, DType dt) {
    switch (op) {
    case Op::Add: return dt.is_float() ? UOp::constant_f(dt, 0.0) : UOp::constant(dt, 0);
    case Op::Mul: return dt.is_float() ? UOp::constant_f(dt, 1.0) : UOp::constant(dt, 1);
    case Op::Max:
        if (dt.is_float()) return UOp::constant_f(dt, -std::numeric_limits<double>::infinity());
        return UOp::constant(dt, dt.min());
    default: fail("reduce", "no identity for reduce op " + std::string(op_name(op)));
    }
}

UOp symbolic(const UOp& ast) {
    RewriteOptions o;
    o.bottom_up = true;
    return graph_rewrite(ast, symbolic_rules(), nullptr, o);
}

UOp lower_index_dtype(const UOp& ast) {
    bool fits32 = true;
    for (const UOp& u : ast.toposort())
        if (u.dtype() == DType::Index && (u.vmin() < std::numeric_limits<int32_t>::min() ||
                                          u.vmax() > std::numeric_limits<int32_t>::max()))
            fits32 = false;
    const DType to = fits32 ? DType::Int32 : DType::Int64;
    return rebuild_graph(ast, [&](const UOp& u, std::vector<UOp> srcs) {
        DType dt = u.dtype();
        if (dt.scalar == Scalar::Index && !dt.is_ptr) dt = to.vec(dt.count);
        if (dt == u.dtype()) return with_srcs(u, std::move(srcs));
        return UOp::make(u.op(), dt, std::move(srcs), u.arg(), u.location());
    });
}

namespace {

// float32 EXP2 and LOG2 as polynomials (Cephes exp2f/log2f, about 1-2 ulp). LLVM would lower its
// intrinsics to one libm call per vector lane after vectorizing; as plain arithmetic they
// vectorize, and the kernels compile several times faster.
struct F32 {
    static UOp c(double v) { return UOp::constant_f(DType::Float32, v); }
    static UOp i(int64_t v) { return UOp::constant(DType::Int32, v); }
    static UOp add(const UOp& a, const UOp& b) { return UOp::alu(Op::Add, {a, b}); }
    static UOp sub(const UOp& a, const UOp& b) { return UOp::alu(Op::Sub, {a, b}); }
    static UOp mul(const UOp& a, const UOp& b) { return UOp::alu(Op::Mul, {a, b}); }
    static UOp lt(const UOp& a, const UOp& b) { return UOp::alu(Op::CmpLt, {a, b}); }
    static UOp sel(const UOp& c, const UOp& t, const UOp& f) {
        return UOp::alu(Op::Where, {c, t, f});
    }
    static UOp to_i(const UOp& a) { return UOp::make(Op::Cast, DType::Int32, {a}); }
    static UOp to_f(const UOp& a) { return UOp::make(Op::Cast, DType::Float32, {a}); }
    static UOp bits_to_f(const UOp& a) { return UOp::make(Op::BitCast, DType::Float32, {a}); }
    static UOp f_to_bits(const UOp& a) { return UOp::make(Op::BitCast, DType::Int32, {a}); }
    static UOp poly(const UOp& x, std::initializer_list<double> coefs) {
        UOp acc;
        for (double k : coefs) acc = acc.is_null() ? c(k) : add(mul(acc, x), c(k));
        return acc;
    }
    // 2^n for integer n in [-252, 254], as two exact powers (each exponent stays normal).
    static UOp pow2(const UOp& n) {
        const UOp n1 = UOp::alu(Op::Shr, {n, i(1)});
        const UOp n2 = sub(n, n1);
        auto scale = [](const UOp& k) {
            return bits_to_f(UOp::alu(Op::Shl, {add(k, i(127)), i(23)}));
        };
        return mul(scale(n1), scale(n2));
    }
};

UOp exp2_f32(const UOp& x0) {
    using F = F32;
    // Clamp so the scale stays in range (2^129 overflows to inf, 2^-151 underflows to 0).
    const UOp x = F::sel(F::lt(x0, F::c(-151.0)), F::c(-151.0),
                         F::sel(F::lt(F::c(129.0), x0), F::c(129.0), x0));
    // n = round(x), f = x - n in [-0.5, 0.5].
    const UOp h = F::add(x, F::c(0.5));
    const UOp t = UOp::alu(Op::Trunc, {h});
    const UOp n = F::sel(F::lt(h, t), F::sub(t, F::c(1.0)), t);
    const UOp f = F::sub(x, n);
    const UOp p = F::add(
        F::mul(F::poly(f, {1.535336188319500e-4, 1.339887440266574e-3, 9.618437357674640e-3,
                           5.550332471162809e-2, 2.402264791363012e-1, 6.931472028550421e-1}),
               f),
        F::c(1.0));
    const UOp r = F::mul(p, F::pow2(F::to_i(n)));
    return F::sel(UOp::alu(Op::CmpNe, {x0, x0}), x0, r); // NaN stays NaN
}

UOp log2_f32(const UOp& x0) {
    using F = F32;
    // Denormals are scaled into the normal range first.
    const UOp denormal = F::lt(x0, F::c(1.17549435e-38));
    const UOp x = F::sel(denormal, F::mul(x0, F::c(8388608.0)), x0);
    const UOp bits = F::f_to_bits(x);
    UOp e = F::sub(UOp::alu(Op::And, {UOp::alu(Op::Shr, {bits, F::i(23)}), F::i(255)}), F::i(126));
    e = F::sel(denormal, F::sub(e, F::i(23)), e);
    UOp m =
        F::bits_to_f(UOp::alu(Op::Or, {UOp::alu(Op::And, {bits, F::i(-2139095041)}), // 0x807fffff
                                       F::i(0x3f000000)}));                          // in [0.5, 1)
    const UOp small = F::lt(m, F::c(0.70710678118654752440));
    e = F::sel(small, F::sub(e, F::i(1)), e);
    m = F::sel(small, F::sub(F::add(m, m), F::c(1.0)), F::sub(m, F::c(1.0)));
    const UOp z = F::mul(m, m);
    UOp y = F::mul(F::mul(m, z), F::poly(m, {7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1,
                                             -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                                             2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1}));
    y = F::sub(y, F::mul(F::c(0.5), z));
    const UOp log2ea = F::c(0.44269504088896340735992);
    const UOp r =
        F::add(F::add(F::add(F::add(F::mul(y, log2ea), F::mul(m, log2ea)), y), m), F::to_f(e));
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // log2(+inf) = inf, log2(0) = -inf, log2(x < 0) = NaN, NaN stays NaN.
    return F::sel(UOp::alu(Op::CmpEq, {x0, F::c(inf)}), F::c(inf),
                  F::sel(UOp::alu(Op::CmpEq, {x0, F::c(0.0)}), F::c(-inf),
                         F::sel(F::lt(x0, F::c(0.0)), F::c(nan),
                                F::sel(UOp::alu(Op::CmpNe, {x0, x0}), x0, r))));
}

} // namespace

UOp decompose(const UOp& ast) {
    return rebuild_graph(ast, [&](const UOp& u, std::vector<UOp> srcs) {
        if (u.dtype() == DType::Float32 && u.op() == Op::Exp2) return exp2_f32(srcs[0]);
        if (u.dtype() == DType::Float32 && u.op() == Op::Log2) return log2_f32(srcs[0]);
        if (u.op() == Op::Pow && u.dtype().is_float()) {
            // x ** y = exp2(log2(x) * y): LLVM has exp2 and log2 intrinsics but no pow kernel
            // worth calling per element.
            return UOp::alu(Op::Exp2,
                            {UOp::alu(Op::Mul, {UOp::alu(Op::Log2, {srcs[0]}), srcs[1]})});
        }
        if (u.op() == Op::Pow)
            fail("decompose", "POW of dtype " + u.dtype().name() + " is not supported");
        return with_srcs(u, std::move(srcs));
    });
}

namespace {

// Linearize: places each op in the outermost open loop that holds all the ranges it uses.
class Linearizer {
  public:
    std::vector<UOp> run(const UOp& ast) {
        for (const UOp& u : ast.toposort())
            if (u.op() == Op::Reduce) {
                reduces_.push_back(u);
                std::vector<const UOpNode*>& inner = inner_reduces_[u];
                for (const UOp& n : u.toposort())
                    if (n.op() == Op::Reduce && !n.same(u)) inner.push_back(n.get());
            }
        scopes_.push_back(Scope{UOp(), {}, next_scope_++});
        for (const UOp& s : ast.srcs()) emit_effect(s);
        return std::move(scopes_[0].ops);
    }

  private:
    struct Scope {
        UOp range;
        std::vector<UOp> ops;
        int id;
    };
    struct Placed {
        UOp value;
        int scope_id;
    };
    std::vector<Scope> scopes_;
    int next_scope_ = 0;
    int64_t next_reg_ = 0;
    UOpMap<Placed> placed_;
    UOpMap<uint64_t> mask_cache_;
    UOpMap<int> range_bit_;
    std::vector<UOp> reduces_;                          // every REDUCE of the kernel, sources first
    UOpMap<std::vector<const UOpNode*>> inner_reduces_; // the REDUCEs inside each REDUCE

    bool scope_open(int id) const {
        for (const auto& s : scopes_)
            if (s.id == id) return true;
        return false;
    }

    // Which ranges a node uses (a REDUCE hides its own). Sources are computed first in an
    // explicit post-order walk, so a deep chain does not recurse once per node.
    uint64_t mask(const UOp& root) {
        if (auto it = mask_cache_.find(root); it != mask_cache_.end()) return it->second;
        std::vector<std::pair<const UOp*, size_t>> stack{{&root, 0}};
        while (!stack.empty()) {
            auto& [u, i] = stack.back();
            if (i < u->srcs().size()) {
                const UOp& s = u->src(i++);
                if (!mask_cache_.count(s)) stack.emplace_back(&s, 0);
                continue;
            }
            const UOp* done = u;
            stack.pop_back();
            if (!mask_cache_.count(*done)) mask_cache_.emplace(*done, mask_of_sources(*done));
        }
        return mask_cache_.at(root);
    }
    // A node's mask from its sources' (all computed).
    uint64_t mask_of_sources(const UOp& u) {
        uint64_t m = 0;
        if (u.op() == Op::Range) {
            auto it = range_bit_.find(u);
            if (it == range_bit_.end()) {
                if (range_bit_.size() >= 64) fail("linearize", "more than 64 ranges in a kernel");
                it = range_bit_.emplace(u, static_cast<int>(range_bit_.size())).first;
            }
            m = uint64_t{1} << it->second;
            m |= mask_cache_.at(u.src(0));
        } else if (u.op() == Op::Reduce) {
            m = mask_cache_.at(u.src(0));
            for (size_t i = 1; i < u.srcs().size(); ++i) m &= ~mask_of_range(u.src(i));
        } else {
            for (const UOp& s : u.srcs()) m |= mask_cache_.at(s);
        }
        return m;
    }
    uint64_t mask_of_range(const UOp& r) {
        mask(r);
        return uint64_t{1} << range_bit_.at(r);
    }

    // The innermost open scope among those of the ranges in m.
    size_t scope_for(uint64_t m) {
        size_t level = 0;
        for (size_t i = 1; i < scopes_.size(); ++i)
            if (m & mask_of_range(scopes_[i].range)) level = i;
        // Every range used must be open.
        uint64_t open = 0;
        for (size_t i = 1; i < scopes_.size(); ++i) open |= mask_of_range(scopes_[i].range);
        if ((m & ~open) != 0) fail("linearize", "an op uses a range outside its loop");
        return level;
    }

    void place(const UOp& original, const UOp& value, size_t level) {
        scopes_[level].ops.push_back(value);
        placed_.insert_or_assign(original, Placed{value, scopes_[level].id});
    }

    void open(const UOp& range) {
        const UOp end = value(range.src(0));
        UOp r = end.same(range.src(0)) ? range : range.replace_srcs({end});
        scopes_.push_back(Scope{r, {}, next_scope_++});
        placed_.insert_or_assign(range, Placed{r, scopes_.back().id});
    }
    UOp close() {
        Scope s = std::move(scopes_.back());
        scopes_.pop_back();
        auto& parent = scopes_.back().ops;
        parent.push_back(s.range);
        parent.insert(parent.end(), s.ops.begin(), s.ops.end());
        UOp end = UOp::make(Op::End, DType::Void, {s.range});
        parent.push_back(end);
        return end;
    }

    bool is_placed(const UOp& u) const {
        auto it = placed_.find(u);
        return it != placed_.end() && scope_open(it->second.scope_id);
    }

    // The program value of a node, emitting it (and its sources) where it belongs. Sources are
    // emitted first by an explicit post-order walk, in the order a recursive emission would
    // take (a REDUCE is emitted when the walk reaches it; a RANGE must be open already), so a
    // deep chain does not recurse once per node.
    UOp value(const UOp& u) {
        if (is_placed(u)) return placed_.at(u).value;
        if (u.op() == Op::Reduce) return emit_reduce(u);
        if (u.op() == Op::Range) fail("linearize", "a RANGE used outside its loop");
        std::vector<std::pair<const UOp*, size_t>> stack{{&u, 0}};
        while (!stack.empty()) {
            auto& [n, i] = stack.back();
            if (i < n->srcs().size()) {
                const UOp& s = n->src(i++);
                if (is_placed(s) || s.op() == Op::Range) continue;
                if (s.op() == Op::Reduce)
                    emit_reduce(s);
                else
                    stack.emplace_back(&s, 0);
                continue;
            }
            const UOp* done = n;
            stack.pop_back();
            if (done != &u && !is_placed(*done)) value_of_placed_sources(*done);
        }
        return value_of_placed_sources(u);
    }

    // Emits u, whose non-REDUCE sources are placed (or are REDUCEs and RANGEs, which value()
    // emits or rejects).
    UOp value_of_placed_sources(const UOp& u) {
        std::vector<UOp> srcs;
        srcs.reserve(u.srcs().size());
        bool same = true;
        for (const UOp& s : u.srcs()) {
            srcs.push_back(value(s));
            same = same && srcs.back().same(s);
        }
        UOp v = same ? u : u.replace_srcs(std::move(srcs));
        place(u, v, scope_for(mask(u)));
        return v;
    }

    // The REDUCEs that can share red's loops here: the same ranges, not placed yet, computable
    // in the open scopes and independent of each other's results (the expander's unrolled
    // copies of one reduce: one loop with several accumulators instead of one loop each).
    std::vector<UOp> siblings(const UOp& red) {
        std::vector<UOp> group{red};
        uint64_t open = 0;
        for (size_t i = 1; i < scopes_.size(); ++i) open |= mask_of_range(scopes_[i].range);
        for (const UOp& s : reduces_) {
            if (s.same(red) || s.srcs().size() != red.srcs().size() || placed_.count(s)) continue;
            bool same_ranges = true;
            for (size_t i = 1; i < s.srcs().size() && same_ranges; ++i)
                same_ranges = s.src(i).same(red.src(i));
            if (!same_ranges || (mask(s) & ~open) != 0) continue;
            auto inside = [&](const UOp& outer, const UOp& x) {
                const auto& in = inner_reduces_.at(outer);
                return std::find(in.begin(), in.end(), x.get()) != in.end();
            };
            bool independent = true;
            for (const UOp& g : group) independent = independent && !inside(s, g) && !inside(g, s);
            if (independent) group.push_back(s);
        }
        return group;
    }

    // REDUCE(v, ranges) -> acc = identity; for ranges: acc = op(acc, v); then load acc. Sibling
    // REDUCEs over the same ranges share the loops, each with its own accumulator.
    UOp emit_reduce(const UOp& red) {
        const std::vector<UOp> group = siblings(red);
        const size_t here = scopes_.size() - 1;
        const UOp zero = value(UOp::constant(DType::Int32, 0));
        struct Acc {
            UOp acc, slot, init;
        };
        std::vector<Acc> accs;
        for (const UOp& g : group) {
            const DType dt = g.dtype();
            const UOp acc = value(UOp::make(Op::DefineReg, dt.ptr(AddrSpace::Reg), {},
                                            std::vector<int64_t>{1, next_reg_++}));
            const UOp slot = value(UOp::make(Op::Index, acc.dtype(), {acc, zero}));
            const UOp init = UOp::make(Op::Store, DType::Void,
                                       {slot, value(reduce_identity(g.arg_as<Op>(), dt))});
            place(init, init, here);
            accs.push_back({acc, slot, init});
        }
        for (size_t i = 1; i < red.srcs().size(); ++i) open(red.src(i));
        for (size_t k = 0; k < group.size(); ++k) {
            const UOp& g = group[k];
            std::vector<UOp> deps{accs[k].acc, accs[k].init};
            for (size_t i = 1; i < g.srcs().size(); ++i) deps.push_back(g.src(i));
            // Inside the loops the accumulator is read through AFTER(acc, init, ranges): ordered
            // after the init store and tied to the reduce ranges, so it is never hoisted out.
            const UOp cur = value(
                UOp::make(Op::Load, g.dtype(),
                          {UOp::make(Op::Index, accs[k].acc.dtype(),
                                     {UOp::make(Op::After, accs[k].acc.dtype(), deps), zero})}));
            const UOp next = value(UOp::alu(g.arg_as<Op>(), {cur, g.src(0)}));
            scopes_.back().ops.push_back(UOp::make(Op::Store, DType::Void, {accs[k].slot, next}));
        }
        UOp end;
        for (size_t i = 1; i < red.srcs().size(); ++i) end = close();
        uint64_t open_mask = 0;
        for (size_t i = 1; i <= here; ++i) open_mask |= mask_of_range(scopes_[i].range);
        UOp first;
        for (size_t k = 0; k < group.size(); ++k) {
            const UOp& g = group[k];
            // After the loops: read it through AFTER(acc, END).
            const UOp done = UOp::make(Op::After, accs[k].acc.dtype(), {accs[k].acc, end});
            const UOp idx = UOp::make(Op::Index, accs[k].acc.dtype(), {done, zero});
            const UOp result = UOp::make(Op::Load, g.dtype(), {idx});
            place(done, done, here);
            place(idx, idx, here);
            place(result, result, here);
            placed_.insert_or_assign(g, Placed{result, scopes_[here].id});
            // The loops ran inside every scope open here, so the result lives there: users must
            // be placed no further out, even when the reduced value uses none of those ranges.
            mask_cache_.insert_or_assign(g, mask(g) | open_mask);
            if (k == 0) first = result;
        }
        return first;
    }

    // Effects: END (loops around a computation), STORE (gated stores become IF/ENDIF), SINK.
    void emit_effect(const UOp& u) {
        if (u.op() == Op::End) {
            for (size_t i = 1; i < u.srcs().size(); ++i) open(u.src(i));
            emit_effect(u.src(0));
            for (size_t i = 1; i < u.srcs().size(); ++i) close();
            return;
        }
        if (u.op() == Op::Store) {
            const UOp& index = u.src(0);
            UOp v = value(u.src(1));
            if (index.srcs().size() == 3) {
                UOp gate = value(index.src(2));
                UOp ptr = value(index.src(0));
                UOp off = value(index.src(1));
                UOp iff = UOp::make(Op::If, DType::Void, {gate});
                UOp idx = UOp::make(Op::Index, index.dtype(), {ptr, off});
                auto& ops = scopes_.back().ops;
                ops.push_back(iff);
                ops.push_back(idx);
                ops.push_back(UOp::make(Op::Store, DType::Void, {idx, v}));
                ops.push_back(UOp::make(Op::EndIf, DType::Void, {iff}));
                return;
            }
            UOp idx = value(index);
            scopes_.back().ops.push_back(UOp::make(Op::Store, DType::Void, {idx, v}));
            return;
        }
        if (u.op() == Op::Sink || u.op() == Op::Group) {
            for (const UOp& s : u.srcs()) emit_effect(s);
            return;
        }
        fail("linearize", "unexpected " + std::string(op_name(u.op())) + " at the top of a kernel");
    }
};

} // namespace

std::vector<UOp> linearize(const UOp& ast) { return Linearizer().run(ast); }

std::string render_linear(const std::vector<UOp>& program) {
    std::string out;
    UOpMap<size_t> num;
    int depth = 0;
    for (const UOp& u : program) {
        if (u.op() == Op::End || u.op() == Op::EndIf) --depth;
        const size_t n = num.size();
        num.emplace(u, n);
        std::string line = std::string(static_cast<size_t>(2 * std::max(depth, 0)), ' ') + "%" +
                           std::to_string(n) + " = " + std::string(op_name(u.op())) + " " +
                           u.dtype().name();
        for (const UOp& s : u.srcs()) {
            auto it = num.find(s);
            line += it == num.end() ? " ?" : " %" + std::to_string(it->second);
        }
        if (u.arg().index() != 0) line += "  " + arg_to_string(u.arg());
        out += line + "\n";
        if (u.op() == Op::Range || u.op() == Op::If) ++depth;
    }
    return out;
}

std::vector<UOp> lower_kernel(const std::string& name, const UOp& ast) {
    const int dbg = debug_level();
    auto dump = [&](const char* stage, const UOp& u) {
        if (dbg >= 5) std::fprintf(stderr, "=== %s: %s\n%s", name.c_str(), stage, u.tree().c_str());
    };
    dump("rangeify", ast);
    UOp a = symbolic(ast);
    dump("symbolic", a);
    a = lower_index_dtype(a);
    dump("index dtype", a);
    a = decompose(a);
    dump("decompositions", a);
    std::vector<UOp> program = linearize(a);
    if (dbg >= 5)
        std::fprintf(stderr, "=== %s: linearize\n%s", name.c_str(), render_linear(program).c_str());
    return program;
}

UOp prepare_for_opts(const UOp& ast) {
    // realize() asks for the same kernel's prepared AST several times in a row (the opts
    // heuristics or BEAM's cache key and search, then lowering): the last answer is kept per
    // thread, so a large kernel is simplified once.
    thread_local std::pair<UOp, UOp> last;
    if (!last.first.is_null() && last.first.same(ast)) return last.second;
    UOp prepared = simplify_ranges(decompose(symbolic(ast)));
    last = {ast, prepared};
    return prepared;
}

LoweredKernel lower_kernel_opt(const std::string& name, const UOp& ast, const DeviceLimits& limits,
                               const std::vector<Opt>* opts) {
    const int dbg = debug_level();
    auto dump = [&](const char* stage, const UOp& u) {
        if (dbg >= 5) std::fprintf(stderr, "=== %s: %s\n%s", name.c_str(), stage, u.tree().c_str());
    };
    dump("rangeify", ast);
    UOp a = prepare_for_opts(ast);
    dump("symbolic, decompositions, simplify ranges", a);
    LoweredKernel out;
    out.opts = opts != nullptr     ? *opts
               : noopt_requested() ? std::vector<Opt>{}
                                   : heuristic_opts(a, limits);
    if (dbg >= 3) std::fprintf(stderr, "opts %s: %s\n", name.c_str(), to_string(out.opts).c_str());
    a = apply_opts(a, out.opts, limits);
    a = symbolic(a);
    dump("apply opts, post-opt symbolic", a);
    a = expand(a, limits.vector_bytes);
    dump("expander", a);
    a = lower_threads(a, out.threads);
    a = fuse_mulacc(a);
    a = lower_index_dtype(a);
    dump("threads, mulacc, index dtype", a);
    out.program = linearize(a);
    if (dbg >= 5)
        std::fprintf(stderr, "=== %s: linearize\n%s", name.c_str(),
                     render_linear(out.program).c_str());
    return out;
}

} // namespace tempura::codegen
