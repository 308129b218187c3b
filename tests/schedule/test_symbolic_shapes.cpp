// Symbolic shapes: Dim::variable / bind. One plan and one set of kernels serve every value of a
// variable; the values are checked against the reference interpreter; a variable's bounds reach
// the simplifier.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <tempura/backend/llvm_cpu.hpp>
#include <tempura/codegen/stages.hpp>
#include <tempura/schedule/schedule.hpp>
#include <tempura/schedule/symbolic_shapes.hpp>
#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

#include "../error_at.hpp"
#include "../support.hpp"

namespace {

using tempura::Dim;
using tempura::DType;
using tempura::Shape;
using tempura::Tensor;

std::vector<float> values(int64_t n, int64_t salt) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        v[static_cast<size_t>(i)] = static_cast<float>((i * 7 + salt * 5) % 13) * 0.1f - 0.6f;
    return v;
}

// The realized values of `t` against the reference interpreter on its graph.
void check_against_reference(Tensor& t) {
    const std::vector<double> ref = tempura::reference_eval(t.uop());
    const std::vector<float> got = t.realize().to_vector<float>();
    REQUIRE(got.size() == ref.size());
    for (size_t i = 0; i < got.size(); ++i)
        REQUIRE(std::fabs(static_cast<double>(got[i]) - ref[i]) <= 1e-5 * (1 + std::fabs(ref[i])));
}

size_t compiles() { return tempura::runtime::cpu_kernel_cache_stats().misses; }

} // namespace

TEST_CASE("symbolic shapes: the MLP for batch 1..256 compiles its kernels once") {
    tempura::clear_caches();
    const Dim batch = Dim::variable("batch", 1, 256);
    const Tensor w1 = Tensor::from_vector(values(16 * 32, 1), {16, 32});
    const Tensor b1 = Tensor::from_vector(values(32, 2), {32});
    const Tensor w2 = Tensor::from_vector(values(32 * 10, 3), {32, 10});
    const Tensor b2 = Tensor::from_vector(values(10, 4), {10});
    auto forward = [&](const Tensor& x) {
        return ((x.matmul(w1) + b1).relu().matmul(w2) + b2).softmax(1);
    };
    const size_t plans_before = tempura::plan_cache_stats().entries;
    size_t after_first = 0;
    size_t kernels = 0;
    for (int64_t b = 1; b <= 256; ++b) {
        const Tensor x = Tensor::from_vector(values(b * 16, b), {batch.bind(b), 16});
        CHECK(x.shape() == Shape{b, 16});
        Tensor y = forward(x);
        CHECK(y.shape() == Shape{b, 10});
        check_against_reference(y);
        if (b == 1) {
            after_first = compiles();
            kernels = y.kernels().size();
            // The loops over rows run to the variable: the kernels are named by it.
            for (const auto& k : y.kernels()) CHECK(k.name.find("batch") != std::string::npos);
        }
        CHECK(y.kernels().size() == kernels);
    }
    CHECK(kernels == 5); // two matmuls (with bias, relu), softmax's max, sum and output
    CHECK(compiles() == after_first);
    CHECK(tempura::plan_cache_stats().entries == plans_before + 1);
}

TEST_CASE("symbolic shapes: a result stays symbolic; sizes in the middle of a graph") {
    tempura::clear_caches();
    const Dim n = Dim::variable("n", 1, 64);
    size_t after_first = 0;
    // (Not 1: at 1, `y - y.sum(1, true)` has no EXPAND, [n, 1] and [n, 1] agreeing, which makes
    // a graph of another structure: a plan of its own. Its values are checked below.)
    for (int64_t v : {5, 2, 64, 17}) {
        Tensor x = Tensor::from_vector(values(v * 3, v), {n.bind(v), 3});
        Tensor h = (x * 2.0f).realize(); // the realized result keeps the variable
        // Flatten, reshape back, transpose, sum over the variable's axis, broadcast back.
        Tensor y = h.reshape({v * 3}).reshape({v, 3}).permute({1, 0});
        Tensor z = (y - y.sum(1, true)).permute({1, 0}) * x;
        check_against_reference(z);
        if (after_first == 0) after_first = compiles();
        CHECK(compiles() == after_first);
    }
    Tensor x = Tensor::from_vector(values(3, 1), {n.bind(1), 3});
    Tensor y = x.permute({1, 0});
    Tensor z = (y - y.sum(1, true)).permute({1, 0}) * x;
    check_against_reference(z);
}

TEST_CASE("symbolic shapes: the variable's bounds remove gates that cannot fire") {
    // x + c[:n], where c[:n] reads a padded c of 8 values: the pad's gate (i < 8) holds for
    // every i < n when n <= 8, and is gone from the kernel; with n up to 16 it stays.
    auto gates = [](int64_t max) {
        const Dim n = Dim::variable("n", 1, max);
        const Tensor x = Tensor::from_vector(values(5, 1), {n.bind(5)});
        const Tensor c = Tensor::from_vector(values(8, 2), {8});
        Tensor y = x + c.pad({{0, 8}}).shrink({{0, 5}});
        const std::vector<tempura::UOp> topo = y.uop().toposort();
        const tempura::SymbolicShapes sym = tempura::infer_symbolic_shapes(topo);
        REQUIRE(!sym.empty());
        const auto ks = tempura::schedule_graph(y.uop(), &sym);
        REQUIRE(ks.size() == 1);
        CHECK(ks[0].name == "E_n");
        int count = 0;
        const auto low = tempura::codegen::lower_kernel_opt(ks[0].name, ks[0].ast,
                                                            tempura::runtime::host_limits());
        for (const tempura::UOp& u : low.program)
            if ((u.op() == tempura::Op::Load && u.srcs().size() > 1) ||
                u.op() == tempura::Op::Where || u.op() == tempura::Op::If)
                ++count;
        check_against_reference(y);
        return count;
    };
    CHECK(gates(8) == 0);
    CHECK(gates(16) > 0);
}

TEST_CASE("symbolic shapes: errors") {
    CHECK(error_of([] { (void)Dim::variable("b", 0, 8); }) ==
          "[Dim] variable b needs 1 <= min <= max, got [0, 8]");
    const Dim b = Dim::variable("b", 1, 8);
    CHECK(error_of([&] { (void)b.bind(9); }) == "[Dim] b bound to 9, outside [1, 8]");
    CHECK(error_of([] { (void)Dim(3).bind(3); }) == "[Dim] 3 is not a variable");
    CHECK(error_of([&] {
              (void)Tensor::from_vector(values(4, 0), {b, 4});
          }) == at_line(__LINE__ - 2, "[from_vector] b is not bound"));
    // One variable, two values in one graph.
    const Tensor x = Tensor::from_vector(values(3, 0), {b.bind(3)});
    const Tensor y = Tensor::from_vector(values(4, 0), {b.bind(4)});
    CHECK(error_of([&] { (void)(x.sum() + y.sum()).realize(); }) ==
          "[realize] b is bound to 3 and to 4 in one graph");
}
