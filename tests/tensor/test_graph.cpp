// The tensor-level graphs that Tensor ops build (docs/KERNEL_IR.md section 1), and
// runtime::Buffer with its registry (lifetime of the buffers lazy tensors read).
#include <doctest/doctest.h>

#include "../error_at.hpp"
#include "../support.hpp"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <thread>
#include <vector>

#include <tempura/tempura.hpp>
#include <tempura/tensor/graph.hpp>
#include <tempura/tensor/reference.hpp>

namespace {

using tempura::DType;
using tempura::Op;
using tempura::ReduceArg;
using tempura::Shape;
using tempura::Tensor;
using tempura::UOp;

const std::vector<int64_t>& ints(const UOp& u) { return u.arg_as<std::vector<int64_t>>(); }

// The float value of a scalar CONST broadcast by RESHAPE/EXPAND (or the CONST itself).
double const_value_below(UOp u) {
    while (u.op() == Op::Expand || u.op() == Op::Reshape) u = u.src(0);
    REQUIRE(u.op() == Op::Const);
    if (auto* d = std::get_if<double>(&u.arg())) return *d;
    if (auto* b = std::get_if<bool>(&u.arg())) return *b;
    return static_cast<double>(u.arg_as<int64_t>());
}

bool is_broadcast_const(const UOp& u, double v) {
    return (u.op() == Op::Expand || u.op() == Op::Const || u.op() == Op::Reshape) &&
           const_value_below(u) == v;
}

Tensor mat(Shape s) {
    std::vector<float> v(static_cast<size_t>(tempura::numel(s)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    return Tensor::from_vector(v, s);
}

} // namespace

TEST_CASE("from_vector: a realized tensor is RESHAPE(BUFFER{id, numel}, shape)") {
    auto t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    const UOp& u = t.uop();
    REQUIRE(u.op() == Op::Reshape);
    CHECK(ints(u) == std::vector<int64_t>{2, 3});
    const UOp& b = u.src(0);
    REQUIRE(b.op() == Op::Buffer);
    CHECK(b.srcs().empty());
    CHECK(b.dtype() == DType::Float32);
    REQUIRE(t.buffer() != nullptr);
    CHECK(ints(b) == std::vector<int64_t>{t.buffer()->id(), 6});
    CHECK(tempura::runtime::lookup_buffer(t.buffer()->id()) == t.buffer());
    CHECK(t.buffers().size() == 1);
    // The buffer holds the values, row-major.
    const auto* p = static_cast<const float*>(t.buffer()->data());
    CHECK(p[0] == 1.0f);
    CHECK(p[5] == 6.0f);
    CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
    CHECK(t.to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3, 4, 5, 6});
    CHECK(t.uop().same(u)); // reading a realized tensor changes nothing
    // Reshaping a realized tensor is another view of its buffer: still realized, no kernel.
    auto r = t.reshape({3, 2});
    CHECK(r.is_realized());
    CHECK(r.uop().op() == Op::Reshape);
    CHECK(r.uop().src(0).same(b));
    CHECK(r.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
    // Bool and 1-D data.
    auto m = Tensor::from_vector<bool>({true, false, true});
    CHECK(m.to_vector<bool>() == std::vector<bool>{true, false, true});
    CHECK(m.uop().src(0).dtype() == DType::Bool);
}

TEST_CASE("a * b + c: ADD(MUL(...)) with RESHAPE/EXPAND for broadcasting") {
    auto a = mat({2, 3});
    auto b = mat({3});
    auto c = Tensor::full({}, 2.0f);
    auto y = a * b + c;
    const UOp& add = y.uop();
    REQUIRE(add.op() == Op::Add);
    CHECK(add.dtype() == DType::Float32);
    const UOp& mul = add.src(0);
    REQUIRE(mul.op() == Op::Mul);
    CHECK(mul.src(0).same(a.uop())); // a needs no broadcast
    // b: [3] -> RESHAPE [1, 3] (of its BUFFER) -> EXPAND [2, 3]
    const UOp& eb = mul.src(1);
    REQUIRE(eb.op() == Op::Expand);
    CHECK(ints(eb) == std::vector<int64_t>{2, 3});
    REQUIRE(eb.src(0).op() == Op::Reshape);
    CHECK(ints(eb.src(0)) == std::vector<int64_t>{1, 3});
    CHECK(eb.src(0).src(0).same(b.uop().src(0)));
    // c: the scalar CONST -> RESHAPE [1, 1] -> EXPAND [2, 3]
    const UOp& ec = add.src(1);
    REQUIRE(ec.op() == Op::Expand);
    CHECK(ints(ec) == std::vector<int64_t>{2, 3});
    REQUIRE(ec.src(0).op() == Op::Reshape);
    CHECK(ints(ec.src(0)) == std::vector<int64_t>{1, 1});
    CHECK(ec.src(0).src(0).op() == Op::Const);
    CHECK(ec.src(0).src(0).arg_as<double>() == 2.0);
    // The graph keeps both input buffers alive.
    CHECK(y.buffers().size() == 2);
    // Hash-consing: the same expression is the same graph.
    CHECK((a * b + c).uop().same(y.uop()));
}

TEST_CASE("scalars on either side take the tensor's dtype") {
    auto i = Tensor::from_vector<int32_t>({1, 2, 3});
    auto y = 10 - i;
    REQUIRE(y.uop().op() == Op::Sub);
    const UOp& k = y.uop().src(0);
    CHECK(k.op() == Op::Expand);
    CHECK(k.dtype() == DType::Int32);
    CHECK(const_value_below(k) == 10);
    auto z = i * 2.9; // truncated to int32
    CHECK(const_value_below(z.uop().src(1)) == 2);
    auto s = Tensor::full({}, 3.0f) + 1; // scalar tensor: no broadcast nodes
    CHECK(s.uop().op() == Op::Add);
    CHECK(s.uop().src(1).op() == Op::Const);
}

TEST_CASE("unary ops decompose into the contract's ALU ops") {
    auto x = mat({3});
    const UOp& xu = x.uop();
    {
        const UOp e = x.exp().uop(); // EXP2(x * 1/ln2)
        REQUIRE(e.op() == Op::Exp2);
        REQUIRE(e.src(0).op() == Op::Mul);
        CHECK(e.src(0).src(0).same(xu));
        CHECK(is_broadcast_const(e.src(0).src(1), 1.0 / std::numbers::ln2));
    }
    {
        const UOp l = x.log().uop(); // LOG2(x) * ln2
        REQUIRE(l.op() == Op::Mul);
        CHECK(l.src(0).op() == Op::Log2);
        CHECK(is_broadcast_const(l.src(1), std::numbers::ln2));
    }
    {
        const UOp c = x.cos().uop(); // COS(x), its own op: pi/2 - x would round away x's low bits
        REQUIRE(c.op() == Op::Cos);
        CHECK(c.src(0).same(xu));
    }
    {
        const UOp r = x.relu().uop(); // MAX(x, 0)
        REQUIRE(r.op() == Op::Max);
        CHECK(r.src(0).same(xu));
        CHECK(is_broadcast_const(r.src(1), 0.0));
    }
    {
        const UOp s = x.sigmoid().uop(); // 1 / (1 + exp(-x))
        REQUIRE(s.op() == Op::Recip);
        REQUIRE(s.src(0).op() == Op::Add);
        CHECK(is_broadcast_const(s.src(0).src(0), 1.0));
        REQUIRE(s.src(0).src(1).op() == Op::Exp2);
        CHECK(s.src(0).src(1).src(0).src(0).op() == Op::Neg);
    }
    {
        const UOp a = x.abs().uop(); // max(x, -x): +0.0 for -0.0, NaN stays NaN
        REQUIRE(a.op() == Op::Max);
        CHECK(a.src(0).same(xu));
        CHECK(a.src(1).op() == Op::Neg);
    }
    CHECK(x.sqrt().uop().op() == Op::Sqrt);
    CHECK(x.sin().uop().op() == Op::Sin);
    CHECK(x.reciprocal().uop().op() == Op::Recip);
    CHECK(x.neg().uop().op() == Op::Neg);
    CHECK((-x).uop().op() == Op::Neg);
    CHECK(x.tanh().uop().op() == Op::Where); // the sign put back on E / (E + 2)
    CHECK(x.cast(DType::Int32).uop().op() == Op::Cast);
    CHECK(x.cast(DType::Int32).uop().dtype() == DType::Int32);
    CHECK(x.cast(DType::Float32).uop().same(xu));
}

TEST_CASE("comparisons and division") {
    auto a = mat({3});
    auto b = mat({3}) + 1.0f;
    CHECK((a < b).uop().op() == Op::CmpLt);
    {
        const UOp g = (a > b).uop(); // b < a
        REQUIRE(g.op() == Op::CmpLt);
        CHECK(g.src(0).same(b.uop()));
        CHECK(g.src(1).same(a.uop()));
    }
    {
        const UOp le = (a <= b).uop(); // (b < a) != true
        REQUIRE(le.op() == Op::CmpNe);
        REQUIRE(le.src(0).op() == Op::CmpLt);
        CHECK(le.src(0).src(0).same(b.uop()));
        CHECK(is_broadcast_const(le.src(1), 1.0));
        CHECK(le.src(1).dtype() == DType::Bool);
    }
    {
        const UOp ge = (a >= b).uop(); // (a < b) != true
        REQUIRE(ge.op() == Op::CmpNe);
        CHECK(ge.src(0).src(0).same(a.uop()));
    }
    CHECK((a == b).uop().op() == Op::CmpEq);
    CHECK((a != b).uop().op() == Op::CmpNe);
    CHECK((a / b).uop().op() == Op::Fdiv);
    auto i = Tensor::from_vector<int32_t>({7, -7});
    CHECK((i / 2).uop().op() == Op::Idiv);
    CHECK((a - b).uop().op() == Op::Sub);
}

TEST_CASE("movement ops carry the contract's args; no-ops build no node") {
    auto t = mat({2, 3, 4});
    const UOp& u = t.uop();
    auto p = t.permute({2, 0, 1});
    CHECK(p.uop().op() == Op::Permute);
    CHECK(ints(p.uop()) == std::vector<int64_t>{2, 0, 1});
    auto pd = t.pad({{1, 0}, {0, 0}, {2, 3}});
    CHECK(pd.uop().op() == Op::Pad);
    CHECK(ints(pd.uop()) == std::vector<int64_t>{1, 0, 0, 0, 2, 3});
    auto s = t.shrink({{0, 1}, {1, 3}, {0, 4}});
    CHECK(s.uop().op() == Op::Shrink);
    CHECK(ints(s.uop()) == std::vector<int64_t>{0, 1, 1, 3, 0, 4});
    auto f = t.flip({-1, 0});
    CHECK(f.uop().op() == Op::Flip);
    CHECK(ints(f.uop()) == std::vector<int64_t>{1, 0, 1});
    auto e = mat({3, 1}).expand({2, 3, 5});
    CHECK(e.uop().op() == Op::Expand);
    CHECK(ints(e.uop()) == std::vector<int64_t>{2, 3, 5});
    CHECK(e.uop().src(0).op() == Op::Reshape);
    CHECK(ints(e.uop().src(0)) == std::vector<int64_t>{1, 3, 1});
    // No-ops
    CHECK(t.permute({0, 1, 2}).uop().same(u));
    CHECK(t.reshape({2, 3, 4}).uop().same(u));
    CHECK(t.pad({{0, 0}, {0, 0}, {0, 0}}).uop().same(u));
    CHECK(t.shrink({{0, 2}, {0, 3}, {0, 4}}).uop().same(u));
    CHECK(t.flip({}).uop().same(u));
    CHECK(t.expand({2, 3, 4}).uop().same(u));
    CHECK(t.transpose(1, 1).uop().same(u));
    // Lazy reshape chains stay RESHAPE nodes over the lazy value.
    auto lazy = (t + 1.0f).reshape({6, 4});
    CHECK(lazy.uop().op() == Op::Reshape);
    CHECK(lazy.uop().src(0).op() == Op::Add);
    CHECK(t.contiguous().uop().op() == Op::Contiguous);
}

TEST_CASE("cat: inputs padded to the full extent and added") {
    auto a = mat({2, 3});
    auto b = mat({1, 3});
    auto c = Tensor::cat({a, b}, 0);
    REQUIRE(c.uop().op() == Op::Add);
    const UOp& pa = c.uop().src(0);
    const UOp& pb = c.uop().src(1);
    REQUIRE(pa.op() == Op::Pad);
    CHECK(ints(pa) == std::vector<int64_t>{0, 1, 0, 0});
    REQUIRE(pb.op() == Op::Pad);
    CHECK(ints(pb) == std::vector<int64_t>{2, 0, 0, 0});
    CHECK(Tensor::cat({a}, 0).uop().same(a.uop()));
    auto m = Tensor::from_vector<bool>({true, false});
    CHECK(Tensor::cat({m, m}, 0).uop().op() == Op::Or);
}

TEST_CASE("reductions: REDUCE_AXIS with sorted axes, reduced dims kept as 1") {
    auto t = mat({2, 3, 4});
    {
        const UOp s = t.sum({2, 0}).uop();
        REQUIRE(s.op() == Op::Reshape);
        CHECK(ints(s) == std::vector<int64_t>{3});
        const UOp& r = s.src(0);
        REQUIRE(r.op() == Op::ReduceAxis);
        CHECK(r.arg_as<ReduceArg>() == ReduceArg{Op::Add, {0, 2}});
        CHECK(tempura::tensor_shape(r) == Shape{1, 3, 1});
        CHECK(r.src(0).same(t.uop()));
    }
    {
        const UOp s = t.sum(-1, true).uop(); // keepdim: no RESHAPE
        REQUIRE(s.op() == Op::ReduceAxis);
        CHECK(s.arg_as<ReduceArg>() == ReduceArg{Op::Add, {2}});
    }
    CHECK(t.sum().uop().src(0).arg_as<ReduceArg>() == ReduceArg{Op::Add, {0, 1, 2}});
    CHECK(t.prod(1, true).uop().arg_as<ReduceArg>() == ReduceArg{Op::Mul, {1}});
    CHECK(t.max(1, true).uop().arg_as<ReduceArg>() == ReduceArg{Op::Max, {1}});
    {
        const UOp m = t.min(1, true).uop(); // -max(-x)
        REQUIRE(m.op() == Op::Neg);
        REQUIRE(m.src(0).op() == Op::ReduceAxis);
        CHECK(m.src(0).arg_as<ReduceArg>() == ReduceArg{Op::Max, {1}});
        CHECK(m.src(0).src(0).op() == Op::Neg);
    }
    {
        const UOp m = t.mean(2, true).uop(); // sum / 4
        REQUIRE(m.op() == Op::Fdiv);
        CHECK(m.src(0).op() == Op::ReduceAxis);
        CHECK(is_broadcast_const(m.src(1), 4.0));
    }
    // A scalar has nothing to reduce.
    auto s = Tensor::full({}, 3.0f);
    CHECK(s.sum().uop().same(s.uop()));
}

TEST_CASE("matmul: (a[M,K,1] * b[1,K,N]).sum(K) with expands") {
    auto a = mat({2, 3});
    auto b = mat({3, 4});
    const UOp m = a.matmul(b).uop();
    REQUIRE(m.op() == Op::Reshape);
    CHECK(ints(m) == std::vector<int64_t>{2, 4});
    const UOp& r = m.src(0);
    REQUIRE(r.op() == Op::ReduceAxis);
    CHECK(r.arg_as<ReduceArg>() == ReduceArg{Op::Add, {1}});
    const UOp& mul = r.src(0);
    REQUIRE(mul.op() == Op::Mul);
    REQUIRE(mul.src(0).op() == Op::Expand);
    CHECK(ints(mul.src(0)) == std::vector<int64_t>{2, 3, 4});
    CHECK(ints(mul.src(0).src(0)) == std::vector<int64_t>{2, 3, 1});
    REQUIRE(mul.src(1).op() == Op::Expand);
    CHECK(ints(mul.src(1).src(0)) == std::vector<int64_t>{1, 3, 4});
    CHECK(a.dot(b).uop().same(m));
}

TEST_CASE("softmax and argmax graphs") {
    auto x = mat({2, 3});
    // e * (1 / sum(e)): one reciprocal per row, a multiply per element.
    const UOp s = x.softmax(1).uop();
    REQUIRE(s.op() == Op::Mul);
    CHECK(s.src(0).op() == Op::Exp2);
    REQUIRE(s.src(1).op() == Op::Expand);
    REQUIRE(s.src(1).src(0).op() == Op::Recip);
    CHECK(s.src(1).src(0).src(0).op() == Op::ReduceAxis);
    CHECK(s.src(1).src(0).src(0).arg_as<ReduceArg>().op == Op::Add);
    const UOp a = x.argmax(1).uop();
    CHECK(a.dtype() == DType::Int32);
    bool has_max = false, has_where = false;
    for (const UOp& u : a.toposort()) {
        if (u.op() == Op::ReduceAxis && u.arg_as<ReduceArg>().op == Op::Max) has_max = true;
        if (u.op() == Op::Where) has_where = true;
    }
    CHECK(has_max);
    CHECK(has_where);
}

TEST_CASE("from_uop: a tensor over an existing graph") {
    auto a = mat({2, 3});
    auto b = Tensor::from_uop((a + 1.0f).uop());
    CHECK(b.shape() == Shape{2, 3});
    CHECK(b.buffers().size() == 1);
    CHECK_FALSE(b.is_realized());
    auto c = Tensor::from_uop(a.uop());
    CHECK(c.is_realized());
    CHECK(error_of([] { Tensor::from_uop(UOp()); }) == at_line(__LINE__, "[from_uop] null UOp"));
}

// ---- runtime::Buffer --------------------------------------------------------------------------

TEST_CASE("Buffer: aligned, zeroed, sized; numel 0 allowed") {
    using tempura::runtime::make_buffer;
    auto b = make_buffer(DType::Float32, 1000);
    CHECK(b->numel() == 1000);
    CHECK(b->nbytes() == 4000);
    CHECK(b->dtype() == DType::Float32);
    CHECK(reinterpret_cast<uintptr_t>(b->data()) % 64 == 0);
    const auto* p = static_cast<const float*>(b->data());
    bool zero = true;
    for (int i = 0; i < 1000; ++i) zero &= p[i] == 0.0f;
    CHECK(zero);
    auto e = make_buffer(DType::Int32, 0);
    CHECK(e->numel() == 0);
    CHECK(e->nbytes() == 0);
    CHECK(e->data() != nullptr);
    CHECK(make_buffer(DType::Bool, 3)->nbytes() == 3);
    CHECK(make_buffer(DType::Float16, 3)->nbytes() == 6);
    CHECK(b->id() != e->id());
    CHECK(error_of([] { make_buffer(DType::Float32, -1); }) ==
          "[buffer] negative element count -1");
    CHECK(error_of([] { make_buffer(DType::Index, 1); }) ==
          "[buffer] cannot hold elements of dtype index");
}

TEST_CASE("Buffer registry: lookup while alive, error once gone") {
    using tempura::runtime::lookup_buffer;
    int64_t id = 0;
    {
        auto b = tempura::runtime::make_buffer(DType::Int64, 4);
        id = b->id();
        CHECK(lookup_buffer(id) == b);
    }
    CHECK(error_of([&] { lookup_buffer(id); }) ==
          "[buffer] no live buffer with id " + std::to_string(id));
}

TEST_CASE("Buffer registry: thread-safe") {
    std::vector<std::thread> threads;
    std::atomic<int> bad{0};
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 2000; ++i) {
                auto b = tempura::runtime::make_buffer(DType::Float32, i % 7);
                if (tempura::runtime::lookup_buffer(b->id()) != b) ++bad;
            }
        });
    for (auto& t : threads) t.join();
    CHECK(bad == 0);
}

TEST_CASE("a lazy tensor keeps the buffers it reads alive") {
    int64_t id = 0;
    Tensor lazy;
    {
        auto a = Tensor::from_vector<float>({1, 2, 3});
        id = a.buffer()->id();
        lazy = (a * 2.0f).exp();
    }
    CHECK(tempura::runtime::lookup_buffer(id)->numel() == 3);
    CHECK(tempura::reference_eval(lazy.uop()).size() == 3);
    lazy = Tensor();
    CHECK(error_of([&] { tempura::runtime::lookup_buffer(id); }) ==
          "[buffer] no live buffer with id " + std::to_string(id));
}
