// FixedTensor's mirror of the tensor surface's new ops: elementwise (same shape), Python's % and
// //, bitwise ops, and the shape ops whose result shape is computed at compile time (slice,
// repeat, split and chunk as tuples, stack, tril/triu, any/all/var/std/logsumexp).
#include <doctest/doctest.h>

#include <cmath>
#include <tuple>
#include <type_traits>
#include <vector>

#include <tempura/tempura.hpp>

namespace {

using tempura::FixedTensor;
using tempura::keepdim;
using tempura::Slice;

template <class A, class B>
constexpr bool same_type = std::is_same_v<std::remove_cvref_t<A>, B>;

} // namespace

TEST_CASE("FixedTensor: elementwise ops keep the shape and agree with Tensor") {
    const auto x = FixedTensor<float, 2, 2>::from_vector({-1.5f, 0.5f, 2.5f, -0.25f});
    static_assert(same_type<decltype(x.gelu()), FixedTensor<float, 2, 2>>);
    CHECK(x.gelu().to_vector() == x.tensor().gelu().to_vector<float>());
    CHECK(x.round().to_vector() == std::vector<float>{-2, 0, 2, -0.0f});
    CHECK(x.floor().to_vector() == std::vector<float>{-2, 0, 2, -1});
    CHECK(x.clip(-1, 1).to_vector() == std::vector<float>{-1, 0.5f, 1, -0.25f});
    CHECK(x.pow(2.0).to_vector() == std::vector<float>{2.25f, 0.25f, 6.25f, 0.0625f});
    const std::vector<float> p = x.abs().pow(FixedTensor<float, 2>::full(2)).to_vector();
    for (size_t i = 0; i < 4; ++i)
        CHECK(std::fabs(p[i] - x.to_vector()[i] * x.to_vector()[i]) < 1e-6f);
    static_assert(same_type<decltype(x.isnan()), FixedTensor<bool, 2, 2>>);
    CHECK(x.isinf().to_vector() == std::vector<bool>{false, false, false, false});
    CHECK(x.sign().to_vector() == std::vector<float>{-1, 1, 1, -1});
    CHECK(std::fabs(x.atan().to_vector()[2] - std::atan(2.5f)) < 1e-6f);
    CHECK(x.tril().to_vector() == std::vector<float>{-1.5f, 0, 2.5f, -0.25f});
    CHECK(x.triu<1>().to_vector() == std::vector<float>{0, 0.5f, 0, 0});
}

TEST_CASE("FixedTensor: % and floor_div as Python, bitwise ops") {
    const auto a = FixedTensor<int32_t, 4>::from_vector({7, -7, 7, -7});
    const auto b = FixedTensor<int32_t, 4>::from_vector({3, 3, -3, -3});
    CHECK((a % b).to_vector() == std::vector<int32_t>{1, 2, -2, -1});
    CHECK(floor_div(a, b).to_vector() == std::vector<int32_t>{2, -3, -3, 2});
    CHECK(floor_div(a, 2).to_vector() == std::vector<int32_t>{3, -4, 3, -4});
    CHECK((a & 3).to_vector() == std::vector<int32_t>{3, 1, 3, 1});
    CHECK((a | b).to_vector() == std::vector<int32_t>{7, -5, -1, -3});
    CHECK((a ^ a).to_vector() == std::vector<int32_t>{0, 0, 0, 0});
    CHECK((a << 1).to_vector() == std::vector<int32_t>{14, -14, 14, -14});
    CHECK((a >> 1).to_vector() == std::vector<int32_t>{3, -4, 3, -4});
}

TEST_CASE("FixedTensor: slice, repeat, split, chunk, stack: shapes at compile time") {
    const auto m = FixedTensor<float, 3, 4>::from_vector({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
    const auto s = m.slice<Slice{Slice::end, Slice::end, -2}, Slice{1, Slice::end, 2}>();
    static_assert(same_type<decltype(s), FixedTensor<float, 2, 2>>);
    CHECK(s.to_vector() == std::vector<float>{9, 11, 1, 3});
    static_assert(same_type<decltype(m.slice<Slice{1, 2}>()), FixedTensor<float, 1, 4>>);
    static_assert(same_type<decltype(m.slice<Slice{-10, 100, 5}>()), FixedTensor<float, 1, 4>>);

    const auto r = m.repeat<2, 1, 2>();
    static_assert(same_type<decltype(r), FixedTensor<float, 2, 3, 8>>);
    CHECK(r.to_vector() == m.tensor().repeat({2, 1, 2}).to_vector<float>());

    const auto [p0, p1] = m.split<3, 1>();
    static_assert(same_type<decltype(p0), FixedTensor<float, 3, 3>>);
    static_assert(same_type<decltype(p1), FixedTensor<float, 3, 1>>);
    CHECK(p1.to_vector() == std::vector<float>{3, 7, 11});
    const auto chunks = FixedTensor<float, 5>::from_vector({0, 1, 2, 3, 4}).chunk<4>();
    static_assert(std::tuple_size_v<std::remove_cvref_t<decltype(chunks)>> == 3);
    static_assert(same_type<decltype(std::get<2>(chunks)), FixedTensor<float, 1>>);
    CHECK(std::get<2>(chunks).to_vector() == std::vector<float>{4});

    const auto v = FixedTensor<float, 3>::from_vector({1, 2, 3});
    const auto st = tempura::stack<1>(v, v * 2.0f);
    static_assert(same_type<decltype(st), FixedTensor<float, 3, 2>>);
    CHECK(st.to_vector() == std::vector<float>{1, 2, 2, 4, 3, 6});
}

TEST_CASE("FixedTensor: any, all, var, std, logsumexp") {
    const auto x = FixedTensor<float, 2, 3>::from_vector({0, 1, 0, 0, 0, 0});
    static_assert(same_type<decltype(x.any<1>()), FixedTensor<bool, 2>>);
    CHECK(x.any<1>().to_vector() == std::vector<bool>{true, false});
    CHECK(!x.all().item());
    static_assert(same_type<decltype(x.var<1>(keepdim)), FixedTensor<float, 2, 1>>);
    const auto v = FixedTensor<float, 4>::from_vector({1, 2, 3, 4});
    CHECK(std::fabs(v.var().item() - 5.0f / 3) < 1e-6f);
    CHECK(std::fabs(v.std().item() - std::sqrt(5.0f / 3)) < 1e-6f);
    static_assert(same_type<decltype(x.logsumexp<0>()), FixedTensor<float, 3>>);
    CHECK(std::fabs(v.logsumexp<0>().item() - 4.4401897f) < 1e-5f);
}

TEST_CASE("FixedTensor: random numbers have the type's shape and the Tensor's values") {
    tempura::manual_seed(11);
    const auto r = FixedTensor<float, 4, 8>::rand();
    tempura::manual_seed(11);
    CHECK(r.to_vector() == tempura::Tensor::rand({4, 8}).to_vector<float>());
    const auto n = FixedTensor<double, 3>::normal(1, 0);
    CHECK(n.to_vector() == std::vector<double>{1, 1, 1});
    const auto k = FixedTensor<int32_t, 100>::randint(5, 7);
    for (int32_t v : k.to_vector()) CHECK((v == 5 || v == 6));
    static_assert(
        same_type<decltype(FixedTensor<float, 2, 2>::uniform(0, 1)), FixedTensor<float, 2, 2>>);
}

TEST_CASE("FixedTensor: gather, index_select and scatter_add have compile-time shapes") {
    const auto x = FixedTensor<float, 2, 3>::from_vector({1, 2, 3, 4, 5, 6});
    const auto idx = FixedTensor<int32_t, 2, 2>::from_vector({2, 0, 1, 1});
    const auto g = x.gather<1>(idx);
    static_assert(same_type<decltype(g), FixedTensor<float, 2, 2>>);
    CHECK(g.to_vector() == std::vector<float>{3, 1, 5, 5});
    const auto rows = FixedTensor<int64_t, 3>::from_vector({1, 1, 0});
    const auto s = x.index_select<0>(rows);
    static_assert(same_type<decltype(s), FixedTensor<float, 3, 3>>);
    CHECK(s.to_vector() == std::vector<float>{4, 5, 6, 4, 5, 6, 1, 2, 3});
    const auto add = x.scatter_add<1>(idx, FixedTensor<float, 2, 2>::from_vector({10, 20, 30, 40}));
    static_assert(same_type<decltype(add), FixedTensor<float, 2, 3>>);
    CHECK(add.to_vector() == std::vector<float>{21, 2, 13, 4, 75, 6});
}

TEST_CASE("FixedTensor: scans keep the shape") {
    const auto x = FixedTensor<float, 2, 3>::from_vector({1, 2, 3, 4, 5, 6});
    static_assert(same_type<decltype(x.cumsum<1>()), FixedTensor<float, 2, 3>>);
    CHECK(x.cumsum<1>().to_vector() == std::vector<float>{1, 3, 6, 4, 9, 15});
    CHECK(x.cumprod<0>().to_vector() == std::vector<float>{1, 2, 3, 4, 10, 18});
    CHECK(x.cummax<-1>().to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6});
    const auto b = FixedTensor<bool, 3>::from_vector({true, false, true});
    static_assert(same_type<decltype(b.cumsum<0>()), FixedTensor<int32_t, 3>>);
    CHECK(b.cumsum<0>().to_vector() == std::vector<int32_t>{1, 1, 2});
}

TEST_CASE("FixedTensor: sort, argsort and topk") {
    const auto x = FixedTensor<float, 2, 3>::from_vector({3, 1, 2, 0, 5, 4});
    CHECK(x.sort().to_vector() == std::vector<float>{1, 2, 3, 0, 4, 5});
    static_assert(same_type<decltype(x.argsort<0>()), FixedTensor<int32_t, 2, 3>>);
    CHECK(x.argsort<0>(true).to_vector() == std::vector<int32_t>{0, 1, 1, 1, 0, 0});
    const auto [v, i] = x.topk<2>();
    static_assert(same_type<decltype(v), FixedTensor<float, 2, 2>>);
    static_assert(same_type<decltype(i), FixedTensor<int32_t, 2, 2>>);
    CHECK(v.to_vector() == std::vector<float>{3, 2, 5, 4});
    CHECK(i.to_vector() == std::vector<int32_t>{0, 2, 1, 2});
}

TEST_CASE("FixedTensor: masked_fill with a broadcast mask") {
    const auto x = FixedTensor<float, 2, 3>::from_vector({1, 2, 3, 4, 5, 6});
    const auto m = FixedTensor<bool, 3>::from_vector({true, false, true});
    CHECK(x.masked_fill(m, -1).to_vector() == std::vector<float>{-1, 2, -1, -1, 5, -1});
}
