#pragma once
// Predicates of rules: named tests on the matched nodes (bounds, divisibility, dtype), combined
// with &&, or an escape-hatch callable bool(const Match&).
#include <tuple>

#include "tempura/pattern/pattern.hpp"

namespace tempura::pattern {

struct NoPred {
    static constexpr uint32_t kUses = 0;
    bool eval(const Match&) const { return true; }
    Term term() const { return Term{Term::Kind::Predicate, Op::Const, -1, 0, "true", {}}; }
};

template <class W>
concept WildcardPattern = requires {
    W::kSlot;
};

// F: a stateless test with a name, applied to the nodes bound to its wildcard arguments.
template <class F, class... As>
struct Pred {
    std::tuple<As...> args;
    static constexpr uint32_t kUses = (0u | ... | As::kUses);
    bool eval(const Match& m) const {
        return std::apply([&](const auto&... a) { return F::test(m.at(a.kSlot)...); }, args);
    }
    Term term() const {
        Term t{Term::Kind::Predicate, Op::Const, -1, 0, F::kName, {}};
        std::apply([&](const auto&... a) { (t.children.push_back(a.term()), ...); }, args);
        return t;
    }
};

template <class A, class B>
struct PredAnd {
    A a;
    B b;
    static constexpr uint32_t kUses = A::kUses | B::kUses;
    bool eval(const Match& m) const { return a.eval(m) && b.eval(m); }
    Term term() const {
        return Term{Term::Kind::Predicate, Op::Const, -1, 0, "and", {a.term(), b.term()}};
    }
};

template <class F>
struct CodePred {
    F f;
    static constexpr uint32_t kUses = 0;
    bool eval(const Match& m) const { return f(m); }
    Term term() const { return Term{Term::Kind::Code, Op::Const, -1, 0, "code", {}}; }
};

template <class T>
struct IsPredT : std::false_type {};
template <>
struct IsPredT<NoPred> : std::true_type {};
template <class F, class... As>
struct IsPredT<Pred<F, As...>> : std::true_type {};
template <class A, class B>
struct IsPredT<PredAnd<A, B>> : std::true_type {};
template <class F>
struct IsPredT<CodePred<F>> : std::true_type {};
template <class T>
concept Predicate = IsPredT<std::remove_cvref_t<T>>::value;

template <Predicate A, Predicate B>
constexpr auto operator&&(A a, B b) {
    return PredAnd<A, B>{a, b};
}

// Whether u is provably a multiple of k: a constant multiple, or sums, differences,
// negations and products built from multiples (e.g. a*4 + 8 for k = 4).
bool is_multiple_of(const UOp& u, int64_t k);

namespace preds {
struct MultipleOf {
    static constexpr const char* kName = "is_multiple_of";
    static bool test(const UOp& a, const UOp& b) {
        return b.is_const() && b.dtype().is_int() && is_multiple_of(a, b.const_value());
    }
};
struct NonNeg {
    static constexpr const char* kName = "nonneg";
    static bool test(const UOp& a) { return a.dtype().is_integral() && a.vmin() >= 0; }
};
struct Positive {
    static constexpr const char* kName = "positive";
    static bool test(const UOp& a) { return a.dtype().is_integral() && a.vmin() > 0; }
};
struct NonZero {
    static constexpr const char* kName = "nonzero";
    static bool test(const UOp& a) {
        return a.dtype().is_integral() && (a.vmin() > 0 || a.vmax() < 0);
    }
};
struct IsInt {
    static constexpr const char* kName = "is_int";
    static bool test(const UOp& a) { return a.dtype().is_int() && a.dtype().count == 1; }
};
struct IsBool {
    static constexpr const char* kName = "is_bool";
    static bool test(const UOp& a) { return a.dtype().is_bool(); }
};
struct LessThan { // a.vmax < b.vmin: a < b everywhere
    static constexpr const char* kName = "always_less";
    static bool test(const UOp& a, const UOp& b) {
        return a.dtype().is_integral() && a.vmax() < b.vmin();
    }
};
} // namespace preds

template <WildcardPattern A, WildcardPattern B>
constexpr auto is_multiple_of(A a, B b) {
    return Pred<preds::MultipleOf, A, B>{{a, b}};
}
// The DESIGN.md spelling: x_is_multiple_of(c0) tests the node bound to x.
template <WildcardPattern B>
constexpr auto x_is_multiple_of(B b) {
    return is_multiple_of(x, b);
}
template <WildcardPattern A>
constexpr auto nonneg(A a) {
    return Pred<preds::NonNeg, A>{{a}};
}
template <WildcardPattern A>
constexpr auto positive(A a) {
    return Pred<preds::Positive, A>{{a}};
}
template <WildcardPattern A>
constexpr auto nonzero(A a) {
    return Pred<preds::NonZero, A>{{a}};
}
template <WildcardPattern A>
constexpr auto is_int(A a) {
    return Pred<preds::IsInt, A>{{a}};
}
template <WildcardPattern A>
constexpr auto is_bool(A a) {
    return Pred<preds::IsBool, A>{{a}};
}
template <WildcardPattern A, WildcardPattern B>
constexpr auto always_less(A a, B b) {
    return Pred<preds::LessThan, A, B>{{a, b}};
}

} // namespace tempura::pattern
