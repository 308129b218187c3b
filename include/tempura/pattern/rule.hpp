#pragma once
// rule(lhs, rhs[, predicate]) and named groups of rules that compose:
//
//   inline constexpr auto zero_folding = rules(rule(x + 0, x), rule(x * 0, 0, is_int(x)));
//   inline constexpr auto simple = rules(zero_folding, rule(x * 1, x));
//
// Mistakes are compile errors with a sentence (see the static_asserts below).
#include <functional>
#include <optional>
#include <source_location>
#include <type_traits>

#include <boost/hana/flatten.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/unpack.hpp>

#include "tempura/pattern/fold.hpp"
#include "tempura/pattern/pattern.hpp"
#include "tempura/pattern/predicate.hpp"

namespace tempura::pattern {

// The escape hatch: code that computes the replacement, or declines with std::nullopt.
template <class F>
struct CodeRhs {
    F f;
    static constexpr uint32_t kUses = 0;
    std::optional<UOp> build(Match& m, DType) const {
        if constexpr (std::is_same_v<std::invoke_result_t<const F&, Match&>, std::optional<UOp>>)
            return f(m);
        else
            return std::optional<UOp>(f(m));
    }
    Term term() const { return Term{Term::Kind::Code, Op::Const, -1, 0, "code", {}}; }
};

// A plain function of the matched root as the right-hand side: rule(x + y, canonical_sum, ...)
// with std::optional<UOp> canonical_sum(const UOp&) (nullopt: the rule does not fire).
template <class F>
struct RootFnRhs {
    F f;
    const char* name;
    static constexpr uint32_t kUses = 0;
    std::optional<UOp> build(Match& m, DType) const {
        if constexpr (std::is_same_v<std::invoke_result_t<const F&, const UOp&>,
                                     std::optional<UOp>>)
            return f(*m.root);
        else
            return std::optional<UOp>(f(*m.root));
    }
    Term term() const { return Term{Term::Kind::Code, Op::Const, -1, 0, name, {}}; }
};

template <class L, class R, class P>
struct Rule {
    L lhs;
    R rhs;
    P pred;
    const char* label = nullptr; // optional name shown in errors and dumps
    const char* file = "";       // where the rule was written (TEMPURA_VIZ shows it)
    unsigned line = 0;

    std::optional<UOp> apply(const UOp& n, const RewriteContext& ctx) const {
        Match m;
        m.root = &n;
        m.ctx = ctx;
        std::optional<UOp> out;
        lhs.match(n, m, [&] {
            if (!pred.eval(m)) return false;
            out = rhs.build(m, n.dtype());
            return out.has_value();
        });
        return out;
    }
    constexpr Rule named(const char* name) const { return Rule{lhs, rhs, pred, name, file, line}; }
};

template <class T>
struct IsOpSetPatT : std::false_type {};
template <OpSet S, bool A, class... Cs>
struct IsOpSetPatT<OpSetPat<S, A, Cs...>> : std::true_type {};

template <class R>
constexpr auto make_rhs(R r) {
    if constexpr (Pattern<R>) {
        static_assert(!IsOpSetPatT<R>::value,
                      "rule: an op set (alu, alu_any, any_of) can only be a left-hand side: the "
                      "right-hand side would not know which op to build");
        return r;
    } else if constexpr (std::is_integral_v<R>) {
        return Lit{static_cast<int64_t>(r)};
    } else if constexpr (std::is_invocable_v<const R&, const UOp&> &&
                         !std::is_invocable_v<const R&, Match&>) {
        return RootFnRhs<R>{r, "code"};
    } else {
        static_assert(std::is_invocable_v<const R&, Match&>,
                      "rule: the right-hand side must be a pattern, an integer, fold(...), a "
                      "function std::optional<UOp>(const UOp& root) or a callable "
                      "std::optional<UOp>(Match&)");
        return CodeRhs<R>{r};
    }
}

template <class P>
constexpr auto make_pred(P p) {
    if constexpr (Predicate<P>) {
        return p;
    } else if constexpr (Pattern<P>) {
        static_assert(P::kConstOnly,
                      "rule: a pattern used as a predicate may use only constant wildcards "
                      "(c0..c3) and integer literals, e.g. c0 < c1 or c0 % c1 == 0");
        return ConstPred<P>{p};
    } else {
        static_assert(std::is_invocable_r_v<bool, const P&, const Match&>,
                      "rule: the predicate cannot be evaluated: it must be a predicate of the DSL "
                      "or callable as bool(const Match&)");
        return CodePred<P>{p};
    }
}

template <class L, class R, class P = NoPred>
constexpr auto rule(L lhs, R rhs, P pred = {},
                    std::source_location loc = std::source_location::current()) {
    static_assert(Pattern<L>, "rule: the left-hand side must be a pattern (built from wildcards)");
    static_assert(L::kRootOp != -2, "rule: fold() can only appear on the right-hand side");
    auto r = make_rhs(rhs);
    auto p = make_pred(pred);
    static_assert(
        (decltype(r)::kUses & ~L::kUses) == 0,
        "rule: the right-hand side uses a wildcard that the left-hand side does not bind");
    static_assert(
        (decltype(p)::kUses & ~L::kUses) == 0,
        "rule: the predicate uses a wildcard that the left-hand side does not bind, so it "
        "cannot be evaluated");
    return Rule<L, decltype(r), decltype(p)>{
        lhs, r, p, nullptr, loc.file_name(), static_cast<unsigned>(loc.line())};
}

// ---- groups -----------------------------------------------------------------------------------

// A group is a hana::tuple of rules: heterogeneous, flattened when groups nest, and bucketed by
// root op at compile time by frozen<>() (table.hpp).
template <class... Rs>
struct RuleGroup {
    boost::hana::tuple<Rs...> rules;
    static constexpr size_t size = sizeof...(Rs);
};

template <class T>
struct IsRuleT : std::false_type {};
template <class L, class R, class P>
struct IsRuleT<Rule<L, R, P>> : std::true_type {};
template <class T>
struct IsRuleGroupT : std::false_type {};
template <class... Rs>
struct IsRuleGroupT<RuleGroup<Rs...>> : std::true_type {};

template <class T>
constexpr auto as_tuple(const T& t) {
    static_assert(IsRuleT<T>::value || IsRuleGroupT<T>::value,
                  "rules: every argument must be a rule(...) or a group made by rules(...)");
    if constexpr (IsRuleT<T>::value)
        return boost::hana::make_tuple(t);
    else
        return t.rules;
}

// rules(a, b, ...): a group of rules and groups, flattened, in declaration order.
template <class... As>
constexpr auto rules(As... as) {
    return boost::hana::unpack(
        boost::hana::flatten(boost::hana::make_tuple(as_tuple(as)...)),
        [](auto... r) { return RuleGroup<decltype(r)...>{boost::hana::make_tuple(r...)}; });
}

} // namespace tempura::pattern
