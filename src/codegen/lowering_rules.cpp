// The codegen stages written as rule groups: decompositions, MULACC fusion, index dtype lowering
// and the CPU renderer's fallbacks. Each group is a table of rules, one per line with the
// algebra it states; code only where the right side is a whole algorithm (the polynomials).
#include "codegen/transcendental.hpp"
#include "tempura/codegen/rules.hpp"
#include "tempura/error.hpp"

namespace tempura::codegen {

namespace {

using namespace tempura::pattern;

// The right sides that are algorithms: functions of the matched root.
UOp exp2_of(const UOp& u) { return exp2_f32(u.src(0)); }
UOp log2_of(const UOp& u) { return log2_f32(u.src(0)); }
UOp sin32_of(const UOp& u) { return sin_cos_f32(u.src(0), false); }
UOp cos32_of(const UOp& u) { return sin_cos_f32(u.src(0), true); }
UOp sin64_of(const UOp& u) { return sin_cos_f64(u.src(0), false); }
UOp cos64_of(const UOp& u) { return sin_cos_f64(u.src(0), true); }
UOp erf_of(const UOp& u) { return erf_f32(u.src(0)); }
std::optional<UOp> pow_unsupported(const UOp& u) {
    fail("decompose", "POW of dtype " + u.dtype().name() + " is not supported");
}

// An Index-typed node (not a pointer) rebuilt with the dtype the context names.
std::optional<UOp> lower_index(Match& m) {
    const UOp& u = *m.root;
    const DType dt = u.dtype();
    if (dt.scalar != Scalar::Index || dt.is_ptr) return std::nullopt;
    const DType to = m.context<IndexDType>().to.vec(dt.count);
    return UOp::make(u.op(), to, u.srcs(), u.arg(), u.location());
}

// clang-format off
inline constexpr auto early = rules(
    rule(op<Op::Pow>(x, y), op<Op::Exp2>(op<Op::Log2>(x) * y), is_float(x)), // x^y = 2^(log2(x)*y)
    rule(op<Op::Pow>(x, y), pow_unsupported),                                 // no integer POW
    rule(op<Op::Exp2>(x), exp2_of, is_float32(x)),                            // Cephes exp2f
    rule(op<Op::Log2>(x), log2_of, is_float32(x)),                            // Cephes log2f
    rule(op<Op::Sin>(x), sin32_of, is_float32(x)),                            // full-range sin
    rule(op<Op::Cos>(x), cos32_of, is_float32(x)),                            // full-range cos
    rule(op<Op::Sin>(x), sin64_of, is_float64(x)),
    rule(op<Op::Cos>(x), cos64_of, is_float64(x)),
    rule(op<Op::Erf>(x), erf_of, is_float32(x)));                             // series + erfc

inline constexpr auto mulacc = rules(
    rule(x * y + z, op<Op::MulAcc>(x, y, z), is_float(x)));                   // a * b + c: one FMA

// Any op can carry an Index dtype, so this one rule has a bare wildcard root.
inline constexpr auto index_dtype = rules(
    rule(x, lower_index).named("index dtype"));                               // Index -> Int32/64

inline constexpr auto late = rules(
    rule(x % c0, x & fold(c0 - 1), is_pow2(c0) && nonneg(x)),                 // x % 2^k, x >= 0
    rule(x / c0, x >> ilog2(c0), is_pow2(c0) && nonneg(x)),                   // x / 2^k, x >= 0
    rule(x * c0, x << ilog2(c0), is_pow2(c0) && is_int(x)));                  // x * 2^k

inline constexpr auto cpu = rules(
    rule(maximum(x, y), x | y, is_bool(x)));                                  // max on bools is or
// clang-format on

} // namespace

const pattern::RuleTable& early_decompositions() { return pattern::frozen<early>(); }
const pattern::RuleTable& mulacc_fusion() { return pattern::frozen<mulacc>(); }
const pattern::RuleTable& index_dtype_lowering() { return pattern::frozen<index_dtype>(); }
const pattern::RuleTable& late_decompositions() { return pattern::frozen<late>(); }
const pattern::RuleTable& cpu_lowering() { return pattern::frozen<cpu>(); }

} // namespace tempura::codegen
