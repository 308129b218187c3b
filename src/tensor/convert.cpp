// Element conversions between host arrays of any scalar dtype.
#include "convert.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "tempura/error.hpp"
#include "tempura/ir/scalar.hpp"

namespace tempura::detail {

float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { // subnormal: normalize
            int e = -1;
            do {
                ++e;
                mant <<= 1;
            } while ((mant & 0x400) == 0);
            bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | mant << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | mant << 13;
    }
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t float_to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
    const uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) // inf or nan
        return sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0);
    if (abs >= 0x477ff000u) return sign | 0x7c00; // rounds to >= 65520: inf
    if (abs < 0x38800000u) {                      // below the smallest normal half: subnormal
        // value = abs_float; half subnormal unit is 2^-24.
        float af;
        std::memcpy(&af, &abs, sizeof af);
        const float scaled = af * 16777216.0f; // / 2^-24
        const auto m = static_cast<uint32_t>(std::nearbyint(scaled));
        return sign | static_cast<uint16_t>(m);
    }
    // Normal: rebias exponent, round mantissa from 23 to 10 bits (nearest even).
    uint32_t m = abs + 0xc8000000u; // exponent - (127 - 15), in place
    const uint32_t round_bit = 0x1000, sticky = 0xfff;
    uint32_t r = m >> 13;
    if ((m & round_bit) && ((m & sticky) || (r & 1))) ++r;
    return sign | static_cast<uint16_t>(r);
}

float bf16_to_float(uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t float_to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40); // nan
    const uint32_t lsb = (x >> 16) & 1;
    x += 0x7fff + lsb;
    return static_cast<uint16_t>(x >> 16);
}

double round_float(DType dt, double v) {
    switch (dt.scalar) {
    case Scalar::Float32: return static_cast<double>(static_cast<float>(v));
    case Scalar::Float16: return half_to_float(float_to_half(static_cast<float>(v)));
    case Scalar::BFloat16: return bf16_to_float(float_to_bf16(static_cast<float>(v)));
    default: return v;
    }
}

int64_t float_to_int(DType dt, double v) {
    if (dt.is_bool()) return v != 0.0; // as C: nonzero (NaN included) is true
    return scalar::float_to_int_sat(v, dt.bits(), dt.is_unsigned());
}

namespace {

template <class T>
T ld(const void* p, int64_t i) {
    T v;
    std::memcpy(&v, static_cast<const char*>(p) + i * static_cast<int64_t>(sizeof(T)), sizeof v);
    return v;
}
template <class T>
void st(void* p, int64_t i, T v) {
    std::memcpy(static_cast<char*>(p) + i * static_cast<int64_t>(sizeof(T)), &v, sizeof v);
}

[[noreturn]] void bad_dtype(DType dt) { fail("convert", "no host elements of dtype " + dt.name()); }

} // namespace

double load_float(DType dt, const void* p, int64_t i) {
    switch (dt.scalar) {
    case Scalar::Float32: return ld<float>(p, i);
    case Scalar::Float64: return ld<double>(p, i);
    case Scalar::Float16: return half_to_float(ld<uint16_t>(p, i));
    case Scalar::BFloat16: return bf16_to_float(ld<uint16_t>(p, i));
    case Scalar::UInt64: return static_cast<double>(static_cast<uint64_t>(load_int(dt, p, i)));
    default: return static_cast<double>(load_int(dt, p, i));
    }
}

int64_t load_int(DType dt, const void* p, int64_t i) {
    switch (dt.scalar) {
    case Scalar::Bool: return ld<uint8_t>(p, i) != 0;
    case Scalar::Int8: return ld<int8_t>(p, i);
    case Scalar::Int16: return ld<int16_t>(p, i);
    case Scalar::Int32: return ld<int32_t>(p, i);
    case Scalar::Int64:
    case Scalar::Index: return ld<int64_t>(p, i);
    case Scalar::UInt8: return ld<uint8_t>(p, i);
    case Scalar::UInt16: return ld<uint16_t>(p, i);
    case Scalar::UInt32: return ld<uint32_t>(p, i);
    case Scalar::UInt64: return static_cast<int64_t>(ld<uint64_t>(p, i));
    case Scalar::Float32:
    case Scalar::Float64:
    case Scalar::Float16:
    case Scalar::BFloat16: return float_to_int(DType::Int64, load_float(dt, p, i));
    default: bad_dtype(dt);
    }
}

void store_float(DType dt, void* p, int64_t i, double v) {
    switch (dt.scalar) {
    case Scalar::Float32: st<float>(p, i, static_cast<float>(v)); return;
    case Scalar::Float64: st<double>(p, i, v); return;
    case Scalar::Float16: st<uint16_t>(p, i, float_to_half(static_cast<float>(v))); return;
    case Scalar::BFloat16: st<uint16_t>(p, i, float_to_bf16(static_cast<float>(v))); return;
    default: store_int(dt, p, i, float_to_int(dt, v)); return;
    }
}

void store_int(DType dt, void* p, int64_t i, int64_t v) {
    switch (dt.scalar) {
    case Scalar::Bool: st<uint8_t>(p, i, v != 0); return;
    case Scalar::Int8: st<int8_t>(p, i, static_cast<int8_t>(v)); return;
    case Scalar::Int16: st<int16_t>(p, i, static_cast<int16_t>(v)); return;
    case Scalar::Int32: st<int32_t>(p, i, static_cast<int32_t>(v)); return;
    case Scalar::Int64:
    case Scalar::Index: st<int64_t>(p, i, v); return;
    case Scalar::UInt8: st<uint8_t>(p, i, static_cast<uint8_t>(v)); return;
    case Scalar::UInt16: st<uint16_t>(p, i, static_cast<uint16_t>(v)); return;
    case Scalar::UInt32: st<uint32_t>(p, i, static_cast<uint32_t>(v)); return;
    case Scalar::UInt64: st<uint64_t>(p, i, static_cast<uint64_t>(v)); return;
    case Scalar::Float32:
    case Scalar::Float64:
    case Scalar::Float16:
    case Scalar::BFloat16: store_float(dt, p, i, static_cast<double>(v)); return;
    default: bad_dtype(dt);
    }
}

void convert_elements(DType from, const void* src, DType to, void* dst, int64_t n) {
    if (n <= 0) return; // an empty std::vector's data() may be null
    if (from == to) {
        std::memcpy(dst, src, static_cast<size_t>(n) * static_cast<size_t>(from.itemsize()));
        return;
    }
    if (from.is_float()) {
        for (int64_t i = 0; i < n; ++i) {
            const double v = load_float(from, src, i);
            if (to.is_bool())
                store_int(to, dst, i, v != 0.0);
            else
                store_float(to, dst, i, v);
        }
    } else if (from.scalar == Scalar::UInt64 && to.is_float()) {
        for (int64_t i = 0; i < n; ++i) store_float(to, dst, i, load_float(from, src, i));
    } else {
        for (int64_t i = 0; i < n; ++i) {
            const int64_t v = load_int(from, src, i);
            if (to.is_bool())
                store_int(to, dst, i, v != 0);
            else
                store_int(to, dst, i, v);
        }
    }
}

} // namespace tempura::detail
