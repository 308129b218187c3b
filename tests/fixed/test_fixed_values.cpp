// FixedTensor against the Tensor API: every operation gives the same values (and the Tensor inside
// has the shape of the FixedTensor's type); conversions from Tensor are checked at run time.
#include <doctest/doctest.h>

#include "../error_at.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <tempura/tempura.hpp>
#include <tempura/testing.hpp>

namespace {

using tempura::FixedTensor;
using tempura::keepdim;
using tempura::Shape;
using tempura::Tensor;

template <int64_t... D>
using F = FixedTensor<float, D...>;
template <int64_t... D>
using I = FixedTensor<int32_t, D...>;
template <int64_t... D>
using B = FixedTensor<bool, D...>;

std::vector<float> iota(int64_t n, float scale = 1.0f, float offset = 0.0f) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        v[static_cast<size_t>(i)] = static_cast<float>(i) * scale + offset;
    return v;
}

// Values from buffers (not lazy constants): what a program computes on.
template <class FT>
FT make(float scale = 1.0f, float offset = 0.0f) {
    return FT::from_vector(iota(FT::numel(), scale, offset));
}

// The shape of the FixedTensor's type is the shape of the Tensor inside, and the values are the
// Tensor API's.
template <class FT>
bool type_matches(const FT& f) {
    return f.tensor().shape() == FT::shape_vector() && f.tensor().dtype() == FT::dtype();
}

} // namespace

#define CHECK_FIXED_EQ(f, t)                                                                       \
    do {                                                                                           \
        CHECK(type_matches(f));                                                                    \
        CHECK_TENSOR_EQ(f, t);                                                                     \
    } while (false)

TEST_CASE("fixed: creation") {
    CHECK_FIXED_EQ((F<2, 3>::zeros()), Tensor::zeros({2, 3}));
    CHECK_FIXED_EQ((I<2, 3>::ones()), Tensor::ones({2, 3}, tempura::DType::Int32));
    CHECK_FIXED_EQ((F<2, 2>::full(2.5f)), Tensor::full({2, 2}, 2.5f));
    CHECK_FIXED_EQ((B<3>::full(true)), Tensor::full({3}, true));
    CHECK_FIXED_EQ(F<5>::arange(), Tensor::arange(5));
    CHECK_FIXED_EQ((I<3, 3>::eye()), Tensor::eye(3, tempura::DType::Int32));
    CHECK_FIXED_EQ(F<>::full(7.0f), Tensor::full({}, 7.0f));
    const auto v = F<2, 3>::from_vector({1, 2, 3, 4, 5, 6});
    CHECK(v.is_realized());
    CHECK(v.to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6});
    CHECK(v.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4, 5, 6}); // converted
    CHECK(v.sum().item<double>() == 21.0);
    CHECK((B<2>::from_vector({true, false}).to_vector() == std::vector<bool>{true, false}));
    CHECK((F<1, 1>::full(3.0f).item() == 3.0f));
    CHECK_THROWS_WITH_AS(
        (F<2, 3>::from_vector({1, 2, 3, 4, 5})),
        at_line(__LINE__ - 2, "[from_vector] 5 values do not fill shape [2, 3] (6 elements)")
            .c_str(),
        tempura::Error);
    // A default FixedTensor is zeros of its shape (so that it can be a member assigned later).
    CHECK_FIXED_EQ((F<2, 2>()), Tensor::zeros({2, 2}));
}

TEST_CASE("fixed: conversion to and from Tensor") {
    const Tensor t = Tensor::from_vector(iota(6), {2, 3});
    const F<2, 3> f(t);
    CHECK(f.uop().same(t.uop())); // the same graph: no copy, no second engine
    CHECK(f.tensor().uop().same(t.uop()));
    CHECK((F<2, 3>::from_tensor(t).to_vector() == iota(6)));
    // The shape and the dtype are checked at run time.
    CHECK_THROWS_WITH_AS((F<3, 2>{t}), "[FixedTensor] expected float32 [3, 2], got float32 [2, 3]",
                         tempura::Error);
    CHECK_THROWS_WITH_AS(F<6>::from_tensor(t),
                         "[FixedTensor] expected float32 [6], got float32 [2, 3]", tempura::Error);
    CHECK_THROWS_WITH_AS((I<2, 3>{t}), "[FixedTensor] expected int32 [2, 3], got float32 [2, 3]",
                         tempura::Error);
    CHECK_THROWS_WITH_AS(F<>{Tensor::zeros({1})},
                         "[FixedTensor] expected float32 [], got float32 [1]", tempura::Error);
    // tensor() of an rvalue moves the Tensor out.
    const Tensor moved = F<2, 3>(t).tensor();
    CHECK(moved.uop().same(t.uop()));
}

TEST_CASE("fixed: elementwise and broadcasting") {
    const auto a = make<F<2, 3>>(1.0f, -2.0f);
    const auto b = make<F<3>>(0.5f, 1.0f);
    const auto c = make<F<2, 1>>(2.0f, 1.0f);
    const Tensor ta = a.tensor(), tb = b.tensor(), tc = c.tensor();
    CHECK_FIXED_EQ(a + b, ta + tb);
    CHECK_FIXED_EQ(b - a, tb - ta);
    CHECK_FIXED_EQ(a * c, ta * tc);
    CHECK_FIXED_EQ(a / c, ta / tc);
    CHECK_FIXED_EQ(b + c, tb + tc); // [3] + [2, 1] -> [2, 3]
    CHECK_FIXED_EQ(a + 1.5f, ta + 1.5f);
    CHECK_FIXED_EQ(2 * a, 2 * ta);
    CHECK_FIXED_EQ(1.0f - a, 1.0f - ta);
    CHECK_FIXED_EQ(a / 4.0, ta / 4.0);
    CHECK_FIXED_EQ(a < b, ta < tb);
    CHECK_FIXED_EQ(a <= 0.0f, ta <= 0.0f);
    CHECK_FIXED_EQ(a > c, ta > tc);
    CHECK_FIXED_EQ(a >= b, ta >= tb);
    CHECK_FIXED_EQ(a == 1.0f, ta == 1.0f);
    CHECK_FIXED_EQ(a != b, ta != tb);
    CHECK_FIXED_EQ(-a, -ta);
    CHECK_FIXED_EQ(!(a < b), !(ta < tb));
    CHECK_FIXED_EQ((a < b).logical_not(), (ta < tb).logical_not());
    const auto p = make<F<2, 3>>(0.25f, 0.5f); // positive
    const Tensor tp = p.tensor();
    CHECK_FIXED_EQ(p.exp(), tp.exp());
    CHECK_FIXED_EQ(p.exp2(), tp.exp2());
    CHECK_FIXED_EQ(p.log(), tp.log());
    CHECK_FIXED_EQ(p.log2(), tp.log2());
    CHECK_FIXED_EQ(p.sqrt(), tp.sqrt());
    CHECK_FIXED_EQ(a.sin(), ta.sin());
    CHECK_FIXED_EQ(a.cos(), ta.cos());
    CHECK_FIXED_EQ(a.relu(), ta.relu());
    CHECK_FIXED_EQ(a.sigmoid(), ta.sigmoid());
    CHECK_FIXED_EQ(a.tanh(), ta.tanh());
    CHECK_FIXED_EQ(a.abs(), ta.abs());
    CHECK_FIXED_EQ(p.reciprocal(), tp.reciprocal());
    CHECK_FIXED_EQ(a.square(), ta.square());
    CHECK_FIXED_EQ(a.neg(), ta.neg());
    CHECK_FIXED_EQ(a.maximum(b), ta.maximum(tb));
    CHECK_FIXED_EQ(tempura::minimum(a, c), tempura::minimum(ta, tc));
    CHECK_FIXED_EQ(a.cast<int32_t>(), ta.cast(tempura::DType::Int32));
    CHECK_FIXED_EQ(tempura::where(a > b, a, c), tempura::where(ta > tb, ta, tc));
    CHECK_FIXED_EQ(tempura::where(a > 0.0f, a, 0.0f), tempura::where(ta > 0.0f, ta, 0.0f));
    CHECK_FIXED_EQ(tempura::where(b > 1.0f, -1.0f, a), tempura::where(tb > 1.0f, -1.0f, ta));
    // Integers: division truncates (as Tensor's IDIV does).
    const auto i = I<4>::from_vector({-7, -1, 5, 9});
    CHECK_FIXED_EQ(i / 2, i.tensor() / 2);
    CHECK((i / 2).to_vector() == std::vector<int32_t>{-3, 0, 2, 4});
    CHECK_FIXED_EQ(i.abs(), i.tensor().abs());
    // Compound assignment: the right side broadcasts into the left.
    auto acc = a;
    acc += b;
    acc *= 2.0f;
    acc -= c;
    acc /= 3;
    CHECK_FIXED_EQ(acc, ((ta + tb) * 2.0f - tc) / 3);
}

TEST_CASE("fixed: movement") {
    const auto a = make<F<2, 3>>();
    const auto x = make<F<2, 1, 4, 3>>();
    const Tensor ta = a.tensor(), tx = x.tensor();
    CHECK_FIXED_EQ((a.reshape<3, -1>()), ta.reshape({3, -1}));
    CHECK_FIXED_EQ(a.reshape<-1>(), ta.reshape({-1}));
    CHECK_FIXED_EQ((a.reshape<1, 6, 1>()), ta.reshape({1, 6, 1}));
    const auto one = F<1, 1>::from_vector({4});
    CHECK_FIXED_EQ(one.reshape<>(), one.tensor().reshape({}));
    CHECK_FIXED_EQ((x.permute<3, 0, 2, 1>()), tx.permute({3, 0, 2, 1}));
    CHECK_FIXED_EQ((a.permute<-1, 0>()), ta.permute({-1, 0}));
    CHECK_FIXED_EQ(a.transpose(), ta.transpose());
    CHECK_FIXED_EQ((x.transpose<0, -1>()), tx.transpose(0, -1));
    const auto col = make<F<3, 1>>();
    CHECK_FIXED_EQ((col.expand<3, 4>()), col.tensor().expand({3, 4}));
    CHECK_FIXED_EQ((col.expand<5, -1, 2>()), col.tensor().expand({5, -1, 2}));
    CHECK_FIXED_EQ((make<F<3>>().expand<2, 3>()), make<F<3>>().tensor().expand({2, 3}));
    CHECK_FIXED_EQ((a.pad<1, 1, 0, 2>()), ta.pad({{1, 1}, {0, 2}}));
    CHECK_FIXED_EQ((a.shrink<0, 1, 1, 3>()), ta.shrink({{0, 1}, {1, 3}}));
    CHECK_FIXED_EQ((a.shrink<0, 2, 0, 3>()), ta);
    CHECK_FIXED_EQ(a.flip<0>(), ta.flip({0}));
    CHECK_FIXED_EQ((a.flip<0, -1>()), ta.flip({0, -1}));
    CHECK_FIXED_EQ(x.squeeze<1>(), tx.squeeze(1));
    CHECK_FIXED_EQ(col.squeeze<-1>(), col.tensor().squeeze(-1));
    CHECK_FIXED_EQ(x.squeeze(), tx.squeeze());
    CHECK_FIXED_EQ(a.unsqueeze<0>(), ta.unsqueeze(0));
    CHECK_FIXED_EQ(a.unsqueeze<-2>(), ta.unsqueeze(-2));
    CHECK_FIXED_EQ(x.flatten(), tx.flatten());
    CHECK_FIXED_EQ(a.contiguous(), ta.contiguous());
    const auto b = make<F<2, 2>>(1.0f, 100.0f);
    CHECK_FIXED_EQ(tempura::cat(a, a), Tensor::cat({ta, ta}));
    CHECK_FIXED_EQ(tempura::cat<1>(a, b, a), Tensor::cat({ta, b.tensor(), ta}, 1));
    CHECK_FIXED_EQ(tempura::cat<-1>(a, b), Tensor::cat({ta, b.tensor()}, -1));
}

TEST_CASE("fixed: reductions") {
    const auto a = make<F<2, 3>>(1.5f, -4.0f);
    const auto x = make<F<2, 1, 4, 3>>(0.25f, -3.0f);
    const Tensor ta = a.tensor(), tx = x.tensor();
    CHECK_FIXED_EQ(a.sum(), ta.sum());
    CHECK_FIXED_EQ(a.sum(keepdim), ta.sum({}, true));
    CHECK_FIXED_EQ(a.sum<0>(), ta.sum(0));
    CHECK_FIXED_EQ(a.sum<-1>(keepdim), ta.sum(-1, true));
    CHECK_FIXED_EQ((x.sum<0, 2>()), tx.sum({0, 2}));
    CHECK_FIXED_EQ((x.sum<3, 0>(keepdim)), tx.sum({3, 0}, true));
    CHECK_FIXED_EQ(a.prod<1>(), ta.prod(1));
    CHECK_FIXED_EQ(a.max(), ta.max());
    CHECK_FIXED_EQ(a.max<1>(), ta.max(1));
    CHECK_FIXED_EQ(a.min<0>(keepdim), ta.min(0, true));
    CHECK_FIXED_EQ(x.mean<2>(), tx.mean(2));
    CHECK_FIXED_EQ(a.argmax<1>(), ta.argmax(1));
    CHECK_FIXED_EQ(a.argmax<0>(keepdim), ta.argmax(0, true));
    CHECK_FIXED_EQ(a.argmin<-1>(), ta.argmin(-1));
    const auto i = I<2, 3>::from_vector({1, -2, 3, 4, 5, -6});
    CHECK_FIXED_EQ(i.sum<1>(), i.tensor().sum(1));
    CHECK_FIXED_EQ(i.mean<1>(), i.tensor().mean(1)); // float32
    CHECK_FIXED_EQ(i.max<0>(), i.tensor().max(0));
    const auto flags = B<2, 3>::from_vector({true, false, true, true, true, false});
    CHECK_FIXED_EQ(flags.sum<0>(), flags.tensor().sum(0)); // int32 counts
    CHECK((flags.sum<1>().to_vector() == std::vector<int32_t>{2, 2}));
    CHECK_FIXED_EQ(flags.max<1>(), flags.tensor().max(1));
    CHECK_FIXED_EQ(flags.min<1>(), flags.tensor().min(1));
    CHECK(a.sum().item() == doctest::Approx(1.5 * 15 - 4.0 * 6));
}

TEST_CASE("fixed: dot, softmax") {
    const auto m43 = make<F<4, 3>>(0.5f, -1.0f);
    const auto m35 = make<F<3, 5>>(0.25f, -2.0f);
    const auto v3 = make<F<3>>(1.0f, -1.0f);
    const auto v4 = make<F<4>>(-0.5f, 1.0f);
    const Tensor t43 = m43.tensor(), t35 = m35.tensor(), t3 = v3.tensor(), t4 = v4.tensor();
    CHECK_FIXED_EQ(m43.dot(m35), t43.dot(t35)); // [M,K]@[K,N]
    CHECK_FIXED_EQ(v4.dot(m43), t4.dot(t43));   // [K]@[K,N]
    CHECK_FIXED_EQ(m43.dot(v3), t43.dot(t3));   // [M,K]@[K]
    CHECK_FIXED_EQ(v3.dot(v3), t3.dot(t3));     // [K]@[K]
    const auto b1 = make<F<2, 1, 4, 3>>(0.125f, -1.0f);
    const auto b2 = make<F<5, 3, 2>>(0.5f, -3.0f);
    CHECK_FIXED_EQ(b1.dot(b2), b1.tensor().dot(b2.tensor())); // batched, broadcast
    CHECK_FIXED_EQ(b1.matmul(m35), b1.tensor().matmul(t35));
    CHECK_FIXED_EQ(v3.matmul(b2), t3.matmul(b2.tensor()));
    const auto i = I<2, 2>::from_vector({1, 2, 3, 4});
    CHECK_FIXED_EQ(i.dot(i), i.tensor().dot(i.tensor()));
    CHECK((i.dot(i).to_vector() == std::vector<int32_t>{7, 10, 15, 22}));
    CHECK_FIXED_EQ(m43.softmax(), t43.softmax(-1));
    CHECK_FIXED_EQ(m43.softmax<0>(), t43.softmax(0));
    CHECK_FIXED_EQ(m43.log_softmax(), t43.log_softmax(-1));
    CHECK_FIXED_EQ(m43.log_softmax<-2>(), t43.log_softmax(-2));
    // The values themselves, not only the agreement.
    const auto s = m43.softmax().sum<1>();
    CHECK_TENSOR_CLOSE(s, F<4>::from_vector({1, 1, 1, 1}), 1e-6, 1e-6);
}

TEST_CASE("fixed: realize, kernels, values") {
    auto a = make<F<2, 3>>();
    auto y = (a * 2.0f + 1.0f).relu();
    CHECK_FALSE(y.is_realized());
    CHECK(&y.realize() == &y);
    CHECK(y.is_realized());
    CHECK_FALSE(y.kernels().empty());
    CHECK(y.to_vector() == std::vector<float>{1, 3, 5, 7, 9, 11});
    CHECK(y.buffer() != nullptr);
    CHECK_FALSE(y.buffers().empty());
}
