// The codegen stages written as rule groups: decompositions, MULACC fusion, index dtype lowering
// and the CPU renderer's fallbacks. Each group is a table of rules, one per line with the
// algebra it states; code only where the right side is a whole algorithm (the polynomials).
#include "codegen/ranges.hpp"
#include "codegen/transcendental.hpp"
#include "tempura/codegen/rules.hpp"
#include "tempura/error.hpp"
#include "tempura/ir/scalar.hpp"

namespace tempura::codegen {

namespace {

using namespace tempura::pattern;

// The right sides that are algorithms: functions of the matched root.
UOp log2_of(const UOp& u) { return log2_f32(u.src(0)); }
UOp sin32_of(const UOp& u) { return sin_cos_f32(u.src(0), false); }
UOp cos32_of(const UOp& u) { return sin_cos_f32(u.src(0), true); }
UOp sin64_of(const UOp& u) { return sin_cos_f64(u.src(0), false); }
UOp cos64_of(const UOp& u) { return sin_cos_f64(u.src(0), true); }
UOp erf_of(const UOp& u) { return erf_f32(u.src(0)); }
// EXP2(y * (1/ln 2)) is e^y (Tensor::exp), computed from y itself (exp_f32, exp_f64): rounding
// the product first would cost up to |y| / 2 ulp. Any other EXP2 as it stands.
UOp exp2_of_any(const UOp& u, UOp (*exp2)(const UOp&), UOp (*exp)(const UOp&)) {
    const UOp y = exp_operand(u);
    return y.is_null() ? exp2(u.src(0)) : exp(y);
}
UOp exp2_of(const UOp& u) { return exp2_of_any(u, exp2_f32, exp_f32); }
UOp exp2_64_of(const UOp& u) { return exp2_of_any(u, exp2_f64, exp_f64); }
UOp log2_64_of(const UOp& u) { return log2_f64(u.src(0)); }
UOp erf64_of(const UOp& u) { return erf_f64(u.src(0)); }
UOp pow_float_of(const UOp& u) { return pow_float(u.src(0), u.src(1)); }
// A 16-bit float's transcendental in float32, rounded once: what a GPU without 16-bit units for
// them does, and then the float32 decomposition (the same ulp bounds) on every device.
UOp in_float32(const UOp& u) {
    const UOp wide = UOp::make(Op::Cast, DType::Float32, {u.src(0)}, Arg{}, u.location());
    const UOp r = UOp::make(u.op(), DType::Float32, {wide}, Arg{}, u.location());
    return UOp::make(Op::Cast, u.dtype(), {r}, Arg{}, u.location());
}
UOp pow_int_of(const UOp& u) { return pow_int(u.src(0), u.src(1)); }

// An Index-typed node (not a pointer) rebuilt with the dtype the context names.
std::optional<UOp> lower_index(Match& m) {
    const UOp& u = *m.root;
    const DType dt = u.dtype();
    if (dt.scalar != Scalar::Index || dt.is_ptr) return std::nullopt;
    const DType to = m.context<IndexDType>().to.vec(dt.count);
    return UOp::make(u.op(), to, u.srcs(), u.arg(), u.location());
}

// WHERE(g, LOAD(INDEX(p, i)), alt) -> LOAD(INDEX(p, i), g, alt): the element is not read where
// the gate is false. Only for a gate of index arithmetic that is the same for every vector lane
// (no LOAD, no UPCAST/UNROLL range): a per-lane gate would turn a vector load into a gather.
std::optional<UOp> where_into_gated_load(const UOp& u) {
    const UOp &g = u.src(0), &ld = u.src(1), &alt = u.src(2);
    if (ld.op() != Op::Load || ld.srcs().size() != 1 || g.dtype().count != 1) return std::nullopt;
    const UOp& idx = ld.src(0);
    if (idx.op() != Op::Index || idx.srcs().size() != 2 || alt.dtype() != ld.dtype())
        return std::nullopt;
    for (const UOp& n : g.toposort()) {
        if (n.op() == Op::Load) return std::nullopt;
        if (detail::is_expanded(n)) return std::nullopt;
    }
    return UOp::make(Op::Load, ld.dtype(), {idx, g, alt}, Arg{}, u.location());
}

// LOAD(INDEX, true, alt): a gate the simplifier proved always true (a variable's bounds, say)
// is no gate.
std::optional<UOp> drop_true_gate(const UOp& u) {
    if (u.srcs().size() != 3 || !u.src(1).is_const() || u.src(1).const_value() == 0)
        return std::nullopt;
    return UOp::make(Op::Load, u.dtype(), {u.src(0)}, Arg{}, u.location());
}

// GEP(VECTORIZE(s0, s1, ...), lanes): the lanes' sources, without building the vector.
std::optional<UOp> gep_of_vectorize(const UOp& u) {
    const auto& lanes = u.arg_as<std::vector<int64_t>>();
    const UOp& v = u.src(0);
    if (v.op() != Op::Vectorize) return std::nullopt;
    std::vector<UOp> picked;
    for (int64_t l : lanes) {
        if (l < 0 || static_cast<size_t>(l) >= v.srcs().size()) return std::nullopt;
        picked.push_back(v.src(static_cast<size_t>(l)));
    }
    if (picked.size() == 1) return picked[0];
    return UOp::make(Op::Vectorize, u.dtype(), std::move(picked), Arg{}, u.location());
}

// GEP(x, 0, 1, ..., n-1) of an n-lane x is x.
std::optional<UOp> identity_gep(const UOp& u) {
    const auto& lanes = u.arg_as<std::vector<int64_t>>();
    const UOp& x = u.src(0);
    if (lanes.size() != x.dtype().count || u.dtype() != x.dtype()) return std::nullopt;
    for (size_t i = 0; i < lanes.size(); ++i)
        if (lanes[i] != static_cast<int64_t>(i)) return std::nullopt;
    return x;
}

// VECTORIZE(GEP(x, 0), GEP(x, 1), ..., GEP(x, n-1)) of an n-lane x is x; VECTORIZE(s) is s.
std::optional<UOp> vectorize_of_geps(const UOp& u) {
    if (u.srcs().size() == 1 && u.dtype() == u.src(0).dtype()) return u.src(0);
    const UOp& s0 = u.src(0);
    if (s0.op() != Op::Gep) return std::nullopt;
    const UOp& x = s0.src(0);
    if (x.dtype() != u.dtype()) return std::nullopt;
    for (size_t i = 0; i < u.srcs().size(); ++i) {
        const UOp& s = u.src(i);
        if (s.op() != Op::Gep || !s.src(0).same(x) ||
            s.arg_as<std::vector<int64_t>>() != std::vector<int64_t>{static_cast<int64_t>(i)})
            return std::nullopt;
    }
    return x;
}

// clang-format off
inline constexpr auto early = rules(
    rule(op<Op::Pow>(x, y), pow_float_of, is_float(x)),                       // 2^(y log2|x|)
    rule(op<Op::Pow>(x, y), pow_int_of, is_int(x)),                           // squaring
    rule(op<Op::Exp2>(x), exp2_of, is_float32(x)),                            // Cephes exp2f
    rule(op<Op::Log2>(x), log2_of, is_float32(x)),                            // Cephes log2f
    rule(op<Op::Sin>(x), sin32_of, is_float32(x)),                            // full-range sin
    rule(op<Op::Cos>(x), cos32_of, is_float32(x)),                            // full-range cos
    rule(op<Op::Sin>(x), sin64_of, is_float64(x)),
    rule(op<Op::Cos>(x), cos64_of, is_float64(x)),
    rule(op<Op::Erf>(x), erf_of, is_float32(x)),                              // series + erfc
    rule(op<Op::Exp2>(x), exp2_64_of, is_float64(x)),                         // Taylor, 2^n
    rule(op<Op::Log2>(x), log2_64_of, is_float64(x)),                         // atanh series
    rule(op<Op::Erf>(x), erf64_of, is_float64(x)),                            // x P(x^2), erfc
    rule(op<Op::Exp2>(x), in_float32, is_16bit_float(x)),                         // 16-bit floats:
    rule(op<Op::Log2>(x), in_float32, is_16bit_float(x)),                         // in float32,
    rule(op<Op::Sin>(x), in_float32, is_16bit_float(x)),                          // rounded once
    rule(op<Op::Cos>(x), in_float32, is_16bit_float(x)),
    rule(op<Op::Erf>(x), in_float32, is_16bit_float(x)),
    rule(op<Op::Sqrt>(x), in_float32, is_16bit_float(x)));

inline constexpr auto gated = rules(
    rule(where(x, op<Op::Load>(y), z), where_into_gated_load));             // g ? *p : alt, gated

// Any VECTORIZE, whatever its number of sources.
inline constexpr OpSetPat<op_set<Op::Vectorize>(), true> any_vectorize{{}, "VECTORIZE"};

inline constexpr auto vector = rules(
    rule(op<Op::Gep>(x), gep_of_vectorize),                                   // VECTORIZE's lanes
    rule(op<Op::Gep>(x), identity_gep),                                       // every lane: x
    rule(any_vectorize, vectorize_of_geps));                           // x's lanes: x

inline constexpr auto mulacc = rules(
    rule(x * y + z, op<Op::MulAcc>(x, y, z), is_float(x)));                   // a * b + c: one FMA

// Any op can carry an Index dtype, so this one rule has a bare wildcard root.
inline constexpr auto index_dtype = rules(
    rule(x, lower_index).named("index dtype"));                               // Index -> Int32/64

// Any LOAD, gated or not.
inline constexpr OpSetPat<op_set<Op::Load>(), true> any_load{{}, "LOAD"};

inline constexpr auto late = rules(
    rule(any_load, drop_true_gate),                                           // LOAD(i, true, _)
    rule(x % c0, x & fold(c0 - 1), is_pow2(c0) && nonneg(x)),                 // x % 2^k, x >= 0
    rule(x / c0, x >> ilog2(c0), is_pow2(c0) && nonneg(x)),                   // x / 2^k, x >= 0
    rule(x * c0, x << ilog2(c0), is_pow2(c0) && is_int(x)));                  // x * 2^k

inline constexpr auto cpu = rules(
    rule(maximum(x, y), x | y, is_bool(x)));                                  // max on bools is or
// clang-format on

} // namespace

const pattern::RuleTable& early_decompositions() { return pattern::frozen<early>(); }
const pattern::RuleTable& gated_loads() { return pattern::frozen<gated>(); }
const pattern::RuleTable& vector_folds() { return pattern::frozen<vector>(); }
const pattern::RuleTable& mulacc_fusion() { return pattern::frozen<mulacc>(); }
const pattern::RuleTable& index_dtype_lowering() { return pattern::frozen<index_dtype>(); }
const pattern::RuleTable& late_decompositions() { return pattern::frozen<late>(); }
const pattern::RuleTable& cpu_lowering() { return pattern::frozen<cpu>(); }

} // namespace tempura::codegen
