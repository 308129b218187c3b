#pragma once
// FixedTensor<T, Dims...>: a Tensor whose element type and shape are part of its C++ type.
//
//     FixedTensor<float, 64, 784> x = FixedTensor<float, 64, 784>::from_vector(pixels);
//     FixedTensor<float, 128, 784> w = ...;
//     auto h = (x.dot(w.transpose()) + b).relu();       // FixedTensor<float, 64, 128>
//     auto p = h.softmax<-1>().argmax<-1>();            // FixedTensor<int32_t, 64>
//
// Every operation of Tensor is here, with the result shape computed at compile time; where an
// argument decides the result's shape it is a template argument (reshape<2, -1>(), permute<1, 0>(),
// sum<0>(), softmax<-1>(), pad<before0, after0, before1, after1>(), ...), and keepdim is the tag
// argument `tempura::keepdim`: `x.max<-1>(tempura::keepdim)`.
//
// There is no second engine: a FixedTensor holds a Tensor and every operation calls the Tensor
// operation of the same name with the same arguments, so both build the same UOp graph and run
// the same kernels. f.tensor() is free; FixedTensor<T, Dims...>(tensor) checks dtype and shape
// at run time and throws tempura::Error on a mismatch.
//
// Mistakes are compile errors with one sentence that names the operation and the shapes. g++ 12
// cannot put computed text in a static_assert message (C++26 can), so the sentence is built by a
// constexpr function and passed as a template argument to FixedTensorError, a class that is never
// defined; a static_assert asks for its size, and g++'s first error line then reads
//
//   error: invalid application of 'sizeof' to incomplete type 'tempura::FixedTensorError<
//     tempura::Sentence{"dot: inner dimensions differ: [4, 3] @ [2, 5]"}>'
//
// (on one line), followed by the static_assert's source line. Nothing else is reported for the
// mistake: the failing operation returns an InvalidFixedTensor, which every later operation accepts
// silently and which converts to any FixedTensor, so that no cascade of errors follows.
//
// In a template where the FixedTensor's type is dependent, name member templates with `template`:
// `x.template reshape<2, -1>()` (as with any member template).
#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tempura/error.hpp"
#include "tempura/tensor/shape.hpp"
#include "tempura/tensor/tensor.hpp"

namespace tempura {

template <Number T, int64_t... Dims>
class FixedTensor;
template <Number T>
class InvalidFixedTensor;

// ---- compile-time error sentences ---------------------------------------------------------------

// A sentence as a value usable as a template argument; g++ prints it as a string literal (the
// trailing zeros left out). Sentences longer than the buffer end in "...".
struct Sentence {
    char text[256]{};
};

// Deliberately never defined: its template argument is the sentence of a failed compile-time check,
// and g++ prints that argument in the first error line when asked for the size of this type.
template <Sentence Message>
struct FixedTensorError;

// The tag that selects keepdim reductions: x.sum<1>(tempura::keepdim).
struct KeepDim {
    explicit constexpr KeepDim() = default;
};
inline constexpr KeepDim keepdim{};

namespace fixed_detail {

template <Sentence Message>
constexpr auto report() { // auto: instantiated at once (its error comes first)
    // One line, so that g++ shows the message under the error.
    // clang-format off
    static_assert(sizeof(FixedTensorError<Message>) == 0, "FixedTensor: a compile-time check failed: see the sentence above");
    // clang-format on
}

template <size_t N>
using Dims = std::array<int64_t, N>;

// "float32", "int32", ...: the DType names, at compile time.
template <class T>
constexpr const char* type_name() {
    constexpr DType d = dtype_of<T>();
    if constexpr (d == DType::Bool) return "bool";
    if constexpr (d == DType::Float32) return "float32";
    if constexpr (d == DType::Float64) return "float64";
    if constexpr (d == DType::Int8) return "int8";
    if constexpr (d == DType::Int16) return "int16";
    if constexpr (d == DType::Int32) return "int32";
    if constexpr (d == DType::Int64) return "int64";
    if constexpr (d == DType::UInt8) return "uint8";
    if constexpr (d == DType::UInt16) return "uint16";
    if constexpr (d == DType::UInt32) return "uint32";
    if constexpr (d == DType::UInt64) return "uint64";
    return "?";
}

// Writes text, numbers and shapes ("[2, 3]") into a Sentence.
class Writer {
  public:
    constexpr void write(const char* s) {
        while (*s) put(*s++);
    }
    template <std::integral I>
    constexpr void write(I value) {
        if constexpr (std::is_same_v<I, bool>) {
            write(value ? "true" : "false");
        } else {
            char digits[24]{};
            int n = 0;
            const bool negative = value < 0;
            // Through the unsigned type: -INT64_MIN does not overflow there.
            auto u = static_cast<std::make_unsigned_t<I>>(value);
            if (negative) u = static_cast<std::make_unsigned_t<I>>(0 - u);
            do {
                digits[n++] = static_cast<char>('0' + u % 10);
                u /= 10;
            } while (u != 0);
            if (negative) put('-');
            while (n > 0) put(digits[--n]);
        }
    }
    template <size_t N>
    constexpr void write(const Dims<N>& shape) {
        put('[');
        for (size_t i = 0; i < N; ++i) {
            if (i) write(", ");
            write(shape[i]);
        }
        put(']');
    }
    constexpr Sentence sentence() const { return s_; }

  private:
    constexpr void put(char c) {
        constexpr size_t cap = sizeof(Sentence{}.text) - 1;
        if (n_ < cap - 3) {
            s_.text[n_++] = c;
        } else if (n_ == cap - 3) {
            for (int i = 0; i < 3; ++i) s_.text[n_++] = '.';
        }
    }
    Sentence s_{};
    size_t n_ = 0;
};

template <class... Args>
constexpr Sentence sentence(const Args&... args) {
    Writer w;
    (w.write(args), ...);
    return w.sentence();
}

// The outcome of a compile-time check: ok, or the sentence that says why not; and the result's
// dims (the first `rank` of `dims`; Cap bounds the rank).
template <size_t Cap>
struct Checked {
    bool ok = true;
    Sentence message{};
    Dims<Cap> dims{};
    size_t rank = 0;

    constexpr void push(int64_t d) { dims[rank++] = d; }
    template <class... Args>
    constexpr Checked& fail(const Args&... args) {
        if (ok) message = sentence(args...); // the first mistake is the one reported
        ok = false;
        return *this;
    }
};

template <size_t A, size_t B>
inline constexpr size_t max_of = A > B ? A : B;

// ---- the result type: FixedTensor<T, dims[0], ..., dims[rank - 1]> ------------------------------

template <class T, auto D, size_t... I>
FixedTensor<T, D[I]...> fixed_type(std::index_sequence<I...>); // declared only, for decltype

template <class T, auto D, size_t Rank>
using FixedOf = decltype(fixed_type<T, D>(std::make_index_sequence<Rank>{}));

// The tag of the constructor that wraps a Tensor whose shape the caller has computed at compile
// time (no run-time check, except for assert() in debug builds).
struct Unchecked {
    explicit constexpr Unchecked() = default;
};

template <class X>
inline constexpr bool is_fixed_tensor = false;
template <class T, int64_t... D>
inline constexpr bool is_fixed_tensor<FixedTensor<T, D...>> = true;

template <class X>
inline constexpr bool is_invalid = false;
template <class T>
inline constexpr bool is_invalid<InvalidFixedTensor<T>> = true;

// An operand of an operation on an InvalidFixedTensor: a FixedTensor, an InvalidFixedTensor or a
// number, at least one of them invalid.
template <class X>
concept Operand = is_fixed_tensor<std::remove_cvref_t<X>> || is_invalid<std::remove_cvref_t<X>> ||
    Number<std::remove_cvref_t<X>>;
template <class X>
concept Invalid = is_invalid<std::remove_cvref_t<X>>;
template <class... X>
concept Poisoned = (Operand<X> && ...) && (is_invalid<std::remove_cvref_t<X>> || ...);

// The element type of a poisoned operation's result: the first tensor operand's.
template <class X, class... Rest>
constexpr auto first_value_type() {
    if constexpr (Number<X>) {
        if constexpr (sizeof...(Rest) == 0)
            return std::type_identity<float>{};
        else
            return first_value_type<Rest...>();
    } else {
        return std::type_identity<typename X::value_type>{};
    }
}
template <class... X>
using PoisonedType = InvalidFixedTensor<typename decltype(first_value_type<X...>())::type>;

// ---- element-type rules (the compile-time mirror of Tensor's run-time checks) -------------------

template <class T, size_t N>
constexpr Checked<0> need_float(const char* op, const Dims<N>& shape) {
    Checked<0> r;
    if (!std::is_floating_point_v<T>)
        r.fail(op, ": needs a float tensor, got ", type_name<T>(), " ", shape);
    return r;
}

template <class T, size_t N>
constexpr Checked<0> need_arith(const char* op, const Dims<N>& shape) {
    Checked<0> r;
    if (std::is_same_v<T, bool>) r.fail(op, ": not supported for bool tensors, got bool ", shape);
    return r;
}

template <class T, size_t N>
constexpr Checked<0> need_bool(const char* op, const Dims<N>& shape) {
    Checked<0> r;
    if (!std::is_same_v<T, bool>)
        r.fail(op, ": needs a bool tensor, got ", type_name<T>(), " ", shape);
    return r;
}

template <class TA, class TB, size_t A, size_t B>
constexpr Checked<0> need_same_type(const char* op, const Dims<A>& a, const Dims<B>& b) {
    Checked<0> r;
    if (!std::is_same_v<TA, TB>)
        r.fail(op, ": element types differ: ", type_name<TA>(), " ", a, " and ", type_name<TB>(),
               " ", b);
    return r;
}

// ---- shape rules --------------------------------------------------------------------------------

// NumPy broadcasting, shapes aligned at the right.
template <size_t A, size_t B>
constexpr Checked<max_of<A, B>> broadcast(const char* op, const Dims<A>& a, const Dims<B>& b) {
    constexpr size_t n = max_of<A, B>;
    Checked<n> r;
    for (size_t i = 0; i < n; ++i) {
        const int64_t da = i < n - A ? 1 : a[i - (n - A)];
        const int64_t db = i < n - B ? 1 : b[i - (n - B)];
        if (da == db || db == 1)
            r.push(da);
        else if (da == 1)
            r.push(db);
        else
            return r.fail(op, ": shapes ", a, " and ", b, " cannot be broadcast");
    }
    return r;
}

// An axis counted from the end when negative; -1 when out of range.
constexpr int64_t normalize(int64_t axis, size_t ndim) {
    const auto n = static_cast<int64_t>(ndim);
    if (axis < -n || axis >= n) return -1;
    return axis < 0 ? axis + n : axis;
}

template <size_t N>
constexpr int64_t numel_of(const Dims<N>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

template <size_t N, size_t K>
constexpr Checked<K> reshape(const Dims<N>& from, const Dims<K>& to) {
    Checked<K> r;
    const int64_t n = numel_of(from);
    int64_t infer = -1, known = 1;
    for (size_t i = 0; i < K; ++i) {
        if (to[i] == -1) {
            if (infer >= 0) return r.fail("reshape: more than one -1 in ", to);
            infer = static_cast<int64_t>(i);
        } else if (to[i] < 0) {
            return r.fail("reshape: invalid dimension ", to[i], " in ", to);
        } else if (__builtin_mul_overflow(known, to[i], &known)) {
            return r.fail("reshape: cannot reshape ", from, " (", n, " elements) into ", to,
                          " (too many elements)");
        }
    }
    if (infer >= 0 && (known == 0 || n % known != 0))
        return r.fail("reshape: cannot reshape ", from, " (", n, " elements) into ", to);
    if (infer < 0 && known != n)
        return r.fail("reshape: cannot reshape ", from, " (", n, " elements) into ", to, " (",
                      known, " elements)");
    for (size_t i = 0; i < K; ++i) r.push(static_cast<int64_t>(i) == infer ? n / known : to[i]);
    return r;
}

template <size_t N, size_t K>
constexpr Checked<N> permute(const Dims<N>& from, const Dims<K>& order) {
    Checked<N> r;
    bool seen[N + 1]{};
    bool ok = K == N;
    for (size_t i = 0; ok && i < K; ++i) {
        const int64_t a = normalize(order[i], N);
        ok = a >= 0 && !seen[a];
        if (ok) seen[a] = true;
    }
    if (!ok)
        return r.fail("permute: ", order, " is not a permutation of the ", N, " axes of ", from);
    if constexpr (K == N)
        for (size_t i = 0; i < N; ++i) r.push(from[static_cast<size_t>(normalize(order[i], N))]);
    return r;
}

template <size_t N>
constexpr Checked<N> transpose(const Dims<N>& from, int64_t d0, int64_t d1) {
    Checked<N> r;
    for (int64_t d : {d0, d1})
        if (normalize(d, N) < 0)
            return r.fail("transpose: axis ", d, " is out of range for ", from, " (", N, " dims)");
    const int64_t a = normalize(d0, N), b = normalize(d1, N);
    for (size_t i = 0; i < N; ++i) {
        const auto k = static_cast<int64_t>(i);
        r.push(from[static_cast<size_t>(k == a ? b : k == b ? a : k)]);
    }
    return r;
}

template <size_t M, size_t N>
constexpr Checked<N> expand(const Dims<M>& from, const Dims<N>& to) {
    Checked<N> r;
    if (N < M) return r.fail("expand: cannot expand ", from, " to ", to);
    for (size_t i = 0; i < N; ++i) {
        if (i < N - M) { // a new leading dim
            if (to[i] < 0) return r.fail("expand: cannot expand ", from, " to ", to);
            r.push(to[i]);
            continue;
        }
        const int64_t old = from[i - (N - M)];
        const int64_t want = to[i] == -1 ? old : to[i];
        if (want < 0 || (want != old && old != 1))
            return r.fail("expand: cannot expand ", from, " to ", to);
        r.push(want);
    }
    return r;
}

// pad (grow) and shrink (cut): `pairs` is flat, (before, after) or (begin, end) per axis.
template <size_t N, size_t K>
constexpr Checked<N> pad(const Dims<N>& from, const Dims<K>& pairs) {
    Checked<N> r;
    if (K != 2 * N)
        return r.fail("pad: needs ", 2 * N, " values, a (before, after) pair per axis of ", from,
                      ", got ", K);
    for (size_t i = 0; i < N; ++i) {
        const int64_t b = pairs[2 * i], e = pairs[2 * i + 1];
        if (b < 0 || e < 0)
            return r.fail("pad: negative padding (", b, ", ", e, ") on axis ", i, " of ", from);
        r.push(from[i] + b + e);
    }
    return r;
}

template <size_t N, size_t K>
constexpr Checked<N> shrink(const Dims<N>& from, const Dims<K>& pairs) {
    Checked<N> r;
    if (K != 2 * N)
        return r.fail("shrink: needs ", 2 * N, " values, a (begin, end) pair per axis of ", from,
                      ", got ", K);
    for (size_t i = 0; i < N; ++i) {
        const int64_t b = pairs[2 * i], e = pairs[2 * i + 1];
        if (b < 0 || b > e || e > from[i])
            return r.fail("shrink: (", b, ", ", e, ") is out of range for axis ", i, " of ", from);
        r.push(e - b);
    }
    return r;
}

// Axes that must be in range and distinct (flip, reductions); `reduced[i]` marks axis i. No axes
// means every axis when `empty_is_all`.
template <size_t N>
struct AxisSet {
    bool on[N + 1]{};
};

template <size_t N, size_t K>
constexpr Checked<N> axis_set(const char* op, const Dims<N>& shape, const Dims<K>& axes,
                              AxisSet<N>& set, bool empty_is_all) {
    Checked<N> r;
    if (K == 0 && empty_is_all)
        for (size_t i = 0; i < N; ++i) set.on[i] = true;
    for (int64_t ax : axes) {
        const int64_t a = normalize(ax, N);
        if (a < 0)
            return r.fail(op, ": axis ", ax, " is out of range for ", shape, " (", N, " dims)");
        if (set.on[a]) return r.fail(op, ": axis ", ax, " is repeated in ", axes);
        set.on[a] = true;
    }
    return r;
}

template <size_t N, size_t K>
constexpr Checked<N> flip(const Dims<N>& shape, const Dims<K>& axes) {
    AxisSet<N> set;
    Checked<N> r = axis_set("flip", shape, axes, set, false);
    if (r.ok)
        for (int64_t d : shape) r.push(d);
    return r;
}

template <size_t N, size_t K>
constexpr Checked<N> reduce(const char* op, const Dims<N>& shape, const Dims<K>& axes, bool keep) {
    AxisSet<N> set;
    Checked<N> r = axis_set(op, shape, axes, set, true);
    if (!r.ok) return r;
    for (size_t i = 0; i < N; ++i) {
        if (!set.on[i])
            r.push(shape[i]);
        else if (keep)
            r.push(1);
    }
    return r;
}

template <size_t N>
constexpr Checked<N> arg_reduce(const char* op, const Dims<N>& shape, int64_t axis, bool keep) {
    Checked<N> r;
    const int64_t a = normalize(axis, N);
    if (a < 0)
        return r.fail(op, ": axis ", axis, " is out of range for ", shape, " (", N, " dims)");
    if (shape[static_cast<size_t>(a)] == 0)
        return r.fail(op, ": axis ", axis, " of ", shape, " has size 0");
    for (size_t i = 0; i < N; ++i) {
        if (static_cast<int64_t>(i) != a)
            r.push(shape[i]);
        else if (keep)
            r.push(1);
    }
    return r;
}

template <size_t N>
constexpr Checked<N> same_shape_axis(const char* op, const Dims<N>& shape, int64_t axis) {
    Checked<N> r;
    if (normalize(axis, N) < 0)
        return r.fail(op, ": axis ", axis, " is out of range for ", shape, " (", N, " dims)");
    for (int64_t d : shape) r.push(d);
    return r;
}

template <size_t N>
constexpr Checked<N> squeeze(const Dims<N>& shape, int64_t axis) {
    Checked<N> r;
    const int64_t a = normalize(axis, N);
    if (a < 0)
        return r.fail("squeeze: axis ", axis, " is out of range for ", shape, " (", N, " dims)");
    if (shape[static_cast<size_t>(a)] != 1)
        return r.fail("squeeze: axis ", axis, " of ", shape, " has size ",
                      shape[static_cast<size_t>(a)], ", not 1");
    for (size_t i = 0; i < N; ++i)
        if (static_cast<int64_t>(i) != a) r.push(shape[i]);
    return r;
}

// gather / scatter_add: the index has the source's rank, and at most its size in every dim
// but the axis (scatter_add: the index's size is the source's too). The result has `out`'s dims.
template <size_t N, size_t M>
constexpr Checked<N> indexed(const char* op, const Dims<N>& shape, int64_t axis,
                             const Dims<M>& index, const Dims<M>& out) {
    Checked<N> r;
    const int64_t a = normalize(axis, N);
    if (a < 0) return r.fail(op, ": axis ", axis, " is out of range for ", shape);
    if (M != N)
        return r.fail(op, ": the index ", index, " needs as many dims as the source ", shape);
    for (size_t i = 0; i < N; ++i)
        if (static_cast<int64_t>(i) != a && index[i] > shape[i])
            return r.fail(op, ": the index ", index, " is larger than ", shape, " in dim ", i);
    for (size_t i = 0; i < M; ++i) r.push(out[i]);
    return r;
}

template <size_t N>
constexpr Checked<N> squeeze_all(const Dims<N>& shape) {
    Checked<N> r;
    for (int64_t d : shape)
        if (d != 1) r.push(d);
    return r;
}

template <size_t N>
constexpr Checked<N + 1> unsqueeze(const Dims<N>& shape, int64_t axis) {
    Checked<N + 1> r;
    const auto n = static_cast<int64_t>(N);
    if (axis < -(n + 1) || axis > n)
        return r.fail("unsqueeze: axis ", axis, " is out of range for ", shape,
                      " (a new axis goes at ", -(n + 1), " to ", n, ")");
    const int64_t a = axis < 0 ? axis + n + 1 : axis;
    for (int64_t i = 0; i <= n; ++i) {
        if (i == a) r.push(1);
        if (i < n) r.push(shape[static_cast<size_t>(i)]);
    }
    return r;
}

// [M,K]@[K,N] -> [M,N]; [K]@[K,N] -> [N]; [M,K]@[K] -> [M]; [K]@[K] -> [];
// batched [...,M,K]@[...,K,N] -> [...,M,N] with the batch dims broadcast.
template <size_t A, size_t B>
constexpr Checked<max_of<A, B>> dot(const char* op, const Dims<A>& a, const Dims<B>& b) {
    Checked<max_of<A, B>> r;
    if (A == 0 || B == 0)
        return r.fail(op, ": needs tensors with at least 1 dim, got ", a, " @ ", b);
    // 1-D operands: [K] is a row [1, K] on the left, a column [K, 1] on the right.
    constexpr size_t XA = A < 2 ? 2 : A, YB = B < 2 ? 2 : B;
    Dims<XA> x{};
    Dims<YB> y{};
    if constexpr (A == 1) {
        x = {1, a[0]};
    } else {
        for (size_t i = 0; i < A; ++i) x[i] = a[i];
    }
    if constexpr (B == 1) {
        y = {b[0], 1};
    } else {
        for (size_t i = 0; i < B; ++i) y[i] = b[i];
    }
    const int64_t M = x[XA - 2], K = x[XA - 1], N = y[YB - 1];
    if (y[YB - 2] != K) return r.fail(op, ": inner dimensions differ: ", a, " @ ", b);
    Dims<XA - 2> xb{};
    Dims<YB - 2> yb{};
    for (size_t i = 0; i < XA - 2; ++i) xb[i] = x[i];
    for (size_t i = 0; i < YB - 2; ++i) yb[i] = y[i];
    const auto batch = broadcast(op, xb, yb);
    if (!batch.ok) return r.fail(op, ": batch dimensions differ: ", a, " @ ", b);
    for (size_t i = 0; i < batch.rank; ++i) r.push(batch.dims[i]);
    if (A > 1) r.push(M);
    if (B > 1) r.push(N);
    return r;
}

template <size_t N, size_t... M>
constexpr Checked<N> cat(int64_t axis, const Dims<N>& first, const Dims<M>&... rest) {
    Checked<N> r;
    const int64_t ax = normalize(axis, N);
    if (ax < 0)
        return r.fail("cat: axis ", axis, " is out of range for ", first, " (", N, " dims)");
    int64_t total = first[static_cast<size_t>(ax)];
    const auto one = [&](const auto& other) {
        constexpr size_t K = std::tuple_size_v<std::remove_cvref_t<decltype(other)>>;
        if (!r.ok) return;
        bool same = K == N;
        if constexpr (K == N)
            for (size_t i = 0; same && i < N; ++i)
                same = static_cast<int64_t>(i) == ax || other[i] == first[i];
        if (!same)
            r.fail("cat: shapes ", first, " and ", other, " differ outside axis ", ax);
        else if constexpr (K == N)
            total += other[static_cast<size_t>(ax)];
    };
    (one(rest), ...);
    (void)one; // (no rest: a cat of one tensor)
    if (!r.ok) return r;
    for (size_t i = 0; i < N; ++i) r.push(static_cast<int64_t>(i) == ax ? total : first[i]);
    return r;
}

// ---- elementwise binary operations --------------------------------------------------------------

enum class Binary {
    Add,
    Sub,
    Mul,
    Div,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    Equal,
    NotEqual,
    Maximum,
    Minimum,
    Mod,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    FloorDiv,
    Pow
};

// The names of Tensor's run-time errors ("add", ...) and the C++ operators.
constexpr const char* binary_name(Binary op) {
    constexpr const char* names[] = {"add",   "sub",        "mul",       "div",
                                     "less",  "less_equal", "greater",   "greater_equal",
                                     "equal", "not_equal",  "maximum",   "minimum",
                                     "mod",   "and",        "or",        "xor",
                                     "shl",   "shr",        "floor_div", "pow"};
    return names[static_cast<int>(op)];
}
constexpr const char* binary_symbol(Binary op) {
    constexpr const char* symbols[] = {"+",  "-",  "*",  "/",       "<",         "<=", ">",
                                       ">=", "==", "!=", "maximum", "minimum",   "%",  "&",
                                       "|",  "^",  "<<", ">>",      "floor_div", "pow"};
    return symbols[static_cast<int>(op)];
}

constexpr bool is_comparison(Binary op) { return op >= Binary::Less && op <= Binary::NotEqual; }

// The Tensor operation, so that both APIs build the same graph.
inline Tensor apply(Binary op, const Tensor& a, const Tensor& b) {
    switch (op) {
    case Binary::Add: return a + b;
    case Binary::Sub: return a - b;
    case Binary::Mul: return a * b;
    case Binary::Div: return a / b;
    case Binary::Less: return a < b;
    case Binary::LessEqual: return a <= b;
    case Binary::Greater: return a > b;
    case Binary::GreaterEqual: return a >= b;
    case Binary::Equal: return a == b;
    case Binary::NotEqual: return a != b;
    case Binary::Maximum: return a.maximum(b);
    case Binary::Minimum: return a.minimum(b);
    case Binary::Mod: return a % b;
    case Binary::And: return a & b;
    case Binary::Or: return a | b;
    case Binary::Xor: return a ^ b;
    case Binary::Shl: return a << b;
    case Binary::Shr: return a >> b;
    case Binary::FloorDiv: return floor_div(a, b);
    case Binary::Pow: return a.pow(b);
    }
    return a + b; // unreachable
}

// The element types an op takes, as Tensor checks them: comparisons any, bitwise ops integers
// and bool, shifts integers, arithmetic anything but bool.
template <Binary Op, class T, size_t N>
constexpr Checked<0> operand_rule(const char* name, const Dims<N>& a) {
    Checked<0> r;
    if constexpr (Op == Binary::And || Op == Binary::Or || Op == Binary::Xor) {
        if (std::is_floating_point_v<T>)
            r.fail(name, ": needs an integer or bool tensor, got ", type_name<T>(), " ", a);
    } else if constexpr (Op == Binary::Shl || Op == Binary::Shr) {
        if (std::is_floating_point_v<T> || std::is_same_v<T, bool>)
            r.fail(name, ": needs an integer tensor, got ", type_name<T>(), " ", a);
    } else if constexpr (!is_comparison(Op)) {
        return need_arith<T>(name, a);
    }
    return r;
}

// Same element type; the op's operand rule; broadcasting.
template <Binary Op, class TA, class TB, size_t A, size_t B>
constexpr Checked<max_of<A, B>> check_binary(const Dims<A>& a, const Dims<B>& b) {
    Checked<max_of<A, B>> r;
    const char* name = binary_name(Op);
    const auto t = need_same_type<TA, TB>(name, a, b);
    if (!t.ok) return r.fail(t.message.text);
    const auto u = operand_rule<Op, TA>(name, a);
    if (!u.ok) return r.fail(u.message.text);
    return broadcast(name, a, b);
}

// The element type of a op b.
template <class A, Binary Op>
using BinaryResult = std::conditional_t<is_comparison(Op), bool, typename A::value_type>;

// The FixedTensor of a op b, whose check R passed.
template <Binary Op, auto R, class A, class B>
auto binary_result(const A& a, const B& b) {
    using Out = std::conditional_t<is_comparison(Op), bool, typename A::value_type>;
    return FixedOf<Out, R.dims, R.rank>(Unchecked{}, apply(Op, a.tensor(), b.tensor()));
}

// a op b, or the report and a (a's type: no cascade). The public operators repeat this body to
// keep the instantiation context of an error short.
template <Binary Op, class A, class B>
auto binary(const A& a, const B& b) {
    constexpr auto r =
        check_binary<Op, typename A::value_type, typename B::value_type>(A::shape(), B::shape());
    if constexpr (!r.ok) {
        report<r.message>();
        return InvalidFixedTensor<BinaryResult<A, Op>>{};
    } else {
        return binary_result<Op, r>(a, b);
    }
}

// A scalar operand takes the tensor's element type (as with Tensor).
template <Binary Op, class A, Number S>
auto binary_scalar(const A& a, S s, bool scalar_first) {
    using T = typename A::value_type;
    if constexpr (constexpr auto r = operand_rule<Op, T>(binary_name(Op), A::shape()); !r.ok)
        report<r.message>();
    using Out = std::conditional_t<is_comparison(Op), bool, T>;
    const Tensor c = Tensor::full(Shape{}, s, dtype_of<T>());
    return typename A::template Rebind<Out>(Unchecked{}, scalar_first ? apply(Op, c, a.tensor())
                                                                      : apply(Op, a.tensor(), c));
}

template <Binary Op, class A, class B>
A& assign(A& a, const B& b) {
    auto r = binary<Op>(a, b);
    using R = decltype(r);
    if constexpr (is_invalid<R>) {
        // binary() reported the mistake.
    } else if constexpr (!std::is_same_v<R, A>) {
        report<sentence(binary_name(Op), ": ", A::shape(), " ", binary_symbol(Op), "= ", B::shape(),
                        " gives the shape ", R::shape(), ", not the left operand shape ",
                        A::shape())>();
    } else {
        a = std::move(r);
    }
    return a;
}

template <class TC, class TA, class TB, size_t C, size_t A, size_t B>
constexpr Checked<max_of<C, max_of<A, B>>> check_where(const Dims<C>& c, const Dims<A>& a,
                                                       const Dims<B>& b) {
    Checked<max_of<C, max_of<A, B>>> r;
    if (!std::is_same_v<TC, bool>)
        return r.fail("where: the condition must be bool, got ", type_name<TC>(), " ", c);
    const auto t = need_same_type<TA, TB>("where", a, b);
    if (!t.ok) return r.fail(t.message.text);
    const auto ab = broadcast("where", a, b);
    if (ab.ok) {
        const auto cab = broadcast("where", c, ab.dims);
        if (cab.ok) return cab;
    }
    return r.fail("where: shapes ", c, ", ", a, " and ", b, " cannot be broadcast");
}

// One element type for every tensor that cat or stack joins.
template <class T, class... Rest, size_t N, size_t... M>
constexpr Checked<0> same_element_types(const char* op, const Dims<N>& first,
                                        const Dims<M>&... rest) {
    Checked<0> r;
    const auto one = [&](auto tag, const auto& other) {
        using U = typename decltype(tag)::type;
        if (r.ok && !std::is_same_v<T, U>)
            r.fail(op, ": element types differ: ", type_name<T>(), " ", first, " and ",
                   type_name<U>(), " ", other);
    };
    (one(std::type_identity<Rest>{}, rest), ...);
    (void)one;
    return r;
}

template <class T, class... Rest, size_t N, size_t... M>
constexpr Checked<N> check_cat(int64_t axis, const Dims<N>& first, const Dims<M>&... rest) {
    Checked<N> r;
    if (const auto t = same_element_types<T, Rest...>("cat", first, rest...); !t.ok)
        return r.fail(t.message.text);
    return cat(axis, first, rest...);
}

template <class T, class... Rest, size_t N, size_t... M>
constexpr Checked<N + 1> check_stack(int64_t axis, const Dims<N>& first, const Dims<M>&... rest) {
    Checked<N + 1> r;
    const auto n = static_cast<int64_t>(N);
    if (axis < -(n + 1) || axis > n)
        return r.fail("stack: axis ", axis, " is out of range for ", N + 1, " dims");
    if (const auto t = same_element_types<T, Rest...>("stack", first, rest...); !t.ok)
        return r.fail(t.message.text);
    const auto one = [&](const auto& other) {
        constexpr size_t K = std::tuple_size_v<std::remove_cvref_t<decltype(other)>>;
        bool same = K == N;
        if constexpr (K == N)
            for (size_t i = 0; same && i < N; ++i) same = other[i] == first[i];
        if (r.ok && !same) r.fail("stack: shapes ", first, " and ", other, " differ");
    };
    (one(rest), ...);
    (void)one;
    if (!r.ok) return r;
    const int64_t a = axis < 0 ? axis + n + 1 : axis;
    for (int64_t i = 0; i <= n; ++i) {
        if (i == a) r.push(static_cast<int64_t>(1 + sizeof...(Rest)));
        if (i < n) r.push(first[static_cast<size_t>(i)]);
    }
    return r;
}

// tril and triu: at least 2 dims; the shape is kept.
template <size_t N>
constexpr Checked<N> matrix(const char* op, const Dims<N>& shape) {
    Checked<N> r;
    if (N < 2) return r.fail(op, ": needs at least 2 dims, got ", shape);
    for (int64_t d : shape) r.push(d);
    return r;
}

// PyTorch repeat: as many counts as dims or more (leading new dims).
template <size_t N, size_t K>
constexpr Checked<max_of<N, K>> repeat(const Dims<N>& shape, const Dims<K>& times) {
    Checked<max_of<N, K>> r;
    if (K < N)
        return r.fail("repeat: needs at least ", N, " repeat counts for ", shape, ", got ", times);
    for (size_t i = 0; i < K; ++i) {
        if (times[i] < 0) return r.fail("repeat: negative repeat count in ", times);
        r.push(times[i] * (i < K - N ? 1 : shape[i - (K - N)]));
    }
    return r;
}

// Python slicing of the first K dims (slice_range in tensor.hpp, as Tensor::slice).
template <size_t N, size_t K>
constexpr Checked<N> slice(const Dims<N>& shape, const std::array<Slice, K>& slices) {
    Checked<N> r;
    if (K > N) return r.fail("slice: ", K, " slices for ", N, " dims ", shape);
    for (size_t i = 0; i < N; ++i) {
        if (i >= K) {
            r.push(shape[i]);
            continue;
        }
        if (slices[i].step == 0) return r.fail("slice: step must not be 0 (axis ", i, ")");
        r.push(slice_range(slices[i], shape[i]).second);
    }
    return r;
}

// split<Size, Axis>: Size > 0, Axis in range; the pieces' dims come from split_piece.
template <size_t N>
constexpr Checked<0> split(const char* op, const Dims<N>& shape, int64_t size, int64_t axis,
                           const char* what) {
    Checked<0> r;
    if (normalize(axis, N) < 0)
        return r.fail(op, ": axis ", axis, " is out of range for ", shape, " (", N, " dims)");
    if (size <= 0) return r.fail(op, ": ", what, " must be positive, got ", size);
    return r;
}

template <size_t N>
constexpr Dims<N> split_piece(const Dims<N>& shape, int64_t axis, int64_t size, size_t i) {
    Dims<N> d = shape;
    const auto a = static_cast<size_t>(normalize(axis, N));
    const int64_t begin = static_cast<int64_t>(i) * size;
    d[a] = shape[a] - begin < size ? shape[a] - begin : size;
    return d;
}

template <class T, class TB, size_t A, size_t B>
constexpr Checked<max_of<A, B>> check_dot(const char* op, const Dims<A>& a, const Dims<B>& b) {
    Checked<max_of<A, B>> r;
    const auto t = need_same_type<T, TB>(op, a, b);
    if (!t.ok) return r.fail(t.message.text);
    const auto u = need_arith<T>(op, a);
    if (!u.ok) return r.fail(u.message.text);
    return dot(op, a, b);
}

template <class T, size_t N>
constexpr Checked<N> check_softmax(const char* op, const Dims<N>& shape, int64_t axis) {
    Checked<N> r;
    const auto t = need_float<T>(op, shape);
    if (!t.ok) return r.fail(t.message.text);
    return same_shape_axis(op, shape, axis);
}

// The FixedTensor of cat or stack whose check R passed (make() builds its Tensor), or the
// report of R's sentence.
template <auto R, class T, class Make>
auto joined(Make make) {
    if constexpr (!R.ok) {
        report<R.message>();
        return InvalidFixedTensor<T>{};
    } else {
        return FixedOf<T, R.dims, R.rank>(Unchecked{}, make());
    }
}

} // namespace fixed_detail

// True for FixedTensor<T, Dims...> (and cv/ref-qualified).
template <class X>
concept AnyFixedTensor = fixed_detail::is_fixed_tensor<std::remove_cvref_t<X>>;

// =================================================================================================

// What an operation that failed its compile-time check returns, after the one error with the
// sentence: every operation accepts it and gives another InvalidFixedTensor, and it converts to
// any FixedTensor, so that one mistake is one error and not a cascade. The program does not
// compile, so none of this ever runs.
template <Number T>
class InvalidFixedTensor {
  public:
    using value_type = T;
    template <class U>
    using Rebind = InvalidFixedTensor<U>;

    static constexpr std::array<int64_t, 0> shape() { return {}; }
    static constexpr int64_t ndim() { return 0; }
    static constexpr int64_t numel() { return 0; }
    static constexpr DType dtype() { return dtype_of<T>(); }
    template <class U, int64_t... D>
    operator FixedTensor<U, D...>() const {
        return {};
    }

    Tensor tensor() const { return {}; }
    UOp uop() const { return Tensor().uop(); }
    bool is_realized() const { return false; }
    InvalidFixedTensor& realize() { return *this; }
    std::vector<KernelInfo> kernels() const { return {}; }
    template <Number U = T>
    std::vector<U> to_vector() const {
        return {};
    }
    template <Number U = T>
    U item() const {
        return U{};
    }

    InvalidFixedTensor neg() const { return *this; }
    InvalidFixedTensor exp() const { return *this; }
    InvalidFixedTensor exp2() const { return *this; }
    InvalidFixedTensor log() const { return *this; }
    InvalidFixedTensor log2() const { return *this; }
    InvalidFixedTensor sqrt() const { return *this; }
    InvalidFixedTensor sin() const { return *this; }
    InvalidFixedTensor cos() const { return *this; }
    InvalidFixedTensor erf() const { return *this; }
    InvalidFixedTensor relu() const { return *this; }
    InvalidFixedTensor sigmoid() const { return *this; }
    InvalidFixedTensor tanh() const { return *this; }
    InvalidFixedTensor abs() const { return *this; }
    InvalidFixedTensor reciprocal() const { return *this; }
    InvalidFixedTensor square() const { return *this; }
    InvalidFixedTensor logical_not() const { return *this; }
    InvalidFixedTensor rsqrt() const { return *this; }
    InvalidFixedTensor gelu(std::string_view = "none") const { return *this; }
    InvalidFixedTensor relu6() const { return *this; }
    InvalidFixedTensor hardsigmoid() const { return *this; }
    InvalidFixedTensor hardswish() const { return *this; }
    InvalidFixedTensor silu() const { return *this; }
    InvalidFixedTensor softplus() const { return *this; }
    InvalidFixedTensor mish() const { return *this; }
    InvalidFixedTensor tan() const { return *this; }
    InvalidFixedTensor sinh() const { return *this; }
    InvalidFixedTensor cosh() const { return *this; }
    InvalidFixedTensor atan() const { return *this; }
    InvalidFixedTensor floor() const { return *this; }
    InvalidFixedTensor ceil() const { return *this; }
    InvalidFixedTensor round() const { return *this; }
    InvalidFixedTensor trunc() const { return *this; }
    InvalidFixedTensor sign() const { return *this; }
    InvalidFixedTensor pow(const auto&) const { return *this; }
    InvalidFixedTensor leaky_relu(double = 0.01) const { return *this; }
    InvalidFixedTensor elu(double = 1.0) const { return *this; }
    InvalidFixedTensor clip(double, double) const { return *this; }
    InvalidFixedTensor<bool> isnan() const { return {}; }
    InvalidFixedTensor<bool> isinf() const { return {}; }
    template <int64_t = 0>
    InvalidFixedTensor tril() const {
        return *this;
    }
    template <int64_t = 0>
    InvalidFixedTensor triu() const {
        return *this;
    }
    template <Slice...>
    InvalidFixedTensor slice() const {
        return *this;
    }
    template <int64_t>
    InvalidFixedTensor logsumexp(std::same_as<KeepDim> auto...) const {
        return *this;
    }
    InvalidFixedTensor contiguous() const { return *this; }
    InvalidFixedTensor flatten() const { return *this; }
    InvalidFixedTensor squeeze() const { return *this; }
    template <Number U>
    InvalidFixedTensor<U> cast() const {
        return {};
    }
    // Movement ops whose arguments are a list of integers.
#define TEMPURA_INVALID_MOVEMENT(name)                                                             \
    template <int64_t...>                                                                          \
    InvalidFixedTensor name() const {                                                              \
        return *this;                                                                              \
    }
    TEMPURA_INVALID_MOVEMENT(reshape)
    TEMPURA_INVALID_MOVEMENT(permute)
    TEMPURA_INVALID_MOVEMENT(expand)
    TEMPURA_INVALID_MOVEMENT(pad)
    TEMPURA_INVALID_MOVEMENT(shrink)
    TEMPURA_INVALID_MOVEMENT(flip)
    TEMPURA_INVALID_MOVEMENT(repeat)
#undef TEMPURA_INVALID_MOVEMENT
    template <int64_t = -2, int64_t = -1>
    InvalidFixedTensor transpose() const {
        return *this;
    }
    template <int64_t>
    InvalidFixedTensor squeeze() const {
        return *this;
    }
    template <int64_t>
    InvalidFixedTensor unsqueeze() const {
        return *this;
    }
#define TEMPURA_INVALID_REDUCTION(name, U)                                                         \
    template <int64_t...>                                                                          \
    InvalidFixedTensor<U> name(std::same_as<KeepDim> auto...) const {                              \
        return {};                                                                                 \
    }
    TEMPURA_INVALID_REDUCTION(sum, T)
    TEMPURA_INVALID_REDUCTION(prod, T)
    TEMPURA_INVALID_REDUCTION(max, T)
    TEMPURA_INVALID_REDUCTION(min, T)
    TEMPURA_INVALID_REDUCTION(mean, T)
    TEMPURA_INVALID_REDUCTION(any, bool)
    TEMPURA_INVALID_REDUCTION(all, bool)
    TEMPURA_INVALID_REDUCTION(var, T)
    TEMPURA_INVALID_REDUCTION(std, T)
#undef TEMPURA_INVALID_REDUCTION
    template <int64_t>
    InvalidFixedTensor<int32_t> argmax(std::same_as<KeepDim> auto...) const {
        return {};
    }
    template <int64_t>
    InvalidFixedTensor<int32_t> argmin(std::same_as<KeepDim> auto...) const {
        return {};
    }
    template <int64_t = -1>
    InvalidFixedTensor softmax() const {
        return *this;
    }
    template <int64_t = -1>
    InvalidFixedTensor log_softmax() const {
        return *this;
    }
    template <fixed_detail::Operand Other>
    InvalidFixedTensor dot(const Other&) const {
        return *this;
    }
    template <fixed_detail::Operand Other>
    InvalidFixedTensor matmul(const Other&) const {
        return *this;
    }
    template <fixed_detail::Operand Other>
    InvalidFixedTensor maximum(const Other&) const {
        return *this;
    }
    template <fixed_detail::Operand Other>
    InvalidFixedTensor minimum(const Other&) const {
        return *this;
    }
};

// =================================================================================================

template <Number T, int64_t... Dims>
class FixedTensor {
    static_assert(!std::is_same_v<T, long double>,
                  "FixedTensor: the element type must be bool, an integer of 8 to 64 bits, float "
                  "or double (long double has no DType)");
    static_assert(((Dims >= 0) && ...), "FixedTensor: every dimension must be >= 0");

    template <auto R, class U = T>
    using Result = fixed_detail::FixedOf<U, R.dims, R.rank>;
    using SumType = std::conditional_t<std::is_same_v<T, bool>, int32_t, T>;
    using MeanType = std::conditional_t<std::is_floating_point_v<T>, T, float>;
    using Unchecked = fixed_detail::Unchecked;

  public:
    using value_type = T;
    // The same dims with another element type.
    template <class U>
    using Rebind = FixedTensor<U, Dims...>;

    // ---- compile-time properties --------------------------------------------------------------
    static constexpr std::array<int64_t, sizeof...(Dims)> shape() { return {Dims...}; }
    static constexpr int64_t ndim() { return static_cast<int64_t>(sizeof...(Dims)); }
    static constexpr int64_t numel() { return (int64_t{1} * ... * Dims); }
    static constexpr DType dtype() { return dtype_of<T>(); }
    // The shape as a run-time tempura::Shape (std::vector<int64_t>).
    static Shape shape_vector() { return Shape{Dims...}; }

    // ---- creation -----------------------------------------------------------------------------
    // Zeros (a lazy constant), so that a FixedTensor can be a member assigned later.
    FixedTensor() : tensor_(Tensor::zeros(shape_vector(), dtype())) {}
    // From a Tensor: checks the dtype and the shape at run time; throws tempura::Error
    // "[FixedTensor] expected float32 [2, 3], got float32 [3, 2]".
    explicit FixedTensor(Tensor t) : tensor_(std::move(t)) {
        if (tensor_.dtype() != dtype() || tensor_.shape() != shape_vector())
            fail("FixedTensor", std::string("expected ") + fixed_detail::type_name<T>() + " " +
                                    shape_str(shape_vector()) + ", got " + tensor_.dtype().name() +
                                    " " + shape_str(tensor_.shape()));
    }
    static FixedTensor from_tensor(Tensor t) { return FixedTensor(std::move(t)); }
    // Internal: wraps the result of an operation whose shape was computed at compile time.
    FixedTensor(Unchecked, Tensor t) : tensor_(std::move(t)) {
        assert(tensor_.shape() == shape_vector() && tensor_.dtype() == dtype());
    }

    static FixedTensor zeros(std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        return {Unchecked{}, Tensor::zeros(shape_vector(), dtype())};
    }
    static FixedTensor ones(std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        return {Unchecked{}, Tensor::ones(shape_vector(), dtype())};
    }
    static FixedTensor full(T value, std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        return {Unchecked{}, Tensor::full(shape_vector(), value, dtype())};
    }
    // Row-major data; throws "[from_vector] 5 values do not fill shape [2, 3] (6 elements)".
    static FixedTensor from_vector(const std::vector<T>& data,
                                   std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        return {Unchecked{}, Tensor::from_vector(data, shape_vector())};
    }
    // [0, 1, ..., N-1]: FixedTensor<T, N> only.
    static FixedTensor arange(std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        constexpr auto r = check_arange();
        if constexpr (!r.ok) fixed_detail::report<r.message>();
        return {Unchecked{}, Tensor::arange(first_dim(), dtype())};
    }
    // Random numbers (Tensor::rand and friends): float element types; randint: integer ones.
    static FixedTensor rand(std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("rand"); !r.ok) fixed_detail::report<r.message>();
        return {Unchecked{}, Tensor::rand(shape_vector(), dtype())};
    }
    static FixedTensor randn(std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("randn"); !r.ok)
            fixed_detail::report<r.message>();
        return {Unchecked{}, Tensor::randn(shape_vector(), dtype())};
    }
    static FixedTensor uniform(double lo, double hi,
                               std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("uniform"); !r.ok)
            fixed_detail::report<r.message>();
        return {Unchecked{}, Tensor::uniform(shape_vector(), lo, hi, dtype())};
    }
    static FixedTensor normal(double mean, double std,
                              std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("normal"); !r.ok)
            fixed_detail::report<r.message>();
        return {Unchecked{}, Tensor::normal(shape_vector(), mean, std, dtype())};
    }
    static FixedTensor randint(int64_t lo, int64_t hi,
                               std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>,
                      "randint: FixedTensor::randint needs an integer element type");
        return {Unchecked{}, Tensor::randint(lo, hi, shape_vector(), dtype())};
    }
    // The identity: FixedTensor<T, N, N> only.
    static FixedTensor eye(std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        constexpr auto r = check_eye();
        if constexpr (!r.ok) fixed_detail::report<r.message>();
        return {Unchecked{}, Tensor::eye(first_dim(), dtype())};
    }

    // ---- the Tensor inside --------------------------------------------------------------------
    const Tensor& tensor() const& { return tensor_; }
    Tensor tensor() && { return std::move(tensor_); }
    const UOp& uop() const { return tensor_.uop(); }
    bool is_realized() const { return tensor_.is_realized(); }
    const Tensor::Buffers& buffers() const { return tensor_.buffers(); }
    const std::shared_ptr<runtime::Buffer>& buffer() const { return tensor_.buffer(); }

    // ---- realization --------------------------------------------------------------------------
    FixedTensor& realize() {
        tensor_.realize();
        return *this;
    }
    const std::vector<KernelInfo>& kernels() const { return tensor_.kernels(); }

    // ---- autograd (Tensor's, with this type) ---------------------------------------------------
    FixedTensor& requires_grad(bool on = true) {
        tensor_.requires_grad(on);
        return *this;
    }
    void backward(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        static_assert(numel() == 1, "backward: the loss must have exactly one element");
        tensor_.backward();
    }
    FixedTensor grad(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return {Unchecked{}, tensor_.grad()};
    }
    void zero_grad() const { tensor_.zero_grad(); }
    FixedTensor detach(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return {Unchecked{}, tensor_.detach()};
    }
    FixedTensor& assign(const FixedTensor& value) {
        tensor_.assign(value.tensor());
        return *this;
    }

    // The elements in row-major order (converted to U if given); realizes first.
    template <Number U = T>
    std::vector<U> to_vector() {
        return tensor_.template to_vector<U>();
    }
    template <Number U = T>
    std::vector<U> to_vector() const {
        return tensor_.template to_vector<U>();
    }
    // The one element; a compile error unless numel() == 1.
    template <Number U = T>
    U item() const {
        constexpr auto r = check_item();
        if constexpr (!r.ok) fixed_detail::report<r.message>();
        return tensor_.template item<U>();
    }

    // ---- elementwise --------------------------------------------------------------------------
    FixedTensor neg(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = arith("neg"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.neg());
    }
    FixedTensor exp(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("exp"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.exp());
    }
    FixedTensor exp2(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("exp2"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.exp2());
    }
    FixedTensor log(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("log"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.log());
    }
    FixedTensor log2(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("log2"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.log2());
    }
    FixedTensor sqrt(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("sqrt"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.sqrt());
    }
    FixedTensor sin(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("sin"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.sin());
    }
    FixedTensor cos(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("cos"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.cos());
    }
    FixedTensor erf(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("erf"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.erf());
    }
    FixedTensor relu(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = arith("relu"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.relu());
    }
    FixedTensor sigmoid(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("sigmoid"); !r.ok)
            fixed_detail::report<r.message>();
        return same(tensor_.sigmoid());
    }
    FixedTensor tanh(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("tanh"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.tanh());
    }
    FixedTensor abs(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = arith("abs"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.abs());
    }
    FixedTensor reciprocal(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("reciprocal"); !r.ok)
            fixed_detail::report<r.message>();
        return same(tensor_.reciprocal());
    }
    FixedTensor square(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = arith("square"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.square());
    }
    FixedTensor logical_not(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = fixed_detail::need_bool<T>("logical_not", shape()); !r.ok)
            fixed_detail::report<r.message>();
        return same(tensor_.logical_not());
    }
    // Elementwise ops of one shape (float-only ones check the element type at compile time).
#define TEMPURA_FIXED_UNARY(name, rule)                                                            \
    FixedTensor name(std::source_location loc = std::source_location::current()) const {           \
        const UserCall site(loc);                                                                  \
        if constexpr (constexpr auto r = rule(#name); !r.ok) fixed_detail::report<r.message>();    \
        return same(tensor_.name());                                                               \
    }
    TEMPURA_FIXED_UNARY(rsqrt, floating)
    TEMPURA_FIXED_UNARY(relu6, arith)
    TEMPURA_FIXED_UNARY(hardsigmoid, floating)
    TEMPURA_FIXED_UNARY(hardswish, floating)
    TEMPURA_FIXED_UNARY(silu, floating)
    TEMPURA_FIXED_UNARY(softplus, floating)
    TEMPURA_FIXED_UNARY(mish, floating)
    TEMPURA_FIXED_UNARY(tan, floating)
    TEMPURA_FIXED_UNARY(sinh, floating)
    TEMPURA_FIXED_UNARY(cosh, floating)
    TEMPURA_FIXED_UNARY(atan, floating)
    TEMPURA_FIXED_UNARY(floor, arith)
    TEMPURA_FIXED_UNARY(ceil, arith)
    TEMPURA_FIXED_UNARY(round, arith)
    TEMPURA_FIXED_UNARY(trunc, arith)
    TEMPURA_FIXED_UNARY(sign, arith)
#undef TEMPURA_FIXED_UNARY
    FixedTensor pow(double exponent,
                    std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = arith("pow"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.pow(exponent));
    }
    // x^y elementwise, y broadcast with x (NumPy rules, as the operators).
    template <AnyFixedTensor Other>
    auto pow(const Other& exponent,
             std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return fixed_detail::binary<fixed_detail::Binary::Pow>(*this, exponent);
    }
    FixedTensor gelu(std::string_view approximate = "none",
                     std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("gelu"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.gelu(approximate));
    }
    FixedTensor leaky_relu(double slope = 0.01,
                           std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = arith("leaky_relu"); !r.ok)
            fixed_detail::report<r.message>();
        return same(tensor_.leaky_relu(slope));
    }
    FixedTensor elu(double alpha = 1.0,
                    std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = floating("elu"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.elu(alpha));
    }
    FixedTensor clip(double lo, double hi,
                     std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = arith("clip"); !r.ok) fixed_detail::report<r.message>();
        return same(tensor_.clip(lo, hi));
    }
    Rebind<bool> isnan(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return {Unchecked{}, tensor_.isnan()};
    }
    Rebind<bool> isinf(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return {Unchecked{}, tensor_.isinf()};
    }
    template <int64_t K = 0>
    FixedTensor tril(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = fixed_detail::matrix("tril", shape()); !r.ok)
            fixed_detail::report<r.message>();
        return same(tensor_.tril(K));
    }
    template <int64_t K = 0>
    FixedTensor triu(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        if constexpr (constexpr auto r = fixed_detail::matrix("triu", shape()); !r.ok)
            fixed_detail::report<r.message>();
        return same(tensor_.triu(K));
    }
    template <fixed_detail::Invalid Other>
    InvalidFixedTensor<T> maximum(const Other&) const {
        return {};
    }
    template <AnyFixedTensor Other>
    auto maximum(const Other& other,
                 std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r =
            fixed_detail::check_binary<fixed_detail::Binary::Maximum, T,
                                       typename Other::value_type>(shape(), Other::shape());
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return fixed_detail::binary_result<fixed_detail::Binary::Maximum, r>(*this, other);
        }
    }
    template <fixed_detail::Invalid Other>
    InvalidFixedTensor<T> minimum(const Other&) const {
        return {};
    }
    template <AnyFixedTensor Other>
    auto minimum(const Other& other,
                 std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r =
            fixed_detail::check_binary<fixed_detail::Binary::Minimum, T,
                                       typename Other::value_type>(shape(), Other::shape());
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return fixed_detail::binary_result<fixed_detail::Binary::Minimum, r>(*this, other);
        }
    }
    template <Number U>
    FixedTensor<U, Dims...> cast(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return {Unchecked{}, tensor_.cast(dtype_of<U>())};
    }

    // ---- movement -----------------------------------------------------------------------------
    // One -1 is inferred: FixedTensor<float, 2, 3>::reshape<3, -1>() is FixedTensor<float, 3, 2>.
    template <int64_t... New>
    auto reshape(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r = fixed_detail::reshape(shape(), dims<New...>());
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return Result<r>(Unchecked{}, tensor_.reshape(Shape{New...}));
        }
    }
    template <int64_t... Order>
    auto permute(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r = fixed_detail::permute(shape(), dims<Order...>());
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return Result<r>(Unchecked{}, tensor_.permute(Shape{Order...}));
        }
    }
    template <int64_t Dim0 = -2, int64_t Dim1 = -1>
    auto transpose(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r = fixed_detail::transpose(shape(), Dim0, Dim1);
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return Result<r>(Unchecked{}, tensor_.transpose(Dim0, Dim1));
        }
    }
    // Size-1 dims grow, new leading dims appear, -1 keeps a dim.
    template <int64_t... New>
    auto expand(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r = fixed_detail::expand(shape(), dims<New...>());
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return Result<r>(Unchecked{}, tensor_.expand(Shape{New...}));
        }
    }
    // A (before, after) pair per axis, flat: x.pad<1, 1, 0, 2>() pads axis 0 by 1 before and 1
    // after, axis 1 by 2 after. The new elements read 0.
    template <int64_t... Pairs>
    auto pad(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r = fixed_detail::pad(shape(), dims<Pairs...>());
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return Result<r>(Unchecked{}, tensor_.pad(pairs<Pairs...>()));
        }
    }
    // A (begin, end) pair per axis, flat: x.shrink<0, 2, 1, 3>() keeps rows 0-1 and columns 1-2.
    template <int64_t... Pairs>
    auto shrink(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r = fixed_detail::shrink(shape(), dims<Pairs...>());
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return Result<r>(Unchecked{}, tensor_.shrink(pairs<Pairs...>()));
        }
    }
    template <int64_t... Axes>
    FixedTensor flip(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r = fixed_detail::flip(shape(), dims<Axes...>());
        if constexpr (!r.ok) fixed_detail::report<r.message>();
        return same(tensor_.flip(Shape{Axes...}));
    }
    template <int64_t Axis>
    auto squeeze(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r = fixed_detail::squeeze(shape(), Axis);
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return Result<r>(Unchecked{}, tensor_.squeeze(Axis));
        }
    }
    // ---- scans (Tensor::cumsum etc.): the same dims; bools count as int32_t for sum and prod --
    template <int64_t Axis>
    Rebind<SumType> cumsum(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        check_scan_axis<Axis, 0>();
        return {Unchecked{}, tensor_.cumsum(Axis)};
    }
    template <int64_t Axis>
    Rebind<SumType> cumprod(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        check_scan_axis<Axis, 1>();
        return {Unchecked{}, tensor_.cumprod(Axis)};
    }
    template <int64_t Axis>
    FixedTensor cummax(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        check_scan_axis<Axis, 2>();
        return same(tensor_.cummax(Axis));
    }
    // Where the bool mask (broadcast to this shape) is true, value; elsewhere x.
    template <class U, int64_t... MD>
    FixedTensor masked_fill(const FixedTensor<U, MD...>& mask, double value,
                            std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        static_assert(std::is_same_v<U, bool>, "masked_fill: the mask must hold bool");
        constexpr auto r = [] {
            fixed_detail::Checked<0> c;
            constexpr std::array<int64_t, sizeof...(MD)> m{MD...};
            constexpr auto s = shape();
            const auto b = fixed_detail::broadcast("masked_fill", m, s);
            bool fits = b.ok && b.rank == s.size();
            for (size_t i = 0; fits && i < s.size(); ++i) fits = b.dims[i] == s[i];
            if (!fits) c.fail("masked_fill: the mask ", m, " does not broadcast to ", s);
            return c;
        }();
        if constexpr (!r.ok) fixed_detail::report<r.message>();
        return same(tensor_.masked_fill(mask.tensor(), value));
    }
    // ---- sorting (Tensor::sort etc.) -------------------------------------------------------
    template <int64_t Axis = -1>
    FixedTensor sort(bool descending = false,
                     std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        check_scan_axis<Axis, 3>();
        return same(tensor_.sort(Axis, descending));
    }
    template <int64_t Axis = -1>
    Rebind<int32_t> argsort(bool descending = false,
                            std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        check_scan_axis<Axis, 4>();
        return {Unchecked{}, tensor_.argsort(Axis, descending)};
    }
    // {values, int32 indices}: Axis's size becomes K.
    template <int64_t K, int64_t Axis = -1>
    auto topk(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto s = shape();
        constexpr int64_t a = fixed_detail::normalize(Axis, s.size());
        constexpr auto r = [&] {
            fixed_detail::Checked<sizeof...(Dims)> c;
            if (a < 0) return c.fail("topk: axis ", Axis, " is out of range for ", s);
            if (K < 0 || K > s[static_cast<size_t>(a)])
                return c.fail("topk: k ", K, " is out of range for an axis of ",
                              s[static_cast<size_t>(a)], " elements");
            for (size_t i = 0; i < s.size(); ++i) c.push(static_cast<int64_t>(i) == a ? K : s[i]);
            return c;
        }();
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return std::pair<InvalidFixedTensor<T>, InvalidFixedTensor<int32_t>>{};
        } else {
            auto [v, i] = tensor_.topk(K, Axis);
            return std::pair<Result<r>, Result<r, int32_t>>{
                Result<r>(Unchecked{}, std::move(v)),
                Result<r, int32_t>(Unchecked{}, std::move(i))};
        }
    }
    // ---- data-dependent indexing (Tensor::gather etc.; the index's values are checked at run
    // time) --------------------------------------------------------------------------------------
    // The index's shape: x.gather<1>(FixedTensor<int32_t, 4, 2>) -> FixedTensor<T, 4, 2>.
    template <int64_t Axis, class I, int64_t... IDims>
    auto gather(const FixedTensor<I, IDims...>& index,
                std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        static_assert(std::is_same_v<I, int32_t> || std::is_same_v<I, int64_t>,
                      "gather: the index must hold int32_t or int64_t");
        constexpr std::array<int64_t, sizeof...(IDims)> is{IDims...};
        constexpr auto r = fixed_detail::indexed("gather", shape(), Axis, is, is);
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return Result<r>(Unchecked{}, tensor_.gather(Axis, index.tensor()));
        }
    }
    // The slices at a 1-D index: Axis's size becomes the index's.
    template <int64_t Axis, class I, int64_t K>
    auto index_select(const FixedTensor<I, K>& index,
                      std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        static_assert(std::is_same_v<I, int32_t> || std::is_same_v<I, int64_t>,
                      "index_select: the index must hold int32_t or int64_t");
        constexpr auto s = shape();
        constexpr int64_t a = fixed_detail::normalize(Axis, s.size());
        constexpr auto out = [&] {
            auto o = s;
            if (a >= 0) o[static_cast<size_t>(a)] = K;
            return o;
        }();
        constexpr auto r = fixed_detail::indexed("index_select", s, Axis, out, out);
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return Result<r>(Unchecked{}, tensor_.index_select(Axis, index.tensor()));
        }
    }
    // x with src added at the index's places along Axis: x's type. Index and source of one shape.
    template <int64_t Axis, class I, int64_t... IDims>
    FixedTensor scatter_add(const FixedTensor<I, IDims...>& index,
                            const FixedTensor<T, IDims...>& src) const {
        static_assert(std::is_same_v<I, int32_t> || std::is_same_v<I, int64_t>,
                      "scatter_add: the index must hold int32_t or int64_t");
        constexpr std::array<int64_t, sizeof...(IDims)> is{IDims...};
        constexpr auto r = fixed_detail::indexed("scatter_add", shape(), Axis, is, is);
        if constexpr (!r.ok) fixed_detail::report<r.message>();
        return same(tensor_.scatter_add(Axis, index.tensor(), src.tensor()));
    }
    // Every size-1 dim.
    auto squeeze(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r = fixed_detail::squeeze_all(shape());
        return Result<r>(Unchecked{}, tensor_.squeeze());
    }
    template <int64_t Axis>
    auto unsqueeze(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r = fixed_detail::unsqueeze(shape(), Axis);
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return Result<r>(Unchecked{}, tensor_.unsqueeze(Axis));
        }
    }
    FixedTensor<T, numel()> flatten() const { return {Unchecked{}, tensor_.flatten()}; }
    // Python slicing of the leading dims: x.slice<Slice{1, 5, 2}, Slice{Slice::end, Slice::end,
    // -1}>() (see Slice); the shape is computed at compile time.
    template <Slice... S>
    auto slice(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r = fixed_detail::slice(shape(), std::array<Slice, sizeof...(S)>{S...});
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return Result<r>(Unchecked{}, tensor_.slice({S...}));
        }
    }
    // Tiles the tensor Times[i] times along dim i (more counts than dims add leading dims).
    template <int64_t... Times>
    auto repeat(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r = fixed_detail::repeat(shape(), dims<Times...>());
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return Result<r>(Unchecked{}, tensor_.repeat(Shape{Times...}));
        }
    }
    // Pieces of Size along Axis (the last one shorter), as a std::tuple of FixedTensors.
    template <int64_t Size, int64_t Axis = 0>
    auto split() const {
        return split_as<Size, Axis, false, Size>();
    }
    // N pieces of equal size along Axis (the last one shorter; fewer when the size does not
    // divide, as PyTorch), as a std::tuple.
    template <int64_t N, int64_t Axis = 0>
    auto chunk() const {
        constexpr int64_t a = fixed_detail::normalize(Axis, sizeof...(Dims));
        constexpr int64_t d = a < 0 ? 0 : shape()[static_cast<size_t>(a < 0 ? 0 : a)];
        constexpr int64_t size = N <= 0 ? N : (d + N - 1) / N < 1 ? 1 : (d + N - 1) / N;
        return split_as<size, Axis, true, N>();
    }
    // A materialization point (CONTIGUOUS), as Tensor::contiguous().
    FixedTensor contiguous(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return same(tensor_.contiguous());
    }

    // ---- reductions -----------------------------------------------------------------------------
    // The axes are template arguments (none = every axis; negative ones count from the end);
    // x.sum<1>(tempura::keepdim) keeps the reduced axes as size 1. sum and prod of bool count in
    // int32, mean of integers is float32, max and min keep T.
#define TEMPURA_FIXED_REDUCTION(name, U)                                                           \
    template <int64_t... Axes>                                                                     \
    auto name(std::same_as<KeepDim> auto... keep) const {                                          \
        static_assert(sizeof...(keep) <= 1, #name ": give tempura::keepdim at most once");         \
        constexpr bool kKeep = sizeof...(keep) == 1;                                               \
        constexpr auto r = fixed_detail::reduce(#name, shape(), dims<Axes...>(), kKeep);           \
        if constexpr (!r.ok) {                                                                     \
            fixed_detail::report<r.message>();                                                     \
            return InvalidFixedTensor<U>{};                                                        \
        } else {                                                                                   \
            return Result<r, U>(Unchecked{}, tensor_.name(Shape{Axes...}, kKeep));                 \
        }                                                                                          \
    }
    TEMPURA_FIXED_REDUCTION(sum, SumType)
    TEMPURA_FIXED_REDUCTION(prod, SumType)
    TEMPURA_FIXED_REDUCTION(max, T)
    TEMPURA_FIXED_REDUCTION(min, T)
    TEMPURA_FIXED_REDUCTION(mean, MeanType)
    TEMPURA_FIXED_REDUCTION(any, bool)
    TEMPURA_FIXED_REDUCTION(all, bool)
    TEMPURA_FIXED_REDUCTION(var, T) // correction 1; floats only (checked when run)
    TEMPURA_FIXED_REDUCTION(std, T)
#undef TEMPURA_FIXED_REDUCTION
    // log(sum(exp(x))) along Axis, without overflow.
    template <int64_t Axis>
    auto logsumexp(std::same_as<KeepDim> auto... keep) const {
        static_assert(sizeof...(keep) <= 1, "logsumexp: give tempura::keepdim at most once");
        constexpr bool kKeep = sizeof...(keep) == 1;
        if constexpr (constexpr auto f = floating("logsumexp"); !f.ok)
            fixed_detail::report<f.message>();
        constexpr auto r = fixed_detail::reduce("logsumexp", shape(), dims<Axis>(), kKeep);
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return Result<r>(Unchecked{}, tensor_.logsumexp(Axis, kKeep));
        }
    }

    // The index of the first maximum (minimum) along Axis, as int32.
#define TEMPURA_FIXED_ARG_REDUCTION(name)                                                          \
    template <int64_t Axis>                                                                        \
    auto name(std::same_as<KeepDim> auto... keep) const {                                          \
        static_assert(sizeof...(keep) <= 1, #name ": give tempura::keepdim at most once");         \
        constexpr bool kKeep = sizeof...(keep) == 1;                                               \
        constexpr auto r = fixed_detail::arg_reduce(#name, shape(), Axis, kKeep);                  \
        if constexpr (!r.ok) {                                                                     \
            fixed_detail::report<r.message>();                                                     \
            return InvalidFixedTensor<int32_t>{};                                                  \
        } else {                                                                                   \
            return Result<r, int32_t>(Unchecked{}, tensor_.name(Axis, kKeep));                     \
        }                                                                                          \
    }
    TEMPURA_FIXED_ARG_REDUCTION(argmax)
    TEMPURA_FIXED_ARG_REDUCTION(argmin)
#undef TEMPURA_FIXED_ARG_REDUCTION

    // ---- linear algebra and friends -----------------------------------------------------------
    // [M,K]@[K,N] -> [M,N]; [K]@[K,N] -> [N]; [M,K]@[K] -> [M]; [K]@[K] -> [];
    // batched [...,M,K]@[...,K,N] -> [...,M,N] (batch dims broadcast).
    template <fixed_detail::Invalid Other>
    InvalidFixedTensor<T> dot(const Other&) const {
        return {};
    }
    template <AnyFixedTensor Other>
    auto dot(const Other& other, std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r =
            fixed_detail::check_dot<T, typename Other::value_type>("dot", shape(), Other::shape());
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return Result<r>(Unchecked{}, tensor_.dot(other.tensor()));
        }
    }
    template <fixed_detail::Invalid Other>
    InvalidFixedTensor<T> matmul(const Other&) const {
        return {};
    }
    template <AnyFixedTensor Other>
    auto matmul(const Other& other,
                std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r = fixed_detail::check_dot<T, typename Other::value_type>("matmul", shape(),
                                                                                  Other::shape());
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return InvalidFixedTensor<T>{};
        } else {
            return Result<r>(Unchecked{}, tensor_.matmul(other.tensor()));
        }
    }
    template <int64_t Axis = -1>
    FixedTensor softmax(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r = fixed_detail::check_softmax<T>("softmax", shape(), Axis);
        if constexpr (!r.ok) fixed_detail::report<r.message>();
        return same(tensor_.softmax(Axis));
    }
    template <int64_t Axis = -1>
    FixedTensor log_softmax(std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        constexpr auto r = fixed_detail::check_softmax<T>("log_softmax", shape(), Axis);
        if constexpr (!r.ok) fixed_detail::report<r.message>();
        return same(tensor_.log_softmax(Axis));
    }

  private:
    template <int64_t... Values>
    static constexpr fixed_detail::Dims<sizeof...(Values)> dims() {
        return {Values...};
    }
    static constexpr int64_t first_dim() {
        constexpr int64_t all[] = {Dims..., 0};
        return all[0];
    }
    static constexpr fixed_detail::Checked<0> floating(const char* op) {
        return fixed_detail::need_float<T>(op, shape());
    }
    static constexpr fixed_detail::Checked<0> arith(const char* op) {
        return fixed_detail::need_arith<T>(op, shape());
    }
    // The axis of a scan or a sort (Op: 0 cumsum, 1 cumprod, 2 cummax, 3 sort, 4 argsort).
    template <int64_t Axis, int Op>
    static void check_scan_axis() {
        constexpr fixed_detail::Checked<0> r = [] {
            constexpr const char* names[] = {"cumsum", "cumprod", "cummax", "sort", "argsort"};
            fixed_detail::Checked<0> c;
            if (fixed_detail::normalize(Axis, sizeof...(Dims)) < 0)
                c.fail(names[Op], ": axis ", Axis, " is out of range for ", shape());
            return c;
        }();
        if constexpr (!r.ok) fixed_detail::report<r.message>();
    }
    static constexpr fixed_detail::Checked<0> check_arange() {
        fixed_detail::Checked<0> r;
        if (sizeof...(Dims) != 1) r.fail("arange: needs one dimension, got ", shape());
        return r;
    }
    static constexpr fixed_detail::Checked<0> check_eye() {
        fixed_detail::Checked<0> r;
        constexpr int64_t all[] = {Dims..., 0, 0};
        if (sizeof...(Dims) != 2 || all[0] != all[1])
            r.fail("eye: needs a square shape [N, N], got ", shape());
        return r;
    }
    static constexpr fixed_detail::Checked<0> check_item() {
        fixed_detail::Checked<0> r;
        if (numel() != 1)
            r.fail("item: a tensor of shape ", shape(), " has ", numel(), " elements, not 1");
        return r;
    }
    template <int64_t... Pairs>
    static std::vector<std::pair<int64_t, int64_t>> pairs() {
        constexpr int64_t flat[] = {Pairs..., 0};
        std::vector<std::pair<int64_t, int64_t>> out;
        for (size_t i = 0; i + 1 < sizeof...(Pairs); i += 2) out.emplace_back(flat[i], flat[i + 1]);
        return out;
    }
    FixedTensor same(Tensor t) const { return {Unchecked{}, std::move(t)}; }
    // Size: the pieces' size; Given: the template argument to check (Size, or chunk's N).
    template <int64_t Size, int64_t Axis, bool Chunk, int64_t Given>
    auto split_as() const {
        constexpr auto r = fixed_detail::split(Chunk ? "chunk" : "split", shape(), Given, Axis,
                                               Chunk ? "number of chunks" : "split size");
        if constexpr (!r.ok) {
            fixed_detail::report<r.message>();
            return std::tuple<InvalidFixedTensor<T>>{};
        } else {
            constexpr auto a = static_cast<size_t>(fixed_detail::normalize(Axis, sizeof...(Dims)));
            constexpr int64_t n = shape()[a];
            constexpr size_t pieces = n == 0 ? 1 : static_cast<size_t>((n + Size - 1) / Size);
            const std::vector<Tensor> parts = tensor_.split(Size, Axis);
            return [&]<size_t... I>(std::index_sequence<I...>) {
                return std::tuple{
                    fixed_detail::FixedOf<T, fixed_detail::split_piece(shape(), Axis, Size, I),
                                          sizeof...(Dims)>(Unchecked{}, parts[I])...};
            }
            (std::make_index_sequence<pieces>{});
        }
    }

    Tensor tensor_;
};

// ---- operators: NumPy broadcasting between FixedTensors of one element type; a scalar operand
// takes the tensor's element type ---------------------------------------------------------------

#define TEMPURA_FIXED_BINARY_OP(sym, op)                                                           \
    template <AnyFixedTensor A, AnyFixedTensor B>                                                  \
    auto operator sym(const A& a, const B& b) {                                                    \
        constexpr auto r =                                                                         \
            fixed_detail::check_binary<fixed_detail::Binary::op, typename A::value_type,           \
                                       typename B::value_type>(A::shape(), B::shape());            \
        if constexpr (!r.ok) {                                                                     \
            fixed_detail::report<r.message>();                                                     \
            return InvalidFixedTensor<fixed_detail::BinaryResult<A, fixed_detail::Binary::op>>{};  \
        } else {                                                                                   \
            return fixed_detail::binary_result<fixed_detail::Binary::op, r>(a, b);                 \
        }                                                                                          \
    }                                                                                              \
    template <AnyFixedTensor A, Number S>                                                          \
    auto operator sym(const A& a, S s) {                                                           \
        return fixed_detail::binary_scalar<fixed_detail::Binary::op>(a, s, false);                 \
    }                                                                                              \
    template <Number S, AnyFixedTensor B>                                                          \
    auto operator sym(S s, const B& b) {                                                           \
        return fixed_detail::binary_scalar<fixed_detail::Binary::op>(b, s, true);                  \
    }
TEMPURA_FIXED_BINARY_OP(+, Add)
TEMPURA_FIXED_BINARY_OP(-, Sub)
TEMPURA_FIXED_BINARY_OP(*, Mul)
TEMPURA_FIXED_BINARY_OP(/, Div)
TEMPURA_FIXED_BINARY_OP(<, Less)
TEMPURA_FIXED_BINARY_OP(<=, LessEqual)
TEMPURA_FIXED_BINARY_OP(>, Greater)
TEMPURA_FIXED_BINARY_OP(>=, GreaterEqual)
TEMPURA_FIXED_BINARY_OP(==, Equal)
TEMPURA_FIXED_BINARY_OP(!=, NotEqual)
TEMPURA_FIXED_BINARY_OP(%, Mod)
TEMPURA_FIXED_BINARY_OP(&, And)
TEMPURA_FIXED_BINARY_OP(|, Or)
TEMPURA_FIXED_BINARY_OP(^, Xor)
TEMPURA_FIXED_BINARY_OP(<<, Shl)
TEMPURA_FIXED_BINARY_OP(>>, Shr)
#undef TEMPURA_FIXED_BINARY_OP

// a op= b: b broadcasts into a (the result must have a's shape).
#define TEMPURA_FIXED_ASSIGN_OP(sym, op)                                                           \
    template <AnyFixedTensor A, AnyFixedTensor B>                                                  \
    A& operator sym##=(A& a, const B& b) {                                                         \
        return fixed_detail::assign<fixed_detail::Binary::op>(a, b);                               \
    }                                                                                              \
    template <AnyFixedTensor A, Number S>                                                          \
    A& operator sym##=(A& a, S s) {                                                                \
        return a = a sym s;                                                                        \
    }
TEMPURA_FIXED_ASSIGN_OP(+, Add)
TEMPURA_FIXED_ASSIGN_OP(-, Sub)
TEMPURA_FIXED_ASSIGN_OP(*, Mul)
TEMPURA_FIXED_ASSIGN_OP(/, Div)
#undef TEMPURA_FIXED_ASSIGN_OP

template <AnyFixedTensor A>
A operator-(const A& a) {
    return a.neg();
}
template <AnyFixedTensor A>
A operator!(const A& a) {
    return a.logical_not();
}

template <AnyFixedTensor A, AnyFixedTensor B>
auto maximum(const A& a, const B& b) {
    return a.maximum(b);
}
template <AnyFixedTensor A, AnyFixedTensor B>
auto minimum(const A& a, const B& b) {
    return a.minimum(b);
}
// Integer division rounding down and % with the divisor's sign, as Python (and Tensor).
template <AnyFixedTensor A, AnyFixedTensor B>
auto floor_div(const A& a, const B& b) {
    return fixed_detail::binary<fixed_detail::Binary::FloorDiv>(a, b);
}
template <AnyFixedTensor A, Number S>
auto floor_div(const A& a, S s) {
    return fixed_detail::binary_scalar<fixed_detail::Binary::FloorDiv>(a, s, false);
}
template <Number S, AnyFixedTensor B>
auto floor_div(S s, const B& b) {
    return fixed_detail::binary_scalar<fixed_detail::Binary::FloorDiv>(b, s, true);
}

// Joins tensors of one element type and shape along a new axis Axis: stack<0>(a, b) of two
// FixedTensor<float, 3> is a FixedTensor<float, 2, 3>.
template <int64_t Axis = 0, AnyFixedTensor First, AnyFixedTensor... Rest>
auto stack(const First& first, const Rest&... rest) {
    using T = typename First::value_type;
    constexpr auto r = fixed_detail::check_stack<T, typename Rest::value_type...>(
        Axis, First::shape(), Rest::shape()...);
    return fixed_detail::joined<r, T>([&] {
        return Tensor::stack({first.tensor(), rest.tensor()...}, Axis);
    });
}

// where(cond, a, b): cond ? a : b elementwise, the three broadcast together; cond is bool, a and b
// have one element type (a scalar takes the other's).
template <AnyFixedTensor C, AnyFixedTensor A, AnyFixedTensor B>
auto where(const C& cond, const A& a, const B& b) {
    using T = typename A::value_type;
    constexpr auto r = fixed_detail::check_where<typename C::value_type, T, typename B::value_type>(
        C::shape(), A::shape(), B::shape());
    if constexpr (!r.ok) {
        fixed_detail::report<r.message>();
        return InvalidFixedTensor<T>{};
    } else {
        return fixed_detail::FixedOf<T, r.dims, r.rank>(
            fixed_detail::Unchecked{}, where(cond.tensor(), a.tensor(), b.tensor()));
    }
}
template <AnyFixedTensor C, AnyFixedTensor A, Number S>
auto where(const C& cond, const A& a, S b) {
    using T = typename A::value_type;
    return where(cond, a, FixedTensor<T>::full(static_cast<T>(b)));
}
template <AnyFixedTensor C, Number S, AnyFixedTensor B>
auto where(const C& cond, S a, const B& b) {
    using T = typename B::value_type;
    return where(cond, FixedTensor<T>::full(static_cast<T>(a)), b);
}

// Concatenation along Axis (negative counts from the end): cat<1>(a, b, c). The tensors have one
// element type and the same dims off the axis.
template <int64_t Axis = 0, AnyFixedTensor First, AnyFixedTensor... Rest>
auto cat(const First& first, const Rest&... rest) {
    using T = typename First::value_type;
    constexpr auto r = fixed_detail::check_cat<T, typename Rest::value_type...>(
        Axis, First::shape(), Rest::shape()...);
    return fixed_detail::joined<r, T>([&] {
        return Tensor::cat({first.tensor(), rest.tensor()...}, Axis);
    });
}

// ---- operations on an InvalidFixedTensor: silent (the mistake was reported) ---------------------

#define TEMPURA_INVALID_BINARY_OP(sym, ...)                                                        \
    template <class A, class B>                                                                    \
    requires fixed_detail::Poisoned<A, B>                                                          \
    auto operator sym(const A&, const B&) { return __VA_ARGS__{}; }
TEMPURA_INVALID_BINARY_OP(+, fixed_detail::PoisonedType<A, B>)
TEMPURA_INVALID_BINARY_OP(-, fixed_detail::PoisonedType<A, B>)
TEMPURA_INVALID_BINARY_OP(*, fixed_detail::PoisonedType<A, B>)
TEMPURA_INVALID_BINARY_OP(/, fixed_detail::PoisonedType<A, B>)
TEMPURA_INVALID_BINARY_OP(<, InvalidFixedTensor<bool>)
TEMPURA_INVALID_BINARY_OP(<=, InvalidFixedTensor<bool>)
TEMPURA_INVALID_BINARY_OP(>, InvalidFixedTensor<bool>)
TEMPURA_INVALID_BINARY_OP(>=, InvalidFixedTensor<bool>)
TEMPURA_INVALID_BINARY_OP(==, InvalidFixedTensor<bool>)
TEMPURA_INVALID_BINARY_OP(!=, InvalidFixedTensor<bool>)
TEMPURA_INVALID_BINARY_OP(%, fixed_detail::PoisonedType<A, B>)
TEMPURA_INVALID_BINARY_OP(&, fixed_detail::PoisonedType<A, B>)
TEMPURA_INVALID_BINARY_OP(|, fixed_detail::PoisonedType<A, B>)
TEMPURA_INVALID_BINARY_OP(^, fixed_detail::PoisonedType<A, B>)
TEMPURA_INVALID_BINARY_OP(<<, fixed_detail::PoisonedType<A, B>)
TEMPURA_INVALID_BINARY_OP(>>, fixed_detail::PoisonedType<A, B>)
#undef TEMPURA_INVALID_BINARY_OP

#define TEMPURA_INVALID_ASSIGN_OP(sym)                                                             \
    template <class A, class B>                                                                    \
    requires fixed_detail::Poisoned<A, B> A& operator sym##=(A& a, const B&) { return a; }
TEMPURA_INVALID_ASSIGN_OP(+)
TEMPURA_INVALID_ASSIGN_OP(-)
TEMPURA_INVALID_ASSIGN_OP(*)
TEMPURA_INVALID_ASSIGN_OP(/)
#undef TEMPURA_INVALID_ASSIGN_OP

template <class T>
InvalidFixedTensor<T> operator-(const InvalidFixedTensor<T>& a) {
    return a;
}
template <class T>
InvalidFixedTensor<T> operator!(const InvalidFixedTensor<T>& a) {
    return a;
}
template <class A, class B>
requires fixed_detail::Poisoned<A, B>
auto maximum(const A&, const B&) { return fixed_detail::PoisonedType<A, B>{}; }
template <class A, class B>
requires fixed_detail::Poisoned<A, B>
auto minimum(const A&, const B&) { return fixed_detail::PoisonedType<A, B>{}; }
template <class C, class A, class B>
requires fixed_detail::Poisoned<C, A, B>
auto where(const C&, const A&, const B&) { return fixed_detail::PoisonedType<A, B>{}; }
template <int64_t Axis = 0, class First, class... Rest>
requires fixed_detail::Poisoned<First, Rest...>
auto cat(const First&, const Rest&...) { return fixed_detail::PoisonedType<First, Rest...>{}; }
template <int64_t Axis = 0, class First, class... Rest>
requires fixed_detail::Poisoned<First, Rest...>
auto stack(const First&, const Rest&...) { return fixed_detail::PoisonedType<First, Rest...>{}; }
template <class A, class B>
requires fixed_detail::Poisoned<A, B>
auto floor_div(const A&, const B&) { return fixed_detail::PoisonedType<A, B>{}; }

} // namespace tempura
