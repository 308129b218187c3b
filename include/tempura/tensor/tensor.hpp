#pragma once
// Tensor: a lazy n-dimensional array with runtime shapes. Every operation builds a node of the
// tensor-level UOp graph (docs/KERNEL_IR.md section 1); realize() hands the graph to the
// scheduler and replaces it by RESHAPE(BUFFER) of the result.
//
// Tensors are values: copying one copies a handle to the (immutable, shared) graph. A tensor
// keeps alive every runtime::Buffer its graph reads, so a lazy graph never outlives its inputs.
#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tempura/ir/dtype.hpp"
#include "tempura/ir/uop.hpp"
#include "tempura/realize/realize.hpp"
#include "tempura/runtime/buffer.hpp"
#include "tempura/tensor/dim.hpp"
#include "tempura/tensor/shape.hpp"

namespace tempura {

// A C++ number that can be an element or a scalar operand (bool included).
template <class T>
concept Number = std::is_arithmetic_v<T>;

// The DType of a C++ element type: float -> Float32, double -> Float64, bool -> Bool, integers by
// width and signedness (int -> Int32, int64_t -> Int64, uint8_t -> UInt8, ...).
template <Number T>
constexpr DType dtype_of() {
    if constexpr (std::is_same_v<T, bool>)
        return DType::Bool;
    else if constexpr (std::is_same_v<T, float>)
        return DType::Float32;
    else if constexpr (std::is_floating_point_v<T>)
        return DType::Float64;
    else if constexpr (std::is_signed_v<T>) {
        if constexpr (sizeof(T) == 1)
            return DType::Int8;
        else if constexpr (sizeof(T) == 2)
            return DType::Int16;
        else if constexpr (sizeof(T) == 4)
            return DType::Int32;
        else
            return DType::Int64;
    } else {
        if constexpr (sizeof(T) == 1)
            return DType::UInt8;
        else if constexpr (sizeof(T) == 2)
            return DType::UInt16;
        else if constexpr (sizeof(T) == 4)
            return DType::UInt32;
        else
            return DType::UInt64;
    }
}

// The dtype a scalar of type T gives to Tensor::full(): like dtype_of, except that double (the
// type of C++ floating literals) gives the default float, Float32.
template <Number T>
constexpr DType default_dtype_of() {
    if constexpr (std::is_same_v<T, double> || std::is_same_v<T, long double>)
        return DType::Float32;
    else
        return dtype_of<T>();
}

// One dim of Tensor::slice, as Python's start:stop:step. Negative start and stop count from the
// end; out-of-range ones are clamped. Slice::end stands for Python's None: the first element in
// walking order as start (the last one for a negative step), past the last as stop, so
// Slice{Slice::end, Slice::end, -1} reverses a dim.
struct Slice {
    static constexpr int64_t end = INT64_MAX;
    int64_t start = 0, stop = end, step = 1;
};

// The first index a Slice takes from a dim of size n and how many it takes (Python's
// slice.indices(n) and len(range(...))); the step must not be 0.
constexpr std::pair<int64_t, int64_t> slice_range(const Slice& s, int64_t n) {
    const bool back = s.step < 0;
    auto clamp = [&](int64_t v, bool is_start) -> int64_t {
        if (v == Slice::end) return back ? (is_start ? n - 1 : -1) : (is_start ? 0 : n);
        if (v < 0) v += n;
        if (v < 0) return back ? -1 : 0;
        if (v >= n) return back ? n - 1 : n;
        return v;
    };
    const int64_t start = clamp(s.start, true), stop = clamp(s.stop, false);
    int64_t count = 0;
    if (!back && stop > start) count = (stop - start - 1) / s.step + 1;
    if (back && start > stop) count = (start - stop - 1) / -s.step + 1;
    return {start, count};
}

class Tensor {
  public:
    using Buffers = std::vector<std::shared_ptr<runtime::Buffer>>;

    // A float32 scalar 0 (so that Tensor can live in containers and be assigned later).
    Tensor();

    // ---- creation -------------------------------------------------------------------------
    // A realized tensor holding `data` (row-major) in a new buffer; no kernel runs.
    // Throws "[from_vector] 5 values do not fill shape [2, 3] (6 elements)".
    template <Number T>
    static Tensor from_vector(const std::vector<T>& data, Shape shape,
                              std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        return from_vector(data, std::move(shape), dtype_of<T>());
    }
    // One dimension: shape [data.size()].
    template <Number T>
    static Tensor from_vector(const std::vector<T>& data,
                              std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        return from_vector(data, Shape{static_cast<int64_t>(data.size())}, dtype_of<T>());
    }
    // Converting the values to `dtype` (e.g. float data into a Float16 tensor).
    template <Number T>
    static Tensor from_vector(const std::vector<T>& data, Shape shape, DType dtype,
                              std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        if constexpr (std::is_same_v<T, bool>) {
            std::vector<uint8_t> bytes(data.begin(), data.end());
            return from_host(DType::Bool, bytes.data(), static_cast<int64_t>(bytes.size()),
                             std::move(shape), dtype);
        } else {
            return from_host(dtype_of<T>(), data.data(), static_cast<int64_t>(data.size()),
                             std::move(shape), dtype);
        }
    }
    // From a span (a view of the caller's memory: one copy into the new buffer), as above.
    template <class T, size_t E>
    requires Number<std::remove_cv_t<T>>
    static Tensor from_vector(std::span<T, E> data, Shape shape,
                              std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        return from_vector(data, std::move(shape), dtype_of<std::remove_cv_t<T>>());
    }
    template <class T, size_t E>
    requires Number<std::remove_cv_t<T>>
    static Tensor from_vector(std::span<T, E> data, Shape shape, DType dtype,
                              std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        using U = std::remove_cv_t<T>;
        if constexpr (std::is_same_v<U, bool>) {
            std::vector<uint8_t> bytes(data.begin(), data.end());
            return from_host(DType::Bool, bytes.data(), static_cast<int64_t>(bytes.size()),
                             std::move(shape), dtype);
        } else {
            return from_host(dtype_of<U>(), data.data(), static_cast<int64_t>(data.size()),
                             std::move(shape), dtype);
        }
    }
    // numel(shape) elements of `dtype` read from the caller's memory, copied once into the new
    // buffer (on the default device: straight from `data` to the device). Bool elements are
    // bytes; any nonzero byte reads as true.
    static Tensor from_blob(const void* data, Shape shape, DType dtype,
                            std::source_location loc = std::source_location::current());
    // Symbolic shapes: dims that are variables bound to a size (tempura/tensor/dim.hpp). The
    // tensor's shape() holds the bound sizes; the plans and kernels built for its graphs serve
    // every size in the variables' ranges. A list of plain sizes is a Shape as above.
    // Throws "[from_vector] batch is not bound" for an unbound variable.
    template <Number T>
    static Tensor from_vector(const std::vector<T>& data, std::initializer_list<Dim> dims,
                              std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        return from_vector(data, Dims(dims), dtype_of<T>());
    }
    template <Number T>
    static Tensor from_vector(const std::vector<T>& data, const Dims& dims,
                              std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        return from_vector(data, dims, dtype_of<T>());
    }
    template <Number T>
    static Tensor from_vector(const std::vector<T>& data, std::initializer_list<Dim> dims,
                              DType dtype,
                              std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        return from_vector(data, Dims(dims), dtype);
    }
    template <Number T>
    static Tensor from_vector(const std::vector<T>& data, const Dims& dims, DType dtype,
                              std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        return with_dims(from_vector(data, dim_values("from_vector", dims), dtype), dims);
    }
    // A tensor of `shape` whose every element is `value` (lazy: CONST, RESHAPE, EXPAND).
    // The dtype follows T (double gives Float32, see default_dtype_of), or is given.
    template <Number T>
    static Tensor full(Shape shape, T value,
                       std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        return full(std::move(shape), value, default_dtype_of<T>());
    }
    template <Number T>
    static Tensor full(Shape shape, T value, DType dtype,
                       std::source_location loc = std::source_location::current()) {
        const UserCall site(loc);
        if constexpr (std::is_floating_point_v<T>)
            return full_const(std::move(shape), make_const_f(dtype, static_cast<double>(value)));
        else
            return full_const(std::move(shape), make_const_i(dtype, static_cast<int64_t>(value),
                                                             static_cast<double>(value)));
    }
    static Tensor zeros(Shape shape, DType dtype = DType::Float32,
                        std::source_location loc = std::source_location::current());
    static Tensor ones(Shape shape, DType dtype = DType::Float32,
                       std::source_location loc = std::source_location::current());
    // [0, 1, ..., n-1] (float32 unless given).
    static Tensor arange(int64_t n, DType dtype = DType::Float32,
                         std::source_location loc = std::source_location::current());
    // The n x n identity (float32 unless given).
    static Tensor eye(int64_t n, DType dtype = DType::Float32,
                      std::source_location loc = std::source_location::current());
    // Concatenation along `axis` (negative counts from the end).
    static Tensor cat(const std::vector<Tensor>& tensors, int64_t axis = 0,
                      std::source_location loc = std::source_location::current());
    // ---- random numbers (counter-based Threefry-2x32-20, computed by the kernel that uses
    // them; the same numbers for a seed on every device). Each call draws a fresh stream: the
    // key is the seed (manual_seed), the counter is (element index, number of the call).
    static Tensor
    rand(Shape shape, DType dtype = DType::Float32,
         std::source_location loc = std::source_location::current()); // uniform in [0, 1), 24 bits
    static Tensor
    randn(Shape shape, DType dtype = DType::Float32,
          std::source_location loc = std::source_location::current()); // N(0, 1), Box-Muller
    // Uniform integers in [lo, hi) (Int32 unless given); hi - lo at most 2^32.
    static Tensor randint(int64_t lo, int64_t hi, Shape shape, DType dtype = DType::Int32,
                          std::source_location loc = std::source_location::current());
    static Tensor uniform(Shape shape, double lo, double hi, DType dtype = DType::Float32,
                          std::source_location loc = std::source_location::current());
    static Tensor normal(Shape shape, double mean, double std, DType dtype = DType::Float32,
                         std::source_location loc = std::source_location::current());
    // A tensor over an existing tensor-level graph; its BUFFER leaves must be alive (they are
    // kept alive from now on). Throws if the graph breaks the contract.
    static Tensor from_uop(const UOp& uop,
                           std::source_location loc = std::source_location::current());

    // ---- properties -----------------------------------------------------------------------
    const Shape& shape() const { return shape_; }
    DType dtype() const { return core().uop.dtype(); }
    int64_t numel() const;
    int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
    // The lazy graph (after realize(): RESHAPE(BUFFER)); printable with tree().
    const UOp& uop() const { return core().uop; }
    // Whether the tensor is a buffer already (from_vector, arange, eye, or after realize()).
    bool is_realized() const { return core().buffer != nullptr; }
    // The buffers this tensor's graph reads (kept alive by the tensor).
    const Buffers& buffers() const;

    // ---- elementwise ----------------------------------------------------------------------
    Tensor neg(std::source_location loc = std::source_location::current()) const;
    Tensor
    exp(std::source_location loc = std::source_location::current()) const; // EXP2(x * (1/ln 2))
    Tensor exp2(std::source_location loc = std::source_location::current()) const; // EXP2(x)
    Tensor log(std::source_location loc = std::source_location::current()) const;  // LOG2(x) * ln 2
    Tensor log2(std::source_location loc = std::source_location::current()) const; // LOG2(x)
    Tensor sqrt(std::source_location loc = std::source_location::current()) const;
    Tensor sin(std::source_location loc = std::source_location::current()) const;
    Tensor cos(std::source_location loc = std::source_location::current()) const; // COS(x)
    Tensor erf(std::source_location loc =
                   std::source_location::current()) const; // ERF(x): the error function
    Tensor relu(std::source_location loc = std::source_location::current()) const;
    Tensor
    sigmoid(std::source_location loc = std::source_location::current()) const; // 1 / (1 + exp(-x))
    Tensor tanh(std::source_location loc = std::source_location::current())
        const; // E / (E + 2), E = e^(2x) - 1: within 8 ulp, also near 0
    Tensor abs(std::source_location loc = std::source_location::current()) const;
    Tensor reciprocal(std::source_location loc = std::source_location::current()) const;
    Tensor square(std::source_location loc = std::source_location::current()) const;
    Tensor
    logical_not(std::source_location loc = std::source_location::current()) const; // bool tensors
    Tensor maximum(const Tensor& other,
                   std::source_location loc = std::source_location::current()) const;
    Tensor minimum(const Tensor& other,
                   std::source_location loc = std::source_location::current()) const;
    Tensor cast(DType dtype, std::source_location loc = std::source_location::current()) const;
    // x^y, as std::pow: 0^0 = 1, a negative base with an integer exponent keeps its sign
    // rule, otherwise NaN. On integers, repeated squaring (wrapping); a negative exponent gives
    // 0 except for bases 1 and -1. Floats: within 32 ulp where |y * log2|x|| <= 32.
    Tensor pow(const Tensor& exponent,
               std::source_location loc = std::source_location::current()) const;
    Tensor pow(double exponent, std::source_location loc = std::source_location::current())
        const; // small integer exponents multiply; 0.5 is sqrt
    Tensor rsqrt(std::source_location loc = std::source_location::current()) const; // 1 / sqrt(x)
    // x/2 * (1 + erf(x / sqrt 2)); approximate "tanh": x/2 * (1 + tanh(sqrt(2/pi) (x + 0.044715
    // x^3))), GPT-2's form (PyTorch's two values of `approximate`).
    Tensor gelu(std::string_view approximate = "none",
                std::source_location loc = std::source_location::current()) const;
    Tensor
    relu6(std::source_location loc = std::source_location::current()) const; // min(max(x, 0), 6)
    Tensor hardsigmoid(
        std::source_location loc = std::source_location::current()) const; // relu6(x + 3) / 6
    Tensor hardswish(
        std::source_location loc = std::source_location::current()) const; // x relu6(x + 3) / 6
    Tensor silu(std::source_location loc = std::source_location::current()) const; // x * sigmoid(x)
    Tensor softplus(std::source_location loc = std::source_location::current())
        const; // log(1 + e^x), without overflow or cancellation
    Tensor
    mish(std::source_location loc = std::source_location::current()) const; // x * tanh(softplus(x))
    Tensor leaky_relu(double slope = 0.01,
                      std::source_location loc = std::source_location::current()) const;
    Tensor elu(double alpha = 1.0, std::source_location loc = std::source_location::current())
        const; // x > 0 ? x : alpha * (e^x - 1)
    Tensor
    clip(double lo, double hi,
         std::source_location loc = std::source_location::current()) const; // min(max(x, lo), hi)
    // Rounding; integers are returned as they are.
    Tensor floor(std::source_location loc = std::source_location::current()) const;
    Tensor ceil(std::source_location loc = std::source_location::current()) const;
    Tensor round(std::source_location loc = std::source_location::current()) const; // half to even
    Tensor trunc(std::source_location loc = std::source_location::current()) const;
    Tensor sign(std::source_location loc = std::source_location::current())
        const; // -1, 0 or 1 (floats: signed zeros and NaN kept)
    Tensor isnan(std::source_location loc = std::source_location::current()) const; // -> Bool
    Tensor isinf(std::source_location loc = std::source_location::current()) const; // -> Bool
    Tensor
    tan(std::source_location loc = std::source_location::current()) const; // within 4 ulp (float32)
    // sinh and cosh: within 12 ulp for |x| <= 10 (float32); beyond, within 100 ulp, as e^x
    // itself (2^(x log2 e), the product rounded to float).
    Tensor sinh(std::source_location loc = std::source_location::current()) const;
    Tensor cosh(std::source_location loc = std::source_location::current()) const;
    Tensor atan(
        std::source_location loc = std::source_location::current()) const; // within 4 ulp (float32)
    // Where mask (bool, broadcast to x) is true, `value`; elsewhere x.
    Tensor masked_fill(const Tensor& mask, double value,
                       std::source_location loc = std::source_location::current()) const;

    // ---- movement -------------------------------------------------------------------------
    Tensor
    reshape(Shape shape,
            std::source_location loc = std::source_location::current()) const; // one -1 allowed
    Tensor permute(Shape order, std::source_location loc = std::source_location::current()) const;
    Tensor transpose(int64_t dim0 = -2, int64_t dim1 = -1,
                     std::source_location loc = std::source_location::current()) const;
    Tensor expand(Shape shape, std::source_location loc = std::source_location::current())
        const; // size-1 dims grow; new leading dims; -1 keeps a dim
    Tensor pad(const std::vector<std::pair<int64_t, int64_t>>& padding,
               std::source_location loc = std::source_location::current()) const; // reads 0
    Tensor shrink(const std::vector<std::pair<int64_t, int64_t>>& bounds,
                  std::source_location loc = std::source_location::current()) const;
    Tensor flip(Shape axes, std::source_location loc = std::source_location::current()) const;
    Tensor squeeze(int64_t axis, std::source_location loc = std::source_location::current()) const;
    Tensor
    squeeze(std::source_location loc = std::source_location::current()) const; // every size-1 dim
    Tensor unsqueeze(int64_t axis,
                     std::source_location loc = std::source_location::current()) const;
    Tensor flatten(std::source_location loc = std::source_location::current()) const;
    // Python slicing per dim (trailing dims not given are whole); see Slice.
    Tensor slice(const std::vector<Slice>& slices,
                 std::source_location loc = std::source_location::current()) const;
    // Pieces of `size` along axis (the last one shorter); chunk: n pieces of equal size, the
    // last one shorter (fewer than n when the size does not divide, as PyTorch).
    std::vector<Tensor> split(int64_t size, int64_t axis = 0,
                              std::source_location loc = std::source_location::current()) const;
    std::vector<Tensor> chunk(int64_t n, int64_t axis = 0,
                              std::source_location loc = std::source_location::current()) const;
    // Tiles x `times[i]` along dim i; more entries than dims add leading dims (PyTorch repeat).
    Tensor repeat(Shape times, std::source_location loc = std::source_location::current()) const;
    // The lower (upper) triangle of the last two dims: j - i <= k (j - i >= k) kept, else 0.
    Tensor tril(int64_t k = 0, std::source_location loc = std::source_location::current()) const;
    Tensor triu(int64_t k = 0, std::source_location loc = std::source_location::current()) const;
    // [..., classes] of Int32: 1 at each element's value, 0 elsewhere (and everywhere for a value
    // outside [0, classes)). Integer tensors only.
    Tensor one_hot(int64_t classes,
                   std::source_location loc = std::source_location::current()) const;
    // ---- indexing (index tensors are Int32 or Int64) -------------------------------------------
    // Data-dependent loads: the kernel reads the index, then the element it names. An index
    // outside [0, size of the axis) is an error when the index tensor is realized (checked
    // here), and reads 0 when it is computed in the same plan (the load is gated: memory outside
    // the source is never read).
    // out[i][j][k] = x[index[i][j][k]][j][k] (axis 0): the index's shape, dims other than axis
    // at most the source's (PyTorch's gather).
    Tensor gather(int64_t axis, const Tensor& index,
                  std::source_location loc = std::source_location::current()) const;
    // The slices of x at the positions of a 1-D index along axis (PyTorch's index_select).
    Tensor index_select(int64_t axis, const Tensor& index,
                        std::source_location loc = std::source_location::current()) const;
    // x, then out[index[i][j]][j] += src[i][j] (axis 0) for every element of index, in order
    // (PyTorch's scatter_add: src at least index's size, index at most x's in the other dims).
    // Its own kernel, run serially: repeated indices add up exactly in that order. The gradient
    // of gather.
    Tensor scatter_add(int64_t axis, const Tensor& index, const Tensor& src,
                       std::source_location loc = std::source_location::current()) const;
    // Joins tensors of one shape along a new axis.
    static Tensor stack(const std::vector<Tensor>& tensors, int64_t axis = 0,
                        std::source_location loc = std::source_location::current());
    // n values from start to stop, both included (float32 unless given).
    static Tensor linspace(double start, double stop, int64_t n, DType dtype = DType::Float32,
                           std::source_location loc = std::source_location::current());
    static Tensor zeros_like(const Tensor& x,
                             std::source_location loc = std::source_location::current());
    static Tensor ones_like(const Tensor& x,
                            std::source_location loc = std::source_location::current());
    static Tensor full_like(const Tensor& x, double value,
                            std::source_location loc = std::source_location::current());
    // A materialization point (CONTIGUOUS): the scheduler writes this value to a buffer.
    Tensor contiguous(std::source_location loc = std::source_location::current()) const;

    // ---- devices ---------------------------------------------------------------------------
    // Where the tensor lives ("CPU", "EMU", "CUDA:0"): the device of the buffers it reads, or for
    // one that reads none (a constant) the default device when it was made. Ops combine tensors of
    // one device, or constants, and throw "[add] tensors on different devices: CPU and EMU"
    // otherwise; the kernels of a tensor run on its device.
    std::string device() const;
    // A copy on `device` (realized: the value is copied, never recomputed, between host and
    // device memory as needed), or this tensor when it is there already. Throws "[device] ..."
    // for a device that is not usable here.
    Tensor to(const std::string& device,
              std::source_location loc = std::source_location::current()) const;

    // ---- reductions (axes {} = all; negative axes count from the end) ----------------------
    Tensor sum(Shape axes = {}, bool keepdim = false,
               std::source_location loc = std::source_location::current()) const;
    Tensor prod(Shape axes = {}, bool keepdim = false,
                std::source_location loc = std::source_location::current()) const;
    Tensor max(Shape axes = {}, bool keepdim = false,
               std::source_location loc = std::source_location::current()) const;
    Tensor min(Shape axes = {}, bool keepdim = false,
               std::source_location loc = std::source_location::current()) const;
    Tensor mean(Shape axes = {}, bool keepdim = false,
                std::source_location loc = std::source_location::current()) const;
    // One axis. (Templates, so that `t.sum({})` means all axes rather than axis 0.)
    template <std::integral I>
    Tensor sum(I axis, bool keepdim = false,
               std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return sum(Shape{static_cast<int64_t>(axis)}, keepdim);
    }
    template <std::integral I>
    Tensor prod(I axis, bool keepdim = false,
                std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return prod(Shape{static_cast<int64_t>(axis)}, keepdim);
    }
    template <std::integral I>
    Tensor max(I axis, bool keepdim = false,
               std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return max(Shape{static_cast<int64_t>(axis)}, keepdim);
    }
    template <std::integral I>
    Tensor min(I axis, bool keepdim = false,
               std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return min(Shape{static_cast<int64_t>(axis)}, keepdim);
    }
    template <std::integral I>
    Tensor mean(I axis, bool keepdim = false,
                std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return mean(Shape{static_cast<int64_t>(axis)}, keepdim);
    }
    // Whether any (every) element is nonzero, as Bool; an empty reduction gives false (true).
    Tensor any(Shape axes = {}, bool keepdim = false,
               std::source_location loc = std::source_location::current()) const;
    Tensor all(Shape axes = {}, bool keepdim = false,
               std::source_location loc = std::source_location::current()) const;
    // Variance and standard deviation: sum((x - mean)^2) / (N - correction).
    Tensor var(Shape axes = {}, bool keepdim = false, int64_t correction = 1,
               std::source_location loc = std::source_location::current()) const;
    Tensor std(Shape axes = {}, bool keepdim = false, int64_t correction = 1,
               std::source_location loc = std::source_location::current()) const;
    template <std::integral I>
    Tensor any(I axis, bool keepdim = false,
               std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return any(Shape{static_cast<int64_t>(axis)}, keepdim);
    }
    template <std::integral I>
    Tensor all(I axis, bool keepdim = false,
               std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return all(Shape{static_cast<int64_t>(axis)}, keepdim);
    }
    template <std::integral I>
    Tensor var(I axis, bool keepdim = false, int64_t correction = 1,
               std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return var(Shape{static_cast<int64_t>(axis)}, keepdim, correction);
    }
    template <std::integral I>
    Tensor std(I axis, bool keepdim = false, int64_t correction = 1,
               std::source_location loc = std::source_location::current()) const {
        const UserCall site(loc);
        return std(Shape{static_cast<int64_t>(axis)}, keepdim, correction);
    }
    // log(sum(exp(x))) along axis, shifted by the max so that it neither overflows nor
    // underflows (all -inf gives -inf).
    Tensor logsumexp(int64_t axis, bool keepdim = false,
                     std::source_location loc = std::source_location::current()) const;
    // Inclusive scans along an axis: out[..., i] = x[..., 0] op ... op x[..., i] (bool counts as
    // Int32 for cumsum and cumprod). Blocks of 16 are scanned as a triangle (a reduce), and the
    // block totals are scanned the same way, recursively: O(16 n) work, a few kernels.
    Tensor cumsum(int64_t axis, std::source_location loc = std::source_location::current()) const;
    Tensor cumprod(int64_t axis, std::source_location loc = std::source_location::current()) const;
    Tensor cummax(int64_t axis, std::source_location loc = std::source_location::current())
        const; // NaN propagates from where it appears
    // Sorting along an axis, by a bitonic network of compare-and-swap kernels (log2(p)
    // (log2(p) + 1) / 2 of them, p the axis rounded up to a power of two). Floats: NaN last
    // ascending, first descending; equal elements keep their order (argsort of ties ascends).
    Tensor sort(int64_t axis = -1, bool descending = false,
                std::source_location loc = std::source_location::current()) const;
    Tensor argsort(int64_t axis = -1, bool descending = false,
                   std::source_location loc = std::source_location::current()) const; // Int32
    // The k largest along axis, largest first: {values, Int32 indices}.
    std::pair<Tensor, Tensor>
    topk(int64_t k, int64_t axis = -1,
         std::source_location loc = std::source_location::current()) const;
    // The index of the first maximum (minimum) along `axis`, as Int32.
    Tensor argmax(int64_t axis, bool keepdim = false,
                  std::source_location loc = std::source_location::current()) const;
    Tensor argmin(int64_t axis, bool keepdim = false,
                  std::source_location loc = std::source_location::current()) const;

    // ---- linear algebra and friends -------------------------------------------------------
    // [M,K]@[K,N] -> [M,N]; [K]@[K,N] -> [N]; [M,K]@[K] -> [M]; [K]@[K] -> [];
    // batched [...,M,K]@[...,K,N] -> [...,M,N] (batch dims broadcast).
    Tensor dot(const Tensor& other,
               std::source_location loc = std::source_location::current()) const;
    Tensor matmul(const Tensor& other,
                  std::source_location loc = std::source_location::current()) const;
    // With the accumulation dtype named: Float16 and BFloat16 operands accumulate in Float32
    // unless `acc` is their own dtype, which rounds every product and every partial sum to it
    // (on GPU tensor cores, the mma's 16-bit accumulator: faster, and less exact). Other
    // operands accumulate in their own dtype only.
    Tensor dot(const Tensor& other, DType acc,
               std::source_location loc = std::source_location::current()) const;
    Tensor matmul(const Tensor& other, DType acc,
                  std::source_location loc = std::source_location::current()) const;
    Tensor softmax(int64_t axis = -1,
                   std::source_location loc = std::source_location::current()) const;
    Tensor log_softmax(int64_t axis = -1,
                       std::source_location loc = std::source_location::current()) const;

    // ---- realization ----------------------------------------------------------------------
    // Runs the graph (realize_graph) unless the tensor is a buffer already; afterwards uop() is
    // RESHAPE(BUFFER{id, numel}, shape) and kernels() lists the kernels that ran.
    Tensor& realize();
    // The kernels of the last realize() of this tensor (empty if none ran).
    const std::vector<KernelInfo>& kernels() const;
    // The elements in row-major order, converted to T; realizes first.
    template <Number T = float>
    std::vector<T> to_vector() {
        realize();
        return read_as<T>();
    }
    template <Number T = float>
    std::vector<T> to_vector() const {
        if (is_realized()) return read_as<T>();
        Tensor copy = *this;
        return copy.to_vector<T>();
    }
    // The one element of a tensor with one element; realizes first.
    // Throws "[item] tensor of shape [2, 3] has 6 elements, not 1".
    template <Number T = float>
    T item() {
        check_item();
        return to_vector<T>()[0];
    }
    template <Number T = float>
    T item() const {
        check_item();
        return to_vector<T>()[0];
    }

    // The buffer of a realized tensor (null when lazy). On a CUDA device it is device memory:
    // its data() throws, and to_vector() / item() copy it to the host.
    const std::shared_ptr<runtime::Buffer>& buffer() const { return core().buffer; }

    // ---- autograd (tempura/tensor/autograd.cpp) ---------------------------------------------
    // Gradients are computed by a rule group over the graph: one rule per op gives the adjoints
    // of its sources, applied from the loss towards the leaves; the backward graph is lazy and
    // fuses and schedules like any other. Only float tensors take gradients.
    //
    // Marks this tensor as a leaf whose gradient backward() computes (a lazy tensor is realized
    // first: a leaf is a buffer). Copies share the mark and the gradient. Throws for non-float
    // dtypes. requires_grad(false) drops the mark and the gradient.
    Tensor& requires_grad(bool on = true);
    bool requires_grad_enabled() const;
    // Adds d(this)/d(leaf) to the gradient of every leaf this one-element tensor is computed
    // from (gradients accumulate over backward() calls until zero_grad()). The loss stays
    // readable. Throws "[backward] ..." for more than one element, or when no leaf that
    // requires a gradient is reached (or only through ops without a gradient: comparisons,
    // integer ops, argmax).
    void backward(std::source_location loc = std::source_location::current()) const;
    // The accumulated gradient, of this tensor's shape and dtype (zeros before any backward());
    // throws if the tensor never called requires_grad().
    Tensor grad(std::source_location loc = std::source_location::current()) const;
    // Drops the accumulated gradient (a later grad() is zeros).
    void zero_grad() const;
    // The same value, through which no gradient flows.
    Tensor detach(std::source_location loc = std::source_location::current()) const;
    // Gives this tensor, and every copy of it, the value of `value` (same dtype; its shape, or
    // one that broadcasts to it), realizing the value if it is lazy: the value's buffer becomes
    // the tensor's (no copy). Tensors computed from the old value keep reading the old value.
    // Copies share this from the moment the tensor has a buffer (from_vector, arange, eye,
    // requires_grad, an earlier assign); a copy taken of a lazy tensor before its first assign()
    // keeps its own value. To update several tensors as one plan, tempura::realize({...}) the
    // values first (the optimizers do).
    Tensor& assign(const Tensor& value, std::source_location loc = std::source_location::current());

    // The state copies of a tensor share (autograd marks, assign); defined in tensor.cpp.
    struct Shared;

  private:
    friend struct TensorAccess;
    // What a tensor is: its graph and what the graph reads. A tensor that has Shared state (a
    // leaf that requires a gradient, or one that was assigned to) keeps it there, for all its
    // copies; others keep it in core_.
    struct Core {
        UOp uop;
        std::shared_ptr<const Buffers> buffers;  // sorted by id, no duplicates; never null
        std::shared_ptr<runtime::Buffer> buffer; // set while uop is RESHAPE(BUFFER) of it
        // Whether the graph reads a tensor of symbolic dims: broadcasts then keep their EXPAND
        // even where the sizes already agree (a variable at 1), so that the graph has one
        // structure for every value of the variable.
        bool symbolic = false;
        // Whether gradients flow from this tensor to a leaf that requires one (not detached,
        // not built under NoGrad).
        bool tracks_grad = false;
        int device = 0; // realize/device.hpp's index: the buffers', or the default at creation
        // Whether the tensor lives on `device` though it reads no buffer there: to() put it
        // there (a constant moved to a device, or what is computed from one). A tensor that is
        // neither pinned nor reads a buffer (a bare constant) goes with any device.
        bool pinned = false;
        std::shared_ptr<const std::vector<KernelInfo>> kernels; // shared with the cached plan
        // A tracking tensor that was realized keeps the graph it was computed by (and what that
        // reads), so that gradients still flow through it.
        UOp graph;
        std::shared_ptr<const Buffers> graph_buffers;
    };
    const Core& core() const;
    Core& core_mut();
    friend void realize(const std::vector<std::reference_wrapper<Tensor>>& tensors);
    // Takes a realize's result as this tensor's value (checked against its dtype and size).
    void adopt(RealizeResult r);
    Tensor(UOp uop, Shape shape, std::shared_ptr<const Buffers> buffers);

    // The private builders below run only inside a public call, whose UserCall names the site.
    static Tensor from_host(DType src_dtype, const void* data, int64_t count, Shape shape,
                            DType dtype);
    static UOp make_const_f(DType dtype, double value);
    static UOp make_const_i(DType dtype, int64_t value, double as_double);
    static Tensor full_const(Shape shape, const UOp& constant, const char* op = "full");
    // The sizes of `dims` (throws "[op] batch is not bound"); a realized tensor's leaf with the
    // variables of `dims` recorded on its BUFFER.
    static Shape dim_values(const char* op, const Dims& dims);
    static Tensor with_dims(const Tensor& realized, const Dims& dims);
    // Host copy of the realized buffer, converted element by element into `dst` of dtype `to`.
    void read_into(DType to, void* dst) const;
    void check_item() const;
    template <Number T>
    std::vector<T> read_as() const {
        if constexpr (std::is_same_v<T, bool>) {
            std::vector<uint8_t> tmp(static_cast<size_t>(numel()));
            read_into(DType::Bool, tmp.data());
            return std::vector<bool>(tmp.begin(), tmp.end());
        } else {
            std::vector<T> out(static_cast<size_t>(numel()));
            read_into(dtype_of<T>(), out.data());
            return out;
        }
    }

    Shape shape_;
    Core core_;
    std::shared_ptr<Shared> shared_;
};

// While a NoGrad lives (on this thread), results of tensor ops carry no gradient: they are
// computed from their inputs' values, as detach() would give them (optimizer steps, evaluation).
class NoGrad {
  public:
    NoGrad();
    ~NoGrad();
    NoGrad(const NoGrad&) = delete;
    NoGrad& operator=(const NoGrad&) = delete;
    // Whether a NoGrad lives on this thread.
    static bool active();
};

// d(loss)/d(param) for each param, without touching any tensor's accumulated gradient. loss
// has one element; a param is any tensor whose graph node the loss reads (a leaf, or an
// intermediate result); one the loss does not depend on gets zeros.
std::vector<Tensor> gradients(const Tensor& loss, const std::vector<Tensor>& params,
                              std::source_location loc = std::source_location::current());

// backward() and gradients() record the gradient graph a walk builds, per structure of the loss's
// graph, and rebuild it directly for a graph of the same structure (a training loop's next step):
// the same nodes, without applying the rules again. Bounded by TEMPURA_CACHE_MB (least recently
// used first out); clear_caches() empties it. Its counters since the start of the process:
struct GradCacheStats {
    size_t entries = 0;  // recorded walks held now
    size_t replayed = 0; // walks answered from a record
    size_t recorded = 0; // walks run and recorded
};
GradCacheStats grad_cache_stats();

// ---- operators: NumPy broadcasting; a scalar operand takes the tensor's dtype -----------------
// An operator cannot take a defaulted argument, so the user's line reaches it through an operand:
// a Tensor converts implicitly to TensorAt, whose constructor's defaulted source_location is
// filled in where the operator is used (as UOp's `Here`).
struct TensorAt {
    const Tensor& t;
    std::source_location loc;
    TensorAt(const Tensor& t_, std::source_location l = std::source_location::current())
        : t(t_), loc(l) {}
};
// The same for the target of a compound assignment (`x += 1.f`).
struct TensorRefAt {
    Tensor& t;
    std::source_location loc;
    TensorRefAt(Tensor& t_, std::source_location l = std::source_location::current())
        : t(t_), loc(l) {}
};
Tensor operator+(TensorAt a, const Tensor& b);
Tensor operator-(TensorAt a, const Tensor& b);
Tensor operator*(TensorAt a, const Tensor& b);
Tensor operator/(TensorAt a, const Tensor& b); // FDIV on floats, IDIV on integers
Tensor operator<(TensorAt a, const Tensor& b);
Tensor operator<=(TensorAt a, const Tensor& b);
Tensor operator>(TensorAt a, const Tensor& b);
Tensor operator>=(TensorAt a, const Tensor& b);
// == and != take both operands as TensorAt: C++20 also tries them with the operands reversed,
// and only equal conversions on both sides leave the written order the better match.
Tensor operator==(TensorAt a, TensorAt b);
Tensor operator!=(TensorAt a, TensorAt b);
Tensor operator-(TensorAt a);
Tensor operator!(TensorAt a); // logical not of a bool tensor
// Integers: % takes the divisor's sign and floor_div rounds down, as Python (floats: fmod-based
// % with the divisor's sign, floor(a / b)). Bitwise ops on integers and bools; shifts on
// integers (a shift by the width or more gives 0, or the sign for >> of a negative).
Tensor operator%(TensorAt a, const Tensor& b);
Tensor floor_div(const Tensor& a, const Tensor& b,
                 std::source_location loc = std::source_location::current());
Tensor operator&(TensorAt a, const Tensor& b);
Tensor operator|(TensorAt a, const Tensor& b);
Tensor operator^(TensorAt a, const Tensor& b);
Tensor operator~(TensorAt a); // bitwise not; logical not on bools
Tensor operator<<(TensorAt a, const Tensor& b);
Tensor operator>>(TensorAt a, const Tensor& b);
// Logical ops on any dtype (nonzero is true) -> Bool.
Tensor logical_and(const Tensor& a, const Tensor& b,
                   std::source_location loc = std::source_location::current());
Tensor logical_or(const Tensor& a, const Tensor& b,
                  std::source_location loc = std::source_location::current());
Tensor logical_not(const Tensor& a, std::source_location loc = std::source_location::current());

// Random numbers: sets the seed (the Threefry key) and restarts the stream. The seed is 0 until
// this is called, so a program draws the same numbers on every run.
void manual_seed(uint64_t seed);
// Threefry-2x32 with 20 rounds (Random123's), elementwise on UInt32 tensors that broadcast:
// {x0, x1} for counter (c0, c1) and key (k0, k1). Tensor::rand and friends are built on it.
std::pair<Tensor, Tensor> threefry2x32(const Tensor& c0, const Tensor& c1, const Tensor& k0,
                                       const Tensor& k1,
                                       std::source_location loc = std::source_location::current());

// where(cond, a, b): elementwise cond ? a : b, all three broadcast together; cond is bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b,
             std::source_location loc = std::source_location::current());
Tensor maximum(const Tensor& a, const Tensor& b,
               std::source_location loc = std::source_location::current());
Tensor minimum(const Tensor& a, const Tensor& b,
               std::source_location loc = std::source_location::current());

#define TEMPURA_TENSOR_SCALAR_OP(sym)                                                              \
    template <Number T>                                                                            \
    Tensor operator sym(TensorAt a, T b) {                                                         \
        const UserCall site(a.loc);                                                                \
        return a.t sym Tensor::full(Shape{}, b, a.t.dtype());                                      \
    }                                                                                              \
    template <Number T>                                                                            \
    Tensor operator sym(T a, TensorAt b) {                                                         \
        const UserCall site(b.loc);                                                                \
        return Tensor::full(Shape{}, a, b.t.dtype()) sym b.t;                                      \
    }
TEMPURA_TENSOR_SCALAR_OP(+)
TEMPURA_TENSOR_SCALAR_OP(-)
TEMPURA_TENSOR_SCALAR_OP(*)
TEMPURA_TENSOR_SCALAR_OP(/)
TEMPURA_TENSOR_SCALAR_OP(<)
TEMPURA_TENSOR_SCALAR_OP(<=)
TEMPURA_TENSOR_SCALAR_OP(>)
TEMPURA_TENSOR_SCALAR_OP(>=)
TEMPURA_TENSOR_SCALAR_OP(==)
TEMPURA_TENSOR_SCALAR_OP(!=)
TEMPURA_TENSOR_SCALAR_OP(%)
TEMPURA_TENSOR_SCALAR_OP(&)
TEMPURA_TENSOR_SCALAR_OP(|)
TEMPURA_TENSOR_SCALAR_OP(^)
TEMPURA_TENSOR_SCALAR_OP(<<)
TEMPURA_TENSOR_SCALAR_OP(>>)
#undef TEMPURA_TENSOR_SCALAR_OP

template <Number T>
Tensor floor_div(const Tensor& a, T b, std::source_location loc = std::source_location::current()) {
    const UserCall site(loc);
    return floor_div(a, Tensor::full(Shape{}, b, a.dtype()));
}
template <Number T>
Tensor floor_div(T a, const Tensor& b, std::source_location loc = std::source_location::current()) {
    const UserCall site(loc);
    return floor_div(Tensor::full(Shape{}, a, b.dtype()), b);
}

template <Number T>
Tensor where(const Tensor& cond, const Tensor& a, T b,
             std::source_location loc = std::source_location::current()) {
    const UserCall site(loc);
    return where(cond, a, Tensor::full(Shape{}, b, a.dtype()));
}
template <Number T>
Tensor where(const Tensor& cond, T a, const Tensor& b,
             std::source_location loc = std::source_location::current()) {
    const UserCall site(loc);
    return where(cond, Tensor::full(Shape{}, a, b.dtype()), b);
}

// Realizes several tensors in one schedule, each in place: work their graphs share is computed
// once, and tensors of the same shape that do not read one another through a third kernel are
// computed by one kernel (`tempura::realize({mx, sum})` for `x.max(1)` and `x.sum(1)` reads x
// once). Realized tensors are left as they are; each one's kernels() lists the whole schedule.
void realize(const std::vector<std::reference_wrapper<Tensor>>& tensors);
inline void realize(std::initializer_list<std::reference_wrapper<Tensor>> tensors) {
    realize(std::vector<std::reference_wrapper<Tensor>>(tensors));
}

inline Tensor& operator+=(Tensor& a, TensorAt b) {
    const UserCall site(b.loc);
    return a = a + b.t;
}
inline Tensor& operator-=(Tensor& a, TensorAt b) {
    const UserCall site(b.loc);
    return a = a - b.t;
}
inline Tensor& operator*=(Tensor& a, TensorAt b) {
    const UserCall site(b.loc);
    return a = a * b.t;
}
inline Tensor& operator/=(Tensor& a, TensorAt b) {
    const UserCall site(b.loc);
    return a = a / b.t;
}
template <Number T>
Tensor& operator+=(TensorRefAt a, T b) {
    const UserCall site(a.loc);
    return a.t = a.t + b;
}
template <Number T>
Tensor& operator-=(TensorRefAt a, T b) {
    const UserCall site(a.loc);
    return a.t = a.t - b;
}
template <Number T>
Tensor& operator*=(TensorRefAt a, T b) {
    const UserCall site(a.loc);
    return a.t = a.t * b;
}
template <Number T>
Tensor& operator/=(TensorRefAt a, T b) {
    const UserCall site(a.loc);
    return a.t = a.t / b;
}

} // namespace tempura
