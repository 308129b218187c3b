// Transcendental functions as plain ALU ops (no libm call per vector lane, so kernels
// vectorize, and GPU kernels need no library): float32 EXP2 and LOG2 (Cephes polynomials),
// float64 EXP2, LOG2 and ERF, float32 and float64 SIN and COS with full-range argument
// reduction. The decomposition rule groups (lowering_rules.cpp) use them.
#include "codegen/transcendental.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

#include "tempura/error.hpp"

namespace tempura::codegen {

namespace {

// float32 EXP2 and LOG2 as polynomials (Cephes exp2f/log2f, about 1-2 ulp). LLVM would lower its
// intrinsics to one libm call per vector lane after vectorizing; as plain arithmetic they
// vectorize, and the kernels compile several times faster.
struct F32 {
    static UOp c(double v) { return UOp::constant_f(DType::Float32, v); }
    static UOp i(int64_t v) { return UOp::constant(DType::Int32, v); }
    static UOp add(const UOp& a, const UOp& b) { return UOp::alu(Op::Add, {a, b}); }
    static UOp sub(const UOp& a, const UOp& b) { return UOp::alu(Op::Sub, {a, b}); }
    static UOp mul(const UOp& a, const UOp& b) { return UOp::alu(Op::Mul, {a, b}); }
    static UOp lt(const UOp& a, const UOp& b) { return UOp::alu(Op::CmpLt, {a, b}); }
    static UOp sel(const UOp& c, const UOp& t, const UOp& f) {
        return UOp::alu(Op::Where, {c, t, f});
    }
    static UOp to_i(const UOp& a) { return UOp::make(Op::Cast, DType::Int32, {a}); }
    static UOp to_f(const UOp& a) { return UOp::make(Op::Cast, DType::Float32, {a}); }
    static UOp bits_to_f(const UOp& a) { return UOp::make(Op::BitCast, DType::Float32, {a}); }
    static UOp f_to_bits(const UOp& a) { return UOp::make(Op::BitCast, DType::Int32, {a}); }
    // The polynomial with these coefficients (highest power first) at x, by Horner's rule, in
    // x's dtype (float32 or float64).
    static UOp poly(const UOp& x, std::initializer_list<double> coefs) {
        UOp acc;
        for (double k : coefs) {
            const UOp kc = UOp::constant_f(x.dtype(), k);
            acc = acc.is_null() ? kc : add(mul(acc, x), kc);
        }
        return acc;
    }
    // x held to [lo, hi] in x's dtype; a NaN passes (its comparisons are false).
    static UOp clamp(const UOp& x, double lo, double hi) {
        const UOp l = UOp::constant_f(x.dtype(), lo), h = UOp::constant_f(x.dtype(), hi);
        return sel(lt(x, l), l, sel(lt(h, x), h, x));
    }
    // p * 2^n (p float32 with an int32 n in [-252, 254], or float64 with an int64 n in
    // [-2044, 2046]), by two exact powers (each exponent stays normal), p scaled by the first
    // before the second: 2^n itself overflows for n = 128 (float32), where p < 1 brings the
    // product back below the largest float (exp2(127.7)). One rounding, the last.
    static UOp ldexp(const UOp& p, const UOp& n) {
        const bool f64 = p.dtype() == DType::Float64;
        const auto k = [&](int64_t v) { return UOp::constant(n.dtype(), v); };
        const UOp n1 = UOp::alu(Op::Shr, {n, k(1)});
        const UOp n2 = sub(n, n1);
        auto scale = [&](const UOp& e) {
            return UOp::make(Op::BitCast, p.dtype(),
                             {UOp::alu(Op::Shl, {add(e, k(f64 ? 1023 : 127)), k(f64 ? 52 : 23)})});
        };
        return mul(mul(p, scale(n1)), scale(n2));
    }
    // n = round(x) (ties to even) as a float and as an integer (int32 or int64), for |x| below
    // 2^22 (float32) or 2^51 (float64): x + 1.5 * 2^23 (2^52) has the unit as its last bit, so the
    // addition rounds; the integer is the sum's bits less those of the constant, so no
    // float -> int conversion (its saturation costs selects).
    static std::pair<UOp, UOp> round_int(const UOp& x) {
        const bool f64 = x.dtype() == DType::Float64;
        const UOp magic = UOp::constant_f(x.dtype(), f64 ? 0x1.8p52 : 0x1.8p23);
        const UOp big = add(x, magic);
        const DType it = f64 ? DType::Int64 : DType::Int32;
        const UOp ni = sub(UOp::make(Op::BitCast, it, {big}),
                           UOp::constant(it, f64 ? 0x4338000000000000 : 0x4B400000));
        return {sub(big, magic), ni};
    }
    // log2's special values around its result r for x: log2(+inf) = inf, log2(+-0) = -inf,
    // log2(x < 0) = NaN, NaN stays NaN.
    static UOp log2_specials(const UOp& x, const UOp& r) {
        const auto k = [&](double v) { return UOp::constant_f(x.dtype(), v); };
        const double inf = std::numeric_limits<double>::infinity();
        return sel(UOp::alu(Op::CmpEq, {x, k(inf)}), k(inf),
                   sel(UOp::alu(Op::CmpEq, {x, k(0.0)}), k(-inf),
                       sel(lt(x, k(0.0)), k(std::numeric_limits<double>::quiet_NaN()),
                           sel(UOp::alu(Op::CmpNe, {x, x}), x, r))));
    }
};

UOp exp2_f32_impl(const UOp& x0) {
    using F = F32;
    // Clamp so the scale stays in range (2^129 overflows to inf, 2^-151 underflows to 0).
    const UOp x = F::clamp(x0, -151.0, 129.0);
    const auto [n, ni] = F::round_int(x);
    const UOp f = F::sub(x, n); // in [-0.5, 0.5]
    const UOp p = F::add(
        F::mul(F::poly(f, {1.535336188319500e-4, 1.339887440266574e-3, 9.618437357674640e-3,
                           5.550332471162809e-2, 2.402264791363012e-1, 6.931472028550421e-1}),
               f),
        F::c(1.0));
    // A NaN passes both clamps (its comparisons are false) and every step after them: p is NaN,
    // and so is p times any scale. No select for it.
    return F::ldexp(p, ni);
}

UOp log2_f32_impl(const UOp& x0) {
    using F = F32;
    // Denormals are scaled into the normal range first.
    const UOp denormal = F::lt(x0, F::c(1.17549435e-38));
    const UOp x = F::sel(denormal, F::mul(x0, F::c(8388608.0)), x0);
    const UOp bits = F::f_to_bits(x);
    UOp e = F::sub(UOp::alu(Op::And, {UOp::alu(Op::Shr, {bits, F::i(23)}), F::i(255)}), F::i(126));
    e = F::sel(denormal, F::sub(e, F::i(23)), e);
    UOp m =
        F::bits_to_f(UOp::alu(Op::Or, {UOp::alu(Op::And, {bits, F::i(-2139095041)}), // 0x807fffff
                                       F::i(0x3f000000)}));                          // in [0.5, 1)
    const UOp small = F::lt(m, F::c(0.70710678118654752440));
    e = F::sel(small, F::sub(e, F::i(1)), e);
    m = F::sel(small, F::sub(F::add(m, m), F::c(1.0)), F::sub(m, F::c(1.0)));
    const UOp z = F::mul(m, m);
    UOp y = F::mul(F::mul(m, z), F::poly(m, {7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1,
                                             -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                                             2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1}));
    y = F::sub(y, F::mul(F::c(0.5), z));
    const UOp log2ea = F::c(0.44269504088896340735992);
    const UOp r =
        F::add(F::add(F::add(F::add(F::mul(y, log2ea), F::mul(m, log2ea)), y), m), F::to_f(e));
    return F::log2_specials(x0, r);
}

// float32 SIN and COS with full-range argument reduction, as plain integer and float ALU ops
// (no libm call per vector lane, so the kernel vectorizes). |x| = n * pi/2 + r with r in about
// [-pi/4, pi/4], kept as an unevaluated sum rh + rl accurate to 2^-29 relative or better even
// for the float closest to a multiple of pi/2 (|r| >= 2^-29.2 over all floats, by exhaustive
// search, so the reduction needs ~55 bits beyond the quadrant); then a polynomial for sin or
// cos of r picked by the quadrant. Over all 2^32 floats the result is within 0.8 ulp of the
// exact value. The code is as accurate whether or not LLVM contracts a * b + c into an FMA (the
// renderer allows it): every product whose rounding would matter is exact.
struct SinCos {
    using F = F32;
    static UOp u64(uint64_t v) { return UOp::constant(DType::UInt64, static_cast<int64_t>(v)); }
    static UOp i64(int64_t v) { return UOp::constant(DType::Int64, v); }
    static UOp to(DType dt, const UOp& a) { return UOp::make(Op::Cast, dt, {a}); }
    static UOp bits(DType dt, const UOp& a) { return UOp::make(Op::BitCast, dt, {a}); }
    static UOp shl(const UOp& a, const UOp& n) { return UOp::alu(Op::Shl, {a, n}); }
    static UOp shr(const UOp& a, const UOp& n) { return UOp::alu(Op::Shr, {a, n}); }
    static UOp band(const UOp& a, const UOp& b) { return UOp::alu(Op::And, {a, b}); }
    static UOp bor(const UOp& a, const UOp& b) { return UOp::alu(Op::Or, {a, b}); }
    static UOp bxor(const UOp& a, const UOp& b) { return UOp::alu(Op::Xor, {a, b}); }
    static UOp eq(const UOp& a, const UOp& b) { return UOp::alu(Op::CmpEq, {a, b}); }

    // The top 12 of a float's 24 significand bits (the rest zeroed): products of two such
    // halves are exact. Masking, not Veltkamp's split: 4097 * a - a would contract into an FMA.
    static UOp top12(const UOp& a) {
        return F::bits_to_f(band(F::f_to_bits(a), F::i(static_cast<int32_t>(0xfffff000u))));
    }

    // Knuth's TwoSum: s + e == a + b exactly, whatever their magnitudes.
    static std::pair<UOp, UOp> two_sum(const UOp& a, const UOp& b) {
        const UOp s = F::add(a, b);
        const UOp bb = F::sub(s, a);
        return {s, F::add(F::sub(a, F::sub(s, bb)), F::sub(b, bb))};
    }

    struct Reduced {
        UOp n;      // int32: the multiple of pi/2 (only n mod 4 matters)
        UOp rh, rl; // float32: the remainder rh + rl
    };

    // Cody-Waite for |x| < 4096 (n <= 2608 < 2^12): pi/2 = P1 + P2 + P3 + P4 with P1..P3 of 12
    // significant bits, so n * Pk is exact, and P4 a full float; the parts miss pi/2 by 2^-68,
    // n times that is 2^-57, and the sums are kept exact with TwoSum.
    static Reduced cody_waite(const UOp& ax) {
        const UOp nf = UOp::alu(Op::Trunc, {F::add(F::mul(ax, F::c(0x1.45f306p-1)), F::c(0.5))});
        const UOp t = F::sub(ax, F::mul(nf, F::c(0x1.922p+0))); // exact (Sterbenz)
        const auto [s1, e1] = two_sum(t, F::mul(nf, F::c(0x1.2aep-18)));
        const auto [s2, e2] = two_sum(s1, F::mul(nf, F::c(0x1.deap-31)));
        const UOp lo = F::sub(F::add(e1, e2), F::mul(nf, F::c(0x1.184698p-44)));
        const auto [rh, rl] = two_sum(s2, lo);
        return {F::to_i(nf), rh, rl};
    }

    // Payne-Hanek for |x| >= 4096 (any finite float): x = m * 2^E with m the 24-bit integer
    // significand. x * 2/pi mod 4 needs only the bits of 2/pi from 2^-(E-1) on (earlier ones give
    // multiples of 4) and, for 62 fraction bits, the 96 after: the window is cut out of the
    // constant bits of 2/pi with 64-bit shifts, the words picked by the exponent with WHERE.
    // m times the window (three 24x32-bit products) gives x * 2/pi mod 4 in fixed point 2.62.
    static Reduced payne_hanek(const UOp& abits) {
        // 2/pi = 0.a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561b7246e3a...
        // (hexadecimal), after 64 zero bits that cover the exponents whose window starts
        // before the binary point.
        const uint64_t g[] = {0, 0xa2f9836e4e441529, 0xfc2757d1f534ddc0, 0xdb6295993c439041,
                              0xfe5163abdebbc561};
        // The window of |x| with biased exponent e starts at bit e - 88 of g; e >= 139 here
        // (smaller exponents take the Cody-Waite path, clamped so no shift is out of range).
        const UOp e = UOp::alu(Op::Max, {shr(abits, F::i(23)), F::i(139)});
        const UOp p = F::sub(e, F::i(88)); // 51 .. 167
        const UOp k = shr(p, F::i(6));     // the first word: 0 .. 2
        const UOp sh = to(DType::UInt64, band(p, F::i(63)));
        auto word = [&](int first) {
            return F::sel(eq(k, F::i(0)), u64(g[first]),
                          F::sel(eq(k, F::i(1)), u64(g[first + 1]), u64(g[first + 2])));
        };
        const UOp g0 = word(0), g1 = word(1), g2 = word(2);
        // 64 window bits starting `sh` bits into a: (a << sh) | (b >> (64 - sh)), the second
        // shift split so that sh == 0 shifts by 63 and 1, never by 64.
        auto funnel = [&](const UOp& a, const UOp& b) {
            return bor(shl(a, sh), shr(shr(b, u64(1)), UOp::alu(Op::Sub, {u64(63), sh})));
        };
        const UOp hi = funnel(g0, g1), lo = funnel(g1, g2);
        const UOp m =
            to(DType::UInt64, to(DType::UInt32, bor(band(abits, F::i(0x7fffff)), F::i(0x800000))));
        const UOp a = F::mul(m, shr(hi, u64(32)));
        const UOp b = F::mul(m, band(hi, u64(0xffffffff)));
        const UOp c = F::mul(m, shr(lo, u64(32)));
        // x * 2/pi mod 4 = (m * window mod 2^96) * 2^-94, and m * window = a * 2^64 + b * 2^32
        // + c: its bits 32 .. 95 are x * 2/pi mod 4 in fixed point 2.62 (what is dropped, below
        // and past the window, costs less than 2^-61).
        const UOp r = F::add(F::add(shl(a, u64(32)), b), shr(c, u64(32)));
        // Round to the nearest quadrant: f = the low 62 bits as a signed number, |f| <= 2^61.
        const UOp n = to(DType::Int32, shr(F::add(r, u64(uint64_t{1} << 61)), u64(62)));
        const UOp f = shr(bits(DType::Int64, shl(r, u64(2))), i64(2));
        // r = f * pi/2 * 2^-62. f as a float pair fh + fl (fl carries the bits fh rounded off),
        // then products of 12-bit halves with pi/2 in three parts, the leading ones exact.
        const UOp fh = to(DType::Float32, f);
        const UOp fl = to(DType::Float32, F::sub(f, to(DType::Int64, fh)));
        const UOp a1 = top12(fh), a2 = F::sub(fh, a1);
        const UOp k1 = F::c(0x1.922p-62), k2 = F::c(-0x1.2aep-80), k3 = F::c(-0x1.de973ep-93);
        const UOp rh0 = F::mul(a1, k1);
        const UOp rl0 = F::add(F::add(F::mul(a1, k2), F::mul(a2, k1)),
                               F::add(F::mul(a2, k2), F::add(F::mul(fh, k3), F::mul(fl, k1))));
        const UOp rh = F::add(rh0, rl0); // Fast2Sum: |rl0| < 2^-11 |rh0|
        return {n, rh, F::sub(rl0, F::sub(rh, rh0))};
    }

    static UOp build(const UOp& x, bool cos) {
        const UOp xbits = F::f_to_bits(x);
        const UOp abits = band(xbits, F::i(0x7fffffff));
        const UOp ax = F::bits_to_f(abits);
        const UOp small = F::lt(ax, F::c(4096.0));
        // Each path sees only inputs it is meant for, so no lane computes out-of-range casts.
        const Reduced cw = cody_waite(F::sel(small, ax, F::c(0.0)));
        const Reduced ph = payne_hanek(abits);
        const UOp n = F::sel(small, cw.n, ph.n);
        const UOp rh = F::sel(small, cw.rh, ph.rh), rl = F::sel(small, cw.rl, ph.rl);

        // sin r and cos r on |r| <= pi/4 + 0.001: minimax polynomials (Chebyshev fits, relative
        // error 2^-28 for sin and 2^-30 for cos with float coefficients), the low part rl folded
        // in to first order.
        const UOp z = F::mul(rh, rh);
        const UOp ps = F::poly(z, {0x1.6dbb5cp-19, -0x1.a013ap-13, 0x1.11110ep-7, -0x1.555556p-3});
        const UOp sin_r =
            F::add(rh, F::add(rl, F::mul(z, F::sub(F::mul(rh, ps), F::mul(F::c(0.5), rl)))));
        // cos r = 1 - r^2/2 + r^4 q(r^2): r^2 exactly as zh + zl (12-bit halves of rh) and the
        // rounding of 1 - zh/2 recovered, so that only the final addition rounds noticeably.
        const UOp ra = top12(rh), rb = F::sub(rh, ra);
        const UOp zh = F::mul(ra, ra);
        const UOp zl = F::mul(rb, F::add(ra, rh));
        const UOp hz = F::mul(F::c(0.5), zh);
        const UOp w = F::sub(F::c(1.0), hz);
        const UOp pc = F::poly(z, {-0x1.252284p-22, 0x1.a015bep-16, -0x1.6c16cp-10, 0x1.555556p-5});
        const UOp tail =
            F::sub(F::mul(F::mul(z, z), pc), F::add(F::mul(F::c(0.5), zl), F::mul(rh, rl)));
        const UOp cos_r = F::add(w, F::add(F::sub(F::sub(F::c(1.0), w), hz), tail));

        // cos x = sin(x + pi/2): one quadrant on. Odd quadrants take cos r, quadrants 2 and 3
        // negate, and sin is odd in x (which also keeps sin(-0) == -0).
        const UOp q = cos ? F::add(n, F::i(1)) : n;
        const UOp v = F::sel(eq(band(q, F::i(1)), F::i(0)), sin_r, cos_r);
        UOp sign = shl(band(q, F::i(2)), F::i(30));
        if (!cos) sign = bxor(sign, band(xbits, F::i(static_cast<int32_t>(0x80000000u))));
        const UOp res = F::bits_to_f(bxor(F::f_to_bits(v), sign));
        // NaN and +-inf give NaN.
        return F::sel(F::lt(F::i(0x7f7fffff), abits),
                      F::c(std::numeric_limits<double>::quiet_NaN()), res);
    }
};

// float64 SIN and COS, the same way with wider parts: Cody-Waite below 2^19 (n < 2^19, pi/2 in
// three 34-bit parts and a full one, missing it by 2^-160), Payne-Hanek above (the 53-bit
// significand times a 192-bit window of 2/pi, in 32-bit limbs, gives x * 2/pi mod 4 in fixed
// point 2.126: |r| >= 2^-60.9 over all doubles, so 126 bits leave 65 beyond the quadrant), and
// FreeBSD's k_sin/k_cos polynomials (fdlibm). Within 0.74 ulp of the exact value on random
// samples of the whole range and on the hardest case, 6381956970095103 * 2^797.
struct SinCos64 : SinCos {
    static UOp c(double v) { return UOp::constant_f(DType::Float64, v); }
    // The top 26 of a double's 53 significand bits: their products with 26- or 27-bit numbers
    // are exact.
    static UOp top26(const UOp& a) {
        return bits(DType::Float64,
                    band(bits(DType::Int64, a), i64(static_cast<int64_t>(0xfffffffff8000000u))));
    }
    // The high 64 bits of the 128-bit product m * w for m < 2^53, from 32-bit limbs (each
    // partial product and sum fits in 64 bits).
    static UOp mul_hi(const UOp& m, const UOp& w) {
        const UOp low = u64(0xffffffff), s32 = u64(32);
        const UOp ml = band(m, low), mh = shr(m, s32), wl = band(w, low), wh = shr(w, s32);
        const UOp t = F::mul(ml, wl);
        const UOp u = F::add(F::mul(mh, wl), shr(t, s32));
        const UOp v = F::add(F::mul(ml, wh), band(u, low));
        return F::add(F::add(F::mul(mh, wh), shr(u, s32)), shr(v, s32));
    }

    static Reduced cody_waite(const UOp& ax) {
        const UOp nf = UOp::alu(Op::Trunc, {F::add(F::mul(ax, c(0x1.45f306dc9c883p-1)), c(0.5))});
        const UOp t = F::sub(ax, F::mul(nf, c(0x1.921fb5448p+0))); // exact (Sterbenz)
        const auto [s1, e1] = two_sum(t, F::mul(nf, c(0x1.e973dcb38p-35)));
        const auto [s2, e2] = two_sum(s1, F::mul(nf, c(0x1.9cceba3f8p-70)));
        const UOp lo = F::add(F::add(e1, e2), F::mul(nf, c(0x1.1f1976b7ed8fcp-106)));
        const auto [rh, rl] = two_sum(s2, lo);
        return {to(DType::Int32, nf), rh, rl};
    }

    static Reduced payne_hanek(const UOp& abits) {
        // 2/pi in hexadecimal after 64 zero bits, 1216 bits: enough for the largest exponent.
        const uint64_t g[] = {
            0,
            0xa2f9836e4e441529,
            0xfc2757d1f534ddc0,
            0xdb6295993c439041,
            0xfe5163abdebbc561,
            0xb7246e3a424dd2e0,
            0x06492eea09d1921c,
            0xfe1deb1cb129a73e,
            0xe88235f52ebb4484,
            0xe99c7026b45f7e41,
            0x3991d639835339f4,
            0x9c845f8bbdf9283b,
            0x1ff897ffde05980f,
            0xef2f118b5a0a6d1f,
            0x6d367ecf27cb09b7,
            0x4f463f669e5fea2d,
            0x7527bac7ebe5f17b,
            0x3d0739f78a5292ea,
            0x6bfb5fb11f8d5d08,
            0x56033046fc7b6bab,
        };
        // x = m * 2^(e - 1075); the window starts at bit e - 1013 of g. e >= 1042 here (smaller
        // exponents take the Cody-Waite path, clamped so no shift is out of range).
        const UOp e = UOp::alu(Op::Max, {shr(abits, i64(52)), i64(1042)});
        const UOp p = F::sub(e, i64(1013)); // 29 .. 1034
        const UOp k = shr(p, i64(6));       // the first word: 0 .. 16
        const UOp sh = bits(DType::UInt64, band(p, i64(63)));
        std::vector<UOp> is_k;
        for (int j = 0; j < 16; ++j) is_k.push_back(eq(k, i64(j)));
        auto word = [&](int first) {
            UOp w = u64(g[first + 16]);
            for (int j = 15; j >= 0; --j)
                w = F::sel(is_k[static_cast<size_t>(j)], u64(g[first + j]), w);
            return w;
        };
        const UOp g0 = word(0), g1 = word(1), g2 = word(2), g3 = word(3);
        auto funnel = [&](const UOp& a, const UOp& b) {
            return bor(shl(a, sh), shr(shr(b, u64(1)), UOp::alu(Op::Sub, {u64(63), sh})));
        };
        const UOp w0 = funnel(g0, g1), w1 = funnel(g1, g2), w2 = funnel(g2, g3);
        const UOp m = bits(DType::UInt64,
                           bor(band(abits, i64((int64_t{1} << 52) - 1)), i64(int64_t{1} << 52)));
        // x * 2/pi mod 4 = (m * window mod 2^192) * 2^-190; its bits 64 .. 191 as r1:r0 are
        // x * 2/pi mod 4 in fixed point 2.126.
        const UOp lo1 = F::mul(m, w1);
        const UOp r0 = F::add(lo1, mul_hi(m, w2));
        const UOp carry = to(DType::UInt64, F::lt(r0, lo1));
        const UOp r1 = F::add(F::add(F::mul(m, w0), mul_hi(m, w1)), carry);
        const UOp n = to(DType::Int32, shr(F::add(r1, u64(uint64_t{1} << 61)), u64(62)));
        // f = the low 126 bits as a signed number f1:r0, made a magnitude m1:m0 and a sign.
        const UOp f1 = shr(bits(DType::Int64, shl(r1, u64(2))), i64(2));
        const UOp neg = F::lt(f1, i64(0));
        const UOp f1u = bits(DType::UInt64, f1);
        const UOp m0 = F::sel(neg, UOp::alu(Op::Sub, {u64(0), r0}), r0);
        const UOp m1 = F::sel(
            neg, F::add(bxor(f1u, u64(~uint64_t{0})), to(DType::UInt64, eq(r0, u64(0)))), f1u);
        // The magnitude as h + l from its four exact 32-bit limbs.
        auto limb = [&](const UOp& x, bool high, double scale) {
            const UOp v = high ? shr(x, u64(32)) : band(x, u64(0xffffffff));
            return F::mul(to(DType::Float64, v), c(scale));
        };
        const auto [h1, e1] = two_sum(limb(m1, true, 0x1p96), limb(m1, false, 0x1p64));
        const auto [h2, e2] = two_sum(h1, limb(m0, true, 0x1p32));
        const auto [h, e3] = two_sum(h2, limb(m0, false, 1.0));
        const UOp l = F::add(F::add(e1, e2), e3);
        // r = (h + l) * pi/2 * 2^-126, pi/2 * 2^-126 = K1 + K2 with K1 of 26 bits.
        const UOp hh = top26(h), hl = F::sub(h, hh);
        const UOp k1 = c(0x1.921fb58p-126), k2 = c(-0x1.dde973dcb3b3ap-153);
        const UOp rh0 = F::mul(hh, k1);
        const UOp rl0 = F::add(F::mul(hl, k1), F::add(F::mul(h, k2), F::mul(l, k1)));
        const UOp rh = F::add(rh0, rl0); // Fast2Sum: |rl0| < 2^-25 |rh0|
        const UOp rl = F::sub(rl0, F::sub(rh, rh0));
        return {n, F::sel(neg, UOp::alu(Op::Neg, {rh}), rh),
                F::sel(neg, UOp::alu(Op::Neg, {rl}), rl)};
    }

    static UOp build(const UOp& x, bool cos) {
        const UOp xbits = bits(DType::Int64, x);
        const UOp abits = band(xbits, i64(std::numeric_limits<int64_t>::max()));
        const UOp ax = bits(DType::Float64, abits);
        const UOp small = F::lt(ax, c(0x1p19));
        const Reduced cw = cody_waite(F::sel(small, ax, c(0.0)));
        const Reduced ph = payne_hanek(abits);
        const UOp n = F::sel(small, cw.n, ph.n);
        const UOp rh = F::sel(small, cw.rh, ph.rh), rl = F::sel(small, cw.rl, ph.rl);

        // k_sin: rh - ((z * (rl/2 - v * p) - rl) - v * S1), v = rh^3.
        const UOp z = F::mul(rh, rh);
        const UOp v = F::mul(z, rh);
        const UOp ps = F::poly(z, {1.58969099521155010221e-10, -2.50507602534068634195e-08,
                                   2.75573137070700676789e-06, -1.98412698298579493134e-04,
                                   8.33333333332248946124e-03});
        const UOp sin_r =
            F::sub(rh, F::sub(F::sub(F::mul(z, F::sub(F::mul(c(0.5), rl), F::mul(v, ps))), rl),
                              F::mul(v, c(-1.66666666666666324348e-01))));
        // k_cos, with r^2 exact as zh + zl as for float32.
        const UOp ra = top26(rh), rb = F::sub(rh, ra);
        const UOp zh = F::mul(ra, ra);
        const UOp zl = F::mul(rb, F::add(ra, rh));
        const UOp hz = F::mul(c(0.5), zh);
        const UOp w = F::sub(c(1.0), hz);
        const UOp pc =
            F::mul(z, F::poly(z, {-1.13596475577881948265e-11, 2.08757232129817482790e-09,
                                  -2.75573143513906633035e-07, 2.48015872894767294178e-05,
                                  -1.38888888888741095749e-03, 4.16666666666666019037e-02}));
        const UOp tail = F::sub(F::mul(z, pc), F::add(F::mul(c(0.5), zl), F::mul(rh, rl)));
        const UOp cos_r = F::add(w, F::add(F::sub(F::sub(c(1.0), w), hz), tail));

        const UOp q = cos ? F::add(n, F::i(1)) : n;
        const UOp r = F::sel(eq(band(q, F::i(1)), F::i(0)), sin_r, cos_r);
        UOp sign = shl(to(DType::Int64, band(q, F::i(2))), i64(62));
        if (!cos) sign = bxor(sign, band(xbits, i64(std::numeric_limits<int64_t>::min())));
        const UOp res = bits(DType::Float64, bxor(bits(DType::Int64, r), sign));
        return F::sel(F::lt(i64(0x7fefffffffffffff), abits),
                      c(std::numeric_limits<double>::quiet_NaN()), res);
    }
};

// float32 ERF: for |x| < 0.5 the Taylor series of erf(x)/x in x^2 (8 terms: the next one is
// below 2^-30 relative); above, 1 - erfc(|x|) with erfc a rational function P(u)/Q(u) of
// degrees 7 and 6 in u = (|x| - 0.5) / 3.42, fitted here (Loeb and Lawson iterations in long
// double, minimax absolute error 1.8e-9 on [0.5, 3.92]); from 3.92 on erf rounds to 1 and u is
// held at 1. No exp and no branch: both halves are a few fused multiply-adds and one division,
// so a kernel of erf (gelu's) is near the memory's speed. erf(-x) = -erf(x); NaN stays NaN;
// erf(+-inf) = +-1. Within 3 ulp of erf in double over the float range (test_transcendental;
// every float in [0.5, 8] was checked at 2.34 ulp or better when the coefficients were made).
UOp erf_f32_impl(const UOp& x0) {
    using F = F32;
    const UOp neg = F::lt(x0, F::c(0.0));
    const UOp z = F::sel(neg, UOp::alu(Op::Neg, {x0}), x0);
    const UOp z2 = F::mul(z, z);
    const UOp small =
        F::mul(z, F::poly(z2, {0.00012055332981789664, -0.0008548327023450852, 0.005223977625442188,
                               -0.026866170645131252, 0.11283791670955126, -0.37612638903183754,
                               1.1283791670955126}));
    const UOp zc = F::sel(F::lt(F::c(3.92), z), F::c(3.92), z);
    const UOp u = F::add(F::mul(zc, F::c(2.923976481e-01)), F::c(-1.461988240e-01));
    const UOp p =
        F::poly(u, {-6.830707192e-01, 4.414827347e+00, -1.233394814e+01, 1.932256699e+01,
                    -1.834585381e+01, 1.056356239e+01, -3.417583466e+00, 4.795001149e-01});
    const UOp q = F::poly(u, {1.228691196e+01, -6.242537022e+00, 1.367037868e+01, -4.132347107e+00,
                              5.924994469e+00, -8.595364690e-01, 1.0});
    const UOp large = F::sub(F::c(1.0), UOp::alu(Op::Fdiv, {p, q}));
    const UOp r = F::sel(F::lt(z, F::c(0.5)), small, large);
    return F::sel(neg, UOp::alu(Op::Neg, {r}), r); // a NaN goes through both halves as NaN
}

// float64 EXP2, LOG2 and ERF as plain ALU ops: GPU kernels call no C library, and CPU kernels
// of them vectorize. One rounding each at the end where it can be had: the scalings by powers of
// two are exact, and LOG2 carries its result as a sum of two doubles until the last add.
struct F64 {
    using F = F32;
    static UOp c(double v) { return UOp::constant_f(DType::Float64, v); }
    static UOp i(int64_t v) { return UOp::constant(DType::Int64, v); }
    static UOp bits_to_f(const UOp& a) { return UOp::make(Op::BitCast, DType::Float64, {a}); }
    static UOp f_to_bits(const UOp& a) { return UOp::make(Op::BitCast, DType::Int64, {a}); }
};

// 2^x: x = n + f with n = round(x) and f in [-0.5, 0.5] (exact), 2^f by its Taylor
// series sum (f ln 2)^k / k! to k = 13 (the first term left out is below 2^-57 relative), 2^n by
// the exponent bits. x is clamped to [-1080, 1025] first: below, 2^x rounds to 0; above, it is
// inf. A NaN passes the clamps (its comparisons are false) and every step after them.
UOp exp2_f64_impl(const UOp& x0) {
    using F = F32;
    using D = F64;
    const UOp x = F::clamp(x0, -1080.0, 1025.0);
    const auto [n, ni] = F::round_int(x);
    const UOp f = F::sub(x, n);
    const UOp q =
        F::mul(F::poly(f, {1.3691488853904128e-12, 2.5678435993488206e-11, 4.4455382718708116e-10,
                           7.054911620801123e-09, 1.01780860092397e-07, 1.321548679014431e-06,
                           1.5252733804059841e-05, 0.0001540353039338161, 0.0013333558146428443,
                           0.009618129107628477, 0.05550410866482158, 0.24022650695910072,
                           0.6931471805599453}),
               f);
    return F::ldexp(F::add(q, D::c(1.0)), ni);
}

// e^y for exp's EXP2(y * (1/ln 2)): rounding that product first would cost up to |y| / 2 ulp
// (float32: 62 ulp near y = 80; float64: 431 near 700), so y is reduced itself, as libm does:
// n = round(y / ln 2), r = y - n ln 2 in [-ln 2 / 2, ln 2 / 2] (Cody-Waite: ln 2 = Lh + Ll, n Lh
// exact, each step an FMA), e^r by a polynomial (Chebyshev interpolants of degree 6 and 11 made
// for this file, relative error 2.5e-9 and 4.2e-18: scripts/fit_float64.py), e^y = e^r 2^n by
// the exponent bits as EXP2 does. No more work than EXP2's own decomposition. y is held where
// e^y is 0 or inf already (the scale then stays in range); a NaN passes the clamps.
UOp exp_of(const UOp& y0, double lo, double hi, double lh, double ll,
           std::initializer_list<double> coefs) {
    using F = F32;
    const auto k = [&](double v) { return UOp::constant_f(y0.dtype(), v); };
    const UOp y = F::clamp(y0, lo, hi);
    const auto [n, ni] = F::round_int(F::mul(y, k(1.4426950408889634)));
    const UOp neg_n = UOp::alu(Op::Neg, {n});
    const UOp r = UOp::alu(Op::MulAcc, {neg_n, k(ll), UOp::alu(Op::MulAcc, {neg_n, k(lh), y})});
    return F::ldexp(F::poly(r, coefs), ni);
}

UOp exp_f32_impl(const UOp& y) {
    return exp_of(y, -104.0, 89.0, 0x1.62e4p-1, 1.4286068203094173e-06,
                  {0.0013941108433972674, 0.008375126398153335, 0.04166635289677516,
                   0.16666415514653277, 0.5000000047117757, 1.000000037716214, 1.0});
}

UOp exp_f64_impl(const UOp& y) {
    return exp_of(y, -750.0, 710.0, 0x1.62e42fefa38p-1, 5.497923018708371e-14,
                  {2.5110037605963777e-08, 2.763263963904103e-07, 2.755724091857897e-06,
                   2.4801485482328494e-05, 0.00019841269890047113, 0.0013888888952314775,
                   0.008333333333319601, 0.0416666666664881, 0.1666666666666668, 0.5000000000000019,
                   1.0, 1.0});
}

// log2 x: x = m * 2^e with m in [sqrt(2)/2, sqrt(2)) (subnormals scaled by 2^54 first), and
// with f = m - 1 (exact) and s = f / (2 + f), log(m) = log((1 + s) / (1 - s)) = 2 s + 2 s^3 / 3
// + ... = f - f^2/2 + s (f^2/2 + R), R = sum 2 s^2k / (2k + 1) to k = 10 (|s| < 0.172: the next
// term is below 2^-60 relative). log(m) is split into hi (its top 21 bits) + lo, and 1 / log 2
// into Lh (32 bits) + Ll, so that hi * Lh is exact; e + hi * Lh is kept as a sum of two doubles
// (Fast2Sum) and the small terms are added to it last.
UOp log2_f64_impl(const UOp& x0) {
    using F = F32;
    using D = F64;
    const UOp denormal = F::lt(x0, D::c(0x1p-1022));
    const UOp x = F::sel(denormal, F::mul(x0, D::c(0x1p54)), x0);
    const UOp bits = D::f_to_bits(x);
    UOp e =
        F::sub(UOp::alu(Op::And, {UOp::alu(Op::Shr, {bits, D::i(52)}), D::i(0x7ff)}), D::i(1023));
    e = F::sel(denormal, F::sub(e, D::i(54)), e);
    UOp m = D::bits_to_f(UOp::alu(Op::Or, {UOp::alu(Op::And, {bits, D::i(0x000fffffffffffff)}),
                                           D::i(0x3ff0000000000000)})); // in [1, 2)
    const UOp high = F::lt(D::c(1.4142135623730951), m);
    m = F::sel(high, F::mul(m, D::c(0.5)), m);
    e = F::sel(high, F::add(e, D::i(1)), e);
    const UOp f = F::sub(m, D::c(1.0));
    const UOp s = UOp::alu(Op::Fdiv, {f, F::add(D::c(2.0), f)});
    const UOp z = F::mul(s, s);
    const UOp r = F::mul(z, F::poly(z, {2.0 / 21, 2.0 / 19, 2.0 / 17, 2.0 / 15, 2.0 / 13, 2.0 / 11,
                                        2.0 / 9, 2.0 / 7, 2.0 / 5, 2.0 / 3}));
    const UOp hfsq = F::mul(D::c(0.5), F::mul(f, f));
    const UOp hi = D::bits_to_f(UOp::alu(
        Op::And, {D::f_to_bits(F::sub(f, hfsq)), D::i(static_cast<int64_t>(0xffffffff00000000u))}));
    const UOp lo = F::add(F::sub(F::sub(f, hi), hfsq), F::mul(s, F::add(hfsq, r)));
    const UOp lh = D::c(0x1.71547652p+0), ll = D::c(1.6751713164886512e-10);
    const UOp vhi = F::mul(hi, lh);
    const UOp ef = UOp::make(Op::Cast, DType::Float64, {e});
    const UOp w = F::add(ef, vhi);
    const UOp vlo =
        F::add(F::add(F::mul(F::add(lo, hi), ll), F::mul(lo, lh)), F::add(F::sub(ef, w), vhi));
    return F::log2_specials(x0, F::add(vlo, w));
}

// float64 ERF. Below |x| = 1: x + x P(x^2), P of degree 12 (erf(x)/x - 1 interpolated at
// Chebyshev nodes of x^2 in [0, 1], error below 2^-62). From 1 on: 1 - exp(-x^2) g(x), with
// g(x) = exp(x^2) erfc(x) of degree 24 in s = 2.4/x - 1.4 (Chebyshev nodes of 1/x in [1/6, 1],
// error below 2^-58 of erf), x held at 6 beyond (erf rounds to 1 there). The coefficients were
// made for this file with mpmath (50 digits): scripts/fit_float64.py. Both halves are computed
// and one is selected: no branch, so the kernel vectorizes. erf(-x) = -erf(x), erf(-0) = -0,
// NaN stays NaN, erf(+-inf) = +-1. Within 1 ulp (test_transcendental).
UOp erf_f64_impl(const UOp& x0) {
    using F = F32;
    using D = F64;
    const UOp neg = F::lt(x0, D::c(0.0));
    const UOp z = F::sel(neg, UOp::alu(Op::Neg, {x0}), x0);
    const UOp y = F::poly(F::mul(z, z),
                          {5.957176147748911e-11, -1.1372848856791674e-09, 1.4659775274047436e-08,
                           -1.6350312701054695e-07, 1.6461000484121368e-06, -1.4925595266831182e-05,
                           0.0001205533111164271, -0.000854832698083379, 0.0052239776248180145,
                           -0.026866170645076792, 0.11283791670954879, -0.3761263890318375,
                           0.1283791670955126});
    const UOp small = F::add(z, F::mul(z, y));
    const UOp zc = F::clamp(z, 1.0, 6.0);
    const UOp s = F::sub(F::mul(UOp::alu(Op::Fdiv, {D::c(1.0), zc}), D::c(2.4)), D::c(1.4));
    const UOp g =
        F::poly(s, {2.3536979572445124e-10, -2.3141125612785943e-10, -1.5967918453108467e-09,
                    2.828024790048224e-09,  4.507664335137243e-10,   -2.7983497703309644e-09,
                    2.3173165145718272e-09, -1.4585572765297821e-08, 4.980945987466356e-08,
                    -9.821320495249197e-08, 1.2488260283637228e-07,  3.3003779342775526e-09,
                    -6.62787417422296e-07,  2.582429042121849e-06,   -6.498242897250973e-06,
                    1.0882793978525845e-05, -4.046598181654776e-06,  -5.528651391918668e-05,
                    0.0002656054665609539,  -0.0007383867417931075,  0.0010344322263503756,
                    0.002821131897847166,   -0.03083105050843015,    0.16536269001261483,
                    0.28972211632346423});
    const UOp ex = exp2_f64_impl(F::mul(F::mul(zc, zc), D::c(-1.4426950408889634)));
    const UOp large = F::sub(D::c(1.0), F::mul(ex, g));
    const UOp r = F::sel(F::lt(z, D::c(1.0)), small, large);
    return F::sel(neg, UOp::alu(Op::Neg, {r}), r); // a NaN goes through both halves as NaN
}

} // namespace

// POW on floats: 2^(y * log2|x|), then std::pow's special cases. A negative base (by its sign
// bit, so -0 too) keeps its sign for odd integer exponents; any other exponent of a finite
// negative base is NaN; x^0 = 1, 1^y = 1 and (-1)^(+-inf) = 1 even for NaN operands.
UOp pow_float(const UOp& x, const UOp& y) {
    const DType dt = x.dtype();
    const DType it = dt.bits() == 64 ? DType::Int64 : dt.bits() == 32 ? DType::Int32 : DType::Int16;
    auto c = [&](double v) { return UOp::constant_f(dt, v); };
    auto alu = [](Op op, std::vector<UOp> s) { return UOp::alu(op, std::move(s)); };
    auto sel = [&](const UOp& k, const UOp& a, const UOp& b) { return alu(Op::Where, {k, a, b}); };
    auto eq = [&](const UOp& a, const UOp& b) { return alu(Op::CmpEq, {a, b}); };
    auto lt = [&](const UOp& a, const UOp& b) { return alu(Op::CmpLt, {a, b}); };
    auto band = [&](const UOp& a, const UOp& b) { return alu(Op::And, {a, b}); };
    auto bor = [&](const UOp& a, const UOp& b) { return alu(Op::Or, {a, b}); };
    const double inf = std::numeric_limits<double>::infinity();
    const UOp ax = alu(Op::Max, {x, alu(Op::Neg, {x})});
    const UOp r = alu(Op::Exp2, {alu(Op::Mul, {alu(Op::Log2, {ax}), y})});
    const UOp integral = eq(alu(Op::Trunc, {y}), y);
    const UOp half = alu(Op::Mul, {y, c(0.5)});
    const UOp odd = band(integral, alu(Op::CmpNe, {alu(Op::Trunc, {half}), half}));
    const UOp sign_bit =
        lt(UOp::make(Op::BitCast, it, {x}), UOp::constant(it, 0)); // -0 and -NaN too
    const UOp negative = lt(x, c(0.0));
    const UOp nan_case =
        band(band(negative, alu(Op::CmpNe, {x, c(-inf)})), eq(integral, UOp::boolean(false)));
    const UOp ay = alu(Op::Max, {y, alu(Op::Neg, {y})});
    const UOp one_case =
        bor(bor(eq(y, c(0.0)), eq(x, c(1.0))), band(eq(ax, c(1.0)), eq(ay, c(inf))));
    const UOp signed_r = sel(band(sign_bit, odd), alu(Op::Neg, {r}), r);
    return sel(one_case, c(1.0),
               sel(nan_case, c(std::numeric_limits<double>::quiet_NaN()), signed_r));
}

// POW on integers by repeated squaring over the exponent's bits (wrapping, as the scalar
// semantics); a negative exponent gives 0 except for bases 1 and -1 (1 / x^|y| truncated).
UOp pow_int(const UOp& x, const UOp& y) {
    const DType dt = x.dtype();
    auto c = [&](int64_t v) { return UOp::constant(dt, v); };
    auto alu = [](Op op, std::vector<UOp> s) { return UOp::alu(op, std::move(s)); };
    auto bit = [&](int k) {
        return alu(Op::CmpNe, {alu(Op::And, {alu(Op::Shr, {y, c(k)}), c(1)}), c(0)});
    };
    UOp r = c(1), b = x;
    const int bits = dt.is_unsigned() ? dt.bits() : dt.bits() - 1;
    for (int k = 0; k < bits; ++k) {
        r = alu(Op::Where, {bit(k), alu(Op::Mul, {r, b}), r});
        if (k + 1 < bits) b = alu(Op::Mul, {b, b});
    }
    if (dt.is_unsigned()) return r;
    const UOp neg = alu(Op::Where, {alu(Op::CmpEq, {x, c(1)}), c(1),
                                    alu(Op::Where, {alu(Op::CmpEq, {x, c(-1)}),
                                                    alu(Op::Where, {bit(0), c(-1), c(1)}), c(0)})});
    return alu(Op::Where, {alu(Op::CmpLt, {y, c(0)}), neg, r});
}

UOp erf_f32(const UOp& x) { return erf_f32_impl(x); }
UOp exp2_f64(const UOp& x) { return exp2_f64_impl(x); }
UOp exp_f64(const UOp& y) { return exp_f64_impl(y); }
UOp log2_f64(const UOp& x) { return log2_f64_impl(x); }
UOp erf_f64(const UOp& x) { return erf_f64_impl(x); }
UOp exp2_f32(const UOp& x) { return exp2_f32_impl(x); }
UOp exp_f32(const UOp& y) { return exp_f32_impl(y); }
UOp log2_f32(const UOp& x) { return log2_f32_impl(x); }
UOp sin_cos_f32(const UOp& x, bool cos) { return SinCos::build(x, cos); }
UOp sin_cos_f64(const UOp& x, bool cos) { return SinCos64::build(x, cos); }

} // namespace tempura::codegen
