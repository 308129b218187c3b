// The scalar semantics of the ALU ops (tempura/ir/scalar.hpp): what constant folding, bounds,
// evaluate() and the reference interpreter compute.
#include "tempura/ir/scalar.hpp"

#include "tempura/ir/uop.hpp"

#include <cmath>
#include <limits>

namespace tempura {

std::optional<int64_t> exec_int_alu(Op op, DType dt, const int64_t* v, size_t n) {
    if (!dt.is_integral()) return std::nullopt;
    auto u = [](int64_t x) { return static_cast<uint64_t>(x); };
    auto w = [&](uint64_t r) { return wrap_to(dt, static_cast<int64_t>(r)); };
    const bool uns = dt.is_unsigned();
    switch (op) {
    case Op::Neg: return w(0 - u(v[0]));
    case Op::Not: return dt.is_bool() ? (v[0] == 0 ? 1 : 0) : w(~u(v[0])); // logical / bitwise
    case Op::Add: return w(u(v[0]) + u(v[1]));
    case Op::Sub: return w(u(v[0]) - u(v[1]));
    case Op::Mul: return w(u(v[0]) * u(v[1]));
    case Op::Idiv:
        if (v[1] == 0) return std::nullopt;
        if (uns) return w(u(v[0]) / u(v[1]));
        if (v[0] == INT64_MIN && v[1] == -1) return w(u(v[0])); // wraps, as LLVM's sdiv would trap
        return w(u(v[0] / v[1]));
    case Op::Mod:
        if (v[1] == 0) return std::nullopt;
        if (uns) return w(u(v[0]) % u(v[1]));
        if (v[1] == -1) return 0;
        return w(u(v[0] % v[1]));
    case Op::Pow: { // repeated squaring, wrapping; x^-n truncates 1 / x^n
        if (!uns && v[1] < 0) return v[0] == 1 ? 1 : v[0] == -1 ? (v[1] % 2 ? w(u(-1)) : 1) : 0;
        uint64_t r = 1, b = u(v[0]), e = u(v[1]);
        for (; e; e >>= 1, b *= b)
            if (e & 1) r *= b;
        return w(r);
    }
    case Op::Max:
        if (uns) return u(v[0]) > u(v[1]) ? v[0] : v[1];
        return v[0] > v[1] ? v[0] : v[1];
    // A shift by the bit width or more (a negative amount counts as a huge one) shifts every
    // bit out: 0, or the sign for an arithmetic right shift, as x86's variable vector shifts
    // and PTX's shl/shr do; the backends select that value.
    case Op::Shl:
        if (u(v[1]) >= static_cast<uint64_t>(dt.bits())) return 0;
        return w(u(v[0]) << v[1]);
    case Op::Shr:
        if (u(v[1]) >= static_cast<uint64_t>(dt.bits())) return uns || v[0] >= 0 ? 0 : -1;
        if (uns) return w(u(v[0]) >> v[1]);
        return w(u(v[0] >> v[1]));
    case Op::And: return w(u(v[0]) & u(v[1]));
    case Op::Or: return w(u(v[0]) | u(v[1]));
    case Op::Xor: return w(u(v[0]) ^ u(v[1]));
    case Op::CmpLt: return uns ? (u(v[0]) < u(v[1])) : (v[0] < v[1]);
    case Op::CmpNe: return v[0] != v[1];
    case Op::CmpEq: return v[0] == v[1];
    case Op::Where: return v[0] != 0 ? v[1] : v[2];
    case Op::MulAcc: return w(u(v[0]) * u(v[1]) + u(v[2]));
    default: (void)n; return std::nullopt;
    }
}

bool is_exp_factor(DType dt, double v) {
    constexpr double k = 1.4426950408889634; // (double)(1 / ln 2)
    if (dt == DType::Float64) return v == k;
    if (dt == DType::Float32) return static_cast<float>(v) == static_cast<float>(k);
    return false; // 16-bit floats keep the plain composition, as their kernels do
}

UOp exp_operand(const UOp& u) {
    if (u.op() != Op::Exp2 || u.src(0).op() != Op::Mul) return UOp();
    const UOp& m = u.src(0);
    for (size_t i = 0; i < 2; ++i) {
        UOp k = m.src(i);
        while (k.op() == Op::Expand || k.op() == Op::Reshape) k = k.src(0);
        const double* v = k.op() == Op::Const ? std::get_if<double>(&k.arg()) : nullptr;
        if (v != nullptr && is_exp_factor(u.dtype(), *v)) return m.src(1 - i);
    }
    return UOp();
}

std::optional<double> exec_float_alu(Op op, DType dt, const double* v, size_t) {
    if (!dt.is_float()) return std::nullopt;
    double r;
    switch (op) {
    case Op::Neg: r = -v[0]; break;
    case Op::Exp2: r = std::exp2(v[0]); break;
    case Op::Log2: r = std::log2(v[0]); break;
    case Op::Sin: r = std::sin(v[0]); break;
    case Op::Cos: r = std::cos(v[0]); break;
    case Op::Erf: r = std::erf(v[0]); break;
    case Op::Sqrt: r = std::sqrt(v[0]); break;
    case Op::Recip: r = 1.0 / v[0]; break;
    case Op::Trunc: r = std::trunc(v[0]); break;
    case Op::Add: r = v[0] + v[1]; break;
    case Op::Sub: r = v[0] - v[1]; break;
    case Op::Mul: r = v[0] * v[1]; break;
    case Op::Fdiv: r = v[0] / v[1]; break;
    case Op::Max: // NaN propagates, as in the compiled code (llvm.maximum) and NumPy
        r = scalar::float_maximum(v[0], v[1]);
        break;
    case Op::Pow: r = std::pow(v[0], v[1]); break;
    case Op::Mod: r = std::fmod(v[0], v[1]); break;    // the sign of the dividend, as C
    case Op::Idiv: r = std::trunc(v[0] / v[1]); break; // truncated, as for integers
    case Op::CmpLt: return v[0] < v[1] ? 1.0 : 0.0;    // comparisons: 1 or 0, never rounded
    case Op::CmpNe: return v[0] != v[1] ? 1.0 : 0.0;   // (NaN != NaN)
    case Op::CmpEq: return v[0] == v[1] ? 1.0 : 0.0;
    case Op::MulAcc: r = v[0] * v[1] + v[2]; break;
    default: return std::nullopt;
    }
    if (dt == DType::Float32) r = static_cast<double>(static_cast<float>(r));
    return r;
}

} // namespace tempura
