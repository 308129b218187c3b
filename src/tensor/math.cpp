// The elementwise ops real models reach for beyond the basic ones of tensor.cpp: pow, the
// activations, rounding, the hyperbolic and inverse trigonometric functions, Python's integer
// % and //, bitwise and logical ops. Each is a composition of the IR's ALU ops (POW has its own
// decomposition in codegen), so it runs in the same fused kernels and vectorizes with no libm
// call; the comments state the identities and why each form is the accurate one.
#include <cmath>
#include <limits>
#include <numbers>

#include "tempura/error.hpp"
#include "tempura/tensor/tensor.hpp"
#include "tensor_impl.hpp"

namespace tempura {

using detail::binary;
using detail::check_arith;
using detail::check_float;
using detail::scalar_like;
using detail::unary;
using detail::with_derivative;

namespace {

Tensor k(const Tensor& x, double v) { return scalar_like(x, v); }

// e^x - 1 without cancellation near 0 (Kahan): with u = e^x rounded, (u - 1) * x / log(u) is
// accurate because log(u) sees the same rounding as u - 1. u == 1 means |x| < 2^-25: x itself.
Tensor expm1(const Tensor& x) {
    const Tensor u = x.exp();
    const Tensor one = k(x, 1.0);
    const Tensor d = u - one;
    const Tensor r = where(u == one, x, d * x / u.log());
    // u = inf (x large): d * x / log(u) would be inf * x / inf = NaN; u - 1 = inf is right.
    // u - 1 = -1 (x very negative): d / log(u) is -1 / -inf * x = 0 * x; -1 is right.
    return where((u == k(x, std::numeric_limits<double>::infinity())) | (d == k(x, -1.0)), d, r);
}

// log(1 + e) for e >= 0 without losing a tiny e: with u = 1 + e rounded, log(u) * e / (u - 1)
// (Goldberg); u == 1 means e is below half an ulp of 1: e itself.
Tensor log1p_nonneg(const Tensor& e) {
    const Tensor one = k(e, 1.0);
    const Tensor u = one + e;
    const Tensor inf = k(e, std::numeric_limits<double>::infinity());
    return where(u == one, e, where(u == inf, u, u.log() * e / (u - one)));
}

// -1, 0 or +1 as the sign bit says (+1 for +0 and positive NaN), for copying a sign onto a
// magnitude.
Tensor sign_of(const Tensor& x) { return where(x < k(x, 0.0), k(x, -1.0), k(x, 1.0)); }

Tensor bool_of(const Tensor& x) {
    if (x.dtype().is_bool()) return x;
    return x != k(x, 0.0);
}

void check_int_or_bool(const std::string& op, const Tensor& x) {
    if (x.dtype().is_float()) fail(op, "needs an integer or bool tensor, got " + x.dtype().name());
}

void check_int(const std::string& op, const Tensor& x) {
    if (x.dtype().is_float() || x.dtype().is_bool())
        fail(op, "needs an integer tensor, got " + x.dtype().name());
}

} // namespace

// ---- pow ---------------------------------------------------------------------------------------

Tensor Tensor::pow(const Tensor& exponent, std::source_location loc) const {
    const UserCall site(loc);
    check_arith("pow", *this);
    if (detail::is_16bit_float(*this) && exponent.dtype() == dtype())
        return cast(DType::Float32).pow(exponent.cast(DType::Float32)).cast(dtype());
    return binary("pow", Op::Pow, *this, exponent);
}

Tensor Tensor::pow(double e, std::source_location loc) const {
    const UserCall site(loc);
    check_arith("pow", *this);
    const bool integral = std::trunc(e) == e && std::fabs(e) < 9.0e15;
    if (!dtype().is_float() && !integral)
        fail("pow", "an integer tensor needs an integer exponent, got " + std::to_string(e));
    // Exact products for the common small exponents (and faster than 2^(y log2 x)).
    if (e == 1.0) return *this;
    if (e == 2.0) return *this * *this;
    if (e == 3.0) return *this * *this * *this;
    if (dtype().is_float()) {
        if (e == 0.5) return sqrt();
        if (e == -0.5) return rsqrt();
        if (e == -1.0) return reciprocal();
        if (e == -2.0) return (*this * *this).reciprocal();
        return pow(k(*this, e));
    }
    return pow(TensorAccess::scalar_int(dtype(), static_cast<int64_t>(e)));
}

Tensor Tensor::rsqrt(std::source_location loc) const {
    const UserCall site(loc);
    check_float("rsqrt", *this);
    return sqrt().reciprocal();
}

// ---- activations -------------------------------------------------------------------------------

// Each activation states its derivative (with_derivative), in PyTorch's form: its building
// blocks are never differentiated, so no NaN comes from their chain rule (0 * inf) or from a
// branch that a `where` inside them did not take; ties (relu at 0, clip at a bound) follow
// PyTorch's conventions.

Tensor Tensor::gelu(std::string_view approximate, std::source_location loc) const {
    const UserCall site(loc);
    check_float("gelu", *this);
    const bool tanh_form = approximate == "tanh";
    if (!tanh_form && approximate != "none")
        fail("gelu",
             "approximate must be \"none\" or \"tanh\", got \"" + std::string(approximate) + "\"");
    if (detail::is_16bit_float(*this))
        return detail::in_float32(*this, [&](const Tensor& x) { return x.gelu(approximate); });
    const Tensor& x = *this;
    const Tensor half = k(x, 0.5), one = k(x, 1.0), zero = k(x, 0.0);
    if (tanh_form) {
        // x/2 (1 + tanh(c (x + a x^3))), c = sqrt(2/pi), a = 0.044715
        const double c = std::sqrt(2.0 / std::numbers::pi), a = 0.044715;
        const Tensor t = (k(x, c) * (x + k(x, a) * x * x * x)).tanh();
        return with_derivative(half * x * (one + t), x, [&] {
            // (1 + t)/2 + x/2 (1 - t^2) c (1 + 3a x^2). Past x^2 = 400 tanh is +-1 and x^2 may
            // overflow: the second term is 0 there, not 0 * inf.
            const Tensor x2 = x * x;
            const Tensor second = half * x * (one - t * t) * k(x, c) * (one + k(x, 3 * a) * x2);
            return half * (one + t) + where(x2 < k(x, 400.0), second, zero);
        });
    }
    const Tensor cdf = half * (one + (x * k(x, std::numbers::sqrt2 / 2)).erf());
    return with_derivative(x * cdf, x, [&] {
        // Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi); x phi(x) is 0 past x^2 = 200
        // (not inf * 0 at x = inf).
        const Tensor x2 = x * x;
        const Tensor pdf =
            (x2 * k(x, -0.5)).exp() * k(x, 0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2);
        return cdf + where(x2 < k(x, 200.0), x * pdf, zero);
    });
}

Tensor Tensor::silu(std::source_location loc) const {
    const UserCall site(loc);
    check_float("silu", *this);
    const Tensor s = sigmoid();
    const Tensor one = k(*this, 1.0);
    // s (1 + x (1 - s))
    return with_derivative(*this * s, *this, [&] { return s * (one + *this * (one - s)); });
}

Tensor Tensor::softplus(std::source_location loc) const {
    const UserCall site(loc);
    check_float("softplus", *this);
    if (detail::is_16bit_float(*this))
        return detail::in_float32(*this, [&](const Tensor& x) { return x.softplus(); });
    // log(1 + e^x) = max(x, 0) + log(1 + e^-|x|): e^-|x| <= 1 never overflows, and log1p keeps
    // the tiny values of very negative x. Its derivative is sigmoid(x).
    const Tensor y =
        binary("softplus", Op::Max, *this, k(*this, 0.0)) + log1p_nonneg((-abs()).exp());
    return with_derivative(y, *this, [&] { return sigmoid(); });
}

Tensor Tensor::mish(std::source_location loc) const {
    const UserCall site(loc);
    check_float("mish", *this);
    if (detail::is_16bit_float(*this))
        return detail::in_float32(*this, [&](const Tensor& x) { return x.mish(); });
    const Tensor t = softplus().tanh();
    // tanh(softplus(x)) + x sigmoid(x) (1 - tanh(softplus(x))^2)
    return with_derivative(*this * t, *this,
                           [&] { return t + *this * sigmoid() * (k(*this, 1.0) - t * t); });
}

Tensor Tensor::leaky_relu(double slope, std::source_location loc) const {
    const UserCall site(loc);
    check_arith("leaky_relu", *this);
    const Tensor pos = *this > k(*this, 0.0);
    return with_derivative(where(pos, *this, *this * k(*this, slope)), *this,
                           [&] { return where(pos, k(*this, 1.0), k(*this, slope)); });
}

Tensor Tensor::elu(double alpha, std::source_location loc) const {
    const UserCall site(loc);
    check_float("elu", *this);
    if (detail::is_16bit_float(*this))
        return detail::in_float32(*this, [&](const Tensor& x) { return x.elu(alpha); });
    const Tensor pos = *this > k(*this, 0.0);
    // 1 for x > 0, alpha e^x otherwise (alpha at 0, as PyTorch)
    return with_derivative(where(pos, *this, k(*this, alpha) * expm1(*this)), *this,
                           [&] { return where(pos, k(*this, 1.0), k(*this, alpha) * exp()); });
}

Tensor Tensor::clip(double lo, double hi, std::source_location loc) const {
    const UserCall site(loc);
    check_arith("clip", *this);
    if (std::isnan(lo) || std::isnan(hi))
        fail("clip",
             "bounds must be numbers, got " + std::to_string(lo) + " and " + std::to_string(hi));
    // 1 inside [lo, hi], bounds included (PyTorch's clamp)
    return with_derivative(maximum(k(*this, lo)).minimum(k(*this, hi)), *this, [&] {
        return logical_and(*this >= k(*this, lo), *this <= k(*this, hi));
    });
}

Tensor Tensor::relu6(std::source_location loc) const {
    const UserCall site(loc);
    check_arith("relu6", *this);
    const Tensor zero = k(*this, 0.0), six = k(*this, 6.0);
    // 1 strictly inside (0, 6) (PyTorch's hardtanh)
    return with_derivative(maximum(zero).minimum(six), *this,
                           [&] { return logical_and(*this > zero, *this < six); });
}

Tensor Tensor::hardsigmoid(std::source_location loc) const {
    const UserCall site(loc);
    check_float("hardsigmoid", *this);
    const Tensor three = k(*this, 3.0);
    const Tensor y = (*this + three).maximum(k(*this, 0.0)).minimum(k(*this, 6.0)) / k(*this, 6.0);
    // 1/6 strictly inside (-3, 3)
    return with_derivative(y, *this, [&] {
        return where(logical_and(*this > -three, *this < three), k(*this, 1.0 / 6.0),
                     k(*this, 0.0));
    });
}

Tensor Tensor::hardswish(std::source_location loc) const {
    const UserCall site(loc);
    check_float("hardswish", *this);
    const Tensor three = k(*this, 3.0);
    const Tensor r6 = (*this + three).maximum(k(*this, 0.0)).minimum(k(*this, 6.0));
    // 0 below -3, x/3 + 1/2 from -3 up to 3, 1 from 3 on (PyTorch's one-sided choices)
    return with_derivative(*this * r6 / k(*this, 6.0), *this, [&] {
        return where(*this < -three, k(*this, 0.0),
                     where(*this < three, *this / three + k(*this, 0.5), k(*this, 1.0)));
    });
}

// ---- rounding ----------------------------------------------------------------------------------

Tensor Tensor::trunc(std::source_location loc) const {
    const UserCall site(loc);
    check_arith("trunc", *this);
    if (!dtype().is_float()) return *this;
    return unary(Op::Trunc, *this);
}

Tensor Tensor::floor(std::source_location loc) const {
    const UserCall site(loc);
    check_arith("floor", *this);
    if (!dtype().is_float()) return *this;
    const Tensor t = trunc();
    return where(*this < t, t - k(*this, 1.0), t);
}

Tensor Tensor::ceil(std::source_location loc) const {
    const UserCall site(loc);
    check_arith("ceil", *this);
    if (!dtype().is_float()) return *this;
    const Tensor t = trunc();
    return where(*this > t, t + k(*this, 1.0), t);
}

Tensor Tensor::round(std::source_location loc) const {
    const UserCall site(loc);
    check_arith("round", *this);
    if (!dtype().is_float()) return *this;
    // From trunc(x), whose distance to x is exact: away from 0 past one half, and at one half
    // only when trunc(x) is odd (ties to even). Not floor(x + 0.5): the sum rounds
    // (0.49999997f + 0.5f is 1).
    const Tensor t = trunc();
    const Tensor d = (*this - t).abs();
    const Tensor half = k(*this, 0.5);
    const Tensor odd = (t * half).trunc() != t * half;
    return where((d > half) | ((d == half) & odd), t + sign_of(*this), t);
}

Tensor Tensor::sign(std::source_location loc) const {
    const UserCall site(loc);
    check_arith("sign", *this);
    const Tensor zero = k(*this, 0.0), one = k(*this, 1.0);
    if (dtype().is_unsigned()) return where(*this > zero, one, zero);
    // Floats: where neither comparison holds (signed zeros, NaN) x itself; flat everywhere
    // (the gradient is 0 at 0 too, not the x-itself branch's 1).
    return with_derivative(
        where(*this > zero, one,
              where(*this < zero, k(*this, -1.0), dtype().is_float() ? *this : zero)),
        *this, [&] { return zero; });
}

Tensor Tensor::isnan(std::source_location loc) const {
    const UserCall site(loc);
    if (!dtype().is_float()) return Tensor::full(shape_, false);
    return *this != *this;
}

Tensor Tensor::isinf(std::source_location loc) const {
    const UserCall site(loc);
    if (!dtype().is_float()) return Tensor::full(shape_, false);
    return abs() == k(*this, std::numeric_limits<double>::infinity());
}

// ---- trigonometric and hyperbolic ------------------------------------------------------------

Tensor Tensor::tanh(std::source_location loc) const {
    const UserCall site(loc);
    check_float("tanh", *this);
    if (detail::is_16bit_float(*this))
        return detail::in_float32(*this, [&](const Tensor& x) { return x.tanh(); });
    // E / (E + 2) with E = e^(2|x|) - 1: no cancellation near 0 (2 sigmoid(2x) - 1 lost every
    // digit there). Past the point where tanh rounds to 1 (9.1 in float32, 19.1 in float64, 5
    // in the 16-bit floats), 1: E / (E + 2) would meet inf / inf.
    const Tensor a = abs();
    const Tensor e = expm1(a * k(*this, 2.0));
    const double one_from = dtype().bits() == 64 ? 19.1 : dtype().bits() == 32 ? 9.1 : 5.0;
    const Tensor t = where(a > k(*this, one_from), k(*this, 1.0), e / (e + k(*this, 2.0)));
    const Tensor y = where(*this < k(*this, 0.0), -t, t);
    return with_derivative(y, *this, [&] { return k(*this, 1.0) - y * y; }); // 1 - tanh^2
}

Tensor Tensor::tan(std::source_location loc) const {
    const UserCall site(loc);
    check_float("tan", *this);
    if (detail::is_16bit_float(*this))
        return detail::in_float32(*this, [&](const Tensor& x) { return x.tan(); });
    const Tensor y = sin() / cos(); // each within 1 ulp over the whole range
    return with_derivative(y, *this, [&] { return k(*this, 1.0) + y * y; }); // 1 + tan^2
}

Tensor Tensor::sinh(std::source_location loc) const {
    const UserCall site(loc);
    check_float("sinh", *this);
    if (detail::is_16bit_float(*this))
        return detail::in_float32(*this, [&](const Tensor& x) { return x.sinh(); });
    const Tensor a = abs();
    // |x| < 1: (E + E / (E + 1)) / 2 with E = e^|x| - 1, no cancellation near 0.
    const Tensor e = expm1(a);
    const Tensor small = k(*this, 0.5) * (e + e / (e + k(*this, 1.0)));
    // |x| >= 1: (e^|x| - e^-|x|) / 2 with e^|x| = t * t, t = e^(|x|/2): neither overflows
    // before sinh does (e^|x| alone would at |x| = 88.7, sinh only at 89.4).
    const Tensor t = (a * k(*this, 0.5)).exp();
    const Tensor big = k(*this, 0.5) * t * t - k(*this, 0.5) / t / t;
    // Its derivative cosh x: the chain rule through expm1 and |x| gave NaN at 0 (0 / 0).
    return with_derivative(sign_of(*this) * where(a < k(*this, 1.0), small, big), *this,
                           [&] { return cosh(); });
}

Tensor Tensor::cosh(std::source_location loc) const {
    const UserCall site(loc);
    check_float("cosh", *this);
    if (detail::is_16bit_float(*this))
        return detail::in_float32(*this, [&](const Tensor& x) { return x.cosh(); });
    // (e^|x| + e^-|x|) / 2 with e^|x| = t * t, t = e^(|x|/2) (see sinh).
    const Tensor t = (abs() * k(*this, 0.5)).exp();
    return with_derivative(k(*this, 0.5) * t * t + k(*this, 0.5) / t / t, *this,
                           [&] { return sinh(); });
}

Tensor Tensor::atan(std::source_location loc) const {
    const UserCall site(loc);
    check_float("atan", *this);
    if (detail::is_16bit_float(*this))
        return detail::in_float32(*this, [&](const Tensor& x) { return x.atan(); });
    // Cephes atanf: reduce |x| to [0, tan(pi/8)] by atan(x) = pi/2 + atan(-1/x) above
    // tan(3pi/8) and pi/4 + atan((x-1)/(x+1)) above tan(pi/8), then an odd polynomial.
    const Tensor a = abs();
    const Tensor one = k(*this, 1.0);
    const Tensor big = a > k(*this, 2.414213562373095), mid = a > k(*this, 0.4142135623730950);
    const Tensor r = where(big, -one / a, where(mid, (a - one) / (a + one), a));
    const Tensor base = where(big, k(*this, std::numbers::pi / 2),
                              where(mid, k(*this, std::numbers::pi / 4), k(*this, 0.0)));
    const Tensor z = r * r;
    const Tensor p = ((k(*this, 8.05374449538e-2) * z - k(*this, 1.38776856032e-1)) * z +
                      k(*this, 1.99777106478e-1)) *
                         z -
                     k(*this, 3.33329491539e-1);
    const Tensor y = base + (p * z * r + r);
    // The sign back on (atan is odd; x itself at +-0); NaN stays NaN through every step.
    const Tensor out = where(*this < k(*this, 0.0), -y, where(*this == k(*this, 0.0), *this, y));
    // 1 / (1 + x^2): 0 at x = 1e30 (x^2 = inf), where the polynomial's chain rule met inf * 0.
    return with_derivative(out, *this,
                           [&] { return (k(*this, 1.0) + *this * *this).reciprocal(); });
}

Tensor Tensor::masked_fill(const Tensor& mask, double value, std::source_location loc) const {
    const UserCall site(loc);
    if (!mask.dtype().is_bool())
        fail("masked_fill", "mask must be bool, got " + mask.dtype().name());
    const Shape out = broadcast_shapes(shape_, mask.shape());
    if (out != shape_)
        fail("masked_fill", "mask of shape " + shape_str(mask.shape()) + " does not broadcast to " +
                                shape_str(shape_));
    return where(mask, k(*this, value), *this);
}

// ---- integer division with Python's signs -----------------------------------------------------

Tensor operator%(TensorAt at, const Tensor& b) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    check_arith("mod", a);
    const Tensor r = binary("mod", Op::Mod, a, b); // the dividend's sign (C's % and fmod)
    if (a.dtype().is_unsigned()) return r;
    // A nonzero remainder whose sign differs from the divisor's moves by one divisor.
    const Tensor zero = k(a, 0.0);
    return where((r != zero) & ((r < zero) != (b < zero)), r + b, r);
}

Tensor floor_div(const Tensor& a, const Tensor& b, std::source_location loc) {
    const UserCall site(loc);
    check_arith("floor_div", a);
    if (a.dtype().is_float()) return (a / b).floor();
    const Tensor q = binary("floor_div", Op::Idiv, a, b); // truncated
    if (a.dtype().is_unsigned()) return q;
    const Tensor zero = k(a, 0.0);
    const Tensor r = binary("floor_div", Op::Mod, a, b);
    return where((r != zero) & ((r < zero) != (b < zero)), q - k(a, 1.0), q);
}

// ---- bitwise and logical -------------------------------------------------------------------

Tensor operator&(TensorAt at, const Tensor& b) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    check_int_or_bool("and", a);
    return binary("and", Op::And, a, b);
}

Tensor operator|(TensorAt at, const Tensor& b) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    check_int_or_bool("or", a);
    return binary("or", Op::Or, a, b);
}

Tensor operator^(TensorAt at, const Tensor& b) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    check_int_or_bool("xor", a);
    return binary("xor", Op::Xor, a, b);
}

Tensor operator~(TensorAt at) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    check_int_or_bool("invert", a);
    if (a.dtype().is_bool()) return a.logical_not();
    return detail::bit_not(a);
}

Tensor operator<<(TensorAt at, const Tensor& b) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    check_int("shl", a);
    return binary("shl", Op::Shl, a, b);
}

Tensor operator>>(TensorAt at, const Tensor& b) {
    const UserCall site(at.loc);
    const Tensor& a = at.t;
    check_int("shr", a);
    return binary("shr", Op::Shr, a, b);
}

Tensor logical_and(const Tensor& a, const Tensor& b, std::source_location loc) {
    const UserCall site(loc);
    return binary("logical_and", Op::And, bool_of(a), bool_of(b));
}

Tensor logical_or(const Tensor& a, const Tensor& b, std::source_location loc) {
    const UserCall site(loc);
    return binary("logical_or", Op::Or, bool_of(a), bool_of(b));
}

Tensor logical_not(const Tensor& a, std::source_location loc) {
    const UserCall site(loc);
    return bool_of(a).logical_not();
}

} // namespace tempura
