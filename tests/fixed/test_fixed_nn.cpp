// tempura::nn on FixedTensor: conv2d and the poolings have their output shapes at compile time
// and the values of the Tensor versions.
#include <doctest/doctest.h>

#include <type_traits>
#include <vector>

#include <tempura/tempura.hpp>

namespace {

using tempura::FixedTensor;
namespace nn = tempura::nn;

template <class A, class B>
constexpr bool same_type = std::is_same_v<std::remove_cvref_t<A>, B>;

// 0, 1, 2, ... in row-major order.
template <int64_t... D>
FixedTensor<float, D...> counting() {
    return FixedTensor<float, D...>::from_tensor(
        tempura::Tensor::arange((D * ...)).reshape(tempura::Shape{D...}));
}

} // namespace

TEST_CASE("FixedTensor conv2d: output sizes from stride, padding, dilation and groups") {
    const auto x = counting<2, 4, 9, 7>();
    const auto w = FixedTensor<float, 6, 2, 3, 3>::full(0.5f);
    const auto y = nn::conv2d<2, 1, 1, 2>(x, w);
    static_assert(same_type<decltype(y), FixedTensor<float, 2, 6, 5, 4>>);
    nn::ConvOptions o;
    o.stride = {2};
    o.padding = {1};
    o.groups = 2;
    CHECK(y.to_vector() == nn::conv2d(x.tensor(), w.tensor(), o).to_vector<float>());
    const auto d = nn::conv2d<1, 0, 2>(x, FixedTensor<float, 3, 4, 3, 3>::zeros());
    static_assert(same_type<decltype(d), FixedTensor<float, 2, 3, 5, 3>>);
    const auto b = nn::conv2d(x, FixedTensor<float, 3, 4, 1, 1>::ones(),
                              FixedTensor<float, 3>::from_vector({1, 2, 3}));
    static_assert(same_type<decltype(b), FixedTensor<float, 2, 3, 9, 7>>);
    CHECK(b.to_vector()[0] == doctest::Approx(1 + (0 + 63 + 126 + 189)));
}

TEST_CASE("FixedTensor pools: max, average and adaptive") {
    const auto x = counting<1, 2, 6, 5>();
    const auto m = nn::max_pool2d<2>(x);
    static_assert(same_type<decltype(m), FixedTensor<float, 1, 2, 3, 2>>);
    CHECK(m.to_vector() == std::vector<float>{6, 8, 16, 18, 26, 28, 36, 38, 46, 48, 56, 58});
    const auto a = nn::avg_pool2d<3, 1, 1>(x);
    static_assert(same_type<decltype(a), FixedTensor<float, 1, 2, 6, 5>>);
    const auto g = nn::adaptive_avg_pool2d<1, 1>(x);
    static_assert(same_type<decltype(g), FixedTensor<float, 1, 2, 1, 1>>);
    CHECK(g.to_vector() == std::vector<float>{14.5f, 44.5f});
}

TEST_CASE("FixedTensor conv1d and conv_transpose2d") {
    const auto x = counting<2, 3, 10>();
    const auto y = nn::conv1d<2, 1>(x, FixedTensor<float, 4, 3, 3>::full(0.25f));
    static_assert(same_type<decltype(y), FixedTensor<float, 2, 4, 5>>);
    nn::ConvOptions o;
    o.stride = {2};
    o.padding = {1};
    CHECK(y.to_vector() ==
          nn::conv1d(x.tensor(), tempura::Tensor::full({4, 3, 3}, 0.25f), o).to_vector<float>());
    const auto u = counting<1, 2, 3, 4>();
    const auto t = nn::conv_transpose2d<2, 1, 1>(u, FixedTensor<float, 2, 5, 3, 3>::ones());
    static_assert(same_type<decltype(t), FixedTensor<float, 1, 5, 6, 8>>);
    nn::ConvOptions ot;
    ot.stride = {2};
    ot.padding = {1};
    ot.output_padding = {1};
    CHECK(t.to_vector() == nn::conv_transpose2d(u.tensor(), tempura::Tensor::ones({2, 5, 3, 3}), ot)
                               .to_vector<float>());
}
