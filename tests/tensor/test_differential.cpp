// Differential testing: random tensor programs, realized through the scheduler and the CPU
// backend (LLVM JIT), compared element by element with the reference interpreter evaluating the
// same lazy graph (reference_eval_array on t.uop(), taken BEFORE realize()).
//
// TEMPURA_DIFF_N     number of programs (default 2000)
// TEMPURA_DIFF_SEED  base seed (default 20240611; the sequence is that of libstdc++'s
//                    distributions); program i uses its own seed derived from both,
//                    so one failing program can be replayed alone:
// TEMPURA_DIFF_ONLY  run only program i (prints its text and result)
// TEMPURA_DIFF_VERBOSE=1 prints every program
// TEMPURA_DIFF_PRINT how many failing programs to print in full (default 10)
//
// Programs are valid by construction (no tempura::Error may escape them; one that does is
// reported as a failure with its message). They mix float32 (mostly), int32 and bool tensors of
// 0-4 dims, size-1 and size-0 dims included, and chain: broadcasting binary ops (scalars on
// either side), unary math, comparisons + where, casts, movement ops, reductions, argmax/argmin,
// dot/matmul (all shape rules), softmax/log_softmax, cat, contiguous, and the occasional realize()
// of an intermediate (which is then checked too, and becomes an input of what follows).
//
// Comparison. Integers and bools: exact. Floats: both NaN, or the same infinity, or
//     |got - want| <= 1e-5 * max(1, |got|, |want|) + allowance
// where `allowance` is an absolute error bound the generator carries along with every value.
// It is 0 for a value computed only from ops that are bit-identical in both implementations
// (inputs, movement, neg/abs/relu/max/min, where, casts, and +,-,*,/,sqrt of such values with no
// FMA contraction possible), and it grows with standard first-order error propagation otherwise
// (u = 2^-24, the float32 unit roundoff; B = a bound on |value|):
//   - a sum of n terms may be added up in another order (and with products fused into FMAs):
//     allowance n*E + 2*n*u*(n*B), the textbook bound 2*gamma_n*sum|x_i| on the difference of two
//     summation orders ("scaled by the number of summed terms"); matmul likewise with K terms;
//   - a transcendental (exp2/log2/sin from libm vs correctly rounded double) adds a few ulps;
//   - a rounding that an FMA may skip adds u*B;
//   - an op propagates its inputs' allowances through its derivative (exp multiplies by e^B,
//     sqrt(|x|) takes sqrt(E), sigmoid E/4, ...).
// Ops whose output is discontinuous in their input (comparisons, argmax, float->int/bool casts)
// are only applied to exact values, so a 1-ulp difference upstream cannot flip them. Float values
// are kept in sane ranges: inputs uniform in [-2, 2] (30% quantized to multiples of 0.5, for ties
// and equalities), exp only on |x| <= 8, divisions only by |b| + 1 or a non-zero scalar, log only
// of |x| + 1, sqrt only of |x|, products and matmuls only while the bound stays under 1e6.
#include <doctest/doctest.h>

#include "../gpu/ptxas.hpp"
#include "../support.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

namespace {

using tempura::DType;
using tempura::Shape;
using tempura::Tensor;

constexpr double kU = 0x1p-24;           // float32 unit roundoff
constexpr double kGrowthLimit = 1e6;     // products, matmuls, exp keep |value| below this
constexpr double kIntCap = 2147483648.0; // int32 bounds are capped here (wrapping is exact)
constexpr int64_t kMaxNumel = 512;

double mulz(double a, double b) { return a == 0 || b == 0 ? 0 : a * b; }

std::string dt_str(DType d) {
    if (d == DType::Float32) return "f32";
    if (d == DType::Int32) return "i32";
    if (d == DType::Bool) return "bool";
    return d.name();
}

std::string num_str(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

int64_t numel_of(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

bool broadcastable(const Shape& a, const Shape& b) {
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        const int64_t x = a[a.size() - 1 - i], y = b[b.size() - 1 - i];
        if (x != y && x != 1 && y != 1) return false;
    }
    return true;
}

Shape broadcast(const Shape& a, const Shape& b) {
    const size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (size_t i = 0; i < n; ++i) {
        const int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
        const int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
        out[n - 1 - i] = x == 1 ? y : x;
    }
    return out;
}

uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// A value of the program: the lazy tensor and what the generator knows about it.
struct Val {
    Tensor t;
    std::string name;
    double bound = 0;     // |element| <= bound (inf after an empty max/min: elements are +-inf)
    double err = 0;       // allowance: |compiled - reference| <= err (floats)
    bool exact = true;    // compiled and reference agree bit for bit
    bool fusable = false; // exact, but an FMA may absorb its rounding into a following add
};

struct Info {
    double bound, err;
    bool exact, fusable;
};

bool is_f(const Val& v) { return v.t.dtype() == DType::Float32; }
bool is_i(const Val& v) { return v.t.dtype() == DType::Int32; }
bool is_b(const Val& v) { return v.t.dtype() == DType::Bool; }

Info info_of(const Val& v) { return {v.bound, v.err, v.exact, v.fusable}; }

// The result of comparing one realized value with the reference (empty detail: they agree).
struct Outcome {
    std::string detail;
    std::vector<std::string> kernels;
};

Outcome compare_with_reference(Val& v) {
    Outcome out;
    const tempura::ReferenceArray ref = tempura::reference_eval_array(v.t.uop()); // before realize
    const std::vector<double> got = v.t.to_vector<double>();
    for (const auto& k : v.t.kernels()) out.kernels.push_back(k.name);
    // On EMU every new kernel's PTX must assemble (ptxas, where CMake found the toolkit).
    if (v.t.device() == "EMU")
        for (const auto& k : v.t.kernels()) {
            static std::set<size_t> checked;
            if (!checked.insert(std::hash<std::string>{}(k.source)).second) continue;
            if (std::string e = ptxas(k.source, "sm_80"); !e.empty()) {
                out.detail = v.name + ": kernel " + k.name + ": " + e;
                return out;
            }
        }
    const Shape& shape = v.t.shape();
    if (ref.shape != shape) {
        out.detail = v.name + ": reference shape " + tempura::shape_str(ref.shape) +
                     ", tensor shape " + tempura::shape_str(shape);
        return out;
    }
    if (static_cast<int64_t>(got.size()) != ref.size() ||
        static_cast<int64_t>(got.size()) != numel_of(shape)) {
        out.detail = v.name + ": compiled " + std::to_string(got.size()) + " elements, reference " +
                     std::to_string(ref.size()) + ", shape " + tempura::shape_str(shape);
        return out;
    }
    const bool flt = v.t.dtype().is_float();
    int64_t bad = 0, first = -1;
    double first_tol = 0;
    for (int64_t i = 0; i < ref.size(); ++i) {
        const double want = ref.at(i), have = got[static_cast<size_t>(i)];
        bool ok;
        double tol = 0;
        if (!flt)
            ok = want == have;
        else if (std::isnan(want) || std::isnan(have))
            ok = std::isnan(want) && std::isnan(have);
        else if (std::isinf(want) || std::isinf(have))
            ok = want == have;
        else {
            tol = 1e-5 * std::max({1.0, std::fabs(want), std::fabs(have)}) + v.err;
            // Equal values agree whatever the allowance (0 * inf in the error model of an empty
            // reduction makes it NaN).
            ok = want == have || std::fabs(want - have) <= tol;
        }
        if (!ok) {
            if (bad++ == 0) first = i, first_tol = tol;
        }
    }
    if (bad == 0) return out;
    Shape idx(shape.size());
    int64_t rest = first;
    for (size_t d = shape.size(); d-- > 0;) {
        idx[d] = rest % shape[d];
        rest /= shape[d];
    }
    out.detail = v.name + " (" + dt_str(v.t.dtype()) + tempura::shape_str(shape) +
                 "): " + std::to_string(bad) + " of " + std::to_string(ref.size()) +
                 " elements differ; first at flat index " + std::to_string(first) + " " +
                 tempura::shape_str(idx) + ": compiled " +
                 num_str(got[static_cast<size_t>(first)]) + ", reference " + num_str(ref.at(first));
    if (flt)
        out.detail += " (tolerance " + num_str(first_tol) + ", allowance " + num_str(v.err) + ")";
    return out;
}

// ---- the generator -----------------------------------------------------------------------------

class Gen : RandomChoices {
  public:
    explicit Gen(uint64_t seed) : RandomChoices(seed) {}

    std::vector<Val> vals;
    std::string text;
    // Called on an intermediate value right before it is realized mid-program.
    std::function<void(Val&)> check_now;

    void generate() {
        const int inputs = static_cast<int>(irange(1, 2));
        for (int i = 0; i < inputs; ++i) input(rshape(), rdtype());
        cur_ = static_cast<int>(vals.size()) - 1;
        const int steps = static_cast<int>(irange(2, 10));
        for (int s = 0; s < steps; ++s) step();
    }

    // The value the chain of steps ends in.
    Val& result() { return vals[static_cast<size_t>(cur_)]; }

  private:
    int cur_ = 0; // the head of the chain: the main operand of the next step

    int64_t rdim() {
        static const int64_t dims[] = {0, 1, 2, 3, 4, 5, 7};
        return dims[weighted({4, 22, 22, 22, 16, 10, 4})];
    }
    Shape rshape(int nd) {
        for (;;) {
            Shape s;
            for (int i = 0; i < nd; ++i) s.push_back(rdim());
            if (numel_of(s) <= 256) return s;
        }
    }
    Shape rshape() { return rshape(static_cast<int>(weighted({10, 25, 35, 20, 10}))); }
    DType rdtype() {
        const size_t k = weighted({75, 15, 10});
        return k == 0 ? DType::Float32 : k == 1 ? DType::Int32 : DType::Bool;
    }

    // ---- values ---------------------------------------------------------------------------
    int add(Tensor t, const std::string& expr, Info info) {
        Val v;
        v.name = "v" + std::to_string(vals.size());
        v.t = std::move(t);
        if (is_i(v)) info = {std::min(info.bound, kIntCap), 0, true, false};
        if (is_b(v)) info = {1, 0, true, false};
        v.bound = info.bound;
        v.err = info.err;
        v.exact = info.exact && info.err == 0;
        v.fusable = v.exact && info.fusable;
        text += "  " + v.name + " = " + expr + "    : " + dt_str(v.t.dtype()) +
                tempura::shape_str(v.t.shape());
        if (v.err > 0) text += "  (allowance " + num_str(v.err) + ")";
        text += "\n";
        vals.push_back(std::move(v));
        return static_cast<int>(vals.size()) - 1;
    }

    int input(const Shape& s, DType dt) {
        const int64_t n = numel_of(s);
        std::string expr = "input";
        std::string data;
        Tensor t;
        double bound = 0;
        if (dt == DType::Float32) {
            std::vector<float> v(static_cast<size_t>(n));
            const bool quantized = chance(0.3);
            for (auto& x : v) {
                x = quantized ? static_cast<float>(irange(-4, 4)) * 0.5f
                              : static_cast<float>(urand(-2, 2));
                bound = std::max(bound, static_cast<double>(std::fabs(x)));
                data += (data.empty() ? "" : ", ") + num_str(x);
            }
            t = Tensor::from_vector(v, s);
        } else if (dt == DType::Int32) {
            std::vector<int32_t> v(static_cast<size_t>(n));
            for (auto& x : v) {
                x = static_cast<int32_t>(irange(-5, 5));
                bound = std::max(bound, std::fabs(static_cast<double>(x)));
                data += (data.empty() ? "" : ", ") + std::to_string(x);
            }
            t = Tensor::from_vector(v, s);
        } else {
            std::vector<bool> v(static_cast<size_t>(n));
            for (size_t i = 0; i < v.size(); ++i) {
                v[i] = chance(0.5);
                data += (data.empty() ? "" : ", ") + std::string(v[i] ? "1" : "0");
            }
            bound = 1;
            t = Tensor::from_vector(v, s);
        }
        if (n <= 16) expr += " {" + data + "}";
        return add(std::move(t), expr, {bound, 0, true, false});
    }

    // The main operand of a step: usually the head of the chain.
    int pick() {
        if (chance(0.8)) return cur_;
        return static_cast<int>(irange(0, static_cast<int64_t>(vals.size()) - 1));
    }

    // Another value that broadcasts with `s`, preferring recent ones; -1 if none.
    int pick_compatible(const Shape& s, int avoid, bool need_exact) {
        std::vector<int> c;
        for (int i = 0; i < static_cast<int>(vals.size()); ++i) {
            if (i == avoid && chance(0.7)) continue;
            const Val& v = vals[i];
            if (!broadcastable(s, v.t.shape())) continue;
            if (numel_of(broadcast(s, v.t.shape())) > kMaxNumel) continue;
            if (need_exact && !v.exact) continue;
            c.push_back(i);
        }
        if (c.empty()) return -1;
        if (chance(0.5)) return c.back();
        return c[static_cast<size_t>(irange(0, static_cast<int64_t>(c.size()) - 1))];
    }

    // A shape that broadcasts with `s` (drops or adds leading dims, 1s, grows where s has 1s).
    Shape bshape(const Shape& s) {
        const int nd = static_cast<int>(s.size());
        int bnd = nd;
        if (chance(0.25)) bnd = static_cast<int>(irange(0, nd));
        if (nd < 4 && chance(0.1)) bnd = nd + 1;
        Shape b;
        for (int i = 0; i < bnd; ++i) {
            const int j = nd - bnd + i;
            if (j < 0)
                b.push_back(irange(1, 3));
            else if (s[j] == 1)
                b.push_back(chance(0.3) ? irange(2, 4) : 1);
            else
                b.push_back(chance(0.3) ? 1 : s[j]);
        }
        if (numel_of(broadcast(s, b)) > kMaxNumel) return s;
        return b;
    }

    // v converted to dtype dt (a cast when allowed, else a fresh input of the same shape).
    int coerce(int vi, DType dt) {
        if (vals[vi].t.dtype() == dt) return vi;
        const int c = cast_to(vi, dt);
        if (c >= 0) return c;
        return input(vals[vi].t.shape(), dt);
    }

    int cast_to(int vi, DType dt) {
        const Val a = vals[vi];
        const DType from = a.t.dtype();
        if (from == dt) return -1;
        if (from == DType::Float32 && (!a.exact || !(a.bound < 1e9))) return -1;
        Info info{a.bound, 0, true, false};
        if (dt == DType::Float32) info.bound = std::min(a.bound, kIntCap);
        if (dt == DType::Int32) info.bound = std::floor(a.bound);
        return add(a.t.cast(dt), a.name + ".cast(" + dt_str(dt) + ")", info);
    }

    // ---- steps ----------------------------------------------------------------------------
    void step() {
        for (int attempt = 0; attempt < 8; ++attempt) {
            const size_t k = weighted({22, 14, 10, 5, 22, 12, 3, 6, 4, 4, 1, 2, 4});
            const int a = pick();
            int r = -1;
            switch (k) {
            case 0: r = binary(a); break;
            case 1: r = unary(a); break;
            case 2: r = compare(a); break;
            case 3: r = cast_to(a, rdtype()); break;
            case 4: r = movement(a); break;
            case 5: r = reduce(a); break;
            case 6: r = argmax(a); break;
            case 7: r = matmul(a); break;
            case 8: r = softmax(a); break;
            case 9: r = cat(a); break;
            case 10:
                r = add(vals[a].t.contiguous(), vals[a].name + ".contiguous()", info_of(vals[a]));
                break;
            case 11: r = realize_mid(a); break;
            case 12: r = indexing(a); break;
            }
            if (r >= 0) {
                cur_ = r;
                return;
            }
        }
    }

    // Scalars: float ones are exact in float32.
    double fscalar() {
        static const double s[] = {0.5, -1.25, 2.0, 3.5, -0.75, 1.0, -2.0};
        return s[irange(0, 6)];
    }
    int64_t iscalar() {
        static const int64_t s[] = {-3, -1, 2, 3, 4, 1, -2};
        return s[irange(0, 6)];
    }

    // a op b with broadcasting; scalars on either side.
    int binary(int ai) {
        if (is_b(vals[ai])) ai = coerce(ai, chance(0.7) ? DType::Float32 : DType::Int32);
        const Val a = vals[ai];
        const DType dt = a.t.dtype();
        const bool flt = dt == DType::Float32;
        const int op = static_cast<int>(irange(0, 5)); // + - * / maximum minimum
        static const char* const sym[] = {"+", "-", "*", "/", "max", "min"};
        const size_t mode = weighted({40, 35, 13, 12}); // pool, fresh, scalar right, scalar left
        Tensor t;
        std::string expr;
        Info ia = info_of(a), ib{};
        if (mode <= 1) {
            int bi = mode == 0 ? pick_compatible(a.t.shape(), ai, false) : -1;
            if (bi < 0) bi = input(bshape(a.t.shape()), dt);
            bi = coerce(bi, dt);
            const Val b = vals[bi];
            ib = info_of(b);
            Tensor bt = b.t;
            std::string bn = b.name;
            if (op == 3) { // divide by |b| + 1 (never by 0)
                bt = flt ? b.t.abs() + 1.0f : b.t.abs() + 1;
                bn = "(" + b.name + ".abs() + 1)";
                ib = {b.bound + 1, b.err, b.exact, false};
            }
            switch (op) {
            case 0: t = a.t + bt; break;
            case 1: t = a.t - bt; break;
            case 2: t = a.t * bt; break;
            case 3: t = a.t / bt; break;
            case 4: t = tempura::maximum(a.t, bt); break;
            default: t = tempura::minimum(a.t, bt); break;
            }
            expr = op >= 4 ? std::string(sym[op]) + "(" + a.name + ", " + bn + ")"
                           : a.name + " " + sym[op] + " " + bn;
        } else {
            const double c = flt ? fscalar() : static_cast<double>(iscalar());
            const std::string cs = flt ? num_str(c) + "f" : num_str(c);
            const bool right = mode == 2;
            ib = {std::fabs(c), 0, true, false};
            if (op == 3 && !right) { // c / (|a| + 1)
                Tensor den = flt ? a.t.abs() + 1.0f : a.t.abs() + 1;
                t = flt ? static_cast<float>(c) / den : static_cast<int32_t>(c) / den;
                expr = cs + " / (" + a.name + ".abs() + 1)";
                const Info d{a.bound + 1, a.err, a.exact, false};
                const bool ex = d.exact;
                const double B = std::fabs(c);
                return add(t, expr, {B, mulz(B, d.err) + (ex ? 0 : kU * B), ex, false});
            }
            auto apply = [&](auto cv) {
                switch (op) {
                case 0: t = right ? a.t + cv : cv + a.t; break;
                case 1: t = right ? a.t - cv : cv - a.t; break;
                case 2: t = right ? a.t * cv : cv * a.t; break;
                case 3: t = a.t / cv; break;
                case 4: t = tempura::maximum(a.t, Tensor::full(Shape{}, cv, dt)); break;
                default: t = tempura::minimum(Tensor::full(Shape{}, cv, dt), a.t); break;
                }
            };
            if (flt)
                apply(static_cast<float>(c));
            else
                apply(static_cast<int32_t>(c));
            if (op >= 4)
                expr = std::string(sym[op]) + "(" + a.name + ", " + cs + ")";
            else
                expr = right || op == 3 ? a.name + " " + sym[op] + " " + cs
                                        : cs + " " + sym[op] + " " + a.name;
        }
        // Error model.
        Info r{};
        const bool both = ia.exact && ib.exact;
        switch (op) {
        case 0:
        case 1: {
            const bool ex = both && !ia.fusable && !ib.fusable;
            r.bound = ia.bound + ib.bound;
            r.err = ia.err + ib.err + (ex ? 0 : kU * r.bound);
            r.exact = ex;
            break;
        }
        case 2:
            r.bound = mulz(ia.bound, ib.bound);
            r.err = mulz(ia.err, ib.bound) + mulz(ib.err, ia.bound) + mulz(ia.err, ib.err) +
                    (both ? 0 : kU * r.bound);
            r.exact = both;
            r.fusable = both;
            break;
        case 3:
            if (mode <= 1) { // a / (|b| + 1)
                r.bound = ia.bound;
                r.err = ia.err + mulz(ia.bound, ib.err) + (both ? 0 : kU * r.bound);
            } else { // a / c
                r.bound = ia.bound / ib.bound;
                r.err = ia.err / ib.bound + (both ? 0 : kU * r.bound);
            }
            r.exact = both;
            break;
        default:
            r.bound = std::max(ia.bound, ib.bound);
            r.err = std::max(ia.err, ib.err);
            r.exact = both;
            break;
        }
        if (flt && !(r.bound <= kGrowthLimit) && std::isfinite(ia.bound) && std::isfinite(ib.bound))
            return -1; // would leave the sane range
        return add(t, expr, r);
    }

    int unary(int ai) {
        const Val a = vals[ai];
        if (is_b(a)) return add(!a.t, "!" + a.name, {1, 0, true, false});
        if (is_i(a)) {
            const int k = static_cast<int>(irange(0, 7));
            const Info i = info_of(a);
            // Python's % and //, bitwise ops and >> by a scalar (never 0 for % and //).
            auto c = static_cast<int32_t>(iscalar());
            if (c == 0) c = 3;
            const std::string cs = num_str(c);
            switch (k) {
            case 0: return add(a.t.neg(), a.name + ".neg()", i);
            case 1: return add(a.t.abs(), a.name + ".abs()", i);
            case 2: return add(a.t % c, a.name + " % " + cs, {std::fabs(c), 0, true, false});
            case 3:
                return add(floor_div(a.t, c), "floor_div(" + a.name + ", " + cs + ")",
                           {i.bound + 1, 0, true, false});
            case 4: {
                const double b = 2 * std::max(i.bound, std::fabs(c)) + 1;
                if (chance(0.5)) return add(a.t & c, a.name + " & " + cs, {b, 0, true, false});
                if (chance(0.5)) return add(a.t | c, a.name + " | " + cs, {b, 0, true, false});
                return add(a.t ^ c, a.name + " ^ " + cs, {b, 0, true, false});
            }
            case 5: {
                const auto sh = static_cast<int32_t>(irange(0, 4));
                return add(a.t >> sh, a.name + " >> " + num_str(sh), i);
            }
            case 6: return add(a.t.sign(), a.name + ".sign()", {1, 0, true, false});
            default: return add(a.t.relu(), a.name + ".relu()", i);
            }
        }
        const double B = a.bound, E = a.err;
        const bool finite = std::isfinite(B);
        const int k = static_cast<int>(irange(0, 14));
        switch (k) {
        case 8: // |gelu(x)| <= |x|, |gelu'| <= 1.13
            return add(a.t.gelu(), a.name + ".gelu()",
                       {B, 1.13 * E + 8 * kU * std::max(1.0, B), false, false});
        case 9: // |silu(x)| <= |x|, |silu'| <= 1.1
            return add(a.t.silu(), a.name + ".silu()",
                       {B, 1.1 * E + 8 * kU * std::max(1.0, B), false, false});
        case 10: // softplus(x) <= |x| + ln 2, |softplus'| <= 1
            return add(a.t.softplus(), a.name + ".softplus()",
                       {B + 1, E + 8 * kU * (B + 1), false, false});
        case 11: // |atan'| <= 1
            return add(a.t.atan(), a.name + ".atan()",
                       {std::min(B, 1.5708), E + 4 * kU, false, false});
        case 12:
            return add(a.t.clip(-1, 1), a.name + ".clip(-1, 1)",
                       {std::min(B, 1.0), E, a.exact, false});
        case 13: // discontinuous: exact values only
            if (!a.exact) return -1;
            if (chance(0.5)) return add(a.t.floor(), a.name + ".floor()", {B + 1, 0, true, false});
            return add(a.t.round(), a.name + ".round()", {B + 1, 0, true, false});
        case 0: // exp
            if (!finite || B > 8) return -1;
            return add(a.t.exp(), a.name + ".exp()",
                       {std::exp(B), std::exp(B) * (E * (1 + E) + 4 * kU), false, false});
        case 1: { // log(|x| + 1)
            const double b = std::log(B + 1);
            return add((a.t.abs() + 1.0f).log(), "(" + a.name + ".abs() + 1).log()",
                       {b, E + 4 * kU * std::max(1.0, b), false, false});
        }
        case 2: { // sqrt(|x|)
            const double b = std::sqrt(B);
            return add(a.t.abs().sqrt(), a.name + ".abs().sqrt()",
                       {b, a.exact ? 0 : std::sqrt(E) + kU * b, a.exact, false});
        }
        case 3:
            if (!finite || B > 1e4) return -1;
            return add(a.t.sin(), a.name + ".sin()", {std::min(1.0, B), E + 4 * kU, false, false});
        case 4: return add(a.t.relu(), a.name + ".relu()", {B, E, a.exact, false});
        case 5: return add(a.t.sigmoid(), a.name + ".sigmoid()", {1, E / 4 + 8 * kU, false, false});
        case 6: return add(a.t.tanh(), a.name + ".tanh()", {1, E + 16 * kU, false, false});
        case 7: return add(a.t.abs(), a.name + ".abs()", {B, E, a.exact, false});
        default: return add(-a.t, "-" + a.name, info_of(a));
        }
    }

    // A comparison of exact values, then (usually) where(cond, x, y).
    int compare(int ai) {
        if (!vals[ai].exact) {
            // The newest exact value, or a fresh input.
            ai = -1;
            for (int i = static_cast<int>(vals.size()) - 1; i >= 0 && ai < 0; --i)
                if (vals[i].exact && chance(0.6)) ai = i;
            if (ai < 0) ai = input(rshape(), rdtype());
        }
        const Val a = vals[ai];
        const DType dt = a.t.dtype();
        const int op = static_cast<int>(irange(0, 5));
        static const char* const sym[] = {"<", "<=", ">", ">=", "==", "!="};
        const size_t mode = weighted({35, 35, 15, 15});
        Tensor c;
        std::string expr;
        auto cmp = [&](const auto& x, const auto& y) {
            switch (op) {
            case 0: c = x < y; break;
            case 1: c = x <= y; break;
            case 2: c = x > y; break;
            case 3: c = x >= y; break;
            case 4: c = x == y; break;
            default: c = x != y; break;
            }
        };
        if (mode <= 1) {
            int bi = mode == 0 ? pick_compatible(a.t.shape(), ai, true) : -1;
            if (bi < 0) bi = input(bshape(a.t.shape()), dt);
            bi = coerce(bi, dt);
            if (!vals[bi].exact) bi = input(vals[bi].t.shape(), dt);
            const Val b = vals[bi];
            cmp(a.t, b.t);
            expr = a.name + " " + sym[op] + " " + b.name;
        } else {
            const bool right = mode == 2;
            std::string cs;
            if (dt == DType::Float32) {
                const float v = static_cast<float>(chance(0.5) ? fscalar() : 0.0);
                cs = num_str(v) + "f";
                right ? cmp(a.t, v) : cmp(v, a.t);
            } else if (dt == DType::Int32) {
                const int32_t v = static_cast<int32_t>(chance(0.5) ? iscalar() : 0);
                cs = std::to_string(v);
                right ? cmp(a.t, v) : cmp(v, a.t);
            } else {
                const bool v = chance(0.5);
                cs = v ? "true" : "false";
                right ? cmp(a.t, v) : cmp(v, a.t);
            }
            expr = right ? a.name + " " + sym[op] + " " + cs : cs + " " + sym[op] + " " + a.name;
        }
        const int ci = add(c, expr, {1, 0, true, false});
        if (chance(0.35)) return ci;
        // where(cond, x, y)
        const Shape cs = vals[ci].t.shape();
        int xi = chance(0.5) ? pick_compatible(cs, ci, false) : -1;
        if (xi < 0) xi = input(bshape(cs), chance(0.8) ? DType::Float32 : rdtype());
        const DType xdt = vals[xi].t.dtype();
        const size_t ymode = weighted({40, 30, 15, 15});
        Info ix = info_of(vals[xi]), iy{};
        Tensor w;
        if (ymode <= 1) {
            int yi =
                ymode == 0 ? pick_compatible(broadcast(cs, vals[xi].t.shape()), xi, false) : -1;
            if (yi < 0) yi = input(bshape(broadcast(cs, vals[xi].t.shape())), xdt);
            yi = coerce(yi, xdt);
            iy = info_of(vals[yi]);
            w = tempura::where(vals[ci].t, vals[xi].t, vals[yi].t);
            expr = "where(" + vals[ci].name + ", " + vals[xi].name + ", " + vals[yi].name + ")";
        } else {
            const bool right = ymode == 2;
            std::string s;
            if (xdt == DType::Float32) {
                const float v = static_cast<float>(fscalar());
                s = num_str(v) + "f";
                w = right ? tempura::where(vals[ci].t, vals[xi].t, v)
                          : tempura::where(vals[ci].t, v, vals[xi].t);
                iy = {std::fabs(v), 0, true, false};
            } else if (xdt == DType::Int32) {
                const int32_t v = static_cast<int32_t>(iscalar());
                s = std::to_string(v);
                w = right ? tempura::where(vals[ci].t, vals[xi].t, v)
                          : tempura::where(vals[ci].t, v, vals[xi].t);
                iy = {std::fabs(static_cast<double>(v)), 0, true, false};
            } else {
                const bool v = chance(0.5);
                s = v ? "true" : "false";
                w = right ? tempura::where(vals[ci].t, vals[xi].t, v)
                          : tempura::where(vals[ci].t, v, vals[xi].t);
                iy = {1, 0, true, false};
            }
            expr = right ? "where(" + vals[ci].name + ", " + vals[xi].name + ", " + s + ")"
                         : "where(" + vals[ci].name + ", " + s + ", " + vals[xi].name + ")";
        }
        if (numel_of(w.shape()) > kMaxNumel) return ci;
        return add(w, expr,
                   {std::max(ix.bound, iy.bound), std::max(ix.err, iy.err), ix.exact && iy.exact,
                    ix.fusable || iy.fusable});
    }

    Shape random_reshape(int64_t n, const Shape& old) {
        Shape s;
        if (n == 0) {
            const int nd = static_cast<int>(irange(1, 3));
            const int zero = static_cast<int>(irange(0, nd - 1));
            for (int i = 0; i < nd; ++i) s.push_back(i == zero ? 0 : irange(1, 4));
        } else {
            std::vector<int64_t> primes;
            int64_t m = n;
            for (int64_t p = 2; p * p <= m; ++p)
                while (m % p == 0) primes.push_back(p), m /= p;
            if (m > 1) primes.push_back(m);
            int nd = static_cast<int>(irange(0, 4));
            if (nd == 0 && n > 1) nd = 1;
            s.assign(static_cast<size_t>(nd), 1);
            for (int64_t p : primes) s[static_cast<size_t>(irange(0, nd - 1))] *= p;
        }
        if (s == old && !s.empty() && chance(0.5)) s.insert(s.begin(), 1); // not an identity
        // One -1 where the other dims multiply to a non-zero number.
        if (!s.empty() && chance(0.3)) {
            const size_t i = static_cast<size_t>(irange(0, static_cast<int64_t>(s.size()) - 1));
            int64_t others = 1;
            for (size_t j = 0; j < s.size(); ++j)
                if (j != i) others *= s[j];
            if (others != 0) s[i] = -1;
        }
        return s;
    }

    int movement(int ai) {
        const Val a = vals[ai];
        const Shape s = a.t.shape();
        const int64_t nd = static_cast<int64_t>(s.size());
        const Info inf = info_of(a);
        const std::string& n = a.name;
        auto axis = [&](int64_t ax) { return chance(0.3) ? ax - nd : ax; }; // maybe negative
        switch (weighted({20, 12, 10, 14, 12, 12, 10, 10, 10})) {
        case 0: { // reshape
            const Shape r = random_reshape(numel_of(s), s);
            return add(a.t.reshape(r), n + ".reshape(" + tempura::shape_str(r) + ")", inf);
        }
        case 1: { // permute
            if (nd < 2) return -1;
            Shape p(static_cast<size_t>(nd));
            for (int64_t i = 0; i < nd; ++i) p[i] = i;
            std::shuffle(p.begin(), p.end(), rng_);
            for (auto& x : p) x = axis(x);
            return add(a.t.permute(p), n + ".permute(" + tempura::shape_str(p) + ")", inf);
        }
        case 2: { // transpose
            if (nd < 1) return -1;
            const int64_t d0 = axis(irange(0, nd - 1)), d1 = axis(irange(0, nd - 1));
            return add(a.t.transpose(d0, d1),
                       n + ".transpose(" + std::to_string(d0) + ", " + std::to_string(d1) + ")",
                       inf);
        }
        case 3: { // expand size-1 dims (and maybe a new leading dim)
            Shape e;
            if (nd < 4 && chance(0.3)) e.push_back(irange(1, 3));
            bool grows = !e.empty();
            for (int64_t d : s) {
                if (d == 1 && chance(0.6)) {
                    e.push_back(chance(0.1) ? 0 : irange(2, 4));
                    grows = true;
                } else {
                    e.push_back(chance(0.3) ? -1 : d);
                }
            }
            if (!grows) return -1;
            Shape target = e;
            for (size_t i = 0; i < s.size(); ++i)
                if (target[target.size() - s.size() + i] == -1)
                    target[target.size() - s.size() + i] = s[i];
            if (numel_of(target) > kMaxNumel) return -1;
            return add(a.t.expand(e), n + ".expand(" + tempura::shape_str(e) + ")", inf);
        }
        case 4: { // pad
            if (nd < 1) return -1;
            std::vector<std::pair<int64_t, int64_t>> p;
            std::string ps;
            Shape out = s;
            for (int64_t d = 0; d < nd; ++d) {
                const bool any = chance(0.6);
                p.emplace_back(any ? irange(0, 2) : 0, any ? irange(0, 2) : 0);
                out[d] += p.back().first + p.back().second;
                ps += (d ? ", {" : "{") + std::to_string(p.back().first) + ", " +
                      std::to_string(p.back().second) + "}";
            }
            if (numel_of(out) > kMaxNumel) return -1;
            return add(a.t.pad(p), n + ".pad({" + ps + "})", inf);
        }
        case 5: { // shrink
            if (nd < 1) return -1;
            std::vector<std::pair<int64_t, int64_t>> b;
            std::string bs;
            for (int64_t d = 0; d < nd; ++d) {
                const int64_t lo = chance(0.5) ? irange(0, s[d]) : 0;
                const int64_t hi = chance(0.5) ? irange(lo, s[d]) : s[d];
                b.emplace_back(lo, hi);
                bs += (d ? ", {" : "{") + std::to_string(lo) + ", " + std::to_string(hi) + "}";
            }
            return add(a.t.shrink(b), n + ".shrink({" + bs + "})", inf);
        }
        case 6: { // flip
            if (nd < 1) return -1;
            Shape axes;
            for (int64_t d = 0; d < nd; ++d)
                if (chance(0.5)) axes.push_back(axis(d));
            if (axes.empty()) axes.push_back(axis(irange(0, nd - 1)));
            return add(a.t.flip(axes), n + ".flip(" + tempura::shape_str(axes) + ")", inf);
        }
        case 8: { // slice with steps of either sign, or repeat
            if (nd < 1) return -1;
            if (chance(0.2)) {
                Shape times;
                for (int64_t d = 0; d < nd; ++d) times.push_back(irange(1, 2));
                Shape out = s;
                for (int64_t d = 0; d < nd; ++d) out[d] *= times[d];
                if (numel_of(out) > kMaxNumel) return -1;
                return add(a.t.repeat(times), n + ".repeat(" + tempura::shape_str(times) + ")",
                           inf);
            }
            std::vector<tempura::Slice> sl;
            std::string ss;
            for (int64_t d = 0; d < nd; ++d) {
                tempura::Slice x;
                x.step = chance(0.5) ? irange(1, 3) : -irange(1, 3);
                if (x.step < 0)
                    x.start = chance(0.5) ? tempura::Slice::end : irange(-s[d], s[d]);
                else if (chance(0.5))
                    x.start = irange(-s[d], s[d]);
                if (chance(0.5)) x.stop = irange(-s[d], s[d]);
                sl.push_back(x);
                auto v = [](int64_t e) {
                    return e == tempura::Slice::end ? std::string("end") : std::to_string(e);
                };
                ss += (d ? ", {" : "{") + v(x.start) + ", " + v(x.stop) + ", " +
                      std::to_string(x.step) + "}";
            }
            return add(a.t.slice(sl), n + ".slice({" + ss + "})", inf);
        }
        default: { // squeeze / unsqueeze
            std::vector<int64_t> ones;
            for (int64_t d = 0; d < nd; ++d)
                if (s[d] == 1) ones.push_back(d);
            if (!ones.empty() && chance(0.5)) {
                if (chance(0.3)) return add(a.t.squeeze(), n + ".squeeze()", inf);
                const int64_t ax = axis(
                    ones[static_cast<size_t>(irange(0, static_cast<int64_t>(ones.size()) - 1))]);
                return add(a.t.squeeze(ax), n + ".squeeze(" + std::to_string(ax) + ")", inf);
            }
            if (nd >= 4) return -1;
            int64_t ax = irange(0, nd);
            if (chance(0.3)) ax = ax - nd - 1;
            return add(a.t.unsqueeze(ax), n + ".unsqueeze(" + std::to_string(ax) + ")", inf);
        }
        }
        return -1;
    }

    int reduce(int ai) {
        const Val a = vals[ai];
        const Shape s = a.t.shape();
        const int64_t nd = static_cast<int64_t>(s.size());
        // Axes: all ({}), one (as an integer, maybe negative), or a subset.
        Shape axes;
        bool single = false;
        const size_t form = nd == 0 ? 0 : weighted({25, 45, 30});
        if (form == 1) {
            single = true;
            axes.push_back(irange(0, nd - 1));
        } else if (form == 2) {
            for (int64_t d = 0; d < nd; ++d)
                if (chance(0.5)) axes.push_back(d);
            if (axes.empty()) axes.push_back(irange(0, nd - 1));
            std::shuffle(axes.begin(), axes.end(), rng_);
        }
        int64_t n = 1;
        if (axes.empty())
            n = numel_of(s);
        else
            for (int64_t ax : axes) n *= s[static_cast<size_t>(ax)];
        for (auto& ax : axes)
            if (chance(0.3)) ax -= nd;
        const bool keep = chance(0.4);
        int op = static_cast<int>(irange(0, 4)); // sum prod max min mean
        static const char* const names[] = {"sum", "prod", "max", "min", "mean"};
        const bool flt = is_f(a);
        const double B = a.bound, E = a.err;
        if (op == 1 && flt &&
            !(std::isfinite(B) &&
              (n <= 1 || n * std::log(std::max(B, 1.0)) <= std::log(kGrowthLimit))))
            op = 0;
        if ((op == 2 || op == 3) && n == 0) op = 0; // an empty max/min raises (test_hostile)
        Tensor t;
        auto go = [&](const auto& ax) {
            switch (op) {
            case 0: t = a.t.sum(ax, keep); break;
            case 1: t = a.t.prod(ax, keep); break;
            case 2: t = a.t.max(ax, keep); break;
            case 3: t = a.t.min(ax, keep); break;
            default: t = a.t.mean(ax, keep); break;
            }
        };
        std::string as;
        if (single) {
            go(axes[0]);
            as = std::to_string(axes[0]);
        } else {
            go(axes);
            as = tempura::shape_str(axes);
        }
        const std::string expr =
            a.name + "." + names[op] + "(" + as + (keep ? ", keepdim" : "") + ")";
        const double dn = static_cast<double>(n);
        Info r{B, E, a.exact, a.fusable && n == 1};
        if (!flt && op != 4) {
            // Integers (and bools summed as int32) are exact; bounds for the record only.
            if (op == 0) r.bound = dn * B;
            if (op == 1) r.bound = n <= 30 ? std::pow(std::max(B, 1.0), dn) : kIntCap;
            return add(t, expr, r);
        }
        switch (op) {
        case 0:
        case 4: {
            Info sum{dn * B, dn * E, a.exact && n <= 1, a.fusable && n == 1};
            if (n >= 2) sum.err += 2 * dn * kU * mulz(dn, B);
            if (!flt) sum = {dn * B, n >= 2 ? 2 * dn * kU * dn * B : 0, n <= 1, false};
            if (op == 0) {
                r = sum;
            } else if (n == 0) {
                r = {std::numeric_limits<double>::infinity(), 0, true, false}; // 0 * inf = nan
            } else {
                r = {B, sum.err / dn + kU * B, sum.exact && n == 1, sum.exact && n == 1};
            }
            break;
        }
        case 1:
            if (n >= 2) {
                const double bn = std::pow(B, dn);
                r = {bn, dn * mulz(std::pow(B, dn - 1), E) + 2 * dn * kU * bn, false, false};
            } else if (n == 0) {
                r = {1, 0, true, false};
            }
            break;
        default: // max, min
            if (n == 0) r = {std::numeric_limits<double>::infinity(), 0, true, false};
            break;
        }
        return add(t, expr, r);
    }

    int argmax(int ai) {
        if (!vals[ai].exact) ai = input(rshape(static_cast<int>(irange(1, 3))), rdtype());
        const Val a = vals[ai];
        const Shape s = a.t.shape();
        std::vector<int64_t> ok;
        for (size_t d = 0; d < s.size(); ++d)
            if (s[d] > 0) ok.push_back(static_cast<int64_t>(d));
        if (ok.empty()) return -1;
        int64_t ax = ok[static_cast<size_t>(irange(0, static_cast<int64_t>(ok.size()) - 1))];
        if (chance(0.3)) ax -= static_cast<int64_t>(s.size());
        const bool keep = chance(0.3);
        const bool mn = chance(0.25);
        Tensor t = mn ? a.t.argmin(ax, keep) : a.t.argmax(ax, keep);
        return add(t,
                   a.name + (mn ? ".argmin(" : ".argmax(") + std::to_string(ax) +
                       (keep ? ", keepdim" : "") + ")",
                   {static_cast<double>(
                        s[static_cast<size_t>(ax < 0 ? ax + static_cast<int64_t>(s.size()) : ax)]),
                    0, true, false});
    }

    // gather along a random axis at a computed index in [-1, n] (outside [0, n) reads 0), or
    // scatter_add of a fresh source at such an index (added in the index's order, as the
    // reference does).
    int indexing(int ai) {
        const Val a = vals[ai];
        const Shape s = a.t.shape();
        if (is_b(a) || s.empty()) return -1;
        const auto ax = static_cast<size_t>(irange(0, static_cast<int64_t>(s.size()) - 1));
        const int64_t n = s[ax];
        const std::string axs = std::to_string(ax);
        if (chance(0.3)) { // a scan: cumsum's sums in another order, cummax exact
            const auto sax = static_cast<int64_t>(ax);
            if (chance(0.5) || !a.exact)
                return add(a.t.cummax(sax), a.name + ".cummax(" + axs + ")", info_of(a));
            const double dn = static_cast<double>(n);
            return add(a.t.cumsum(sax), a.name + ".cumsum(" + axs + ")",
                       {dn * a.bound, 0, dn * a.bound < 1 << 24, false});
        }
        Shape is = s;
        for (size_t d = 0; d < is.size(); ++d) is[d] = d == ax ? irange(1, 4) : irange(0, s[d]);
        if (numel_of(is) > kMaxNumel) return -1;
        const Val idx = vals[input(is, DType::Int32)];
        const Tensor index = idx.t % static_cast<int32_t>(n + 2) - 1;
        const std::string iname = "(" + idx.name + " % " + std::to_string(n + 2) + " - 1)";
        if (chance(0.5))
            return add(a.t.gather(static_cast<int64_t>(ax), index),
                       a.name + ".gather(" + axs + ", " + iname + ")", info_of(a));
        const Val src = vals[input(is, a.t.dtype())];
        const double count = static_cast<double>(numel_of(is));
        const double bound = a.bound + count * src.bound;
        Info info{bound, a.err > 0 ? a.err + count * bound * 1.2e-7 : 0, a.exact, false};
        return add(a.t.scatter_add(static_cast<int64_t>(ax), index, src.t),
                   a.name + ".scatter_add(" + axs + ", " + iname + ", " + src.name + ")", info);
    }

    int matmul(int ai) {
        if (is_b(vals[ai])) ai = coerce(ai, chance(0.8) ? DType::Float32 : DType::Int32);
        if (vals[ai].t.ndim() == 0) return -1;
        const Val a = vals[ai];
        const DType dt = a.t.dtype();
        const Shape s = a.t.shape();
        const int64_t nd = static_cast<int64_t>(s.size());
        const bool a_left = chance(0.7);
        Shape o; // the other operand's shape
        int64_t K;
        if (a_left) {
            K = s.back();
            const int64_t N = irange(1, 4);
            const size_t form = weighted({45, 25, 30}); // [K,N], [K], batched [...,K,N]
            if (form == 0)
                o = {K, N};
            else if (form == 1)
                o = {K};
            else {
                o = nd >= 3 ? Shape(s.begin(), s.end() - 2) : Shape{irange(1, 3)};
                for (auto& d : o)
                    if (chance(0.3)) d = 1;
                o.push_back(K);
                o.push_back(N);
            }
        } else {
            K = nd == 1 ? s[0] : s[s.size() - 2];
            const int64_t M = irange(1, 4);
            const size_t form = weighted({45, 25, 30}); // [M,K], [K], batched [...,M,K]
            if (form == 0)
                o = {M, K};
            else if (form == 1)
                o = {K};
            else {
                o = nd >= 3 ? Shape(s.begin(), s.end() - 2) : Shape{irange(1, 3)};
                for (auto& d : o)
                    if (chance(0.3)) d = 1;
                o.push_back(M);
                o.push_back(K);
            }
        }
        const bool flt = dt == DType::Float32;
        const double dk = static_cast<double>(K);
        if (flt && !(std::isfinite(a.bound) && dk * a.bound * 2 <= kGrowthLimit)) return -1;
        // The broadcast product [..., M, K, N] stays small.
        const int bi = input(o, dt);
        const Val b = vals[bi];
        const Tensor& x = a_left ? a.t : b.t;
        const Tensor& y = a_left ? b.t : a.t;
        const bool use_dot = chance(0.5);
        Tensor t = use_dot ? x.dot(y) : x.matmul(y);
        const std::string expr = (a_left ? a.name : b.name) + (use_dot ? ".dot(" : ".matmul(") +
                                 (a_left ? b.name : a.name) + ")";
        if (!flt) return add(t, expr, {dk * a.bound * b.bound, 0, true, false});
        const double Ba = a.bound, Bb = b.bound, Ea = a.err;
        const double B = dk * Ba * Bb;
        Info r{B, dk * mulz(Ea, Bb), a.exact && K <= 1, a.exact && K == 1};
        if (K >= 1 && !(a.exact && K == 1)) r.err += 2 * (dk + 1) * kU * B;
        return add(t, expr, r);
    }

    int softmax(int ai) {
        if (!is_f(vals[ai])) ai = coerce(ai, DType::Float32);
        const Val a = vals[ai];
        if (a.t.ndim() == 0 || !std::isfinite(a.bound)) return -1;
        const int64_t nd = a.t.ndim();
        int64_t ax = irange(0, nd - 1);
        const double n = static_cast<double>(a.t.shape()[static_cast<size_t>(ax)]);
        if (chance(0.4)) ax -= nd;
        const double B = a.bound, E = a.err;
        if (chance(0.5))
            return add(a.t.softmax(ax), a.name + ".softmax(" + std::to_string(ax) + ")",
                       {1, 4 * E + (n + 8) * kU, false, false});
        return add(
            a.t.log_softmax(ax), a.name + ".log_softmax(" + std::to_string(ax) + ")",
            {2 * B + std::log(std::max(n, 1.0)) + 1, 4 * E + kU * (8 * B + n + 8), false, false});
    }

    int cat(int ai) {
        const Val a = vals[ai];
        const Shape s = a.t.shape();
        const int64_t nd = static_cast<int64_t>(s.size());
        if (nd == 0) return -1;
        const int64_t ax = irange(0, nd - 1);
        std::vector<int> parts{ai};
        const int extra = static_cast<int>(irange(1, 2));
        int64_t total = s[static_cast<size_t>(ax)];
        for (int i = 0; i < extra; ++i) {
            if (chance(0.25)) {
                parts.push_back(ai);
                total += s[static_cast<size_t>(ax)];
            } else {
                Shape o = s;
                o[static_cast<size_t>(ax)] = irange(0, 3);
                total += o[static_cast<size_t>(ax)];
                parts.push_back(input(o, a.t.dtype()));
            }
        }
        Shape out = s;
        out[static_cast<size_t>(ax)] = total;
        if (numel_of(out) > kMaxNumel) return -1;
        std::shuffle(parts.begin(), parts.end(), rng_);
        std::vector<Tensor> ts;
        std::string list;
        Info r{0, 0, true, false};
        for (int p : parts) {
            const Val& v = vals[p];
            ts.push_back(v.t);
            list += (list.empty() ? "" : ", ") + v.name;
            r.bound = std::max(r.bound, v.bound);
            r.err = std::max(r.err, v.err);
            r.exact = r.exact && v.exact;
            r.fusable = r.fusable || v.fusable;
        }
        const int64_t axis = chance(0.3) ? ax - nd : ax;
        return add(Tensor::cat(ts, axis), "cat({" + list + "}, " + std::to_string(axis) + ")", r);
    }

    // Check this value now, realize it, and go on from the realized buffer (an exact input of
    // everything that follows).
    int realize_mid(int ai) {
        if (!check_now) return -1;
        Val& v = vals[ai];
        text += "  " + v.name + ".realize()    (checked)\n";
        check_now(v); // realizes
        v.exact = true;
        v.err = 0;
        v.fusable = false;
        return ai;
    }
};

} // namespace

TEST_CASE("differential: random tensor programs, compiled vs reference interpreter") {
    const int64_t count = env_int("TEMPURA_DIFF_N", 2000);
    const uint64_t seed = static_cast<uint64_t>(env_int("TEMPURA_DIFF_SEED", 20240611));
    const int64_t only = env_int("TEMPURA_DIFF_ONLY", -1);
    const bool verbose = env_int("TEMPURA_DIFF_VERBOSE", 0) != 0;
    const int64_t print_limit = env_int("TEMPURA_DIFF_PRINT", 10);

    int64_t programs = 0, mismatches = 0, exceptions = 0, values_checked = 0, kernels = 0;
    int64_t printed = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < count; ++i) {
        if (only >= 0 && i != only) continue;
        ++programs;
        const uint64_t pseed = splitmix(seed * 0x100000001b3ull + static_cast<uint64_t>(i));
        Gen g(pseed);
        std::vector<std::string> failures;
        std::vector<std::string> failing_kernels;
        auto check = [&](Val& v) {
            ++values_checked;
            Outcome o = compare_with_reference(v);
            kernels += static_cast<int64_t>(o.kernels.size());
            if (!o.detail.empty()) {
                failures.push_back(o.detail);
                for (auto& k : o.kernels) failing_kernels.push_back(k);
            }
        };
        g.check_now = check;
        std::string exception;
        try {
            g.generate();
            check(g.result());
        } catch (const tempura::Error& e) {
            exception = std::string("tempura::Error: ") + e.what();
        } catch (const std::exception& e) {
            exception = std::string("std::exception: ") + e.what();
        }
        if (!exception.empty()) ++exceptions;
        if (!failures.empty()) ++mismatches;
        const bool bad = !exception.empty() || !failures.empty();
        if (verbose || only >= 0 || (bad && printed < print_limit)) {
            if (bad) ++printed;
            std::string msg = "---- program " + std::to_string(i) +
                              " (TEMPURA_DIFF_SEED=" + std::to_string(seed) +
                              " TEMPURA_DIFF_ONLY=" + std::to_string(i) + ")" +
                              (bad ? " FAILED" : "") + "\n" + g.text;
            for (const auto& f : failures) msg += "  MISMATCH " + f + "\n";
            if (!failing_kernels.empty()) {
                msg += "  kernels:";
                for (const auto& k : failing_kernels) msg += " " + k;
                msg += "\n";
            }
            if (!exception.empty()) msg += "  EXCEPTION " + exception + "\n";
            std::fprintf(stderr, "%s", msg.c_str());
        }
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr,
                 "differential: %lld programs (seed %llu), %lld values checked, %lld kernels run, "
                 "%lld programs with mismatches, %lld with exceptions, %.1f s\n",
                 static_cast<long long>(programs), static_cast<unsigned long long>(seed),
                 static_cast<long long>(values_checked), static_cast<long long>(kernels),
                 static_cast<long long>(mismatches), static_cast<long long>(exceptions), secs);
    CHECK(mismatches == 0);
    CHECK(exceptions == 0);
}

namespace {

// The outcome of realizing t against the reference: empty when they agree.
std::string disagreement(const Tensor& t) {
    Val v;
    v.t = t;
    v.name = "t";
    try {
        return compare_with_reference(v).detail;
    } catch (const std::exception& e) {
        return std::string("exception: ") + e.what();
    }
}

} // namespace

// Minimal reproductions of what the random programs found, kept as fixed cases.
TEST_CASE("differential regressions: a reduce of an expanded input, then an elementwise op") {
    // The reduce does not depend on the output loop; the op consuming it was linearized before
    // the load of the accumulator ("[cpu] position 7: source 0 of ADD of dtype float32 (LOAD)
    // does not precede it in the program").
    CHECK(disagreement(Tensor::full({2, 3}, 1.0f).sum(1) + 1.0f) == "");
    const Tensor row = Tensor::from_vector(std::vector<float>{1, 2, 3}, {1, 3});
    CHECK(disagreement(row.expand({2, 3}).sum(1).exp()) == "");
    CHECK(disagreement(row.expand({2, 3}).sum(1).cast(DType::Int32)) == "");
    CHECK(disagreement(row.expand({2, 3}).max(1, true) * 2.0f) == "");
    const Tensor bools = Tensor::from_vector(std::vector<bool>{true, true, false}, {1, 3});
    CHECK(disagreement(bools.expand({4, 3}).sum(1).cast(DType::Bool)) == "");
    const Tensor ints = Tensor::from_vector(std::vector<int32_t>{3, -1, 2}, {1, 3});
    CHECK(disagreement(ints.expand({2, 3}).min(1)) == ""); // min = ~max(~x): an op after the reduce
    CHECK(disagreement(ints.expand({2, 3}).sum(1).relu()) == "");
}

TEST_CASE("differential regressions: max propagates NaN like the reference") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const Tensor x = Tensor::from_vector(std::vector<float>{nan, 1.0f, -1.0f}, {3});
    CHECK(disagreement(x.relu()) == ""); // compiled [0, 1, 0]
    CHECK(disagreement(tempura::maximum(x, Tensor::full({}, 0.5f))) ==
          "");                          // compiled [0.5, 1, 0.5]
    CHECK(disagreement(x.max()) == ""); // compiled 1
    CHECK(disagreement(x.min()) == ""); // compiled -1
    // The same NaN made by the library itself: the mean over an empty axis.
    const Tensor e = Tensor::from_vector(std::vector<float>{}, {0, 2});
    CHECK(disagreement(tempura::maximum(e.mean(0), Tensor::full({2}, 0.5f))) == "");
}

TEST_CASE("differential regressions: a kernel LLVM 19's SLP vectorizer miscompiled") {
    // TEMPURA_DIFF_SEED=777001, program 26660. The last kernel, min(v11 * v12, v11) + v15 over
    // [4, 3, 2], had its loops fully unrolled by LLVM, and the SLP vectorizer then built a
    // shuffle that read a poison lane for the min of the j = 1 column (llvm-project issue
    // 117170): 6 of 24 elements were v11 + v15 instead of v15. The CPU backend no longer runs
    // the SLP vectorizer (the codegen's expander and LLVM's loop vectorizer make the vectors).
    const auto f = [](std::vector<float> v, Shape s) { return Tensor::from_vector(v, s); };
    const Tensor v0 = f({-0.0282609034f, 0.33430478f, 0.765474617f, -0.595175385f, -0.469996631f,
                         -1.66778195f, -1.23193944f, -1.31468713f, 0.579815388f, -0.924101353f},
                        {5, 2, 1});
    const Tensor v2 =
        f({1, -1.5, -1.5, 0, -1, 0.5, 0, 1, 1.5, -1.5, -0.5, 1, -1, -2, 1, -1.5}, {2, 2, 4});
    const Tensor v4 =
        f({1.35094893f, -1.47681665f, -0.553648293f, 1.70082605f, -0.859324038f, -1.27933979f,
           -1.60189879f, -1.84418714f, -1.95103824f, -1.71014857f, -1.09657216f, -0.627054095f,
           -1.85272002f, -1.38065279f, -0.185976416f, -1.50484312f},
          {2, 2, 4});
    const Tensor v5 = (v0.max(0) - v2) / (v4.abs() + 1.0f);
    const Tensor v11 = tempura::maximum(v5, v2).exp().slice(
        {{1, 2, 3}, {tempura::Slice::end, tempura::Slice::end, -3}, {0, -1, 3}});
    const Tensor v12 = f({0.5, 0, 2}, {1, 3, 1});
    const Tensor v15 = f({1.79850793f, 1.43409848f, 1.60341084f, -0.458187342f, -1.33100367f,
                          -0.0534256138f, -1.26667964f, 1.70411038f},
                         {4, 1, 2});
    const Tensor v16 = tempura::minimum(v11 * v12, v11) + v15;
    CHECK(disagreement(v16) == "");
    // The j = 1 column is v15 itself (v11 > 0, times 0).
    const std::vector<float> got = v16.to_vector<float>(), b = v15.to_vector<float>();
    for (size_t i = 0; i < 4; ++i)
        for (size_t k = 0; k < 2; ++k) CHECK(got[i * 6 + 2 + k] == b[i * 2 + k]);
}

TEST_CASE("differential regressions: one reduce gated by a PAD and ungated in one kernel") {
    // TEMPURA_DIFF_SEED=91127, program 2196, reduced: c = -sum(x) padded and reduced again,
    // times c. The PAD's gate went into the inner sum's loads, making a second reduce of x
    // that shared the first one's range although it sits inside the outer reduce's loop:
    // "[linearize] an op uses a range outside its loop".
    const Tensor x =
        Tensor::from_vector(std::vector<float>{1.91428387f, 1.65745664f, -0.718340993f});
    const Tensor c = -x.sum(0);
    CHECK(disagreement(c.reshape({1}).pad({{0, 1}}).sum(0) * c) == "");
    CHECK(disagreement(c.reshape({1}).pad({{1, 2}}).max(0) + c) == "");
    const Tensor m = x.min(0); // -max(-x): an op after the reduce
    CHECK(disagreement(m.expand({1}).gelu().pad({{1, 2}}).mean(0, true) * 2.0f * m) == "");
}

TEST_CASE("differential regressions: a reshape made before its source was realized") {
    // TEMPURA_DIFF_SEED=5150, program 18014, reduced: b = a.reshape(...) then a.realize().
    // b's graph became RESHAPE(RESHAPE(BUFFER)), which realize took for a kernel's result
    // ("[realize] internal: a root has no buffer"); it is the buffer itself.
    const Tensor x = Tensor::from_vector(std::vector<float>{1.5f, -1.0f, -0.5f, 2.0f});
    Tensor a = x.sum(0);
    const Tensor b = a.reshape({1}), c = a.reshape({1, 1}), p = a.prod(tempura::Shape{});
    a.realize();
    CHECK(b.to_vector<float>() == std::vector<float>{2.0f});
    CHECK(c.to_vector<float>() == std::vector<float>{2.0f});
    CHECK(p.reshape({1}).to_vector<float>() == std::vector<float>{2.0f});
    CHECK((b + c.reshape({1})).to_vector<float>() == std::vector<float>{4.0f});
    Tensor m = x * 2.0f;
    const Tensor t = m.reshape({2, 2}).reshape({4, 1});
    m.realize();
    CHECK(t.to_vector<float>() == std::vector<float>{3.0f, -2.0f, -1.0f, 4.0f});
}
