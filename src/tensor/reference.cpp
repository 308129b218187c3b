// The reference interpreter of the tensor-level graph: dense host arrays, one per node.
#include "tempura/tensor/reference.hpp"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "convert.hpp"
#include "tempura/error.hpp"
#include "tempura/ir/scalar.hpp"
#include "tempura/runtime/buffer.hpp"
#include "tempura/tensor/graph.hpp"

namespace tempura {

int64_t ReferenceArray::size() const {
    return static_cast<int64_t>(dtype.is_float() ? floats.size() : ints.size());
}

double ReferenceArray::at(int64_t i) const {
    if (dtype.is_float()) return floats[i];
    if (dtype.scalar == Scalar::UInt64) return static_cast<double>(static_cast<uint64_t>(ints[i]));
    return static_cast<double>(ints[i]);
}

std::vector<double> ReferenceArray::as_doubles() const {
    std::vector<double> out(static_cast<size_t>(size()));
    for (int64_t i = 0; i < size(); ++i) out[i] = at(i);
    return out;
}

namespace {

using Arr = ReferenceArray;

[[noreturn]] void bad(const UOp& u, const std::string& what) {
    fail("reference", std::string(op_name(u.op())) + " " + what);
}

Arr make_arr(DType dt, Shape shape) {
    Arr a{dt, std::move(shape), {}, {}};
    const auto n = static_cast<size_t>(numel(a.shape));
    if (dt.is_float())
        a.floats.assign(n, 0.0);
    else
        a.ints.assign(n, 0);
    return a;
}

int64_t wrap(DType dt, int64_t v) { return wrap_to(dt, v); }
int64_t wrap_u(DType dt, uint64_t v) { return wrap_to(dt, static_cast<int64_t>(v)); }

Shape strides_of(const Shape& s) {
    Shape st(s.size(), 1);
    for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
    return st;
}

// out[i] = in[map(index of i)] for every element of out_shape; map returns -1 for "reads 0".
template <class F>
Arr remap(const Arr& in, const Shape& out_shape, F&& map) {
    Arr out = make_arr(in.dtype, out_shape);
    const int64_t n = numel(out_shape);
    std::vector<int64_t> idx(out_shape.size(), 0);
    for (int64_t i = 0; i < n; ++i) {
        const int64_t j = map(idx);
        if (j >= 0) {
            if (in.dtype.is_float())
                out.floats[i] = in.floats[j];
            else
                out.ints[i] = in.ints[j];
        }
        for (size_t d = idx.size(); d-- > 0;) { // odometer increment
            if (++idx[d] < out_shape[d]) break;
            idx[d] = 0;
        }
    }
    return out;
}

// Float ops compute in double with the one definition of their scalar semantics
// (exec_float_alu, tempura/ir/scalar.hpp); the caller rounds to the node's dtype.
double float_binary(const UOp& u, Op op, double a, double b) {
    const double v[2] = {a, b};
    if (auto r = exec_float_alu(op, DType::Float64, v, 2)) return *r;
    bad(u, "is not defined on floats");
}

int64_t int_binary(const UOp& u, Op op, DType dt, int64_t a, int64_t b) {
    const bool uns = dt.is_unsigned();
    const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    switch (op) {
    case Op::Add: return wrap_u(dt, ua + ub);
    case Op::Sub: return wrap_u(dt, ua - ub);
    case Op::Mul: return wrap_u(dt, ua * ub);
    case Op::Idiv:
        if (b == 0) return 0;
        if (uns) return wrap_u(dt, ua / ub);
        if (a == std::numeric_limits<int64_t>::min() && b == -1) return wrap(dt, a);
        return wrap(dt, a / b);
    case Op::Mod:
        if (b == 0) return 0;
        if (uns) return wrap_u(dt, ua % ub);
        if (b == -1) return 0;
        return wrap(dt, a % b);
    case Op::Max: return uns ? (ua < ub ? b : a) : (a < b ? b : a);
    case Op::Shl:
    case Op::Shr: { // the one definition (tempura/ir/scalar.hpp)
        const int64_t v[2] = {a, b};
        return *exec_int_alu(op, dt, v, 2);
    }
    case Op::And: return wrap(dt, a & b);
    case Op::Or: return wrap(dt, a | b);
    case Op::Xor: return wrap(dt, a ^ b);
    case Op::CmpLt: return uns ? ua < ub : a < b;
    case Op::CmpNe: return a != b;
    case Op::CmpEq: return a == b;
    case Op::Pow: {
        const int64_t v[2] = {a, b};
        return *exec_int_alu(op, dt, v, 2); // the one definition (tempura/ir/scalar.hpp)
    }
    default: bad(u, "is not defined on integers");
    }
}

double float_unary(const UOp& u, Op op, double x) {
    if (auto r = exec_float_alu(op, DType::Float64, &x, 1)) return *r;
    bad(u, "is not defined on floats");
}

int64_t int_unary(const UOp& u, Op op, DType dt, int64_t x) {
    switch (op) {
    case Op::Neg: return wrap_u(dt, 0 - static_cast<uint64_t>(x));
    case Op::Not: return dt.is_bool() ? !x : wrap(dt, ~x);
    case Op::Trunc: return x;
    case Op::Recip: return x == 1 ? 1 : x == -1 && !dt.is_unsigned() ? wrap(dt, -1) : 0;
    default: bad(u, "is not defined on integers");
    }
}

Arr eval_cast(const Arr& in, DType to) {
    Arr out = make_arr(to, in.shape);
    const int64_t n = in.size();
    for (int64_t i = 0; i < n; ++i) {
        if (to.is_float())
            out.floats[i] = detail::round_float(to, in.at(i));
        else if (to.is_bool())
            out.ints[i] = in.at(i) != 0.0 || (!in.dtype.is_float() && in.ints[i] != 0);
        else if (in.dtype.is_float())
            out.ints[i] = wrap(to, detail::float_to_int(to, in.floats[i]));
        else
            out.ints[i] = wrap(to, in.ints[i]);
    }
    return out;
}

Arr eval_alu(const UOp& u, const std::vector<const Arr*>& s, const Shape& shape) {
    const Op op = u.op();
    const DType dt = u.dtype();
    if (op == Op::Cast) return eval_cast(*s[0], dt);
    Arr out = make_arr(dt, shape);
    const int64_t n = numel(shape);
    if (op == Op::Where) {
        for (int64_t i = 0; i < n; ++i) {
            const Arr& pick = s[0]->ints[i] ? *s[1] : *s[2];
            if (dt.is_float())
                out.floats[i] = pick.floats[i];
            else
                out.ints[i] = pick.ints[i];
        }
        return out;
    }
    const DType in = s[0]->dtype;
    const auto set = [&](int64_t i, double f, int64_t v, bool from_float) {
        if (dt.is_float())
            out.floats[i] = detail::round_float(dt, from_float ? f : double(v));
        else
            out.ints[i] = from_float ? static_cast<int64_t>(f) : wrap(dt, v);
    };
    for (int64_t i = 0; i < n; ++i) {
        if (op == Op::MulAcc) {
            if (in.is_float())
                set(i, s[0]->floats[i] * s[1]->floats[i] + s[2]->floats[i], 0, true);
            else
                set(i, 0,
                    int_binary(u, Op::Add, dt,
                               int_binary(u, Op::Mul, dt, s[0]->ints[i], s[1]->ints[i]),
                               s[2]->ints[i]),
                    false);
        } else if (s.size() == 1) {
            if (in.is_float())
                set(i, float_unary(u, op, s[0]->floats[i]), 0, true);
            else
                set(i, 0, int_unary(u, op, dt, s[0]->ints[i]), false);
        } else {
            if (in.is_float())
                set(i, float_binary(u, op, s[0]->floats[i], s[1]->floats[i]), 0, true);
            else
                set(i, 0, int_binary(u, op, in, s[0]->ints[i], s[1]->ints[i]), false);
        }
    }
    return out;
}

Arr eval_reduce(const UOp& u, const Arr& in, const Shape& out_shape) {
    const auto& r = u.arg_as<ReduceArg>();
    const DType dt = u.dtype();
    Arr out = make_arr(dt, out_shape);
    const int64_t n_out = numel(out_shape);
    // Identity of the combining op.
    if (r.op == Op::Add) {
    } else if (r.op == Op::Mul) {
        for (int64_t i = 0; i < n_out; ++i) {
            if (dt.is_float())
                out.floats[i] = 1.0;
            else
                out.ints[i] = 1;
        }
    } else if (r.op == Op::Max) {
        for (int64_t i = 0; i < n_out; ++i) {
            if (dt.is_float())
                out.floats[i] = -INFINITY;
            else
                out.ints[i] = dt.min();
        }
    } else {
        bad(u, "with combining op " + std::string(op_name(r.op)) + " is not supported");
    }
    const Shape out_strides = strides_of(out_shape);
    const Shape& in_shape = in.shape;
    std::vector<int64_t> idx(in_shape.size(), 0);
    const int64_t n = numel(in_shape);
    for (int64_t i = 0; i < n; ++i) {
        int64_t o = 0;
        for (size_t d = 0; d < idx.size(); ++d)
            o += (out_shape[d] == 1 ? 0 : idx[d]) * out_strides[d];
        if (dt.is_float())
            out.floats[o] =
                detail::round_float(dt, float_binary(u, r.op, out.floats[o], in.floats[i]));
        else
            out.ints[o] = int_binary(u, r.op, dt, out.ints[o], in.ints[i]);
        for (size_t d = idx.size(); d-- > 0;) {
            if (++idx[d] < in_shape[d]) break;
            idx[d] = 0;
        }
    }
    return out;
}

Arr eval_buffer(const UOp& u) {
    const auto& a = u.arg_as<std::vector<int64_t>>();
    auto b = runtime::lookup_buffer(a[0]);
    if (b->numel() != a[1] || b->dtype() != u.dtype())
        bad(u, "refers to buffer " + std::to_string(a[0]) + " of " + b->dtype().name() + " [" +
                   std::to_string(b->numel()) + "]");
    Arr out = make_arr(u.dtype(), Shape{a[1]});
    std::vector<unsigned char> staging; // a device's memory is read through a copy
    const void* p = runtime::host_bytes(*b, staging);
    for (int64_t i = 0; i < a[1]; ++i) {
        if (u.dtype().is_float())
            out.floats[i] = detail::load_float(u.dtype(), p, i);
        else
            out.ints[i] = detail::load_int(u.dtype(), p, i);
    }
    return out;
}

Arr eval_const(const UOp& u) {
    const DType dt = u.dtype();
    Arr out = make_arr(dt, Shape{});
    double f = 0;
    int64_t v = 0;
    bool is_f = false;
    if (auto* d = std::get_if<double>(&u.arg()))
        f = *d, is_f = true;
    else if (auto* i = std::get_if<int64_t>(&u.arg()))
        v = *i;
    else if (auto* b = std::get_if<bool>(&u.arg()))
        v = *b;
    else
        bad(u, "has no value");
    if (dt.is_float())
        out.floats[0] = detail::round_float(dt, is_f ? f : static_cast<double>(v));
    else
        out.ints[0] = wrap(dt, is_f ? detail::float_to_int(dt, f) : v);
    return out;
}

Arr eval_node(const UOp& u, const std::vector<const Arr*>& s, const Shape& shape) {
    const Op op = u.op();
    switch (op) {
    case Op::Buffer: return eval_buffer(u);
    case Op::Const: return eval_const(u);
    case Op::Reshape: {
        Arr out = *s[0];
        out.shape = shape;
        return out;
    }
    case Op::Contiguous:
    case Op::CustomGrad:
    case Op::Detach: return *s[0];
    case Op::Expand:
    case Op::Permute:
    case Op::Pad:
    case Op::Shrink:
    case Op::Flip: {
        const Arr& in = *s[0];
        const Shape st = strides_of(in.shape);
        const auto& arg = u.arg_as<std::vector<int64_t>>();
        const size_t nd = in.shape.size();
        return remap(in, shape, [&](const std::vector<int64_t>& o) -> int64_t {
            int64_t j = 0;
            for (size_t d = 0; d < nd; ++d) {
                int64_t k = 0;
                switch (op) {
                case Op::Expand: k = in.shape[d] == 1 ? 0 : o[d]; break;
                case Op::Permute:
                    k = o[std::find(arg.begin(), arg.end(), static_cast<int64_t>(d)) - arg.begin()];
                    break;
                case Op::Pad:
                    k = o[d] - arg[2 * d];
                    if (k < 0 || k >= in.shape[d]) return -1;
                    break;
                case Op::Shrink: k = o[d] + arg[2 * d]; break;
                default: k = arg[d] ? in.shape[d] - 1 - o[d] : o[d]; break;
                }
                j += k * st[d];
            }
            return j;
        });
    }
    case Op::ReduceAxis: return eval_reduce(u, *s[0], shape);
    case Op::Gather: {
        const Arr &in = *s[0], &index = *s[1];
        const auto axis = static_cast<size_t>(u.arg_as<std::vector<int64_t>>()[0]);
        const Shape st = strides_of(in.shape), ist = strides_of(index.shape);
        return remap(in, shape, [&](const std::vector<int64_t>& o) -> int64_t {
            int64_t at = 0, j = 0;
            for (size_t d = 0; d < o.size(); ++d) at += o[d] * ist[d];
            const int64_t k = index.ints[static_cast<size_t>(at)];
            if (k < 0 || k >= in.shape[axis]) return -1; // reads 0
            for (size_t d = 0; d < o.size(); ++d) j += (d == axis ? k : o[d]) * st[d];
            return j;
        });
    }
    case Op::ScatterAdd: {
        // In the order of the index's elements, as the kernel adds them (float sums agree).
        Arr out = *s[0];
        const Arr &index = *s[1], &src = *s[2];
        const auto axis = static_cast<size_t>(u.arg_as<std::vector<int64_t>>()[0]);
        const Shape st = strides_of(out.shape);
        std::vector<int64_t> k(index.shape.size(), 0);
        for (int64_t e = 0; e < index.size(); ++e) {
            const int64_t j = index.ints[static_cast<size_t>(e)];
            if (j >= 0 && j < out.shape[axis]) {
                int64_t at = 0;
                for (size_t d = 0; d < k.size(); ++d) at += (d == axis ? j : k[d]) * st[d];
                if (out.dtype.is_float())
                    out.floats[at] = detail::round_float(out.dtype, out.floats[at] + src.floats[e]);
                else
                    out.ints[at] = int_binary(u, Op::Add, out.dtype, out.ints[at], src.ints[e]);
            }
            for (size_t d = k.size(); d-- > 0;) { // odometer increment
                if (++k[d] < index.shape[d]) break;
                k[d] = 0;
            }
        }
        return out;
    }
    default: break;
    }
    if (is_alu(op)) return eval_alu(u, s, shape);
    bad(u, "is not a tensor-level op");
}

} // namespace

ReferenceArray reference_eval_array(const UOp& root) {
    if (root.is_null()) fail("reference", "null UOp");
    const std::vector<UOp> order = root.toposort();
    // Users left per node, so intermediate arrays are freed once consumed.
    std::unordered_map<const UOpNode*, int64_t> users;
    for (const UOp& u : order) {
        for (const UOp& s : u.srcs()) ++users[s.get()];
        // EXP2(y * (1/ln 2)) is e^y (exp_operand, tempura/ir/scalar.hpp): it reads y.
        if (const UOp y = exp_operand(u); !y.is_null()) ++users[y.get()];
    }
    std::unordered_map<const UOpNode*, Arr> values;
    std::vector<const Arr*> srcs;
    const auto consumed = [&](const UOp& s) {
        if (--users[s.get()] == 0) values.erase(s.get());
    };
    for (const UOp& u : order) {
        // A BUFFER's symbolic dims (Index expressions, no shape) are not values.
        if (!u.has_shape() && u.dtype() == DType::Index && !u.same(root)) continue;
        srcs.clear();
        if (u.op() != Op::Buffer)
            for (const UOp& s : u.srcs()) srcs.push_back(&values.at(s.get()));
        const Shape shape = tensor_shape(u);
        Arr v;
        if (const UOp y = exp_operand(u); !y.is_null()) {
            const Arr& in = values.at(y.get());
            v = make_arr(u.dtype(), shape);
            for (int64_t i = 0; i < in.size(); ++i)
                v.floats[i] = detail::round_float(u.dtype(), std::exp(in.floats[i]));
            consumed(y);
        } else {
            v = eval_node(u, srcs, shape);
        }
        if (u.op() != Op::Buffer)
            for (const UOp& s : u.srcs()) consumed(s);
        values.emplace(u.get(), std::move(v));
    }
    return std::move(values.at(root.get()));
}

std::vector<double> reference_eval(const UOp& root) {
    return reference_eval_array(root).as_doubles();
}

} // namespace tempura
