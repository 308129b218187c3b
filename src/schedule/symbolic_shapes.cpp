// Symbolic shapes: inference of every node's symbolic dims (see the header).
#include "tempura/schedule/symbolic_shapes.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "tempura/error.hpp"
#include "tempura/symbolic/eval.hpp"
#include "tempura/symbolic/simplify.hpp"

namespace tempura {

namespace {

using Dims = std::vector<UOp>;

UOp idx(int64_t v) { return UOp::index(v); }
bool is_sym(const UOp& d) { return !d.is_null() && !d.is_const(); }

UOp mul(const UOp& a, const UOp& b) {
    if (a.is_const() && b.is_const()) return idx(a.const_value() * b.const_value());
    if (a.is_const() && a.const_value() == 1) return b;
    if (b.is_const() && b.const_value() == 1) return a;
    return simplify(a * b);
}

bool divides_cleanly(const UOp& q) {
    for (const UOp& n : q.toposort())
        if (n.op() == Op::Idiv || n.op() == Op::Mod) return false;
    return true;
}

// A variable's expression with BINDs replaced by their variables.
UOp unbind(const UOp& e) {
    std::unordered_map<const UOpNode*, UOp> repl;
    for (const UOp& n : e.toposort())
        if (n.op() == Op::Bind) repl.emplace(n.get(), n.src(0));
    return repl.empty() ? e : e.substitute(repl);
}

using Group = ReshapeGroup;

class Inference {
  public:
    Inference(const std::vector<UOp>& topo, std::map<std::string, int64_t>& values)
        : topo_(topo), values_(values) {}

    UOpMap<Dims> run() {
        for (int round = 0; round < 4; ++round) {
            bool changed = false;
            for (const UOp& u : topo_)
                if (u.has_shape()) changed = forward(u) || changed;
            for (auto t = topo_.rbegin(); t != topo_.rend(); ++t)
                if (t->has_shape()) changed = backward(*t) || changed;
            if (!changed) break;
        }
        // The check: every dim at the bound values is the concrete size.
        for (const auto& [u, dims] : sym_) {
            const Shape& s = u.shape();
            if (dims.size() != s.size()) return {};
            for (size_t d = 0; d < dims.size(); ++d) {
                try {
                    if (value(dims[d]) != s[d]) return {};
                } catch (const Error&) {
                    return {};
                }
            }
        }
        return std::move(sym_);
    }

  private:
    const std::vector<UOp>& topo_;
    std::map<std::string, int64_t>& values_;
    UOpMap<Dims> sym_;    // nodes with a symbolic dim
    UOpMap<Dims> hint_;   // BUFFER -> the dims of the tensor it was made for
    UOpMap<Dims> demand_; // dims users ask a node to have (null: no demand)

    int64_t value(const UOp& d) const {
        return d.is_const() ? d.const_value() : evaluate(d, values_);
    }

    Dims get(const UOp& u) const {
        if (auto it = sym_.find(u); it != sym_.end()) return it->second;
        Dims d;
        for (int64_t v : u.shape()) d.push_back(idx(v));
        return d;
    }

    Dims reshape(const UOp& u) {
        const UOp& src = u.src(0);
        const Shape& out = u.shape();
        // A BUFFER made for a tensor of symbolic dims is read as that tensor.
        Dims in;
        Shape iv;
        if (auto h = hint_.find(src); h != hint_.end()) {
            in = h->second;
            for (const UOp& d : in) iv.push_back(value(d));
        } else {
            in = get(src);
            iv = src.shape();
        }
        Dims res;
        for (int64_t v : out) res.push_back(idx(v));
        const auto gs = reshape_groups(in, iv, out);
        if (!gs) return res;
        for (const Group& g : *gs) {
            if (g.in.size() == 1 && g.out.size() == 1) {
                res[g.out[0]] = in[g.in[0]];
                continue;
            }
            UOp p = idx(1);
            for (size_t i : g.in) p = mul(p, in[i]);
            if (p.is_const()) continue;
            if (g.out.size() == 1) {
                res[g.out[0]] = p;
                continue;
            }
            // A symbolic product split into several dims: the dim it divides into cleanly, and
            // most simply ([batch * 16] into [2, 16] is [batch, 16], not [2, batch * 8]).
            std::optional<size_t> pick;
            UOp q_pick;
            bool tie = false;
            for (size_t j : g.out) {
                int64_t others = 1;
                for (size_t k : g.out)
                    if (k != j) others *= out[k];
                const UOp q = others == 1 ? p : simplify(p / others);
                if (!is_sym(q) || !divides_cleanly(q) || value(q) != out[j]) continue;
                const size_t size = q.node_count();
                if (pick && size == q_pick.node_count()) tie = true;
                if (!pick || size < q_pick.node_count()) {
                    pick = j;
                    q_pick = q;
                    tie = false;
                }
            }
            if (pick && !tie) res[*pick] = q_pick;
        }
        return res;
    }

    Dims infer(const UOp& u) {
        const Shape& out = u.shape();
        Dims res;
        for (int64_t v : out) res.push_back(idx(v));
        switch (u.op()) {
        case Op::Buffer: {
            if (u.srcs().empty()) return res;
            Dims view;
            UOp n = idx(1);
            for (const UOp& s : u.srcs()) {
                view.push_back(unbind(s));
                n = mul(n, view.back());
            }
            hint_[u] = std::move(view);
            return {n};
        }
        case Op::Reshape: return reshape(u);
        case Op::Expand: {
            const Dims in = get(u.src(0));
            const Shape& iv = u.src(0).shape();
            for (size_t d = 0; d < out.size(); ++d)
                if (is_sym(in[d]) || (iv[d] == out[d] && iv[d] != 1)) res[d] = in[d];
            return res;
        }
        case Op::Permute: {
            const Dims in = get(u.src(0));
            const auto& perm = u.arg_as<std::vector<int64_t>>();
            for (size_t d = 0; d < perm.size(); ++d) res[d] = in[static_cast<size_t>(perm[d])];
            return res;
        }
        case Op::Flip:
        case Op::Contiguous: return get(u.src(0));
        case Op::Gather: return get(u.src(1));
        case Op::ScatterAdd: return get(u.src(0));
        case Op::Pad: {
            const Dims in = get(u.src(0));
            const auto& p = u.arg_as<std::vector<int64_t>>();
            for (size_t d = 0; d < out.size(); ++d) {
                const int64_t extra = p[2 * d] + p[2 * d + 1];
                if (is_sym(in[d])) res[d] = extra == 0 ? in[d] : simplify(in[d] + extra);
            }
            return res;
        }
        case Op::Shrink: {
            const Dims in = get(u.src(0));
            const auto& b = u.arg_as<std::vector<int64_t>>();
            const Shape& iv = u.src(0).shape();
            for (size_t d = 0; d < out.size(); ++d)
                if (b[2 * d] == 0 && b[2 * d + 1] == iv[d]) res[d] = in[d];
            return res;
        }
        case Op::ReduceAxis: {
            const Dims in = get(u.src(0));
            const auto& axes = u.arg_as<ReduceArg>().axes;
            for (size_t d = 0; d < out.size(); ++d)
                if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end())
                    res[d] = in[d];
            return res;
        }
        default: break;
        }
        if (is_alu(u.op()))
            for (const UOp& s : u.srcs()) {
                if (!s.has_shape() || s.shape().size() != out.size()) continue;
                const Dims in = get(s);
                for (size_t d = 0; d < out.size(); ++d)
                    if (!is_sym(res[d]) && is_sym(in[d])) res[d] = in[d];
            }
        return res;
    }

    // Stores `dims` for u (keeping symbolic dims found before where the new ones are concrete).
    bool store(const UOp& u, Dims dims) {
        auto it = sym_.find(u);
        if (it != sym_.end())
            for (size_t d = 0; d < dims.size() && d < it->second.size(); ++d)
                if (!is_sym(dims[d]) && is_sym(it->second[d])) dims[d] = it->second[d];
        bool any = false;
        for (const UOp& d : dims) any = any || is_sym(d);
        if (!any) return false;
        if (it != sym_.end()) {
            bool same = it->second.size() == dims.size();
            for (size_t d = 0; same && d < dims.size(); ++d) same = it->second[d].same(dims[d]);
            if (same) return false;
            it->second = std::move(dims);
            return true;
        }
        sym_.emplace(u, std::move(dims));
        return true;
    }

    bool forward(const UOp& u) { return store(u, infer(u)); }

    void ask(const UOp& src, size_t d, const UOp& e) {
        if (!is_sym(e) || !src.has_shape()) return;
        Dims& dem = demand_[src];
        if (dem.empty()) dem.resize(src.shape().size());
        if (d < dem.size() && dem[d].is_null()) dem[d] = e;
    }

    bool backward(const UOp& u) {
        Dims cur = get(u);
        const Shape& s = u.shape();
        bool changed = false;
        if (auto it = demand_.find(u); it != demand_.end())
            for (size_t d = 0; d < cur.size() && d < it->second.size(); ++d) {
                const UOp& e = it->second[d];
                if (u.op() == Op::ReduceAxis) {
                    // A reduced dim is 1 by what the op is, whatever its users' sizes.
                    const auto& axes = u.arg_as<ReduceArg>().axes;
                    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end())
                        continue;
                }
                if (!is_sym(cur[d]) && is_sym(e) && value(e) == s[d]) {
                    cur[d] = e;
                    changed = true;
                }
            }
        if (changed) changed = store(u, cur);
        switch (u.op()) {
        case Op::Expand:
        case Op::Flip:
        case Op::Contiguous:
        case Op::Pad:
        case Op::Shrink:
        case Op::ReduceAxis: {
            const UOp& src = u.src(0);
            const Dims in = get(src);
            // Not into a dim the op changes, nor into one an EXPAND broadcasts (a fixed 1,
            // whatever it grows to).
            for (size_t d = 0; d < cur.size() && d < in.size(); ++d) {
                const bool broadcast =
                    u.op() == Op::Expand && in[d].is_const() && in[d].const_value() == 1;
                if (!broadcast && src.shape()[d] == s[d]) ask(src, d, cur[d]);
            }
            break;
        }
        case Op::Permute: {
            const auto& perm = u.arg_as<std::vector<int64_t>>();
            for (size_t d = 0; d < perm.size(); ++d)
                ask(u.src(0), static_cast<size_t>(perm[d]), cur[d]);
            break;
        }
        case Op::Gather: // the index has the output's dims; the source's are its own
            for (size_t d = 0; d < cur.size(); ++d) ask(u.src(1), d, cur[d]);
            break;
        case Op::ScatterAdd: // the base has the output's dims
            for (size_t d = 0; d < cur.size(); ++d) ask(u.src(0), d, cur[d]);
            break;
        case Op::Reshape: {
            const UOp& src = u.src(0);
            if (const auto gs = reshape_groups(get(src), src.shape(), s))
                for (const Group& g : *gs)
                    if (g.in.size() == 1 && g.out.size() == 1) ask(src, g.in[0], cur[g.out[0]]);
            break;
        }
        default:
            if (is_alu(u.op()))
                for (const UOp& src : u.srcs())
                    if (src.has_shape() && src.shape().size() == cur.size())
                        for (size_t d = 0; d < cur.size(); ++d) ask(src, d, cur[d]);
            break;
        }
        return changed;
    }
};

} // namespace

// Groups of a RESHAPE's source and result dims with equal products, in order. A source dim
// of size 1 that is a variable's pairs with a result dim of size 1, or joins the next group.
std::optional<std::vector<ReshapeGroup>> reshape_groups(const std::vector<UOp>& in, const Shape& iv,
                                                        const Shape& ov) {
    std::vector<ReshapeGroup> gs;
    size_t i = 0, j = 0;
    const size_t ni = iv.size(), no = ov.size();
    for (int64_t v : iv)
        if (v == 0) return std::nullopt;
    for (int64_t v : ov)
        if (v == 0) return std::nullopt;
    while (i < ni || j < no) {
        if (i < ni && in[i].is_const() && iv[i] == 1) {
            ++i;
            continue;
        }
        if (i < ni && iv[i] == 1 && j < no && ov[j] == 1) {
            gs.push_back({{i++}, {j++}});
            continue;
        }
        if (j < no && ov[j] == 1 && (i == ni || iv[i] != 1)) {
            ++j;
            continue;
        }
        if (i == ni || j == no) {
            // Leftover source dims of size 1 (variables at 1) join the last group.
            while (i < ni && iv[i] == 1 && !gs.empty()) gs.back().in.push_back(i++);
            if (i == ni && j == no) break;
            return std::nullopt;
        }
        ReshapeGroup g{{i}, {j}};
        int64_t pi = iv[i++], po = ov[j++];
        while (pi != po) {
            if (pi < po) {
                if (i == ni) return std::nullopt;
                g.in.push_back(i);
                pi *= iv[i++];
            } else {
                if (j == no) return std::nullopt;
                g.out.push_back(j);
                po *= ov[j++];
            }
        }
        gs.push_back(std::move(g));
    }
    return gs;
}

std::vector<UOp> SymbolicShapes::of(const UOp& node) const {
    if (auto it = dims.find(node); it != dims.end()) return it->second;
    std::vector<UOp> d;
    for (int64_t v : node.shape()) d.push_back(idx(v));
    return d;
}

UOp SymbolicShapes::bound(const UOp& expr) const {
    std::unordered_map<const UOpNode*, UOp> repl;
    for (const UOp& n : expr.toposort())
        if (n.op() == Op::DefineVar) {
            auto it = values.find(n.arg_as<VarArg>().name);
            if (it != values.end())
                repl.emplace(n.get(), UOp::make(Op::Bind, DType::Index, {n}, it->second));
        }
    return repl.empty() ? expr : expr.substitute(repl);
}

SymbolicShapes infer_symbolic_shapes(const std::vector<UOp>& topo) {
    SymbolicShapes out;
    for (const UOp& u : topo) {
        if (u.op() != Op::Bind) continue;
        const std::string& name = u.src(0).arg_as<VarArg>().name;
        const int64_t v = u.arg_as<int64_t>();
        auto [it, fresh] = out.values.emplace(name, v);
        if (!fresh && it->second != v)
            fail("realize", name + " is bound to " + std::to_string(it->second) + " and to " +
                                std::to_string(v) + " in one graph");
    }
    if (out.values.empty()) return out;
    out.dims = Inference(topo, out.values).run();
    return out;
}

} // namespace tempura
