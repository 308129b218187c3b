// vmin/vmax of every integer and bool op, computed from the sources' bounds.
#include "tempura/ir/bounds.hpp"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <numeric>
#include <vector>

namespace tempura {

namespace {

using i128 = __int128;
using Bounds = std::pair<int64_t, int64_t>;

Bounds full(DType dt) {
    if (dt.is_integral()) return {dt.min(), dt.max()};
    return {kUnknownMin, kUnknownMax};
}

// Clamps a candidate interval to the dtype: if it leaves the dtype's range the value may
// wrap, so nothing better than the whole range can be said.
Bounds fit(DType dt, i128 lo, i128 hi) {
    if (lo < dt.min() || hi > dt.max()) return full(dt);
    return {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

Bounds minmax(DType dt, std::initializer_list<i128> xs) {
    return fit(dt, std::min(xs), std::max(xs));
}

// C division truncating toward zero, in 128 bits (no overflow possible from 64-bit inputs).
i128 cdiv(i128 a, i128 b) { return a / b; }

// Bounds of a / b for b in [bl, bh] with 0 excluded from [bl, bh].
void div_corners(i128 al, i128 ah, i128 bl, i128 bh, i128& lo, i128& hi) {
    for (i128 a : {al, ah})
        for (i128 b : {bl, bh}) {
            i128 q = cdiv(a, b);
            lo = std::min(lo, q);
            hi = std::max(hi, q);
        }
}

int64_t next_pow2_minus1(int64_t v) {
    uint64_t x = static_cast<uint64_t>(v);
    int b = 0;
    while (b < 63 && (uint64_t{1} << b) <= x) ++b;
    return static_cast<int64_t>((uint64_t{1} << b) - 1);
}

// x % c for x >= 0 and c > 0, where x = sum of k_i * t_i (each k_i a constant) + r: with
// g = gcd(c, every k_i), g | c, so x % c == g * (something in [0, c/g)) + r % g, and when r
// lies in one window [g*j, g*j + g) that is in [min r - g*j, c - g + max r - g*j]
// ((a*4 + 2) % 6 lies in [0, 4]). Returns false when the sum has no such form
// (or any bound is unknown). The sum is walked without recursion (Add/Sub chains, Mul by a
// constant); the number of terms is bounded.
bool mod_of_sum(const UOp& x, int64_t c, i128& lo, i128& hi) {
    uint64_t g = static_cast<uint64_t>(c);
    i128 rl = 0, rh = 0;
    bool any = false;
    std::vector<std::pair<const UOp*, int>> stack{{&x, 1}};
    for (int steps = 0; !stack.empty(); ++steps) {
        if (steps > 64) return false;
        auto [u, sign] = stack.back();
        stack.pop_back();
        const Op op = u->op();
        if (op == Op::Add || op == Op::Sub) {
            stack.push_back({&u->src(0), sign});
            stack.push_back({&u->src(1), op == Op::Sub ? -sign : sign});
            continue;
        }
        if (op == Op::Mul && u->src(1).op() == Op::Const && u->src(1).vmin() == u->src(1).vmax()) {
            const int64_t k = u->src(1).vmin();
            if (k == 0) continue;
            g = std::gcd(g,
                         k == INT64_MIN ? uint64_t{1} << 63 : static_cast<uint64_t>(std::abs(k)));
            any = true;
            continue;
        }
        if (u->vmin() == kUnknownMin || u->vmax() == kUnknownMax) return false;
        if (sign > 0) {
            rl += u->vmin();
            rh += u->vmax();
        } else {
            rl -= u->vmax();
            rh -= u->vmin();
        }
    }
    const i128 gi = static_cast<i128>(g);
    if (!any || gi <= 1) return false;
    const i128 j = (rl >= 0 ? rl : rl - gi + 1) / gi; // floor(rl / g)
    if (rh >= (j + 1) * gi) return false;
    lo = rl - j * gi;
    hi = c - gi + rh - j * gi;
    return true;
}

} // namespace

Bounds compute_bounds(Op op, DType dt, const std::vector<UOp>& s, const Arg& arg) {
    if (dt.is_ptr || dt.count != 1 || !dt.is_integral()) return {kUnknownMin, kUnknownMax};
    // Unsigned 64-bit values above INT64_MAX cannot be represented: say nothing for them.
    if (dt.scalar == Scalar::UInt64) return {kUnknownMin, kUnknownMax};
    switch (op) {
    case Op::Const: {
        int64_t v = 0;
        if (auto* i = std::get_if<int64_t>(&arg))
            v = *i;
        else if (auto* b = std::get_if<bool>(&arg))
            v = *b;
        else
            return full(dt);
        return {v, v};
    }
    case Op::DefineVar: {
        const auto& va = std::get<VarArg>(arg);
        return {va.min, va.max};
    }
    case Op::Bind: return {s[0].vmin(), s[0].vmax()}; // the variable's range, not its value
    case Op::Range:
    case Op::Special: {
        if (s[0].vmax() <= 0) return {0, 0};
        return {0, s[0].vmax() - 1};
    }
    default: break;
    }
    if (!is_alu(op)) return full(dt);
    auto lo = [&](size_t i) { return static_cast<i128>(s[i].vmin()); };
    auto hi = [&](size_t i) { return static_cast<i128>(s[i].vmax()); };
    // A source of unknown bounds (e.g. a float cast) makes the result unknown too.
    for (const UOp& x : s)
        if (x.dtype().is_integral() && x.dtype().scalar == Scalar::UInt64) return full(dt);
    switch (op) {
    case Op::Add: return fit(dt, lo(0) + lo(1), hi(0) + hi(1));
    case Op::Sub: return fit(dt, lo(0) - hi(1), hi(0) - lo(1));
    case Op::Neg: return fit(dt, -hi(0), -lo(0));
    case Op::Not:
        if (dt.is_bool()) return {1 - s[0].vmax(), 1 - s[0].vmin()};
        if (dt.is_unsigned()) return fit(dt, dt.max() - hi(0), dt.max() - lo(0)); // ~x = max - x
        return fit(dt, -hi(0) - 1, -lo(0) - 1);                                   // ~x = -x - 1
    case Op::Mul: return minmax(dt, {lo(0) * lo(1), lo(0) * hi(1), hi(0) * lo(1), hi(0) * hi(1)});
    case Op::MulAcc: {
        auto m = minmax(DType::Int64, {lo(0) * lo(1), lo(0) * hi(1), hi(0) * lo(1), hi(0) * hi(1)});
        return fit(dt, i128{m.first} + lo(2), i128{m.second} + hi(2));
    }
    case Op::Idiv: {
        i128 l = static_cast<i128>(1) << 100, h = -l;
        if (hi(1) >= 1) div_corners(lo(0), hi(0), std::max<i128>(lo(1), 1), hi(1), l, h);
        if (lo(1) <= -1) div_corners(lo(0), hi(0), lo(1), std::min<i128>(hi(1), -1), l, h);
        if (l > h) return full(dt); // the divisor is always 0
        return fit(dt, l, h);
    }
    case Op::Mod: {
        if (lo(1) == 0 && hi(1) == 0) return full(dt);
        // |a % b| < |b| and the sign follows a.
        i128 m = std::max(hi(1) < 0 ? -hi(1) : hi(1), lo(1) < 0 ? -lo(1) : lo(1)) - 1;
        if (lo(1) == hi(1) && lo(0) >= 0) {
            // A constant divisor over a window shorter than it that does not wrap around.
            i128 c = lo(1) < 0 ? -lo(1) : lo(1);
            if (hi(0) - lo(0) < c && lo(0) % c <= hi(0) % c) return fit(dt, lo(0) % c, hi(0) % c);
        }
        if (lo(1) == hi(1) && lo(1) > 0 && lo(0) >= 0) {
            // A sum whose terms share a factor with the divisor: (a*4 + b + 2) % 8 with
            // 0 <= b <= 1 lies in [2, 7].
            i128 l = 0, h = 0;
            if (mod_of_sum(s[0], s[1].vmin(), l, h)) return fit(dt, l, std::min({h, hi(0), m}));
        }
        if (lo(0) >= 0 && lo(1) > 0) {
            // x / d the same for every x and d of the ranges (x >= 0, d > 0): x % d == x - q*d.
            const i128 q = lo(0) / hi(1);
            if (q == hi(0) / lo(1))
                return fit(dt, std::max<i128>(0, lo(0) - q * hi(1)),
                           std::min({hi(0) - q * lo(1), m}));
        }
        if (lo(0) >= 0) return fit(dt, 0, std::min(hi(0), m));
        if (hi(0) <= 0) return fit(dt, std::max(lo(0), -m), 0);
        return fit(dt, std::max(lo(0), -m), std::min(hi(0), m));
    }
    case Op::Max: return fit(dt, std::max(lo(0), lo(1)), std::max(hi(0), hi(1)));
    case Op::Shl:
        if (lo(1) == hi(1) && lo(1) >= 0 && lo(1) < 62) {
            i128 f = static_cast<i128>(1) << static_cast<int>(lo(1));
            return fit(dt, lo(0) * f, hi(0) * f);
        }
        return full(dt);
    case Op::Shr:
        if (lo(1) == hi(1) && lo(1) >= 0 && lo(1) < 64 && lo(0) >= 0)
            return fit(dt, lo(0) >> static_cast<int>(lo(1)), hi(0) >> static_cast<int>(lo(1)));
        return full(dt);
    case Op::And:
        if (dt.is_bool()) return {s[0].vmin() & s[1].vmin(), s[0].vmax() & s[1].vmax()};
        if (lo(0) >= 0 && lo(1) >= 0) return fit(dt, 0, std::min(hi(0), hi(1)));
        if (lo(0) >= 0) return fit(dt, 0, hi(0));
        if (lo(1) >= 0) return fit(dt, 0, hi(1));
        return full(dt);
    case Op::Or:
        if (dt.is_bool()) return {s[0].vmin() | s[1].vmin(), s[0].vmax() | s[1].vmax()};
        if (lo(0) >= 0 && lo(1) >= 0)
            return fit(dt, std::max(lo(0), lo(1)),
                       next_pow2_minus1(std::max(s[0].vmax(), s[1].vmax())));
        return full(dt);
    case Op::Xor:
        if (dt.is_bool()) {
            if (s[0].vmin() == s[0].vmax() && s[1].vmin() == s[1].vmax()) {
                int64_t v = s[0].vmin() ^ s[1].vmin();
                return {v, v};
            }
            return {0, 1};
        }
        if (lo(0) >= 0 && lo(1) >= 0)
            return fit(dt, 0, next_pow2_minus1(std::max(s[0].vmax(), s[1].vmax())));
        return full(dt);
    case Op::CmpLt:
        if (!s[0].dtype().is_integral() ||
            (s[0].dtype().is_unsigned() && s[0].dtype().bits() == 64))
            return {0, 1};
        if (hi(0) < lo(1)) return {1, 1};
        if (lo(0) >= hi(1)) return {0, 0};
        return {0, 1};
    case Op::CmpNe:
    case Op::CmpEq: {
        if (!s[0].dtype().is_integral()) return {0, 1};
        bool disjoint = hi(0) < lo(1) || hi(1) < lo(0);
        bool equal_consts = lo(0) == hi(0) && lo(1) == hi(1) && lo(0) == lo(1);
        int64_t ne = disjoint ? 1 : equal_consts ? 0 : -1;
        if (ne < 0) return {0, 1};
        int64_t v = op == Op::CmpNe ? ne : 1 - ne;
        return {v, v};
    }
    case Op::Where:
        if (s[0].vmin() == 1) return {s[1].vmin(), s[1].vmax()};
        if (s[0].vmax() == 0) return {s[2].vmin(), s[2].vmax()};
        return {std::min(s[1].vmin(), s[2].vmin()), std::max(s[1].vmax(), s[2].vmax())};
    case Op::Cast:
    case Op::BitCast: {
        const UOp& x = s[0];
        if (!x.dtype().is_integral() || x.dtype().count != 1) return full(dt);
        if (op == Op::BitCast &&
            !(x.dtype().bits() == dt.bits() && x.dtype().is_unsigned() == dt.is_unsigned()))
            return full(dt);
        if (dt.is_bool()) {
            if (x.vmin() > 0 || x.vmax() < 0) return {1, 1};
            if (x.vmin() == 0 && x.vmax() == 0) return {0, 0};
            return {0, 1};
        }
        return fit(dt, x.vmin(), x.vmax());
    }
    default: return full(dt);
    }
}

} // namespace tempura
