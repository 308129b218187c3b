#pragma once
// RuleTable: a rule group compiled once into an op-indexed table (MLIR's
// FrozenRewritePatternSet): for each root op, the rules that can match it, in declaration
// order, each with a cheap early reject on its children's ops.
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "tempura/pattern/rule.hpp"

namespace tempura::pattern {

struct RuleTerms {
    Term lhs, rhs, pred;
};

struct CompiledRule {
    std::optional<UOp> (*apply)(const void* rule, const UOp& n, const RewriteContext& ctx);
    RuleTerms (*terms)(const void* rule);
    const void* rule;
    const char* label;
    int16_t child_op[3]; // the op each source must have, -1 for any
    uint8_t nchild;      // how many of child_op apply (0: no early reject)
    bool swap;           // commutative binary root: the children may match in either order

    bool may_match(const UOp& n) const {
        if (nchild == 0) return true;
        const auto& s = n.srcs();
        if (s.size() < nchild) return false;
        auto ok = [&](size_t pat, size_t src) {
            return child_op[pat] < 0 || static_cast<int>(s[src].op()) == child_op[pat];
        };
        if (swap) return (ok(0, 0) && ok(1, 1)) || (ok(0, 1) && ok(1, 0));
        for (size_t i = 0; i < nchild; ++i)
            if (!ok(i, i)) return false;
        return true;
    }
    std::string text() const; // "x + 0 -> x" (and " if ..." when there is a predicate)
};

class RuleTable {
  public:
    // The rules that can match a node of this op, in declaration order.
    const std::vector<CompiledRule>& for_op(Op op) const { return by_op_[static_cast<size_t>(op)]; }
    // Tries the rules for n's op in order; the first that fires gives the result.
    std::optional<UOp> rewrite_once(const UOp& n, const RewriteContext& ctx,
                                    const CompiledRule** which = nullptr) const {
        for (const CompiledRule& r : by_op_[static_cast<size_t>(n.op())]) {
            if (!r.may_match(n)) continue;
            if (auto out = r.apply(r.rule, n, ctx)) {
                if (which) *which = &r;
                return out;
            }
        }
        return std::nullopt;
    }
    // Appends another table's rules after this one's (per op), sharing their storage.
    RuleTable& operator+=(const RuleTable& o);
    friend RuleTable operator+(RuleTable a, const RuleTable& b) { return a += b; }

    size_t size() const { return all_.size(); }
    const std::vector<CompiledRule>& all() const { return all_; } // each rule once
    std::string dump() const;

    // Files r under its root: one op (root_op >= 0), every op of `set` (root_op == kRootOpSet),
    // or every op (root_op == -1, a bare wildcard root).
    void add(const CompiledRule& r, int root_op, const OpSet& set,
             std::shared_ptr<const void> storage);

  private:
    std::array<std::vector<CompiledRule>, kNumOps> by_op_;
    std::vector<CompiledRule> all_;
    std::vector<std::shared_ptr<const void>> storage_;
};

namespace detail {
template <class P>
constexpr int16_t root_op_of() {
    if constexpr (requires { P::kRootOp; })
        return static_cast<int16_t>(P::kRootOp < 0 ? -1 : P::kRootOp); // a set: no early reject
    else
        return -1;
}
// The root op each of the first three operand patterns needs (-1: any).
template <class... Cs>
constexpr std::array<int16_t, 3> child_root_ops() {
    std::array<int16_t, 3> a{-1, -1, -1};
    size_t i = 0;
    ((i < 3 ? (a[i] = root_op_of<Cs>(), ++i) : ++i), ...);
    return a;
}
template <class L>
struct ChildOps {
    static constexpr uint8_t n = 0;
    static constexpr std::array<int16_t, 3> ops{-1, -1, -1};
};
template <OpSet S, class... Cs>
struct ChildOps<OpSetPat<S, false, Cs...>> {
    static constexpr uint8_t n = sizeof...(Cs) <= 3 ? sizeof...(Cs) : 0;
    static constexpr std::array<int16_t, 3> ops = child_root_ops<Cs...>();
};
template <class L>
constexpr OpSet root_set_of() {
    if constexpr (requires { L::kSet; })
        return L::kSet;
    else
        return OpSet{};
}
template <Op O, class... Cs>
struct ChildOps<OpPat<O, Cs...>> {
    static constexpr uint8_t n = sizeof...(Cs) <= 3 ? sizeof...(Cs) : 0;
    static constexpr std::array<int16_t, 3> ops = child_root_ops<Cs...>();
};
template <class R>
std::optional<UOp> apply_rule(const void* r, const UOp& n, const RewriteContext& ctx) {
    return static_cast<const R*>(r)->apply(n, ctx);
}
template <class R>
RuleTerms terms_of(const void* r) {
    const R& rr = *static_cast<const R*>(r);
    return RuleTerms{rr.lhs.term(), rr.rhs.term(), rr.pred.term()};
}
} // namespace detail

// Compiles a group into a table. The table keeps its own copy of the rules.
template <class... Rs>
RuleTable compile(const RuleGroup<Rs...>& g) {
    auto storage = std::make_shared<RuleGroup<Rs...>>(g);
    RuleTable t;
    std::apply(
        [&](const auto&... r) {
            (
                [&] {
                    using R = std::remove_cvref_t<decltype(r)>;
                    using L = decltype(r.lhs);
                    CompiledRule c{&detail::apply_rule<R>,
                                   &detail::terms_of<R>,
                                   &r,
                                   r.label,
                                   {detail::ChildOps<L>::ops[0], detail::ChildOps<L>::ops[1],
                                    detail::ChildOps<L>::ops[2]},
                                   detail::ChildOps<L>::n,
                                   L::kRootOp >= 0 && is_commutative(static_cast<Op>(L::kRootOp)) &&
                                       detail::ChildOps<L>::n == 2};
                    t.add(c, L::kRootOp, detail::root_set_of<L>(), storage);
                }(),
                ...);
        },
        storage->rules);
    return t;
}

} // namespace tempura::pattern
