// Gradients stay finite where the true derivative is: every differentiable elementwise function
// over a sweep of hostile inputs (0, +-1e-8, +-20, +-50, +-100, +-1e30, +-inf), against float64
// references and, where python3-torch is installed, against PyTorch's own float32 gradients; ties
// follow PyTorch's conventions (relu'(0) = 0, max_pool2d sends a tied window's gradient to its
// first maximum); and a training run whose activations saturate stays finite.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <tempura/tempura.hpp>

#include "../support.hpp"

namespace {

using tempura::DType;
using tempura::Shape;
using tempura::Tensor;
namespace nn = tempura::nn;
using LD = long double;

const float kInf = std::numeric_limits<float>::infinity();

const std::vector<float> kSweep = {0.f,   1e-8f,  -1e-8f, 0.5f,   -0.5f, 1.f,  -1.f,
                                   3.f,   -3.f,   6.f,    20.f,   -20.f, 50.f, -50.f,
                                   100.f, -100.f, 1e30f,  -1e30f, kInf,  -kInf};

LD sig(LD x) { return 1 / (1 + std::exp(-x)); }

struct Fn {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    std::function<LD(LD)> df; // the true derivative (PyTorch's convention at kinks)
    const char* torch;        // the same function in PyTorch, of x
};

const std::vector<Fn>& functions() {
    static const std::vector<Fn> fns = {
        {"sigmoid", [](const Tensor& x) { return x.sigmoid(); },
         [](LD x) { return sig(x) * (1 - sig(x)); }, "torch.sigmoid(x)"},
        {"tanh", [](const Tensor& x) { return x.tanh(); },
         [](LD x) { return 1 - std::tanh(x) * std::tanh(x); }, "torch.tanh(x)"},
        {"softplus", [](const Tensor& x) { return x.softplus(); }, [](LD x) { return sig(x); },
         "F.softplus(x)"},
        {"silu", [](const Tensor& x) { return x.silu(); },
         [](LD x) { return sig(x) * (1 + x * (1 - sig(x))); }, "F.silu(x)"},
        {"mish", [](const Tensor& x) { return x.mish(); },
         [](LD x) {
             const LD t = std::tanh(std::log1p(std::exp(x)));
             return t + x * sig(x) * (1 - t * t);
         },
         "F.mish(x)"},
        {"gelu", [](const Tensor& x) { return x.gelu(); },
         [](LD x) {
             return (1 + std::erf(x / std::sqrt(LD(2)))) / 2 +
                    x * std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi_v<LD>);
         },
         "F.gelu(x)"},
        {"gelu_tanh", [](const Tensor& x) { return x.gelu("tanh"); },
         [](LD x) {
             const LD c = std::sqrt(2 / std::numbers::pi_v<LD>), a = 0.044715L;
             const LD t = std::tanh(c * (x + a * x * x * x));
             return (1 + t) / 2 + x / 2 * (1 - t * t) * c * (1 + 3 * a * x * x);
         },
         "F.gelu(x, approximate='tanh')"},
        {"elu", [](const Tensor& x) { return x.elu(); },
         [](LD x) { return x > 0 ? LD(1) : std::exp(x); }, "F.elu(x)"},
        {"leaky_relu", [](const Tensor& x) { return x.leaky_relu(0.01); },
         [](LD x) { return x > 0 ? LD(1) : LD(0.01f); }, "F.leaky_relu(x, 0.01)"},
        {"relu", [](const Tensor& x) { return x.relu(); },
         [](LD x) { return x > 0 ? LD(1) : LD(0); }, "torch.relu(x)"},
        {"relu6", [](const Tensor& x) { return x.relu6(); },
         [](LD x) { return x > 0 && x < 6 ? LD(1) : LD(0); }, "F.relu6(x)"},
        {"hardsigmoid", [](const Tensor& x) { return x.hardsigmoid(); },
         [](LD x) { return x > -3 && x < 3 ? LD(1) / 6 : LD(0); }, "F.hardsigmoid(x)"},
        {"hardswish", [](const Tensor& x) { return x.hardswish(); },
         [](LD x) { return x < -3  ? LD(0)
                           : x < 3 ? x / 3 + LD(0.5)
                                   : LD(1); }, "F.hardswish(x)"},
        {"clip", [](const Tensor& x) { return x.clip(-1, 1); },
         [](LD x) { return x >= -1 && x <= 1 ? LD(1) : LD(0); }, "torch.clamp(x, -1, 1)"},
        {"sinh", [](const Tensor& x) { return x.sinh(); }, [](LD x) { return std::cosh(x); },
         "torch.sinh(x)"},
        {"cosh", [](const Tensor& x) { return x.cosh(); }, [](LD x) { return std::sinh(x); },
         "torch.cosh(x)"},
        {"atan", [](const Tensor& x) { return x.atan(); }, [](LD x) { return 1 / (1 + x * x); },
         "torch.atan(x)"},
        {"abs", [](const Tensor& x) { return x.abs(); },
         [](LD x) { return x > 0   ? LD(1)
                           : x < 0 ? LD(-1)
                                   : LD(0); }, "torch.abs(x)"},
        {"sign", [](const Tensor& x) { return x.sign(); }, [](LD) { return LD(0); },
         "torch.sign(x)"},
        {"exp", [](const Tensor& x) { return x.exp(); }, [](LD x) { return std::exp(x); },
         "torch.exp(x)"},
        {"log", [](const Tensor& x) { return x.log(); }, [](LD x) { return 1 / x; },
         "torch.log(x)"},
        {"sqrt", [](const Tensor& x) { return x.sqrt(); },
         [](LD x) { return x < 0 ? std::nanl("") : 1 / (2 * std::sqrt(x)); }, "torch.sqrt(x)"},
        {"rsqrt", [](const Tensor& x) { return x.rsqrt(); },
         [](LD x) { return x < 0 ? std::nanl("") : -LD(0.5) / (x * std::sqrt(x)); },
         "torch.rsqrt(x)"},
        {"erf", [](const Tensor& x) { return x.erf(); },
         [](LD x) { return 2 / std::sqrt(std::numbers::pi_v<LD>) * std::exp(-x * x); },
         "torch.erf(x)"},
        {"sin", [](const Tensor& x) { return x.sin(); }, [](LD x) { return std::cos(x); },
         "torch.sin(x)"},
        {"cos", [](const Tensor& x) { return x.cos(); }, [](LD x) { return -std::sin(x); },
         "torch.cos(x)"},
        {"floor", [](const Tensor& x) { return x.floor(); }, [](LD) { return LD(0); },
         "torch.floor(x)"},
        {"round", [](const Tensor& x) { return x.round(); }, [](LD) { return LD(0); },
         "torch.round(x)"},
        {"square", [](const Tensor& x) { return x.square(); }, [](LD x) { return 2 * x; }, "x * x"},
        {"reciprocal", [](const Tensor& x) { return x.reciprocal(); },
         [](LD x) { return -1 / (x * x); }, "torch.reciprocal(x)"},
    };
    return fns;
}

// d/dx of sum(f(x)) over the sweep, one gradient per element.
std::vector<float> our_gradient(const Fn& fn) {
    Tensor x = Tensor::from_vector(kSweep, {static_cast<int64_t>(kSweep.size())});
    x.requires_grad();
    fn.f(x).sum().backward();
    return x.grad().to_vector<float>();
}

bool close(float got, float want) { return std::abs(got - want) <= 2e-3f * std::abs(want) + 1e-6f; }

// sin, cos and the functions built on them at 1e30 depend on the argument reduction, which the
// reference does in long double: compare those where |x| < 1e6 only.
bool trig(const std::string& name) { return name == "sin" || name == "cos"; }

} // namespace

TEST_CASE("nan-free gradients: every elementwise function over hostile inputs, vs float64") {
    for (const Fn& fn : functions()) {
        CAPTURE(fn.name);
        const std::vector<float> g = our_gradient(fn);
        for (size_t i = 0; i < kSweep.size(); ++i) {
            const float x = kSweep[i];
            if (trig(fn.name) && std::abs(x) > 1e6f) continue;
            const auto want = static_cast<float>(fn.df(static_cast<LD>(x)));
            if (!std::isfinite(want)) continue; // inf or NaN there in float32 (exp(100), 1/0)
            CAPTURE(x);
            CAPTURE(g[i]);
            CAPTURE(want);
            CHECK(std::isfinite(g[i]));
            CHECK(close(g[i], want));
        }
    }
}

TEST_CASE("nan-free gradients: the derivatives the issue found NaN, exactly") {
    // sigmoid'(-100), tanh'(50), tanh'(1e-9), softplus'(30), elu'(0), sinh'(0), silu'(-100),
    // mish'(+-20): each finite, with its value.
    const auto grad_at = [](float x, const std::function<Tensor(const Tensor&)>& f) {
        Tensor t = Tensor::from_vector(std::vector<float>{x}, {1});
        t.requires_grad();
        f(t).sum().backward();
        return t.grad().to_vector<float>()[0];
    };
    CHECK(grad_at(-100.f, [](const Tensor& x) { return x.sigmoid(); }) == 0.f);
    CHECK(grad_at(50.f, [](const Tensor& x) { return x.tanh(); }) == 0.f);
    CHECK(grad_at(1e-9f, [](const Tensor& x) { return x.tanh(); }) == 1.f);
    CHECK(grad_at(30.f, [](const Tensor& x) { return x.softplus(); }) == 1.f);
    CHECK(grad_at(0.f, [](const Tensor& x) { return x.elu(); }) == 1.f);
    CHECK(grad_at(0.f, [](const Tensor& x) { return x.sinh(); }) == 1.f);
    CHECK(grad_at(-100.f, [](const Tensor& x) { return x.silu(); }) == doctest::Approx(0.0));
    CHECK(grad_at(20.f, [](const Tensor& x) { return x.mish(); }) == 1.f);
    CHECK(grad_at(-20.f, [](const Tensor& x) { return x.mish(); }) ==
          doctest::Approx(-3.9e-8).epsilon(0.05));
    CHECK(grad_at(0.f, [](const Tensor& x) { return x.relu(); }) == 0.f);
}

TEST_CASE("nan-free gradients: against PyTorch's own float32 gradients") {
    std::ostringstream py;
    py << "import torch, torch.nn.functional as F\n"
          "xs = [";
    for (float v : kSweep) {
        if (std::isinf(v))
            py << (v > 0 ? "float('inf')" : "float('-inf')") << ",";
        else
            py << v << ",";
    }
    py << "]\n";
    for (const Fn& fn : functions()) {
        py << "x = torch.tensor(xs, dtype=torch.float32, requires_grad=True)\n"
           << "(" << fn.torch << ").sum().backward()\n"
           << "print('" << fn.name << "', ' '.join(repr(float(v)) for v in x.grad))\n";
    }
    const std::string out = run_python(py.str(), "nan_free");
    if (out.empty()) {
        MESSAGE("SKIPPED: PyTorch comparison (no python3-torch for /usr/bin/python3)");
        return;
    }
    std::map<std::string, std::vector<float>> torch_grads;
    std::istringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream ls(line);
        std::string name, v;
        ls >> name;
        while (ls >> v) torch_grads[name].push_back(std::strtof(v.c_str(), nullptr));
    }
    size_t compared = 0;
    for (const Fn& fn : functions()) {
        CAPTURE(fn.name);
        REQUIRE(torch_grads[fn.name].size() == kSweep.size());
        const std::vector<float> g = our_gradient(fn);
        for (size_t i = 0; i < kSweep.size(); ++i) {
            const float want = torch_grads[fn.name][i];
            if (!std::isfinite(want)) continue;
            if (trig(fn.name) && std::abs(kSweep[i]) > 1e6f) continue;
            CAPTURE(kSweep[i]);
            CAPTURE(g[i]);
            CAPTURE(want);
            CHECK(close(g[i], want));
            ++compared;
        }
    }
    CHECK(compared > 400);
}

TEST_CASE("nan-free gradients: max_pool2d sends a tied window's gradient to its first maximum") {
    // One 2x2 window of equal values, and a 3x3 input pooled 2x2 stride 1 with ties inside.
    Tensor x = Tensor::from_vector(std::vector<float>{5, 5, 5, 5}, {1, 1, 2, 2});
    x.requires_grad();
    nn::max_pool2d(x, {.kernel = {2}}).sum().backward();
    CHECK(x.grad().to_vector<float>() == std::vector<float>{1, 0, 0, 0});

    Tensor y = Tensor::from_vector(std::vector<float>{1, 3, 3, 0, 3, 2, 1, 1, 1}, {1, 1, 3, 3});
    y.requires_grad();
    nn::max_pool2d(y, {.kernel = {2}, .stride = {1}}).sum().backward();
    // Windows: [1 3 / 0 3] -> first 3 at (0,1); [3 3 / 3 2] -> (0,1); [0 3 / 1 1] -> (1,1);
    // [3 2 / 1 1] -> (1,1). Three windows take (0,1) or (1,1); PyTorch gives the same.
    CHECK(y.grad().to_vector<float>() == std::vector<float>{0, 2, 0, 0, 2, 0, 0, 0, 0});
}

TEST_CASE("nan-free gradients: a saturated tanh-gelu MLP trains with finite losses") {
    // Pre-activations of +-60 saturate tanh inside gelu("tanh") and sigmoid: the chain rule
    // through their building blocks gave NaN for some units, which AdamW spread to every weight.
    tempura::manual_seed(7);
    Tensor w1 = (Tensor::randn({16, 8}) * Tensor::full(Shape{}, 30.0f)).realize();
    Tensor w2 = (Tensor::randn({1, 16}) * Tensor::full(Shape{}, 0.1f)).realize();
    w1.requires_grad();
    w2.requires_grad();
    nn::AdamW opt({w1, w2}, 1e-2);
    const Tensor x = Tensor::randn({32, 8}).realize();
    const Tensor y = Tensor::randn({32, 1}).realize();
    for (int step = 0; step < 12; ++step) {
        opt.zero_grad();
        const Tensor h = nn::linear(x, w1).gelu("tanh") + nn::linear(x, w1).sigmoid();
        const Tensor loss = nn::mse_loss(nn::linear(h, w2), y);
        loss.backward();
        opt.step();
        CAPTURE(step);
        REQUIRE(std::isfinite(loss.item<float>()));
    }
    for (float v : w1.to_vector<float>()) REQUIRE(std::isfinite(v));
}
