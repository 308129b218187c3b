// Realize-time behaviour at the edges: empty tensors (size-0 dims), 0-dim tensors, very deep
// elementwise chains, kernels with many inputs, and the errors that must come before any kernel
// runs. Values are compared with hard-coded results and with the reference interpreter.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <tempura/schedule/schedule.hpp>
#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

#include "../error_at.hpp"
#include "../support.hpp"

namespace {

using tempura::DType;
using tempura::Shape;
using tempura::Tensor;

Tensor f(std::vector<float> v, Shape s) { return Tensor::from_vector(v, s); }

Tensor empty(Shape s, DType dt = DType::Float32) {
    if (dt == DType::Int32) return Tensor::from_vector(std::vector<int32_t>{}, s);
    if (dt == DType::Bool) return Tensor::from_vector(std::vector<bool>{}, s);
    return Tensor::from_vector(std::vector<float>{}, s);
}

// Realizes t (reference taken first) and checks shape, emptiness and that it ran no kernel
// (unless `intermediates`: non-empty intermediate results may still be computed).
void check_empty(Tensor t, const Shape& shape, bool intermediates = false) {
    CAPTURE(tempura::shape_str(t.shape()));
    CHECK(t.shape() == shape);
    CHECK(t.numel() == 0);
    CHECK(tempura::reference_eval(t.uop()).empty());
    t.realize();
    CHECK(t.is_realized());
    if (!intermediates) CHECK(t.kernels().empty()); // nothing to compute
    CHECK(t.to_vector<float>().empty());
}

// Realizes t and compares with `want` exactly (NaN matches NaN) and with the reference.
void check_values(Tensor t, const std::vector<float>& want) {
    const std::vector<double> ref = tempura::reference_eval(t.uop());
    const std::vector<float> got = t.to_vector<float>();
    REQUIRE(got.size() == want.size());
    REQUIRE(ref.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        CAPTURE(i);
        if (std::isnan(want[i])) {
            CHECK(std::isnan(got[i]));
            CHECK(std::isnan(ref[i]));
        } else {
            CHECK(got[i] == want[i]);
            CHECK(ref[i] == static_cast<double>(want[i]));
        }
    }
}

} // namespace

TEST_CASE("realize edges: empty tensors realize to empty vectors without kernels") {
    const auto a = empty({0}), b = empty({0, 3}), c = empty({2, 0, 4});
    check_empty(a, {0});
    check_empty(a + 1.0f, {0});
    check_empty((b * b - 2.0f).exp(), {0, 3});
    check_empty(b + f({1, 2, 3}, {3}), {0, 3});    // broadcasting against an empty dim
    check_empty(f({1, 2, 3}, {1, 3}) + b, {0, 3}); // the other way round
    check_empty(c.relu().sqrt().sin(), {2, 0, 4});
    check_empty(where(b > 0.0f, b, 1.0f), {0, 3});
    check_empty(b.cast(DType::Int32), {0, 3});
    check_empty(empty({0, 2}, DType::Int32) * 3, {0, 2});
    check_empty(empty({3, 0}, DType::Bool).logical_not(), {3, 0});
    // Movement ops that keep the tensor empty.
    check_empty(b.transpose(), {3, 0});
    check_empty(b.reshape({3, 0, 5}), {3, 0, 5});
    check_empty(b.reshape({-1, 3}), {0, 3});
    check_empty(c.permute({2, 0, 1}), {4, 2, 0});
    check_empty(c.flip({0, 1, 2}), {2, 0, 4});
    check_empty(c.shrink({{1, 2}, {0, 0}, {1, 3}}), {1, 0, 2});
    check_empty(f({1, 2, 3, 4}, {2, 2}).shrink({{1, 1}, {0, 2}}), {0, 2}); // empty from non-empty
    check_empty(f({1, 2}, {2, 1}).expand({2, 0}), {2, 0});
    check_empty(c.unsqueeze(0).squeeze(0), {2, 0, 4});
    check_empty(b.pad({{0, 0}, {1, 1}}), {0, 5}); // still empty along the first dim
    // Reductions over a non-empty axis of an empty tensor stay empty.
    check_empty(b.sum(1), {0});
    check_empty(c.max(2), {2, 0});
    check_empty(c.argmax(2), {2, 0});
    check_empty(b.softmax(1), {0, 3});
    check_empty(b.log_softmax(1), {0, 3});
    // Softmax along the empty axis: the row max and row sum are [3, 1] (the identities), so their
    // kernels may run even though the result is empty.
    check_empty(empty({3, 0}).softmax(1), {3, 0}, true);
    check_empty(empty({3, 0}).log_softmax(-1), {3, 0}, true);
    // Matmul with an empty M or N.
    check_empty(empty({0, 4}).matmul(f(std::vector<float>(8, 1.0f), {4, 2})), {0, 2});
    check_empty(f(std::vector<float>(8, 1.0f), {2, 4}).matmul(empty({4, 0})), {2, 0});
    // Cat where everything is empty.
    check_empty(Tensor::cat({b, empty({0, 3})}, 0), {0, 3});
}

TEST_CASE("realize edges: reductions over an empty axis give the identity") {
    const auto b = empty({0, 3});
    check_values(b.sum(0), {0, 0, 0});
    check_values(b.prod(0), {1, 1, 1});
    // max and min have no identity: an empty axis raises (as NumPy and PyTorch do).
    CHECK(error_of([&] { b.max(0); }) ==
          at_line(__LINE__ - 1, "[max] cannot reduce an empty axis of [0, 3]"));
    CHECK(error_of([&] { b.min(0); }) ==
          at_line(__LINE__ - 1, "[min] cannot reduce an empty axis of [0, 3]"));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    check_values(b.mean(0), {nan, nan, nan}); // 0 / 0, as NumPy
    check_values(b.sum(), {0});
    check_values(b.sum(0, true), {0, 0, 0});
    check_values(empty({0}, DType::Int32).sum().cast(DType::Float32), {0});
    check_values(empty({0}, DType::Bool).sum().cast(DType::Float32), {0});
    // Matmul with K = 0: zeros.
    check_values(empty({2, 0}).matmul(empty({0, 3})), {0, 0, 0, 0, 0, 0});
    check_values(empty({0}).dot(empty({0})), {0});
    // Something built on top of an empty reduce still realizes.
    check_values(b.sum(0) + 1.0f, {1, 1, 1});
    check_values(b.sum(0).exp(), {1, 1, 1});
}

TEST_CASE("realize edges: padding and concatenating empty tensors") {
    // Every element of the result is padding: the (empty) input is never read.
    check_values(empty({0}).pad({{2, 1}}), {0, 0, 0});
    check_values(empty({0, 2}).pad({{1, 0}, {0, 0}}), {0, 0});
    check_values(empty({0, 2}).pad({{1, 0}, {0, 0}}) + 1.0f, {1, 1});
    // Cat with empty parts.
    check_values(Tensor::cat({empty({0}), f({1, 2}, {2}), empty({0}), f({3}, {1})}, 0), {1, 2, 3});
    check_values(Tensor::cat({f({1, 2}, {2, 1}), empty({2, 0}), f({3, 4}, {2, 1})}, 1),
                 {1, 3, 2, 4});
}

TEST_CASE("realize edges: 0-dim tensors") {
    Tensor s = Tensor::full({}, 3.0f);
    CHECK(s.shape() == Shape{});
    CHECK(s.numel() == 1);
    CHECK(s.ndim() == 0);
    Tensor t = s * 2.0f + 1.0f;
    CHECK(t.item<float>() == 7.0f);
    CHECK(t.kernels().size() == 1);
    CHECK(t.to_vector<float>() == std::vector<float>{7.0f});

    Tensor v = Tensor::from_vector(std::vector<float>{-2.5f}, Shape{});
    CHECK(v.is_realized());
    CHECK(v.item<float>() == -2.5f);
    check_values(v.abs().sqrt(), {std::sqrt(2.5f)});
    check_values(v.relu(), {0});
    check_values(v.sum(), {-2.5f}); // reducing all axes of a scalar: itself
    check_values(v.max({}), {-2.5f});
    check_values(v.mean(), {-2.5f});
    check_values(v.reshape({1, 1}), {-2.5f});
    check_values(v.unsqueeze(0).unsqueeze(-1), {-2.5f});
    check_values(v.reshape({1}).squeeze(0), {-2.5f});
    check_values(v.expand({2, 3}), {-2.5f, -2.5f, -2.5f, -2.5f, -2.5f, -2.5f});
    check_values(v + f({1, 2, 3}, {3}), {-1.5f, -0.5f, 0.5f});
    check_values(f({1, 2, 3}, {3}) - v, {3.5f, 4.5f, 5.5f});
    check_values(where(v < 0.0f, 1.0f, v), {1});
    check_values(v.cast(DType::Int32).cast(DType::Float32), {-2});
    check_values((v > -3.0f).cast(DType::Float32), {1});
    check_values(v.reshape({1}).softmax(0), {1});
    check_values(v.reshape({1}).log_softmax(0), {0});

    // A dot of two vectors is 0-dim.
    Tensor d = f({1, 2, 3}, {3}).dot(f({4, 5, 6}, {3}));
    CHECK(d.shape() == Shape{});
    CHECK(d.item<float>() == 32.0f);
    // A full reduction of a matrix is 0-dim, and builds on.
    Tensor m = f({1, 2, 3, 4}, {2, 2}).sum();
    CHECK(m.shape() == Shape{});
    check_values(m * m, {100});
    // Int and bool scalars.
    Tensor i = Tensor::full({}, 7, DType::Int32);
    CHECK((i / 2).item<int32_t>() == 3);
    CHECK((i * -1 / 2).item<int32_t>() == -3); // truncation toward zero
    Tensor bt = Tensor::full({}, true);
    CHECK((!bt).item<bool>() == false);
    // The default tensor is a float32 scalar 0.
    Tensor z;
    CHECK(z.shape() == Shape{});
    CHECK((z + 1.0f).item<float>() == 1.0f);
}

TEST_CASE("realize edges: a 1,000-deep elementwise chain is one kernel with the exact value") {
    Tensor x = f({0, 1, 2, 3}, {4});
    const Tensor one = f({1, 1, 1, 1}, {4});
    Tensor t = x;
    for (int i = 0; i < 1000; ++i) t = t + one;
    CHECK(tempura::schedule_graph(t.uop()).size() == 1);
    t.realize();
    CHECK(t.kernels().size() == 1);
    CHECK(t.to_vector<float>() == std::vector<float>{1000, 1001, 1002, 1003});

    // With scalars of varying value (integers: every partial sum is exact in float32).
    Tensor u = x;
    double want = 0;
    for (int i = 0; i < 1000; ++i) {
        const float c = static_cast<float>(i % 7) - 3.0f;
        u = u + c;
        want += c;
    }
    const std::vector<double> ref = tempura::reference_eval(u.uop());
    u.realize();
    CHECK(u.kernels().size() == 1);
    const std::vector<float> got = u.to_vector<float>();
    REQUIRE(got.size() == 4);
    for (int k = 0; k < 4; ++k) {
        CHECK(got[static_cast<size_t>(k)] == static_cast<float>(want + k));
        CHECK(ref[static_cast<size_t>(k)] == want + k);
    }

    // Alternating ops on an int tensor, 1,000 deep.
    Tensor n = Tensor::from_vector(std::vector<int32_t>{5, -5, 0}, {3});
    for (int i = 0; i < 500; ++i) n = (n + 3) - 2;
    n.realize();
    CHECK(n.kernels().size() == 1);
    CHECK(n.to_vector<int32_t>() == std::vector<int32_t>{505, 495, 500});
}

TEST_CASE("realize edges: one kernel reading many buffers") {
    // 100 distinct input buffers in one elementwise kernel (more than any small fixed array of
    // kernel arguments).
    std::vector<Tensor> ins;
    Tensor t = Tensor::zeros({3});
    float want = 0;
    for (int i = 0; i < 100; ++i) {
        const float v = static_cast<float>(i % 5);
        ins.push_back(f({v, 2 * v, -v}, {3}));
        t = t + ins.back();
        want += v;
    }
    t.realize();
    CHECK(t.kernels().size() == 1);
    CHECK(t.to_vector<float>() == std::vector<float>{want, 2 * want, -want});
}

TEST_CASE("realize edges: realizing twice, and building on realized tensors") {
    Tensor a = f({1, 2, 3, 4}, {2, 2});
    Tensor t = a * 2.0f;
    t.realize();
    const auto buf = t.buffer();
    CHECK(t.kernels().size() == 1);
    t.realize(); // a buffer already: nothing runs, the buffer stays
    CHECK(t.buffer() == buf);
    CHECK(t.to_vector<float>() == std::vector<float>{2, 4, 6, 8});
    // Copies share the graph; realizing one leaves the other lazy but equal.
    Tensor lazy = a + 1.0f;
    Tensor copy = lazy;
    lazy.realize();
    CHECK(lazy.is_realized());
    CHECK_FALSE(copy.is_realized());
    CHECK(copy.to_vector<float>() == lazy.to_vector<float>());
    // Inputs of a realized graph are not modified.
    CHECK(a.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
    check_values(t.transpose() + lazy, {4, 9, 8, 13});
}

TEST_CASE("realize edges: mistakes throw tempura::Error before any kernel runs") {
    const Tensor a = f({1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK_THROWS_AS(empty({2, 0}).argmax(1), tempura::Error); // argmax over an empty axis
    CHECK_THROWS_AS(a.item<float>(), tempura::Error);
    CHECK_THROWS_AS(empty({0}).item<float>(), tempura::Error);
    CHECK_THROWS_AS(a.reshape({4, -1}), tempura::Error);
    CHECK_THROWS_AS(empty({0, 3}).reshape({-1, 0}), tempura::Error); // -1 with a 0 elsewhere
    CHECK_THROWS_AS(a + f({1, 2}, {2}), tempura::Error);
    CHECK_THROWS_AS(a.matmul(a), tempura::Error);
    CHECK_THROWS_AS(a.sum(2), tempura::Error);
    CHECK_THROWS_AS(Tensor::full({}, 1.0f).sum(0), tempura::Error); // a 0-dim tensor has no axis 0
    CHECK_THROWS_AS(Tensor::full({}, 1.0f).softmax(0), tempura::Error);
    CHECK_THROWS_AS(Tensor::full({}, 1.0f).dot(a), tempura::Error);
    CHECK_THROWS_AS(a.shrink({{0, 3}, {0, 3}}), tempura::Error);
    CHECK_THROWS_AS(a.pad({{-1, 0}, {0, 0}}), tempura::Error);
    CHECK_THROWS_AS(a.expand({3, 3}), tempura::Error);
    CHECK_THROWS_AS(Tensor::cat({a, f({1, 2}, {1, 2})}, 0), tempura::Error);
    CHECK_THROWS_AS(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}), tempura::Error);
    // The tensor is usable after a failed operation.
    CHECK(a.sum().item<float>() == 21.0f);
}
