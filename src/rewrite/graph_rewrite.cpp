// The rewrite engine: an explicit stack of frames (no recursion, so deep graphs are fine).
#include "tempura/rewrite/graph_rewrite.hpp"

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "tempura/error.hpp"
#include "tempura/pattern/table.hpp"
#include "tempura/rewrite/trace.hpp"

namespace tempura {

namespace {

struct Frame {
    Frame(UOp o) : orig(o), cur(std::move(o)) {}
    UOp orig; // the node whose result this frame computes
    UOp cur;  // what it has become so far
    enum Stage : uint8_t { Start, Children } stage = Start;
    size_t i = 0;
    bool changed = false;
    // The rewritten sources, filled only once one differs (until then they are cur's own): most
    // nodes come through unchanged, and then nothing is allocated for them.
    std::vector<UOp> srcs;
};

// The memo: node -> its result, open addressing over the nodes' own hashes, one allocation for
// the whole table (a std::unordered_map allocated a node per entry, two entries per node
// rewritten: the per-call cost on small expressions). Keys are held, so a node cannot die and
// have its address reused by a new node while the table lives.
class Memo {
  public:
    Memo() : slots_(16) {}
    const UOp* find(const UOp& k) const {
        for (size_t i = slot_of(k);; i = (i + 1) & (slots_.size() - 1)) {
            const Slot& s = slots_[i];
            if (s.key.is_null()) return nullptr;
            if (s.key.same(k)) return &s.value;
        }
    }
    // Adds k -> v unless k is present (its result stays).
    void emplace(const UOp& k, const UOp& v) {
        if ((count_ + 1) * 2 > slots_.size()) grow();
        put(k, v);
    }
    const UOp& at(const UOp& k) const {
        const UOp* v = find(k);
        if (v == nullptr) fail("graph_rewrite", "internal: the root has no result");
        return *v;
    }

  private:
    struct Slot {
        UOp key, value;
    };
    size_t slot_of(const UOp& k) const {
        const uint64_t h = k.hash();
        return static_cast<size_t>(h ^ (h >> 29)) & (slots_.size() - 1);
    }
    template <class K, class V>
    void put(K&& k, V&& v) {
        for (size_t i = slot_of(k);; i = (i + 1) & (slots_.size() - 1)) {
            Slot& s = slots_[i];
            if (s.key.is_null()) {
                s.key = std::forward<K>(k);
                s.value = std::forward<V>(v);
                ++count_;
                return;
            }
            if (s.key.same(k)) return;
        }
    }
    void grow() {
        std::vector<Slot> old(slots_.size() * 2);
        old.swap(slots_);
        count_ = 0;
        for (Slot& s : old) // moved: no reference counting for the entries carried over
            if (!s.key.is_null()) put(std::move(s.key), std::move(s.value));
    }
    std::vector<Slot> slots_;
    size_t count_ = 0;
};

} // namespace

UOp graph_rewrite(const UOp& root, const pattern::RuleTable& table,
                  const pattern::RewriteContext& ctx, RewriteOptions options) {
    // The default limit depends on the graph's size, counted only if it could matter.
    size_t limit = options.max_steps;
    bool limit_known = limit != 0;
    if (!limit_known) limit = 100000;
    const bool top_down = !options.bottom_up;
    // Keyed by UOp, not by address: intermediate nodes die during rewriting and a new node may
    // reuse a dead one's address.
    Memo memo;
    size_t steps = 0;
    trace::Recorder* const rec = trace::current(); // TEMPURA_VIZ: each step recorded

    auto fired = [&](const UOp& node, const pattern::CompiledRule* rule, const UOp& result) {
        if (rec != nullptr) {
            const pattern::RuleTerms t = rule->terms(rule->rule); // the location rides along
            rec->step(rule->text(), t.file, t.line, node, result);
        }
        if (++steps > limit && !limit_known) {
            limit_known = true;
            limit = 100000 + 100 * root.node_count();
        }
        if (steps > limit)
            fail("graph_rewrite",
                 "exceeded the limit of " + std::to_string(limit) + " rewrite steps; the rule `" +
                     rule->text() + "` was firing on " + std::string(op_name(node.op())) +
                     " node `" + node.render() + "` (created at " + node.location().file_name() +
                     ":" + std::to_string(node.location().line()) + ")");
    };

    std::vector<Frame> stack;
    stack.reserve(16);
    stack.emplace_back(root);
    while (!stack.empty()) {
        Frame& f = stack.back();
        if (f.stage == Frame::Start) {
            if (const UOp* hit = memo.find(f.cur)) {
                const UOp res = *hit; // emplace may move the table
                memo.emplace(f.orig, res);
                stack.pop_back();
                continue;
            }
            if (top_down) {
                const pattern::CompiledRule* which = nullptr;
                if (auto r = table.rewrite_once(f.cur, ctx, &which)) {
                    fired(f.cur, which, *r);
                    f.cur = std::move(*r);
                    continue;
                }
            }
            f.stage = Frame::Children;
            f.i = 0;
            f.changed = false;
            f.srcs.clear();
        }
        // Children stage.
        const auto& cs = f.cur.srcs();
        if (f.i < cs.size()) {
            const UOp& c = cs[f.i];
            if (const UOp* r = memo.find(c)) {
                if (!f.changed && !r->same(c)) {
                    f.changed = true;
                    f.srcs.reserve(cs.size());
                    f.srcs.assign(cs.begin(), cs.begin() + static_cast<std::ptrdiff_t>(f.i));
                }
                if (f.changed) f.srcs.push_back(*r);
                ++f.i;
            } else {
                UOp child = c; // `f` may move when the stack grows
                stack.emplace_back(child);
            }
            continue;
        }
        if (f.changed) {
            // Sources changed: rebuild, and give the rules another go at the new node.
            f.cur = f.cur.replace_srcs(std::move(f.srcs));
            f.srcs = {};
            f.stage = Frame::Start;
            if (!top_down) {
                const pattern::CompiledRule* which = nullptr;
                if (auto r = table.rewrite_once(f.cur, ctx, &which)) {
                    fired(f.cur, which, *r);
                    f.cur = std::move(*r);
                } else {
                    memo.emplace(f.cur, f.cur);
                    memo.emplace(f.orig, f.cur);
                    stack.pop_back();
                }
            }
            continue;
        }
        if (!top_down) {
            const pattern::CompiledRule* which = nullptr;
            if (auto r = table.rewrite_once(f.cur, ctx, &which)) {
                fired(f.cur, which, *r);
                f.cur = std::move(*r);
                f.stage = Frame::Start;
                continue;
            }
        }
        // A fixpoint: no rule fires here and the sources are final.
        memo.emplace(f.cur, f.cur);
        memo.emplace(f.orig, f.cur);
        stack.pop_back();
    }
    return memo.at(root);
}

} // namespace tempura
