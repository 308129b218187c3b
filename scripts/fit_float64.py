#!/usr/bin/env python3
"""Prints the constants of the float64 EXP2, LOG2 and ERF decompositions and of exp (float32
and float64) in src/codegen/transcendental.cpp, and the error of each approximation, with
mpmath at 50 digits.
A development tool, not part of the build: `apt-get install python3-mpmath`, then
`python3 scripts/fit_float64.py`.

EXP2: 2^f = sum (f ln 2)^k / k!, k = 0 .. 13, on f in [-0.5, 0.5].
LOG2: 1 / ln 2 split into a 32-bit head and a tail (the Taylor series of
      log((1 + s) / (1 - s)) needs no constants beyond 2 / (2k + 1)).
EXP:  e^r on r in [-ln 2 / 2, ln 2 / 2], degree 6 (float32) and 11 (float64), interpolated at
      Chebyshev nodes; ln 2 split for Cody-Waite into a head of 16 (float32) or 42 (float64)
      bits, so that n * head is exact, and a tail.
ERF:  |x| < 1: erf(x) = x + x P(x^2), P of degree 12 interpolating erf(x)/x - 1 at Chebyshev
      nodes of t = x^2 in [0, 1]; 1 <= |x| <= 6: erf(x) = 1 - exp(-x^2) g(x),
      g(x) = exp(x^2) erfc(x) of degree 24 in s = 2.4 / x - 1.4, interpolated at Chebyshev nodes
      of u = 1 / x in [1/6, 1].
"""
import mpmath as mp

mp.mp.dps = 50


def chebyshev_monomials(f, a, b, degree):
    """The interpolant of f at degree + 1 Chebyshev nodes of [a, b], as monomial coefficients
    (constant first) in s = (2 x - (a + b)) / (b - a)."""
    n = degree + 1
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    values = [f((b - a) / 2 * s + (a + b) / 2) for s in nodes]
    cheb = [2 * mp.fsum(values[k] * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / n)
                        for k in range(n)) / n for j in range(n)]
    cheb[0] /= 2
    t = [[mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]]  # T_j as monomials
    for j in range(2, n):
        nxt = [mp.mpf(0)] * (j + 1)
        for i, v in enumerate(t[j - 1]):
            nxt[i + 1] += 2 * v
        for i, v in enumerate(t[j - 2]):
            nxt[i] -= v
        t.append(nxt)
    mono = [mp.mpf(0)] * n
    for j in range(n):
        for i, v in enumerate(t[j]):
            mono[i] += cheb[j] * v
    return mono


def shifted(mono, scale, offset):
    """Monomials in s = scale * t + offset rewritten as monomials in t."""
    out = [mp.mpf(0)] * len(mono)
    for j, c in enumerate(mono):
        for i in range(j + 1):
            out[i] += c * mp.binomial(j, i) * scale ** i * offset ** (j - i)
    return out


def highest_first(coefs):
    return ",\n".join("    " + repr(float(c)) for c in reversed(coefs))


def main():
    ln2 = mp.log(2)
    print("EXP2, 2^f (f^13 .. f^1; then 1):")
    print(highest_first([ln2 ** k / mp.factorial(k) for k in range(1, 14)]))
    first_left_out = ln2 ** 14 / mp.factorial(14) / 2 ** 14 / mp.sqrt(2)
    print("  first term left out, relative:", mp.nstr(first_left_out, 3))

    inv = 1 / ln2
    e = mp.floor(mp.log(inv, 2))
    head = mp.floor(inv * 2 ** (31 - e)) / 2 ** (31 - e)
    print("LOG2: 1/ln 2 =", float(head).hex(), "+", repr(float(inv - head)))

    half = ln2 / 2
    for name, degree, bits in (("float32", 6, 16), ("float64", 11, 42)):
        exp_r = shifted(chebyshev_monomials(mp.exp, -half, half, degree), 1 / half, 0)
        worst = max(abs(mp.polyval(exp_r[::-1], r) - mp.exp(r)) / mp.exp(r)
                    for r in (-half + 2 * half * mp.mpf(i) / 2000 for i in range(2001)))
        print("EXP (%s), e^r (r^%d .. r^0), relative error %s:" % (name, degree,
                                                                 mp.nstr(worst, 3)))
        print(highest_first(exp_r))
        e = mp.floor(mp.log(ln2, 2))
        head = mp.floor(ln2 * 2 ** (bits - 1 - e)) / 2 ** (bits - 1 - e)
        print("  ln 2 =", float(head).hex(), "+", repr(float(ln2 - head)))

    def erf_over_x_less_1(t):
        return (mp.erf(mp.sqrt(t)) / mp.sqrt(t) if t else 2 / mp.sqrt(mp.pi)) - 1

    small = shifted(chebyshev_monomials(erf_over_x_less_1, 0, 1, 12), 2, -1)
    print("ERF, |x| < 1 (t^12 .. t^0, t = x^2):")
    print(highest_first(small))
    worst = max(abs(mp.polyval(small[::-1], t) - erf_over_x_less_1(t))
                for t in (mp.mpf(i) / 2000 for i in range(2001)))
    print("  error of P:", mp.nstr(worst, 3))

    def g(x):
        return mp.erfc(x) * mp.exp(x * x)

    a, b = 1 / mp.mpf(6), mp.mpf(1)
    large = chebyshev_monomials(lambda u: g(1 / u), a, b, 24)
    print("ERF, 1 <= |x| <= 6 (s^24 .. s^0, s = %r / x - %r):"
          % (float(2 / (b - a)), float((a + b) / (b - a))))
    print(highest_first(large))
    worst = 0
    for i in range(1001):
        x = 1 + 5 * mp.mpf(i) / 1000
        s = (2 / x - (a + b)) / (b - a)
        worst = max(worst, abs(mp.polyval(large[::-1], s) - g(x)) * mp.exp(-x * x))
    print("  error of 1 - exp(-x^2) g(x):", mp.nstr(worst, 3))


if __name__ == "__main__":
    main()
