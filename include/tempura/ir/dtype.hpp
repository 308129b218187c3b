#pragma once
// DType: a scalar kind, a vector width and, for pointers, an address space.
#include <cstdint>
#include <limits>
#include <string>

namespace tempura {

enum class Scalar : uint8_t {
    Void,
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float16,
    BFloat16,
    Float32,
    Float64,
    Index, // the symbolic integer of index arithmetic; int64 semantics until index lowering
};

enum class AddrSpace : uint8_t { Global, Local, Reg };

struct DType {
    Scalar scalar = Scalar::Void;
    uint16_t count = 1;  // vector width; 1 for scalars
    bool is_ptr = false; // a pointer to `count` x `scalar` in `addrspace`
    AddrSpace addrspace = AddrSpace::Global;

    static const DType Void, Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
        Float16, BFloat16, Float32, Float64, Index;

    constexpr bool operator==(const DType&) const = default;

    constexpr DType scalar_type() const { return DType{scalar, 1, false, AddrSpace::Global}; }
    constexpr DType vec(uint16_t n) const { return DType{scalar, n, is_ptr, addrspace}; }
    constexpr DType ptr(AddrSpace a = AddrSpace::Global) const {
        return DType{scalar, count, true, a};
    }
    constexpr DType base() const { return DType{scalar, count, false, AddrSpace::Global}; }

    constexpr bool is_bool() const { return !is_ptr && scalar == Scalar::Bool; }
    // Float16 or BFloat16 (scalar or vector): stored in 16 bits, computed in float32 where it
    // matters (transcendentals, accumulation).
    constexpr bool is_16bit_float() const {
        return !is_ptr && (scalar == Scalar::Float16 || scalar == Scalar::BFloat16);
    }
    constexpr bool is_float() const {
        return !is_ptr && (scalar == Scalar::Float16 || scalar == Scalar::BFloat16 ||
                           scalar == Scalar::Float32 || scalar == Scalar::Float64);
    }
    constexpr bool is_unsigned() const {
        return !is_ptr && (scalar == Scalar::UInt8 || scalar == Scalar::UInt16 ||
                           scalar == Scalar::UInt32 || scalar == Scalar::UInt64);
    }
    // Integers in the C sense, Index included (bool is not an integer here).
    constexpr bool is_int() const {
        return !is_ptr &&
               (scalar == Scalar::Int8 || scalar == Scalar::Int16 || scalar == Scalar::Int32 ||
                scalar == Scalar::Int64 || is_unsigned() || scalar == Scalar::Index);
    }
    // Integer-valued: what vmin/vmax describe exactly.
    constexpr bool is_integral() const { return is_int() || is_bool(); }

    constexpr int bits() const {
        switch (scalar) {
        case Scalar::Void: return 0;
        case Scalar::Bool: return 1;
        case Scalar::Int8:
        case Scalar::UInt8: return 8;
        case Scalar::Int16:
        case Scalar::UInt16:
        case Scalar::Float16:
        case Scalar::BFloat16: return 16;
        case Scalar::Int32:
        case Scalar::UInt32:
        case Scalar::Float32: return 32;
        case Scalar::Int64:
        case Scalar::UInt64:
        case Scalar::Float64:
        case Scalar::Index: return 64;
        }
        return 0;
    }
    constexpr int itemsize() const { return scalar == Scalar::Bool ? 1 : bits() / 8; }

    // The range of values of an integral scalar, as int64 (uint64's top half is not representable
    // and is clamped: bounds of uint64 values above INT64_MAX are reported as unknown).
    constexpr int64_t min() const {
        if (is_bool() || is_unsigned()) return 0;
        if (bits() >= 64) return std::numeric_limits<int64_t>::min();
        return -(int64_t{1} << (bits() - 1));
    }
    constexpr int64_t max() const {
        if (is_bool()) return 1;
        if (bits() >= 64) return std::numeric_limits<int64_t>::max();
        if (is_unsigned()) return (int64_t{1} << bits()) - 1;
        return (int64_t{1} << (bits() - 1)) - 1;
    }

    std::string name() const; // "float32", "index", "float32x4", "float32*[global]"
};

inline constexpr DType DType::Void{Scalar::Void};
inline constexpr DType DType::Bool{Scalar::Bool};
inline constexpr DType DType::Int8{Scalar::Int8};
inline constexpr DType DType::Int16{Scalar::Int16};
inline constexpr DType DType::Int32{Scalar::Int32};
inline constexpr DType DType::Int64{Scalar::Int64};
inline constexpr DType DType::UInt8{Scalar::UInt8};
inline constexpr DType DType::UInt16{Scalar::UInt16};
inline constexpr DType DType::UInt32{Scalar::UInt32};
inline constexpr DType DType::UInt64{Scalar::UInt64};
inline constexpr DType DType::Float16{Scalar::Float16};
inline constexpr DType DType::BFloat16{Scalar::BFloat16};
inline constexpr DType DType::Float32{Scalar::Float32};
inline constexpr DType DType::Float64{Scalar::Float64};
inline constexpr DType DType::Index{Scalar::Index};

// Wraps v to the dtype's width with two's complement, as C and LLVM do for integer overflow.
constexpr int64_t wrap_to(DType dt, int64_t v) {
    if (dt.is_bool()) return v != 0;
    const int b = dt.bits();
    if (b >= 64 || b == 0) return v;
    const uint64_t mask = (uint64_t{1} << b) - 1;
    uint64_t u = static_cast<uint64_t>(v) & mask;
    if (!dt.is_unsigned() && (u >> (b - 1)) != 0) u |= ~mask;
    return static_cast<int64_t>(u);
}

} // namespace tempura
