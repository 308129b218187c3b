// Differential fuzzing of simplify(): random integer expressions over bounded variables, biased
// toward index arithmetic ((a*c1 + b*c2 + c3)/c4 % c5, nested div/mod, div/mod recombination) so
// the folding rules get exercised. Division is mostly by constants, sometimes by a variable whose
// range excludes 0, rarely by any subexpression (assignments where the original divides by zero are
// skipped). For every expression e and s = simplify(e), at random
// assignments within the variables' bounds: evaluate(s) == evaluate(e), and the value lies within
// both [s.vmin(), s.vmax()] and [e.vmin(), e.vmax()].
//
// TEMPURA_FUZZ_N overrides the number of expressions (default 100000, or 20000 under
// AddressSanitizer, which makes this test about 30x slower); TEMPURA_FUZZ_SEED the seed.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <tempura/tempura.hpp>

#include "../support.hpp"
#include "case_file.hpp"

namespace {

using tempura::UOp;

constexpr int64_t kDefaultCount = kTestUnderAsan ? 20000 : 100000;

// Generated values stay far from int64 overflow (in the expression and in any sane rewrite of it).
constexpr int64_t kMagLimit = int64_t{1} << 36;

struct Var {
    std::string name;
    int64_t lo, hi;
    UOp u;
};

// An integer expression and a bound on its absolute value (to keep products from overflowing).
struct IExpr {
    UOp u;
    int64_t mag;
};

int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

class Generator {
  public:
    explicit Generator(uint64_t seed) : rng_(seed) {
        // A fixed pool of variables; each expression draws 6 of them.
        for (int i = 0; i < 10; ++i) { // signed, random bounds within [-50, 50]
            int64_t a = uniform(-50, 50), b = uniform(-50, 50);
            if (a > b) std::swap(a, b);
            add_var("s" + std::to_string(i), a, b);
        }
        for (int i = 0; i < 10; ++i) { // index-like, [0, 2^k - 1]
            int k = static_cast<int>(uniform(1, 8));
            add_var("i" + std::to_string(i), 0, (int64_t{1} << k) - 1);
        }
        for (int i = 0; i < 4; ++i) // sizes, [1, n]
            add_var("n" + std::to_string(i), 1, uniform(1, 64));
        // A few wider, one-sided and single-valued ranges.
        add_var("w0", -1000, 1000);
        add_var("w1", 0, 4095);
        add_var("w2", -4096, -1);
        add_var("k0", 5, 5);
        add_var("k1", -3, -3);
    }

    void reseed(uint64_t seed) { rng_.seed(seed); }

    int64_t uniform(int64_t lo, int64_t hi) {
        return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
    }
    bool chance(double p) { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p; }

    // Picks the variables of the next expression.
    void choose_vars() {
        cur_.clear();
        std::vector<size_t> idx(pool_.size());
        for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
        std::shuffle(idx.begin(), idx.end(), rng_);
        for (size_t i = 0; i < 6; ++i) cur_.push_back(&pool_[idx[i]]);
    }
    const std::vector<const Var*>& vars() const { return cur_; }

    // One expression: mostly integer, sometimes a comparison or boolean combination at the top.
    UOp expression() {
        int depth = static_cast<int>(uniform(1, 5));
        double r = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
        if (r < 0.15) return boolean(depth);
        if (r < 0.40) return index_shape(depth).u;
        return integer(depth).u;
    }

  private:
    std::mt19937_64 rng_;
    std::vector<Var> pool_;
    std::vector<const Var*> cur_;

    void add_var(std::string name, int64_t lo, int64_t hi) {
        UOp u = UOp::variable(name, lo, hi);
        pool_.push_back(Var{std::move(name), lo, hi, u});
    }

    IExpr var() {
        const Var* v = cur_[static_cast<size_t>(uniform(0, static_cast<int64_t>(cur_.size()) - 1))];
        return {v->u, std::max(abs64(v->lo), abs64(v->hi))};
    }
    IExpr constant() {
        int64_t c = uniform(-12, 12);
        return {UOp::index(c), abs64(c)};
    }
    // A variable of the current expression whose range excludes 0, else a nonzero constant.
    IExpr nonzero_var() {
        std::vector<const Var*> ok;
        for (const Var* v : cur_)
            if (v->lo > 0 || v->hi < 0) ok.push_back(v);
        if (ok.empty()) {
            int64_t d = divisor();
            return {UOp::index(d), abs64(d)};
        }
        const Var* v = ok[static_cast<size_t>(uniform(0, static_cast<int64_t>(ok.size()) - 1))];
        return {v->u, std::max(abs64(v->lo), abs64(v->hi))};
    }
    IExpr leaf() { return chance(0.75) ? var() : constant(); }

    // A nonzero divisor: mostly positive, small or a power of two, sometimes negative.
    int64_t divisor() {
        static const int64_t common[] = {1,  2,  3,  4,  5,  6,   7,   8,  9,
                                         12, 16, 24, 32, 64, 100, 128, 256};
        int64_t d = chance(0.75) ? common[uniform(0, std::size(common) - 1)] : uniform(2, 300);
        return chance(0.2) ? -d : d;
    }
    // A coefficient, sometimes a multiple of `of` (so that it divides out under / and % by `of`).
    int64_t coefficient(int64_t of) {
        if (of != 0 && chance(0.35)) return of * uniform(chance(0.2) ? -3 : 1, 3);
        int64_t c = uniform(1, 16);
        return chance(0.15) ? -c : c;
    }

    static IExpr add(const IExpr& a, const IExpr& b) { return {a.u + b.u, a.mag + b.mag}; }
    static IExpr mulc(const IExpr& a, int64_t c) { return {a.u * c, a.mag * abs64(c)}; }

    // c1*a + c2*b + c3 with a, b variables or small subexpressions; `of` biases the coefficients.
    IExpr linear(int depth, int64_t of) {
        IExpr a = depth > 1 && chance(0.25) ? integer(depth - 1) : var();
        IExpr b = depth > 1 && chance(0.25) ? integer(depth - 1) : var();
        int64_t c1 = coefficient(of), c2 = coefficient(of);
        IExpr t = add(mulc(a, c1), mulc(b, c2));
        if (chance(0.3)) { // a third term
            t = add(t, mulc(var(), coefficient(of)));
        }
        if (chance(0.7)) {
            int64_t c3 =
                chance(0.3) && of != 0 ? of * uniform(-2, 2) + uniform(-1, 1) : uniform(-20, 64);
            t = {chance(0.5) ? t.u + c3 : c3 + t.u, t.mag + abs64(c3)};
        }
        if (t.mag > kMagLimit) return var();
        return t;
    }

    // The shapes index arithmetic produces.
    IExpr index_shape(int depth) {
        int64_t c4 = divisor(), c5 = divisor();
        IExpr t = linear(depth, c4);
        switch (uniform(0, 10)) {
        case 8: // the chain recombination: (t / c4 % c5) * c4 * k + (t % c4) * k
        {
            const int64_t k = uniform(-3, 3);
            return {(t.u / c4 % c5) * c4 * k + (t.u % c4) * k, 3 * t.mag * (abs64(k) + 1)};
        }
        case 9: // a variable denominator: (t * v + r) / v and % v
        {
            const IExpr v = nonzero_var(), r = var();
            if (t.mag * v.mag + r.mag > kMagLimit) return t;
            const UOp num = t.u * v.u + r.u;
            return {chance(0.5) ? num / v.u : num % v.u, t.mag * v.mag + r.mag};
        }
        case 10: // a comparison-friendly sum with a simplex bound or a common factor, as 0/1
            return {where(t.u * c4 + var().u < uniform(-2, 300), UOp::index(1), UOp::index(0)), 1};
        case 0: return {(t.u / c4) % c5, std::min(t.mag, abs64(c5) - 1)};
        case 1: return {t.u / c4, t.mag};
        case 2: return {t.u % c4, std::min(t.mag, abs64(c4) - 1)};
        case 3: // ((t / c4) % c5) + t % c4
            return {(t.u / c4) % c5 + t.u % c4,
                    std::min(t.mag, abs64(c5) - 1) + std::min(t.mag, abs64(c4) - 1)};
        case 4: // recombination: (t / c4) * c4 + t % c4 == t
            return {(t.u / c4) * c4 + t.u % c4, 2 * t.mag};
        case 5: return {(t.u % c5) / c4, t.mag};
        case 6: return {(t.u / c4) / c5, t.mag};
        default: return {(t.u % c4) % c5, std::min({t.mag, abs64(c4) - 1, abs64(c5) - 1})};
        }
    }

    IExpr integer(int depth) {
        if (depth <= 0) return leaf();
        int64_t r = uniform(0, 99);
        if (r < 12) return add(integer(depth - 1), integer(depth - 1));
        if (r < 18) {
            IExpr a = integer(depth - 1), b = integer(depth - 1);
            return {a.u - b.u, a.mag + b.mag};
        }
        if (r < 28) {
            IExpr a = integer(depth - 1);
            int64_t c = uniform(-8, 8);
            return {chance(0.5) ? a.u * c : c * a.u, a.mag * abs64(c)};
        }
        if (r < 33) { // variable times expression, when the product stays small
            IExpr a = var(), b = integer(depth - 1);
            if (a.mag * b.mag <= kMagLimit)
                return {chance(0.5) ? a.u * b.u : b.u * a.u, a.mag * b.mag};
            return add(a, b);
        }
        if (r < 42) {
            IExpr a = integer(depth - 1);
            int64_t d = divisor();
            return {chance(0.85) ? a.u / d : a.u / UOp::index(d), a.mag};
        }
        if (r < 51) {
            IExpr a = integer(depth - 1);
            int64_t d = divisor();
            return {chance(0.85) ? a.u % d : a.u % UOp::index(d), std::min(a.mag, abs64(d) - 1)};
        }
        if (r < 54) { // by a variable whose range excludes 0, or (rarely) by any subexpression
            IExpr a = integer(depth - 1);
            IExpr d = chance(0.8) ? nonzero_var() : integer(depth - 1);
            if (chance(0.5)) return {a.u / d.u, a.mag};
            return {a.u % d.u, a.mag};
        }
        if (r < 67) return index_shape(depth - 1);
        if (r < 74) {
            IExpr a = integer(depth - 1), b = integer(depth - 1);
            return {tempura::maximum(a.u, b.u), std::max(a.mag, b.mag)};
        }
        if (r < 82) {
            UOp c = boolean(depth - 1);
            IExpr a = integer(depth - 1), b = integer(depth - 1);
            return {tempura::where(c, a.u, b.u), std::max(a.mag, b.mag)};
        }
        if (r < 87) {
            IExpr a = integer(depth - 1);
            return {-a.u, a.mag};
        }
        if (r < 92) { // a constant at an inner position
            IExpr a = integer(depth - 1);
            int64_t c = uniform(-20, 20);
            return {chance(0.5) ? a.u + c : a.u - c, a.mag + abs64(c)};
        }
        return leaf();
    }

    UOp compare(int depth) {
        IExpr a = chance(0.4) ? index_shape(std::max(depth - 1, 1)) : integer(depth - 1);
        int64_t op = uniform(0, 2);
        if (chance(0.5)) { // against a constant, on either side
            int64_t c = uniform(-a.mag - 2, a.mag + 2);
            bool left = chance(0.3);
            switch (op) {
            case 0: return left ? (c < a.u) : (a.u < c);
            // == and != take the constant as a UOp: the int64_t overloads of these two are
            // checked on their own in test_api.cpp (C++20 reversed candidates can make them
            // ambiguous, which would stop this file from compiling).
            case 1: return left ? (UOp::index(c) == a.u) : (a.u == UOp::index(c));
            default: return left ? (UOp::index(c) != a.u) : (a.u != UOp::index(c));
            }
        }
        IExpr b = integer(depth - 1);
        switch (op) {
        case 0: return a.u < b.u;
        case 1: return a.u == b.u;
        default: return a.u != b.u;
        }
    }

    UOp boolean(int depth) {
        if (depth <= 0) return compare(0);
        int64_t r = uniform(0, 99);
        if (r < 55) return compare(depth);
        if (r < 90) {
            UOp a = boolean(depth - 1), b = boolean(depth - 1);
            switch (uniform(0, 2)) {
            case 0: return a & b;
            case 1: return a | b;
            default: return a ^ b;
            }
        }
        if (r < 95) return UOp::boolean(chance(0.5));
        return compare(depth - 1);
    }
};

using tempura_test::safe_render;
using tempura_test::show;

std::string var_bounds(const std::vector<const Var*>& vars) {
    std::ostringstream os;
    for (const Var* v : vars) os << v->name << "=" << v->lo << ".." << v->hi << " ";
    return os.str();
}

} // namespace

TEST_CASE("symbolic fuzz: simplify preserves values and bounds hold") {
    const int64_t n = env_int("TEMPURA_FUZZ_N", kDefaultCount);
    const uint64_t seed = static_cast<uint64_t>(env_int("TEMPURA_FUZZ_SEED", 0x5eed7e3907a));
    constexpr int kAssignments = 8;
    constexpr int kShown = 10;

    Generator gen(seed);
    int64_t mismatches = 0, value_mismatches = 0, simplified_bounds = 0, original_bounds = 0,
            throws = 0;
    int64_t skipped = 0, evaluated = 0, grew = 0, nodes_in = 0, nodes_out = 0;
    std::vector<std::string> shown, grew_examples;
    auto t0 = std::chrono::steady_clock::now();
    // Time inside simplify(), in total and for the slowest call (reported, not checked).
    double simplify_secs = 0, throw_secs = 0, slowest_secs = 0;
    std::string slowest;

    auto record = [&](const std::string& what) {
        ++mismatches;
        if (static_cast<int>(shown.size()) < kShown) shown.push_back(what);
    };

    for (int64_t k = 0; k < n; ++k) {
        // Each expression has its own stream, so expression #k is the same whatever happened to
        // the ones before it (a failure stops drawing assignments early).
        gen.reseed(seed ^ (static_cast<uint64_t>(k + 1) * 0x9E3779B97F4A7C15ull));
        gen.choose_vars();
        UOp e = gen.expression();
        std::optional<UOp> s;
        auto ts = std::chrono::steady_clock::now();
        try {
            s = tempura::simplify(e);
        } catch (const std::exception& ex) {
            double dt =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count();
            simplify_secs += dt;
            throw_secs += dt;
            ++throws;
            record("#" + std::to_string(k) + " simplify threw: " + ex.what() +
                   "\n    e = " + safe_render(e) + "\n    vars " + var_bounds(gen.vars()));
            continue;
        }
        double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count();
        simplify_secs += dt;
        if (dt > slowest_secs) {
            slowest_secs = dt;
            slowest = safe_render(e);
        }
        size_t ne = e.node_count(), ns = s->node_count();
        nodes_in += static_cast<int64_t>(ne);
        nodes_out += static_cast<int64_t>(ns);
        if (ns > ne && grew++ < 3)
            grew_examples.push_back(safe_render(e) + "  (" + std::to_string(ne) + " nodes)  ->  " +
                                    safe_render(*s) + "  (" + std::to_string(ns) + " nodes)");

        const int64_t emin = e.vmin(), emax = e.vmax(), smin = s->vmin(), smax = s->vmax();
        for (int j = 0; j < kAssignments; ++j) {
            std::map<std::string, int64_t> a;
            for (const Var* v : gen.vars()) {
                int64_t r = gen.uniform(0, 9);
                a[v->name] = r < 2 ? v->lo : r < 4 ? v->hi : gen.uniform(v->lo, v->hi);
            }
            int64_t ve = 0, vs = 0;
            try {
                ve = tempura::evaluate(e, a);
            } catch (const tempura::Error&) {
                ++skipped; // e.g. division by zero in the original: nothing to compare
                continue;
            }
            ++evaluated;
            auto detail = [&](const std::string& kind, const std::string& extra) {
                return "#" + std::to_string(k) + " " + kind + "\n    e = " + safe_render(e) +
                       "\n    s = " + safe_render(*s) + "\n    at " + show(a) + "  (vars " +
                       var_bounds(gen.vars()) + ")\n    " + extra;
            };
            try {
                vs = tempura::evaluate(*s, a);
            } catch (const std::exception& ex) {
                ++value_mismatches;
                record(detail("evaluate(simplified) threw",
                              std::string(ex.what()) + "; e = " + std::to_string(ve)));
                break;
            }
            if (vs != ve) {
                ++value_mismatches;
                record(detail("value mismatch",
                              "e = " + std::to_string(ve) + ", s = " + std::to_string(vs)));
                break;
            }
            if (ve < smin || ve > smax) {
                ++simplified_bounds;
                record(detail("value outside the simplified bounds",
                              "value " + std::to_string(ve) + " not in [" + std::to_string(smin) +
                                  ", " + std::to_string(smax) + "]"));
                break;
            }
            if (ve < emin || ve > emax) {
                ++original_bounds;
                record(detail("value outside the original's bounds",
                              "value " + std::to_string(ve) + " not in [" + std::to_string(emin) +
                                  ", " + std::to_string(emax) + "]"));
                break;
            }
        }
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    std::ostringstream os;
    os << n << " expressions (seed " << seed << "), " << evaluated << " assignments compared, "
       << skipped << " skipped (evaluate threw on the original), " << secs << " s\n"
       << "  nodes in " << nodes_in << ", out " << nodes_out << " (ratio "
       << (nodes_in ? static_cast<double>(nodes_out) / static_cast<double>(nodes_in) : 0.0) << ")\n"
       << "  time in simplify " << simplify_secs << " s (" << throw_secs
       << " s of it in calls that threw); slowest call that returned " << slowest_secs * 1e3
       << " ms on " << slowest << "\n"
       << "  simplified larger than the original: " << grew << " of " << n;
    for (const std::string& g : grew_examples) os << "\n    e.g. " << g;
    MESSAGE(os.str());

    if (mismatches) {
        std::ostringstream m;
        m << mismatches << " failing expressions: " << value_mismatches << " wrong values, "
          << simplified_bounds << " outside simplify(e)'s bounds, " << original_bounds
          << " outside e's bounds, " << throws << " simplify threw. First " << shown.size() << ":";
        for (const std::string& s : shown) m << "\n  " << s;
        MESSAGE(m.str());
    }
    CHECK(evaluated > 0);
    CHECK(mismatches == 0);
}
