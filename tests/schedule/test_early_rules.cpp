// The scheduler's early rewrites (a rule group run by graph_rewrite before the kernel split):
// exact graphs out, and the values unchanged.
#include <doctest/doctest.h>

#include <vector>

#include <tempura/rewrite/graph_rewrite.hpp>
#include <tempura/schedule/rules.hpp>
#include <tempura/schedule/schedule.hpp>
#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

namespace {

using tempura::Op;
using tempura::Shape;
using tempura::Tensor;
using tempura::UOp;
using Ints = std::vector<int64_t>;

UOp early(const UOp& u) {
    tempura::RewriteOptions o;
    o.bottom_up = true;
    return tempura::graph_rewrite(u, tempura::early_rewrites(), {}, o);
}
UOp move(Op op, const UOp& x, Ints arg) { return UOp::make(op, x.dtype(), {x}, std::move(arg)); }

// A 2x3x4 float input (a realized tensor: RESHAPE of its BUFFER).
UOp input() {
    std::vector<float> v(24);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f - 3.0f;
    static const Tensor t = Tensor::from_vector(v, {2, 3, 4});
    return t.uop();
}

} // namespace

TEST_CASE("early rewrites: movement ops that change nothing are their source") {
    const UOp x = input();
    CHECK(early(move(Op::Permute, x, {0, 1, 2})).same(x));
    CHECK(early(move(Op::Pad, x, {0, 0, 0, 0, 0, 0})).same(x));
    CHECK(early(move(Op::Shrink, x, {0, 2, 0, 3, 0, 4})).same(x));
    CHECK(early(move(Op::Flip, x, {0, 0, 0})).same(x));
    CHECK(early(move(Op::Expand, x, {2, 3, 4})).same(x));
    // ... and those that do something stay.
    const UOp shrink = move(Op::Shrink, x, {0, 2, 1, 3, 0, 4});
    CHECK(early(shrink).same(shrink));
    const UOp flip = move(Op::Flip, x, {0, 1, 0});
    CHECK(early(flip).same(flip));
}

TEST_CASE("early rewrites: chains of one movement op are one op") {
    const UOp x = input(); // RESHAPE(BUFFER, {2, 3, 4})
    // RESHAPE of RESHAPE of RESHAPE(BUFFER): one RESHAPE of the BUFFER.
    const UOp r = early(move(Op::Reshape, move(Op::Reshape, x, {6, 4}), {4, 6}));
    CHECK(r.op() == Op::Reshape);
    CHECK(r.arg_as<Ints>() == Ints{4, 6});
    CHECK(r.src(0).op() == Op::Buffer);
    // Back to the input's own shape: the input itself.
    CHECK(early(move(Op::Reshape, move(Op::Reshape, x, {24}), {2, 3, 4})).same(x));
    // PERMUTE(PERMUTE(x, p), q) = PERMUTE(x, p[q[i]]).
    const UOp p = early(move(Op::Permute, move(Op::Permute, x, {1, 2, 0}), {2, 0, 1}));
    CHECK(p.same(x)); // (1 2 0) then (2 0 1) is the identity
    const UOp p2 = early(move(Op::Permute, move(Op::Permute, x, {1, 2, 0}), {1, 0, 2}));
    CHECK(p2.op() == Op::Permute);
    CHECK(p2.arg_as<Ints>() == Ints{2, 1, 0});
    CHECK(p2.src(0).same(x));
    CHECK(p2.shape() == Shape{4, 3, 2});
    // EXPAND of EXPAND.
    const UOp one = move(Op::Reshape, x, {1, 24});
    const UOp e = early(move(
        Op::Expand, move(Op::Expand, move(Op::Reshape, one, {1, 1, 24}), {1, 5, 24}), {7, 5, 24}));
    CHECK(e.op() == Op::Expand);
    CHECK(e.arg_as<Ints>() == Ints{7, 5, 24});
    CHECK(e.src(0).op() == Op::Reshape);
    CHECK(e.src(0).src(0).op() == Op::Buffer);
}

TEST_CASE("early rewrites: the folded graph computes the same values") {
    const UOp x = input();
    const UOp g = move(
        Op::Permute,
        move(Op::Permute, move(Op::Reshape, move(Op::Reshape, x, {6, 4}), {4, 3, 2}), {2, 0, 1}),
        {0, 2, 1});
    const UOp f = early(g);
    CHECK_FALSE(f.same(g));
    CHECK(tempura::reference_eval(f) == tempura::reference_eval(g));
}

TEST_CASE("early rewrites: split reduce only by an associative op, into the exact graph") {
    const int64_t n = int64_t{1} << 18;
    const Tensor x = Tensor::from_vector(std::vector<float>(static_cast<size_t>(n), 1.0f), {n});
    const UOp s = early(x.sum().uop());
    // RESHAPE(REDUCE_AXIS(CONTIGUOUS(REDUCE_AXIS(RESHAPE(x, {256, 1024}), {1})), {0}), {})
    REQUIRE(s.op() == Op::Reshape);
    const UOp total = s.src(0);
    REQUIRE(total.op() == Op::ReduceAxis);
    CHECK(total.arg_as<tempura::ReduceArg>().axes == Ints{0});
    REQUIRE(total.src(0).op() == Op::Contiguous);
    const UOp part = total.src(0).src(0);
    REQUIRE(part.op() == Op::ReduceAxis);
    CHECK(part.arg_as<tempura::ReduceArg>().axes == Ints{1});
    CHECK(part.src(0).arg_as<Ints>() == Ints{256, 1024});
    CHECK(part.shape() == Shape{256, 1});
    // The combining op is one of the associative ones the split relies on: nothing else can be
    // built.
    CHECK(tempura::is_associative(Op::Add));
    CHECK(tempura::is_associative(Op::Mul));
    CHECK(tempura::is_associative(Op::Max));
    const UOp bad =
        UOp::make(Op::ReduceAxis, x.dtype(), {x.uop()}, tempura::ReduceArg{Op::Sub, Ints{0}});
    CHECK_THROWS_WITH(bad.shape(),
                      "[shape] REDUCE_AXIS needs ADD, MUL or MAX as its combining op, got SUB");
}

TEST_CASE("early rewrites: adjacent reduced axes are split as one") {
    // max of a whole [512, 512]: 256 partials of 1024 elements, then their max (one split, not
    // a split of a split).
    std::vector<float> f(512 * 512, -1.0f);
    f[1000] = 9.0f;
    const Tensor x = Tensor::from_vector(f, {512, 512});
    // REDUCE_AXIS(CONTIGUOUS(REDUCE_AXIS(RESHAPE(BUFFER, {256, 1024}), {1})), {0}): the reshape
    // back to [1, 1] is a no-op (folded), and so is the reshape of the input's reshape.
    const UOp total = early(x.max({0, 1}, true).uop());
    REQUIRE(total.op() == Op::ReduceAxis);
    CHECK(total.shape() == Shape{1, 1});
    REQUIRE(total.src(0).op() == Op::Contiguous);
    const UOp part = total.src(0).src(0);
    REQUIRE(part.op() == Op::ReduceAxis);
    CHECK(part.arg_as<tempura::ReduceArg>().axes == Ints{1});
    CHECK(part.src(0).arg_as<Ints>() == Ints{256, 1024});
    CHECK(part.src(0).src(0).op() == Op::Buffer);
    Tensor m = x.max({0, 1}, true);
    m.realize();
    REQUIRE(m.kernels().size() == 2);
    CHECK(m.kernels()[0].name == "r_256_1024");
    CHECK(m.item<float>() == 9.0f);
}
