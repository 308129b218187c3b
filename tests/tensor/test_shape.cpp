// Tensor shapes and dtypes, without running anything: shape inference of every op (checked
// against tensor_shape() of the graph), and every user error with its exact message.
#include <doctest/doctest.h>

#include "../error_at.hpp"
#include "../support.hpp"

#include <string>
#include <vector>

#include <tempura/tempura.hpp>
#include <tempura/tensor/graph.hpp>

namespace {

using tempura::DType;
using tempura::Shape;
using tempura::Tensor;

// The tensor's own shape agrees with the one derived from its graph.
Shape checked_shape(const Tensor& t) {
    CHECK(tempura::tensor_shape(t.uop()) == t.shape());
    CHECK(t.uop().dtype() == t.dtype());
    return t.shape();
}

Tensor f32(Shape s) { return Tensor::zeros(std::move(s)); }

} // namespace

TEST_CASE("shape helpers") {
    CHECK(tempura::shape_str({2, 3}) == "[2, 3]");
    CHECK(tempura::shape_str({}) == "[]");
    CHECK(tempura::shape_str({7}) == "[7]");
    CHECK(tempura::numel({2, 3, 4}) == 24);
    CHECK(tempura::numel({}) == 1);
    CHECK(tempura::numel({3, 0}) == 0);
    CHECK(tempura::broadcast_shapes({2, 3}, {3}) == Shape{2, 3});
    CHECK(tempura::broadcast_shapes({2, 1}, {1, 4}) == Shape{2, 4});
    CHECK(tempura::broadcast_shapes({}, {5, 1}) == Shape{5, 1});
    CHECK(tempura::broadcast_shapes({1}, {0}) == Shape{0});
    CHECK(tempura::broadcast_shapes({4, 1, 3}, {2, 1}) == Shape{4, 2, 3});
    CHECK(error_of([] {
              tempura::broadcast_shapes({2, 3}, {4});
          }) == "[broadcast] shapes [2, 3] and [4] cannot be broadcast");
    CHECK(error_of([] {
              tempura::numel({1LL << 40, 1LL << 40});
          }) == "[shape] [1099511627776, 1099511627776] has too many elements");
}

TEST_CASE("creation: shapes and dtypes") {
    CHECK(checked_shape(Tensor::zeros({2, 3})) == Shape{2, 3});
    CHECK(Tensor::zeros({2, 3}).dtype() == DType::Float32);
    CHECK(Tensor::ones({4}, DType::Int32).dtype() == DType::Int32);
    CHECK(Tensor::full({2}, 7).dtype() == DType::Int32);
    CHECK(Tensor::full({2}, 2.5).dtype() == DType::Float32); // double literals: default float
    CHECK(Tensor::full({2}, 2.5f).dtype() == DType::Float32);
    CHECK(Tensor::full({2}, true).dtype() == DType::Bool);
    CHECK(Tensor::full({2}, int64_t{3}).dtype() == DType::Int64);
    CHECK(Tensor::full({2}, 1.5, DType::Float64).dtype() == DType::Float64);
    CHECK(checked_shape(Tensor::full({}, 1.0f)) == Shape{});
    CHECK(Tensor::full({}, 1.0f).uop().op() == tempura::Op::Const);
    CHECK(checked_shape(Tensor::full({0, 3}, 1.0f)) == Shape{0, 3});
    CHECK(checked_shape(Tensor::arange(5)) == Shape{5});
    CHECK(Tensor::arange(5).dtype() == DType::Float32);
    CHECK(checked_shape(Tensor::eye(3)) == Shape{3, 3});
    CHECK(Tensor::eye(3).dtype() == DType::Float32);

    CHECK(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).dtype() == DType::Float32);
    CHECK(Tensor::from_vector<double>({1, 2}, {2}).dtype() == DType::Float64);
    CHECK(Tensor::from_vector<int32_t>({1, 2}, {2}).dtype() == DType::Int32);
    CHECK(Tensor::from_vector<int64_t>({1, 2}, {2}).dtype() == DType::Int64);
    CHECK(Tensor::from_vector<bool>({true, false}, {2}).dtype() == DType::Bool);
    CHECK(Tensor::from_vector<uint8_t>({1, 2}, {2}).dtype() == DType::UInt8);
    CHECK(Tensor::from_vector<float>({1, 2, 3}).shape() == Shape{3});
    CHECK(checked_shape(Tensor::from_vector<float>({4}, {})) == Shape{});
    CHECK(checked_shape(Tensor::from_vector<float>({}, {0, 2})) == Shape{0, 2});
    CHECK(Tensor::from_vector<float>({1, 2}, {2}, DType::Float16).dtype() == DType::Float16);
    CHECK(Tensor().shape() == Shape{});
    CHECK(Tensor().dtype() == DType::Float32);

    auto t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK(t.numel() == 6);
    CHECK(t.ndim() == 2);
    CHECK(t.is_realized());
    CHECK(t.kernels().empty());
    CHECK_FALSE((t + t).is_realized());
}

TEST_CASE("creation: errors") {
    CHECK(error_of([] {
              Tensor::from_vector<float>({1, 2, 3, 4, 5}, {2, 3});
          }) ==
          at_line(__LINE__ - 3, "[from_vector] 5 values do not fill shape [2, 3] (6 elements)"));
    CHECK(error_of([] { Tensor::from_vector<int32_t>({1}, {}); }) == "<no error>");
    CHECK(error_of([] {
              Tensor::from_vector<float>({1, 2}, {});
          }) == at_line(__LINE__ - 2, "[from_vector] 2 values do not fill shape [] (1 elements)"));
    CHECK(error_of([] {
              Tensor::from_vector<float>({1, 2}, {2, -1});
          }) == at_line(__LINE__ - 2, "[from_vector] negative dimension in [2, -1]"));
    CHECK(error_of([] { Tensor::from_vector<float>({1}, {1}, DType::Index); }) ==
          at_line(__LINE__ - 1, "[from_vector] no tensors of dtype index"));
    CHECK(error_of([] {
              Tensor::zeros({2, -3});
          }) == at_line(__LINE__ - 2, "[zeros] negative dimension in [2, -3]"));
    CHECK(error_of([] { Tensor::full({-1}, 1.0f); }) ==
          at_line(__LINE__ - 1, "[full] negative dimension in [-1]"));
    CHECK(error_of([] { Tensor::arange(-2); }) == at_line(__LINE__, "[arange] negative length -2"));
    CHECK(error_of([] { Tensor::eye(-1); }) == at_line(__LINE__, "[eye] negative size -1"));
    CHECK(error_of([] { Tensor::zeros({2}, DType::Void); }) ==
          at_line(__LINE__ - 1, "[zeros] no tensors of dtype void"));
}

TEST_CASE("elementwise: broadcasting shapes") {
    CHECK(checked_shape(f32({2, 3}) + f32({3})) == Shape{2, 3});
    CHECK(checked_shape(f32({2, 1}) * f32({1, 4})) == Shape{2, 4});
    CHECK(checked_shape(f32({}) - f32({5})) == Shape{5});
    CHECK(checked_shape(f32({4, 1, 3}) / f32({2, 1})) == Shape{4, 2, 3});
    CHECK(checked_shape(f32({2, 3}) + 1.0f) == Shape{2, 3});
    CHECK(checked_shape(2 * f32({2, 3})) == Shape{2, 3});
    CHECK(checked_shape(f32({0, 3}) + f32({1, 3})) == Shape{0, 3});
    CHECK(checked_shape(f32({3}).exp().log().sqrt().sin().cos()) == Shape{3});
    CHECK(checked_shape(f32({3}).relu().sigmoid().tanh().abs().reciprocal()) == Shape{3});
    CHECK(checked_shape(tempura::where(f32({2, 1}) < f32({3}), f32({}), f32({1, 3}))) ==
          Shape{2, 3});
    CHECK(checked_shape(f32({2}).cast(DType::Int32)) == Shape{2});
}

TEST_CASE("elementwise: dtypes") {
    auto a = f32({2});
    auto i = Tensor::zeros({2}, DType::Int32);
    CHECK((a + a).dtype() == DType::Float32);
    CHECK((i * i).dtype() == DType::Int32);
    CHECK((a < a).dtype() == DType::Bool);
    CHECK((a <= a).dtype() == DType::Bool);
    CHECK((a > 1.0f).dtype() == DType::Bool);
    CHECK((1 >= i).dtype() == DType::Bool);
    CHECK((a == a).dtype() == DType::Bool);
    CHECK((i != 3).dtype() == DType::Bool);
    CHECK((i + 2.7).dtype() == DType::Int32); // the scalar takes the tensor's dtype
    CHECK((a + 2).dtype() == DType::Float32);
    CHECK(a.cast(DType::Int64).dtype() == DType::Int64);
    CHECK(a.argmax(0).dtype() == DType::Int32);
    CHECK(i.mean().dtype() == DType::Float32);
    CHECK((a < a).sum().dtype() == DType::Int32);
}

TEST_CASE("elementwise: errors") {
    auto a = f32({2, 3});
    auto i = Tensor::zeros({2, 3}, DType::Int32);
    auto b = Tensor::zeros({2, 3}, DType::Bool);
    CHECK(error_of([&] { (void)(a + i); }) ==
          at_line(__LINE__ - 1, "[add] dtype mismatch: float32 and int32"));
    CHECK(error_of([&] { (void)(a - i); }) ==
          at_line(__LINE__ - 1, "[sub] dtype mismatch: float32 and int32"));
    CHECK(error_of([&] { (void)(i * a); }) ==
          at_line(__LINE__ - 1, "[mul] dtype mismatch: int32 and float32"));
    CHECK(error_of([&] { (void)(a / i); }) ==
          at_line(__LINE__ - 1, "[div] dtype mismatch: float32 and int32"));
    CHECK(error_of([&] { (void)(a < i); }) ==
          at_line(__LINE__ - 1, "[less] dtype mismatch: float32 and int32"));
    CHECK(error_of([&] { (void)(a <= i); }) ==
          at_line(__LINE__ - 1, "[less_equal] dtype mismatch: float32 and int32"));
    CHECK(error_of([&] { (void)(a > i); }) ==
          at_line(__LINE__ - 1, "[greater] dtype mismatch: float32 and int32"));
    CHECK(error_of([&] { (void)(a >= i); }) ==
          at_line(__LINE__ - 1, "[greater_equal] dtype mismatch: float32 and int32"));
    CHECK(error_of([&] { (void)(a == i); }) ==
          at_line(__LINE__ - 1, "[equal] dtype mismatch: float32 and int32"));
    CHECK(error_of([&] { (void)(a != i); }) ==
          at_line(__LINE__ - 1, "[not_equal] dtype mismatch: float32 and int32"));
    CHECK(error_of([&] { (void)(a + f32({4})); }) ==
          at_line(__LINE__ - 1, "[broadcast] shapes [2, 3] and [4] cannot be broadcast"));
    CHECK(error_of([&] {
              (void)(a * f32({3, 2}));
          }) == at_line(__LINE__ - 2, "[broadcast] shapes [2, 3] and [3, 2] cannot be broadcast"));
    CHECK(error_of([&] { i.exp(); }) == at_line(__LINE__, "[exp] needs a float tensor, got int32"));
    CHECK(error_of([&] { i.log(); }) == at_line(__LINE__, "[log] needs a float tensor, got int32"));
    CHECK(error_of([&] { i.sqrt(); }) ==
          at_line(__LINE__ - 1, "[sqrt] needs a float tensor, got int32"));
    CHECK(error_of([&] { i.sin(); }) == at_line(__LINE__, "[sin] needs a float tensor, got int32"));
    CHECK(error_of([&] { i.cos(); }) == at_line(__LINE__, "[cos] needs a float tensor, got int32"));
    CHECK(error_of([&] { i.sigmoid(); }) ==
          at_line(__LINE__ - 1, "[sigmoid] needs a float tensor, got int32"));
    CHECK(error_of([&] { i.tanh(); }) ==
          at_line(__LINE__ - 1, "[tanh] needs a float tensor, got int32"));
    CHECK(error_of([&] { i.reciprocal(); }) ==
          at_line(__LINE__ - 1, "[reciprocal] needs a float tensor, got int32"));
    CHECK(error_of([&] { i.softmax(0); }) ==
          at_line(__LINE__ - 1, "[softmax] needs a float tensor, got int32"));
    CHECK(error_of([&] { (void)(b + b); }) ==
          at_line(__LINE__ - 1, "[add] not supported for bool tensors"));
    CHECK(error_of([&] { b.neg(); }) == at_line(__LINE__, "[neg] not supported for bool tensors"));
    CHECK(error_of([&] { a.logical_not(); }) ==
          at_line(__LINE__ - 1, "[logical_not] needs a bool tensor, got float32"));
    CHECK(error_of([&] { tempura::where(a, a, a); }) ==
          at_line(__LINE__ - 1, "[where] condition must be bool, got float32"));
    CHECK(error_of([&] { tempura::where(b, a, i); }) ==
          at_line(__LINE__ - 1, "[where] dtype mismatch: float32 and int32"));
    CHECK(error_of([&] { tempura::where(b, a, f32({4})); }) ==
          at_line(__LINE__ - 1, "[broadcast] shapes [2, 3] and [4] cannot be broadcast"));
    CHECK(error_of([&] { a.cast(DType::Index); }) ==
          at_line(__LINE__ - 1, "[cast] no tensors of dtype index"));
    CHECK(error_of([&] { a.cast(DType::Float32.vec(4)); }) ==
          at_line(__LINE__ - 1, "[cast] no tensors of dtype float32x4"));
    CHECK(error_of([&] { a.maximum(i); }) ==
          at_line(__LINE__ - 1, "[maximum] dtype mismatch: float32 and int32"));
}

TEST_CASE("movement: shapes") {
    auto t = f32({2, 3, 4});
    CHECK(checked_shape(t.reshape({6, 4})) == Shape{6, 4});
    CHECK(checked_shape(t.reshape({-1, 4})) == Shape{6, 4});
    CHECK(checked_shape(t.reshape({2, -1})) == Shape{2, 12});
    CHECK(checked_shape(t.reshape({24})) == Shape{24});
    CHECK(checked_shape(f32({1}).reshape({})) == Shape{});
    CHECK(checked_shape(f32({}).reshape({1, 1})) == Shape{1, 1});
    CHECK(checked_shape(f32({0, 3}).reshape({3, 0})) == Shape{3, 0});
    CHECK(checked_shape(t.permute({2, 0, 1})) == Shape{4, 2, 3});
    CHECK(checked_shape(t.permute({-1, 0, 1})) == Shape{4, 2, 3});
    CHECK(checked_shape(t.transpose(0, 2)) == Shape{4, 3, 2});
    CHECK(checked_shape(t.transpose()) == Shape{2, 4, 3});
    CHECK(checked_shape(f32({3, 1}).expand({3, 5})) == Shape{3, 5});
    CHECK(checked_shape(f32({3, 1}).expand({2, 3, 5})) == Shape{2, 3, 5});
    CHECK(checked_shape(f32({3, 1}).expand({-1, 5})) == Shape{3, 5});
    CHECK(checked_shape(f32({3, 1}).expand({3, 0})) == Shape{3, 0});
    CHECK(checked_shape(t.pad({{1, 2}, {0, 0}, {3, 1}})) == Shape{5, 3, 8});
    CHECK(checked_shape(t.shrink({{0, 1}, {1, 3}, {2, 2}})) == Shape{1, 2, 0});
    CHECK(checked_shape(t.flip({0, -1})) == Shape{2, 3, 4});
    CHECK(checked_shape(f32({2, 1, 3}).squeeze(1)) == Shape{2, 3});
    CHECK(checked_shape(f32({2, 1, 3}).squeeze(-2)) == Shape{2, 3});
    CHECK(checked_shape(f32({1, 2, 1}).squeeze()) == Shape{2});
    CHECK(checked_shape(f32({2, 3}).unsqueeze(0)) == Shape{1, 2, 3});
    CHECK(checked_shape(f32({2, 3}).unsqueeze(2)) == Shape{2, 3, 1});
    CHECK(checked_shape(f32({2, 3}).unsqueeze(-1)) == Shape{2, 3, 1});
    CHECK(checked_shape(f32({2, 3}).unsqueeze(-3)) == Shape{1, 2, 3});
    CHECK(checked_shape(t.flatten()) == Shape{24});
    CHECK(checked_shape(t.contiguous()) == Shape{2, 3, 4});
    CHECK(checked_shape(Tensor::cat({f32({2, 3}), f32({4, 3})}, 0)) == Shape{6, 3});
    CHECK(checked_shape(Tensor::cat({f32({2, 3}), f32({2, 1}), f32({2, 2})}, -1)) == Shape{2, 6});
    CHECK(checked_shape(Tensor::cat({f32({2, 3}), f32({0, 3})}, 0)) == Shape{2, 3});
}

TEST_CASE("movement: errors") {
    auto t = f32({2, 3});
    CHECK(error_of([&] {
              t.reshape({4, 2});
          }) == at_line(__LINE__ - 2,
                        "[reshape] cannot reshape [2, 3] (6 elements) into [4, 2] (8 elements)"));
    CHECK(error_of([&] {
              t.reshape({4, -1});
          }) == at_line(__LINE__ - 2, "[reshape] cannot reshape [2, 3] (6 elements) into [4, -1]"));
    CHECK(error_of([&] {
              t.reshape({-1, -1});
          }) == at_line(__LINE__ - 2, "[reshape] more than one -1 in [-1, -1]"));
    CHECK(error_of([&] {
              t.reshape({2, -3});
          }) == at_line(__LINE__ - 2, "[reshape] invalid dimension -3 in [2, -3]"));
    CHECK(error_of([&] {
              f32({0, 3}).reshape({0, -1});
          }) == at_line(__LINE__ - 2, "[reshape] cannot reshape [0, 3] (0 elements) into [0, -1]"));
    CHECK(error_of([&] {
              t.permute({0, 0});
          }) == at_line(__LINE__ - 2, "[permute] [0, 0] is not a permutation of 2 axes"));
    CHECK(error_of([&] { t.permute({0}); }) ==
          at_line(__LINE__ - 1, "[permute] [0] is not a permutation of 2 axes"));
    CHECK(error_of([&] {
              t.permute({0, 2});
          }) == at_line(__LINE__ - 2, "[permute] [0, 2] is not a permutation of 2 axes"));
    CHECK(error_of([&] { t.transpose(0, 2); }) ==
          at_line(__LINE__ - 1, "[transpose] axis 2 is out of range for 2 dims"));
    CHECK(error_of([&] {
              t.expand({4, 3});
          }) == at_line(__LINE__ - 2, "[expand] cannot expand [2, 3] to [4, 3]"));
    CHECK(error_of([&] { t.expand({3}); }) ==
          at_line(__LINE__ - 1, "[expand] cannot expand [2, 3] to [3]"));
    CHECK(error_of([&] {
              t.expand({-1, 2, 3});
          }) == at_line(__LINE__ - 2, "[expand] cannot expand [2, 3] to [-1, 2, 3]"));
    CHECK(error_of([&] {
              t.pad({{1, 1}});
          }) == at_line(__LINE__ - 2, "[pad] needs 2 (before, after) pairs for [2, 3], got 1"));
    CHECK(error_of([&] {
              t.pad({{0, 0}, {-1, 2}});
          }) == at_line(__LINE__ - 2, "[pad] negative padding (-1, 2) on axis 1"));
    CHECK(error_of([&] {
              t.shrink({{0, 1}});
          }) == at_line(__LINE__ - 2, "[shrink] needs 2 (begin, end) pairs for [2, 3], got 1"));
    CHECK(error_of([&] {
              t.shrink({{0, 1}, {1, 4}});
          }) == at_line(__LINE__ - 2, "[shrink] (1, 4) is out of range for axis 1 of size 3"));
    CHECK(error_of([&] {
              t.shrink({{2, 1}, {0, 3}});
          }) == at_line(__LINE__ - 2, "[shrink] (2, 1) is out of range for axis 0 of size 2"));
    CHECK(error_of([&] {
              t.shrink({{-1, 1}, {0, 3}});
          }) == at_line(__LINE__ - 2, "[shrink] (-1, 1) is out of range for axis 0 of size 2"));
    CHECK(error_of([&] { t.flip({2}); }) ==
          at_line(__LINE__ - 1, "[flip] axis 2 is out of range for 2 dims"));
    CHECK(error_of([&] {
              t.flip({0, -2});
          }) == at_line(__LINE__ - 2, "[flip] axis -2 is repeated in [0, -2]"));
    CHECK(error_of([&] { t.squeeze(0); }) ==
          at_line(__LINE__ - 1, "[squeeze] axis 0 has size 2, not 1"));
    CHECK(error_of([&] { t.squeeze(5); }) ==
          at_line(__LINE__ - 1, "[squeeze] axis 5 is out of range for 2 dims"));
    CHECK(error_of([&] { t.unsqueeze(3); }) ==
          at_line(__LINE__ - 1, "[unsqueeze] axis 3 is out of range for 2 dims"));
    CHECK(error_of([&] { t.unsqueeze(-4); }) ==
          at_line(__LINE__ - 1, "[unsqueeze] axis -4 is out of range for 2 dims"));
    CHECK(error_of([] { Tensor::cat({}, 0); }) ==
          at_line(__LINE__ - 1, "[cat] needs at least one tensor"));
    CHECK(error_of([&] {
              Tensor::cat({t, t}, 2);
          }) == at_line(__LINE__ - 2, "[cat] axis 2 is out of range for 2 dims"));
    CHECK(error_of([&] {
              Tensor::cat({t, f32({3, 3})}, 1);
          }) == at_line(__LINE__ - 2, "[cat] shapes [2, 3] and [3, 3] differ outside axis 1"));
    CHECK(error_of([&] {
              Tensor::cat({t, f32({3})}, 0);
          }) == at_line(__LINE__ - 2, "[cat] shapes [2, 3] and [3] differ outside axis 0"));
    CHECK(error_of([&] {
              Tensor::cat({t, Tensor::zeros({2, 3}, DType::Int32)}, 0);
          }) == at_line(__LINE__ - 2, "[cat] dtype mismatch: float32 and int32"));
    CHECK(error_of([] {
              Tensor::cat({f32({}), f32({})}, 0);
          }) == at_line(__LINE__ - 2, "[cat] axis 0 is out of range for 0 dims"));
}

TEST_CASE("reductions: shapes") {
    auto t = f32({2, 3, 4});
    CHECK(checked_shape(t.sum()) == Shape{});
    CHECK(checked_shape(t.sum({})) == Shape{});
    CHECK(checked_shape(t.sum({}, true)) == Shape{1, 1, 1});
    CHECK(checked_shape(t.sum(1)) == Shape{2, 4});
    CHECK(checked_shape(t.sum({1})) == Shape{2, 4});
    CHECK(checked_shape(t.sum(-1, true)) == Shape{2, 3, 1});
    CHECK(checked_shape(t.sum({0, 2})) == Shape{3});
    CHECK(checked_shape(t.sum({2, 0}, true)) == Shape{1, 3, 1});
    CHECK(checked_shape(t.prod(0)) == Shape{3, 4});
    CHECK(checked_shape(t.max(1)) == Shape{2, 4});
    CHECK(checked_shape(t.min({-1, -2})) == Shape{2});
    CHECK(checked_shape(t.mean(2, true)) == Shape{2, 3, 1});
    CHECK(checked_shape(t.argmax(1)) == Shape{2, 4});
    CHECK(checked_shape(t.argmax(-1, true)) == Shape{2, 3, 1});
    CHECK(checked_shape(t.argmin(0)) == Shape{3, 4});
    CHECK(checked_shape(t.softmax(1)) == Shape{2, 3, 4});
    CHECK(checked_shape(t.log_softmax(-1)) == Shape{2, 3, 4});
    CHECK(checked_shape(f32({}).sum()) == Shape{});
    CHECK(checked_shape(f32({0, 3}).sum(0)) == Shape{3});
}

TEST_CASE("reductions: errors") {
    auto t = f32({2, 3});
    CHECK(error_of([&] { t.sum(2); }) ==
          at_line(__LINE__ - 1, "[sum] axis 2 is out of range for 2 dims"));
    CHECK(error_of([&] {
              t.sum({0, -3});
          }) == at_line(__LINE__ - 2, "[sum] axis -3 is out of range for 2 dims"));
    CHECK(error_of([&] {
              t.sum({1, -1});
          }) == at_line(__LINE__ - 2, "[sum] axis -1 is repeated in [1, -1]"));
    CHECK(error_of([&] { t.prod(2); }) ==
          at_line(__LINE__ - 1, "[prod] axis 2 is out of range for 2 dims"));
    CHECK(error_of([&] { t.max(2); }) ==
          at_line(__LINE__ - 1, "[max] axis 2 is out of range for 2 dims"));
    CHECK(error_of([&] { t.min(-3); }) ==
          at_line(__LINE__ - 1, "[min] axis -3 is out of range for 2 dims"));
    CHECK(error_of([&] { t.mean(2); }) ==
          at_line(__LINE__ - 1, "[mean] axis 2 is out of range for 2 dims"));
    CHECK(error_of([&] { t.argmax(2); }) ==
          at_line(__LINE__ - 1, "[argmax] axis 2 is out of range for 2 dims"));
    CHECK(error_of([&] { t.argmin(2); }) ==
          at_line(__LINE__ - 1, "[argmin] axis 2 is out of range for 2 dims"));
    CHECK(error_of([&] {
              f32({0, 3}).argmax(0);
          }) == at_line(__LINE__ - 2, "[argmax] cannot reduce an empty axis of [0, 3]"));
    CHECK(error_of([&] { t.softmax(2); }) ==
          at_line(__LINE__ - 1, "[softmax] axis 2 is out of range for 2 dims"));
    CHECK(error_of([&] { t.log_softmax(-3); }) ==
          at_line(__LINE__ - 1, "[log_softmax] axis -3 is out of range for 2 dims"));
}

TEST_CASE("dot: the shape rules") {
    CHECK(checked_shape(f32({4, 3}).dot(f32({3, 5}))) == Shape{4, 5});
    CHECK(checked_shape(f32({3}).dot(f32({3, 5}))) == Shape{5});
    CHECK(checked_shape(f32({4, 3}).dot(f32({3}))) == Shape{4});
    CHECK(checked_shape(f32({3}).dot(f32({3}))) == Shape{});
    CHECK(checked_shape(f32({2, 4, 3}).matmul(f32({2, 3, 5}))) == Shape{2, 4, 5});
    CHECK(checked_shape(f32({2, 4, 3}).matmul(f32({3, 5}))) == Shape{2, 4, 5});
    CHECK(checked_shape(f32({4, 3}).matmul(f32({6, 3, 5}))) == Shape{6, 4, 5});
    CHECK(checked_shape(f32({2, 1, 4, 3}).matmul(f32({7, 3, 5}))) == Shape{2, 7, 4, 5});
    CHECK(checked_shape(f32({4, 0}).dot(f32({0, 5}))) == Shape{4, 5});
    CHECK(Tensor::zeros({2, 2}, DType::Int32).dot(Tensor::zeros({2}, DType::Int32)).dtype() ==
          DType::Int32);
}

TEST_CASE("dot: errors") {
    CHECK(error_of([] {
              f32({4, 3}).dot(f32({2, 5}));
          }) == at_line(__LINE__ - 2, "[dot] inner dimensions differ: [4, 3] @ [2, 5]"));
    CHECK(error_of([] {
              f32({4, 3}).matmul(f32({2, 5}));
          }) == at_line(__LINE__ - 2, "[dot] inner dimensions differ: [4, 3] @ [2, 5]"));
    CHECK(error_of([] { f32({3}).dot(f32({4})); }) ==
          at_line(__LINE__ - 1, "[dot] inner dimensions differ: [3] @ [4]"));
    CHECK(error_of([] {
              f32({4, 3}).dot(f32({2}));
          }) == at_line(__LINE__ - 2, "[dot] inner dimensions differ: [4, 3] @ [2]"));
    CHECK(error_of([] { f32({}).dot(f32({3})); }) ==
          at_line(__LINE__ - 1, "[dot] needs tensors with at least 1 dim, got [] @ [3]"));
    CHECK(error_of([] {
              f32({2, 4, 3}).dot(f32({3, 3, 5}));
          }) == at_line(__LINE__ - 2, "[dot] batch dimensions differ: [2, 4, 3] @ [3, 3, 5]"));
    CHECK(error_of([] { f32({3}).dot(Tensor::zeros({3}, DType::Int32)); }) ==
          at_line(__LINE__ - 1, "[dot] dtype mismatch: float32 and int32"));
    CHECK(error_of([] { Tensor::zeros({3}, DType::Bool).dot(Tensor::zeros({3}, DType::Bool)); }) ==
          at_line(__LINE__ - 1, "[dot] not supported for bool tensors"));
}

TEST_CASE("item: errors") {
    auto t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK(error_of([&] { t.item<float>(); }) ==
          "[item] tensor of shape [2, 3] has 6 elements, not 1");
    CHECK(error_of([] { Tensor::from_vector<float>({}, {0}).item<float>(); }) ==
          "[item] tensor of shape [0] has 0 elements, not 1");
    // A realized one-element tensor needs no kernel.
    CHECK(Tensor::from_vector<float>({2.5f}, {1, 1}).item<float>() == 2.5f);
    CHECK(Tensor::from_vector<int32_t>({-7}, {}).item<int32_t>() == -7);
}

TEST_CASE("tensor_shape: graphs that break the contract") {
    using tempura::Op;
    using tempura::UOp;
    auto x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).uop();
    CHECK(tempura::tensor_shape(x) == Shape{2, 3});
    CHECK(tempura::tensor_shape(x.src(0)) == Shape{6});
    CHECK(error_of([&] {
              tempura::tensor_shape(UOp::make(Op::Reshape, DType::Float32, {x}, Shape{4}));
          }) == "[tensor_shape] RESHAPE of [2, 3] into [4] changes the number of elements");
    CHECK(error_of([&] {
              tempura::tensor_shape(UOp::make(Op::Expand, DType::Float32, {x}, Shape{4, 3}));
          }) == "[tensor_shape] EXPAND cannot expand [2, 3] to [4, 3]");
    auto y = UOp::make(Op::Reshape, DType::Float32, {x}, Shape{3, 2});
    CHECK(error_of([&] {
              tempura::tensor_shape(UOp::alu(Op::Add, {x, y}));
          }) == "[tensor_shape] ADD operands have different shapes: [2, 3] and [3, 2]");
    CHECK(error_of([&] { tempura::tensor_shape(UOp::variable("n", 0, 4)); }) ==
          "[tensor_shape] DEFINE_VAR is not a tensor-level op");
}

TEST_CASE("tensor_shape: a CUSTOM_GRAD's arg names a known kind") {
    using tempura::Op;
    using tempura::UOp;
    auto x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).uop();
    auto cg = [&](tempura::Arg arg) {
        return tempura::tensor_shape(UOp::make(Op::CustomGrad, DType::Float32, {x, x, x}, arg));
    };
    CHECK(cg(std::monostate{}) == Shape{2, 3});                       // plain: g * d
    CHECK(cg(std::vector<int64_t>{1, 1, 0, 1, 1}) == Shape{2, 3});    // Conv, 1 dim
    CHECK(cg(std::vector<int64_t>{2, 2, 1, 1, 1, 1}) == Shape{2, 3}); // Windows, 2 dims
    CHECK(cg(std::vector<int64_t>{3, 2, 1, 1, 1, 1}) == Shape{2, 3}); // MaxPool, 2 dims
    CHECK(error_of([&] {
              cg(std::vector<int64_t>{7, 1});
          }) == "[tensor_shape] CUSTOM_GRAD arg [7, 1] does not start with a known kind (1 "
                "convolution, 2 window view, 3 max pool)");
    CHECK(error_of([&] { cg(std::vector<int64_t>{}); }) ==
          "[tensor_shape] CUSTOM_GRAD arg [] does not start with a known kind (1 convolution, 2 "
          "window view, 3 max pool)");
    CHECK(error_of([&] {
              cg(std::vector<int64_t>{1, 2, 0, 1});
          }) ==
          "[tensor_shape] CUSTOM_GRAD arg [1, 2, 0, 1] has the wrong length for its kind 1 and 2 "
          "dims");
    CHECK(error_of([&] { cg(int64_t{1}); }) ==
          "[tensor_shape] CUSTOM_GRAD needs no arg or a list of integers starting with its kind");
}

TEST_CASE("tensor_shape: deep graphs do not overflow the stack") {
    Tensor t = Tensor::from_vector<float>({1, 2}, {2});
    Tensor acc = t;
    for (int i = 0; i < 100000; ++i) acc = i % 2 ? acc + t : acc.reshape({1, 2}).exp().reshape({2});
    CHECK(tempura::tensor_shape(acc.uop()) == Shape{2});
}
