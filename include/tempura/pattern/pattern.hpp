#pragma once
// Pattern nodes of the rule DSL: small aggregates whose types carry what they bind.
//
//   x y z w      any node (a repeated wildcard means the same node)
//   c0 c1 c2 c3  any CONST
//   integers     a CONST of that value (left side) / of the matched dtype (right side)
//   x + y, x < y, where(c, t, f), maximum(a, b), op<Op::X>(...)   an op applied to patterns
//
// Matching is continuation-passing so that commutative ops are tried in both orders with full
// backtracking: a later failure undoes earlier bindings and tries the next alternative.
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tempura/ir/uop.hpp"
#include "tempura/pattern/match.hpp"
#include "tempura/pattern/term.hpp"

namespace tempura::pattern {

// ---- leaves -------------------------------------------------------------------------------------

template <int I>
struct Wild {
    static_assert(I >= 0 && I < kSlots, "pattern: wildcard slot out of range");
    static constexpr int kSlot = I;
    static constexpr uint32_t kUses = 1u << I;
    static constexpr int kRootOp = -1; // any op
    static constexpr bool kConstOnly = false;

    template <class K>
    bool match(const UOp& n, Match& m, K&& k) const {
        if (m.bound & kUses) return m.slot[I]->same(n) && k();
        m.slot[I] = &n;
        m.bound |= kUses;
        if (k()) return true;
        m.bound &= ~kUses;
        return false;
    }
    std::optional<UOp> build(const Match& m, DType) const { return m.at(I); }
    Term term() const { return Term{Term::Kind::Wildcard, Op::Const, I, 0, kWildcardNames[I], {}}; }
};

template <int I>
struct ConstWild {
    static_assert(I >= 0 && I < kSlots, "pattern: wildcard slot out of range");
    static constexpr int kSlot = I;
    static constexpr uint32_t kUses = 1u << I;
    static constexpr int kRootOp = static_cast<int>(Op::Const);
    static constexpr bool kConstOnly = true;

    template <class K>
    bool match(const UOp& n, Match& m, K&& k) const {
        if (n.op() != Op::Const) return false;
        if (m.bound & kUses) return m.slot[I]->same(n) && k();
        m.slot[I] = &n;
        m.bound |= kUses;
        if (k()) return true;
        m.bound &= ~kUses;
        return false;
    }
    std::optional<UOp> build(const Match& m, DType) const { return m.at(I); }
    Term term() const {
        return Term{Term::Kind::ConstWildcard, Op::Const, I, 0, kWildcardNames[I], {}};
    }
};

// An integer in a rule: on the left it matches a CONST of that value (any dtype), on the right
// it builds a CONST of the dtype its position calls for.
struct Lit {
    int64_t value;
    static constexpr uint32_t kUses = 0;
    static constexpr int kRootOp = static_cast<int>(Op::Const);
    static constexpr bool kConstOnly = true;

    template <class K>
    bool match(const UOp& n, Match&, K&& k) const {
        if (n.op() != Op::Const) return false;
        const Arg& a = n.arg();
        if (auto* i = std::get_if<int64_t>(&a)) return *i == value && k();
        if (auto* b = std::get_if<bool>(&a)) return int64_t{*b} == value && k();
        if (auto* d = std::get_if<double>(&a)) return *d == static_cast<double>(value) && k();
        return false;
    }
    std::optional<UOp> build(const Match&, DType dt) const { return UOp::constant(dt, value); }
    Term term() const { return Term{Term::Kind::Literal, Op::Const, -1, value, {}, {}}; }
};

// ---- the Pattern concept and lifting of integers ------------------------------------------------

template <class T>
struct IsPatternT : std::false_type {};
template <int I>
struct IsPatternT<Wild<I>> : std::true_type {};
template <int I>
struct IsPatternT<ConstWild<I>> : std::true_type {};
template <>
struct IsPatternT<Lit> : std::true_type {};
template <class T>
concept Pattern = IsPatternT<std::remove_cvref_t<T>>::value;

// What an operand of a pattern operator becomes: patterns stay, integers and bools become Lit.
template <class T>
constexpr auto lift(T v) {
    if constexpr (Pattern<T>)
        return v;
    else {
        static_assert(std::is_integral_v<T>,
                      "pattern: an operand must be a wildcard, a pattern or an integer literal");
        return Lit{static_cast<int64_t>(v)};
    }
}
template <class T>
using Lifted = decltype(lift(std::declval<T>()));

// ---- op nodes ---------------------------------------------------------------------------------

// Literal operands of a built node take the dtype of the first operand that is not a literal.
template <Op O, class... Cs>
struct OpPat {
    std::tuple<Cs...> cs;
    static constexpr size_t kN = sizeof...(Cs);
    static constexpr uint32_t kUses = (0u | ... | Cs::kUses);
    static constexpr int kRootOp = static_cast<int>(O);
    static constexpr bool kConstOnly = (true && ... && Cs::kConstOnly);
    static constexpr bool kSwap = is_commutative(O) && kN == 2;

    template <size_t I, bool Swapped, class K>
    bool match_from(const UOp& n, Match& m, K& k) const {
        if constexpr (I == kN) {
            return k();
        } else {
            constexpr size_t src = Swapped ? kN - 1 - I : I;
            return std::get<I>(cs).match(n.src(src), m,
                                         [&] { return match_from<I + 1, Swapped>(n, m, k); });
        }
    }
    template <class K>
    bool match(const UOp& n, Match& m, K&& k) const {
        if (n.op() != O || n.srcs().size() != kN) return false;
        if (match_from<0, false>(n, m, k)) return true;
        if constexpr (kSwap) return match_from<0, true>(n, m, k);
        return false;
    }
    std::optional<UOp> build(const Match& m, DType hint) const {
        std::vector<UOp> srcs;
        srcs.reserve(kN);
        bool ok = true;
        // First build the non-literal operands, then the literals with their dtype.
        std::optional<DType> operand_dt;
        std::apply(
            [&](const auto&... c) {
                ((ok = ok && build_one(c, m, hint, srcs, operand_dt, false)), ...);
            },
            cs);
        if (!ok) return std::nullopt;
        DType lit_dt = operand_dt ? *operand_dt : hint;
        if constexpr (O == Op::Where) lit_dt = operand_dt ? *operand_dt : hint;
        size_t i = 0;
        std::apply([&](const auto&... c) { ((fill_literal(c, m, lit_dt, srcs, i)), ...); }, cs);
        if constexpr (is_alu(O))
            return UOp::alu(O, std::move(srcs));
        else
            return UOp::make(O, hint, std::move(srcs));
    }
    Term term() const {
        Term t{Term::Kind::Node, O, -1, 0, {}, {}};
        std::apply([&](const auto&... c) { (t.children.push_back(c.term()), ...); }, cs);
        return t;
    }

  private:
    template <class C>
    static bool build_one(const C& c, const Match& m, DType hint, std::vector<UOp>& srcs,
                          std::optional<DType>& operand_dt, bool) {
        if constexpr (std::is_same_v<C, Lit>) {
            srcs.emplace_back(); // filled once the operand dtype is known
            return true;
        } else {
            // Where's condition is Bool and says nothing of the branches' dtype.
            auto r = c.build(m, hint);
            if (!r) return false;
            if (!operand_dt && !(O == Op::Where && srcs.empty())) operand_dt = r->dtype();
            srcs.push_back(std::move(*r));
            return true;
        }
    }
    template <class C>
    static void fill_literal(const C& c, const Match& m, DType dt, std::vector<UOp>& srcs,
                             size_t& i) {
        if constexpr (std::is_same_v<C, Lit>) {
            DType use = dt;
            if constexpr (O == Op::Where) {
                if (i == 0) use = DType::Bool;
            }
            srcs[i] = *c.build(m, use);
        }
        ++i;
    }
};

template <Op O, class... Cs>
struct IsPatternT<OpPat<O, Cs...>> : std::true_type {};

// op<Op::X>(a, b, ...): any op of the op table, with its arity checked at compile time.
template <Op O, class... As>
constexpr auto op(As... as) {
    static_assert(op_info(O).arity == kVariadic || op_info(O).arity == sizeof...(As),
                  "pattern op<>: the number of operands does not match the op's arity in the op "
                  "table");
    return OpPat<O, Lifted<As>...>{{lift(as)...}};
}

#define TEMPURA_PATTERN_BINOP(sym, OP)                                                             \
    template <class A, class B>                                                                    \
    requires(Pattern<A> || Pattern<B>) constexpr auto operator sym(A a, B b) {                     \
        return op<Op::OP>(a, b);                                                                   \
    }
TEMPURA_PATTERN_BINOP(+, Add)
TEMPURA_PATTERN_BINOP(-, Sub)
TEMPURA_PATTERN_BINOP(*, Mul)
TEMPURA_PATTERN_BINOP(/, Idiv)
TEMPURA_PATTERN_BINOP(%, Mod)
TEMPURA_PATTERN_BINOP(<, CmpLt)
TEMPURA_PATTERN_BINOP(==, CmpEq)
TEMPURA_PATTERN_BINOP(!=, CmpNe)
TEMPURA_PATTERN_BINOP(&, And)
TEMPURA_PATTERN_BINOP(|, Or)
TEMPURA_PATTERN_BINOP(^, Xor)
TEMPURA_PATTERN_BINOP(<<, Shl)
TEMPURA_PATTERN_BINOP(>>, Shr)
#undef TEMPURA_PATTERN_BINOP

template <Pattern A>
constexpr auto operator-(A a) {
    return op<Op::Neg>(a);
}
template <Pattern A>
constexpr auto operator!(A a) {
    return op<Op::Not>(a);
}
template <class C, class T, class F>
requires(Pattern<C> || Pattern<T> || Pattern<F>) constexpr auto where(C c, T t, F f) {
    return op<Op::Where>(c, t, f);
}
template <class A, class B>
requires(Pattern<A> || Pattern<B>) constexpr auto maximum(A a, B b) { return op<Op::Max>(a, b); }

// ---- the named wildcards ----------------------------------------------------------------------

inline constexpr Wild<0> x{};
inline constexpr Wild<1> y{};
inline constexpr Wild<2> z{};
inline constexpr Wild<3> w{};
inline constexpr ConstWild<4> c0{};
inline constexpr ConstWild<5> c1{};
inline constexpr ConstWild<6> c2{};
inline constexpr ConstWild<7> c3{};

} // namespace tempura::pattern
