// The opts of include/tempura/codegen/opts.hpp, tested differentially.
//
// 1. Random tensor programs are scheduled into kernels; each kernel gets a random sequence of 0-5
//    opts (UPCAST, UNROLL, LOCAL, THREAD, SWAP, PADTO, NOLOCALS with random axes and amounts, each
//    through try_apply so that invalid ones drop out, which must leave the kernel unchanged), is
//    lowered with them and with none (lower_kernel_opt with an empty list) for a device of 64, 32
//    or 16-byte vectors and 2 threads, and both programs run on the same random inputs; their
//    outputs must agree (THREAD kernels run once per core, in order and on the pool). Then a few
//    hundred whole programs run through Tensor::realize() (the heuristics) against the reference
//    interpreter.
// 2. The heuristics' choices for named kernels, pinned; TEMPURA_NOOPT=1.
// 3. Every validity check with its exact message.
// 4. PADTO on elementwise ops, sums, prods and max-reduces of negative values.
// Minimal reproductions of the bugs the random opts found are kept as their own test cases.
//
// TEMPURA_FUZZ_N      number of random kernels (default 2000; 300 under ASan); the realize() part
//                     runs 300 programs per 2000 (60 under ASan)
// TEMPURA_FUZZ_SEED   base seed (default 20250101); program i uses its own seed from both
// TEMPURA_FUZZ_ONLY   run only program i of part 1 (prints its text, kernels and opts)
// TEMPURA_FUZZ_PRINT  how many failing programs to print (default 10)
//
// Comparison (kernel level, optimized vs unoptimized). Integers and bools: exact. Floats: the same
// bits (or both NaN), except
//   - in a kernel with a float ADD (or MUL) reduce, which the opts reassociate:
//     |got - want| <= 1e-4 * max(|got|, |want|) + 1e-5 * R * max(1, B)
//     with R the product of the kernel's reduce sizes and B a bound on the program's values;
//   - in a kernel with a float multiply (an a * b + c may be fused into an FMA in one program and
//     not in the other, as MULACC or by LLVM's `contract`): 1e-6 * max(|got|, |want|, B).
// The generator only compares, or casts to an integer, float values that are exact (computed
// without a reassociable sum or a multiply), so a rounding difference cannot flip them.
#include <doctest/doctest.h>

#include "../support.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <tempura/backend/llvm_cpu.hpp>
#include <tempura/codegen/opts.hpp>
#include <tempura/codegen/stages.hpp>
#include <tempura/runtime/buffer.hpp>
#include <tempura/runtime/thread_pool.hpp>
#include <tempura/schedule/schedule.hpp>
#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

namespace {

using tempura::AxisType;
using tempura::DType;
using tempura::Op;
using tempura::RangeArg;
using tempura::Shape;
using tempura::Tensor;
using tempura::UOp;
using tempura::codegen::DeviceLimits;
using tempura::codegen::Opt;
using tempura::codegen::OptKernel;
using tempura::codegen::OptOp;
using tempura::runtime::Buffer;

uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

int64_t numel_of(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

Tensor zeros_input(const Shape& s) {
    return Tensor::from_vector(std::vector<float>(static_cast<size_t>(numel_of(s)), 0.0f), s);
}

std::string num_str(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

std::string dt_str(DType d) {
    if (d == DType::Float32) return "f32";
    if (d == DType::Int32) return "i32";
    if (d == DType::Bool) return "bool";
    return d.name();
}

DeviceLimits limits(int64_t vector_bytes, int64_t threads) {
    DeviceLimits l;
    l.vector_bytes = vector_bytes;
    l.threads = threads;
    return l;
}

// ---- the program generator ---------------------------------------------------------------------

// A value of a generated program: the lazy tensor and what the generator knows about it.
struct GVal {
    Tensor t;
    std::string name;
    double bound = 1;  // |element| <= bound
    bool exact = true; // bit-identical whatever the summation order or FMA fusion (and to the
                       // reference): comparisons and float->int casts only take exact values
};

// Random tensor programs over shapes whose dims are products of small factors: elementwise
// chains with broadcasting, movement views (permute, flip, pad, shrink, reshape, expand),
// reductions (sum, max, min, mean, prod) over random axes or all of them, matmul-like products,
// softmax, contiguous splits; float32, int32 and bool values.
class ProgGen : RandomChoices {
  public:
    // Shapes of at most max_numel elements (and, for the main inputs, at least min_numel).
    ProgGen(uint64_t seed, int64_t max_numel, int64_t min_numel = 1)
        : RandomChoices(seed), cap_(max_numel), min_(min_numel) {}

    std::string text;
    double max_bound = 1;
    int64_t max_reduce = 1; // the largest number of elements one reduce combines

    Tensor make() {
        GVal v;
        switch (weighted({30, 30, 22, 8, 10})) {
        case 0: v = chain(input(rshape(), rdtype()), irange(1, 5)); break;
        case 1: {
            v = chain(input(rshape(), rdtype()), irange(0, 3));
            v = reduce(v);
            v = chain(v, irange(0, 2));
            break;
        }
        case 2: v = chain(matmul(), irange(0, 2)); break;
        case 3: v = softmax(input(rshape(), DType::Float32)); break;
        default: {
            // Two reduces feeding one value (more than one kernel when one is broadcast).
            GVal a = chain(input(rshape(), rdtype()), irange(0, 2));
            a = reduce(a, /*keepdim=*/true);
            v = binary(a);
            v = chain(v, irange(0, 2));
            break;
        }
        }
        if (chance(0.25)) v = to_dtype(v, rdtype());
        text += "  result " + v.name + "\n";
        return v.t;
    }

  private:
    int64_t cap_, min_;
    int next_ = 0;

    int64_t rdim() {
        static const int64_t dims[] = {1, 2, 3, 4, 5, 6, 8, 12, 16, 32, 48, 64};
        return dims[weighted({6, 8, 6, 10, 4, 6, 10, 8, 12, 10, 6, 8})];
    }
    Shape rshape(int nd) {
        for (int tries = 0; tries < 1000; ++tries) {
            Shape s;
            for (int i = 0; i < nd; ++i) s.push_back(rdim());
            if (numel_of(s) <= cap_ && numel_of(s) >= min_) return s;
        }
        if (min_ > 1) return Shape{min_ / 64, 64};
        return Shape(static_cast<size_t>(nd), 2);
    }
    Shape rshape() { return rshape(static_cast<int>(irange(1, 4))); }
    DType rdtype() {
        const size_t k = weighted({60, 25, 15});
        return k == 0 ? DType::Float32 : k == 1 ? DType::Int32 : DType::Bool;
    }

    GVal add(Tensor t, const std::string& expr, double bound, bool exact) {
        GVal v;
        v.t = std::move(t);
        v.name = "v" + std::to_string(next_++);
        if (v.t.dtype() == DType::Bool) bound = 1;
        if (v.t.dtype() != DType::Float32) exact = true;
        v.bound = bound;
        v.exact = exact;
        max_bound = std::max(max_bound, bound);
        text += "  " + v.name + " = " + expr + "    : " + dt_str(v.t.dtype()) +
                tempura::shape_str(v.t.shape()) + "\n";
        return v;
    }

    GVal input(const Shape& s, DType dt) {
        const auto n = static_cast<size_t>(numel_of(s));
        if (dt == DType::Float32) {
            std::vector<float> v(n);
            const bool quantized = chance(0.3);
            for (auto& x : v)
                x = quantized ? static_cast<float>(irange(-4, 4)) * 0.5f
                              : static_cast<float>(urand(-2, 2));
            return add(Tensor::from_vector(v, s), "input", 2, true);
        }
        if (dt == DType::Int32) {
            std::vector<int32_t> v(n);
            for (auto& x : v) x = static_cast<int32_t>(irange(-5, 5));
            return add(Tensor::from_vector(v, s), "input", 5, true);
        }
        std::vector<bool> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = chance(0.5);
        return add(Tensor::from_vector(v, s), "input", 1, true);
    }

    // A shape that broadcasts with `s`: some dims 1, maybe fewer leading dims.
    Shape bshape(const Shape& s) {
        Shape b;
        const size_t drop =
            chance(0.25) ? static_cast<size_t>(irange(0, static_cast<int64_t>(s.size()))) : 0;
        for (size_t i = drop; i < s.size(); ++i) b.push_back(chance(0.3) ? 1 : s[i]);
        return b;
    }

    GVal to_dtype(const GVal& a, DType dt) {
        const DType from = a.t.dtype();
        if (from == dt) return a;
        if (from == DType::Float32 && !a.exact) {
            // A float -> int or bool cast of an inexact value could flip: compare an exact one.
            return add((a.t * 0.0f).cast(dt), "(" + a.name + " * 0).cast(" + dt_str(dt) + ")", 0,
                       true);
        }
        double bound = a.bound;
        if (dt == DType::Int32 && from == DType::Float32) bound = std::ceil(bound);
        return add(a.t.cast(dt), a.name + ".cast(" + dt_str(dt) + ")", bound, a.exact);
    }

    // A partner for a binary op: a fresh input of a broadcastable shape (or a scalar).
    GVal partner(const GVal& a) {
        if (chance(0.15)) {
            const DType dt = a.t.dtype();
            if (dt == DType::Float32) return add(Tensor::full({}, 1.5f), "1.5", 1.5, true);
            if (dt == DType::Int32) return add(Tensor::full({}, 3, DType::Int32), "3", 3, true);
            return add(Tensor::full({}, true), "true", 1, true);
        }
        return input(bshape(a.t.shape()), a.t.dtype());
    }

    GVal binary(const GVal& a) {
        const GVal b = partner(a);
        const DType dt = a.t.dtype();
        const std::string an = a.name, bn = b.name;
        const double A = a.bound, B = b.bound;
        const bool ex = a.exact && b.exact;
        if (dt == DType::Float32) {
            switch (weighted({25, 15, 20, 10, 10, 8, 12, 8})) {
            case 0: return add(a.t + b.t, an + " + " + bn, A + B, ex);
            case 1: return add(a.t - b.t, an + " - " + bn, A + B, ex);
            case 2:
                if (A * B <= 1e4) return add(a.t * b.t, an + " * " + bn, A * B, false);
                return add(a.t + b.t, an + " + " + bn, A + B, ex);
            case 3:
                return add(tempura::maximum(a.t, b.t), "maximum(" + an + ", " + bn + ")",
                           std::max(A, B), ex);
            case 4:
                return add(tempura::minimum(a.t, b.t), "minimum(" + an + ", " + bn + ")",
                           std::max(A, B), ex);
            case 5: return add(a.t / (b.t.abs() + 1.0f), an + " / (|" + bn + "| + 1)", A, ex);
            case 6:
                if (ex)
                    return add(tempura::where(a.t < b.t, a.t, b.t),
                               "where(" + an + " < " + bn + ", " + an + ", " + bn + ")",
                               std::max(A, B), true);
                return add(a.t + b.t, an + " + " + bn, A + B, ex);
            default:
                if (ex) return add(a.t == b.t, an + " == " + bn, 1, true);
                return add(a.t - b.t, an + " - " + bn, A + B, false);
            }
        }
        if (dt == DType::Int32) {
            switch (weighted({25, 15, 15, 10, 10, 12, 8})) {
            case 0: return add(a.t + b.t, an + " + " + bn, A + B, true);
            case 1: return add(a.t - b.t, an + " - " + bn, A + B, true);
            case 2: return add(a.t * b.t, an + " * " + bn, A * B, true);
            case 3:
                return add(tempura::maximum(a.t, b.t), "maximum(" + an + ", " + bn + ")",
                           std::max(A, B), true);
            case 4:
                return add(tempura::minimum(a.t, b.t), "minimum(" + an + ", " + bn + ")",
                           std::max(A, B), true);
            case 5:
                return add(tempura::where(a.t > b.t, a.t, b.t),
                           "where(" + an + " > " + bn + ", " + an + ", " + bn + ")", std::max(A, B),
                           true);
            default: return add(a.t < b.t, an + " < " + bn, 1, true);
            }
        }
        switch (weighted({30, 30, 20, 20})) {
        case 0: return add(a.t != b.t, an + " != " + bn, 1, true);
        case 1: return add(tempura::where(a.t, true, b.t), an + " | " + bn, 1, true);
        case 2: return add(tempura::where(a.t, b.t, false), an + " & " + bn, 1, true);
        default:
            return add(tempura::where(a.t, b.t, !b.t), "where(" + an + ", " + bn + ", !" + bn + ")",
                       1, true);
        }
    }

    GVal unary(const GVal& a) {
        const DType dt = a.t.dtype();
        const std::string n = a.name;
        const double A = a.bound;
        if (dt == DType::Float32) {
            switch (weighted({12, 12, 10, 10, 8, 8, 8, 10, 10})) {
            case 0: return add(-a.t, "-" + n, A, a.exact);
            case 1: return add(a.t.relu(), n + ".relu()", A, a.exact);
            case 2: return add(a.t.abs(), n + ".abs()", A, a.exact);
            case 3:
                if (A <= 8) return add(a.t.exp2(), n + ".exp2()", std::exp2(A), false);
                return add(a.t.relu(), n + ".relu()", A, a.exact);
            case 4: return add((a.t.abs() + 1.0f).sqrt(), "sqrt(|" + n + "| + 1)", A + 1, false);
            case 5: return add(a.t.sin(), n + ".sin()", 1, false);
            case 6: return add((a.t.abs() + 1.0f).log2(), "log2(|" + n + "| + 1)", A + 1, false);
            case 7:
                if (A <= 100) return add(a.t * a.t, n + " * " + n, A * A, false);
                return add(-a.t, "-" + n, A, a.exact);
            default: return add(a.t * 0.5f + 1.0f, n + " * 0.5 + 1", A * 0.5 + 1, false);
            }
        }
        if (dt == DType::Int32) {
            switch (weighted({20, 20, 20, 20, 20})) {
            case 0: return add(-a.t, "-" + n, A, true);
            case 1: return add(a.t.relu(), n + ".relu()", A, true);
            case 2: return add(a.t.abs(), n + ".abs()", A, true);
            case 3: return add(a.t * 3, n + " * 3", 3 * A, true);
            default: return add(a.t + 7, n + " + 7", A + 7, true);
            }
        }
        return add(!a.t, "!" + n, 1, true);
    }

    GVal view(const GVal& a) {
        const Shape s = a.t.shape();
        const int64_t nd = static_cast<int64_t>(s.size());
        const std::string n = a.name;
        if (nd == 0) return unary(a);
        switch (weighted({25, 20, 20, 20, 10, 5})) {
        case 0: {
            Shape perm(s.size());
            for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
            std::shuffle(perm.begin(), perm.end(), rng_);
            return add(a.t.permute(perm), n + ".permute(" + tempura::shape_str(perm) + ")", a.bound,
                       a.exact);
        }
        case 1: {
            Shape axes;
            for (int64_t i = 0; i < nd; ++i)
                if (chance(0.5)) axes.push_back(i);
            if (axes.empty()) axes.push_back(irange(0, nd - 1));
            return add(a.t.flip(axes), n + ".flip(" + tempura::shape_str(axes) + ")", a.bound,
                       a.exact);
        }
        case 2: {
            std::vector<std::pair<int64_t, int64_t>> p(s.size(), {0, 0});
            const auto d = static_cast<size_t>(irange(0, nd - 1));
            p[d] = {irange(0, 3), irange(0, 3)};
            if (p[d].first + p[d].second == 0) p[d].second = 2;
            if (numel_of(s) / s[d] * (s[d] + p[d].first + p[d].second) > cap_) return unary(a);
            return add(a.t.pad(p),
                       n + ".pad(dim " + std::to_string(d) + ": " + std::to_string(p[d].first) +
                           ", " + std::to_string(p[d].second) + ")",
                       a.bound, a.exact);
        }
        case 3: {
            std::vector<std::pair<int64_t, int64_t>> b;
            for (int64_t d : s) b.emplace_back(0, d);
            const auto d = static_cast<size_t>(irange(0, nd - 1));
            if (s[d] < 2) return unary(a);
            const int64_t lo = irange(0, s[d] - 1), hi = irange(lo + 1, s[d]);
            b[d] = {lo, hi};
            return add(a.t.shrink(b),
                       n + ".shrink(dim " + std::to_string(d) + ": " + std::to_string(lo) + ", " +
                           std::to_string(hi) + ")",
                       a.bound, a.exact);
        }
        case 4: {
            // Merge two adjacent dims, or split one.
            Shape r = s;
            if (nd >= 2 && chance(0.5)) {
                const auto d = static_cast<size_t>(irange(0, nd - 2));
                r[d] *= r[d + 1];
                r.erase(r.begin() + static_cast<long>(d) + 1);
            } else {
                const auto d = static_cast<size_t>(irange(0, nd - 1));
                int64_t f = 0;
                for (int64_t c : {4, 2, 3})
                    if (s[d] % c == 0 && s[d] > c) f = c;
                if (f == 0 || nd >= 4) return unary(a);
                r[d] = s[d] / f;
                r.insert(r.begin() + static_cast<long>(d) + 1, f);
            }
            return add(a.t.reshape(r), n + ".reshape(" + tempura::shape_str(r) + ")", a.bound,
                       a.exact);
        }
        default: {
            // A new leading dim.
            const int64_t k = chance(0.5) ? 2 : 3;
            if (nd >= 4 || numel_of(s) * k > cap_) return unary(a);
            Shape e = s;
            e.insert(e.begin(), k);
            return add(a.t.unsqueeze(0).expand(e), n + ".expand(" + tempura::shape_str(e) + ")",
                       a.bound, a.exact);
        }
        }
    }

    GVal chain(GVal v, int64_t steps) {
        for (int64_t i = 0; i < steps; ++i) {
            switch (weighted({45, 25, 20, 6, 4})) {
            case 0: v = binary(v); break;
            case 1: v = unary(v); break;
            case 2: v = view(v); break;
            case 3: v = to_dtype(v, rdtype()); break;
            default: v = add(v.t.contiguous(), v.name + ".contiguous()", v.bound, v.exact); break;
            }
        }
        return v;
    }

    GVal reduce(const GVal& in, bool force_keep = false) {
        GVal a = in;
        const Shape s = a.t.shape();
        const int64_t nd = static_cast<int64_t>(s.size());
        Shape axes;
        if (!chance(0.25))
            for (int64_t i = 0; i < nd; ++i)
                if (chance(0.5)) axes.push_back(i);
        int64_t n = 1;
        if (axes.empty())
            n = numel_of(s);
        else
            for (int64_t ax : axes) n *= s[static_cast<size_t>(ax)];
        max_reduce = std::max(max_reduce, n);
        const bool keep = force_keep || chance(0.4);
        const std::string as = axes.empty() ? "all" : tempura::shape_str(axes);
        const std::string sfx = "(" + as + (keep ? ", keepdim)" : ")");
        const DType dt = a.t.dtype();
        const double dn = static_cast<double>(n);
        if (dt == DType::Bool) {
            if (chance(0.5)) return add(a.t.max(axes, keep), a.name + ".max" + sfx, 1, true); // any
            return add(a.t.sum(axes, keep), a.name + ".sum" + sfx, dn, true);
        }
        switch (weighted({40, 25, 15, 10, 10})) {
        case 0: return add(a.t.sum(axes, keep), a.name + ".sum" + sfx, dn * a.bound, n == 1);
        case 1: return add(a.t.max(axes, keep), a.name + ".max" + sfx, a.bound, a.exact);
        case 2: return add(a.t.min(axes, keep), a.name + ".min" + sfx, a.bound, a.exact);
        case 3:
            if (dt == DType::Float32)
                return add(a.t.mean(axes, keep), a.name + ".mean" + sfx, a.bound, false);
            return add(a.t.sum(axes, keep), a.name + ".sum" + sfx, dn * a.bound, true);
        default:
            if (n <= 16 && (dt == DType::Int32 || a.bound <= 1.5))
                return add(a.t.prod(axes, keep), a.name + ".prod" + sfx,
                           std::pow(std::max(a.bound, 1.0), dn), dt == DType::Int32);
            return add(a.t.max(axes, keep), a.name + ".max" + sfx, a.bound, a.exact);
        }
    }

    GVal matmul() {
        const DType dt = chance(0.8) ? DType::Float32 : DType::Int32;
        int64_t M = 1, K = 1, N = 1;
        for (int tries = 0; tries < 100; ++tries) {
            M = rdim(), K = rdim(), N = rdim();
            if (M * K * N <= 8 * cap_ && M * K * N >= min_ && M * N <= cap_ && K > 1) break;
        }
        max_reduce = std::max(max_reduce, K);
        const std::string dims =
            std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N);
        switch (weighted({35, 25, 20, 20})) {
        case 0: {
            // a[:, :, None] * b[None] summed over K.
            const GVal a = input({M, K}, dt), b = input({K, N}, dt);
            return add((a.t.reshape({M, K, 1}) * b.t.reshape({1, K, N})).sum(1),
                       "(" + a.name + "[:, :, None] * " + b.name + "[None]).sum(1)  " + dims,
                       static_cast<double>(K) * a.bound * b.bound, dt == DType::Int32);
        }
        case 1: {
            const GVal a = input({M, K}, dt), b = input({K, N}, dt);
            return add(a.t.matmul(b.t), a.name + ".matmul(" + b.name + ")  " + dims,
                       static_cast<double>(K) * a.bound * b.bound, dt == DType::Int32);
        }
        case 2: {
            // x @ w^T (+ bias, relu): the MLP layer's form.
            const GVal a = input({M, K}, dt), w = input({N, K}, dt);
            GVal r = add(a.t.dot(w.t.transpose(0, 1)), a.name + ".dot(" + w.name + ".T)  " + dims,
                         static_cast<double>(K) * a.bound * w.bound, dt == DType::Int32);
            const GVal bias = input({N}, dt);
            return add((r.t + bias.t).relu(), "relu(" + r.name + " + " + bias.name + ")",
                       r.bound + bias.bound, r.exact);
        }
        default: {
            int64_t Bt = 2;
            if (M * N * 2 > cap_) Bt = 1;
            const GVal a = input({Bt, M, K}, dt), b = input({Bt, K, N}, dt);
            return add(a.t.matmul(b.t), a.name + ".matmul(" + b.name + ")  batched " + dims,
                       static_cast<double>(K) * a.bound * b.bound, dt == DType::Int32);
        }
        }
    }

    GVal softmax(const GVal& a) {
        const int64_t ax = irange(0, a.t.ndim() - 1);
        const double n = static_cast<double>(a.t.shape()[static_cast<size_t>(ax)]);
        max_reduce = std::max(max_reduce, static_cast<int64_t>(n));
        if (chance(0.5))
            return add(a.t.softmax(ax), a.name + ".softmax(" + std::to_string(ax) + ")", 1, false);
        return add(a.t.log_softmax(ax), a.name + ".log_softmax(" + std::to_string(ax) + ")",
                   2 * a.bound + std::log(n) + 1, false);
    }
};

// ---- running one kernel ------------------------------------------------------------------------

struct ParamInfo {
    int64_t slot = 0;
    int64_t numel = 0;
    DType dtype;
};

std::vector<ParamInfo> params_of(const UOp& ast) {
    std::vector<ParamInfo> ps;
    for (const UOp& u : ast.toposort())
        if (u.op() == Op::Param) {
            const auto& a = u.arg_as<std::vector<int64_t>>();
            ps.push_back({a.at(0), a.at(1), u.dtype().base()});
        }
    std::sort(ps.begin(), ps.end(),
              [](const ParamInfo& x, const ParamInfo& y) { return x.slot < y.slot; });
    return ps;
}

// Random contents for an input buffer: floats in [-2, 2] (sometimes multiples of 0.5, for ties
// and equalities), int32 in [-5, 5], bools 0/1.
std::unique_ptr<Buffer> random_buffer(const ParamInfo& p, std::mt19937_64& rng) {
    auto b = std::make_unique<Buffer>(p.dtype, p.numel);
    const bool quantized = std::uniform_int_distribution<int>(0, 9)(rng) < 3;
    for (int64_t i = 0; i < p.numel; ++i) {
        if (p.dtype == DType::Float32) {
            const float x =
                quantized
                    ? static_cast<float>(std::uniform_int_distribution<int>(-4, 4)(rng)) * 0.5f
                    : static_cast<float>(std::uniform_real_distribution<double>(-2, 2)(rng));
            static_cast<float*>(b->data())[i] = x;
        } else if (p.dtype == DType::Int32) {
            static_cast<int32_t*>(b->data())[i] =
                std::uniform_int_distribution<int32_t>(-5, 5)(rng);
        } else if (p.dtype == DType::Bool) {
            static_cast<uint8_t*>(b->data())[i] =
                static_cast<uint8_t>(std::uniform_int_distribution<int>(0, 1)(rng));
        } else {
            FAIL("unexpected PARAM dtype " << p.dtype.name());
        }
    }
    return b;
}

enum class RunMode { Sequential, Parallel };
double g_compile_s = 0; // seconds spent in compile_cpu_kernel, for the report

// Runs a lowered kernel on `inputs` (slots >= 1) into a fresh output filled with 0xA5 bytes (so
// that an element no run writes shows), returns the output's bytes.
std::vector<uint8_t> run_lowered(const tempura::codegen::LoweredKernel& low,
                                 const std::string& name, const std::vector<ParamInfo>& ps,
                                 const std::vector<std::unique_ptr<Buffer>>& inputs, RunMode mode) {
    const auto tc = std::chrono::steady_clock::now();
    const auto kernel = tempura::runtime::compile_cpu_kernel(name, low.program);
    g_compile_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - tc).count();
    Buffer out(ps.at(0).dtype, ps.at(0).numel, false);
    std::memset(out.data(), 0xA5, out.nbytes());
    std::vector<void*> args(ps.size());
    args[0] = out.data();
    for (size_t i = 1; i < ps.size(); ++i) args[i] = inputs[i]->data();
    if (low.threads > 1) {
        if (mode == RunMode::Sequential) {
            for (int64_t core = 0; core < low.threads; ++core) kernel->run(args.data(), &core);
        } else {
            tempura::runtime::parallel_for(static_cast<size_t>(low.threads), [&](size_t c) {
                const auto core = static_cast<int64_t>(c);
                kernel->run(args.data(), &core);
            });
        }
    } else {
        kernel->run(args.data(), nullptr);
    }
    const auto* p = static_cast<const uint8_t*>(out.data());
    return std::vector<uint8_t>(p, p + out.nbytes());
}

// What a kernel computes, for the tolerance.
struct KernelTraits {
    bool float_add_reduce = false;
    bool float_mul = false;
    int64_t reduce_size = 1; // product of the reduce ranges' sizes
};

KernelTraits traits_of(const UOp& prepared) {
    KernelTraits t;
    for (const UOp& u : prepared.toposort()) {
        if (u.op() == Op::Reduce && u.dtype().is_float() && u.arg_as<Op>() == Op::Add)
            t.float_add_reduce = true;
        if (u.op() == Op::Reduce && u.dtype().is_float() && u.arg_as<Op>() == Op::Mul)
            t.float_add_reduce = true; // a reassociated product: the same tolerance
        if ((u.op() == Op::Mul || u.op() == Op::MulAcc) && u.dtype().is_float()) t.float_mul = true;
        if (u.op() == Op::Range && u.arg_as<RangeArg>().type == AxisType::Reduce)
            t.reduce_size *= u.src(0).const_value();
    }
    return t;
}

// Compares two outputs; empty when they agree, else where they first differ.
std::string compare_outputs(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got,
                            DType dt, const KernelTraits& t, double bound) {
    if (want.size() != got.size()) return "sizes differ";
    const size_t item = static_cast<size_t>(dt.itemsize());
    const size_t n = want.size() / item;
    int64_t bad = 0;
    std::string first;
    for (size_t i = 0; i < n; ++i) {
        bool ok;
        double w = 0, g = 0;
        if (dt == DType::Float32) {
            float wf, gf;
            std::memcpy(&wf, &want[i * 4], 4);
            std::memcpy(&gf, &got[i * 4], 4);
            w = wf, g = gf;
            if (std::memcmp(&wf, &gf, 4) == 0 || (std::isnan(wf) && std::isnan(gf))) {
                ok = true;
            } else if (std::isnan(w) || std::isnan(g) || std::isinf(w) || std::isinf(g)) {
                ok = false;
            } else {
                const double m = std::max(std::fabs(w), std::fabs(g));
                double tol = 0;
                if (t.float_add_reduce)
                    tol =
                        1e-4 * m + 1e-5 * static_cast<double>(t.reduce_size) * std::max(1.0, bound);
                else if (t.float_mul)
                    tol = 1e-6 * std::max(m, bound);
                ok = std::fabs(w - g) <= tol;
            }
        } else {
            ok = std::memcmp(&want[i * item], &got[i * item], item) == 0;
            if (dt == DType::Int32) {
                int32_t wi, gi;
                std::memcpy(&wi, &want[i * 4], 4);
                std::memcpy(&gi, &got[i * 4], 4);
                w = wi, g = gi;
            } else {
                w = want[i], g = got[i];
            }
        }
        if (!ok && bad++ == 0)
            first =
                "element " + std::to_string(i) + ": expected " + num_str(w) + ", got " + num_str(g);
    }
    if (bad == 0) return "";
    return std::to_string(bad) + " of " + std::to_string(n) + " elements differ; first " + first;
}

bool has_vector_access(const std::vector<UOp>& program) {
    for (const UOp& u : program) {
        if (u.op() == Op::Load && u.dtype().count > 1) return true;
        if (u.op() == Op::Store && u.src(1).dtype().count > 1) return true;
    }
    return false;
}

Opt random_opt(std::mt19937_64& rng, const OptKernel& k) {
    auto pick = [&](int64_t lo, int64_t hi) {
        return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    };
    // NOLOCALS always applies (unless LOCAL did) and changes no code: rarely.
    static const OptOp ops[] = {OptOp::Upcast, OptOp::Upcast, OptOp::Upcast, OptOp::Upcast,
                                OptOp::Unroll, OptOp::Unroll, OptOp::Unroll, OptOp::Local,
                                OptOp::Local,  OptOp::Thread, OptOp::Thread, OptOp::Swap,
                                OptOp::Swap,   OptOp::PadTo,  OptOp::PadTo,  OptOp::NoLocals};
    static const int64_t amounts[] = {2, 3, 4, 8, 16, 32};
    Opt o;
    o.op = ops[pick(0, std::size(ops) - 1)];
    const auto n = static_cast<int64_t>(k.axes().size());
    const auto n_out = static_cast<int64_t>(k.output_axes());
    // Mostly an axis of the right kind (an output axis for UPCAST, a reduce axis for UNROLL),
    // sometimes any (the invalid ones exercise the checks and must leave the kernel unchanged).
    if (n == 0 || pick(0, 9) == 0) {
        o.axis = pick(0, std::max<int64_t>(n, 1));
    } else if (o.op == OptOp::Unroll && n > n_out) {
        o.axis = pick(n_out, n - 1);
    } else if (o.op != OptOp::PadTo && n_out > 0) {
        o.axis = pick(0, n_out - 1);
    } else {
        o.axis = pick(0, n - 1);
    }
    if (o.op == OptOp::Swap)
        o.arg = pick(0, std::max<int64_t>(n_out - 1, 0));
    else if (o.op == OptOp::Thread)
        o.arg = pick(0, 3) != 0 ? 2 : amounts[pick(0, std::size(amounts) - 1)];
    else if (o.op == OptOp::NoLocals)
        o.axis = 0, o.arg = 0;
    else
        o.arg = amounts[pick(0, std::size(amounts) - 1)];
    return o;
}

// The cases of test 4 and the named minimal reproductions.
struct KernelRun {
    std::string name;
    UOp ast;
    std::vector<ParamInfo> params;
    std::vector<std::unique_ptr<Buffer>> inputs;
};

KernelRun only_kernel(const Tensor& t, uint64_t seed = 1) {
    const auto ks = tempura::schedule_graph(t.uop());
    REQUIRE(ks.size() == 1);
    KernelRun r;
    r.name = ks[0].name;
    r.ast = ks[0].ast;
    r.params = params_of(r.ast);
    std::mt19937_64 rng(seed);
    r.inputs.resize(r.params.size());
    for (size_t i = 1; i < r.params.size(); ++i) r.inputs[i] = random_buffer(r.params[i], rng);
    return r;
}

// Runs the kernel's own inputs (the tensors' data) rather than random ones: the inputs of a
// scheduled kernel are its params' buffers.
KernelRun only_kernel_own_inputs(const Tensor& t) {
    const auto ks = tempura::schedule_graph(t.uop());
    REQUIRE(ks.size() == 1);
    KernelRun r;
    r.name = ks[0].name;
    r.ast = ks[0].ast;
    r.params = params_of(r.ast);
    r.inputs.resize(r.params.size());
    for (size_t i = 1; i < r.params.size(); ++i) {
        const UOp& node = ks[0].params[i];
        REQUIRE(node.op() == Op::Buffer);
        const auto src = tempura::runtime::lookup_buffer(node.arg_as<std::vector<int64_t>>().at(0));
        r.inputs[i] = std::make_unique<Buffer>(src->dtype(), src->numel());
        std::memcpy(r.inputs[i]->data(), src->data(), src->nbytes());
    }
    return r;
}

// Lowered with `opts` and without; empty when the outputs agree (both run modes).
std::string differ(const KernelRun& k, const std::vector<Opt>& opts, const DeviceLimits& lim,
                   double bound = 2) {
    const std::vector<Opt> none;
    const auto base = tempura::codegen::lower_kernel_opt(k.name, k.ast, lim, &none);
    const auto opt = tempura::codegen::lower_kernel_opt(k.name, k.ast, lim, &opts);
    const auto want = run_lowered(base, k.name, k.params, k.inputs, RunMode::Sequential);
    const KernelTraits tr = traits_of(tempura::codegen::prepare_for_opts(k.ast));
    std::string d =
        compare_outputs(want, run_lowered(opt, k.name, k.params, k.inputs, RunMode::Sequential),
                        k.params[0].dtype, tr, bound);
    if (d.empty() && opt.threads > 1)
        d = compare_outputs(want, run_lowered(opt, k.name, k.params, k.inputs, RunMode::Parallel),
                            k.params[0].dtype, tr, bound);
    return d;
}

} // namespace

// ---- 1. random opts, optimized vs unoptimized ---------------------------------------------------

TEST_CASE("opts differential: random kernels with random opts vs the same kernels without opts") {
#ifdef TEMPURA_TEST_ASAN
    const int64_t default_n = 300;
#else
    const int64_t default_n = 2000;
#endif
    const int64_t target = env_int("TEMPURA_FUZZ_N", default_n);
    const uint64_t seed = static_cast<uint64_t>(env_int("TEMPURA_FUZZ_SEED", 20250101));
    const int64_t only = env_int("TEMPURA_FUZZ_ONLY", -1);
    static const int64_t widths[] = {64, 32, 16};

    int64_t kernels = 0, with_opts = 0, with_vector = 0, with_thread = 0, with_padto = 0,
            mismatches = 0, exceptions = 0, bad_rollbacks = 0, programs = 0, opts_total = 0,
            opts_rejected = 0, printed = 0, float_exact = 0, float_mul = 0, float_reduce = 0,
            out_f32 = 0, out_i32 = 0, out_bool = 0, within_tolerance = 0;
    int64_t applied_by_op[9] = {};
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; kernels < target || (only >= 0 && i <= only); ++i) {
        if (only >= 0 && i != only) {
            if (i > only) break;
            continue;
        }
        ++programs;
        const uint64_t pseed = splitmix(seed * 0x100000001b3ull + static_cast<uint64_t>(i));
        std::mt19937_64 rng(splitmix(pseed ^ 0x5bd1e995ull));
        std::string report, current;
        ProgGen g(pseed, 4096);
        try {
            const Tensor root = g.make();
            const auto scheduled = tempura::schedule_graph(root.uop());
            for (const auto& k : scheduled) {
                if (k.ast.is_null()) continue;
                ++kernels;
                const DeviceLimits lim =
                    limits(widths[std::uniform_int_distribution<int>(0, 2)(rng)], 2);
                current = "  kernel " + k.name + " vector_bytes " +
                          std::to_string(lim.vector_bytes) + " opts ";
                const UOp prepared = tempura::codegen::prepare_for_opts(k.ast);
                OptKernel ok(prepared, lim);
                const int64_t want_opts = std::uniform_int_distribution<int64_t>(0, 5)(rng);
                for (int64_t a = 0;
                     a < 4 * want_opts && static_cast<int64_t>(ok.applied().size()) < want_opts;
                     ++a) {
                    const Opt o = random_opt(rng, ok);
                    const UOp before = ok.ast();
                    const std::vector<Opt> applied_before = ok.applied();
                    const auto shape_before = ok.shape();
                    ++opts_total;
                    if (!ok.try_apply(o)) {
                        ++opts_rejected;
                        if (!ok.ast().same(before) || ok.applied() != applied_before ||
                            ok.shape() != shape_before)
                            ++bad_rollbacks;
                    }
                }
                const std::vector<Opt> opts = ok.applied();
                current += tempura::codegen::to_string(opts);
                if (std::any_of(opts.begin(), opts.end(),
                                [](const Opt& o) { return o.op != OptOp::NoLocals; }))
                    ++with_opts; // not counting NOLOCALS alone
                ++(k.output.dtype() == DType::Float32 ? out_f32
                   : k.output.dtype() == DType::Int32 ? out_i32
                                                      : out_bool);
                for (const Opt& o : opts) {
                    ++applied_by_op[static_cast<size_t>(o.op)];
                    with_thread += o.op == OptOp::Thread;
                    with_padto += o.op == OptOp::PadTo;
                }
                const std::vector<ParamInfo> ps = params_of(k.ast);
                std::vector<std::unique_ptr<Buffer>> inputs(ps.size());
                for (size_t p = 1; p < ps.size(); ++p) inputs[p] = random_buffer(ps[p], rng);
                const std::vector<Opt> none;
                const auto base = tempura::codegen::lower_kernel_opt(k.name, k.ast, lim, &none);
                const auto low = tempura::codegen::lower_kernel_opt(k.name, k.ast, lim, &opts);
                if (has_vector_access(low.program)) ++with_vector;
                const auto want = run_lowered(base, k.name, ps, inputs, RunMode::Sequential);
                const KernelTraits tr = traits_of(prepared);
                if (ps[0].dtype == DType::Float32)
                    ++(tr.float_add_reduce ? float_reduce : tr.float_mul ? float_mul : float_exact);
                const double bound = std::max(2.0, g.max_bound);
                const auto got = run_lowered(low, k.name, ps, inputs, RunMode::Sequential);
                std::string d = compare_outputs(want, got, ps[0].dtype, tr, bound);
                if (d.empty() && got != want) ++within_tolerance;
                if (d.empty() && low.threads > 1) {
                    d = compare_outputs(want,
                                        run_lowered(low, k.name, ps, inputs, RunMode::Parallel),
                                        ps[0].dtype, tr, bound);
                    if (!d.empty()) d = "(parallel run) " + d;
                }
                if (!d.empty()) {
                    ++mismatches;
                    report += current + "\n    MISMATCH " + d + "\n";
                } else if (only >= 0) {
                    report += current + "  ok\n";
                }
                current.clear();
            }
        } catch (const std::exception& e) {
            ++exceptions;
            report += current + "\n    EXCEPTION " + e.what() + "\n";
        }
        if (!report.empty()) report = g.text + report;
        if (!report.empty() && (only >= 0 || printed++ < env_int("TEMPURA_FUZZ_PRINT", 10)))
            std::fprintf(stderr,
                         "---- program %lld (TEMPURA_FUZZ_SEED=%llu TEMPURA_FUZZ_ONLY=%lld)\n%s",
                         static_cast<long long>(i), static_cast<unsigned long long>(seed),
                         static_cast<long long>(i), report.c_str());
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string by_op;
    for (size_t o = 0; o < std::size(applied_by_op); ++o)
        by_op += (o ? ", " : "") +
                 std::string(tempura::codegen::opt_op_name(static_cast<OptOp>(o))) + " " +
                 std::to_string(applied_by_op[o]);
    MESSAGE("opts applied: " << by_op);
    MESSAGE("opts differential: " << programs << " programs, " << kernels << " kernels, "
                                  << with_opts << " with opts, " << with_vector
                                  << " with vector loads/stores, " << with_thread
                                  << " with THREAD, " << with_padto << " with PADTO; outputs "
                                  << out_f32 << " f32, " << out_i32 << " i32, " << out_bool
                                  << " bool; float outputs: " << float_exact << " bit-exact, "
                                  << float_mul << " with the FMA tolerance, " << float_reduce
                                  << " with the reduce tolerance, " << within_tolerance
                                  << " of them not bit-identical; " << opts_total << " opts tried, "
                                  << opts_rejected << " rejected; " << mismatches << " mismatches, "
                                  << exceptions << " exceptions; " << secs << " s"
                                  << " (" << g_compile_s << " s compiling)");
    CHECK(mismatches == 0);
    CHECK(exceptions == 0);
    CHECK(bad_rollbacks == 0);
    if (only < 0) {
        CHECK(kernels >= target);
        CHECK(with_opts * 2 >= kernels);
        CHECK(with_vector * 5 >= kernels);
        CHECK(with_thread * 10 >= kernels);
        CHECK(with_padto * 20 >= kernels);
    }
}

// ---- 1b. whole programs through realize() (the heuristics) vs the reference interpreter
// ----------

TEST_CASE("opts differential: realize() with the heuristics vs the reference interpreter") {
#ifdef TEMPURA_TEST_ASAN
    const int64_t default_n = 60;
#else
    const int64_t default_n = 300;
#endif
    const int64_t count = env_int("TEMPURA_FUZZ_N", 2000) * default_n / 2000 > 0
                              ? env_int("TEMPURA_FUZZ_N", 2000) * default_n / 2000
                              : 1;
    const uint64_t seed = static_cast<uint64_t>(env_int("TEMPURA_FUZZ_SEED", 20250101)) ^ 0xabcdef;
    const DeviceLimits host = tempura::runtime::host_limits();
    int64_t kernels = 0, with_opts = 0, with_thread = 0, mismatches = 0, exceptions = 0,
            printed = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < count; ++i) {
        const uint64_t pseed = splitmix(seed * 0x100000001b3ull + static_cast<uint64_t>(i));
        // Every 8th program is big enough for THREAD (2^17 elements of work).
        ProgGen g(pseed, i % 8 == 7 ? 1 << 18 : 4096, i % 8 == 7 ? 1 << 17 : 1);
        std::string report;
        try {
            Tensor root = g.make();
            for (const auto& k : tempura::schedule_graph(root.uop())) {
                if (k.ast.is_null()) continue;
                ++kernels;
                const auto opts = tempura::codegen::heuristic_opts(
                    tempura::codegen::prepare_for_opts(k.ast), host);
                with_opts += !opts.empty();
                for (const Opt& o : opts) with_thread += o.op == OptOp::Thread;
            }
            const tempura::ReferenceArray ref = tempura::reference_eval_array(root.uop());
            const std::vector<double> got = root.to_vector<double>();
            REQUIRE(static_cast<int64_t>(got.size()) == ref.size());
            const bool flt = root.dtype().is_float();
            const double atol = 1e-5 * static_cast<double>(g.max_reduce) *
                                std::max(1.0, std::min(g.max_bound, 1e4));
            int64_t bad = 0;
            for (int64_t e = 0; e < ref.size(); ++e) {
                const double w = ref.at(e), h = got[static_cast<size_t>(e)];
                bool ok = w == h || (std::isnan(w) && std::isnan(h));
                if (!ok && flt && std::isfinite(w) && std::isfinite(h))
                    ok = std::fabs(w - h) <=
                         1e-4 * std::max({1.0, std::fabs(w), std::fabs(h)}) + atol;
                if (!ok && bad++ == 0)
                    report += "  MISMATCH element " + std::to_string(e) + ": reference " +
                              num_str(w) + ", realized " + num_str(h) + "\n";
            }
            if (bad > 0) ++mismatches;
        } catch (const std::exception& e) {
            ++exceptions;
            report += std::string("  EXCEPTION ") + e.what() + "\n";
        }
        if (!report.empty() && printed++ < 10)
            std::fprintf(stderr, "---- realize program %lld\n%s%s", static_cast<long long>(i),
                         g.text.c_str(), report.c_str());
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE("realize vs reference: "
            << count << " programs, " << kernels << " kernels, " << with_opts
            << " with heuristic opts, " << with_thread << " with THREAD (" << host.vector_bytes
            << "-byte vectors, " << host.threads << " threads); " << mismatches << " mismatches, "
            << exceptions << " exceptions; " << secs << " s");
    CHECK(mismatches == 0);
    CHECK(exceptions == 0);
    CHECK(with_opts * 4 >= kernels);
    if (count >= 100) CHECK(with_thread > 0);
}

// ---- minimal reproductions of what the random opts found
// -----------------------------------------

namespace {

// differ() with a tempura::Error turned into its message.
std::string differ_or_error(const KernelRun& k, const std::vector<Opt>& opts,
                            const DeviceLimits& lim) {
    std::string d;
    const std::string e = error_of([&] { d = differ(k, opts, lim); });
    return e == "<no error>" ? d : e;
}

} // namespace

TEST_CASE("opts regression: UPCAST of a kernel reading a padded input (a gated LOAD)") {
    // Found by the random opts (x[12].pad((2, 0)) with UPCAST(0, 2)): rangeify turns PAD into
    // LOAD(INDEX, gate, alt), and the expander took only LOAD(INDEX): "[expander] expects
    // LOAD(INDEX(...)) in a kernel AST". Fixed in 2fb70dd.
    const Tensor x = Tensor::from_vector(std::vector<float>{1, 2});
    const KernelRun k = only_kernel(x.pad({{0, 2}})); // E_4: [1, 2, 0, 0]
    CHECK(differ_or_error(k, {{OptOp::Upcast, 0, 2}}, limits(64, 2)) == "");
    CHECK(differ_or_error(k, {{OptOp::Upcast, 0, 4}}, limits(64, 2)) == "");
    // realize() never hit it only because the heuristics leave such kernels alone (the load's
    // index `r - 1` is a SUB, which linear_coefficient does not see as linear); it must keep
    // working once they vectorize it.
    Tensor y = Tensor::from_vector(std::vector<float>(30, 1.0f)).pad({{1, 1}});
    std::vector<float> got;
    CHECK(error_of([&] { got = y.to_vector<float>(); }) == "<no error>");
    if (got.size() == 32) {
        CHECK(got[0] == 0.0f);
        CHECK(got[1] == 1.0f);
        CHECK(got[31] == 0.0f);
    }
}

TEST_CASE("opts regression: a reduce over two unrolled ranges its value does not read") {
    // Found by the random opts (TEMPURA_FUZZ_SEED=7007, program 1251): a sum of a constant
    // over 64, unrolled twice by 2 with vectors of 4 floats. The expander gave both unrolled
    // ranges the vector lanes (no value reads them together), so the reduce counted the second
    // once, not twice: 32, not 64.
    const Tensor b = Tensor::from_vector(std::vector<float>(64, 0.0f)) > 1.0f;
    const KernelRun k = only_kernel((b | true).cast(DType::Float32).sum({0}, true));
    CHECK(differ_or_error(k, {{OptOp::Unroll, 0, 2}, {OptOp::Unroll, 0, 2}}, limits(16, 2)) == "");
    CHECK(differ_or_error(k, {{OptOp::Unroll, 0, 4}, {OptOp::Unroll, 0, 4}}, limits(64, 2)) == "");
}

// A batch norm's output padded for the next conv (MobileNetV2's depthwise input): each padded
// row is one vector whose first and last lanes are padding. The row's numbers load with one
// masked vector load (its first lane's address lies before the row, and is never read), and the
// per-channel scale and shift load ungated: their offsets are inside their buffers everywhere,
// so the padding's gate is not theirs (it kept the code generator from hoisting them out of the
// loop over the rows, and made the row 14 scalar loads: 0.135 -> 0.024 ms for 384 x 16 x 16).
TEST_CASE("a padded row loads with one masked vector load, its per-channel values ungated") {
    constexpr int64_t C = 64;
    std::vector<float> xs(static_cast<size_t>(C * 14 * 14)), ss, bs;
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 97);
    for (int64_t c = 0; c < C; ++c) {
        ss.push_back(static_cast<float>(c % 5 + 1));
        bs.push_back(static_cast<float>(c));
    }
    std::vector<float> want;
    for (int64_t c = 0; c < C; ++c)
        for (int64_t h = 0; h < 16; ++h)
            for (int64_t w = 0; w < 16; ++w) {
                const bool in = h >= 1 && h <= 14 && w >= 1 && w <= 14;
                want.push_back(in ? xs[static_cast<size_t>((c * 14 + h - 1) * 14 + w - 1)] *
                                            ss[static_cast<size_t>(c)] +
                                        bs[static_cast<size_t>(c)]
                                  : 0.0f);
            }
    for (const char* device : {"CPU", "EMU"}) {
        CAPTURE(std::string(device));
        const Tensor x = Tensor::from_vector(xs, {C, 14, 14}).to(device);
        const Tensor s = Tensor::from_vector(ss, {C, 1, 1}).to(device);
        const Tensor b = Tensor::from_vector(bs, {C, 1, 1}).to(device);
        Tensor y = (x * s + b).pad({{0, 0}, {1, 1}, {1, 1}});
        CHECK(y.to_vector<float>() == want);
        REQUIRE(y.kernels().size() == 1);
        const std::string& src = y.kernels().back().source;
        if (std::string(device) == "CPU") {
            const bool avx512 =
                tempura::runtime::host_cpu_features().find("+avx512f") != std::string::npos;
            CHECK(src.find(avx512 ? "@llvm.masked.load.v16f32" : "@llvm.masked.load.v8f32") !=
                  std::string::npos);
            CHECK(src.find("select i1") == std::string::npos); // no load gated by the row
        }
    }
    // The same kernel under explicit upcasts of the padded axis against the reference.
    const Tensor x = Tensor::from_vector(xs, {C, 14, 14});
    const Tensor s = Tensor::from_vector(ss, {C, 1, 1});
    const Tensor b = Tensor::from_vector(bs, {C, 1, 1});
    const KernelRun k = only_kernel((x * s + b).pad({{0, 0}, {1, 1}, {1, 1}}));
    CHECK(differ_or_error(k, {{OptOp::Upcast, 2, 16}}, limits(64, 2)) == "");
    CHECK(differ_or_error(k, {{OptOp::Upcast, 2, 4}}, limits(16, 2)) == "");
    CHECK(differ_or_error(k, {{OptOp::Upcast, 2, 4}, {OptOp::Upcast, 1, 16}}, limits(16, 2)) == "");
}

TEST_CASE("opts regression: a SWAP whose second axis is invalid is named with its axes reversed") {
    // check_axis ran on Opt{SWAP, arg, axis} for the second axis, and its message printed that
    // reversed opt: SWAP(0, 2) reported "SWAP(2, 0): ...". Fixed in 2fb70dd.
    const UOp two = tempura::codegen::prepare_for_opts(
        tempura::schedule_graph((zeros_input({16, 8}).permute({1, 0}) + 1.0f).uop()).at(0).ast);
    const UOp red = tempura::codegen::prepare_for_opts(
        tempura::schedule_graph(zeros_input({16, 8}).sum(1).uop()).at(0).ast);
    OptKernel k2(two, limits(64, 2)), kr(red, limits(64, 2));
    CHECK(error_of([&] {
              k2.apply({OptOp::Swap, 0, 2});
          }) == "[opt] SWAP(0, 2): axis 2 out of range (the kernel has 2 axes)");
    CHECK(error_of([&] {
              kr.apply({OptOp::Swap, 0, 1});
          }) == "[opt] SWAP(0, 1): axis 1 is a reduce axis, not an output axis");
}

// ---- 2. the heuristics' choices
// ------------------------------------------------------------------

namespace {

// The heuristics' opts for the last kernel of t's schedule.
std::string heuristics_for(const Tensor& t, const DeviceLimits& lim) {
    const auto ks = tempura::schedule_graph(t.uop());
    REQUIRE(!ks.empty());
    return tempura::codegen::to_string(
        tempura::codegen::heuristic_opts(tempura::codegen::prepare_for_opts(ks.back().ast), lim));
}

} // namespace

TEST_CASE("heuristics: the opts chosen for named kernels") {
    const Tensor a = zeros_input({1 << 20}), b = zeros_input({1 << 20}), c = zeros_input({1 << 20});
    const Tensor rows = zeros_input({4096, 1024});
    const Tensor m1 = zeros_input({256, 256}), m2 = zeros_input({256, 256});
    const Tensor x = zeros_input({64, 784}), w = zeros_input({784, 128});
    const Tensor w1 = zeros_input({128, 784}), b1 = zeros_input({128});
    const Tensor triad = a * b + c;
    const Tensor rsum = rows.sum(1);
    const Tensor mm = m1.matmul(m2);
    const Tensor mlp_mm = x.matmul(w);
    const Tensor mlp_layer = (x.dot(w1.transpose(0, 1)) + b1).relu(); // examples/mlp.cpp's layer
    const DeviceLimits avx512 = limits(64, 2), one = limits(64, 1), avx2 = limits(32, 2);

    // a * b + c over 2^20: 16 lanes x 4 copies, on 2 threads.
    CHECK(heuristics_for(triad, avx512) == "[UPCAST(0, 16), UPCAST(0, 4), THREAD(0, 2)]");
    CHECK(heuristics_for(triad, one) == "[UPCAST(0, 16), UPCAST(0, 4)]");
    CHECK(heuristics_for(triad, avx2) == "[UPCAST(0, 8), UPCAST(0, 4), THREAD(0, 2)]");
    // Row sums of [4096, 1024]: the contiguous reduce unrolled into 16 lanes x 4 copies.
    CHECK(heuristics_for(rsum, avx512) == "[UNROLL(1, 16), UNROLL(1, 4), THREAD(0, 2)]");
    CHECK(heuristics_for(rsum, one) == "[UNROLL(1, 16), UNROLL(1, 4)]");
    CHECK(heuristics_for(rsum, avx2) == "[UNROLL(1, 8), UNROLL(1, 4), THREAD(0, 2)]");
    // Matmul 256^3: 2 vectors of columns x 8 rows of register blocking, THREAD over the rows,
    // then the column blocks outside the row blocks.
    CHECK(heuristics_for(mm, avx512) ==
          "[UPCAST(1, 16), UPCAST(1, 2), UPCAST(0, 8), THREAD(0, 2), SWAP(1, 2)]");
    CHECK(heuristics_for(mm, one) == "[UPCAST(1, 16), UPCAST(1, 2), UPCAST(0, 8), SWAP(0, 1)]");
    // AVX2 has 16 vector registers, 2 x 8 accumulators spilled: at most 12 there, 2 x 6 or
    // 3 x 4 where the sizes allow (96 rows; 24 columns), 2 x 4 otherwise.
    CHECK(heuristics_for(mm, avx2) ==
          "[UPCAST(1, 8), UPCAST(1, 2), UPCAST(0, 4), THREAD(0, 2), SWAP(1, 2)]");
    CHECK(heuristics_for(zeros_input({96, 64}).matmul(zeros_input({64, 256})), avx2) ==
          "[UPCAST(1, 8), UPCAST(1, 2), UPCAST(0, 6), THREAD(0, 2), SWAP(1, 2)]");
    CHECK(heuristics_for(zeros_input({64, 64}).matmul(zeros_input({64, 192})), avx2) ==
          "[UPCAST(1, 8), UPCAST(1, 3), UPCAST(0, 4), THREAD(0, 2), SWAP(1, 2)]");
    // [64, 784] @ [784, 128]: the same form.
    CHECK(heuristics_for(mlp_mm, avx512) ==
          "[UPCAST(1, 16), UPCAST(1, 2), UPCAST(0, 8), THREAD(0, 2), SWAP(1, 2)]");
    CHECK(heuristics_for(mlp_mm, one) == "[UPCAST(1, 16), UPCAST(1, 2), UPCAST(0, 8), SWAP(0, 1)]");
    // relu(x @ w1^T + b1), w1 [128, 784]: both operands contiguous along the reduce (a dot
    // product per output): the reduce in 16 lanes, 4 x 4 outputs blocked.
    CHECK(heuristics_for(mlp_layer, avx512) ==
          "[UNROLL(2, 16), UPCAST(0, 4), UPCAST(1, 4), THREAD(0, 2)]");
    CHECK(heuristics_for(mlp_layer, one) == "[UNROLL(2, 16), UPCAST(0, 4), UPCAST(1, 4)]");
    CHECK(heuristics_for(mlp_layer, avx2) ==
          "[UNROLL(2, 8), UPCAST(0, 4), UPCAST(1, 2), THREAD(0, 2)]"); // 4 x 2 in 16 registers
    // The layer's weight gradient, dh^T x with dh [64, 128] and x [64, 784]: out [128, 784]
    // reduced over the batch. 784 is 49 vectors of 16 (odd): 7 vectors wide, 2 rows.
    const Tensor dh = zeros_input({64, 128});
    const Tensor dw1 = dh.transpose(0, 1).matmul(x);
    CHECK(heuristics_for(dw1, avx512) ==
          "[UPCAST(1, 16), UPCAST(1, 7), UPCAST(0, 2), THREAD(0, 2), SWAP(1, 2)]");
    // With 8 lanes (AVX2, 16 registers) a 392-wide row is 49 vectors too, where 7 x 2
    // accumulators would not fit: one vector wide, 8 rows (7 wide and one row, 7 loads a
    // broadcast, took twice as long: [256, 256] x [256, 392] 1.0 -> 0.54 ms).
    const Tensor dw392 = dh.transpose(0, 1).matmul(zeros_input({64, 392}));
    CHECK(heuristics_for(dw392, avx2) == "[UPCAST(1, 8), UPCAST(0, 8), THREAD(0, 2), SWAP(1, 2)]");
    // A row of exactly 2 vectors keeps its 2-wide blocking.
    const Tensor narrow = m1.matmul(zeros_input({256, 32}));
    CHECK(heuristics_for(narrow, avx512) ==
          "[UPCAST(1, 16), UPCAST(1, 2), UPCAST(0, 8), THREAD(0, 2)]");

    // A convolution's weight gradient with 4 x 4 taps over rows of 112: its output's innermost
    // axis (4 taps) would be 4-lane vectors; the reduce over the row, contiguous for both
    // operands, takes 16 lanes instead (a dot product per output, blocked 4 output channels by 4
    // kernel rows), as its 3 x 3 siblings do. (ResNet-18's first convolution: 35 -> 68 GFLOP/s.)
    {
        Tensor cx = zeros_input({8, 3, 20, 115}), cw = zeros_input({16, 3, 4, 4});
        cw.requires_grad();
        (tempura::nn::conv2d(cx, cw) * zeros_input({8, 16, 17, 112})).sum().backward();
        const std::string dw = heuristics_for(cw.grad(), avx512);
        CHECK(dw == "[UNROLL(6, 16), UPCAST(0, 4), UPCAST(2, 4), THREAD(0, 2)]");
    }

    // Small kernels get no THREAD (under 2^17 elements of work), a single element nothing.
    CHECK(heuristics_for(zeros_input({4096}) + 1.0f, avx512) == "[UPCAST(0, 16), UPCAST(0, 4)]");
    CHECK(heuristics_for(zeros_input({8}).sum(), avx512) == "[UNROLL(0, 8)]"); // narrow lanes
    CHECK(heuristics_for(zeros_input({1}) + 1.0f, avx512) == "[]");
    // A size the lanes do not divide: no vector axis.
    CHECK(heuristics_for(zeros_input({1000}) + 1.0f, avx512).find("UPCAST(0, 16)") ==
          std::string::npos);

    // With threads = 1 no THREAD ever appears.
    for (const Tensor& t : {triad, rsum, mm, mlp_mm, mlp_layer})
        CHECK(heuristics_for(t, one).find("THREAD") == std::string::npos);
}

TEST_CASE("heuristics: lower_kernel_opt uses them unless TEMPURA_NOOPT=1 or opts are given") {
    const Tensor a = zeros_input({1 << 20}), b = zeros_input({1 << 20});
    const auto k = tempura::schedule_graph((a * b).uop()).at(0);
    const DeviceLimits lim = limits(64, 2);
    const char* old = std::getenv("TEMPURA_NOOPT");
    const std::string saved = old ? old : "";
    ::unsetenv("TEMPURA_NOOPT");
    CHECK_FALSE(tempura::codegen::noopt_requested());
    const auto heur = tempura::codegen::lower_kernel_opt(k.name, k.ast, lim);
    CHECK(tempura::codegen::to_string(heur.opts) == "[UPCAST(0, 16), UPCAST(0, 4), THREAD(0, 2)]");
    CHECK(heur.threads == 2);
    CHECK(has_vector_access(heur.program));

    ::setenv("TEMPURA_NOOPT", "1", 1);
    CHECK(tempura::codegen::noopt_requested());
    const auto plain = tempura::codegen::lower_kernel_opt(k.name, k.ast, lim);
    CHECK(plain.opts.empty());
    CHECK(plain.threads == 1);
    CHECK_FALSE(has_vector_access(plain.program));
    // Explicit opts still apply.
    const std::vector<Opt> explicit_opts{{OptOp::Upcast, 0, 8}};
    const auto given = tempura::codegen::lower_kernel_opt(k.name, k.ast, lim, &explicit_opts);
    CHECK(given.opts == explicit_opts);
    CHECK(has_vector_access(given.program));
    ::setenv("TEMPURA_NOOPT", "0", 1);
    CHECK_FALSE(tempura::codegen::noopt_requested());

    if (old)
        ::setenv("TEMPURA_NOOPT", saved.c_str(), 1);
    else
        ::unsetenv("TEMPURA_NOOPT");
}

// ---- 3. validity
// ---------------------------------------------------------------------------------

namespace {

struct Fixture {
    DeviceLimits lim = limits(64, 2);
    // E_16: one output axis of 16.
    UOp ew = tempura::codegen::prepare_for_opts(
        tempura::schedule_graph((zeros_input({16}) + 1.0f).uop()).at(0).ast);
    // E_1024: one output axis of 1024.
    UOp big = tempura::codegen::prepare_for_opts(
        tempura::schedule_graph((zeros_input({1024}) + 1.0f).uop()).at(0).ast);
    // r_16_8: output axis 0 of 16, reduce axis 1 of 8.
    UOp red = tempura::codegen::prepare_for_opts(
        tempura::schedule_graph(zeros_input({16, 8}).sum(1).uop()).at(0).ast);
    // E_8_16 (a transpose): output axes 0 of 8 and 1 of 16 that do not merge.
    UOp two = tempura::codegen::prepare_for_opts(
        tempura::schedule_graph((zeros_input({16, 8}).permute({1, 0}) + 1.0f).uop()).at(0).ast);

    // The message of applying `o` after `pre`; also checks that the failed apply left the kernel
    // as it was.
    std::string msg(const UOp& ast, const std::vector<Opt>& pre, const Opt& o) const {
        return msg_with(ast, pre, o, lim);
    }
    static std::string msg_with(const UOp& ast, const std::vector<Opt>& pre, const Opt& o,
                                const DeviceLimits& l) {
        OptKernel k(ast, l);
        for (const Opt& p : pre) k.apply(p);
        const UOp before = k.ast();
        const std::vector<Opt> applied = k.applied();
        const std::vector<int64_t> shape = k.shape();
        const int64_t upcast = k.upcast_size(), threads = k.thread_count();
        const std::string m = error_of([&] { k.apply(o); });
        CHECK(k.ast().same(before));
        CHECK(k.applied() == applied);
        CHECK(k.shape() == shape);
        CHECK(k.upcast_size() == upcast);
        CHECK(k.thread_count() == threads);
        CHECK_FALSE(k.try_apply(o));
        CHECK(k.ast().same(before));
        CHECK(k.applied() == applied);
        return m;
    }
};

} // namespace

TEST_CASE("opts validity: the kernels' axes") {
    const Fixture f;
    CHECK(OptKernel(f.ew, f.lim).shape() == std::vector<int64_t>{16});
    CHECK(OptKernel(f.red, f.lim).shape() == std::vector<int64_t>{16, 8});
    CHECK(OptKernel(f.red, f.lim).output_axes() == 1);
    CHECK(OptKernel(f.two, f.lim).shape() == std::vector<int64_t>{8, 16});
    OptKernel k(f.big, f.lim);
    k.apply({OptOp::Upcast, 0, 16});
    CHECK(k.shape() == std::vector<int64_t>{64});
    CHECK(k.upcast_size() == 16);
    CHECK(k.has_vector_axis());
    k.apply({OptOp::Thread, 0, 2});
    CHECK(k.shape() == std::vector<int64_t>{2, 32});
    CHECK(k.thread_count() == 2);
    CHECK(tempura::codegen::to_string(k.applied()) == "[UPCAST(0, 16), THREAD(0, 2)]");
}

TEST_CASE("opts validity: exact messages, and a failed apply changes nothing") {
    const Fixture f;
    CHECK(f.msg(f.ew, {}, {OptOp::Upcast, 0, 3}) ==
          "[opt] UPCAST(0, 3): axis 0 has size 16, not a multiple of 3 (PADTO first)");
    CHECK(f.msg(f.ew, {}, {OptOp::Upcast, 0, 1}) ==
          "[opt] UPCAST(0, 1): the amount must be at least 2, got 1");
    CHECK(f.msg(f.red, {}, {OptOp::Upcast, 5, 2}) ==
          "[opt] UPCAST(5, 2): axis 5 out of range (the kernel has 2 axes)");
    CHECK(f.msg(f.red, {}, {OptOp::Upcast, -1, 2}) ==
          "[opt] UPCAST(-1, 2): axis -1 out of range (the kernel has 2 axes)");
    CHECK(f.msg(f.red, {}, {OptOp::Unroll, 0, 2}) ==
          "[opt] UNROLL(0, 2): axis 0 is an output axis, not a reduce axis");
    CHECK(f.msg(f.red, {}, {OptOp::Upcast, 1, 2}) ==
          "[opt] UPCAST(1, 2): axis 1 is a reduce axis, not an output axis");
    CHECK(f.msg(f.red, {{OptOp::Thread, 0, 2}}, {OptOp::Thread, 1, 2}) ==
          "[opt] THREAD(1, 2): the kernel has a THREAD axis already");
    CHECK(f.msg(f.big, {{OptOp::Thread, 0, 2}}, {OptOp::Thread, 1, 2}) ==
          "[opt] THREAD(1, 2): the kernel has a THREAD axis already");
    CHECK(f.msg(f.ew, {}, {OptOp::Thread, 0, 4}) == "[opt] THREAD(0, 4): the device has 2 threads");
    CHECK(Fixture::msg_with(f.ew, {}, {OptOp::Thread, 0, 2}, limits(64, 1)) ==
          "[opt] THREAD(0, 2): the device has 1 threads");
    CHECK(f.msg(f.big, {{OptOp::Thread, 0, 2}}, {OptOp::Upcast, 0, 2}) ==
          "[opt] UPCAST(0, 2): axis 0 is the THREAD axis");
    CHECK(f.msg(f.red, {}, {OptOp::Group, 1, 4}) ==
          "[opt] GROUP(1, 4): the CPU device has no shared memory for a grouped reduce (use "
          "THREAD on an output axis, or UNROLL)");
    CHECK(f.msg(f.red, {}, {OptOp::GroupTop, 1, 4}) ==
          "[opt] GROUPTOP(1, 4): the CPU device has no shared memory for a grouped reduce (use "
          "THREAD on an output axis, or UNROLL)");
    CHECK(f.msg(f.red, {}, {OptOp::Group, 0, 4}) ==
          "[opt] GROUP(0, 4): axis 0 is an output axis, not a reduce axis");
    CHECK(f.msg(f.red, {{OptOp::NoLocals, 0, 0}}, {OptOp::Local, 0, 4}) ==
          "[opt] LOCAL(0, 4): NOLOCALS was applied before");
    CHECK(f.msg(f.red, {{OptOp::Local, 0, 4}}, {OptOp::NoLocals, 0, 0}) ==
          "[opt] NOLOCALS: LOCAL was applied before");
    CHECK(f.msg(f.ew, {}, {OptOp::Local, 0, 16}) ==
          "[opt] LOCAL(0, 16): blocking axis 0 by its whole size changes nothing");
    CHECK(f.msg(f.red, {}, {OptOp::Local, 1, 4}) ==
          "[opt] LOCAL(1, 4): axis 1 is a reduce axis, not an output axis");
    CHECK(f.msg(f.two, {}, {OptOp::Swap, 1, 1}) ==
          "[opt] SWAP(1, 1): an axis cannot be swapped with itself");
    CHECK(f.msg(f.two, {}, {OptOp::Swap, 2, 0}) ==
          "[opt] SWAP(2, 0): axis 2 out of range (the kernel has 2 axes)");
    CHECK(f.msg(f.red, {}, {OptOp::Swap, 1, 0}) ==
          "[opt] SWAP(1, 0): axis 1 is a reduce axis, not an output axis");
    CHECK(f.msg(f.two, {{OptOp::Thread, 0, 2}}, {OptOp::Swap, 0, 1}) ==
          "[opt] SWAP(0, 1): the THREAD axis stays outermost");
    CHECK(f.msg(f.ew, {}, {OptOp::PadTo, 0, 8}) ==
          "[opt] PADTO(0, 8): axis 0 has size 16, a multiple of 8 already");
    CHECK(f.msg(f.ew, {}, {OptOp::PadTo, 0, 4}) ==
          "[opt] PADTO(0, 4): axis 0 has size 16, a multiple of 4 already");
    CHECK(f.msg(f.ew, {}, {OptOp::PadTo, 0, 48}) ==
          "[opt] PADTO(0, 48): padding axis 0 from 16 to 48 would more than double it");
    CHECK(f.msg(f.ew, {}, {OptOp::PadTo, 0, 1}) ==
          "[opt] PADTO(0, 1): the amount must be at least 2, got 1");
    CHECK(f.msg(f.big, {{OptOp::Upcast, 0, 16}, {OptOp::Upcast, 0, 16}}, {OptOp::Upcast, 0, 2}) ==
          "[opt] UPCAST(0, 2): the kernel would have 512 upcast elements, more than the limit of "
          "256");
    CHECK(f.msg(f.red, {{OptOp::Upcast, 0, 16}, {OptOp::Unroll, 0, 8}}, {OptOp::Upcast, 0, 2}) ==
          "[opt] UPCAST(0, 2): axis 0 out of range (the kernel has 0 axes)");
    // An expanded axis leaves the list: after UPCAST(0, 16) of 16 the kernel has no axis.
    CHECK(f.msg(f.ew, {{OptOp::Upcast, 0, 16}}, {OptOp::Upcast, 0, 2}) ==
          "[opt] UPCAST(0, 2): axis 0 out of range (the kernel has 0 axes)");
}

TEST_CASE("opts validity: apply_opts throws on the first invalid opt") {
    const Fixture f;
    CHECK(error_of([&] {
              tempura::codegen::apply_opts(f.red, {{OptOp::Unroll, 1, 4}, {OptOp::Unroll, 1, 4}},
                                           f.lim);
          }) == "[opt] UNROLL(1, 4): axis 1 has size 2, not a multiple of 4 (PADTO first)");
    CHECK(error_of([&] {
              tempura::codegen::apply_opts(f.red, {{OptOp::Unroll, 1, 8}, {OptOp::Unroll, 1, 2}},
                                           f.lim);
          }) == "[opt] UNROLL(1, 2): axis 1 out of range (the kernel has 1 axes)");
    CHECK(error_of([&] {
              tempura::codegen::apply_opts(f.red, {{OptOp::Unroll, 1, 4}, {OptOp::Upcast, 0, 4}},
                                           f.lim);
          }) == "<no error>");
    CHECK(error_of([&] {
              const std::vector<Opt> bad{{OptOp::Upcast, 0, 3}};
              tempura::codegen::lower_kernel_opt(
                  "E_16", tempura::schedule_graph((zeros_input({16}) + 1.0f).uop()).at(0).ast,
                  f.lim, &bad);
          }) == "[opt] UPCAST(0, 3): axis 0 has size 16, not a multiple of 3 (PADTO first)");
}

// ---- 4. PADTO
// ------------------------------------------------------------------------------------

namespace {

// Values in [-2, 2] (or, with `negative`, in [-9, -1]: a max of them is never 0).
Tensor random_input(const Shape& s, uint64_t seed, bool negative = false) {
    std::mt19937_64 rng(seed);
    std::vector<float> v(static_cast<size_t>(numel_of(s)));
    for (auto& x : v)
        x = static_cast<float>(negative ? std::uniform_real_distribution<double>(-9, -1)(rng)
                                        : std::uniform_real_distribution<double>(-2, 2)(rng));
    return Tensor::from_vector(v, s);
}

Tensor random_int_input(const Shape& s, uint64_t seed, int lo, int hi) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> v(static_cast<size_t>(numel_of(s)));
    for (auto& x : v) x = std::uniform_int_distribution<int32_t>(lo, hi)(rng);
    return Tensor::from_vector(v, s);
}

// The kernel's output with `opts` (run sequentially and on the pool, which must agree) as
// doubles, on the tensors' own data.
std::vector<double> run_with(const KernelRun& k, const std::vector<Opt>& opts,
                             const DeviceLimits& lim) {
    const auto low = tempura::codegen::lower_kernel_opt(k.name, k.ast, lim, &opts);
    CHECK(low.opts == opts);
    const auto bytes = run_lowered(low, k.name, k.params, k.inputs, RunMode::Sequential);
    if (low.threads > 1)
        CHECK(run_lowered(low, k.name, k.params, k.inputs, RunMode::Parallel) == bytes);
    const DType dt = k.params[0].dtype;
    std::vector<double> out(static_cast<size_t>(k.params[0].numel));
    for (size_t i = 0; i < out.size(); ++i) {
        if (dt == DType::Float32) {
            float f;
            std::memcpy(&f, &bytes[4 * i], 4);
            out[i] = f;
        } else if (dt == DType::Int32) {
            int32_t v;
            std::memcpy(&v, &bytes[4 * i], 4);
            out[i] = v;
        } else {
            out[i] = bytes[i];
        }
    }
    return out;
}

std::vector<double> reference(const Tensor& t) { return tempura::reference_eval(t.uop()); }

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        INFO("element " << i);
        CHECK(std::fabs(got[i] - want[i]) <= tol * std::max(1.0, std::fabs(want[i])));
    }
}

} // namespace

TEST_CASE("PADTO: an axis of 10 padded to 16, then upcast or unrolled by 16") {
    const DeviceLimits lim = limits(64, 2);
    const Tensor x = random_input({10}, 1), y = random_input({10}, 2);
    const Tensor m = random_input({4, 10}, 3), neg = random_input({4, 10}, 4, true);
    const Tensor tall = random_input({10, 8}, 5, true), negv = random_input({10}, 6, true);
    const std::vector<Opt> pad16{{OptOp::PadTo, 0, 16}, {OptOp::Upcast, 0, 16}};
    const std::vector<Opt> pad16r{{OptOp::PadTo, 1, 16}, {OptOp::Unroll, 1, 16}};

    SUBCASE("elementwise: gated loads and a gated store") {
        const Tensor t = x * 2.0f - y;
        const KernelRun k = only_kernel_own_inputs(t);
        CHECK(OptKernel(tempura::codegen::prepare_for_opts(k.ast), lim).shape() ==
              std::vector<int64_t>{10});
        const auto got = run_with(k, pad16, lim);
        CHECK(got == run_with(k, {}, lim)); // bit-exact
        check_close(got, reference(t), 0);
        // Padded, upcast by 8 (two vector iterations, the second half masked), then THREAD.
        CHECK(run_with(k, {{OptOp::PadTo, 0, 16}, {OptOp::Upcast, 0, 8}}, lim) == got);
        CHECK(run_with(k, {{OptOp::PadTo, 0, 16}, {OptOp::Thread, 0, 2}, {OptOp::Upcast, 1, 8}},
                       lim) == got);
    }
    SUBCASE("sum over a padded reduce axis (identity 0)") {
        const Tensor t = m.sum(1);
        const KernelRun k = only_kernel_own_inputs(t);
        CHECK(OptKernel(tempura::codegen::prepare_for_opts(k.ast), lim).shape() ==
              std::vector<int64_t>{4, 10});
        check_close(run_with(k, pad16r, lim), reference(t), 1e-5);
        check_close(run_with(k, pad16r, lim), run_with(k, {}, lim), 1e-5);
        const Tensor full = x.sum();
        const KernelRun kf = only_kernel_own_inputs(full);
        CHECK(OptKernel(tempura::codegen::prepare_for_opts(kf.ast), lim).output_axes() == 0);
        check_close(run_with(kf, {{OptOp::PadTo, 0, 16}, {OptOp::Unroll, 0, 16}}, lim),
                    reference(full), 1e-5);
    }
    SUBCASE("max of negative values over a padded reduce axis (identity -inf)") {
        const Tensor t = neg.max(1);
        const KernelRun k = only_kernel_own_inputs(t);
        const auto got = run_with(k, pad16r, lim);
        for (double v : got) CHECK(v < 0);
        check_close(got, reference(t), 0);
        CHECK(got == run_with(k, {}, lim));
        // The whole reduction of 10 negative values.
        const Tensor all = negv.max();
        const KernelRun ka = only_kernel_own_inputs(all);
        const auto got_all = run_with(ka, {{OptOp::PadTo, 0, 16}, {OptOp::Unroll, 0, 16}}, lim);
        REQUIRE(got_all.size() == 1);
        CHECK(got_all[0] < 0);
        check_close(got_all, reference(all), 0);
        // min = -max(-x): the padded lanes must not win either.
        const Tensor mn = (-neg).min(1);
        check_close(run_with(only_kernel_own_inputs(mn), pad16r, lim), reference(mn), 0);
    }
    SUBCASE("max of negative int32 values over a padded reduce axis (identity INT32_MIN)") {
        const Tensor ints = random_int_input({4, 10}, 7, -100, -1);
        const Tensor t = ints.max(1);
        const auto got = run_with(only_kernel_own_inputs(t), pad16r, lim);
        for (double v : got) CHECK(v < 0);
        check_close(got, reference(t), 0);
    }
    SUBCASE("prod over a padded reduce axis (identity 1)") {
        const Tensor ints = random_int_input({4, 10}, 8, -3, 3);
        const Tensor t = ints.prod(1);
        check_close(run_with(only_kernel_own_inputs(t), pad16r, lim), reference(t), 0);
    }
    SUBCASE("a padded output axis of a reduce: the extra rows are not stored") {
        const Tensor t = tall.max(1);
        const KernelRun k = only_kernel_own_inputs(t);
        CHECK(OptKernel(tempura::codegen::prepare_for_opts(k.ast), lim).shape() ==
              std::vector<int64_t>{10, 8});
        const auto got = run_with(k, {{OptOp::PadTo, 0, 16}, {OptOp::Upcast, 0, 16}}, lim);
        check_close(got, reference(t), 0);
        const Tensor s = tall.sum(1);
        check_close(run_with(only_kernel_own_inputs(s),
                             {{OptOp::PadTo, 0, 16}, {OptOp::Upcast, 0, 16}, {OptOp::Unroll, 0, 8}},
                             lim),
                    reference(s), 1e-5);
    }
}
