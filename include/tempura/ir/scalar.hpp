#pragma once
// Scalar semantics shared by every part that computes a value outside a kernel (constant
// folding, evaluate, the reference interpreter), so that they agree with the backends:
// - float MAX is IEEE-754 2019 `maximum` (llvm.maximum): NaN wins, and -0.0 < +0.0;
// - float -> integer conversion saturates, and NaN gives 0 (llvm.fptosi.sat / fptoui.sat, PTX
//   cvt.rzi.sat): a value is truncated toward zero, then clamped to the target's range.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

#include "tempura/ir/dtype.hpp"
#include "tempura/ir/ops.hpp"

namespace tempura::scalar {

inline double float_maximum(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
    if (a == b) return std::signbit(a) ? b : a; // max(-0.0, +0.0) is +0.0 either way round
    return a < b ? b : a;
}

// `v` converted to an integer of `bits` bits (signed or not) with saturation; NaN gives 0.
// The result is the integer's value as int64 (an unsigned 64-bit maximum as its bit pattern).
inline int64_t float_to_int_sat(double v, int bits, bool is_unsigned) {
    if (std::isnan(v)) return 0;
    const double t = std::trunc(v);
    if (is_unsigned) {
        if (t <= 0) return 0;
        const double hi = std::ldexp(1.0, bits); // 2^bits, exact in double
        if (t >= hi)
            return bits >= 64 ? static_cast<int64_t>(~uint64_t{0})
                              : static_cast<int64_t>((uint64_t{1} << bits) - 1);
        return static_cast<int64_t>(static_cast<uint64_t>(t));
    }
    const double hi = std::ldexp(1.0, bits - 1); // 2^(bits-1)
    if (t >= hi)
        return bits >= 64 ? std::numeric_limits<int64_t>::max()
                          : static_cast<int64_t>((uint64_t{1} << (bits - 1)) - 1);
    if (t < -hi)
        return bits >= 64 ? std::numeric_limits<int64_t>::min()
                          : -static_cast<int64_t>(uint64_t{1} << (bits - 1));
    return static_cast<int64_t>(t);
}

} // namespace tempura::scalar

namespace tempura {

// Applies an integer/bool ALU op to constant operands with C semantics (Idiv truncates, Mod
// takes the dividend's sign), the result wrapped to the dtype's width as LLVM does; nullopt when
// the result is undefined (division by zero, shift out of range) or the op is not an integer op.
std::optional<int64_t> exec_int_alu(Op op, DType dtype, const int64_t* operands, size_t n);

// Floating-point folding: nullopt for ops that are not float ALU ops.
std::optional<double> exec_float_alu(Op op, DType dtype, const double* operands, size_t n);

// Tensor::exp(y) is EXP2(y * (1/ln 2)). In float32 and float64 that composition means e^y
// (computed from y itself, not from the rounded product, which would be up to |y| / 2 ulp off)
// wherever it is evaluated: the codegen's decomposition, the reference interpreter, constant
// folding. True when `value`, a constant of dtype `dtype`, is that factor 1/ln 2.
bool is_exp_factor(DType dtype, double value);

class UOp;
// y when `u` is EXP2(y * (1/ln 2)) of float32 or float64, the factor a CONST (reshaped or
// expanded in a tensor graph) with is_exp_factor; else a null UOp. The one test of the pattern
// for the decomposition, the reference interpreter and constant folding.
UOp exp_operand(const UOp& u);

} // namespace tempura
