// Data-dependent indexing: gather, index_select and nn::embedding against hand-checked values
// and the reference interpreter; out-of-range indices (an error for a realized index, 0 for a
// computed one, never a read outside the buffer); kernel counts; the error messages.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include <tempura/codegen/opts.hpp>
#include <tempura/codegen/stages.hpp>
#include <tempura/schedule/schedule.hpp>
#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

#include "../error_at.hpp"
#include "../support.hpp"

namespace {

using tempura::DType;
using tempura::Shape;
using tempura::Tensor;
namespace nn = tempura::nn;

Tensor i32(const std::vector<int32_t>& v, Shape s) { return Tensor::from_vector(v, std::move(s)); }
Tensor i64(const std::vector<int64_t>& v, Shape s) { return Tensor::from_vector(v, std::move(s)); }
Tensor f32(const std::vector<float>& v, Shape s) { return Tensor::from_vector(v, std::move(s)); }

std::vector<float> values(Tensor t) { return t.to_vector<float>(); }

void check_reference(const Tensor& t) {
    const std::vector<double> ref = tempura::reference_eval(t.uop());
    const std::vector<float> got = Tensor(t).to_vector<float>();
    REQUIRE(ref.size() == got.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(static_cast<double>(got[i]) == ref[i]);
}

} // namespace

TEST_CASE("gather reads the element its index names, along either axis") {
    const Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK(values(x.gather(1, i32({2, 0, 1, 1}, {2, 2}))) == std::vector<float>{3, 1, 5, 5});
    CHECK(values(x.gather(0, i64({1, 0, 1}, {1, 3}))) == std::vector<float>{4, 2, 6});
    CHECK(values(x.gather(-1, i32({0, 0, 0, 2, 2, 2}, {2, 3}))) ==
          std::vector<float>{1, 1, 1, 6, 6, 6});
    Tensor g = x.gather(1, i32({2, 0, 1, 1}, {2, 2}));
    g.realize();
    CHECK(g.kernels().size() == 1);
    check_reference(x.gather(1, i32({2, 0, 1, 1}, {2, 2})));
}

TEST_CASE("a computed index out of range reads 0; a realized one is an error") {
    const Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
    const Tensor lazy = i32({2, -1, 3, 1}, {2, 2}) + 0;
    CHECK(values(x.gather(1, lazy)) == std::vector<float>{3, 0, 0, 5});
    check_reference(x.gather(1, lazy));
    CHECK(values(x.index_select(0, i32({1, 7, -3}, {3}) * 1)) ==
          std::vector<float>{4, 5, 6, 0, 0, 0, 0, 0, 0});
    CHECK_THROWS_WITH(
        x.gather(1, i32({2, 0, 3, 1}, {2, 2})),
        at_line(__LINE__ - 2, "[gather] index 3 is out of range for dim 1 of size 3").c_str());
    CHECK_THROWS_WITH(
        x.index_select(0, i32({-1}, {1})),
        at_line(__LINE__ - 2, "[index_select] index -1 is out of range for dim 0 of size 2")
            .c_str());
    CHECK_THROWS_WITH(
        nn::embedding(i32({4}, {1}), x),
        at_line(__LINE__ - 2, "[embedding] index 4 is out of range for dim 0 of size 2").c_str());
}

TEST_CASE("the gathered source and the index may be computed in the same kernel") {
    const Tensor x = f32({0, 1, 2, 3, 4, 5}, {6});
    // The source is exp(x), the index (5 - i) computed from a buffer: one kernel.
    Tensor g = x.exp().gather(0, 5 - i32({0, 2, 4}, {3}));
    g.realize();
    CHECK(g.kernels().size() == 1);
    check_reference(x.exp().gather(0, 5 - i32({0, 2, 4}, {3})));
    // An index that is a reduction (argmax per row: a max, then the first index reaching it,
    // one kernel with a loop for each) is computed once, in its own kernel, and read by the
    // gather.
    const Tensor m = f32({3, 9, 1, 7, 2, 8}, {2, 3});
    Tensor top = m.gather(1, m.argmax(1, true).cast(DType::Int32));
    top.realize();
    CHECK(values(top) == std::vector<float>{9, 8});
    CHECK(top.kernels().size() == 2);
}

TEST_CASE("index_select and embedding pick whole slices") {
    const Tensor x = Tensor::arange(12).reshape({3, 4});
    CHECK(values(x.index_select(0, i32({2, 0}, {2}))) ==
          std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3});
    CHECK(values(x.index_select(1, i64({3, 3, 0}, {3}))) ==
          std::vector<float>{3, 3, 0, 7, 7, 4, 11, 11, 8});
    const Tensor table = Tensor::arange(40).reshape({10, 4});
    Tensor e = nn::embedding(i32({3, 7, 3, 0}, {2, 2}), table);
    CHECK(e.shape() == Shape{2, 2, 4});
    CHECK(values(e) ==
          std::vector<float>{12, 13, 14, 15, 28, 29, 30, 31, 12, 13, 14, 15, 0, 1, 2, 3});
    check_reference(nn::embedding(i32({3, 7, 3, 0}, {2, 2}), table) * 2.0);
    // A large table: an embedding lookup reads only the rows it names.
    const int64_t v = 50000, d = 64;
    Tensor big = Tensor::arange(v * d).reshape({v, d});
    Tensor rows = nn::embedding(i32({49999, 0, 12345}, {3}), big);
    const std::vector<float> r = values(rows);
    CHECK(r[0] == static_cast<float>(49999 * d));
    CHECK(r[d] == 0);
    CHECK(r[2 * d + 5] == static_cast<float>(12345 * d + 5));
}

TEST_CASE("indexing errors name the op and the values") {
    const Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK_THROWS_WITH(
        x.gather(1, f32({0}, {1, 1})),
        at_line(__LINE__ - 2, "[gather] needs an Int32 or Int64 index, got float32").c_str());
    CHECK_THROWS_WITH(
        x.gather(1, i32({0}, {1})),
        at_line(__LINE__ - 2, "[gather] index of shape [1] needs 2 dims, as the source [2, 3]")
            .c_str());
    CHECK_THROWS_WITH(
        x.gather(1, i32({0, 0, 0}, {3, 1})),
        at_line(__LINE__ - 2,
                "[gather] index of shape [3, 1] is larger than the source [2, 3] in dim 0")
            .c_str());
    CHECK_THROWS_WITH(x.gather(2, i32({0}, {1, 1})),
                      at_line(__LINE__ - 1, "[gather] axis 2 is out of range for 2 dims").c_str());
    CHECK_THROWS_WITH(
        x.index_select(0, i32({0}, {1, 1})),
        at_line(__LINE__ - 2, "[index_select] needs a 1-D index, got shape [1, 1]").c_str());
    CHECK_THROWS_WITH(nn::embedding(i32({0}, {1}), f32({1}, {1})),
                      at_line(__LINE__ - 1, "[embedding] table must be [V, D], got [1]").c_str());
}

TEST_CASE("scatter_add adds each source element at its index, in order, in its own kernel") {
    const Tensor base = f32({1, 2, 3, 4, 5, 6}, {2, 3});
    const Tensor idx = i32({2, 0, 2, 1, 1, 1}, {2, 3});
    const Tensor src = f32({10, 20, 30, 40, 50, 60}, {2, 3});
    Tensor s = base.scatter_add(1, idx, src);
    s.realize();
    CHECK(values(s) == std::vector<float>{21, 2, 43, 4, 155, 6});
    CHECK(s.kernels().size() == 1);
    check_reference(base.scatter_add(1, idx, src));
    // Along axis 0, a source larger than the index (only the index's part is used).
    const Tensor big = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
    CHECK(values(Tensor::zeros({2, 3}).scatter_add(0, i64({1, 1, 0}, {1, 3}), big)) ==
          std::vector<float>{0, 0, 3, 1, 2, 0});
    // A computed base and source fuse into the scatter kernel; a computed index out of range
    // adds nothing.
    Tensor t =
        (base * 2.0).scatter_add(1, i32({0, 5, -2, 2, 2, 2}, {2, 3}) * 1, src.exp() * 0.0 + 1.0);
    t.realize();
    CHECK(values(t) == std::vector<float>{3, 4, 6, 8, 10, 15});
    CHECK(t.kernels().size() == 1);
    // The same index for every element (a broadcast constant): every addition lands.
    const Tensor ones = Tensor::ones({1000});
    const Tensor zero_idx = Tensor::zeros({1000}, DType::Int32);
    CHECK(values(Tensor::zeros({4}).scatter_add(0, zero_idx, ones)) ==
          std::vector<float>{1000, 0, 0, 0});
    // Integers.
    CHECK(Tensor::zeros({3}, DType::Int32)
              .scatter_add(0, i32({2, 2, 0}, {3}), i32({5, 6, 7}, {3}))
              .to_vector<int32_t>() == std::vector<int32_t>{7, 0, 11});
    CHECK_THROWS_WITH(
        base.scatter_add(1, i32({3}, {1, 1}), src),
        at_line(__LINE__ - 2, "[scatter_add] index 3 is out of range for dim 1 of size 3").c_str());
    CHECK_THROWS_WITH(
        base.scatter_add(1, idx, src.cast(DType::Float64)),
        at_line(__LINE__ - 2, "[scatter_add] dtype mismatch: float32 and float64").c_str());
    CHECK_THROWS_WITH(base.scatter_add(0, i32({0, 0, 0, 0}, {4, 1}), src),
                      at_line(__LINE__ - 1, "[scatter_add] index [4, 1] is larger than the "
                                            "source [2, 3] or than [2, 3] in dim 0")
                          .c_str());
}

TEST_CASE("an embedding layer trains: its gradient is a scatter_add of the output's") {
    // Tokens 0..4 must map to targets 2 * token through a [5, 1] table.
    Tensor table = Tensor::zeros({5, 1});
    table.requires_grad();
    nn::SGD opt({table}, 0.5);
    const Tensor tokens = i32({0, 1, 2, 3, 4, 4, 1}, {7});
    const Tensor target = f32({0, 2, 4, 6, 8, 8, 2}, {7, 1});
    for (int step = 0; step < 60; ++step) {
        opt.zero_grad();
        Tensor loss = nn::mse_loss(nn::embedding(tokens, table), target);
        loss.backward();
        opt.step();
    }
    const std::vector<float> t = values(table);
    for (int k = 0; k < 5; ++k) CHECK(std::fabs(t[static_cast<size_t>(k)] - 2.0f * k) < 1e-3f);
}

TEST_CASE("gather, embedding and scatter_add with a symbolic batch: right for every size") {
    const tempura::Dim batch = tempura::Dim::variable("batch", 1, 64);
    for (int64_t n : {2, 3, 5}) {
        CAPTURE(n);
        std::vector<float> xv;
        std::vector<int32_t> iv;
        for (int64_t i = 0; i < n; ++i) {
            for (int j = 0; j < 4; ++j) xv.push_back(static_cast<float>(i * 10 + j));
            iv.push_back(static_cast<int32_t>((i * 3) % 4));
        }
        const Tensor x = Tensor::from_vector(xv, {batch.bind(n), 4});
        const Tensor idx = Tensor::from_vector(iv, {batch.bind(n), 1});
        Tensor g = x.gather(1, idx * 1);
        Tensor s = Tensor::zeros({4, 4}).scatter_add(0, idx.expand({n, 4}) * 1, x);
        tempura::realize({g, s});
        std::vector<float> want_g, want_s(16, 0.0f);
        for (int64_t i = 0; i < n; ++i) {
            const auto k = static_cast<size_t>(iv[static_cast<size_t>(i)]);
            want_g.push_back(xv[static_cast<size_t>(i) * 4 + k]);
            for (size_t j = 0; j < 4; ++j) want_s[k * 4 + j] += xv[static_cast<size_t>(i) * 4 + j];
        }
        CHECK(values(g) == want_g);
        CHECK(values(s) == want_s);
        CHECK(g.kernels().front().name.find("batch") != std::string::npos);
    }
}

TEST_CASE("a scatter kernel runs serially on every path: no opts, and explicit ones refused") {
    // A constant index (every element adds to row 0): no load in the store's address. The
    // heuristics used to split the big copy loop across two threads, and both ran the serial
    // loop: row 0 came out 8192.
    namespace cg = tempura::codegen;
    const Tensor base = Tensor::zeros({4096, 1024});
    const Tensor idx = Tensor::zeros({4096, 1024}, DType::Int32) * 1;
    const Tensor s = base.scatter_add(0, idx, Tensor::ones({4096, 1024}));
    const auto kernels = tempura::schedule_graph(s.uop());
    REQUIRE(kernels.size() == 1);
    const tempura::UOp& ast = kernels[0].ast;
    CHECK(cg::reads_what_it_writes(ast));
    cg::DeviceLimits lim;
    lim.threads = 2;
    CHECK(cg::heuristic_opts(cg::prepare_for_opts(ast), lim).empty());
    CHECK(cg::lower_kernel_opt("scatter", ast, lim).threads == 1);
    cg::OptKernel k(cg::prepare_for_opts(ast), lim);
    CHECK(k.axes().empty());
    const std::vector<float> v = values(s);
    CHECK(v[0] == 4096);
    CHECK(v[1023] == 4096);
    CHECK(v[1024] == 0);
    CHECK(v[4095 * 1024 + 7] == 0);
    CHECK_THROWS_WITH(k.apply(cg::Opt{cg::OptOp::Thread, 0, 2}),
                      "[opt] THREAD(0, 2): the kernel reads what it writes (a scatter): it runs "
                      "serially, with no opts");
}
