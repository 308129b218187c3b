#pragma once
// Element conversions between host arrays of any scalar dtype (private to src/tensor).
#include <cstdint>

#include "tempura/ir/dtype.hpp"

namespace tempura::detail {

// IEEE half and bfloat16 <-> float, round to nearest even.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);

// Rounds a double to what a scalar of `dt` holds (float32, float16, bfloat16; float64 unchanged).
double round_float(DType dt, double v);

// Float -> integer as the backends define it for in-range values (truncation), saturating out of
// range and 0 for NaN, so that no input is undefined behaviour on the host.
int64_t float_to_int(DType dt, double v);

// Reads element i of a host array of dtype dt: floats as double, integers and bool as int64
// (uint64 as its bit pattern).
double load_float(DType dt, const void* p, int64_t i);
int64_t load_int(DType dt, const void* p, int64_t i);
void store_float(DType dt, void* p, int64_t i, double v);
void store_int(DType dt, void* p, int64_t i, int64_t v);

// n elements from `src` (dtype `from`) to `dst` (dtype `to`), with C conversion semantics
// (bool: nonzero -> true; float -> int via float_to_int).
void convert_elements(DType from, const void* src, DType to, void* dst, int64_t n);

} // namespace tempura::detail
