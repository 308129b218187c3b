#pragma once
// Linear CPU programs built by hand for the backend's tests (docs/KERNEL_IR.md section 2).
#include <cstdint>
#include <string>
#include <vector>

#include "tempura/ir/uop.hpp"

namespace tempura_test {

using tempura::AddrSpace;
using tempura::AxisType;
using tempura::DType;
using tempura::Op;
using tempura::RangeArg;
using tempura::UOp;
using tempura::VarArg;

// A program under construction: every node made through it is appended in execution order.
struct Prog {
    std::vector<UOp> ops;

    UOp add(UOp u) {
        ops.push_back(u);
        return u;
    }
    UOp param(DType t, int64_t slot, int64_t numel) {
        return add(UOp::make(Op::Param, t.ptr(), {}, std::vector<int64_t>{slot, numel}));
    }
    UOp var(const std::string& name, int64_t lo, int64_t hi, DType t = DType::Index) {
        return add(UOp::make(Op::DefineVar, t, {}, VarArg{name, lo, hi}));
    }
    UOp reg(DType t, int64_t count) { // arg {count, id}: distinct registers stay distinct
        return add(UOp::make(Op::DefineReg, t.ptr(AddrSpace::Reg), {},
                             std::vector<int64_t>{count, next_reg++}));
    }
    int64_t next_reg = 0;
    UOp c(DType t, double v) { return add(UOp::constant_f(t, v)); }
    UOp ci(DType t, int64_t v) { return add(UOp::constant(t, v)); }
    UOp idx(int64_t v) { return add(UOp::index(v)); }
    UOp range(const UOp& end, int64_t axis) {
        return add(UOp::make(Op::Range, end.dtype(), {end}, RangeArg{axis, AxisType::Loop}));
    }
    UOp end(const UOp& r) { return add(UOp::make(Op::End, DType::Void, {r})); }
    // &p[i], accessed as `access` (a scalar or vector dtype): i counts elements of p.
    UOp index(const UOp& p, const UOp& i, DType access) {
        return add(UOp::make(Op::Index, access.ptr(p.dtype().addrspace), {p, i}));
    }
    UOp index(const UOp& p, const UOp& i) { return index(p, i, p.dtype().base()); }
    UOp gated_index(const UOp& p, const UOp& i, const UOp& gate, DType access) {
        return add(UOp::make(Op::Index, access.ptr(p.dtype().addrspace), {p, i, gate}));
    }
    UOp load(const UOp& p) { return add(UOp::make(Op::Load, p.dtype().base(), {p})); }
    UOp load(const UOp& p, const UOp& gate, const UOp& alt) {
        return add(UOp::make(Op::Load, p.dtype().base(), {p, gate, alt}));
    }
    UOp store(const UOp& p, const UOp& v) { return add(UOp::make(Op::Store, DType::Void, {p, v})); }
    UOp alu(Op op, std::vector<UOp> s) { return add(UOp::alu(op, std::move(s))); }
    UOp cast(const UOp& x, DType to) { return add(UOp::make(Op::Cast, to, {x})); }
    UOp if_(const UOp& cond) { return add(UOp::make(Op::If, DType::Void, {cond})); }
    UOp endif(const UOp& i) { return add(UOp::make(Op::EndIf, DType::Void, {i})); }
    UOp after(const UOp& x, const UOp& dep) {
        return add(UOp::make(Op::After, x.dtype(), {x, dep}));
    }
    UOp gep(const UOp& x, std::vector<int64_t> lanes) {
        const DType t = x.dtype().scalar_type().vec(static_cast<uint16_t>(lanes.size()));
        return add(UOp::make(Op::Gep, t, {x}, std::move(lanes)));
    }
    UOp vectorize(std::vector<UOp> xs) {
        const DType t = xs[0].dtype().vec(static_cast<uint16_t>(xs.size()));
        return add(UOp::make(Op::Vectorize, t, std::move(xs)));
    }
};

} // namespace tempura_test
