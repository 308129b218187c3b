// tempura::onnx::Model: load (parse, check every node against the dispatch table, fold what is
// constant) and run (each node's table function over lazy Tensors; shape computations on the
// host).
#include <algorithm>
#include <cctype>
#include <set>
#include <unordered_map>

#include "onnx/graph.hpp"
#include "onnx/ops.hpp"
#include "tempura/error.hpp"
#include "tempura/onnx.hpp"
#include "tempura/tensor/shape.hpp"

namespace tempura::onnx {

using detail::Ctx;
using detail::Graph;
using detail::Node;
using detail::OpInfo;

namespace {

// A value of the graph while it runs. Small integer tensors that shape computations produce
// (Shape, Size, and what Gather/Concat/Slice/arithmetic make of them) are kept on the host: they
// are read again as sizes (Reshape, Expand, Slice), and computing them needs no kernel.
struct HostInts {
    Shape shape;
    std::vector<int64_t> v;
    DType dtype = DType::Int64;
};

struct Value {
    std::optional<Tensor> t;
    std::optional<HostInts> h;
    std::optional<std::vector<Tensor>> seq; // a sequence of tensors (the Sequence* ops)

    Tensor tensor() const {
        if (seq) throw Error("a sequence where a tensor is expected");
        if (t) return *t;
        if (h->dtype == DType::Bool) {
            std::vector<bool> b(h->v.begin(), h->v.end());
            return Tensor::from_vector(b, h->shape);
        }
        return Tensor::from_vector(h->v, h->shape, h->dtype);
    }
};

constexpr int64_t kHostMax = 64; // elements: larger integer tensors are data, not shapes

bool host_dtype(DType d) { return d == DType::Int64 || d == DType::Int32 || d == DType::Bool; }

std::optional<HostInts> host_of(const Tensor& t) {
    if (!t.is_realized() || !host_dtype(t.dtype()) || t.numel() > kHostMax) return std::nullopt;
    HostInts h;
    h.shape = t.shape();
    h.v = t.to_vector<int64_t>();
    h.dtype = t.dtype();
    return h;
}

int64_t count(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

// A node's name, or (unnamed) its first named output's.
std::string node_label(const Node& n) {
    if (!n.name.empty()) return n.name;
    for (const auto& o : n.outputs)
        if (!o.empty()) return o;
    return "?";
}

// Shape computations on the host: the ops a shape subgraph uses, on small integer tensors. Returns
// false when the node is not one of them (it then runs as tensors).
bool run_on_host(const Node& n, int64_t opset, const std::vector<const Value*>& in,
                 std::vector<Value>& out) {
    const std::string& op = n.op_type;
    if (!n.domain.empty()) return false;
    auto attr_i = [&](const char* name, int64_t def) {
        auto it = n.attrs.find(name);
        return it == n.attrs.end() ? def : it->second.i;
    };
    auto attr_ints = [&](const char* name) {
        auto it = n.attrs.find(name);
        return it == n.attrs.end() ? std::vector<int64_t>{} : it->second.ints;
    };
    if (op == "Shape" || op == "Size") {
        if (in.empty() || !in[0]) return false;
        const Shape s = in[0]->t ? in[0]->t->shape() : in[0]->h->shape;
        HostInts h;
        if (op == "Size") {
            h.v = {count(s)};
        } else {
            const auto r = static_cast<int64_t>(s.size());
            int64_t a = attr_i("start", 0), b = attr_i("end", r);
            a = std::clamp<int64_t>(a < 0 ? a + r : a, 0, r);
            b = std::clamp<int64_t>(b < 0 ? b + r : b, 0, r);
            h.v.assign(s.begin() + a, s.begin() + std::max(a, b));
            h.shape = {static_cast<int64_t>(h.v.size())};
        }
        out[0].h = h;
        return true;
    }
    for (const Value* v : in)
        if (v && !v->h) return false;
    auto H = [&](size_t k) -> const HostInts& { return *in.at(k)->h; };
    auto present = [&](size_t k) { return k < in.size() && in[k] != nullptr; };
    if (in.empty() || !present(0)) return false;
    HostInts r;
    r.dtype = H(0).dtype;
    if (op == "Identity") {
        r = H(0);
    } else if (op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Flatten") {
        // Only the shape changes: let the tensor path compute it, on a realized tensor of the
        // values (no kernel), and take the values back.
        return false;
    } else if (op == "Cast") {
        const auto dt = detail::dtype_of_onnx(static_cast<int>(attr_i("to", 1)));
        if (!dt || !host_dtype(*dt)) return false;
        r = H(0);
        r.dtype = *dt;
        if (*dt == DType::Bool)
            for (auto& x : r.v) x = x != 0;
        if (*dt == DType::Int32)
            for (auto& x : r.v) x = static_cast<int32_t>(x);
    } else if (op == "Gather") {
        const HostInts& d = H(0);
        if (!present(1) || d.shape.size() != 1) return false;
        if (std::clamp<int64_t>(attr_i("axis", 0), -1, 0) != attr_i("axis", 0)) return false;
        const HostInts& idx = H(1);
        r.shape = idx.shape;
        for (int64_t i : idx.v) {
            const int64_t j = i < 0 ? i + d.shape[0] : i;
            if (j < 0 || j >= d.shape[0])
                throw Error("[onnx] Gather: index " + std::to_string(i) + " is out of range for " +
                            std::to_string(d.shape[0]) + " values");
            r.v.push_back(d.v[static_cast<size_t>(j)]);
        }
    } else if (op == "Concat") {
        for (size_t k = 0; k < in.size(); ++k) {
            if (!present(k)) continue;
            if (H(k).shape.size() != 1 || H(k).dtype != r.dtype) return false;
            r.v.insert(r.v.end(), H(k).v.begin(), H(k).v.end());
        }
        r.shape = {static_cast<int64_t>(r.v.size())};
    } else if (op == "Slice") {
        const HostInts& d = H(0);
        if (d.shape.size() != 1) return false;
        std::vector<int64_t> starts, ends, steps{1};
        if (opset >= 10) {
            if (!present(1) || !present(2)) return false;
            starts = H(1).v;
            ends = H(2).v;
            if (present(3) && (H(3).v.size() != 1 || (H(3).v[0] != 0 && H(3).v[0] != -1)))
                return false;
            if (present(4)) steps = H(4).v;
        } else {
            starts = attr_ints("starts");
            ends = attr_ints("ends");
        }
        if (starts.size() != 1 || ends.size() != 1 || steps.size() != 1 || steps[0] == 0)
            return false;
        const int64_t n = d.shape[0];
        const auto [first, len] =
            slice_range(Slice{std::min(starts[0], n), std::min(ends[0], n), steps[0]}, n);
        for (int64_t k = 0; k < len; ++k)
            r.v.push_back(d.v[static_cast<size_t>(first + k * steps[0])]);
        r.shape = {len};
    } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal" ||
               op == "Less" || op == "Greater" || op == "Max" || op == "Min" || op == "Mod") {
        if (in.size() != 2 || !present(1) || H(0).dtype == DType::Bool) return false;
        const HostInts &a = H(0), &b = H(1);
        if (a.dtype != b.dtype) return false;
        const bool a1 = a.v.size() == 1, b1 = b.v.size() == 1;
        if (!(a.shape == b.shape || (b1 && b.shape.size() <= a.shape.size()) ||
              (a1 && a.shape.size() <= b.shape.size())))
            return false;
        r.shape = a.v.size() >= b.v.size() && a.shape.size() >= b.shape.size() ? a.shape : b.shape;
        const size_t m = std::max(a.v.size(), b.v.size());
        const bool cmp = op == "Equal" || op == "Less" || op == "Greater";
        r.dtype = cmp ? DType::Bool : a.dtype;
        for (size_t k = 0; k < m; ++k) {
            const int64_t x = a.v[a1 ? 0 : k], y = b.v[b1 ? 0 : k];
            int64_t z = 0;
            if (op == "Add")
                z = x + y;
            else if (op == "Sub")
                z = x - y;
            else if (op == "Mul")
                z = x * y;
            else if (op == "Div" || op == "Mod") {
                if (y == 0) return false;
                z = op == "Div" ? x / y : ((x % y) + y) % y;
                if (op == "Mod" && attr_i("fmod", 0) != 0) z = x % y;
            } else if (op == "Equal")
                z = x == y;
            else if (op == "Less")
                z = x < y;
            else if (op == "Greater")
                z = x > y;
            else if (op == "Max")
                z = std::max(x, y);
            else
                z = std::min(x, y);
            r.v.push_back(z);
        }
    } else {
        return false;
    }
    if (count(r.shape) != static_cast<int64_t>(r.v.size())) return false;
    out[0].h = std::move(r);
    return true;
}

// The sequence ops: values that are lists of tensors, handled here (they are not tensor ops).
// Returns false for any other op.
bool run_sequence(const Node& n, const std::vector<const Value*>& in, std::vector<Value>& out) {
    const std::string& op = n.op_type;
    auto attr_i = [&](const char* name, int64_t def) {
        auto it = n.attrs.find(name);
        return it == n.attrs.end() ? def : it->second.i;
    };
    auto present = [&](size_t k) { return k < in.size() && in[k] != nullptr; };
    auto seq_of = [&](size_t k) -> const std::vector<Tensor>& {
        if (!present(k) || !in[k]->seq)
            throw Error("input " + std::to_string(k) + " is not a sequence");
        return *in[k]->seq;
    };
    // A position in a sequence of n (negative counts from the end; `end` allows n).
    auto position = [&](size_t k, int64_t size, bool end, int64_t def) {
        int64_t p = present(k) ? in[k]->tensor().to_vector<int64_t>().at(0) : def;
        if (p < 0) p += size;
        if (p < 0 || p > size || (!end && p == size))
            throw Error("position " + std::to_string(p) + " is out of range for a sequence of " +
                        std::to_string(size));
        return p;
    };
    if (op == "SequenceEmpty") {
        out[0].seq.emplace();
    } else if (op == "SequenceConstruct") {
        std::vector<Tensor> v;
        for (size_t k = 0; k < in.size(); ++k)
            if (present(k)) v.push_back(in[k]->tensor());
        out[0].seq = std::move(v);
    } else if (op == "SequenceInsert") {
        std::vector<Tensor> v = seq_of(0);
        const auto size = static_cast<int64_t>(v.size());
        v.insert(v.begin() + position(2, size, true, size), in.at(1)->tensor());
        out[0].seq = std::move(v);
    } else if (op == "SequenceErase") {
        std::vector<Tensor> v = seq_of(0);
        const auto size = static_cast<int64_t>(v.size());
        v.erase(v.begin() + position(1, size, false, size - 1));
        out[0].seq = std::move(v);
    } else if (op == "SequenceAt") {
        const auto& v = seq_of(0);
        out[0].t = v[static_cast<size_t>(position(1, static_cast<int64_t>(v.size()), false, 0))];
    } else if (op == "SequenceLength") {
        HostInts h;
        h.v = {static_cast<int64_t>(seq_of(0).size())};
        out[0].h = h;
    } else if (op == "SplitToSequence") {
        const Tensor x = in.at(0)->tensor();
        const int64_t axis = normalize_axis("SplitToSequence", attr_i("axis", 0), x.ndim());
        const int64_t len = x.shape()[static_cast<size_t>(axis)];
        std::vector<int64_t> sizes;
        bool squeeze = false;
        if (!present(1)) {
            sizes.assign(static_cast<size_t>(len), 1);
            squeeze = attr_i("keepdims", 1) == 0;
        } else {
            const Tensor sp = in[1]->tensor();
            sizes = sp.to_vector<int64_t>();
            if (sp.ndim() == 0) { // pieces of that size, the last one shorter
                const int64_t each = sizes.at(0);
                sizes.clear();
                for (int64_t at = 0; at < len; at += each)
                    sizes.push_back(std::min(each, len - at));
            }
        }
        std::vector<Tensor> v;
        int64_t at = 0;
        for (int64_t size : sizes) {
            std::vector<Slice> sl(static_cast<size_t>(axis) + 1);
            sl[static_cast<size_t>(axis)] = Slice{at, at + size, 1};
            Tensor piece = x.slice(sl);
            v.push_back(squeeze ? piece.squeeze(axis) : piece);
            at += size;
        }
        if (at != len)
            throw Error("split sizes add up to " + std::to_string(at) + ", the axis has " +
                        std::to_string(len));
        out[0].seq = std::move(v);
    } else if (op == "ConcatFromSequence") {
        const auto& v = seq_of(0);
        if (v.empty()) throw Error("an empty sequence");
        const bool new_axis = attr_i("new_axis", 0) != 0;
        const int64_t axis = attr_i("axis", 0);
        out[0].t = new_axis ? Tensor::stack(v, axis < 0 ? axis + v[0].ndim() + 1 : axis)
                            : Tensor::cat(v, axis);
    } else {
        return false;
    }
    return true;
}

// Variables of symbolic dims: names made of letters, digits and '_' (they name kernels).
std::string var_name(const std::string& param) {
    std::string s;
    for (char c : param) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "d_" + s;
    return s;
}

} // namespace

struct Model::Impl {
    Graph g;
    std::string file; // as errors name it
    int64_t opset = 0;
    std::vector<std::string> inputs, outputs;
    std::map<std::string, Dim> vars;        // dim_param -> variable
    std::map<std::string, Value> constants; // initializers and folded nodes
    std::vector<size_t> live;               // nodes left to run
    std::vector<const OpInfo*> ops;         // per node
    std::map<std::string, size_t> uses;     // value -> how many nodes read it

    int64_t opset_of(const Node& n) const {
        auto it = g.opsets.find(n.domain);
        return it == g.opsets.end() ? opset : it->second;
    }

    // Runs node k over `get`'s values; returns its outputs.
    template <class Get>
    std::vector<Value> exec(size_t k, Get&& get) const {
        const Node& n = g.nodes[k];
        std::vector<const Value*> in;
        for (const auto& name : n.inputs) {
            if (name.empty()) {
                in.push_back(nullptr);
                continue;
            }
            const Value* v = get(name);
            if (!v)
                throw Error("[onnx] " + file + ": node '" + node_label(n) + "' (" + n.op_type +
                            ") reads '" + name + "', which no node, input or initializer gives");
            in.push_back(v);
        }
        std::vector<Value> out(n.outputs.size());
        const int64_t ver = opset_of(n);
        try {
            if (ops[k]->sequence) {
                run_sequence(n, in, out);
                return out;
            }
            if (ops[k]->gradient) {
                // d(sum of y)/d(x) for each input x, by Tempura's autograd over the lazy graph
                // that computed y from them.
                auto ya = n.attrs.find("y");
                const Value* y = ya == n.attrs.end() ? nullptr : get(ya->second.s);
                if (!y) throw Error("its y names no value");
                std::vector<Tensor> xs;
                for (const Value* v : in) xs.push_back(v->tensor());
                const std::vector<Tensor> g = gradients(y->tensor().sum(), xs);
                for (size_t j = 0; j < out.size() && j < g.size(); ++j) out[j].t = g[j];
                return out;
            }
            if (!out.empty() && run_on_host(n, ver, in, out)) return out;
            Ctx c{n, ver, {}, n.outputs.size(), {}};
            for (const Value* v : in)
                c.in.push_back(v ? std::optional<Tensor>(v->tensor()) : std::nullopt);
            for (const auto& o : n.outputs) c.out_used.push_back(!o.empty());
            std::vector<Tensor> r = ops[k]->fn(c);
            for (size_t j = 0; j < out.size(); ++j) {
                if (n.outputs[j].empty()) continue;
                if (j >= r.size()) throw Error("output " + std::to_string(j) + " is not supported");
                out[j].t = r[j];
                // A small integer result of realized inputs (a shape op's) stays on the host.
                if (r[j].is_realized()) out[j].h = host_of(r[j]);
            }
            // Shape-like results of Reshape/Unsqueeze/... over host values: realized views of
            // a realized buffer read back without a kernel only once realized; keep them as
            // host values when the inputs were.
            const bool all_host =
                std::all_of(in.begin(), in.end(), [](const Value* v) { return !v || v->h; });
            if (all_host && (n.op_type == "Unsqueeze" || n.op_type == "Squeeze" ||
                             n.op_type == "Reshape" || n.op_type == "Flatten"))
                for (size_t j = 0; j < out.size(); ++j)
                    if (out[j].t && !out[j].h && host_dtype(out[j].t->dtype()) &&
                        out[j].t->numel() <= kHostMax) {
                        HostInts h;
                        h.shape = out[j].t->shape();
                        h.v = in[0]->h->v;
                        h.dtype = in[0]->h->dtype;
                        out[j].h = std::move(h);
                        out[j].t.reset();
                    }
        } catch (const std::exception& e) {
            // Tempura's errors, and any other a malformed node provokes (an attribute list too
            // short, ...), come out as one tempura::Error that names the node.
            std::string what = e.what();
            if (what.rfind("[onnx] " + file + ":", 0) == 0) throw;
            throw Error("[onnx] " + file + ": node '" + node_label(n) + "' (" + n.op_type +
                        ", opset " + std::to_string(ver) + "): " + what);
        }
        return out;
    }
};

Model Model::load(const std::string& path) {
    auto impl = std::make_shared<Impl>();
    impl->g = detail::parse_model(path);
    Impl& m = *impl;
    const Graph& g = m.g;
    m.file = path;
    m.opset = g.opsets.count("") ? g.opsets.at("") : 1;

    // Every node the table cannot run, named at once.
    std::vector<std::string> refused;
    m.ops.resize(g.nodes.size(), nullptr);
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        const Node& n = g.nodes[k];
        const int64_t ver = m.opset_of(n);
        const OpInfo* info = detail::find_op(n.domain, n.op_type);
        std::string why;
        if (info && info->refuse) why = info->refuse(n, ver);
        if (info && why.empty()) {
            for (const auto& [name, a] : n.attrs)
                if (a.kind == detail::Attr::Kind::Graph)
                    why = "a subgraph attribute '" + name + "'";
        }
        const std::string head = "node '" + node_label(n) + "' (" +
                                 (n.domain.empty() ? "" : n.domain + ".") + n.op_type + ", opset " +
                                 std::to_string(ver) + ") is not supported";
        if (!info)
            refused.push_back(head);
        else if (!why.empty())
            refused.push_back(head + ": " + why);
        m.ops[k] = info;
    }
    std::set<std::string> init_names;
    for (const auto& [name, t] : g.initializers) init_names.insert(name);
    for (const auto& [name, why] : g.bad_initializers) {
        refused.push_back(why);
        init_names.insert(name);
    }
    for (const auto& v : g.inputs) {
        if (init_names.count(v.name)) continue;
        if (!v.is_tensor)
            refused.push_back("input '" + v.name +
                              "' is not a tensor (a sequence, map or optional)");
        else if (!detail::dtype_of_onnx(v.elem_type))
            refused.push_back("input '" + v.name + "' has element type " +
                              detail::onnx_type_name(v.elem_type));
        m.inputs.push_back(v.name);
    }
    for (const auto& v : g.outputs) {
        if (!v.is_tensor)
            refused.push_back("output '" + v.name +
                              "' is not a tensor (a sequence, map or optional)");
        else if (v.elem_type != 0 && !detail::dtype_of_onnx(v.elem_type))
            refused.push_back("output '" + v.name + "' has element type " +
                              detail::onnx_type_name(v.elem_type));
        m.outputs.push_back(v.name);
    }
    if (!refused.empty()) {
        std::string msg = "[onnx] " + path + ": " + refused[0];
        for (size_t k = 1; k < refused.size(); ++k) msg += "; " + refused[k];
        throw Error(msg);
    }

    // Symbolic dims: one variable per dim_param name.
    for (const auto& v : g.inputs) {
        if (init_names.count(v.name)) continue;
        for (const auto& p : v.params)
            if (!p.empty() && !m.vars.count(p))
                m.vars.emplace(p, Dim::variable(var_name(p), 1, int64_t{1} << 20));
    }

    // Constants: initializers, then every node whose inputs are all constants (Constant nodes,
    // shape arithmetic on initializers, weights transposed or cast at load...), evaluated once.
    for (const auto& [name, t] : g.initializers) {
        Value v;
        v.t = t;
        v.h = host_of(t);
        m.constants.emplace(name, std::move(v));
    }
    std::set<std::string> graph_inputs(m.inputs.begin(), m.inputs.end());
    for (const auto& name : m.inputs) m.constants.erase(name); // an input overrides its default
    auto constant = [&](const std::string& name) -> const Value* {
        auto it = m.constants.find(name);
        return it == m.constants.end() ? nullptr : &it->second;
    };
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        const Node& n = g.nodes[k];
        bool all = !m.ops[k]->random;
        for (const auto& name : n.inputs)
            if (!name.empty() && !constant(name)) all = false;
        if (!all) {
            m.live.push_back(k);
            continue;
        }
        std::vector<Value> out;
        try {
            out = m.exec(k, constant);
            for (auto& v : out)
                if (v.t && !v.t->is_realized()) v.t->realize();
        } catch (const Error&) {
            // Not foldable here (the node fails, or needs what it is given at run): run it then,
            // where its error names the node.
            m.live.push_back(k);
            continue;
        }
        for (size_t j = 0; j < out.size(); ++j)
            if (!n.outputs[j].empty()) {
                if (out[j].t) out[j].h = out[j].h ? out[j].h : host_of(*out[j].t);
                m.constants[n.outputs[j]] = out[j];
            }
    }
    Model model;
    model.impl_ = std::move(impl);
    return model;
}

std::vector<std::string> Model::input_names() const { return impl_->inputs; }
std::vector<std::string> Model::output_names() const { return impl_->outputs; }
int64_t Model::opset() const { return impl_->opset; }

std::vector<int64_t> Model::input_shape(const std::string& name) const {
    for (const auto& v : impl_->g.inputs)
        if (v.name == name) return v.dims;
    throw Error("[onnx] " + impl_->file + ": '" + name + "' is not an input of the model");
}

namespace {

template <class T>
Tensor rebuild(const Tensor& t, const Dims& dims) {
    return Tensor::from_vector(t.to_vector<T>(), dims, t.dtype());
}

// The same values with the dims' variables bound: one plan serves every size of them.
Tensor with_dims(const Tensor& t, const Dims& dims) {
    const DType d = t.dtype();
    if (d.is_float())
        return d == DType::Float64 ? rebuild<double>(t, dims) : rebuild<float>(t, dims);
    if (d == DType::Bool) return rebuild<bool>(t, dims);
    if (d == DType::UInt64) return rebuild<uint64_t>(t, dims);
    return rebuild<int64_t>(t, dims);
}

} // namespace

std::map<std::string, Tensor> Model::run(const std::map<std::string, Tensor>& inputs,
                                         std::source_location loc) const {
    const UserCall site(loc);
    const Impl& m = *impl_;
    const std::string& f = m.file;
    std::unordered_map<std::string, Value> env;
    for (const auto& [name, t] : inputs)
        if (std::find(m.inputs.begin(), m.inputs.end(), name) == m.inputs.end()) {
            std::string names;
            for (const auto& n : m.inputs) names += (names.empty() ? "" : ", ") + n;
            throw Error("[onnx] " + f + ": '" + name +
                        "' is not an input of the model (its inputs: " + names + ")");
        }
    std::map<std::string, int64_t> bound;
    for (const auto& info : m.g.inputs) {
        if (std::find(m.inputs.begin(), m.inputs.end(), info.name) == m.inputs.end()) continue;
        auto it = inputs.find(info.name);
        if (it == inputs.end()) {
            auto init = m.g.initializers.find(info.name);
            if (init == m.g.initializers.end())
                throw Error("[onnx] " + f + ": input '" + info.name + "' is missing");
            Value v;
            v.t = init->second;
            v.h = host_of(init->second);
            env[info.name] = std::move(v);
            continue;
        }
        Tensor t = it->second;
        const auto want = detail::dtype_of_onnx(info.elem_type);
        if (want && t.dtype() != *want)
            throw Error("[onnx] " + f + ": input '" + info.name + "' has dtype " +
                        t.dtype().name() + ", the model declares " +
                        detail::onnx_type_name(info.elem_type));
        Dims dims;
        bool symbolic = false;
        const bool has_param = std::any_of(info.params.begin(), info.params.end(),
                                           [](const std::string& p) { return !p.empty(); });
        // A declared shape is checked when the rank agrees; another rank is accepted unless the
        // input has named dims to bind (ONNX's own test data feeds CastLike's `like` a [1] for a
        // declared 2-D input).
        if (info.has_shape && (has_param || static_cast<size_t>(t.ndim()) == info.dims.size())) {
            if (static_cast<size_t>(t.ndim()) != info.dims.size())
                throw Error("[onnx] " + f + ": input '" + info.name + "' has shape " +
                            shape_str(t.shape()) + ", the model declares " +
                            std::to_string(info.dims.size()) + " dims");
            for (size_t k = 0; k < info.dims.size(); ++k) {
                const int64_t n = t.shape()[k];
                if (info.dims[k] >= 0 && info.dims[k] != n)
                    throw Error("[onnx] " + f + ": input '" + info.name + "' has shape " +
                                shape_str(t.shape()) + ", the model declares dim " +
                                std::to_string(k) + " = " + std::to_string(info.dims[k]));
                const std::string& p = info.params[k];
                if (!p.empty() && n >= 1) {
                    auto b = bound.emplace(p, n);
                    if (!b.second && b.first->second != n)
                        throw Error("[onnx] " + f + ": " + p + " is " +
                                    std::to_string(b.first->second) + " in one input and " +
                                    std::to_string(n) + " in '" + info.name + "'");
                    dims.push_back(m.vars.at(p).bind(n));
                    symbolic = true;
                } else {
                    dims.push_back(n);
                }
            }
        }
        Value v;
        v.t = symbolic ? with_dims(t, dims) : t;
        v.h = host_of(*v.t);
        env[info.name] = std::move(v);
    }
    auto get = [&](const std::string& name) -> const Value* {
        auto it = env.find(name);
        if (it != env.end()) return &it->second;
        auto c = m.constants.find(name);
        return c == m.constants.end() ? nullptr : &c->second;
    };
    for (size_t k : m.live) {
        std::vector<Value> out = m.exec(k, get);
        const Node& n = m.g.nodes[k];
        for (size_t j = 0; j < out.size(); ++j)
            if (!n.outputs[j].empty()) env[n.outputs[j]] = std::move(out[j]);
    }
    std::map<std::string, Tensor> result;
    for (const auto& name : m.outputs) {
        const Value* v = get(name);
        if (!v) throw Error("[onnx] " + f + ": output '" + name + "' is computed by no node");
        result.emplace(name, v->tensor());
    }
    return result;
}

} // namespace tempura::onnx
