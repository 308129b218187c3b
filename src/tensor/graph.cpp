// tensor_shape(): the contract's shape table (docs/KERNEL_IR.md section 1) applied to a graph.
#include "tempura/tensor/graph.hpp"

#include <string>
#include <unordered_map>

#include "tempura/error.hpp"

namespace tempura {

namespace {

[[noreturn]] void bad(const UOp& node, const std::string& what) {
    fail("tensor_shape", std::string(op_name(node.op())) + " " + what);
}

const std::vector<int64_t>& ints_arg(const UOp& node) {
    const auto* v = std::get_if<std::vector<int64_t>>(&node.arg());
    if (!v) bad(node, "needs a list of integers as its arg");
    return *v;
}

} // namespace

Shape node_shape(const UOp& node, const std::vector<const Shape*>& src_shapes) {
    const Op op = node.op();
    if (src_shapes.size() != node.srcs().size()) bad(node, "given the wrong number of shapes");
    const auto src = [&](size_t i) -> const Shape& { return *src_shapes[i]; };

    switch (op) {
    case Op::Buffer: {
        const auto& a = ints_arg(node);
        if (a.size() != 2 || a[1] < 0) bad(node, "needs the arg {buffer_id, numel}");
        return Shape{a[1]};
    }
    case Op::Const: return Shape{};
    case Op::Reshape: {
        const auto& a = ints_arg(node);
        if (numel(a) != numel(src(0)))
            bad(node, "of " + shape_str(src(0)) + " into " + shape_str(a) +
                          " changes the number of elements");
        return a;
    }
    case Op::Expand: {
        const auto& a = ints_arg(node);
        const Shape& s = src(0);
        bool ok = a.size() == s.size();
        for (size_t i = 0; ok && i < a.size(); ++i) ok = a[i] == s[i] || (s[i] == 1 && a[i] >= 0);
        if (!ok) bad(node, "cannot expand " + shape_str(s) + " to " + shape_str(a));
        return a;
    }
    case Op::Permute: {
        const auto& a = ints_arg(node);
        const Shape& s = src(0);
        std::vector<bool> seen(s.size(), false);
        bool ok = a.size() == s.size();
        for (size_t i = 0; ok && i < a.size(); ++i) {
            ok = a[i] >= 0 && a[i] < static_cast<int64_t>(s.size()) && !seen[a[i]];
            if (ok) seen[a[i]] = true;
        }
        if (!ok) bad(node, shape_str(a) + " is not a permutation of " + std::to_string(s.size()));
        Shape out(s.size());
        for (size_t i = 0; i < s.size(); ++i) out[i] = s[a[i]];
        return out;
    }
    case Op::Pad:
    case Op::Shrink: {
        const auto& a = ints_arg(node);
        const Shape& s = src(0);
        if (a.size() != 2 * s.size())
            bad(node, shape_str(a) + " does not give two values per dim of " + shape_str(s));
        Shape out(s.size());
        for (size_t i = 0; i < s.size(); ++i) {
            const int64_t b = a[2 * i], e = a[2 * i + 1];
            if (op == Op::Pad) {
                if (b < 0 || e < 0) bad(node, shape_str(a) + " has negative padding");
                out[i] = s[i] + b + e;
            } else {
                if (b < 0 || b > e || e > s[i])
                    bad(node, shape_str(a) + " is out of range for " + shape_str(s));
                out[i] = e - b;
            }
        }
        return out;
    }
    case Op::Flip: {
        const auto& a = ints_arg(node);
        const Shape& s = src(0);
        bool ok = a.size() == s.size();
        for (size_t i = 0; ok && i < a.size(); ++i) ok = a[i] == 0 || a[i] == 1;
        if (!ok) bad(node, shape_str(a) + " is not one 0/1 flag per dim of " + shape_str(s));
        return s;
    }
    case Op::ReduceAxis: {
        const auto* r = std::get_if<ReduceArg>(&node.arg());
        if (!r) bad(node, "needs a ReduceArg");
        Shape out = src(0);
        int64_t last = -1;
        for (int64_t ax : r->axes) {
            if (ax <= last || ax >= static_cast<int64_t>(out.size()))
                bad(node,
                    "axes " + shape_str(r->axes) + " are not sorted axes of " + shape_str(src(0)));
            out[ax] = 1;
            last = ax;
        }
        return out;
    }
    case Op::Contiguous:
    case Op::ContiguousBackward:
    case Op::Detach: return src(0);
    default: break;
    }
    if (is_alu(op)) {
        for (size_t i = 1; i < src_shapes.size(); ++i)
            if (src(i) != src(0))
                bad(node, "operands have different shapes: " + shape_str(src(0)) + " and " +
                              shape_str(src(i)));
        return src(0);
    }
    bad(node, "is not a tensor-level op");
}

Shape tensor_shape(const UOp& root) {
    if (root.is_null()) fail("tensor_shape", "null UOp");
    // Memoized per call; nodes in toposort order, so every source's shape is known first.
    std::unordered_map<const UOpNode*, Shape> shapes;
    std::vector<const Shape*> srcs;
    for (const UOp& u : root.toposort()) {
        srcs.clear();
        for (const UOp& s : u.srcs()) srcs.push_back(&shapes.at(s.get()));
        Shape sh = node_shape(u, srcs);
        shapes.emplace(u.get(), std::move(sh));
    }
    return shapes.at(root.get());
}

} // namespace tempura
