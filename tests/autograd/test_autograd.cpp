// The autograd API's semantics (as PyTorch users expect them), its errors word for word, the
// optimizers against their formulas, and models that learn.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include <tempura/backend/llvm_cpu.hpp>
#include <tempura/tempura.hpp>

#include "../error_at.hpp"
#include "../support.hpp"

namespace {

using tempura::DType;
using tempura::Shape;
using tempura::Tensor;
namespace nn = tempura::nn;

Tensor param(std::vector<float> v, Shape s) {
    Tensor t = Tensor::from_vector(v, std::move(s));
    t.requires_grad();
    return t;
}

std::vector<float> randoms(std::mt19937& rng, size_t n, float scale) {
    std::normal_distribution<float> d(0, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

} // namespace

TEST_CASE("autograd: backward accumulates over uses and calls until zero_grad") {
    Tensor w = param({1, 2, 3}, {3});
    const Tensor x = Tensor::from_vector(std::vector<float>{4, 5, 6});
    Tensor loss = (w * x).sum() + (w * w).sum(); // w used twice: x + 2w
    loss.backward();
    CHECK(w.grad().to_vector() == std::vector<float>{6, 9, 12});
    CHECK(loss.item() == 46); // the loss stays readable
    loss.backward();
    CHECK(w.grad().to_vector() == std::vector<float>{12, 18, 24});
    w.zero_grad();
    CHECK(w.grad().to_vector() == std::vector<float>{0, 0, 0});
}

TEST_CASE("autograd: copies share the gradient; a broadcast input's gradient has its shape") {
    Tensor b = param({0.5f, -1}, {2});
    Tensor copy = b;
    const Tensor x = Tensor::ones({3, 2});
    (x + copy).sum().backward();
    CHECK(b.grad().shape() == Shape{2});
    CHECK(b.grad().to_vector() == std::vector<float>{3, 3});
    CHECK(copy.grad().to_vector() == std::vector<float>{3, 3});
}

TEST_CASE("autograd: backward on any one-element tensor; errors say what is wrong") {
    Tensor w = param({2}, {1, 1});
    (w * w).backward(); // shape [1, 1]
    CHECK(w.grad().to_vector() == std::vector<float>{4});
    CHECK(w.grad().shape() == Shape{1, 1});

    Tensor v = param({1, 2}, {2});
    CHECK(error_of([&] { (v * 2.0).backward(); }) ==
          at_line(__LINE__ - 1,
                  "[backward] needs a tensor with one element, got shape [2] (2 elements)"));
    const Tensor plain = Tensor::from_vector(std::vector<float>{1, 2});
    CHECK(error_of([&] { (void)plain.grad(); }) ==
          at_line(__LINE__ - 1,
                  "[grad] this tensor does not require a gradient (call requires_grad() on it "
                  "before computing the loss)"));
    CHECK(error_of([&] { plain.sum().backward(); }) ==
          at_line(__LINE__ - 1,
                  "[backward] the tensor does not depend on any tensor that requires a gradient "
                  "(call requires_grad() on the parameters; detach() and NoGrad cut the graph)"));
    Tensor i = Tensor::from_vector(std::vector<int32_t>{1, 2});
    CHECK(error_of([&] { i.requires_grad(); }) ==
          "[requires_grad] only float tensors take gradients, got int32");
}

TEST_CASE("autograd: non-differentiable ops raise only when the gradient must go through them") {
    Tensor x = param({-1, 2, 3}, {3});
    // Only through a comparison: an error naming it.
    CHECK(error_of([&] { (x > 0.0).cast(DType::Float32).sum().backward(); }) ==
          at_line(__LINE__ - 1,
                  "[backward] no gradient reaches a tensor that requires one (it reaches one "
                  "only through CAST of bool, which has no gradient: comparisons, integer and "
                  "bool ops, argmax)"));
    CHECK(error_of([&] { x.argmax(0).cast(DType::Float32).sum().backward(); })
              .starts_with(at_line(__LINE__ - 1,
                                   "[backward] no gradient reaches a tensor that requires one "
                                   "(it reaches one only through CAST of int32")));
    // A comparison beside a differentiable path: it is a constant, as in PyTorch.
    (x * 2.0 + (x > 0.0).cast(DType::Float32)).sum().backward();
    CHECK(x.grad().to_vector() == std::vector<float>{2, 2, 2});
    x.zero_grad();
    // where: the condition takes no gradient, the branches do.
    tempura::where(x > 0.0, x * x, x * 3.0).sum().backward();
    CHECK(x.grad().to_vector() == std::vector<float>{3, 4, 6});
}

TEST_CASE("autograd: a graph of a structure seen before gets the same gradient graph, rebuilt") {
    tempura::clear_caches();
    std::mt19937 rng(5);
    const Tensor x = Tensor::from_vector(randoms(rng, 6 * 4, 1.0f), {6, 4});
    const Tensor y = Tensor::from_vector(std::vector<int32_t>{0, 1, 2, 0, 1, 2});
    const auto loss_of = [&](const Tensor& w, const Tensor& b) {
        return nn::cross_entropy(nn::linear(x, w, b).relu().softmax(1), y);
    };
    // One step: the walk runs and is recorded.
    Tensor w1 = param(randoms(rng, 3 * 4, 0.5f), {3, 4}), b1 = param(randoms(rng, 3, 0.5f), {3});
    const tempura::GradCacheStats s0 = tempura::grad_cache_stats();
    const std::vector<Tensor> g1 = gradients(loss_of(w1, b1), {w1, b1});
    const tempura::GradCacheStats s1 = tempura::grad_cache_stats();
    CHECK(s1.recorded == s0.recorded + 1);
    CHECK(s1.replayed == s0.replayed);
    CHECK(s1.entries == 1);
    // The next step's graph (other buffers, other values, the same structure): rebuilt from the
    // record. A fresh walk of the same graph builds the very same nodes.
    Tensor w2 = param(randoms(rng, 3 * 4, 0.5f), {3, 4}), b2 = param(randoms(rng, 3, 0.5f), {3});
    const Tensor loss2 = loss_of(w2, b2);
    const std::vector<Tensor> replayed = gradients(loss2, {w2, b2});
    const tempura::GradCacheStats s2 = tempura::grad_cache_stats();
    CHECK(s2.replayed == s1.replayed + 1);
    CHECK(s2.recorded == s1.recorded);
    tempura::clear_caches();
    CHECK(tempura::grad_cache_stats().entries == 0);
    const std::vector<Tensor> walked = gradients(loss2, {w2, b2});
    CHECK(tempura::grad_cache_stats().recorded == s2.recorded + 1);
    REQUIRE(replayed.size() == walked.size());
    for (size_t i = 0; i < walked.size(); ++i) {
        CHECK(replayed[i].uop().same(walked[i].uop()));
        CHECK(replayed[i].to_vector() == walked[i].to_vector());
    }
    CHECK(replayed[0].to_vector() != g1[0].to_vector()); // the new step's values, not the old
    // The targets are part of the structure: the same graph for w alone is walked and recorded
    // anew, then rebuilt for the next graph of that shape.
    const size_t records = tempura::grad_cache_stats().recorded;
    const std::vector<Tensor> only_w = gradients(loss_of(w2, b2), {w2});
    CHECK(tempura::grad_cache_stats().recorded == records + 1);
    CHECK(only_w[0].to_vector() == walked[0].to_vector());
    const size_t replays_w = tempura::grad_cache_stats().replayed;
    Tensor w3 = param(randoms(rng, 3 * 4, 0.5f), {3, 4}), b3 = param(randoms(rng, 3, 0.5f), {3});
    gradients(loss_of(w3, b3), {w3});
    CHECK(tempura::grad_cache_stats().replayed == replays_w + 1);
    CHECK(tempura::grad_cache_stats().recorded == records + 1);
    // backward() too: accumulated over two calls of one structure, the second one rebuilt.
    loss_of(w2, b2).backward();
    loss_of(w2, b2).backward();
    const std::vector<float> twice = w2.grad().to_vector(), once = walked[0].to_vector();
    REQUIRE(twice.size() == once.size());
    for (size_t i = 0; i < once.size(); ++i) CHECK(twice[i] == doctest::Approx(2 * once[i]));
    // What a walk found blocked is rebuilt too: the same error, the second time from the record.
    Tensor v = param({-1, 2, 3}, {3});
    const auto blocked = [&] { (v > 0.0).cast(DType::Float32).sum().backward(); };
    const int blocked_line = __LINE__ - 1;
    const std::string first = error_of(blocked);
    const size_t replays = tempura::grad_cache_stats().replayed;
    CHECK(error_of(blocked) == first);
    CHECK(tempura::grad_cache_stats().replayed == replays + 1);
    CHECK(first.starts_with(at_line(blocked_line,
                                    "[backward] no gradient reaches a tensor that requires one "
                                    "(it reaches one only through CAST of bool")));
}

TEST_CASE("autograd: gradients flow through realized intermediates") {
    Tensor w = param({1, 2}, {2});
    Tensor h = w * w;
    h.realize(); // computed now; it keeps the graph that made it
    CHECK(h.is_realized());
    Tensor copy = h;
    (copy * 3.0).sum().backward();
    CHECK(w.grad().to_vector() == std::vector<float>{6, 12});
}

TEST_CASE("autograd: detach and NoGrad cut the graph") {
    Tensor w = param({1, 2}, {2});
    CHECK(w.detach().to_vector() == std::vector<float>{1, 2}); // a view of the buffer
    CHECK(w.reshape({2, 1}).detach().to_vector() == std::vector<float>{1, 2});
    (w * w.detach()).sum().backward(); // only the first factor
    CHECK(w.grad().to_vector() == std::vector<float>{1, 2});
    w.zero_grad();
    Tensor y;
    {
        tempura::NoGrad guard;
        CHECK(tempura::NoGrad::active());
        y = w * 3.0;
    }
    CHECK(!tempura::NoGrad::active());
    CHECK(y.to_vector() == std::vector<float>{3, 6}); // the value is there
    (y * w).sum().backward();                         // y is a constant
    CHECK(w.grad().to_vector() == std::vector<float>{3, 6});
    CHECK(error_of([&] {
              y.sum().backward();
          }).starts_with(at_line(__LINE__ - 2, "[backward] the tensor does not")));
}

TEST_CASE("autograd: gradients() leaves accumulated gradients alone") {
    Tensor w = param({1, 2}, {2});
    const Tensor b = Tensor::from_vector(std::vector<float>{3, 4});
    const Tensor h = w * b; // an intermediate can be a parameter too
    const Tensor loss = (h * h).sum();
    const std::vector<Tensor> g = tempura::gradients(loss, {w, b, h, Tensor::ones({2})});
    CHECK(g[0].to_vector() == std::vector<float>{18, 64}); // 2 w b^2
    CHECK(g[1].to_vector() == std::vector<float>{6, 32});  // 2 w^2 b
    CHECK(g[2].to_vector() == std::vector<float>{6, 16});  // 2 h
    CHECK(g[3].to_vector() == std::vector<float>{0, 0});   // not used
    CHECK(w.grad().to_vector() == std::vector<float>{0, 0});
}

TEST_CASE("autograd: assign gives every copy the value; tensors of the old value keep it") {
    Tensor a = Tensor::from_vector(std::vector<float>{1, 2});
    Tensor copy = a;
    const Tensor old = a * 10.0; // lazy, from the old value
    a.assign(a + 1.0);
    CHECK(copy.to_vector() == std::vector<float>{2, 3});
    CHECK(old.to_vector() == std::vector<float>{10, 20});
    a.assign(Tensor::full({}, 7.0f)); // broadcast
    CHECK(copy.to_vector() == std::vector<float>{7, 7});
    CHECK(error_of([&] { a.assign(Tensor::ones({3})); }) ==
          at_line(__LINE__ - 1,
                  "[assign] cannot assign a value of shape [3] to a tensor of shape [2]"));
    CHECK(error_of([&] { a.assign(Tensor::ones({2}, DType::Int32)); }) ==
          at_line(__LINE__ - 1, "[assign] dtype mismatch: the tensor is float32, the value int32"));
    // A leaf keeps requiring its gradient after an assign.
    Tensor w = param({1, 2}, {2});
    w.assign(w * 2.0);
    (w * w).sum().backward();
    CHECK(w.grad().to_vector() == std::vector<float>{4, 8});
}

TEST_CASE("optimizers: one step of each against the formulas") {
    const std::vector<float> p0{0.5f, -1.5f, 2.0f};
    const std::vector<float> target{1.0f, 0.0f, -1.0f};
    // loss = sum((p - t)^2): g = 2 (p - t)
    const auto grad_of = [&](const std::vector<double>& p) {
        std::vector<double> g(p.size());
        for (size_t i = 0; i < p.size(); ++i) g[i] = 2 * (p[i] - target[i]);
        return g;
    };
    const Tensor t = Tensor::from_vector(target);
    const auto run = [&](nn::Optimizer& opt, Tensor& p, int steps) {
        for (int s = 0; s < steps; ++s) {
            opt.zero_grad();
            ((p - t) * (p - t)).sum().backward();
            opt.step();
        }
        return p.to_vector();
    };
    const auto check = [](const std::vector<float>& got, const std::vector<double>& want) {
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); ++i)
            CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
    };

    SUBCASE("SGD with momentum and weight decay") {
        Tensor p = param(p0, {3});
        nn::SGD opt({p}, 0.1, 0.9, 0.01);
        std::vector<double> w(p0.begin(), p0.end()), buf;
        for (int s = 0; s < 3; ++s) {
            std::vector<double> g = grad_of(w);
            for (size_t i = 0; i < w.size(); ++i) g[i] += 0.01 * w[i];
            if (buf.empty())
                buf = g;
            else
                for (size_t i = 0; i < w.size(); ++i) buf[i] = 0.9 * buf[i] + g[i];
            for (size_t i = 0; i < w.size(); ++i) w[i] -= 0.1 * buf[i];
        }
        check(run(opt, p, 3), w);
    }
    SUBCASE("Adam (L2) and AdamW (decoupled)") {
        for (bool decoupled : {false, true}) {
            Tensor p = param(p0, {3});
            const double lr = 0.05, b1 = 0.8, b2 = 0.95, eps = 1e-6, wd = 0.1;
            std::unique_ptr<nn::Optimizer> opt;
            if (decoupled)
                opt = std::make_unique<nn::AdamW>(std::vector<Tensor>{p}, lr, b1, b2, eps, wd);
            else
                opt = std::make_unique<nn::Adam>(std::vector<Tensor>{p}, lr, b1, b2, eps, wd);
            std::vector<double> w(p0.begin(), p0.end()), m(3, 0), v(3, 0);
            for (int s = 1; s <= 4; ++s) {
                std::vector<double> g = grad_of(w);
                for (size_t i = 0; i < 3; ++i) {
                    if (decoupled)
                        w[i] *= 1 - lr * wd;
                    else
                        g[i] += wd * w[i];
                    m[i] = b1 * m[i] + (1 - b1) * g[i];
                    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
                    const double bc1 = 1 - std::pow(b1, s), bc2 = 1 - std::pow(b2, s);
                    w[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
                }
            }
            check(run(*opt, p, 4), w);
            CHECK(opt->steps() == 4);
        }
    }
}

TEST_CASE("optimizers: the second step makes no plan; the loss read before step() brings the "
          "gradients along") {
    for (const bool item_first : {false, true}) {
        CAPTURE(item_first);
        Tensor w = param({0.5f, -0.5f, 0.25f}, {3});
        Tensor v = param({1.0f, 2.0f, -1.0f}, {3});
        const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3});
        nn::SGD sgd({w}, 0.1, 0.9);
        nn::Adam adam({v}, 0.1);
        std::vector<size_t> plans;
        std::vector<float> losses;
        for (int s = 0; s < 3; ++s) {
            sgd.zero_grad();
            adam.zero_grad();
            Tensor loss = ((w * x).sum() - (v * x).sum().square() + 3.0).square();
            loss.backward();
            if (item_first) {
                losses.push_back(loss.item());
                // The loss's plan computed the gradients too: step() runs the updates only.
                CHECK(w.grad().is_realized());
                CHECK(v.grad().is_realized());
            }
            sgd.step();
            adam.step();
            if (!item_first) losses.push_back(loss.item());
            plans.push_back(tempura::plan_cache_stats().entries);
        }
        // Momentum and Adam's moments start as buffers of zeros: the first step's plans are
        // every step's.
        CHECK(plans[1] == plans[0]);
        CHECK(plans[2] == plans[0]);
        // Both orders compute the same losses (w, v from the same start, the same updates).
        static std::vector<float> first;
        if (!item_first)
            first = losses;
        else
            CHECK(losses == first);
    }
}

TEST_CASE("optimizers: a step is one plan, replayed; the loss is read without running again") {
    Tensor w = param({0.5f, -0.5f}, {2});
    const Tensor x = Tensor::from_vector(std::vector<float>{1, 2});
    nn::Adam opt({w}, 0.1);
    std::vector<bool> realized_by_step;
    for (int s = 0; s < 3; ++s) {
        opt.zero_grad();
        Tensor loss = ((w * x).sum() - 3.0).square();
        const float before = ((w * x).sum() - 3.0).square().item(); // its value before the step
        loss.backward();
        opt.step();
        realized_by_step.push_back(loss.is_realized());
        CHECK(loss.item() == before); // from the step's plan, not recomputed with the new w
    }
    // The loss was realized inside the step (its backward() made it share its state with the
    // copy the step realized): reading it afterwards runs nothing.
    CHECK(realized_by_step == std::vector<bool>{true, true, true});
    // ... and only that buffer: once the caller's loss is gone, the parameter's old value (which
    // the loss's graph read) is freed by the step that replaced it.
    {
        Tensor v = param({1.0f, 2.0f}, {2});
        nn::SGD sgd({v}, 0.1);
        const std::weak_ptr<tempura::runtime::Buffer> old = v.buffer();
        {
            Tensor loss = (v * x).sum().square();
            loss.backward();
            sgd.step();
        }
        CHECK(old.expired());
    }
    CHECK(error_of([] { nn::SGD({Tensor::ones({2})}, 0.1); }) ==
          "[SGD] parameter 0 does not require a gradient (call requires_grad() on it)");
}

TEST_CASE("training: linear regression converges") {
    std::mt19937 rng(3);
    const int64_t n = 64;
    std::vector<float> xs = randoms(rng, n * 3, 1), ys(n);
    const float tw[3] = {2.0f, -1.0f, 0.5f}, tb = 0.3f;
    for (int64_t i = 0; i < n; ++i)
        ys[i] = tw[0] * xs[i * 3] + tw[1] * xs[i * 3 + 1] + tw[2] * xs[i * 3 + 2] + tb;
    const Tensor x = Tensor::from_vector(xs, {n, 3}), y = Tensor::from_vector(ys, {n});
    Tensor w = param({0, 0, 0}, {3}), b = param({0}, {1});
    nn::SGD opt({w, b}, 0.1);
    float loss = 0;
    for (int step = 0; step < 200; ++step) {
        opt.zero_grad();
        Tensor l = nn::mse_loss(x.matmul(w) + b, y);
        l.backward();
        opt.step();
        loss = l.item();
    }
    CHECK(loss < 1e-6f);
    const std::vector<float> got = w.to_vector();
    for (int i = 0; i < 3; ++i) CHECK(got[i] == doctest::Approx(tw[i]).epsilon(1e-3));
    CHECK(b.item() == doctest::Approx(tb).epsilon(1e-3));
}

TEST_CASE("training: an MLP reaches 95% training accuracy on synthetic classes") {
    // Four Gaussian blobs in 8 dims.
    std::mt19937 rng(5);
    const int64_t n = 256, d = 8, classes = 4, hidden = 32;
    std::vector<float> centers = randoms(rng, classes * d, 2), xs(n * d);
    std::vector<int32_t> labels(n);
    std::normal_distribution<float> noise(0, 0.7f);
    for (int64_t i = 0; i < n; ++i) {
        labels[i] = static_cast<int32_t>(i % classes);
        for (int64_t j = 0; j < d; ++j) xs[i * d + j] = centers[labels[i] * d + j] + noise(rng);
    }
    const Tensor x = Tensor::from_vector(xs, {n, d});
    const Tensor y = Tensor::from_vector(labels, {n});
    Tensor w1 = param(randoms(rng, hidden * d, 0.3f), {hidden, d});
    Tensor b1 = param(std::vector<float>(hidden, 0), {hidden});
    Tensor w2 = param(randoms(rng, classes * hidden, 0.3f), {classes, hidden});
    Tensor b2 = param(std::vector<float>(classes, 0), {classes});
    nn::Adam opt({w1, b1, w2, b2}, 0.01);
    const auto forward = [&] { return nn::linear(nn::linear(x, w1, b1).relu(), w2, b2); };
    for (int step = 0; step < 100; ++step) {
        opt.zero_grad();
        nn::cross_entropy(forward(), y).backward();
        opt.step();
    }
    const std::vector<int32_t> pred = forward().argmax(1).to_vector<int32_t>();
    int right = 0;
    for (int64_t i = 0; i < n; ++i) right += pred[i] == labels[i];
    MESSAGE("MLP training accuracy: ", right, " / ", n);
    CHECK(right >= 0.95 * n);
}

TEST_CASE("training: a small CNN learns a synthetic image task") {
    // 8x8 images: a horizontal bar (class 0) or a vertical bar (class 1), at random places,
    // with noise.
    std::mt19937 rng(9);
    const int64_t n = 64;
    std::vector<float> xs(n * 64);
    std::vector<int32_t> labels(n);
    std::normal_distribution<float> noise(0, 0.2f);
    for (int64_t i = 0; i < n; ++i) {
        labels[i] = static_cast<int32_t>(i % 2);
        const int64_t at = static_cast<int64_t>(rng() % 6) + 1;
        for (int64_t r = 0; r < 8; ++r)
            for (int64_t c = 0; c < 8; ++c) {
                const bool on = labels[i] == 0 ? r == at : c == at;
                xs[i * 64 + r * 8 + c] = (on ? 1.0f : 0.0f) + noise(rng);
            }
    }
    const Tensor x = Tensor::from_vector(xs, {n, 1, 8, 8});
    const Tensor y = Tensor::from_vector(labels, {n});
    Tensor k = param(randoms(rng, 4 * 9, 0.3f), {4, 1, 3, 3});
    Tensor kb = param(std::vector<float>(4, 0), {4});
    Tensor w = param(randoms(rng, 2 * 4 * 9, 0.1f), {2, 36});
    Tensor b = param(std::vector<float>(2, 0), {2});
    nn::Adam opt({k, kb, w, b}, 0.02);
    const auto forward = [&] {
        nn::ConvOptions o;
        o.bias = kb;
        const Tensor h = nn::max_pool2d(nn::conv2d(x, k, o).relu(), {.kernel = {2}}); // [n,4,3,3]
        return nn::linear(h.reshape({n, 36}), w, b);
    };
    float first = 0, last = 0;
    for (int step = 0; step < 60; ++step) {
        opt.zero_grad();
        Tensor loss = nn::cross_entropy(forward(), y);
        loss.backward();
        opt.step();
        (step == 0 ? first : last) = loss.item();
    }
    const std::vector<int32_t> pred = forward().argmax(1).to_vector<int32_t>();
    int right = 0;
    for (int64_t i = 0; i < n; ++i) right += pred[i] == labels[i];
    MESSAGE("CNN: loss ", first, " -> ", last, ", accuracy ", right, " / ", n);
    CHECK(last < first / 4);
    CHECK(right >= 0.95 * n);
}

TEST_CASE("realize: two outputs of one kernel along a vector axis (an optimizer's shape)") {
    // g = x.sum(0) and u = p - g / 100 have one shape: one kernel writes both, vectorized (the
    // expander once refused the GROUP of their stores).
    std::mt19937 rng(2);
    const std::vector<float> xs = randoms(rng, 256 * 32, 1), ps = randoms(rng, 32, 1);
    Tensor g = Tensor::from_vector(xs, {256, 32}).sum(0);
    Tensor u = Tensor::from_vector(ps, {32}) - g / 100.0;
    tempura::realize({g, u});
    const std::vector<float> gv = g.to_vector(), uv = u.to_vector();
    for (size_t j = 0; j < 32; ++j) {
        double s = 0;
        for (size_t i = 0; i < 256; ++i) s += xs[i * 32 + j];
        CHECK(gv[j] == doctest::Approx(s).epsilon(1e-4));
        CHECK(uv[j] == doctest::Approx(ps[j] - gv[j] / 100.0).epsilon(1e-5));
    }
}

TEST_CASE("FixedTensor trains too: grad() has the parameter's type") {
    using tempura::FixedTensor;
    auto w = FixedTensor<float, 2, 3>::full(0.5f);
    w.requires_grad();
    const auto x = FixedTensor<float, 3, 1>::ones();
    const FixedTensor<float> loss = w.dot(x).sum();
    loss.backward();
    const FixedTensor<float, 2, 3> g = w.grad();
    CHECK(g.to_vector() == std::vector<float>(6, 1.0f));
    w.assign(w - g * 0.5f);
    CHECK(w.to_vector() == std::vector<float>(6, 0.0f));
}

// max_pool2d states its own gradient (CUSTOM_GRAD kind MaxPool): the input padded with -inf is
// one copy kernel, the pool's output another, the windows' argmax (the first tap equal to it) a
// third, the output's gradient is read from a buffer (a kernel here: the sum's gradient of ones),
// the padded input's gradient reads them (two kernels: the windows' adjoint, then through the
// padding's select), and the last crops the padding, instead of every window of an input element
// recomputing its argmax (ResNet-18's first pool: 182 -> 125 ms a training step at batch 8). Ties
// and padding as PyTorch: the first maximum, never the padding.
TEST_CASE("max_pool2d's gradient: the argmax, the padded input's gradient, its crop") {
    std::vector<float> v(2 * 3 * 9 * 9);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7) % 5); // many ties
    Tensor x = Tensor::from_vector(v, {2, 3, 9, 9});
    x.requires_grad();
    const Tensor y = tempura::nn::max_pool2d(x, {.kernel = {3}, .stride = {2}, .padding = {1}});
    CHECK(y.shape() == Shape{2, 3, 5, 5});
    y.sum().backward();
    Tensor g = x.grad();
    g.realize();
    CHECK(g.kernels().size() == 7);
    // The reference: each window's first maximum (row-major) over the unpadded elements.
    std::vector<float> want(v.size(), 0.f);
    for (int64_t nc = 0; nc < 6; ++nc)
        for (int64_t oy = 0; oy < 5; ++oy)
            for (int64_t ox = 0; ox < 5; ++ox) {
                int64_t best = -1;
                for (int64_t ky = 0; ky < 3; ++ky)
                    for (int64_t kx = 0; kx < 3; ++kx) {
                        const int64_t iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
                        if (iy < 0 || iy >= 9 || ix < 0 || ix >= 9) continue;
                        const int64_t at = nc * 81 + iy * 9 + ix;
                        if (best < 0 || v[static_cast<size_t>(at)] > v[static_cast<size_t>(best)])
                            best = at;
                    }
                want[static_cast<size_t>(best)] += 1.f;
            }
    CHECK(g.to_vector<float>() == want);
}

// A 3 x 3 convolution's weight gradient with 8 or more input channels a group reads its input
// copied channels last (the input channels in vector lanes, one store per gradient element after
// the reduce over the batch's positions), in chunks of whole images where the batch holds more
// than 2048 positions. Against the definition, with dilation, groups and padding; the reduce's
// lanes are the input channels' (16 of them, or 8 where a group has 8, on an AVX-512 host; a
// group's channels padded with zeros to a multiple of 8: 12 take 16 lanes).
TEST_CASE("conv2d's weight gradient over channels-last input against the definition") {
    struct Case {
        int64_t n, cin, h, w, cout, pad, dil, groups;
    };
    const Case cases[] = {
        {2, 16, 7, 7, 8, 1, 1, 1},   // one chunk
        {4, 16, 24, 24, 4, 1, 1, 2}, // 4 x 576 positions: two chunks of two images, two groups
        {3, 8, 9, 11, 6, 2, 2, 1},   // dilated, padded wider
        {2, 24, 9, 9, 4, 1, 1, 2},   // 12 channels a group, padded to 16
    };
    std::mt19937 rng(91);
    for (const Case& c : cases) {
        CAPTURE(c.n);
        CAPTURE(c.h);
        const int64_t cg = c.cin / c.groups, rc = c.cout / c.groups;
        const int64_t oh = c.h + 2 * c.pad - 2 * c.dil, ow = c.w + 2 * c.pad - 2 * c.dil;
        const auto xv = randoms(rng, static_cast<size_t>(c.n * c.cin * c.h * c.w), 1.0f);
        const auto wv = randoms(rng, static_cast<size_t>(c.cout * cg * 9), 0.5f);
        const auto gv = randoms(rng, static_cast<size_t>(c.n * c.cout * oh * ow), 1.0f);
        Tensor w = Tensor::from_vector(wv, {c.cout, cg, 3, 3});
        w.requires_grad();
        nn::ConvOptions o;
        o.padding = {c.pad};
        o.dilation = {c.dil};
        o.groups = c.groups;
        const Tensor y = nn::conv2d(Tensor::from_vector(xv, {c.n, c.cin, c.h, c.w}), w, o);
        REQUIRE(y.shape() == Shape{c.n, c.cout, oh, ow});
        (y * Tensor::from_vector(gv, {c.n, c.cout, oh, ow})).sum().backward();
        Tensor dw = w.grad();
        dw.realize();
        if (tempura::default_device() == "CPU" &&
            tempura::runtime::host_cpu_features().find("+avx512f") != std::string::npos) {
            // The reduce over the positions (the longest name: its output, then its reduce axes).
            const tempura::KernelInfo* reduce = nullptr;
            for (const auto& k : dw.kernels())
                if (k.name.rfind("r_", 0) == 0 &&
                    (reduce == nullptr || k.name.size() > reduce->name.size()))
                    reduce = &k;
            REQUIRE(reduce != nullptr);
            const std::string lanes =
                "<" + std::to_string(std::min<int64_t>((cg + 7) / 8 * 8, 16)) + " x float>";
            CHECK(reduce->source.find(lanes) != std::string::npos);
        }
        const std::vector<float> got = dw.to_vector<float>();
        int bad = 0;
        for (int64_t co = 0; co < c.cout; ++co)
            for (int64_t ci = 0; ci < cg; ++ci)
                for (int64_t a = 0; a < 3; ++a)
                    for (int64_t b = 0; b < 3; ++b) {
                        double want = 0;
                        const int64_t chan = (co / rc) * cg + ci;
                        for (int64_t n = 0; n < c.n; ++n)
                            for (int64_t i = 0; i < oh; ++i)
                                for (int64_t j = 0; j < ow; ++j) {
                                    const int64_t y2 = i + a * c.dil - c.pad,
                                                  x2 = j + b * c.dil - c.pad;
                                    if (y2 < 0 || y2 >= c.h || x2 < 0 || x2 >= c.w) continue;
                                    want += double{gv[static_cast<size_t>(
                                                ((n * c.cout + co) * oh + i) * ow + j)]} *
                                            xv[static_cast<size_t>(
                                                ((n * c.cin + chan) * c.h + y2) * c.w + x2)];
                                }
                        const float v = got[static_cast<size_t>(((co * cg + ci) * 3 + a) * 3 + b)];
                        if (!(std::fabs(v - want) <= 1e-3 * std::max(1.0, std::fabs(want))) &&
                            bad++ < 5)
                            MESSAGE("dw[", co, ", ", ci, ", ", a, ", ", b, "] = ", v, ", want ",
                                    want);
                    }
        CHECK(bad == 0);
    }
}
