// How many kernels a computation becomes: t.kernels() after realize() (the kernels that ran),
// and schedule_graph(t.uop()) before it (the plan), which must agree. Then the compiled-kernel
// cache: the same computation on other input buffers compiles nothing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <tempura/backend/llvm_cpu.hpp>
#include <tempura/schedule/schedule.hpp>
#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

#include "kernel_check.hpp"

namespace {

using kernel_check::names;
using kernel_check::planned;
using kernel_check::realized_kernels;

using tempura::DType;
using tempura::Shape;
using tempura::Tensor;

std::vector<float> values(int64_t n, float scale, float offset) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        v[static_cast<size_t>(i)] = static_cast<float>((i * 7) % 13) * scale + offset;
    return v;
}

Tensor input(Shape shape, float scale = 0.1f, float offset = -0.5f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return Tensor::from_vector(values(n, scale, offset), shape);
}

} // namespace

TEST_CASE("kernel counts: elementwise chains fuse into one kernel") {
    auto a = input({4, 8}), b = input({4, 8}, 0.2f), c = input({8}, 0.3f, 1.0f);
    Tensor t = a * b + c;
    CHECK(planned(t) == 1);
    CHECK(realized_kernels(t) == 1);
    REQUIRE(t.kernels().size() == 1);
    CHECK(t.kernels()[0].name == "E_4_8");
    CHECK(t.kernels()[0].backend == "CPU");
    CHECK(t.kernels()[0].source.find("define void") != std::string::npos);
}

TEST_CASE("kernel counts: an elementwise producer fuses into its reduce") {
    auto a = input({4, 8}), b = input({4, 8}, 0.2f);
    Tensor t = (a * b).sum(1);
    CHECK(planned(t) == 1);
    CHECK(realized_kernels(t) == 1);
    REQUIRE(t.kernels().size() == 1);
    CHECK(t.kernels()[0].name.rfind("r_", 0) == 0); // a reduce kernel
    CHECK(t.kernels()[0].backend == "CPU");
}

TEST_CASE("kernel counts: softmax over rows is one kernel") {
    auto x = input({4, 8});
    Tensor t = x.softmax(1);
    CHECK(planned(t) == 1);
    CHECK(realized_kernels(t) == 1);
    REQUIRE(t.kernels().size() == 1);
    // Row fusion: the max and the sum are two reduce loops over each row, then the divide.
    CHECK(t.kernels()[0].name == "r_4_8_8_8");
    for (const auto& k : t.kernels()) {
        CHECK(k.backend == "CPU");
        CHECK(k.source.find("define void") != std::string::npos);
    }
    Tensor l = x.log_softmax(-1);
    CHECK(realized_kernels(l) == 1);
}

TEST_CASE("kernel counts: a reduce of an inlined reduce is one kernel") {
    auto x = input({5, 6});
    Tensor t = x.sum(0).sum(0);
    CHECK(planned(t) == 1);
    CHECK(realized_kernels(t) == 1);
    Tensor m = x.max(1).sum(0); // a different reduce op inside
    CHECK(realized_kernels(m) == 1);
    // The materialization points of the plan: the root only.
    CHECK(tempura::materialization_points(x.sum(0).sum(0).uop()).size() == 1);
}

TEST_CASE("kernel counts: MLP forward") {
    auto x = input({4, 8});
    auto w1 = input({8, 16}, 0.05f, -0.3f), b1 = input({16}, 0.01f);
    auto w2 = input({16, 10}, 0.04f, -0.25f), b2 = input({10}, 0.02f);
    Tensor logits = (x.matmul(w1) + b1).relu().matmul(w2) + b2;
    // The hidden layer is a reduce read through the EXPAND of the second matmul: materialized.
    CHECK(planned(logits) == 2);
    CHECK(realized_kernels(logits) == 2);

    Tensor probs = ((x.matmul(w1) + b1).relu().matmul(w2) + b2).softmax(1);
    const size_t n = realized_kernels(probs);
    std::printf("MLP forward with softmax: %zu kernels (%s)\n", n, names(probs).c_str());
    // Hidden layer, logits, the softmax: the logits' reduce is read by the softmax's three loops
    // over a row, so it is materialized once rather than recomputed in each.
    CHECK(n == 3);
    CHECK(names(probs) == "r_4_16_8 r_4_10_16 r_4_10_10_10");
}

TEST_CASE("kernel counts: an expensive operand a matmul would recompute gets its own kernel") {
    // dW = e^T h with e [64, 10] and h [64, 128]: the reduce runs over the batch, and e is read
    // once per output column block. An e of an exp and a division per element (a softmax
    // gradient's shape) is computed once, in a kernel of its own, not again for every column.
    auto x = input({64, 10}), h = input({64, 128}, 0.05f);
    Tensor e = (x * 0.5f).exp() / ((x * 0.25f).exp() + 1.0f);
    Tensor dw = e.transpose(0, 1).matmul(h);
    CHECK(realized_kernels(dw) == 2);
    CHECK(names(dw) == "E_64_10 r_10_128_64");
    // A cheap operand (a multiply-add) stays fused into the matmul.
    Tensor cheap = (x * 0.5f + 1.0f).transpose(0, 1).matmul(h);
    CHECK(realized_kernels(cheap) == 1);
    CHECK(names(cheap) == "r_10_128_64");
}

TEST_CASE("kernel counts: a movement op on a realized tensor is one copy kernel") {
    auto x = input({3, 5});
    Tensor t = x.transpose();
    CHECK(planned(t) == 1);
    CHECK(realized_kernels(t) == 1);
    CHECK(t.shape() == Shape{5, 3});
    Tensor mid = (x + 1.0f).realize();
    Tensor f = mid.flip({0}).pad({{1, 1}, {0, 0}});
    CHECK(realized_kernels(f) == 1);
}

TEST_CASE("kernel counts: creation ops run no kernel") {
    Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK(a.is_realized());
    CHECK(a.kernels().empty());
    a.realize(); // a buffer already: realize() runs nothing
    CHECK(a.kernels().empty());
    CHECK(a.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
    // A reshape of a realized tensor is a view of the same buffer, still realized.
    Tensor r = a.reshape({3, 2});
    CHECK(r.is_realized());
    r.realize();
    CHECK(r.kernels().empty());
    Tensor ar = Tensor::arange(5), id = Tensor::eye(3);
    CHECK(ar.is_realized());
    CHECK(id.is_realized());
    CHECK(ar.kernels().empty());
}

TEST_CASE("kernel cache: the same computation on other buffers compiles nothing") {
    auto make = [](float offset) {
        auto x = input({6, 7}, 0.1f, offset);
        auto w = input({7, 5}, 0.05f, offset);
        auto b = input({5}, 0.02f, offset);
        return (x.matmul(w) + b).relu().softmax(1);
    };
    Tensor first = make(-0.5f);
    const size_t k = realized_kernels(first);
    CHECK(k == 2); // the matmul (read by the softmax's three loops), the softmax
    const std::vector<float> first_values = first.to_vector<float>();

    const auto before = tempura::runtime::cpu_kernel_cache_stats();
    Tensor second = make(0.25f); // new buffers, other values, same structure
    const size_t k2 = realized_kernels(second);
    const auto after = tempura::runtime::cpu_kernel_cache_stats();
    CHECK(k2 == k);
    CHECK(after.misses == before.misses); // nothing compiled
    // Each kernel is either a hit of the compiled-kernel cache (k hits), or the realize-level
    // plan cache skips compilation altogether (0 hits); never a new compile.
    const size_t hits = after.hits - before.hits;
    std::printf("kernel cache: second realize of a %zu-kernel graph: %zu hits, %zu misses\n", k,
                hits, after.misses - before.misses);
    CHECK((hits == k || hits == 0));
    CHECK(second.to_vector<float>() != first_values); // really ran on the new values
    for (size_t i = 0; i < k; ++i) {
        CHECK(second.kernels()[i].name == first.kernels()[i].name);
        CHECK(second.kernels()[i].backend == "CPU");
        CHECK(second.kernels()[i].source.find("define void") != std::string::npos);
    }
}

TEST_CASE("kernel cache: a structurally new graph with the same kernels hits for each kernel") {
    auto a = input({9, 4}), b = input({9, 4}, 0.3f), c = input({4}, 0.2f, 1.0f);
    Tensor t = a * b + c;
    CHECK(realized_kernels(t) == 1);
    // CONTIGUOUS at the root: another graph (no plan to reuse), but the same kernel.
    auto a2 = input({9, 4}, 0.7f), b2 = input({9, 4}, 0.1f), c2 = input({4}, -0.2f, 2.0f);
    const auto before = tempura::runtime::cpu_kernel_cache_stats();
    Tensor u = (a2 * b2 + c2).contiguous();
    CHECK(realized_kernels(u) == 1);
    const auto after = tempura::runtime::cpu_kernel_cache_stats();
    CHECK(after.misses == before.misses);
    CHECK(after.hits == before.hits + 1);

    auto x = input({3, 11});
    Tensor s = x.softmax(1);
    CHECK(realized_kernels(s) == 1);
    auto x2 = input({3, 11}, 0.3f, 0.1f);
    const auto before2 = tempura::runtime::cpu_kernel_cache_stats();
    Tensor s2 = x2.softmax(1).contiguous();
    CHECK(realized_kernels(s2) == 1);
    const auto after2 = tempura::runtime::cpu_kernel_cache_stats();
    CHECK(after2.misses == before2.misses);
    CHECK(after2.hits == before2.hits + 1);
}

TEST_CASE("kernel info: names, backend and LLVM IR source of every kernel") {
    auto x = input({4, 8});
    Tensor t = (x - x.mean(1, true)).square().sum(1).sqrt();
    const size_t n = realized_kernels(t);
    CHECK(n == 1); // the mean's loop over each row, then the row's squared deviations
    for (const auto& k : t.kernels()) {
        CHECK_FALSE(k.name.empty());
        CHECK(k.backend == "CPU");
        CHECK(k.source.find("define void") != std::string::npos);
    }
    // Integer and bool kernels too.
    auto i = Tensor::from_vector(std::vector<int32_t>{3, -1, 4, 1, -5, 9}, {2, 3});
    Tensor ai = i.argmax(1);
    CHECK(ai.dtype() == DType::Int32);
    CHECK(ai.to_vector<int32_t>() == std::vector<int32_t>{2, 2});
    for (const auto& k : ai.kernels()) CHECK(k.source.find("define void") != std::string::npos);
    Tensor cmp = i > 0;
    CHECK(realized_kernels(cmp) == 1);
}

TEST_CASE("split reduce: a big reduction to few outputs becomes partials and a total") {
    // 2^18 int32 elements summed to one: 256 partial sums (a kernel THREAD can share among
    // cores), then their total. Exact in int32.
    const int64_t n = int64_t{1} << 18;
    std::vector<int32_t> v(static_cast<size_t>(n));
    int64_t ref = 0;
    for (int64_t i = 0; i < n; ++i) {
        v[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % 201) - 100;
        ref += v[static_cast<size_t>(i)];
    }
    const Tensor x = Tensor::from_vector(v, {n});
    Tensor s = x.sum();
    CHECK(planned(s) == 2);
    s.realize();
    REQUIRE(s.kernels().size() == 2);
    CHECK(s.kernels()[0].name == "r_256_1024");
    CHECK(s.kernels()[1].name == "r_1_256");
    CHECK(s.item<int32_t>() == ref);
    CHECK(s.shape() == Shape{});

    // Over two axes, keeping dims; max, with the largest value in the last partial.
    std::vector<float> f(static_cast<size_t>(n), -1.0f);
    f.back() = 7.5f;
    Tensor m = Tensor::from_vector(f, {512, 512}).max({0, 1}, true);
    CHECK(planned(m) == 2);
    CHECK(m.shape() == Shape{1, 1});
    CHECK(m.item<float>() == 7.5f);

    // Below the threshold (2^16 elements) or with many outputs: one kernel.
    CHECK(planned(Tensor::from_vector(std::vector<float>(1 << 15, 1.0f)).sum()) == 1);
    CHECK(planned(input({64, 4096}).sum({1})) == 1);
}

TEST_CASE("shared work: what a realize computed is read from its buffer, not computed again") {
    const Tensor x = input({64, 32}), w = input({32, 16}, 0.2f, -0.3f);
    Tensor a = x.dot(w);
    Tensor b = (a + 1.0f).sum();
    Tensor c = (a * 2.0f).max(1);
    const Tensor keep = a * 3.0f; // stays lazy: keeps a's graph (node) alive
    const std::vector<double> want_b = tempura::reference_eval(b.uop());
    const std::vector<double> want_c = tempura::reference_eval(c.uop());
    // Before a is realized, b's one kernel computes the matmul too (the reduce over 32 inside).
    REQUIRE(planned(b) == 1);
    CHECK(tempura::schedule_graph(b.uop())[0].name == "r_1_64_16_32");
    a.realize();
    CHECK(a.kernels().size() == 1);
    // b and c contain a's graph: they read a's buffer instead.
    b.realize();
    REQUIRE(b.kernels().size() == 1);
    CHECK(b.kernels()[0].name == "r_1_64_16");
    CHECK(std::fabs(b.item<float>() - want_b[0]) <= 1e-4 * std::max(1.0, std::fabs(want_b[0])));
    c.realize();
    REQUIRE(c.kernels().size() == 1);
    CHECK(c.kernels()[0].name == "r_64_16");
    const std::vector<float> got_c = c.to_vector<float>();
    REQUIRE(got_c.size() == want_c.size());
    for (size_t i = 0; i < got_c.size(); ++i)
        CHECK(std::fabs(got_c[i] - want_c[i]) <= 1e-4 * std::max(1.0, std::fabs(want_c[i])));
    // The same expression built again is the same (interned) node while `keep` holds it:
    // realizing it runs nothing and shares a's buffer.
    Tensor a2 = x.dot(w);
    CHECK(a2.uop().same(keep.uop().src(0)));
    a2.realize();
    CHECK(a2.kernels().empty());
    CHECK(a2.buffer() == a.buffer());
    // Once a's buffer is gone the work is done again: the map keeps no buffer alive.
    a = Tensor();
    a2 = Tensor();
    Tensor d = (x.dot(w) - 1.0f).sum();
    d.realize();
    REQUIRE(d.kernels().size() == 1);
    CHECK(d.kernels()[0].name == "r_1_64_16_32");
    // A graph with a DETACH inside (built under NoGrad from a tensor that tracks gradients) is
    // found again too, by the node realized, though the scheduler sees it without the DETACH.
    Tensor p = x;
    p.requires_grad();
    Tensor e, keep_e;
    {
        tempura::NoGrad ng;
        e = (p * 2.0f).sum(1);
        keep_e = e + 1.0f; // keeps e's node alive: built again, it is the same node
    }
    e.realize();
    CHECK(e.kernels().size() == 1);
    Tensor e2;
    {
        tempura::NoGrad ng;
        e2 = (p * 2.0f).sum(1);
    }
    e2.realize();
    CHECK(e2.kernels().empty());
    CHECK(e2.buffer() == e.buffer());
}

TEST_CASE("memory planning: intermediates whose lifetimes do not overlap share memory") {
    // The MLP (784-128-10, batch 32): h [32, 128] (16384 B), logits [32, 10] (1280 B), the
    // probabilities (1280 B; the row max and sum live in the softmax's kernel). Each is live
    // while the next is computed: nothing shares.
    const Tensor x = input({32, 784}, 0.01f, -0.05f), w1 = input({128, 784}, 0.002f, -0.01f),
                 b1 = input({128}), w2 = input({10, 128}, 0.01f, -0.06f), b2 = input({10});
    const Tensor h = (x.dot(w1.transpose(0, 1)) + b1).relu();
    const Tensor p = (h.dot(w2.transpose(0, 1)) + b2).softmax(-1);
    const tempura::PlanMemory m = tempura::plan_memory(p.uop());
    CHECK(m.unplanned_bytes == 16384 + 1280 + 1280);
    CHECK(m.planned_bytes == 16384 + 1280 + 1280);
    // Four more hidden layers: each [32, 128] activation is dead two layers later, so two blocks
    // serve all five; the logits move into them.
    const Tensor w3 = input({128, 128}, 0.01f, -0.06f);
    Tensor g = h;
    for (int i = 0; i < 4; ++i) g = g.dot(w3.transpose(0, 1)).relu();
    Tensor q = (g.dot(w2.transpose(0, 1)) + b2).softmax(-1);
    const tempura::PlanMemory md = tempura::plan_memory(q.uop());
    CHECK(md.unplanned_bytes == 5 * 16384 + 1280 + 1280);
    CHECK(md.planned_bytes == 2 * 16384 + 1280);
    // The values are the reference interpreter's with the blocks reused.
    CHECK(realized_kernels(q) == 7);
}

namespace {

void check_close(const Tensor& t, const std::vector<double>& want) {
    const std::vector<float> got = t.to_vector<float>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i)
        CHECK(std::fabs(got[i] - want[i]) <= 1e-4 * std::max(1.0, std::fabs(want[i])));
}

} // namespace

TEST_CASE("realize({a, b}): a max and a sum of one input are one kernel") {
    const Tensor x = input({64, 100});
    Tensor mx = x.max(1), sm = x.sum(1);
    const auto want_mx = tempura::reference_eval(mx.uop()),
               want_sm = tempura::reference_eval(sm.uop());
    tempura::realize({mx, sm});
    REQUIRE(mx.kernels().size() == 1);
    CHECK(mx.kernels()[0].name == "r_64_100");
    CHECK(sm.kernels().size() == 1);
    CHECK(mx.buffer() != sm.buffer());
    check_close(mx, want_mx);
    check_close(sm, want_sm);
    // In one graph, the two reductions share their loop too.
    Tensor both = x.max(1) + x.sum(1);
    const auto want_both = tempura::reference_eval(both.uop());
    REQUIRE(both.realize().kernels().size() == 1);
    CHECK(both.kernels()[0].name == "r_64_100");
    check_close(both, want_both);
    // Apart, they are a kernel each.
    Tensor mx2 = (x * 2.0f).max(1), sm2 = (x * 2.0f).sum(1);
    CHECK(mx2.realize().kernels().size() == 1);
    CHECK(sm2.realize().kernels().size() == 1);
}

TEST_CASE("realize({a, b}): a mean and the variance that reads it are one kernel") {
    const Tensor x = input({32, 48});
    Tensor m = x.mean(1);
    Tensor v = ((x - m.reshape({32, 1})) * (x - m.reshape({32, 1}))).mean(1);
    const auto want_m = tempura::reference_eval(m.uop()), want_v = tempura::reference_eval(v.uop());
    // Realized alone, the variance's graph is one kernel too: the mean's loop over each row runs
    // before the variance's (row fusion).
    CHECK(planned(Tensor(v)) == 1);
    tempura::realize({m, v});
    REQUIRE(v.kernels().size() == 1);
    check_close(m, want_m);
    check_close(v, want_v);
}

TEST_CASE("realize({a, b, ...}): shared work once, realized and repeated tensors") {
    const Tensor x = input({16, 24});
    const Tensor r = (x * 3.0f).sum(1); // read by both roots: materialized once
    Tensor b = r * 2.0f, c = r.max();
    Tensor done = (x + 1.0f).realize();
    const auto want_b = tempura::reference_eval(b.uop()), want_c = tempura::reference_eval(c.uop());
    Tensor b_again = b;
    tempura::realize({b, c, done, b_again});
    // r's kernel, then b's and c's (different shapes: not fused).
    CHECK(b.kernels().size() == 3);
    CHECK(b_again.buffer() == b.buffer());
    check_close(b, want_b);
    check_close(c, want_c);
    CHECK(done.kernels().size() == 1); // left as it was
    tempura::realize({b, c});          // all realized: nothing runs
    CHECK(b.kernels().size() == 3);
}
