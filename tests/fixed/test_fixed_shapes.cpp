// FixedTensor result types, checked at compile time: every operation's shape and element type.
// (The values are compared with the Tensor API in test_fixed_values.cpp.)
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <type_traits>

#include <tempura/tempura.hpp>

// Not an anonymous namespace: the functions below are declared and never defined.
namespace fixed_shapes {

using tempura::FixedTensor;
using tempura::keepdim;

template <int64_t... D>
using F = FixedTensor<float, D...>;
template <int64_t... D>
using I = FixedTensor<int32_t, D...>;
template <int64_t... D>
using B = FixedTensor<bool, D...>;

// Declared only: values to take decltype of.
F<2, 3> f23();
F<3> f3();
F<3, 1> f31();
F<4, 1, 3> f413();
F<2, 1> f21();
F<> f0();
F<4, 3> f43();
F<3, 5> f35();
F<2, 1, 4, 3> f2143();
F<5, 3, 2> f532();
I<2, 3> i23();
B<2, 3> b23();
B<3> b3();

template <class A, class Want>
constexpr bool is = std::is_same_v<A, Want>;

} // namespace fixed_shapes

using namespace fixed_shapes; // a test file, not a header

// ---- compile-time properties
// ---------------------------------------------------------------------
static_assert(F<2, 3>::shape() == std::array<int64_t, 2>{2, 3});
static_assert(F<>::shape().empty());
static_assert(F<2, 3>::ndim() == 2 && F<2, 3>::numel() == 6 && F<>::numel() == 1);
static_assert(F<2, 0, 3>::numel() == 0);
static_assert(F<2, 3>::dtype() == tempura::DType::Float32);
static_assert(I<2>::dtype() == tempura::DType::Int32 && B<2>::dtype() == tempura::DType::Bool);
static_assert(FixedTensor<double, 1>::dtype() == tempura::DType::Float64);
static_assert(FixedTensor<uint8_t, 1>::dtype() == tempura::DType::UInt8);
// shape() is usable in constant expressions, also through an object.
constexpr auto kShape = decltype(f2143())::shape();
static_assert(kShape[0] == 2 && kShape[3] == 3);

// ---- elementwise and broadcasting
// ----------------------------------------------------------------
static_assert(is<decltype(f23() + f3()), F<2, 3>>);
static_assert(is<decltype(f3() - f23()), F<2, 3>>);
static_assert(is<decltype(f413() * f21()), F<4, 2, 3>>);
static_assert(is<decltype(f0() / f23()), F<2, 3>>);
static_assert(is<decltype(f23() + 1.0f), F<2, 3>>);
static_assert(is<decltype(2 * f23()), F<2, 3>>);
static_assert(is<decltype(i23() / 2), I<2, 3>>);
static_assert(is<decltype(f23() < f3()), B<2, 3>>);
static_assert(is<decltype(f23() <= 1.0f), B<2, 3>>);
static_assert(is<decltype(f31() > f3()), B<3, 3>>);
static_assert(is<decltype(1.0f >= f23()), B<2, 3>>);
static_assert(is<decltype(i23() == i23()), B<2, 3>>);
static_assert(is<decltype(b23() != b3()), B<2, 3>>);
static_assert(is<decltype(-f23()), F<2, 3>>);
static_assert(is<decltype(!b23()), B<2, 3>>);
static_assert(is<decltype(f23().exp().log().sqrt().sin().cos().tanh().sigmoid()), F<2, 3>>);
static_assert(is<decltype(f23().exp2().log2().reciprocal().relu().abs().square().neg()), F<2, 3>>);
static_assert(is<decltype(b23().logical_not()), B<2, 3>>);
static_assert(is<decltype(f31().maximum(f3())), F<3, 3>>);
static_assert(is<decltype(tempura::minimum(f23(), f3())), F<2, 3>>);
static_assert(is<decltype(f23().cast<int32_t>()), I<2, 3>>);
static_assert(is<decltype(f23().cast<bool>()), B<2, 3>>);
static_assert(is<decltype(tempura::where(b3(), f23(), f21())), F<2, 3>>);
static_assert(is<decltype(tempura::where(b23(), f3(), 0.0f)), F<2, 3>>);
static_assert(is<decltype(tempura::where(b3(), 1, i23())), I<2, 3>>);

// ---- movement
// ------------------------------------------------------------------------------------
static_assert(is<decltype(f23().reshape<3, 2>()), F<3, 2>>);
static_assert(is<decltype(f23().reshape<-1>()), F<6>>);
static_assert(is<decltype(f23().reshape<3, -1>()), F<3, 2>>);
static_assert(is<decltype(f23().reshape<1, -1, 1>()), F<1, 6, 1>>);
static_assert(is<decltype(F<1, 1>().reshape<>()), F<>>);
static_assert(is<decltype(F<0, 4>().reshape<0, 8>()), F<0, 8>>);
static_assert(is<decltype(F<0, 4>().reshape<2, 0>()), F<2, 0>>);
static_assert(is<decltype(f2143().permute<3, 0, 2, 1>()), F<3, 2, 4, 1>>);
static_assert(is<decltype(f23().permute<-1, 0>()), F<3, 2>>);
static_assert(is<decltype(f23().transpose()), F<3, 2>>);
static_assert(is<decltype(f2143().transpose<0, -1>()), F<3, 1, 4, 2>>);
static_assert(is<decltype(f2143().transpose<1, 1>()), F<2, 1, 4, 3>>);
static_assert(is<decltype(f31().expand<3, 4>()), F<3, 4>>);
static_assert(is<decltype(f3().expand<2, 3>()), F<2, 3>>);
static_assert(is<decltype(f31().expand<5, -1, 2>()), F<5, 3, 2>>);
static_assert(is<decltype(f23().pad<1, 1, 0, 2>()), F<4, 5>>);
static_assert(is<decltype(f23().shrink<0, 1, 1, 3>()), F<1, 2>>);
static_assert(is<decltype(f23().shrink<1, 1, 0, 3>()), F<0, 3>>);
static_assert(is<decltype(f23().flip<0>()), F<2, 3>>);
static_assert(is<decltype(f23().flip<0, -1>()), F<2, 3>>);
static_assert(is<decltype(f2143().squeeze<1>()), F<2, 4, 3>>);
static_assert(is<decltype(f31().squeeze<-1>()), F<3>>);
static_assert(is<decltype(F<1, 2, 1, 3, 1>().squeeze()), F<2, 3>>);
static_assert(is<decltype(F<1>().squeeze()), F<>>);
static_assert(is<decltype(f23().unsqueeze<0>()), F<1, 2, 3>>);
static_assert(is<decltype(f23().unsqueeze<2>()), F<2, 3, 1>>);
static_assert(is<decltype(f23().unsqueeze<-1>()), F<2, 3, 1>>);
static_assert(is<decltype(f23().unsqueeze<-2>()), F<2, 1, 3>>);
static_assert(is<decltype(f0().unsqueeze<0>()), F<1>>);
static_assert(is<decltype(f2143().flatten()), F<24>>);
static_assert(is<decltype(f23().contiguous()), F<2, 3>>);
static_assert(is<decltype(tempura::cat(f23(), f23())), F<4, 3>>);
static_assert(is<decltype(tempura::cat<1>(f23(), F<2, 1>(), F<2, 4>())), F<2, 8>>);
static_assert(is<decltype(tempura::cat<-1>(f23(), F<2, 2>())), F<2, 5>>);
static_assert(is<decltype(tempura::cat<0>(f3())), F<3>>);

// ---- reductions
// ----------------------------------------------------------------------------------
static_assert(is<decltype(f23().sum()), F<>>);
static_assert(is<decltype(f23().sum(keepdim)), F<1, 1>>);
static_assert(is<decltype(f23().sum<0>()), F<3>>);
static_assert(is<decltype(f23().sum<1>()), F<2>>);
static_assert(is<decltype(f23().sum<-1>(keepdim)), F<2, 1>>);
static_assert(is<decltype(f2143().sum<0, 2>()), F<1, 3>>);
static_assert(is<decltype(f2143().sum<3, 0>(keepdim)), F<1, 1, 4, 1>>);
static_assert(is<decltype(f0().sum()), F<>>);
static_assert(is<decltype(f23().prod<0>()), F<3>>);
static_assert(is<decltype(f23().max<1>()), F<2>>);
static_assert(is<decltype(f23().min<0>(keepdim)), F<1, 3>>);
static_assert(is<decltype(f23().mean()), F<>>);
static_assert(is<decltype(i23().mean<1>()), F<2>>); // mean of integers is float32
static_assert(is<decltype(FixedTensor<double, 2>().mean()), FixedTensor<double>>);
static_assert(is<decltype(b23().sum<0>()), I<3>>); // bool counts in int32
static_assert(is<decltype(b23().prod()), I<>>);
static_assert(is<decltype(b23().max<1>()), B<2>>);
static_assert(is<decltype(i23().sum<1>()), I<2>>);
static_assert(is<decltype(f23().argmax<1>()), I<2>>);
static_assert(is<decltype(f23().argmax<0>(keepdim)), I<1, 3>>);
static_assert(is<decltype(f23().argmin<-1>()), I<2>>);
static_assert(is<decltype(i23().argmax<-2>()), I<3>>);

// ---- linear algebra and friends: the four dot rules, vector-vector and batched
// -------------------
static_assert(is<decltype(f43().dot(f35())), F<4, 5>>);              // [M,K]@[K,N]
static_assert(is<decltype(F<4>().dot(f43())), F<3>>);                // [K]@[K,N]
static_assert(is<decltype(f43().dot(f3())), F<4>>);                  // [M,K]@[K]
static_assert(is<decltype(f3().dot(f3())), F<>>);                    // [K]@[K]
static_assert(is<decltype(f2143().dot(f532())), F<2, 5, 4, 2>>);     // batched, broadcast
static_assert(is<decltype(F<7, 4, 3>().matmul(f35())), F<7, 4, 5>>); // batch on one side
static_assert(is<decltype(f3().matmul(F<6, 3, 2>())), F<6, 2>>);     // vector @ batch
static_assert(is<decltype(F<6, 2, 3>().matmul(f3())), F<6, 2>>);     // batch @ vector
static_assert(is<decltype(f23().softmax()), F<2, 3>>);
static_assert(is<decltype(f23().softmax<0>()), F<2, 3>>);
static_assert(is<decltype(f23().log_softmax<-2>()), F<2, 3>>);

// ---- creation
// ------------------------------------------------------------------------------------
static_assert(is<decltype(F<5>::arange()), F<5>>);
static_assert(is<decltype(I<3, 3>::eye()), I<3, 3>>);
static_assert(is<decltype(F<2, 3>::full(1.5f)), F<2, 3>>);
static_assert(is<decltype(F<1, 1>().item()), float>);
static_assert(is<decltype(I<>().item()), int32_t>);
static_assert(is<decltype(f23().to_vector()), std::vector<float>>);
static_assert(is<decltype(b23().to_vector()), std::vector<bool>>);
static_assert(is<decltype(f23().to_vector<int64_t>()), std::vector<int64_t>>);
static_assert(is<decltype(f23().tensor()), tempura::Tensor>);

TEST_CASE("fixed: result shapes are computed at compile time") {
    // Everything above is a static_assert; this case only records that the file compiled.
    CHECK(F<2, 3>::shape_vector() == tempura::Shape{2, 3});
}
