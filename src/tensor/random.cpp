// Random numbers: Threefry-2x32-20 (Salmon et al., Random123) as a composition of UInt32 tensor
// ops, so the numbers are computed by the kernel that consumes them, fused with it, and are the
// same on every device. The key and the call's number come from a small buffer, so the graph,
// and with it the compiled plan, is the same for every call.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <string>

#include "convert.hpp"
#include "tempura/error.hpp"
#include "tempura/tensor/nn.hpp"
#include "tensor_impl.hpp"

namespace tempura {

namespace {

struct Stream {
    std::mutex mu;
    uint64_t seed = 0;
    uint64_t calls = 0;
};

Stream& stream() {
    static Stream s;
    return s;
}

std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

Tensor u32(uint32_t v) { return Tensor::full(Shape{}, v, DType::UInt32); }

Tensor rotl(const Tensor& x, uint32_t r) { return (x << r) | (x >> (32 - r)); }

struct Bits {
    Tensor x0, x1; // UInt32, the requested shape
};

// Two words of 32 random bits per element of `shape`: counter (element index, call), key seed.
Bits draw(const char* op, const Shape& shape) {
    detail::check_shape(op, shape);
    const int64_t n = numel(shape);
    if (n > (int64_t{1} << 32))
        fail(op, "draws at most 2^32 numbers per call, got " + std::to_string(n));
    uint64_t seed = 0, call = 0;
    {
        Stream& s = stream();
        std::lock_guard<std::mutex> lock(s.mu);
        if (s.calls >> 32) fail(op, "the stream of 2^32 calls is used up: call manual_seed");
        seed = s.seed;
        call = s.calls++;
    }
    const Tensor key = Tensor::from_vector(std::vector<uint32_t>{static_cast<uint32_t>(seed),
                                                                 static_cast<uint32_t>(seed >> 32),
                                                                 static_cast<uint32_t>(call)},
                                           Shape{3});
    const auto word = [&](int64_t i) { return key.shrink({{i, i + 1}}).reshape(Shape{}); };
    const Tensor index = detail::iota(n, DType::UInt32);
    auto [x0, x1] = threefry2x32(index.reshape(shape), word(2), word(0), word(1));
    return {x0, x1};
}

int significand_bits(const char* op, DType dt) {
    switch (dt.scalar) {
    case Scalar::Float16: return 11;
    case Scalar::BFloat16: return 8;
    case Scalar::Float32: return 24;
    case Scalar::Float64: return 53;
    default: fail(op, "needs a float dtype, got " + dt.name());
    }
}

// Uniform in [0, 1) with the dtype's full precision: the top p bits times 2^-p, exact.
Tensor unit(const char* op, const Bits& bits, DType dt, bool second = false) {
    const int p = significand_bits(op, dt);
    const Tensor& x = second ? bits.x1 : bits.x0;
    if (p <= 32) return (x >> static_cast<uint32_t>(32 - p)).cast(dt) * std::ldexp(1.0, -p);
    // Float64: 32 bits of x0 and 21 of x1 (randn's second uniform is not drawn for float64).
    const Tensor w = (bits.x0.cast(DType::UInt64) << uint64_t{21}) |
                     (bits.x1 >> uint32_t{11}).cast(DType::UInt64);
    return w.cast(dt) * std::ldexp(1.0, -p);
}

} // namespace

namespace detail {

Tensor iota(int64_t n, DType dtype) {
    const int64_t b = std::max<int64_t>(1, std::min<int64_t>(n, 1024));
    const int64_t a = (n + b - 1) / b;
    const Tensor hi =
        (Tensor::arange(a, dtype) * TensorAccess::scalar_int(dtype, b)).reshape({a, 1});
    const Tensor lo = Tensor::arange(b, dtype).reshape({1, b});
    const Tensor index = (hi + lo).reshape({a * b});
    return a * b == n ? index : index.shrink({{0, n}});
}

} // namespace detail

void manual_seed(uint64_t seed) {
    Stream& s = stream();
    std::lock_guard<std::mutex> lock(s.mu);
    s.seed = seed;
    s.calls = 0;
}

std::pair<Tensor, Tensor> threefry2x32(const Tensor& c0, const Tensor& c1, const Tensor& k0,
                                       const Tensor& k1, std::source_location loc) {
    const UserCall site(loc);
    for (const Tensor* t : {&c0, &c1, &k0, &k1})
        if (t->dtype() != DType::UInt32)
            fail("threefry2x32", "needs UInt32 tensors, got " + t->dtype().name());
    static constexpr std::array<uint32_t, 8> rot{13, 15, 26, 6, 17, 29, 16, 24};
    const std::array<Tensor, 3> ks{k0, k1, k0 ^ k1 ^ u32(0x1BD11BDA)};
    Tensor x0 = c0 + k0, x1 = c1 + k1;
    for (uint32_t r = 0; r < 20; ++r) {
        x0 = x0 + x1;
        x1 = rotl(x1, rot[r % 8]) ^ x0;
        if (r % 4 == 3) { // key injection s after every fourth round
            const uint32_t s = r / 4 + 1;
            x0 = x0 + ks[s % 3];
            x1 = x1 + ks[(s + 1) % 3] + u32(s);
        }
    }
    // Both words take the broadcast shape of all four inputs.
    const Tensor zero = u32(0) * c0 * c1 * k0 * k1;
    return {x0 + zero, x1 + zero};
}

Tensor Tensor::rand(Shape shape, DType dtype, std::source_location loc) {
    const UserCall site(loc);
    significand_bits("rand", dtype);
    return unit("rand", draw("rand", shape), dtype);
}

Tensor Tensor::randn(Shape shape, DType dtype, std::source_location loc) {
    const UserCall site(loc);
    significand_bits("randn", dtype);
    // Box-Muller in float32 (float64 for float64): sqrt(-2 ln u1) cos(2 pi u2), u1 in (0, 1].
    const DType ct = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
    const Bits bits = draw("randn", shape);
    Tensor u1, u2;
    if (ct == DType::Float64) {
        // 53 bits each need both words: a second draw gives the second uniform.
        u1 = unit("randn", bits, ct);
        u2 = unit("randn", draw("randn", shape), ct);
    } else {
        u1 = unit("randn", bits, ct);
        u2 = unit("randn", bits, ct, true);
    }
    const Tensor r = ((1.0 - u1).log() * -2.0).sqrt();
    return (r * (u2 * (2 * M_PI)).cos()).cast(dtype);
}

Tensor Tensor::randint(int64_t lo, int64_t hi, Shape shape, DType dtype, std::source_location loc) {
    const UserCall site(loc);
    if (!dtype.is_int() || dtype.is_bool())
        fail("randint", "needs an integer dtype, got " + dtype.name());
    if (hi <= lo)
        fail("randint",
             "needs lo < hi, got [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
    const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    if (range > (uint64_t{1} << 32))
        fail("randint", "range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                            ") holds more than 2^32 values");
    if (lo < dtype.min() || hi - 1 > dtype.max())
        fail("randint", "range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                            ") does not fit " + dtype.name());
    // floor(bits * range / 2^32): Lemire's multiply-shift, bias at most range / 2^32.
    const Bits bits = draw("randint", shape);
    const Tensor v = (bits.x0.cast(DType::UInt64) * range) >> uint64_t{32};
    return (v.cast(DType::Int64) + lo).cast(dtype);
}

Tensor Tensor::uniform(Shape shape, double lo, double hi, DType dtype, std::source_location loc) {
    const UserCall site(loc);
    if (!(std::isfinite(lo) && std::isfinite(hi) && lo <= hi))
        fail("uniform", "needs finite lo <= hi, got [" + num(lo) + ", " + num(hi) + ")");
    // (1 - u) lo + u hi: no overflow where hi - lo would (u and 1 - u are exact); the rounding
    // can still reach hi, so the largest value of the dtype below hi caps it.
    const Tensor u = rand(std::move(shape), dtype);
    const double h = detail::round_float(dtype, hi);
    double below = h;
    if (h >= hi) {
        double step = h != 0 ? std::fabs(h) * 0x1p-60 : 0x1p-1074;
        while ((below = detail::round_float(dtype, h - step)) >= h) step *= 2;
    }
    const Tensor r = (1.0 - u) * lo + u * hi;
    return lo == hi ? r : r.minimum(TensorAccess::scalar(dtype, std::max(below, lo)));
}

Tensor Tensor::normal(Shape shape, double mean, double std, DType dtype, std::source_location loc) {
    const UserCall site(loc);
    if (!(std::isfinite(mean) && std::isfinite(std) && std >= 0))
        fail("normal",
             "needs a finite mean and std >= 0, got mean " + num(mean) + ", std " + num(std));
    return randn(std::move(shape), dtype) * std + mean;
}

namespace nn {

Tensor dropout(const Tensor& x, double p, bool training, std::source_location loc) {
    const UserCall site(loc);
    detail::check_float("dropout", x);
    if (!(p >= 0 && p <= 1)) fail("dropout", "p must lie in [0, 1], got " + num(p));
    if (!training || p == 0) return x;
    if (p == 1) return x * 0.0;
    const auto on = detail::on_device_of(x);
    const Tensor keep = Tensor::rand(x.shape()) >= p;
    return where(keep, x * (1 / (1 - p)), 0.0);
}

} // namespace nn

} // namespace tempura
