// Provenance: a node a Tensor or nn call builds records the user's file and line (the call's
// defaulted std::source_location), a composite's inner nodes the outermost call's, gradients the
// forward node's; the op-level errors name it.
#include <doctest/doctest.h>

#include "../error_at.hpp"
#include "../support.hpp"

#include <cmath>
#include <source_location>
#include <string>
#include <unordered_set>
#include <vector>

#include <tempura/nn/module.hpp>
#include <tempura/tempura.hpp>

namespace {

using tempura::DType;
using tempura::Op;
using tempura::Tensor;
using tempura::UOp;

bool in_this_file(const UOp& u) {
    return std::string(u.location().file_name()).ends_with("test_provenance.cpp");
}

Tensor fresh(std::vector<float> v) { return Tensor::from_vector(v); }

// The lines recorded by the nodes of `y` that read x's buffer (nodes made by this test: nothing
// alive before x can be one of them), each with how many nodes name it; also which files.
struct Sites {
    std::vector<int> lines;
    bool all_here = true;
    size_t nodes = 0;
};
Sites sites_over(const Tensor& y, const Tensor& x) {
    Sites s;
    // x's own nodes (its BUFFER, and the RESHAPE from_vector made) are not y's; a movement of x
    // may read the BUFFER directly (a reshape of a reshape collapses).
    std::unordered_set<const tempura::UOpNode*> own, reads;
    for (const UOp& u : x.uop().toposort()) {
        own.insert(u.get());
        if (u.op() == Op::Buffer) reads.insert(u.get());
    }
    for (const UOp& u : y.uop().toposort()) {
        if (own.count(u.get())) continue;
        bool r = false;
        for (const UOp& src : u.srcs())
            r = r || reads.count(src.get()) > 0 || own.count(src.get()) > 0;
        if (!r) continue;
        reads.insert(u.get());
        ++s.nodes;
        s.all_here = s.all_here && in_this_file(u);
        s.lines.push_back(static_cast<int>(u.location().line()));
    }
    return s;
}

bool all_equal(const std::vector<int>& v, int line) {
    for (int l : v)
        if (l != line) return false;
    return !v.empty();
}

} // namespace

TEST_CASE("provenance: a Tensor call's node records the caller's file and line") {
    const Tensor x = fresh({1, 2, 3, 4});
    const Tensor y = x.exp();
    const int line = __LINE__ - 1; // the line above
    CHECK(in_this_file(y.uop()));
    CHECK(static_cast<int>(y.uop().location().line()) == line);
    const Tensor r = x.reshape({2, 2}).transpose(0, 1);
    const int line_r = __LINE__ - 1; // the line above
    CHECK(all_equal(sites_over(r, x).lines, line_r));
    const Tensor z = Tensor::zeros({3});
    const int line_z = __LINE__ - 1; // the line above
    CHECK(in_this_file(z.uop()));
    CHECK(static_cast<int>(z.uop().location().line()) == line_z);
    const Tensor v = Tensor::from_vector(std::vector<float>{5, 6});
    const int line_v = __LINE__ - 1; // the line above
    CHECK(static_cast<int>(v.uop().location().line()) == line_v);
}

TEST_CASE("provenance: a composite's inner nodes name the outermost call, not the library") {
    const Tensor x = fresh({1, 2, 3, 4, 5, 6});
    const Tensor s = x.reshape({2, 3}).softmax(1);
    const int line = __LINE__ - 1; // the line above
    const Sites got = sites_over(s, x);
    CHECK(got.nodes >= 8); // max, sub, exp (mul, exp2), sum, division, reshapes and expands
    CHECK(got.all_here);
    CHECK(all_equal(got.lines, line));
    const Tensor g = x.gelu("tanh").sum();
    const int line_g = __LINE__ - 1; // the line above
    CHECK(all_equal(sites_over(g, x).lines, line_g));
    // nn: the functional layers and a module's call.
    const Tensor w = fresh({1, 0, 0, 1, 1, 1}).reshape({2, 3});
    const Tensor h = tempura::nn::linear(x.reshape({2, 3}), w).relu();
    const int line_h = __LINE__ - 1; // the line above
    CHECK(all_equal(sites_over(h, x).lines, line_h));
    // (A fresh input: x.reshape({2, 3}) above is the node the same reshape here would be, and it
    // keeps the line that built it first.)
    tempura::nn::Linear layer(3, 2);
    const Tensor x2 = fresh({1, 2, 3, 4, 5, 6}).reshape({2, 3});
    const Tensor m = layer(x2);
    const int line_m = __LINE__ - 1; // the line above
    CHECK(all_equal(sites_over(m, x2).lines, line_m));
}

TEST_CASE("provenance: operators take the line they are written on") {
    const Tensor x = fresh({1, 2, 3, 4}), y = fresh({4, 3, 2, 1});
    const Tensor a = x + y;
    const int line_a = __LINE__ - 1; // the line above
    const Tensor b = x * 2.0f;
    const int line_b = __LINE__ - 1; // the line above
    const Tensor c = 1.0f - x;
    const int line_c = __LINE__ - 1; // the line above
    const Tensor d = -x;
    const int line_d = __LINE__ - 1; // the line above
    const Tensor e = x == y;
    const int line_e = __LINE__ - 1; // the line above
    const Tensor f = x != 2.0f;
    const int line_f = __LINE__ - 1; // the line above
    const Tensor g = (x < y) & (x >= 2.0f);
    const int line_g = __LINE__ - 1; // the line above
    Tensor h = x;
    h += 3.0f;
    const int line_h = __LINE__ - 1; // the line above
    h *= y;
    const int line_h2 = __LINE__ - 1; // the line above
    const Tensor i = tempura::where(x > y, x, 0.0f);
    const int line_i = __LINE__ - 1; // the line above
    const std::vector<std::pair<Tensor, int>> made = {{a, line_a}, {b, line_b}, {c, line_c},
                                                      {d, line_d}, {e, line_e}, {f, line_f},
                                                      {g, line_g}, {i, line_i}};
    for (const auto& [t, line] : made) CHECK(all_equal(sites_over(t, x).lines, line));
    CHECK(static_cast<int>(h.uop().location().line()) == line_h2);
    CHECK(static_cast<int>(h.uop().src(0).location().line()) == line_h);
    // Values are unchanged: 1 - x, and x == y.
    CHECK(c.to_vector() == std::vector<float>{0, -1, -2, -3});
    CHECK(e.to_vector<bool>() == std::vector<bool>{false, false, false, false});
}

TEST_CASE("provenance: op-level errors name the user's file and line") {
    const Tensor x = fresh({1, 2, 3, 4, 5, 6});
    const Tensor i = Tensor::from_vector(std::vector<int32_t>{1, 2});
    // A call inside CHECK(...) records the line where the CHECK starts (the macro's line).
    int l = __LINE__ + 1;
    CHECK(error_of([&] { x.reshape({4}); }) ==
          at_line(l, "[reshape] cannot reshape [6] (6 elements) into [4] (4 elements)"));
    l = __LINE__ + 1;
    CHECK(error_of([&] { (void)(x + i); }) ==
          at_line(l, "[add] dtype mismatch: float32 and int32"));
    l = __LINE__ + 1;
    CHECK(error_of([&] {
              (void)(x * fresh({1, 2}));
          }) == at_line(l, "[broadcast] shapes [6] and [2] cannot be broadcast"));
    l = __LINE__ + 1;
    CHECK(error_of([&] { (void)(2.0f / i.cast(DType::Bool)); }) ==
          at_line(l, "[div] not supported for bool tensors"));
    // An error inside a composite names the composite's call: the user's line.
    l = __LINE__ + 1;
    CHECK(error_of([&] { i.softmax(0); }) ==
          at_line(l, "[softmax] needs a float tensor, got int32"));
    l = __LINE__ + 1;
    CHECK(error_of([&] { i.log_softmax(0); }) ==
          at_line(l, "[log_softmax] needs a float tensor, got int32"));
    l = __LINE__ + 1;
    CHECK(error_of([&] {
              tempura::nn::linear(x.reshape({2, 3}), fresh({1, 2}));
          }) == at_line(l, "[linear] weight must be [out, in], got [2]"));
    tempura::nn::Linear layer(4, 2);
    l = __LINE__ + 1;
    CHECK(error_of([&] { layer(x.reshape({2, 3})); }).starts_with(at_line(l, "[linear] ")));
    // Errors outside a Tensor call (the IR's own API) name no line.
    CHECK(error_of([] { UOp::variable("n", 3, 1); }) == "[variable] 'n' has min 3 > max 1");
    // After the call, nothing names it: the scope ends with the call.
    CHECK(tempura::call_site() == nullptr);
}

TEST_CASE("provenance: the line is not part of a node's identity; kernels are shared") {
    tempura::clear_caches();
    const Tensor x = fresh({1, 2, 3, 4});
    Tensor a = x * 3.5f + 1.0f;
    const int line_a = __LINE__ - 1; // the line above
    Tensor b = x * 3.5f + 1.0f;
    CHECK(a.uop().same(b.uop())); // one node (CSE), which keeps the line that built it first
    CHECK(static_cast<int>(b.uop().location().line()) == line_a);
    a.realize();
    const size_t plans = tempura::plan_cache_stats().entries;
    CHECK(plans >= 1);
    // The same expression on another line, over another buffer: the cached plan runs it.
    const Tensor y = fresh({5, 6, 7, 8});
    Tensor c = y * 3.5f + 1.0f;
    const int line_c = __LINE__ - 1; // the line above
    CHECK(static_cast<int>(c.uop().location().line()) == line_c);
    CHECK(c.to_vector() == std::vector<float>{18.5f, 22, 25.5f, 29});
    CHECK(tempura::plan_cache_stats().entries == plans);
}

TEST_CASE("provenance: gradient nodes name the forward line they differentiate") {
    Tensor w = fresh({0.5f, -1, 2, 3});
    w.requires_grad();
    const Tensor x = fresh({1, 2, 3, 4});
    const Tensor p = (w * x).exp();
    const int line_p = __LINE__ - 1; // the line above
    const Tensor loss = p.sum();
    const int line_loss = __LINE__ - 1; // the line above
    const std::vector<Tensor> g = tempura::gradients(loss, {w});
    const int line_g = __LINE__ - 1; // the line above
    // Every node of the gradient that the forward graph does not hold names a line of this file:
    // a forward line (the node it differentiates), or the gradients() call (its seed); none
    // names the library.
    std::unordered_set<const tempura::UOpNode*> forward;
    std::unordered_set<int> lines = {line_g};
    for (const UOp& u : loss.uop().toposort()) {
        forward.insert(u.get());
        if (u.op() != Op::Const) lines.insert(static_cast<int>(u.location().line()));
    }
    bool any_p = false, any_loss = false;
    for (const UOp& u : g[0].uop().toposort()) {
        if (forward.count(u.get()) || u.op() == Op::Const) continue;
        const int line = static_cast<int>(u.location().line());
        CHECK_MESSAGE(in_this_file(u), u.location().file_name());
        CHECK(lines.count(line) == 1);
        any_p = any_p || line == line_p;
        any_loss = any_loss || line == line_loss;
    }
    CHECK(any_p);
    CHECK(any_loss);
    const std::vector<float> got = g[0].to_vector(), wv = w.to_vector(), xv = x.to_vector();
    for (size_t k = 0; k < 4; ++k)
        CHECK(got[k] == doctest::Approx(xv[k] * std::exp(wv[k] * xv[k])).epsilon(1e-5));
}

namespace {
// Adam whose update() keeps the lines of the nodes it built (those not in its inputs' graphs).
struct RecordingAdam : tempura::nn::Adam {
    using Adam::Adam;
    std::vector<std::string> files;
    std::vector<int> lines;
    Tensor update(size_t i, const Tensor& p, const Tensor& grad, const Tensor& scalars,
                  std::vector<Tensor>& state) override {
        std::unordered_set<const tempura::UOpNode*> inputs;
        std::vector<Tensor> ins{p, grad, scalars};
        ins.insert(ins.end(), state.begin(), state.end());
        for (const Tensor& t : ins)
            for (const UOp& u : t.uop().toposort()) inputs.insert(u.get());
        Tensor next = Adam::update(i, p, grad, scalars, state);
        std::vector<Tensor> outs{next};
        outs.insert(outs.end(), state.begin(), state.end());
        for (const Tensor& t : outs)
            for (const UOp& u : t.uop().toposort()) {
                if (inputs.count(u.get()) || u.op() == Op::Const) continue;
                inputs.insert(u.get());
                files.emplace_back(u.location().file_name());
                lines.push_back(static_cast<int>(u.location().line()));
            }
        return next;
    }
};
} // namespace

TEST_CASE("provenance: an optimizer's update nodes name the user's step() line") {
    Tensor w = fresh({0.5f, -1, 2, 3});
    w.requires_grad();
    RecordingAdam opt({w}, 0.1);
    for (int step = 0; step < 2; ++step) {
        (w * fresh({1, 2, 3, 4})).sum().backward();
        opt.files.clear();
        opt.lines.clear();
        opt.step();
        const int line = __LINE__ - 1; // the line above
        REQUIRE(!opt.lines.empty());
        for (size_t k = 0; k < opt.lines.size(); ++k) {
            CHECK_MESSAGE(opt.files[k].ends_with("test_provenance.cpp"), opt.files[k]);
            CHECK(opt.lines[k] == line);
        }
        opt.zero_grad();
    }
    // The updates were applied: with a constant gradient each Adam step moves a weight by lr
    // (less eps) against its gradient's sign, here positive.
    const std::vector<float> got = w.to_vector(), before{0.5f, -1, 2, 3};
    for (size_t k = 0; k < 4; ++k) CHECK(got[k] == doctest::Approx(before[k] - 0.2f).epsilon(1e-5));
}

TEST_CASE("provenance: the tree and the dot drawing show each node's line") {
    const Tensor x = fresh({1, 2, 3});
    const Tensor y = x.sqrt();
    const int line = __LINE__ - 1; // the line above
    const std::string site = "test_provenance.cpp:" + std::to_string(line);
    CHECK(y.uop().tree().find("@" + site) != std::string::npos);
    CHECK(y.uop().to_dot().find("label=\"SQRT\\nfloat32\\n@" + site + "\"") != std::string::npos);
}
