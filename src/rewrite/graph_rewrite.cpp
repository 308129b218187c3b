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
    // Whether cur may be in the memo: a node just pushed by its user was looked up there (and
    // missed) already; one a rule made, or rebuilt with new sources, was not.
    bool lookup = false;
    // The rewritten sources, filled only once one differs (until then they are cur's own): most
    // nodes come through unchanged, and then nothing is allocated for them.
    std::vector<UOp> srcs;
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
    UOpMemo<UOp> memo; // node -> its result
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
            if (const UOp* hit = f.lookup ? memo.find(f.cur) : nullptr) {
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
                    f.lookup = true;
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
            f.lookup = true;
            f.srcs = {};
            f.stage = Frame::Start;
            if (!top_down) {
                const pattern::CompiledRule* which = nullptr;
                if (auto r = table.rewrite_once(f.cur, ctx, &which)) {
                    fired(f.cur, which, *r);
                    f.cur = std::move(*r);
                } else {
                    memo.emplace(f.cur, f.cur);
                    if (!f.orig.same(f.cur)) memo.emplace(f.orig, f.cur);
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
                f.lookup = true;
                f.stage = Frame::Start;
                continue;
            }
        }
        // A fixpoint: no rule fires here and the sources are final.
        memo.emplace(f.cur, f.cur);
        if (!f.orig.same(f.cur)) memo.emplace(f.orig, f.cur);
        stack.pop_back();
    }
    const UOp* result = memo.find(root);
    if (result == nullptr) fail("graph_rewrite", "internal: the root has no result");
    return *result;
}

} // namespace tempura
