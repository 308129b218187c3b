#pragma once
// Transcendental functions built from plain ALU ops (private to src/codegen). Each takes the
// operand node and returns the node computing the function of it.
#include "tempura/ir/uop.hpp"

namespace tempura::codegen {

UOp exp2_f32(const UOp& x);                // within 2 ulp; NaN stays NaN
UOp exp_f32(const UOp& y);                 // e^y (EXP2(y * (1/ln 2))), within 2 ulp
UOp log2_f32(const UOp& x);                // within 2 ulp; log2(0) = -inf, log2(x < 0) = NaN
UOp sin_cos_f32(const UOp& x, bool cos);   // full range, within 0.8 ulp
UOp sin_cos_f64(const UOp& x, bool cos);   // full range, within 0.74 ulp
UOp erf_f32(const UOp& x);                 // within 3 ulp
UOp exp2_f64(const UOp& x);                // within 1 ulp; NaN stays NaN
UOp exp_f64(const UOp& y);                 // e^y (EXP2(y * (1/ln 2))), within 1 ulp
UOp log2_f64(const UOp& x);                // within 1 ulp; log2(0) = -inf, log2(x < 0) = NaN
UOp erf_f64(const UOp& x);                 // within 1 ulp
UOp pow_float(const UOp& x, const UOp& y); // 2^(y log2|x|) with std::pow's special cases
UOp pow_int(const UOp& x, const UOp& y);   // repeated squaring, wrapping

} // namespace tempura::codegen
