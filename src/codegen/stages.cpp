// The codegen stages for correct scalar code: symbolic, index dtype lowering, decompositions,
// and linearize (with remove-reduce and add-loads).
#include "tempura/codegen/stages.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "tempura/error.hpp"
#include "tempura/rewrite/graph_rewrite.hpp"
#include "tempura/symbolic/simplify.hpp"

namespace tempura::codegen {

namespace {

int debug_level() {
    const char* e = std::getenv("TEMPURA_DEBUG");
    return e ? std::atoi(e) : 0;
}

// Rebuilds every node of a graph through `f(node, new_srcs)`, sources first.
template <class F>
UOp rebuild_graph(const UOp& root, F&& f) {
    UOpMap<UOp> done;
    for (const UOp& u : root.toposort()) {
        std::vector<UOp> srcs;
        srcs.reserve(u.srcs().size());
        for (const UOp& s : u.srcs()) srcs.push_back(done.at(s));
        done.emplace(u, f(u, std::move(srcs)));
    }
    return done.at(root);
}

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
        const DType dt = u.dtype() == DType::Index ? to : u.dtype();
        bool same = dt == u.dtype();
        for (size_t i = 0; i < srcs.size() && same; ++i) same = srcs[i].same(u.src(i));
        if (same) return u;
        return UOp::make(u.op(), dt, std::move(srcs), u.arg(), u.location());
    });
}

UOp decompose(const UOp& ast) {
    return rebuild_graph(ast, [&](const UOp& u, std::vector<UOp> srcs) {
        if (u.op() == Op::Pow && u.dtype().is_float()) {
            // x ** y = exp2(log2(x) * y): LLVM has exp2 and log2 intrinsics but no pow kernel
            // worth calling per element.
            return UOp::alu(Op::Exp2,
                            {UOp::alu(Op::Mul, {UOp::alu(Op::Log2, {srcs[0]}), srcs[1]})});
        }
        if (u.op() == Op::Pow)
            fail("decompose", "POW of dtype " + u.dtype().name() + " is not supported");
        bool same = true;
        for (size_t i = 0; i < srcs.size() && same; ++i) same = srcs[i].same(u.src(i));
        return same ? u : u.replace_srcs(std::move(srcs));
    });
}

namespace {

// Linearize: places each op in the outermost open loop that holds all the ranges it uses.
class Linearizer {
  public:
    std::vector<UOp> run(const UOp& ast) {
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

    bool scope_open(int id) const {
        for (const auto& s : scopes_)
            if (s.id == id) return true;
        return false;
    }

    // Which ranges a node uses (a REDUCE hides its own).
    uint64_t mask(const UOp& u) {
        if (auto it = mask_cache_.find(u); it != mask_cache_.end()) return it->second;
        uint64_t m = 0;
        if (u.op() == Op::Range) {
            auto it = range_bit_.find(u);
            if (it == range_bit_.end()) {
                if (range_bit_.size() >= 64) fail("linearize", "more than 64 ranges in a kernel");
                it = range_bit_.emplace(u, static_cast<int>(range_bit_.size())).first;
            }
            m = uint64_t{1} << it->second;
            m |= mask(u.src(0));
        } else if (u.op() == Op::Reduce) {
            m = mask(u.src(0));
            for (size_t i = 1; i < u.srcs().size(); ++i) m &= ~mask_of_range(u.src(i));
        } else {
            for (const UOp& s : u.srcs()) m |= mask(s);
        }
        mask_cache_.emplace(u, m);
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

    // The program value of a node, emitting it (and its sources) where it belongs.
    UOp value(const UOp& u) {
        if (auto it = placed_.find(u); it != placed_.end() && scope_open(it->second.scope_id))
            return it->second.value;
        if (u.op() == Op::Reduce) return emit_reduce(u);
        if (u.op() == Op::Range) fail("linearize", "a RANGE used outside its loop");
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

    // REDUCE(v, ranges) -> acc = identity; for ranges: acc = op(acc, v); then load acc.
    UOp emit_reduce(const UOp& red) {
        const DType dt = red.dtype();
        const Op op = red.arg_as<Op>();
        const size_t here = scopes_.size() - 1;
        const UOp acc = value(UOp::make(Op::DefineReg, dt.ptr(AddrSpace::Reg), {},
                                        std::vector<int64_t>{1, next_reg_++}));
        const UOp zero = value(UOp::constant(DType::Int32, 0));
        const UOp slot = value(UOp::make(Op::Index, acc.dtype(), {acc, zero}));
        const UOp init = UOp::make(Op::Store, DType::Void, {slot, value(reduce_identity(op, dt))});
        place(init, init, here);
        std::vector<UOp> deps{acc, init};
        for (size_t i = 1; i < red.srcs().size(); ++i) {
            open(red.src(i));
            deps.push_back(red.src(i));
        }
        // Inside the loops the accumulator is read through AFTER(acc, init, ranges): ordered
        // after the init store and tied to the reduce ranges, so it is never hoisted out.
        const UOp cur = value(UOp::make(
            Op::Load, dt,
            {UOp::make(Op::Index, acc.dtype(), {UOp::make(Op::After, acc.dtype(), deps), zero})}));
        const UOp next = value(UOp::alu(op, {cur, red.src(0)}));
        scopes_.back().ops.push_back(UOp::make(Op::Store, DType::Void, {slot, next}));
        UOp end;
        for (size_t i = 1; i < red.srcs().size(); ++i) end = close();
        // After the loops: read it through AFTER(acc, END).
        const UOp done = UOp::make(Op::After, acc.dtype(), {acc, end});
        const UOp idx = UOp::make(Op::Index, acc.dtype(), {done, zero});
        const UOp result = UOp::make(Op::Load, dt, {idx});
        place(done, done, here);
        place(idx, idx, here);
        place(result, result, here);
        placed_.insert_or_assign(red, Placed{result, scopes_[here].id});
        // The loops ran inside every scope open here, so the result lives there: users must be
        // placed no further out, even when the reduced value itself uses none of those ranges.
        uint64_t open = mask(red);
        for (size_t i = 1; i <= here; ++i) open |= mask_of_range(scopes_[i].range);
        mask_cache_.insert_or_assign(red, open);
        return result;
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
        if (u.op() == Op::Sink) {
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

} // namespace tempura::codegen
