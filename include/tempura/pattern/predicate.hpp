#pragma once
// Predicates of rules: named tests on the matched nodes (bounds, divisibility, dtype), combined
// with &&, or an escape-hatch callable bool(const Match&).
#include <tuple>

#include "tempura/pattern/fold.hpp"
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

// A test on the matched constants in the algebra's own spelling, evaluated as fold() evaluates
// (so with the ops' exact semantics): rule((x < c0) & (x < c1), x < c0, c0 <= c1).
template <class E>
struct ConstPred {
    E e;
    static constexpr uint32_t kUses = E::kUses;
    bool eval(const Match& m) const {
        const auto v = fold_eval(e, m);
        return v.has_value() && (v->dtype.is_float() ? v->f != 0.0 : v->i != 0);
    }
    Term term() const { return e.term(); }
};

// c0 <= c1, c0 > c1, c0 >= c1 on constant patterns: predicates (there is no <= op to match).
template <class A, class B, int Rel> // Rel: 0 <=, 1 >, 2 >=
struct ConstRel {
    A a;
    B b;
    static constexpr uint32_t kUses = A::kUses | B::kUses;
    bool eval(const Match& m) const {
        const auto va = fold_eval(a, m), vb = fold_eval(b, m);
        if (!va || !vb) return false;
        const bool f =
            (va->known_dtype && va->dtype.is_float()) || (vb->known_dtype && vb->dtype.is_float());
        const double fa =
            va->known_dtype && va->dtype.is_float() ? va->f : static_cast<double>(va->i);
        const double fb =
            vb->known_dtype && vb->dtype.is_float() ? vb->f : static_cast<double>(vb->i);
        if (f) return Rel == 0 ? fa <= fb : Rel == 1 ? fa > fb : fa >= fb;
        return Rel == 0 ? va->i <= vb->i : Rel == 1 ? va->i > vb->i : va->i >= vb->i;
    }
    Term term() const {
        static constexpr const char* names[] = {"<=", ">", ">="};
        return Term{Term::Kind::Predicate, Op::Const, -1, 0, names[Rel], {a.term(), b.term()}};
    }
};
#define TEMPURA_CONST_REL(sym, REL)                                                                \
    template <class A, class B>                                                                    \
    requires(Pattern<A> || Pattern<B>) constexpr auto operator sym(A a, B b) {                     \
        using LA = Lifted<A>;                                                                      \
        using LB = Lifted<B>;                                                                      \
        static_assert(                                                                             \
            LA::kConstOnly && LB::kConstOnly,                                                      \
            "pattern: <=, > and >= compare matched constants in a predicate (c0 <= c1); "          \
            "they are not ops a pattern can match");                                               \
        return ConstRel<LA, LB, REL>{lift(a), lift(b)};                                            \
    }
TEMPURA_CONST_REL(<=, 0)
TEMPURA_CONST_REL(>, 1)
TEMPURA_CONST_REL(>=, 2)
#undef TEMPURA_CONST_REL

template <class T>
struct IsPredT : std::false_type {};
template <class E>
struct IsPredT<ConstPred<E>> : std::true_type {};
template <class A, class B, int R>
struct IsPredT<ConstRel<A, B, R>> : std::true_type {};
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
// negations and products built from multiples (e.g. a*4 + 8 for k = 4; (a*4)*2 for k = 8),
// shifts by constants (a << 3 for k = 8), WHEREs of two multiples and widening integer casts.
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
struct IsFloat { // a float, scalar or vector
    static constexpr const char* kName = "is_float";
    static bool test(const UOp& a) { return a.dtype().is_float(); }
};
struct IsF32 {
    static constexpr const char* kName = "is_float32";
    static bool test(const UOp& a) { return a.dtype() == DType::Float32; }
};
struct IsF64 {
    static constexpr const char* kName = "is_float64";
    static bool test(const UOp& a) { return a.dtype() == DType::Float64; }
};
struct IsF16 { // Float16 or BFloat16, scalar
    static constexpr const char* kName = "is_16bit_float";
    static bool test(const UOp& a) { return a.dtype().is_16bit_float() && a.dtype().count == 1; }
};
struct IsPow2 { // a positive integer constant that is a power of two
    static constexpr const char* kName = "is_pow2";
    static bool test(const UOp& c) {
        if (!c.is_const() || !c.dtype().is_int()) return false;
        const int64_t v = c.const_value();
        return v > 0 && (v & (v - 1)) == 0;
    }
};
struct IsIntegral { // an integer or a bool: the dtypes with exact bounds
    static constexpr const char* kName = "is_integral";
    static bool test(const UOp& a) { return a.dtype().is_integral() && a.dtype().count == 1; }
};
struct Always { // a bool that is true wherever it is evaluated (bounds)
    static constexpr const char* kName = "always";
    static bool test(const UOp& a) { return a.dtype().is_bool() && a.vmin() == 1; }
};
struct Never { // a bool that is false wherever it is evaluated
    static constexpr const char* kName = "never";
    static bool test(const UOp& a) { return a.dtype().is_bool() && a.vmax() == 0; }
};
struct NeverAbove { // a.vmax <= b.vmin: a never exceeds b
    static constexpr const char* kName = "never_above";
    static bool test(const UOp& a, const UOp& b) {
        return a.dtype().is_integral() && a.vmax() <= b.vmin();
    }
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
template <WildcardPattern A>
constexpr auto is_float(A a) {
    return Pred<preds::IsFloat, A>{{a}};
}
template <WildcardPattern A>
constexpr auto is_float32(A a) {
    return Pred<preds::IsF32, A>{{a}};
}
template <WildcardPattern A>
constexpr auto is_float64(A a) {
    return Pred<preds::IsF64, A>{{a}};
}
template <WildcardPattern A>
constexpr auto is_16bit_float(A a) {
    return Pred<preds::IsF16, A>{{a}};
}
template <WildcardPattern A>
constexpr auto is_pow2(A a) {
    return Pred<preds::IsPow2, A>{{a}};
}
template <WildcardPattern A>
constexpr auto is_integral(A a) {
    return Pred<preds::IsIntegral, A>{{a}};
}
template <WildcardPattern A>
constexpr auto always(A a) {
    return Pred<preds::Always, A>{{a}};
}
template <WildcardPattern A>
constexpr auto never(A a) {
    return Pred<preds::Never, A>{{a}};
}
template <WildcardPattern A, WildcardPattern B>
constexpr auto never_above(A a, B b) {
    return Pred<preds::NeverAbove, A, B>{{a, b}};
}
template <WildcardPattern A, WildcardPattern B>
constexpr auto always_less(A a, B b) {
    return Pred<preds::LessThan, A, B>{{a, b}};
}

} // namespace tempura::pattern
