// Row fusion: reductions that feed one another over the same rows run in one kernel (softmax,
// log_softmax, layer_norm, rms_norm, attention's softmax), with exact kernel counts, the
// reference interpreter's values, and PyTorch's where /usr/bin/python3 has torch.
#include <unistd.h>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <tempura/schedule/schedule.hpp>
#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

#include "../support.hpp"
#include "kernel_check.hpp"

namespace {

using kernel_check::names;
using kernel_check::planned;

using tempura::Shape;
using tempura::Tensor;

// This file's checks hold the values to a tighter tolerance than the kernel-count tests'.
size_t realized_kernels(Tensor& t, double tol = 2e-6) {
    return kernel_check::realized_kernels(t, tol);
}

std::vector<float> values(int64_t n, uint32_t seed) {
    std::vector<float> v(static_cast<size_t>(n));
    uint32_t s = seed;
    for (float& x : v) {
        s = s * 1664525u + 1013904223u;
        x = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001 - 1000) / 250.0f;
    }
    return v;
}

Tensor input(const Shape& shape, uint32_t seed) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return Tensor::from_vector(values(n, seed), shape);
}

} // namespace

TEST_CASE("row fusion: softmax and log_softmax over rows are one kernel") {
    Tensor x = input({64, 96}, 1);
    Tensor s = x.softmax(1);
    CHECK(realized_kernels(s) == 1);
    // The output [64, 96] and two reduce loops of 96 (the max, the sum of exp(x - max)).
    CHECK(names(s) == "r_64_96_96_96");
    Tensor l = x.log_softmax(-1);
    CHECK(realized_kernels(l) == 1);
    // Three dims, the rows over the last one; and a row that is not a multiple of the lanes.
    Tensor s3 = input({3, 5, 37}, 2).softmax(-1);
    CHECK(realized_kernels(s3) == 1);
    // A loss over log_softmax: its sum over the same rows is the kernel's root reduce, the
    // row max and sum computed before its loop; the mean over the batch inlined as before.
    Tensor t = input({8, 10}, 3);
    Tensor nll = (t.log_softmax(-1) * input({8, 10}, 4)).sum(-1).mean();
    CHECK(realized_kernels(nll) == 1);
}

// A wide dtype in a row-fused kernel (an Int64 mask: 8 bytes a lane) halves the vector width
// the expander may use; every loop over the row must keep its lanes at that width. They were
// unrolled scalars, and a causal softmax ran 9x slower than an unmasked one.
TEST_CASE("row fusion: an Int64 mask keeps every loop over the row in vector lanes") {
    const int64_t n = 128;
    Tensor x = input({4, n, n}, 5);
    const Tensor i = Tensor::arange(n, tempura::DType::Int64).reshape({n, 1});
    const Tensor j = Tensor::arange(n, tempura::DType::Int64).reshape({1, n});
    Tensor s = x.masked_fill(j > i, -INFINITY).softmax(-1);
    CHECK(realized_kernels(s) == 1);
    const std::string src = s.kernels().back().source;
    // Vector loads of the scores and of the mask's column indices, no scalar score.
    CHECK(src.find(" x i64>") != std::string::npos);
    CHECK(src.find("load float,") == std::string::npos);
    // triu/tril build their masks on Int32 (twice the lanes): causal attention's case.
    Tensor c =
        x.masked_fill(Tensor::ones({n, n}, tempura::DType::Bool).triu(1), -INFINITY).softmax(-1);
    CHECK(realized_kernels(c) == 1);
    CHECK(c.kernels().back().source.find(" x i64>") == std::string::npos);
    // (The same values; the sums' lanes differ, 16 against 8, so not to the last bit.)
    const std::vector<float> cv = c.to_vector<float>(), sv = s.to_vector<float>();
    REQUIRE(cv.size() == sv.size());
    for (size_t e = 0; e < cv.size(); ++e) CHECK(std::fabs(cv[e] - sv[e]) <= 1e-6f);
}

TEST_CASE("row fusion: a reduce over an outer axis stays its own kernel") {
    // softmax over axis 0 of [N, D]: the output's inner loop runs along the kept axis, so a
    // fused max would be computed again for every element; it is materialized as before.
    Tensor x = input({16, 24}, 5);
    Tensor s = x.softmax(0);
    CHECK(realized_kernels(s) == 3);
}

TEST_CASE("row fusion: layer_norm with its affine epilogue and rms_norm are one kernel") {
    Tensor x = input({32, 48}, 6), w = input({48}, 7), b = input({48}, 8);
    Tensor ln = tempura::nn::layer_norm(x, {48}, w, b, 1e-5);
    CHECK(realized_kernels(ln, 1e-5) == 1);
    // Mean and variance: two reduce loops over the row, then the normalized, scaled output.
    CHECK(names(ln) == "r_32_48_48_48");
    Tensor rms = tempura::nn::rms_norm(x, w, 1e-6);
    CHECK(realized_kernels(rms, 1e-5) == 1);
    CHECK(names(rms) == "r_32_48_48");
    // Over the last two dims.
    Tensor x3 = input({4, 6, 8}, 9);
    Tensor ln2 = tempura::nn::layer_norm(x3, {6, 8});
    CHECK(realized_kernels(ln2, 1e-5) == 1);
}

TEST_CASE("row fusion: a matmul read by the fused loops is materialized once") {
    // The logits feed the max, the sum and the output: inlined they would be computed three
    // times, so the matmul is its own kernel and the softmax one more.
    Tensor x = input({8, 16}, 10), w = input({16, 12}, 11);
    Tensor p = x.matmul(w).softmax(-1);
    CHECK(realized_kernels(p, 1e-5) == 2);
    CHECK(names(p) == "r_8_12_16 r_8_12_12_12");
}

TEST_CASE("row fusion: a normalized row read by a matmul is its own one-pass kernel") {
    // layer_norm's output feeds the next linear layer through an EXPAND: it is computed once,
    // in one kernel, not split into a mean kernel, a variance kernel and a normalization
    // computed again for every block of the matmul's columns.
    Tensor x = input({16, 32}, 21), w = input({32, 8}, 22);
    Tensor y = tempura::nn::layer_norm(x, {32}).matmul(w);
    CHECK(realized_kernels(y, 1e-5) == 2);
    CHECK(names(y) == "r_16_32_32_32 r_16_8_32");
    // Post-LN residual layers (a BERT-style encoder): each layer_norm's output is read by the
    // next matmul and by the next residual add; each is still one kernel.
    Tensor w2 = input({32, 32}, 23);
    Tensor h = tempura::nn::layer_norm(x, {32});
    Tensor h2 = tempura::nn::layer_norm(h + h.matmul(w2), {32});
    Tensor h3 = tempura::nn::layer_norm(h2 + h2.matmul(w2), {32});
    CHECK(realized_kernels(h3, 1e-5) == 5);
    CHECK(names(h3) == "r_16_32_32_32 r_16_32_32 r_16_32_32_32 r_16_32_32 r_16_32_32_32");
}

TEST_CASE("row fusion: attention is the scores, one softmax kernel, and the weighted sum") {
    Tensor q = input({2, 3, 16, 8}, 12), k = input({2, 3, 16, 8}, 13), v = input({2, 3, 16, 8}, 14);
    Tensor a = tempura::nn::scaled_dot_product_attention(q, k, v, true);
    CHECK(realized_kernels(a, 1e-5) == 3);
    CHECK(names(a) == "r_2_3_16_16_8 r_2_3_16_16_16_16 r_2_3_16_8_16");
}

TEST_CASE("row fusion: the values are PyTorch's") {
    const Shape shape{6, 40};
    Tensor x = input(shape, 15), w = input({40}, 16), b = input({40}, 17);
    Tensor q = input({1, 2, 8, 4}, 18), k = input({1, 2, 8, 4}, 19), v = input({1, 2, 8, 4}, 20);
    struct Case {
        std::string name, torch;
        Tensor ours;
    };
    std::vector<Case> cases{
        {"softmax", "torch.softmax(x, -1)", x.softmax(-1)},
        {"log_softmax", "torch.log_softmax(x, -1)", x.log_softmax(-1)},
        {"layer_norm", "F.layer_norm(x, (40,), w, b, 1e-5)",
         tempura::nn::layer_norm(x, {40}, w, b, 1e-5)},
        {"rms_norm", "x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w",
         tempura::nn::rms_norm(x, w, 1e-6)},
        {"attention",
         "torch.softmax((q @ k.transpose(-1, -2) / 2.0).masked_fill(torch.ones(8, 8).triu(1)"
         ".bool(), float('-inf')), -1) @ v",
         tempura::nn::scaled_dot_product_attention(q, k, v, true)},
    };
    std::ostringstream py;
    py.precision(9);
    const auto list = [&](const char* name, const Tensor& t, const std::string& shape_text) {
        py << name << " = torch.tensor([";
        for (float f : t.to_vector<float>()) py << f << ",";
        py << "], dtype=torch.float32).reshape(" << shape_text << ")\n";
    };
    py << "import torch, torch.nn.functional as F\n";
    list("x", x, "6, 40");
    list("w", w, "40");
    list("b", b, "40");
    list("q", q, "1, 2, 8, 4");
    list("k", k, "1, 2, 8, 4");
    list("v", v, "1, 2, 8, 4");
    for (const Case& c : cases)
        py << "print('" << c.name << "', ' '.join(repr(float(t)) for t in (" << c.torch
           << ").flatten()))\n";
    const std::string out = run_python(py.str(), "row_fusion");
    if (out.empty()) {
        MESSAGE("SKIPPED: PyTorch comparison (no python3-torch for /usr/bin/python3)");
        return;
    }
    std::istringstream lines(out);
    std::string line;
    size_t seen = 0;
    while (std::getline(lines, line)) {
        std::istringstream ls(line);
        std::string name, tok;
        ls >> name;
        std::vector<float> want;
        while (ls >> tok) want.push_back(std::strtof(tok.c_str(), nullptr));
        for (Case& c : cases) {
            if (c.name != name) continue;
            CAPTURE(name);
            ++seen;
            c.ours.realize();
            CHECK(c.ours.kernels().size() == (name == "attention" ? 3u : 1u));
            const std::vector<float> got = c.ours.to_vector<float>();
            REQUIRE(got.size() == want.size());
            for (size_t i = 0; i < got.size(); ++i) {
                CAPTURE(i);
                CHECK(std::fabs(got[i] - want[i]) <= 2e-6f * std::max(1.0f, std::fabs(want[i])));
            }
        }
    }
    CHECK(seen == cases.size());
}
