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
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tempura/ir/uop.hpp"
#include "tempura/pattern/match.hpp"
#include "tempura/pattern/term.hpp"

namespace tempura::pattern {

// kRootOp of a pattern whose root is a set of ops (OpSetPat::kSet says which); -1 is any op.
inline constexpr int kRootOpSet = -3;

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

// Matches the operand patterns `cs` against n's sources from the I-th on (in reverse order when
// Swapped), then runs the continuation: a later failure backtracks into earlier operands.
template <size_t I, bool Swapped, class Tuple, class K>
bool match_children(const Tuple& cs, const UOp& n, Match& m, K& k) {
    constexpr size_t kN = std::tuple_size_v<Tuple>;
    if constexpr (I == kN) {
        return k();
    } else {
        constexpr size_t src = Swapped ? kN - 1 - I : I;
        return std::get<I>(cs).match(n.src(src), m,
                                     [&] { return match_children<I + 1, Swapped>(cs, n, m, k); });
    }
}

// Literal operands of a built node take the dtype of the first operand that is not a literal.
template <Op O, class... Cs>
struct OpPat {
    std::tuple<Cs...> cs;
    static constexpr size_t kN = sizeof...(Cs);
    static constexpr uint32_t kUses = (0u | ... | Cs::kUses);
    static constexpr int kRootOp = static_cast<int>(O);
    static constexpr bool kConstOnly = (true && ... && Cs::kConstOnly);
    static constexpr bool kSwap = is_commutative(O) && kN == 2;

    template <class K>
    bool match(const UOp& n, Match& m, K&& k) const {
        if (n.op() != O || n.srcs().size() != kN) return false;
        if (match_children<0, false>(cs, n, m, k)) return true;
        if constexpr (kSwap) return match_children<0, true>(cs, n, m, k);
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

// ---- roots that match a set of ops ------------------------------------------------------------

// A set of ops as a compile-time bitset over the op table.
struct OpSet {
    std::array<uint64_t, (kNumOps + 63) / 64> bits{};
    constexpr bool has(Op o) const {
        const auto i = static_cast<size_t>(o);
        return ((bits[i / 64] >> (i % 64)) & 1u) != 0;
    }
    constexpr OpSet& add(Op o) {
        const auto i = static_cast<size_t>(o);
        bits[i / 64] |= uint64_t{1} << (i % 64);
        return *this;
    }
    constexpr bool operator==(const OpSet&) const = default;
};
template <Op... Os>
constexpr OpSet op_set() {
    OpSet s;
    (s.add(Os), ...);
    return s;
}
// Every ALU op of the op table (unary, binary and ternary).
constexpr OpSet alu_op_set() {
    OpSet s;
    for (size_t i = 0; i < kNumOps; ++i)
        if (is_alu(static_cast<Op>(i))) s.add(static_cast<Op>(i));
    return s;
}

// A root matching any op of S. With operand patterns, the node must have exactly that many
// sources (a commutative binary op tries both orders); with none (kAnyArity), any sources.
// Left-hand side only: which op to build would be unknown.
template <OpSet S, bool kAnyArity, class... Cs>
struct OpSetPat {
    std::tuple<Cs...> cs;
    const char* name; // how the rule text shows the set: "alu", "any_of<ADD, MUL>"
    static constexpr OpSet kSet = S;
    static constexpr size_t kN = sizeof...(Cs);
    static constexpr uint32_t kUses = (0u | ... | Cs::kUses);
    static constexpr int kRootOp = kRootOpSet;
    static constexpr bool kConstOnly = false;

    template <class K>
    bool match(const UOp& n, Match& m, K&& k) const {
        if (!S.has(n.op())) return false;
        if constexpr (kAnyArity) {
            return k();
        } else {
            if (n.srcs().size() != kN) return false;
            if (match_children<0, false>(cs, n, m, k)) return true;
            if constexpr (kN == 2)
                if (is_commutative(n.op())) return match_children<0, true>(cs, n, m, k);
            return false;
        }
    }
    Term term() const {
        std::string shown = name;
        if (shown == "any_of") {
            shown += '<';
            for (size_t i = 0, k = 0; i < kNumOps; ++i)
                if (S.has(static_cast<Op>(i)))
                    shown += (k++ ? ", " : "") + std::string(op_name(static_cast<Op>(i)));
            shown += '>';
        }
        Term t{Term::Kind::OpSet, Op::Const, -1, 0, shown, {}};
        std::apply([&](const auto&... c) { (t.children.push_back(c.term()), ...); }, cs);
        return t;
    }
};
template <OpSet S, bool A, class... Cs>
struct IsPatternT<OpSetPat<S, A, Cs...>> : std::true_type {};

// any_of<Op::Add, Op::Mul>(x, y): an ADD or a MUL of x and y.
template <Op... Os, class... As>
constexpr auto any_of(As... as) {
    static_assert(sizeof...(Os) >= 1, "pattern any_of<>: name at least one op");
    return OpSetPat<op_set<Os...>(), false, Lifted<As>...>{{lift(as)...}, "any_of"};
}
// ops_in<S>(x, y): any op of the set S (an OpSet built at compile time) with these operands.
template <OpSet S, class... As>
constexpr auto ops_in(As... as) {
    return OpSetPat<S, false, Lifted<As>...>{{lift(as)...}, "ops_in"};
}
// alu(x, y): any ALU op with these operands; alu_any: any ALU node, whatever its sources.
template <class... As>
constexpr auto alu(As... as) {
    static_assert(sizeof...(As) >= 1 && sizeof...(As) <= 3,
                  "pattern alu(): ALU ops take one, two or three operands");
    return OpSetPat<alu_op_set(), false, Lifted<As>...>{{lift(as)...}, "alu"};
}
inline constexpr OpSetPat<alu_op_set(), true> alu_any{{}, "alu_any"};

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
