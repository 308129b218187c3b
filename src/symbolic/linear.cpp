// Linear forms of integer expressions and the algebra built on them: like terms, canonical
// order, div/mod folding, comparisons. Every rewrite here states the identity it relies on and
// the condition under which it holds with C semantics and fixed-width integers.
#include "symbolic/linear.hpp"

#include <algorithm>
#include <numeric>

#include "tempura/ir/bounds.hpp"

namespace tempura::symbolic {

namespace {

using i128 = __int128;

int64_t wadd(DType dt, int64_t a, int64_t b) {
    return wrap_to(dt, static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)));
}
int64_t wmul(DType dt, int64_t a, int64_t b) {
    return wrap_to(dt, static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)));
}
bool fits(DType dt, i128 v) { return v >= dt.min() && v <= dt.max(); }

// Floor and ceiling division for b > 0.
int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}
int64_t ceil_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && a > 0) ? q + 1 : q;
}
uint64_t uabs(int64_t v) { return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); }

bool is_int_const(const UOp& u, int64_t& v) {
    if (u.op() != Op::Const || !u.dtype().is_int()) return false;
    v = u.const_value();
    return true;
}

struct Item {
    const UOp* n;
    int64_t k;
};
using Stack = boost::container::small_vector<Item, 16>;

void flatten_into(Linear& l, Stack& stack) {
    const DType dt = l.dtype;
    while (!stack.empty()) {
        Item it = stack.back();
        stack.pop_back();
        const UOp& n = *it.n;
        int64_t c;
        switch (n.op()) {
        case Op::Add:
            stack.push_back({&n.src(1), it.k});
            stack.push_back({&n.src(0), it.k});
            continue;
        case Op::Sub:
            stack.push_back({&n.src(1), wmul(dt, it.k, -1)});
            stack.push_back({&n.src(0), it.k});
            continue;
        case Op::Neg: stack.push_back({&n.src(0), wmul(dt, it.k, -1)}); continue;
        case Op::Mul:
            if (is_int_const(n.src(1), c)) {
                stack.push_back({&n.src(0), wmul(dt, it.k, c)});
                continue;
            }
            if (is_int_const(n.src(0), c)) {
                stack.push_back({&n.src(1), wmul(dt, it.k, c)});
                continue;
            }
            break;
        case Op::Const:
            l.constant = wadd(dt, l.constant, wmul(dt, it.k, n.const_value()));
            continue;
        default: break;
        }
        l.terms.push_back({n, it.k});
    }
}

// Sorts, merges like monomials, drops zero coefficients.
void combine(Linear& l) {
    auto& t = l.terms;
    if (t.size() > 1) {
        std::sort(t.begin(), t.end(), [](const LinTerm& a, const LinTerm& b) {
            return compare_structural(a.mono, b.mono) < 0;
        });
    }
    size_t out = 0;
    for (size_t i = 0; i < t.size(); ++i) {
        if (out > 0 && t[out - 1].mono.same(t[i].mono)) {
            t[out - 1].coef = wadd(l.dtype, t[out - 1].coef, t[i].coef);
        } else {
            if (out != i) t[out] = std::move(t[i]);
            ++out;
        }
    }
    t.resize(out);
    t.erase(std::remove_if(t.begin(), t.end(), [](const LinTerm& x) { return x.coef == 0; }),
            t.end());
}

// Terms i and j of l become merged * k (the recombinations below).
void replace_pair(Linear& l, size_t i, size_t j, const UOp& merged, int64_t k) {
    auto& t = l.terms;
    t.erase(t.begin() + static_cast<long>(std::max(i, j)));
    t.erase(t.begin() + static_cast<long>(std::min(i, j)));
    Stack stack{{&merged, k}};
    flatten_into(l, stack);
    combine(l);
}

// The two identities of recombine_divmod where x is itself a quotient (y / c1, or y / c1 + k)
// and the rules have already merged x / c: (y / c1) / c into y / (c1*c), (y / c1 + k) / c into
// (y + k*c1) / (c1*c). The partner term is found as fold_divmod's form of x / c, which equals it:
//   D * (k*c) + (x % c) * k  ->  x * k,  and  (D % m) * (k*c) + (x % c) * k  ->  (x % (c*m)) * k
// for c, m > 0, D == x / c. gidx / 8 * 4 + gidx / 2 % 4 -> gidx / 2.
// fold_divmod() below decomposes x, a part of a term, whose own decomposition may come back here:
// the only way the linear forms recurse, one level per quotient nested in a quotient's modulo.
// Past kMaxMergeDepth levels the pair stays as it is (a form less simple, never a wrong one), so
// a deep index expression cannot exhaust the stack.
thread_local int t_merge_depth = 0;
constexpr int kMaxMergeDepth = 32;

bool recombine_merged(Linear& l) {
    if (t_merge_depth >= kMaxMergeDepth) return false;
    auto& t = l.terms;
    for (size_t j = 0; j < t.size(); ++j) {
        const UOp& r = t[j].mono;
        int64_t c, c1, cj;
        if (r.op() != Op::Mod || !is_int_const(r.src(1), c) || c <= 0) continue;
        const UOp& x = r.src(0);
        // x a quotient, or a sum with a quotient on one side (y / c1 + k, y / c1 + a*3).
        const bool sum = x.op() == Op::Add || x.op() == Op::Sub;
        const UOp& q = !sum ? x : x.src(0).op() == Op::Idiv ? x.src(0) : x.src(1);
        if (q.op() != Op::Idiv || !is_int_const(q.src(1), c1) || c1 <= 0) continue;
        // A partner is a quotient by a multiple of c1*c (cheap test before building x / c).
        auto partner_quotient = [&](const UOp& m) -> const UOp* {
            const UOp* d = m.op() == Op::Mod ? &m.src(0) : &m;
            if (d->op() != Op::Idiv || !is_int_const(d->src(1), cj) || cj <= 0 || cj % c1 != 0 ||
                (cj / c1) % c != 0)
                return nullptr;
            return d;
        };
        bool any = false;
        for (size_t i = 0; i < t.size() && !any; ++i)
            any = i != j && partner_quotient(t[i].mono) != nullptr;
        if (!any) continue;
        struct Depth {
            Depth() { ++t_merge_depth; }
            ~Depth() { --t_merge_depth; }
            Depth(const Depth&) = delete;
            Depth& operator=(const Depth&) = delete;
        };
        std::optional<UOp> D;
        {
            const Depth depth;
            D = fold_divmod(UOp::alu(Op::Idiv, {x, UOp::constant(l.dtype, c)}));
        }
        if (!D) continue;
        const int64_t k = t[j].coef;
        for (size_t i = 0; i < t.size(); ++i) {
            if (i == j || t[i].coef != wmul(l.dtype, k, c)) continue;
            const UOp& m = t[i].mono;
            UOp merged;
            int64_t mm;
            if (m.same(*D)) {
                merged = x;
            } else if (m.op() == Op::Mod && m.src(0).same(*D) && is_int_const(m.src(1), mm) &&
                       mm > 0 && fits(l.dtype, i128{c} * mm)) {
                merged = UOp::alu(Op::Mod, {x, UOp::constant(l.dtype, c * mm)});
            } else {
                continue;
            }
            replace_pair(l, i, j, merged, k);
            return true;
        }
    }
    return false;
}

// Two identities, each pairing a term with (x % c) * k:
//   (x / c) * (k*c) + (x % c) * k  ->  x * k : x == (x / c) * c + x % c holds for every x in C.
//   (x / c) % m * (k*c) + (x % c) * k  ->  (x % (c*m)) * k, for c, m > 0: with Q = x / (c*m) ==
//   (x / c) / m (truncation composes for positive divisors), (x / c) % m == x / c - Q*m, so
//   ((x / c) % m) * c + x % c == x - Q*c*m == x % (c*m), for every x in C.
bool recombine_divmod(Linear& l) {
    auto& t = l.terms;
    for (size_t i = 0; i < t.size(); ++i) {
        // The term's x / c, and what the pair becomes (over k).
        const UOp* d = &t[i].mono;
        UOp merged;
        int64_t c, m;
        if (d->op() == Op::Mod && is_int_const(d->src(1), m) && m > 0) {
            d = &d->src(0);
            if (d->op() != Op::Idiv || !is_int_const(d->src(1), c) || c <= 0) continue;
            const i128 cm = i128{c} * m;
            if (!fits(l.dtype, cm)) continue;
            merged =
                UOp::alu(Op::Mod, {d->src(0), UOp::constant(l.dtype, static_cast<int64_t>(cm))});
        } else {
            if (d->op() != Op::Idiv || !is_int_const(d->src(1), c) || c == 0) continue;
            merged = d->src(0);
        }
        for (size_t j = 0; j < t.size(); ++j) {
            const UOp& r = t[j].mono;
            if (r.op() != Op::Mod || !r.src(0).same(d->src(0)) || !r.src(1).same(d->src(1)))
                continue;
            if (t[i].coef != wmul(l.dtype, t[j].coef, c)) continue;
            const int64_t k = t[j].coef;
            replace_pair(l, i, j, merged, k);
            return true;
        }
    }
    return recombine_merged(l);
}

Linear scaled_down(const Linear& l, int64_t g, int64_t constant) {
    Linear r{l.dtype, {}, constant};
    r.terms.reserve(l.terms.size());
    for (const auto& t : l.terms) r.terms.push_back({t.mono, t.coef / g});
    return r;
}

std::optional<std::pair<int64_t, int64_t>> bounds_of_terms(DType dt, const Terms& ts,
                                                           int64_t constant) {
    i128 lo = constant, hi = constant;
    for (const auto& t : ts) {
        if (t.mono.vmin() == kUnknownMin || t.mono.vmax() == kUnknownMax) return std::nullopt;
        i128 a = i128{t.mono.vmin()} * t.coef, b = i128{t.mono.vmax()} * t.coef;
        lo += std::min(a, b);
        hi += std::max(a, b);
        if (!fits(dt, lo) || !fits(dt, hi)) return std::nullopt;
    }
    return std::pair<int64_t, int64_t>{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

} // namespace

Linear decompose(const UOp& u) {
    Linear l{u.dtype(), {}, 0};
    Stack stack{{&u, 1}};
    flatten_into(l, stack);
    combine(l);
    while (recombine_divmod(l)) {
    }
    return l;
}

// A term after the first with a negative coefficient is subtracted (x - y, not x + y*-1), and
// a negative constant too: fewer nodes, and the form a reader expects.
static bool subtracted(int64_t coef, DType dt) { return coef < 0 && coef != dt.min(); }

UOp rebuild(const Linear& l) {
    UOp acc;
    auto term_node = [&](const UOp& mono, int64_t coef) {
        return coef == 1 ? mono : UOp::alu(Op::Mul, {mono, UOp::constant(l.dtype, coef)});
    };
    for (const auto& t : l.terms) {
        if (acc.is_null())
            acc = term_node(t.mono, t.coef);
        else if (subtracted(t.coef, l.dtype))
            acc = UOp::alu(Op::Sub, {acc, term_node(t.mono, -t.coef)});
        else
            acc = UOp::alu(Op::Add, {acc, term_node(t.mono, t.coef)});
    }
    if (acc.is_null()) return UOp::constant(l.dtype, l.constant);
    if (subtracted(l.constant, l.dtype))
        return UOp::alu(Op::Sub, {acc, UOp::constant(l.dtype, -l.constant)});
    if (l.constant != 0) return UOp::alu(Op::Add, {acc, UOp::constant(l.dtype, l.constant)});
    return acc;
}

std::optional<std::pair<int64_t, int64_t>> term_bounds(const Linear& l) {
    return bounds_of_terms(l.dtype, l.terms, 0);
}

namespace {

// Whether u is already rebuild(l), checked without building anything: most nodes the rules
// see are canonical, and interning a whole rebuilt chain just to compare it is the hot path.
bool is_term(const UOp& u, const UOp& mono, int64_t coef) {
    if (coef == 1) return u.same(mono);
    return u.op() == Op::Mul && u.src(0).same(mono) && u.src(1).op() == Op::Const &&
           u.src(1).const_value() == coef;
}
// One step of the chain: `cur` is `rest + term` or `rest - term` as rebuild() makes it.
bool is_step(const UOp*& cur, const UOp& mono, int64_t coef, DType dt) {
    const bool sub = subtracted(coef, dt);
    if (cur->op() != (sub ? Op::Sub : Op::Add) || !is_term(cur->src(1), mono, sub ? -coef : coef))
        return false;
    cur = &cur->src(0);
    return true;
}
bool is_rebuilt(const UOp& u, const Linear& l) {
    const UOp* cur = &u;
    if (l.terms.empty()) return cur->op() == Op::Const && cur->const_value() == l.constant;
    if (l.constant != 0) {
        const bool sub = subtracted(l.constant, l.dtype);
        if (cur->op() != (sub ? Op::Sub : Op::Add) || cur->src(1).op() != Op::Const ||
            cur->src(1).const_value() != (sub ? -l.constant : l.constant))
            return false;
        cur = &cur->src(0);
    }
    for (size_t i = l.terms.size(); i-- > 1;)
        if (!is_step(cur, l.terms[i].mono, l.terms[i].coef, l.dtype)) return false;
    return is_term(*cur, l.terms[0].mono, l.terms[0].coef);
}

} // namespace

std::optional<UOp> canonical_sum(const UOp& u) {
    if (!u.dtype().is_int() || u.dtype().count != 1) return std::nullopt;
    Linear l = decompose(u);
    if (is_rebuilt(u, l)) return std::nullopt;
    UOp r = rebuild(l);
    if (r.same(u)) return std::nullopt;
    return r;
}

std::optional<UOp> canonical_product(const UOp& u) {
    const DType dt = u.dtype();
    if (!dt.is_int() || dt.count != 1) return std::nullopt;
    boost::container::small_vector<UOp, 8> factors;
    int64_t k = 1;
    boost::container::small_vector<const UOp*, 16> stack{&u};
    // A product tree is walked as a tree: shared factors (y = y * y, repeated) would make the
    // walk and the flat product exponential in the graph's size. Index products have a few
    // factors; past kMaxFactors the product is left as it is.
    constexpr size_t kMaxFactors = 32;
    size_t visited = 0;
    while (!stack.empty()) {
        if (++visited > 2 * kMaxFactors) return std::nullopt;
        const UOp* n = stack.back();
        stack.pop_back();
        if (n->op() == Op::Mul) {
            stack.push_back(&n->src(1));
            stack.push_back(&n->src(0));
        } else if (n->op() == Op::Const) {
            k = wmul(dt, k, n->const_value());
        } else {
            factors.push_back(*n);
        }
    }
    if (k == 0) return UOp::constant(dt, 0); // x * 0 == 0 for every integer x
    if (factors.empty()) return UOp::constant(dt, k);
    // (a + b) * k == a*k + b*k: distribute a constant over one sum (ring identity, wraps alike).
    if (factors.size() == 1 && k != 1 &&
        (factors[0].op() == Op::Add || factors[0].op() == Op::Sub || factors[0].op() == Op::Neg))
        return canonical_sum(u).value_or(u);
    std::sort(factors.begin(), factors.end(),
              [](const UOp& a, const UOp& b) { return compare_structural(a, b) < 0; });
    // Most products the rules see are canonical already (x * 3): checked in place, without
    // interning the rebuilt chain only to find it is u.
    {
        const UOp* cur = &u;
        bool canonical = true;
        if (k != 1) {
            canonical = cur->op() == Op::Mul && cur->src(1).op() == Op::Const &&
                        cur->src(1).const_value() == k;
            if (canonical) cur = &cur->src(0);
        }
        for (size_t i = factors.size(); canonical && i-- > 1;) {
            canonical = cur->op() == Op::Mul && cur->src(1).same(factors[i]);
            if (canonical) cur = &cur->src(0);
        }
        if (canonical && cur->same(factors[0])) return std::nullopt;
    }
    UOp acc = factors[0];
    for (size_t i = 1; i < factors.size(); ++i) acc = UOp::alu(Op::Mul, {acc, factors[i]});
    if (k != 1) acc = UOp::alu(Op::Mul, {acc, UOp::constant(dt, k)});
    if (acc.same(u)) return std::nullopt;
    return acc;
}

namespace {
// l = g*q + r with g = gcd(c, the coefficients other than +-1) > 1 and r (the unit terms and
// what the constant leaves over g) in [0, g): q, with g. The quotient's floor and the
// comparison's both reduce to q (see their callers). nullopt when l has no such split.
std::optional<Linear> split_by_gcd(const Linear& l, int64_t c, int64_t& g) {
    uint64_t gg = uabs(c);
    bool any = false;
    for (const auto& t : l.terms)
        if (uabs(t.coef) > 1) {
            gg = std::gcd(gg, uabs(t.coef));
            any = true;
        }
    g = static_cast<int64_t>(gg);
    if (!any || g <= 1) return std::nullopt;
    // The rest's range first (no allocation): most sums fail here.
    const int64_t q0 = floor_div(l.constant, g), r0 = l.constant - q0 * g;
    i128 lo = r0, hi = r0;
    bool units = false;
    for (const auto& t : l.terms) {
        if (uabs(t.coef) > 1) continue;
        if (t.mono.vmin() == kUnknownMin || t.mono.vmax() == kUnknownMax) return std::nullopt;
        units = true;
        lo += t.coef > 0 ? t.mono.vmin() : -i128{t.mono.vmax()};
        hi += t.coef > 0 ? t.mono.vmax() : -i128{t.mono.vmin()};
    }
    if (!units || lo < 0 || hi >= g) return std::nullopt;
    Linear q{l.dtype, {}, q0};
    for (const auto& t : l.terms)
        if (uabs(t.coef) > 1) q.terms.push_back({t.mono, t.coef / g});
    if (!bounds_of_terms(l.dtype, q.terms, q.constant)) return std::nullopt;
    return q;
}
// The rest r of a split l = g*q + r, before it is built: its number of terms, its range (when
// every term's bounds are known) and its first term.
struct Rest {
    size_t terms = 0;
    bool known = true;
    i128 lo = 0, hi = 0;
    const LinTerm* first = nullptr;
};

// Calls f(g, q, r) for each candidate factor g > 1 of c (split_by_gcd's, then gcd(c, k) of
// each coefficient k, each once) with l = g*q + r: q the terms whose coefficients g divides
// (over g) plus floor(k0 / g), r the other terms plus k0's remainder in [0, g); both non-empty.
// want(g, rest) says first, without building anything, whether f could use the split. Stops at
// the first f that returns true.
template <class W, class F>
void for_each_factor_split(const Linear& l, int64_t c, W&& want, F&& f) {
    boost::container::small_vector<uint64_t, 8> cands;
    uint64_t gg = uabs(c);
    for (const auto& t : l.terms)
        if (uabs(t.coef) > 1) gg = std::gcd(gg, uabs(t.coef));
    cands.push_back(gg);
    for (const auto& t : l.terms) cands.push_back(std::gcd(uabs(c), uabs(t.coef)));
    for (size_t n = 0; n < cands.size(); ++n) {
        if (cands[n] <= 1 || std::find(cands.begin(), cands.begin() + static_cast<long>(n),
                                       cands[n]) != cands.begin() + static_cast<long>(n))
            continue;
        const auto g = static_cast<int64_t>(cands[n]);
        const int64_t q0 = floor_div(l.constant, g);
        Rest rest;
        rest.lo = rest.hi = l.constant - q0 * g;
        for (const auto& t : l.terms) {
            if (t.coef % g == 0) continue;
            if (rest.terms++ == 0) rest.first = &t;
            rest.known = rest.known && t.mono.vmin() != kUnknownMin && t.mono.vmax() != kUnknownMax;
            rest.lo += t.coef > 0 ? t.coef * i128{t.mono.vmin()} : t.coef * i128{t.mono.vmax()};
            rest.hi += t.coef > 0 ? t.coef * i128{t.mono.vmax()} : t.coef * i128{t.mono.vmin()};
        }
        if (rest.terms == 0 || rest.terms == l.terms.size() || !want(g, rest)) continue;
        Linear q{l.dtype, {}, q0}, r{l.dtype, {}, l.constant - q0 * g};
        for (const auto& t : l.terms) (t.coef % g == 0 ? q : r).terms.push_back(t);
        for (auto& t : q.terms) t.coef /= g;
        if (!bounds_of_terms(l.dtype, q.terms, q.constant)) continue;
        if (f(g, q, r)) return;
    }
}

// l = g*q + r with r in [0, g), by for_each_factor_split: q and r, with g.
std::optional<std::pair<Linear, Linear>> split_by_factor(const Linear& l, int64_t c, int64_t& g) {
    std::optional<std::pair<Linear, Linear>> out;
    auto want = [](int64_t gg, const Rest& r) { return r.known && r.lo >= 0 && r.hi < gg; };
    for_each_factor_split(l, c, want, [&](int64_t gg, Linear& q, Linear& r) {
        g = gg;
        out.emplace(std::move(q), std::move(r));
        return true;
    });
    return out;
}

// l = g*q + r where r is k*m + k0 with m taking two values (lo, lo + 1), for x = l >= 0:
// x / c == (q + floor(r / g)) / (c/g), floors of positive divisors composing, and floor(r / g)
// is the line through its values at the two points. (a*2 + b*3 + 2) / 6 -> (a + b + 1) / 3 for
// b in [0, 1]: floor(3*b / 2) == b.
std::optional<UOp> nest_div_by_factor(const Linear& l, int64_t c) {
    std::optional<UOp> out;
    auto want = [](int64_t, const Rest& r) {
        return r.terms == 1 && r.known && r.first->mono.vmax() - r.first->mono.vmin() == 1;
    };
    for_each_factor_split(l, c, want, [&](int64_t g, Linear& q, Linear& r) {
        const UOp& m = r.terms[0].mono;
        const i128 r0 = i128{m.vmin()} * r.terms[0].coef + r.constant, r1 = r0 + r.terms[0].coef;
        if (!fits(l.dtype, r0) || !fits(l.dtype, r1)) return false;
        const int64_t f0 = floor_div(static_cast<int64_t>(r0), g),
                      f1 = floor_div(static_cast<int64_t>(r1), g);
        const i128 b = i128{q.constant} + f0 - i128{f1 - f0} * m.vmin();
        if (!fits(l.dtype, b)) return false;
        q.constant = static_cast<int64_t>(b);
        if (f1 != f0) q.terms.push_back({m, f1 - f0});
        combine(q);
        const auto qb = bounds_of_terms(l.dtype, q.terms, q.constant);
        if (!qb || qb->first < 0) return false;
        const UOp y = rebuild(q);
        out = c / g == 1 ? y : UOp::alu(Op::Idiv, {y, UOp::constant(l.dtype, c / g)});
        return true;
    });
    return out;
}
// x = y / c1 + s with s any other terms (integer-valued) and the only quotient of x: for y >= 0
// and y + c1*s >= 0, x / c == (y + c1*s) / (c1*c), as floor(y / c1) + s == floor((y + c1*s) / c1)
// and floors of positive divisors compose; every dividend is >= 0, so C's truncation is that
// floor. (b / 5 + a*3) / 2 -> (b + a*15) / 10, one division fewer.
std::optional<UOp> merge_nested_div(const Linear& l, int64_t c) {
    const LinTerm* inner = nullptr;
    for (const auto& t : l.terms) {
        if (t.mono.op() != Op::Idiv) continue;
        if (inner != nullptr) return std::nullopt;
        inner = &t;
    }
    int64_t c1;
    if (inner == nullptr || inner->coef != 1 || !is_int_const(inner->mono.src(1), c1) || c1 <= 0)
        return std::nullopt;
    const UOp& y = inner->mono.src(0);
    const i128 p = i128{c1} * c;
    if (y.vmin() < 0 || !fits(l.dtype, p) || !fits(l.dtype, i128{l.constant} * c1))
        return std::nullopt;
    Linear m = decompose(y);
    m.constant = wadd(l.dtype, m.constant, l.constant * c1);
    for (const auto& t : l.terms) {
        if (&t == inner) continue;
        if (!fits(l.dtype, i128{t.coef} * c1)) return std::nullopt;
        m.terms.push_back({t.mono, t.coef * c1});
    }
    combine(m);
    const auto mb = bounds_of_terms(l.dtype, m.terms, m.constant);
    if (!mb || mb->first < 0) return std::nullopt;
    return UOp::alu(Op::Idiv, {rebuild(m), UOp::constant(l.dtype, static_cast<int64_t>(p))});
}
} // namespace

std::optional<UOp> fold_divmod(const UOp& u) {
    const DType dt = u.dtype();
    const bool is_div = u.op() == Op::Idiv;
    const UOp& x = u.src(0);
    int64_t c;
    if (!dt.is_int() || dt.count != 1 || dt.is_unsigned()) return std::nullopt;
    if (!is_int_const(u.src(1), c)) return fold_var_divmod(u);
    if (c == 0) return std::nullopt;
    auto K = [&](int64_t v) { return UOp::constant(dt, v); };
    if (c < 0) {
        if (c == dt.min()) return std::nullopt;
        // x / -c == -(x / c) and x % -c == x % c: truncation is odd, the remainder follows x.
        if (is_div) return UOp::alu(Op::Mul, {UOp::alu(Op::Idiv, {x, K(-c)}), K(-1)});
        return UOp::alu(Op::Mod, {x, K(-c)});
    }
    if (c == 1) return is_div ? x : K(0);
    // The whole range of x falls in one quotient: x / c is that constant, x % c == x - q*c.
    if (x.vmin() != kUnknownMin && x.vmax() != kUnknownMax) {
        int64_t qlo = x.vmin() / c, qhi = x.vmax() / c;
        if (qlo == qhi) {
            if (is_div) return K(qlo);
            if (qlo == 0) return x;
            Linear l = decompose(x);
            l.constant = wadd(dt, l.constant, -qlo * c);
            return rebuild(l);
        }
    }
    int64_t c1, c2;
    if (x.op() == Op::Idiv && is_int_const(x.src(1), c2) && c2 > 0 && is_div) {
        // (y / c2) / c == y / (c2*c): truncation composes for positive divisors.
        i128 p = i128{c2} * c;
        if (fits(dt, p)) return UOp::alu(Op::Idiv, {x.src(0), K(static_cast<int64_t>(p))});
    }
    if (is_div && (x.op() == Op::Add || x.op() == Op::Sub) && x.src(0).op() == Op::Idiv &&
        is_int_const(x.src(1), c2) && is_int_const(x.src(0).src(1), c1) && c1 > 0) {
        // (y / c1 + k) / c == (y + k*c1) / (c1*c) for y >= 0 and y + k*c1 >= 0: as floors,
        // floor(y / c1) + k == floor((y + k*c1) / c1) and floors of positive divisors compose;
        // every dividend is >= 0, so C's truncation is that floor. (a / 2 + 1) / 2 -> (a + 2) / 4.
        const UOp& y = x.src(0).src(0);
        const i128 k = x.op() == Op::Sub ? -i128{c2} : i128{c2}, kc = k * c1, p = i128{c1} * c;
        if (y.vmin() >= 0 && y.vmin() + kc >= 0 && y.vmax() != kUnknownMax &&
            fits(dt, y.vmax() + kc) && fits(dt, p)) {
            Linear ly = decompose(y);
            ly.constant = wadd(dt, ly.constant, static_cast<int64_t>(kc));
            return UOp::alu(Op::Idiv, {rebuild(ly), K(static_cast<int64_t>(p))});
        }
    }
    if (x.op() == Op::Mod && is_int_const(x.src(1), c2) && c2 > 0 && c2 % c == 0) {
        // (y % (c*d)) / c == (y / c) % d, and (y % (c*d)) % c == y % c: both sides are odd in y
        // and agree for y >= 0.
        if (is_div) return UOp::alu(Op::Mod, {UOp::alu(Op::Idiv, {x.src(0), K(c)}), K(c2 / c)});
        return UOp::alu(Op::Mod, {x.src(0), K(c)});
    }
    Linear l = decompose(x);
    if (l.terms.empty() || !bounds_of_terms(dt, l.terms, l.constant)) return std::nullopt;
    if (l.terms.size() == 1 && l.terms[0].mono.vmax() - l.terms[0].mono.vmin() == 1) {
        // x = k*m + k0 with m taking two values, lo and lo + 1: x / c and x % c are the line
        // through their two values f0, f1, f0 + (f1 - f0)*(m - lo), exact at both points.
        // (a + 3) / 4 -> a and (a + 3) % 4 -> 3 - a*3 for a in [0, 1].
        const UOp& m = l.terms[0].mono;
        const i128 lo = m.vmin(), x0 = lo * l.terms[0].coef + l.constant, x1 = x0 + l.terms[0].coef;
        if (fits(dt, x0) && fits(dt, x1)) {
            const i128 f0 = is_div ? x0 / c : x0 % c, f1 = is_div ? x1 / c : x1 % c;
            const i128 b = f0 - (f1 - f0) * lo;
            if (fits(dt, b)) {
                Linear r{dt, {}, static_cast<int64_t>(b)};
                if (f1 != f0) r.terms.push_back({m, static_cast<int64_t>(f1 - f0)});
                return rebuild(r);
            }
        }
    }
    if (x.vmin() >= 0) {
        // Residues: every coefficient k = c*q + r with r == k (mod c), so x = c*Q + y with
        // y = sum of r*t (+ k0 % c). When the bounds put y in [0, c) and x >= 0, x / c == Q and
        // x % c == y (floor and truncation agree for x >= 0): both disappear. This is the form
        // a window over a padded axis takes, (ky*59 + oy) % 58 -> ky + oy with ky + oy < 58.
        // The residues are tried in [0, c) first, then nearest to 0 (r - c when r > c/2), which
        // is how a congruence folds: (3*a + 3) % 4 == 3 - a and (3*a + 3) / 4 == a for a in
        // [0, 3]; a tie (r == c/2) is tried both ways.
        bool signed_any = false, tie = false;
        for (const auto& t : l.terms) {
            int64_t r = t.coef % c;
            if (r < 0) r += c;
            signed_any = signed_any || 2 * i128{r} > c;
            tie = tie || (r != 0 && 2 * i128{r} == c);
        }
        // The residue of k in mode 0, 1 (nearest 0) or 2 (nearest 0, a tie negative).
        auto residue = [&](int64_t k, int mode) {
            int64_t r = k % c;
            if (r < 0) r += c;
            if (mode > 0 && (2 * i128{r} > c || (mode == 2 && 2 * i128{r} == c))) r -= c;
            return r;
        };
        const int64_t y0 = l.constant % c < 0 ? l.constant % c + c : l.constant % c;
        for (int mode = 0; mode < 3; ++mode) {
            if ((mode == 1 && !signed_any && !tie) || (mode == 2 && !tie)) continue;
            // y's range and whether anything moves to Q first, without building either (the
            // terms of l are sorted and distinct, so y and Q need no combining).
            bool moved = l.constant != y0, known = true;
            i128 lo = y0, hi = y0;
            for (const auto& t : l.terms) {
                const int64_t r = residue(t.coef, mode);
                moved = moved || r != t.coef;
                if (r == 0) continue;
                known = known && t.mono.vmin() != kUnknownMin && t.mono.vmax() != kUnknownMax;
                lo += r > 0 ? r * i128{t.mono.vmin()} : r * i128{t.mono.vmax()};
                hi += r > 0 ? r * i128{t.mono.vmax()} : r * i128{t.mono.vmin()};
            }
            if (!moved || !known || lo < 0 || hi >= c) continue;
            Linear y{dt, {}, y0}, q{dt, {}, static_cast<int64_t>((i128{l.constant} - y0) / c)};
            for (const auto& t : l.terms) {
                const int64_t r = residue(t.coef, mode);
                const auto qk = static_cast<int64_t>((i128{t.coef} - r) / c);
                if (r != 0) y.terms.push_back({t.mono, r});
                if (qk != 0) q.terms.push_back({t.mono, qk});
            }
            if (bounds_of_terms(dt, q.terms, q.constant)) return is_div ? rebuild(q) : rebuild(y);
        }
    }
    // Common factor g of c and every coefficient.
    uint64_t g = static_cast<uint64_t>(c);
    for (const auto& t : l.terms) g = std::gcd(g, uabs(t.coef));
    if (g > 1) {
        const int64_t gi = static_cast<int64_t>(g), cg = c / gi;
        if (l.constant % gi == 0) {
            // (g*a) / (g*b) == a / b and (g*a) % (g*b) == g * (a % b), for every sign.
            UOp a = rebuild(scaled_down(l, gi, l.constant / gi));
            if (is_div) return UOp::alu(Op::Idiv, {a, K(cg)});
            return UOp::alu(Op::Mul, {UOp::alu(Op::Mod, {a, K(cg)}), K(gi)});
        }
        if (x.vmin() >= 0) {
            // x = g*a + r with 0 < r < g and x >= 0 (so a >= 0): x / (g*b) == a / b and
            // x % (g*b) == g * (a % b) + r.
            int64_t q = floor_div(l.constant, gi), r = l.constant - q * gi;
            UOp a = rebuild(scaled_down(l, gi, q));
            if (is_div) return UOp::alu(Op::Idiv, {a, K(cg)});
            return UOp::alu(Op::Add,
                            {UOp::alu(Op::Mul, {UOp::alu(Op::Mod, {a, K(cg)}), K(gi)}), K(r)});
        }
    }
    if (!is_div && x.vmin() >= 0 && l.constant >= 0 && l.terms.size() == 1) {
        // (k*x + k0) % c == ((k % c)*x + k0 % c) % c when k > 0 and x >= 0 (both sides' sums are
        // >= 0, so C's remainder is the mathematical one, and they differ by a multiple of c).
        // A lone term only: in a sum the rewrite would rarely save a node and would break the
        // sharing of x with its other users (x / c beside x % c).
        const auto& t0 = l.terms[0];
        const bool all = t0.coef > 0 && t0.mono.vmin() >= 0;
        const bool reduces = t0.coef >= c && t0.coef % c <= 1; // the multiplication goes
        if (all && reduces) {
            Linear r{dt, {}, l.constant % c};
            for (const auto& t : l.terms)
                if (t.coef % c != 0) r.terms.push_back({t.mono, t.coef % c});
            if (bounds_of_terms(dt, r.terms, r.constant))
                return UOp::alu(Op::Mod, {rebuild(r), K(c)});
        }
    }
    if (x.vmin() >= 0) {
        // x = g*q + r with 0 <= r < g, g | c = g*m and x >= 0 (so q >= 0):
        //   x / c == q / m: floor((g*q + r) / (g*m)) == floor(floor((g*q + r) / g) / m);
        //   x % c == (q % m)*g + r, a nested mod by the factor: x = g*m*(q / m) + g*(q % m) + r
        //   and 0 <= g*(q % m) + r <= g*m - 1. (a*3 + b) % 9 -> a % 3 * 3 + b for b in [0, 3).
        int64_t g = 1;
        if (auto qr = split_by_factor(l, c, g)) {
            const auto& [q, r] = *qr;
            if (is_div) return UOp::alu(Op::Idiv, {rebuild(q), K(c / g)});
            if (c / g > 1) {
                const UOp qm = UOp::alu(Op::Mul, {UOp::alu(Op::Mod, {rebuild(q), K(c / g)}), K(g)});
                return UOp::alu(Op::Add, {qm, rebuild(r)});
            }
        }
        if (is_div)
            if (auto n = nest_div_by_factor(l, c)) return n;
    }
    // Split off the multiples of c: x = c*q + r.
    Linear q{dt, {}, 0}, r{dt, {}, 0};
    for (const auto& t : l.terms) (t.coef % c == 0 ? q : r).terms.push_back(t);
    const bool nonneg = x.vmin() >= 0, nonpos = x.vmax() <= 0;
    int64_t kq = nonneg   ? floor_div(l.constant, c)
                 : nonpos ? ceil_div(l.constant, c)
                          : l.constant / c;
    r.constant = l.constant - kq * c;
    if (q.terms.empty() && kq == 0) return is_div ? merge_nested_div(l, c) : std::nullopt;
    auto rb = bounds_of_terms(dt, r.terms, r.constant);
    if (!rb) return std::nullopt;
    // x / c == q + r / c when no truncation differs: r == 0, or x and r share a sign.
    const bool exact = r.terms.empty() && r.constant == 0;
    if (!(exact || (nonneg && rb->first >= 0) || (nonpos && rb->second <= 0))) return std::nullopt;
    UOp rn = rebuild(r);
    if (!is_div) return exact ? K(0) : UOp::alu(Op::Mod, {rn, K(c)});
    Linear qd = scaled_down(q, c, kq);
    UOp qn = rebuild(qd);
    if (exact) return qn;
    return UOp::alu(Op::Add, {qn, UOp::alu(Op::Idiv, {rn, K(c)})});
}

std::optional<UOp> fold_var_divmod(const UOp& u) {
    const DType dt = u.dtype();
    const UOp& x = u.src(0);
    const UOp& d = u.src(1);
    if (!dt.is_int() || dt.count != 1 || dt.is_unsigned() || d.is_const() || d.vmin() <= 0 ||
        d.vmax() == kUnknownMax)
        return std::nullopt;
    // x in [0, d) for every d of its range: x / d == 0 and x % d == x.
    if (x.vmin() >= 0 && x.vmax() < d.vmin()) return u.op() == Op::Idiv ? UOp::constant(dt, 0) : x;
    // The divisor d = dm * dk (dk a constant > 0, 1 when d is no such product; dm > 0 with d).
    // x = q*d + r with q >= 0 and r >= 0: x / d == q + r / d and x % d == r % d, as floor
    // division, which C's truncation is for x >= 0. A term of x is in q when its monomial has the
    // factor dm and dk divides its coefficient: (a*d*20 + b) / (d*5) -> a*4 + b / (d*5).
    int64_t dk = 1;
    const bool scaled = d.op() == Op::Mul && is_int_const(d.src(1), dk) && dk > 0;
    if (!scaled) dk = 1;
    const UOp& dm = scaled ? d.src(0) : d;
    Linear l = decompose(x);
    Linear q{dt, {}, 0}, r{dt, {}, l.constant};
    for (const auto& t : l.terms) {
        const UOp& m = t.mono;
        const bool divides = t.coef % dk == 0;
        if (divides && m.same(dm)) {
            q.terms.push_back({UOp::constant(dt, 1), t.coef / dk});
        } else if (divides && m.op() == Op::Mul && m.srcs().size() == 2 && m.src(1).same(dm)) {
            q.terms.push_back({m.src(0), t.coef / dk});
        } else if (divides && m.op() == Op::Mul && m.srcs().size() == 2 && m.src(0).same(dm)) {
            q.terms.push_back({m.src(1), t.coef / dk});
        } else {
            r.terms.push_back(t);
        }
    }
    if (q.terms.empty()) return std::nullopt;
    auto qb = bounds_of_terms(dt, q.terms, 0);
    auto rb = bounds_of_terms(dt, r.terms, r.constant);
    if (!qb || !rb || qb->first < 0 || rb->first < 0) return std::nullopt;
    const bool no_rest = r.terms.empty() && r.constant == 0;
    if (u.op() == Op::Mod)
        return no_rest ? UOp::constant(dt, 0) : UOp::alu(Op::Mod, {rebuild(r), d});
    combine(q);
    UOp qn = rebuild(q);
    if (no_rest) return qn;
    // r / (dm*dk) == (r / dk) / dm when dk divides r (r >= 0, dm > 0: floors compose).
    bool by_dk = scaled && r.constant % dk == 0;
    for (const auto& t : r.terms) by_dk = by_dk && t.coef % dk == 0;
    if (by_dk)
        return UOp::alu(
            Op::Add, {qn, UOp::alu(Op::Idiv, {rebuild(scaled_down(r, dk, r.constant / dk)), dm})});
    return UOp::alu(Op::Add, {qn, UOp::alu(Op::Idiv, {rebuild(r), d})});
}

std::optional<UOp> fold_compare(const UOp& u) {
    const Op op = u.op();
    const UOp& a = u.src(0);
    const UOp& b = u.src(1);
    const DType dt = a.dtype();
    if (!dt.is_int() || dt.count != 1 || dt.is_unsigned()) return std::nullopt;
    if (a.same(b)) return UOp::boolean(op == Op::CmpEq);
    int64_t c;
    if (!is_int_const(b, c)) {
        // -x < -y  <=>  y < x, when neither negation wraps (x, y > the dtype's minimum).
        int64_t m1, m2;
        if (op == Op::CmpLt && a.op() == Op::Mul && b.op() == Op::Mul &&
            is_int_const(a.src(1), m1) && is_int_const(b.src(1), m2) && m1 == -1 && m2 == -1 &&
            a.src(0).vmin() > dt.min() && b.src(0).vmin() > dt.min())
            return UOp::alu(Op::CmpLt, {b.src(0), a.src(0)});
        return std::nullopt;
    }
    Linear l = decompose(a);
    if (l.terms.empty()) return std::nullopt; // constant folding's job
    auto tb = term_bounds(l);
    if (!tb) return std::nullopt;
    auto cmp = [&](const UOp& lhs, int64_t rhs) {
        return UOp::alu(op, {lhs, UOp::constant(dt, rhs)});
    };
    if (l.constant != 0) {
        // s + k < c  <=>  s < c - k, when neither side overflows.
        i128 nc = i128{c} - l.constant;
        if (!fits(dt, nc) || !fits(dt, i128{tb->first} + l.constant) ||
            !fits(dt, i128{tb->second} + l.constant))
            return std::nullopt;
        l.constant = 0;
        return cmp(rebuild(l), static_cast<int64_t>(nc));
    }
    if (op == Op::CmpLt && l.terms.size() == 1 && l.terms[0].coef == 1) {
        // y / d < c  <=>  y < c*d for y >= 0 and d > 0 (floor(y / d) < c <=> y < c*d).
        const UOp& m = l.terms[0].mono;
        int64_t d;
        if (m.op() == Op::Idiv && is_int_const(m.src(1), d) && d > 0 && m.src(0).vmin() >= 0 &&
            fits(dt, i128{c} * d))
            return UOp::alu(Op::CmpLt, {m.src(0), UOp::constant(dt, c * d)});
    }
    uint64_t g = 0;
    for (const auto& t : l.terms) g = std::gcd(g, uabs(t.coef));
    const int64_t gi = static_cast<int64_t>(g);
    if (g > 1) {
        Linear s = scaled_down(l, gi, 0);
        if (op == Op::CmpLt) return cmp(rebuild(s), ceil_div(c, gi)); // g*s < c <=> s < ceil(c/g)
        if (c % gi != 0) return UOp::boolean(op == Op::CmpNe);        // g*s never equals c
        return cmp(rebuild(s), c / gi);
    }
    if (op != Op::CmpLt) return std::nullopt;
    // Simplex: terms that are all >= 0 with positive coefficients sum to < 1 exactly when each
    // is 0, whatever the coefficients: sum(k_i * x_i) < 1  <=>  sum(x_i) < 1.
    if (c == 1) {
        bool simplex = true, unit = true;
        for (const auto& t : l.terms) {
            simplex = simplex && t.coef > 0 && t.mono.vmin() >= 0;
            unit = unit && t.coef == 1;
        }
        if (simplex && !unit) {
            Linear s{dt, {}, 0};
            for (const auto& t : l.terms) s.terms.push_back({t.mono, 1});
            if (bounds_of_terms(dt, s.terms, 0)) return cmp(rebuild(s), 1);
        }
    }
    // g*q + r < c with 0 <= r < g and g | c  <=>  q < c/g: g*q + r < c <=> g*q < c - r <=>
    // q < c/g - r/g <=> q < c/g (0 <= r/g < 1). (The constant is 0 here: moved to c above.)
    {
        int64_t g = 1;
        if (auto q = split_by_gcd(l, c, g)) return cmp(rebuild(*q), c / g);
    }
    // d*q + r < c with 0 <= r < d and d | c  <=>  q < c/d.
    for (const auto& cand : l.terms) {
        const int64_t d = cand.coef;
        if (d <= 1 || c % d != 0) continue;
        Linear q{dt, {}, 0};
        Terms rest;
        for (const auto& t : l.terms) {
            if (t.coef % d == 0)
                q.terms.push_back({t.mono, t.coef / d});
            else
                rest.push_back(t);
        }
        if (rest.empty()) continue;
        auto rb = bounds_of_terms(dt, rest, 0);
        if (!rb || rb->first < 0 || rb->second >= d) continue;
        return cmp(rebuild(q), c / d);
    }
    return std::nullopt;
}

} // namespace tempura::symbolic
