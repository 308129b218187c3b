#pragma once
// Test helpers for tensors, for doctest users:
//
//     #include <doctest/doctest.h>      // first: testing.hpp uses doctest only if it is included
//     #include <tempura/testing.hpp>
//
//     CHECK_TENSOR_EQ(a, b);                    // same shape, same dtype, equal elements
//     CHECK_TENSOR_CLOSE(a, b, 1e-5, 1e-6);     // same shape, |a - b| <= atol + rtol * |b|
//
// a and b are Tensors or FixedTensors, in any mix. On failure the check fails (like CHECK, the
// test goes on) with both tensors printed, dtype, shape and values (long ones truncated), and the
// first differing element, e.g.
//
//     test.cpp:8: ERROR: CHECK_TENSOR_EQ( y, want ) failed: 1 of 6 elements differ; the first at
//     [1, 2] (flat 5): 6 vs 7; max |a - b| = 1
//       y = float32 [2, 3] {0, 1, 2, 3, 4, 6}
//       want = float32 [2, 3] {0, 1, 2, 3, 4, 7}
//
// (the first line is one line). Tensors of more than 16 elements print their first 12 and last 4.
// NaNs in the same places compare equal (NumPy's equal_nan). Realizing a lazy tensor here runs its
// kernels; an exception from that is reported as the failure.
//
// The comparisons themselves, tempura::testing::compare_equal() and compare_close(), need no
// doctest: they return {ok, message}. Without <doctest/doctest.h> included before this header the
// macros are still defined, but using one is a compile error that says so.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "tempura/tensor/fixed_tensor.hpp"
#include "tempura/tensor/tensor.hpp"

namespace tempura::testing {

struct Comparison {
    bool ok = true;
    std::string message; // empty when ok
};

// The tensor of a Tensor or a FixedTensor.
inline const Tensor& as_tensor(const Tensor& t) { return t; }
template <AnyFixedTensor F>
const Tensor& as_tensor(const F& f) {
    return f.tensor();
}

namespace detail {

// A tensor's values, as doubles (floats) or as int64 (integers and bool; unsigned 64-bit values
// above INT64_MAX print wrapped), read once.
struct Values {
    DType dtype;
    Shape shape;
    std::vector<double> f;
    std::vector<int64_t> i;
    bool is_float() const { return dtype.is_float(); }
    size_t size() const { return is_float() ? f.size() : i.size(); }
};

inline Values read(const Tensor& t) {
    Values v{t.dtype(), t.shape(), {}, {}};
    if (t.dtype().is_float())
        v.f = t.to_vector<double>();
    else
        v.i = t.to_vector<int64_t>();
    return v;
}

inline std::string element(const Values& v, size_t k) {
    if (v.dtype.is_bool()) return v.i[k] ? "true" : "false";
    if (!v.is_float()) return std::to_string(v.i[k]);
    char buf[40];
    // Enough digits to tell neighbouring float32 (float64) values apart.
    std::snprintf(buf, sizeof buf, v.dtype.bits() > 32 ? "%.17g" : "%.9g", v.f[k]);
    return buf;
}

// "float32 [2, 3] {1, 2, 3, 4, 5, 6}"; more than 16 values print as the first 12, "...", the
// last 4 and the count.
inline std::string describe(const Values& v) {
    std::string s = v.dtype.name() + " " + shape_str(v.shape) + " {";
    const size_t n = v.size();
    for (size_t k = 0; k < n; ++k) {
        if (n > 16 && k == 12) {
            s += ", ...";
            k = n - 4;
        }
        if (k) s += ", ";
        s += element(v, k);
    }
    s += "}";
    if (n > 16) s += " (" + std::to_string(n) + " values)";
    return s;
}

// [1, 2] for flat index 5 of shape [2, 3].
inline std::string index_str(const Shape& shape, size_t flat) {
    Shape idx(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        const auto extent = static_cast<size_t>(shape[d]);
        idx[d] = static_cast<int64_t>(extent ? flat % extent : 0);
        flat = extent ? flat / extent : 0;
    }
    return shape_str(idx);
}

template <class Differs>
Comparison compare(const Tensor& a, const Tensor& b, const char* a_text, const char* b_text,
                   bool same_dtype, Differs differs) {
    Comparison c;
    Values va, vb;
    try {
        va = read(a);
        vb = read(b);
    } catch (const std::exception& e) {
        c.ok = false;
        c.message = std::string("realizing a tensor threw: ") + e.what();
        return c;
    }
    const std::string pa = std::string("  ") + a_text + " = ",
                      pb = std::string("  ") + b_text + " = ";
    const std::string both = "\n" + pa + describe(va) + "\n" + pb + describe(vb);
    if (va.shape != vb.shape) {
        c.ok = false;
        c.message =
            "the shapes differ: " + shape_str(va.shape) + " and " + shape_str(vb.shape) + both;
        return c;
    }
    if (same_dtype && va.dtype != vb.dtype) {
        c.ok = false;
        c.message = "the dtypes differ: " + va.dtype.name() + " and " + vb.dtype.name() + both;
        return c;
    }
    size_t count = 0, first = 0;
    double worst = 0;
    for (size_t k = 0; k < va.size(); ++k) {
        const double x = va.is_float() ? va.f[k] : static_cast<double>(va.i[k]);
        const double y = vb.is_float() ? vb.f[k] : static_cast<double>(vb.i[k]);
        bool bad;
        if (!va.is_float() && !vb.is_float())
            bad = va.i[k] != vb.i[k]; // exact, also beyond 2^53
        else
            bad = differs(x, y);
        if (bad) {
            if (count++ == 0) first = k;
            if (!std::isnan(x) && !std::isnan(y)) worst = std::fmax(worst, std::fabs(x - y));
        }
    }
    if (count == 0) return c;
    c.ok = false;
    c.message = std::to_string(count) + " of " + std::to_string(va.size()) +
                " elements differ; the first at " + index_str(va.shape, first) + " (flat " +
                std::to_string(first) + "): " + element(va, first) + " vs " + element(vb, first);
    if (va.is_float() || vb.is_float()) {
        char buf[48];
        std::snprintf(buf, sizeof buf, "; max |a - b| = %.6g", worst);
        c.message += buf;
    }
    c.message += both;
    return c;
}

} // namespace detail

// Same shape, same dtype, equal elements (NaN equals NaN).
template <class A, class B>
Comparison compare_equal(const A& a, const B& b, const char* a_text = "a",
                         const char* b_text = "b") {
    return detail::compare(as_tensor(a), as_tensor(b), a_text, b_text, true,
                           [](double x, double y) {
                               if (std::isnan(x) || std::isnan(y))
                                   return !(std::isnan(x) && std::isnan(y));
                               return x != y;
                           });
}

// Same shape and |a - b| <= atol + rtol * |b| elementwise (NumPy's isclose); the dtypes may differ.
// NaN matches NaN, an infinity matches the same infinity.
template <class A, class B>
Comparison compare_close(const A& a, const B& b, double rtol, double atol, const char* a_text = "a",
                         const char* b_text = "b") {
    return detail::compare(as_tensor(a), as_tensor(b), a_text, b_text, false,
                           [rtol, atol](double x, double y) {
                               if (std::isnan(x) || std::isnan(y))
                                   return !(std::isnan(x) && std::isnan(y));
                               if (std::isinf(x) || std::isinf(y)) return x != y;
                               return !(std::fabs(x - y) <= atol + rtol * std::fabs(y));
                           });
}

} // namespace tempura::testing

#if defined(DOCTEST_LIBRARY_INCLUDED) && !defined(DOCTEST_CONFIG_DISABLE)

#define CHECK_TENSOR_EQ(a, b)                                                                      \
    do {                                                                                           \
        const ::tempura::testing::Comparison tempura_comparison_ =                                 \
            ::tempura::testing::compare_equal((a), (b), #a, #b);                                   \
        if (!tempura_comparison_.ok)                                                               \
            DOCTEST_ADD_FAIL_CHECK_AT(__FILE__, __LINE__,                                          \
                                      (std::string("CHECK_TENSOR_EQ( " #a ", " #b " ) failed: ") + \
                                       tempura_comparison_.message));                              \
    } while (false)

#define CHECK_TENSOR_CLOSE(a, b, rtol, atol)                                                       \
    do {                                                                                           \
        const ::tempura::testing::Comparison tempura_comparison_ =                                 \
            ::tempura::testing::compare_close((a), (b), (rtol), (atol), #a, #b);                   \
        if (!tempura_comparison_.ok)                                                               \
            DOCTEST_ADD_FAIL_CHECK_AT(__FILE__, __LINE__,                                          \
                                      (std::string("CHECK_TENSOR_CLOSE( " #a ", " #b ", " #rtol    \
                                                   ", " #atol " ) failed: ") +                     \
                                       tempura_comparison_.message));                              \
    } while (false)

#elif defined(DOCTEST_CONFIG_DISABLE)

#define CHECK_TENSOR_EQ(a, b) ((void)0)
#define CHECK_TENSOR_CLOSE(a, b, rtol, atol) ((void)0)

#else

#define CHECK_TENSOR_EQ(a, b)                                                                      \
    static_assert(sizeof(decltype(a)) == 0,                                                        \
                  "CHECK_TENSOR_EQ needs doctest: include <doctest/doctest.h> before "             \
                  "<tempura/testing.hpp>")
#define CHECK_TENSOR_CLOSE(a, b, rtol, atol)                                                       \
    static_assert(sizeof(decltype(a)) == 0,                                                        \
                  "CHECK_TENSOR_CLOSE needs doctest: include <doctest/doctest.h> before "          \
                  "<tempura/testing.hpp>")

#endif
