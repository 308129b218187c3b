// Shapes as an IR fact: printing, element counts, and the shape table of the tensor-level graph
// (docs/KERNEL_IR.md section 1), applied when a node is built.
#include "tempura/ir/shape.hpp"

#include "tempura/error.hpp"
#include "tempura/ir/custom_grad.hpp"
#include "tempura/ir/uop.hpp"

namespace tempura {

std::string shape_str(const Shape& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

int64_t numel(const Shape& shape) {
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0) fail("shape", shape_str(shape) + " has a negative dimension");
        if (__builtin_mul_overflow(n, d, &n))
            fail("shape", shape_str(shape) + " has too many elements");
    }
    return n;
}

namespace {

int64_t checked_numel(const Shape& s, bool& ok) {
    int64_t n = 1;
    for (int64_t d : s)
        if (d < 0 || __builtin_mul_overflow(n, d, &n)) ok = false;
    return n;
}

} // namespace

std::optional<Shape> infer_shape(Op op, const std::vector<UOp>& srcs, const Arg& arg,
                                 std::string* why) {
    auto bad = [&](const std::string& what) -> std::optional<Shape> {
        if (why) *why = std::string(op_name(op)) + " " + what;
        return std::nullopt;
    };
    // A BUFFER's sources, when it has any, are its symbolic dims (Index expressions). Every
    // node of kernel and index arithmetic comes here with shapeless sources: no message is built
    // unless one is asked for.
    for (size_t i = 0; i < srcs.size() && op != Op::Buffer; ++i)
        if (!srcs[i].has_shape()) {
            if (why == nullptr) return std::nullopt;
            return bad("has source " + std::to_string(i) + " without a shape");
        }
    const auto src = [&](size_t i) -> const Shape& { return srcs[i].shape(); };
    const auto* ints = std::get_if<std::vector<int64_t>>(&arg);
    const bool movement = op == Op::Reshape || op == Op::Expand || op == Op::Permute ||
                          op == Op::Pad || op == Op::Shrink || op == Op::Flip || op == Op::Buffer;
    if (movement && !ints) return bad("needs a list of integers as its arg");

    switch (op) {
    case Op::Buffer: {
        const auto& a = *ints;
        if (a.size() != 2 || a[1] < 0) return bad("needs the arg {buffer_id, numel}");
        return Shape{a[1]};
    }
    case Op::Const: return Shape{};
    case Op::Reshape: {
        const auto& a = *ints;
        bool ok = true;
        const int64_t n_out = checked_numel(a, ok), n_in = checked_numel(src(0), ok);
        if (!ok || n_out != n_in)
            return bad("of " + shape_str(src(0)) + " into " + shape_str(a) +
                       " changes the number of elements");
        return a;
    }
    case Op::Expand: {
        const auto& a = *ints;
        const Shape& s = src(0);
        bool ok = a.size() == s.size();
        for (size_t i = 0; ok && i < a.size(); ++i) ok = a[i] == s[i] || (s[i] == 1 && a[i] >= 0);
        if (!ok) return bad("cannot expand " + shape_str(s) + " to " + shape_str(a));
        return a;
    }
    case Op::Permute: {
        const auto& a = *ints;
        const Shape& s = src(0);
        std::vector<bool> seen(s.size(), false);
        bool ok = a.size() == s.size();
        for (size_t i = 0; ok && i < a.size(); ++i) {
            ok = a[i] >= 0 && a[i] < static_cast<int64_t>(s.size()) && !seen[a[i]];
            if (ok) seen[a[i]] = true;
        }
        if (!ok) return bad(shape_str(a) + " is not a permutation of " + std::to_string(s.size()));
        Shape out(s.size());
        for (size_t i = 0; i < s.size(); ++i) out[i] = s[a[i]];
        return out;
    }
    case Op::Pad:
    case Op::Shrink: {
        const auto& a = *ints;
        const Shape& s = src(0);
        if (a.size() != 2 * s.size())
            return bad(shape_str(a) + " does not give two values per dim of " + shape_str(s));
        Shape out(s.size());
        for (size_t i = 0; i < s.size(); ++i) {
            const int64_t b = a[2 * i], e = a[2 * i + 1];
            if (op == Op::Pad) {
                if (b < 0 || e < 0) return bad(shape_str(a) + " has negative padding");
                out[i] = s[i] + b + e;
            } else {
                if (b < 0 || b > e || e > s[i])
                    return bad(shape_str(a) + " is out of range for " + shape_str(s));
                out[i] = e - b;
            }
        }
        return out;
    }
    case Op::Flip: {
        const auto& a = *ints;
        const Shape& s = src(0);
        bool ok = a.size() == s.size();
        for (size_t i = 0; ok && i < a.size(); ++i) ok = a[i] == 0 || a[i] == 1;
        if (!ok) return bad(shape_str(a) + " is not one 0/1 flag per dim of " + shape_str(s));
        return s;
    }
    case Op::ReduceAxis: {
        const auto* r = std::get_if<ReduceArg>(&arg);
        if (!r) return bad("needs a ReduceArg");
        if (r->op != Op::Add && r->op != Op::Mul && r->op != Op::Max)
            return bad("needs ADD, MUL or MAX as its combining op, got " +
                       std::string(op_name(r->op)));
        Shape out = src(0);
        int64_t last = -1;
        for (int64_t ax : r->axes) {
            if (ax <= last || ax >= static_cast<int64_t>(out.size()))
                return bad("axes " + shape_str(r->axes) + " are not sorted axes of " +
                           shape_str(src(0)));
            out[ax] = 1;
            last = ax;
        }
        return out;
    }
    case Op::Contiguous:
    case Op::Detach: return src(0);
    case Op::CustomGrad: {
        if (ints) { // a convolution's (its sources: the input and the weights), a window view's or
                    // a max pool's
            const int64_t kind = ints->empty() ? 0 : (*ints)[0];
            if (custom_grad_kind_name(kind) == nullptr) {
                std::string known;
                for (int64_t k = 1; custom_grad_kind_name(k) != nullptr; ++k)
                    known +=
                        (k > 1 ? ", " : "") + std::to_string(k) + " " + custom_grad_kind_name(k);
                return bad("arg " + shape_str(*ints) + " does not start with a known kind (" +
                           known + ")");
            }
            const int64_t n = ints->size() > 1 ? (*ints)[1] : -1;
            if (n < 1 || n > static_cast<int64_t>(ints->size()) ||
                static_cast<int64_t>(ints->size()) !=
                    custom_grad_arg_size(static_cast<CustomGradKind>(kind), n))
                return bad("arg " + shape_str(*ints) + " has the wrong length for its kind " +
                           std::to_string(kind) + " and " + std::to_string(n) + " dims");
            return src(0);
        }
        if (!std::holds_alternative<std::monostate>(arg))
            return bad("needs no arg or a list of integers starting with its kind");
        // The derivative d has x's shape; the value has x's rank, each dim x's or 1 (a reduce
        // over x's windows keeps its reduced dims), so that g expands to x.
        const Shape &v = src(0), &x = src(1);
        if (src(2) != x)
            return bad("derivative " + shape_str(src(2)) + " and source " + shape_str(x) +
                       " differ in shape");
        bool ok = v.size() == x.size();
        for (size_t i = 0; ok && i < v.size(); ++i) ok = v[i] == x[i] || v[i] == 1;
        if (!ok) return bad("value " + shape_str(v) + " does not expand to " + shape_str(x));
        return v;
    }
    case Op::Collective: {
        // all_gather stacks the ranks' tensors along dim 0, reduce_scatter gives each rank its
        // 1 / world of dim 0; the others keep the shape.
        if (!ints || ints->size() != 5 || (*ints)[0] < 0 || (*ints)[0] > 3 || (*ints)[3] < 1)
            return bad("needs the arg {kind, reduce, root, world, deterministic}");
        const int64_t kind = (*ints)[0], world = (*ints)[3];
        if (kind < 2) return src(0);
        if (src(0).empty()) return bad("needs a tensor of at least one dim, got a scalar");
        Shape out = src(0);
        if (kind == 2) {
            if (__builtin_mul_overflow(out[0], world, &out[0]))
                return bad("of " + shape_str(src(0)) + " has too many elements");
        } else {
            if (out[0] % world != 0)
                return bad("dim 0 of " + shape_str(src(0)) + " does not split into " +
                           std::to_string(world) + " equal parts");
            out[0] /= world;
        }
        return out;
    }
    case Op::Gather: {
        if (!ints || ints->size() != 1) return bad("needs the arg {axis}");
        const Shape &s = src(0), &i = src(1);
        const int64_t axis = (*ints)[0];
        if (i.size() != s.size())
            return bad("index " + shape_str(i) + " needs as many dims as the source " +
                       shape_str(s));
        if (axis < 0 || axis >= static_cast<int64_t>(s.size()))
            return bad("axis " + std::to_string(axis) + " is not a dim of " + shape_str(s));
        const DType it = srcs[1].dtype();
        if (it != DType::Int32 && it != DType::Int64)
            return bad("needs an int32 or int64 index, got " + it.name());
        for (size_t d = 0; d < s.size(); ++d)
            if (static_cast<int64_t>(d) != axis && i[d] > s[d])
                return bad("index " + shape_str(i) + " is larger than the source " + shape_str(s) +
                           " in dim " + std::to_string(d));
        return i;
    }
    case Op::ScatterAdd: {
        if (!ints || ints->size() != 1) return bad("needs the arg {axis}");
        const Shape &b = src(0), &i = src(1);
        const int64_t axis = (*ints)[0];
        if (i != src(2))
            return bad("index " + shape_str(i) + " and source " + shape_str(src(2)) +
                       " differ in shape");
        if (i.size() != b.size())
            return bad("index " + shape_str(i) + " needs as many dims as the base " + shape_str(b));
        if (axis < 0 || axis >= static_cast<int64_t>(b.size()))
            return bad("axis " + std::to_string(axis) + " is not a dim of " + shape_str(b));
        const DType it = srcs[1].dtype();
        if (it != DType::Int32 && it != DType::Int64)
            return bad("needs an int32 or int64 index, got " + it.name());
        if (srcs[2].dtype() != srcs[0].dtype())
            return bad("adds " + srcs[2].dtype().name() + " into " + srcs[0].dtype().name());
        for (size_t d = 0; d < b.size(); ++d)
            if (static_cast<int64_t>(d) != axis && i[d] > b[d])
                return bad("index " + shape_str(i) + " is larger than the base " + shape_str(b) +
                           " in dim " + std::to_string(d));
        return b;
    }
    default: break;
    }
    if (is_alu(op) && !srcs.empty()) {
        for (size_t i = 1; i < srcs.size(); ++i)
            if (src(i) != src(0))
                return bad("operands have different shapes: " + shape_str(src(0)) + " and " +
                           shape_str(src(i)));
        return src(0);
    }
    if (why == nullptr) return std::nullopt;
    return bad("is not a tensor-level op");
}

std::string why_no_shape(const UOp& u) {
    // The first node (sources first) that has no shape although its sources do.
    for (const UOp& n : u.toposort()) {
        if (n.has_shape()) continue;
        std::string why;
        (void)infer_shape(n.op(), n.srcs(), n.arg(), &why);
        if (why.find("without a shape") == std::string::npos) return why;
    }
    return u.has_shape() ? "" : std::string(op_name(u.op())) + " has no shape";
}

void throw_no_shape(const UOp& u) { fail("shape", why_no_shape(u)); }

} // namespace tempura
