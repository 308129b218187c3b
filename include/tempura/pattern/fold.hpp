#pragma once
// fold(e): on the right side of a rule, evaluates e over the matched constants when the rule
// fires and builds the resulting CONST, e.g. rule(c0 + c1, fold(c0 + c1)).
#include <optional>

#include "tempura/ir/scalar.hpp"
#include "tempura/pattern/pattern.hpp"

namespace tempura::pattern {

// A folded number: integers (and bools) as int64, floats as double, with the dtype they carry.
struct Num {
    DType dtype;
    bool known_dtype; // false for bare literals, which adopt their sibling's dtype
    int64_t i;
    double f;
};

template <class P>
std::optional<Num> fold_eval(const P& p, const Match& m);

template <int I>
std::optional<Num> fold_eval(const ConstWild<I>&, const Match& m) {
    const UOp& c = m.at(I);
    Num n{c.dtype(), true, 0, 0.0};
    if (auto* d = std::get_if<double>(&c.arg()))
        n.f = *d;
    else
        n.i = c.const_value();
    return n;
}
inline std::optional<Num> fold_eval(const Lit& l, const Match&) {
    return Num{DType::Index, false, l.value, static_cast<double>(l.value)};
}
template <Op O, class... Cs>
std::optional<Num> fold_eval(const OpPat<O, Cs...>& p, const Match& m) {
    std::optional<Num> vals[sizeof...(Cs)];
    size_t k = 0;
    bool ok = true;
    std::apply(
        [&](const auto&... c) { ((vals[k] = fold_eval(c, m), ok = ok && vals[k], ++k), ...); },
        p.cs);
    if (!ok) return std::nullopt;
    // Operands take the dtype of the first one that has one.
    DType dt = DType::Index;
    for (auto& v : vals)
        if (v->known_dtype && !(O == Op::Where && &v == &vals[0])) {
            dt = v->dtype;
            break;
        }
    if (dt.is_float()) {
        double ops[3];
        for (size_t i = 0; i < sizeof...(Cs); ++i)
            ops[i] = vals[i]->known_dtype && vals[i]->dtype.is_float()
                         ? vals[i]->f
                         : static_cast<double>(vals[i]->i);
        auto r = exec_float_alu(O, dt, ops, sizeof...(Cs));
        if (!r) return std::nullopt;
        if constexpr (is_comparison(O)) {
            const bool b = *r != 0.0;
            return Num{DType::Bool, true, b ? 1 : 0, b ? 1.0 : 0.0};
        } else {
            return Num{dt, true, 0, *r};
        }
    }
    int64_t ops[3];
    for (size_t i = 0; i < sizeof...(Cs); ++i) ops[i] = vals[i]->i;
    auto r = exec_int_alu(O, dt, ops, sizeof...(Cs));
    if (!r) return std::nullopt;
    DType out = is_comparison(O) ? DType::Bool : dt;
    return Num{out, true, *r, static_cast<double>(*r)};
}

template <class E>
struct Fold {
    E e;
    static constexpr uint32_t kUses = E::kUses;
    static constexpr int kRootOp = -2; // never a left side
    static constexpr bool kConstOnly = true;

    template <class K>
    bool match(const UOp&, Match&, K&&) const {
        static_assert(sizeof(K) == 0, "fold() can only appear on the right-hand side of a rule");
        return false;
    }
    std::optional<UOp> build(const Match& m, DType hint) const {
        auto v = fold_eval(e, m);
        if (!v) return std::nullopt; // undefined (e.g. division by zero): the rule does not fire
        DType dt = v->known_dtype ? v->dtype : hint;
        if (dt.is_float()) return UOp::constant_f(dt, v->f);
        return UOp::constant(dt, v->i);
    }
    Term term() const { return Term{Term::Kind::Fold, Op::Const, -1, 0, "fold", {e.term()}}; }
};
template <class E>
struct IsPatternT<Fold<E>> : std::true_type {};

// ilog2(c0): on the right side, the base-2 logarithm of a power-of-two constant, as a constant
// of the same dtype (with is_pow2(c0) as the rule's predicate): rule(x * c0, x << ilog2(c0), ...).
template <int I>
struct ILog2 {
    static constexpr uint32_t kUses = 1u << I;
    static constexpr int kRootOp = -2; // never a left side
    static constexpr bool kConstOnly = true;
    template <class K>
    bool match(const UOp&, Match&, K&&) const {
        static_assert(sizeof(K) == 0, "ilog2() can only appear on the right-hand side of a rule");
        return false;
    }
    std::optional<UOp> build(const Match& m, DType) const {
        const UOp& c = m.at(I);
        const int64_t v = c.const_value();
        if (v <= 0 || (v & (v - 1)) != 0) return std::nullopt;
        return UOp::constant(c.dtype(),
                             static_cast<int64_t>(__builtin_ctzll(static_cast<uint64_t>(v))));
    }
    Term term() const {
        return Term{Term::Kind::Fold, Op::Const, -1, 0, "ilog2", {ConstWild<I>{}.term()}};
    }
};
template <int I>
struct IsPatternT<ILog2<I>> : std::true_type {};
template <int I>
constexpr ILog2<I> ilog2(ConstWild<I>) {
    return {};
}

template <Pattern E>
constexpr auto fold(E e) {
    static_assert(E::kConstOnly,
                  "fold: the expression may use only constant wildcards (c0, c1, c2, c3) and "
                  "integer literals");
    return Fold<E>{e};
}

} // namespace tempura::pattern
