#pragma once
// RuleTable: a rule group compiled into an op-indexed table (MLIR's FrozenRewritePatternSet):
// for each root op, the rules that can match it, in declaration order, each with a cheap early
// reject on its children's ops.
//
//   inline constexpr auto my_group = rules(...);
//   const RuleTable& t = frozen<my_group>();     // built by the compiler: a constexpr table,
//                                                // nothing assembled at run time
//   const auto t2 = compile(rules(...));          // a group made at run time (tests, tools)
#include <array>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <boost/hana/for_each.hpp>
#include <boost/hana/unpack.hpp>

#include "tempura/pattern/rule.hpp"

namespace tempura::pattern {

struct RuleTerms {
    Term lhs, rhs, pred;
    const char* file = ""; // where the rule was written, and its line (TEMPURA_VIZ shows it)
    unsigned line = 0;
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

// Where a rule is filed: under one op (op >= 0), every op of a set (op == kRootOpSet), or every
// op (op == -1, a bare wildcard root).
struct RuleRoot {
    int op;
    OpSet set;
    constexpr bool files_under(size_t o) const {
        return op >= 0            ? static_cast<size_t>(op) == o
               : op == kRootOpSet ? set.has(static_cast<Op>(o))
                                  : true;
    }
};

// A view of a compiled table: rules bucketed by root op, in declaration order. A literal type,
// so a table can be a constexpr object; `then` chains a second table whose rules come after this
// one's for every op (the symbolic simplifier is two groups in two translation units).
class RuleTable {
  public:
    constexpr RuleTable(const CompiledRule* entries, const uint16_t* offset,
                        const CompiledRule* all, size_t n_all, const RuleTable* next = nullptr)
        : entries_(entries), offset_(offset), all_(all), n_all_(n_all), next_(next) {}

    // This table's rules that can match a node of this op, in declaration order (not the
    // chained table's).
    constexpr std::span<const CompiledRule> for_op(Op op) const {
        const auto i = static_cast<size_t>(op);
        return {entries_ + offset_[i], entries_ + offset_[i + 1]};
    }
    // Tries the rules for n's op in order; the first that fires gives the result.
    std::optional<UOp> rewrite_once(const UOp& n, const RewriteContext& ctx,
                                    const CompiledRule** which = nullptr) const {
        const auto i = static_cast<size_t>(n.op());
        for (const RuleTable* t = this; t != nullptr; t = t->next_) {
            for (const CompiledRule *r = t->entries_ + t->offset_[i],
                                    *e = t->entries_ + t->offset_[i + 1];
                 r != e; ++r) {
                if (!r->may_match(n)) continue;
                if (auto out = r->apply(r->rule, n, ctx)) {
                    if (which) *which = r;
                    return out;
                }
            }
        }
        return std::nullopt;
    }
    // This table with `next`'s rules after its own (next must outlive it; no chain yet).
    constexpr RuleTable then(const RuleTable& next) const {
        if (next_ != nullptr) throw "RuleTable::then: this table is already chained";
        return RuleTable(entries_, offset_, all_, n_all_, &next);
    }

    // Another view of the same rules, e.g. to give a constexpr table external linkage (the rules
    // must outlive it: frozen<>() tables live for the whole program).
    constexpr RuleTable alias() const { return RuleTable(entries_, offset_, all_, n_all_, next_); }

    constexpr size_t size() const { return n_all_ + (next_ ? next_->size() : 0); }
    constexpr std::span<const CompiledRule> all() const { return {all_, n_all_}; } // each rule once
    std::string dump() const; // every rule, chained ones included, one per line
    constexpr const RuleTable* next() const { return next_; } // the chained table, or null

    // A copy sliced from a table that owns its rules (compile()'s) would outlive them.
    template <class T>
    requires(std::is_base_of_v<RuleTable, T> && !std::is_same_v<T, RuleTable>) RuleTable(const T&) {
        static_assert(!std::is_base_of_v<RuleTable, T>,
                      "RuleTable: a table made by compile() owns its rules and cannot be copied "
                      "into a RuleTable view; keep it as `const auto t = compile(...)`");
    }

  protected:
    constexpr RuleTable(const RuleTable&) = default;
    RuleTable& operator=(const RuleTable&) = default;

  private:
    const CompiledRule* entries_;
    const uint16_t* offset_; // kNumOps + 1 entries: op i's rules are [offset_[i], offset_[i+1])
    const CompiledRule* all_;
    size_t n_all_;
    const RuleTable* next_;
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
    return RuleTerms{rr.lhs.term(), rr.rhs.term(), rr.pred.term(), rr.file, rr.line};
}

template <class R>
constexpr RuleRoot root_of() {
    using L = decltype(R::lhs);
    if constexpr (requires { L::kSet; })
        return RuleRoot{L::kRootOp, L::kSet};
    else
        return RuleRoot{L::kRootOp, OpSet{}};
}
// A rule's entry, pointing at the rule object (which must outlive the table).
template <class R>
constexpr CompiledRule compiled_rule(const R& r) {
    using L = decltype(r.lhs);
    using C = ChildOps<L>;
    return CompiledRule{&apply_rule<R>,
                        &terms_of<R>,
                        static_cast<const void*>(&r),
                        r.label,
                        {C::ops[0], C::ops[1], C::ops[2]},
                        C::n,
                        L::kRootOp >= 0 && is_commutative(static_cast<Op>(L::kRootOp)) &&
                            C::n == 2};
}

// How many entries the rules need, once per op each is filed under.
constexpr size_t count_entries(std::span<const RuleRoot> roots) {
    size_t n = 0;
    for (const RuleRoot& r : roots)
        for (size_t o = 0; o < kNumOps; ++o) n += r.files_under(o) ? 1 : 0;
    return n;
}
// The bucketing, shared by frozen<>() (at compile time) and compile() (at run time): entries
// grouped by op, rules in declaration order within an op; offset[o]..offset[o+1] is op o's.
constexpr void bucket(std::span<const CompiledRule> rules, std::span<const RuleRoot> roots,
                      CompiledRule* entries, uint16_t* offset) {
    size_t n = 0;
    for (size_t o = 0; o < kNumOps; ++o) {
        offset[o] = static_cast<uint16_t>(n);
        for (size_t i = 0; i < rules.size(); ++i) {
            if (!roots[i].files_under(o)) continue;
            CompiledRule c = rules[i];
            if (roots[i].op == kRootOpSet) // a commutative op of a set may match children swapped
                c.swap = is_commutative(static_cast<Op>(o)) && c.nchild == 2;
            entries[n++] = c;
        }
    }
    offset[kNumOps] = static_cast<uint16_t>(n);
}

template <size_t NRules, size_t NEntries>
struct Buckets {
    std::array<CompiledRule, NEntries> entries;
    std::array<uint16_t, kNumOps + 1> offset;
};

// The constexpr table of the group G (an object with static storage: a namespace-scope
// `inline constexpr auto g = rules(...)`).
template <const auto& G>
struct Frozen {
    static constexpr size_t kRules = std::remove_cvref_t<decltype(G)>::size;
    static constexpr std::array<CompiledRule, kRules> rules =
        boost::hana::unpack(G.rules, [](const auto&... r) {
            return std::array<CompiledRule, kRules>{compiled_rule(r)...};
        });
    static constexpr std::array<RuleRoot, kRules> roots =
        boost::hana::unpack(G.rules, [](const auto&... r) {
            return std::array<RuleRoot, kRules>{root_of<std::remove_cvref_t<decltype(r)>>()...};
        });
    static constexpr size_t kEntries = count_entries(roots);
    static_assert(kEntries < 65536, "frozen: a rule group with more than 65535 table entries");
    static constexpr Buckets<kRules, kEntries> buckets = [] {
        Buckets<kRules, kEntries> b{};
        bucket(rules, roots, b.entries.data(), b.offset.data());
        return b;
    }();
    static constexpr RuleTable table{buckets.entries.data(), buckets.offset.data(), rules.data(),
                                     kRules};
};
} // namespace detail

// The table of a rule group, built entirely at compile time.
template <const auto& G>
constexpr const RuleTable& frozen() {
    return detail::Frozen<G>::table;
}

// A table compiled at run time from a group value; it keeps its own copy of the rules. It is a
// RuleTable (pass it to graph_rewrite), but cannot be sliced into a copy that outlives it.
class OwnedRuleTable : public RuleTable {
  public:
    template <class... Rs>
    explicit OwnedRuleTable(const RuleGroup<Rs...>& g) : OwnedRuleTable(make(g)) {}

  private:
    struct Storage {
        std::shared_ptr<const void> group;
        std::vector<CompiledRule> rules, entries;
        std::array<uint16_t, kNumOps + 1> offset{};
    };
    explicit OwnedRuleTable(std::shared_ptr<Storage> s)
        : RuleTable(s->entries.data(), s->offset.data(), s->rules.data(), s->rules.size()),
          s_(std::move(s)) {}
    template <class... Rs>
    static std::shared_ptr<Storage> make(const RuleGroup<Rs...>& g) {
        auto group = std::make_shared<const RuleGroup<Rs...>>(g);
        auto s = std::make_shared<Storage>();
        std::vector<RuleRoot> roots;
        boost::hana::for_each(group->rules, [&](const auto& r) {
            s->rules.push_back(detail::compiled_rule(r));
            roots.push_back(detail::root_of<std::remove_cvref_t<decltype(r)>>());
        });
        s->entries.resize(detail::count_entries(roots));
        detail::bucket(s->rules, roots, s->entries.data(), s->offset.data());
        s->group = std::move(group);
        return s;
    }
    std::shared_ptr<Storage> s_;
};

// Compiles a group value at run time (for groups that are not constexpr objects).
template <class... Rs>
OwnedRuleTable compile(const RuleGroup<Rs...>& g) {
    return OwnedRuleTable(g);
}

} // namespace tempura::pattern
