// The main example: an MNIST-style classifier, 784 (28x28 pixels) -> 128 (ReLU) -> 10 logits,
// softmax and argmax, on a batch of 64 images, compiled and run by Tempura on the CPU.
//
// No dataset can be downloaded here, so both the weights and the "images" are synthetic and
// deterministic: weights are drawn from a fixed-seed generator (PyTorch's default uniform
// +-1/sqrt(fan_in) initialization), and each image is a noisy blob whose position depends on a
// "digit" label. The network is untrained, so its predicted classes are arbitrary; what the
// example shows is the pipeline: the lazy graph, the generated kernels, the result (checked
// against a plain C++ forward pass) and the timings with a cold and a warm kernel cache.
//
// It exits non-zero if a softmax row does not sum to 1 (within 1e-5) or the result differs from
// the reference.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <tempura/backend/llvm_cpu.hpp>
#include <tempura/tempura.hpp>

#include "mnist_synthetic.hpp"

namespace {

using mnist_synthetic::Rng;
using tempura::Shape;
using tempura::Tensor;

constexpr int64_t kBatch = 64, kIn = 784, kHidden = 128, kClasses = 10;

// y = x @ W^T + b with W stored [out, in] (PyTorch's convention).
struct Linear {
    int64_t in, out;
    std::vector<float> w, b; // host copies, for the reference forward pass
    Tensor weight, bias;

    Linear(int64_t in_features, int64_t out_features, Rng& rng)
        : in(in_features), out(out_features) {
        const float bound = 1.0f / std::sqrt(static_cast<float>(in));
        for (int64_t i = 0; i < in * out; ++i) w.push_back(rng.uniform(-bound, bound));
        for (int64_t i = 0; i < out; ++i) b.push_back(rng.uniform(-bound, bound));
        weight = Tensor::from_vector(w, {out, in});
        bias = Tensor::from_vector(b);
    }
    Tensor forward(const Tensor& x) const { return x.dot(weight.transpose(0, 1)) + bias; }
};

struct MnistNet {
    Linear fc1, fc2;
    explicit MnistNet(Rng& rng) : fc1(kIn, kHidden, rng), fc2(kHidden, kClasses, rng) {}
    Tensor forward(const Tensor& x) const { return fc2.forward(fc1.forward(x).relu()); } // logits
};

// The forward pass in plain C++, for checking.
std::vector<float> reference_logits(const MnistNet& net, const std::vector<float>& x) {
    const auto h = mnist_synthetic::dense(x, net.fc1.w, net.fc1.b, kBatch, kIn, kHidden, true);
    return mnist_synthetic::dense(h, net.fc2.w, net.fc2.b, kBatch, kHidden, kClasses, false);
}

struct Outputs {
    Tensor logits, probs, preds;
    std::vector<tempura::KernelInfo> kernels; // every kernel that ran, in order
};

// Builds the graph for one batch and realizes it: the logits first (so that softmax and argmax
// read them from a buffer instead of recomputing the network), then probabilities and classes.
Outputs run(const MnistNet& net, const std::vector<float>& images) {
    Outputs o;
    o.logits = net.forward(Tensor::from_vector(images, {kBatch, kIn}));
    o.logits.realize();
    o.probs = o.logits.softmax(-1);
    o.probs.realize();
    o.preds = o.logits.argmax(-1);
    o.preds.realize();
    for (const Tensor* t : {&o.logits, &o.probs, &o.preds})
        o.kernels.insert(o.kernels.end(), t->kernels().begin(), t->kernels().end());
    return o;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The first `max_lines` lines of `text`, and a note of how many were left out.
std::string head(const std::string& text, size_t max_lines) {
    size_t pos = 0, lines = 0;
    while (lines < max_lines && pos < text.size()) {
        const size_t nl = text.find('\n', pos);
        if (nl == std::string::npos) return text;
        pos = nl + 1;
        ++lines;
    }
    if (pos >= text.size()) return text;
    const size_t total = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
    return text.substr(0, pos) + "... (" + std::to_string(total - lines) + " more lines)\n";
}

// Checks one batch: softmax rows sum to 1, values match the reference, argmax picks a maximum.
int check(const MnistNet& net, const std::vector<float>& images, const Outputs& o,
          const char* what) {
    const std::vector<float> logits = o.logits.to_vector<float>();
    const std::vector<float> probs = o.probs.to_vector<float>();
    const std::vector<int32_t> preds = o.preds.to_vector<int32_t>();
    const std::vector<float> ref = reference_logits(net, images);
    int failures = 0;
    double worst_sum = 0, worst_logit = 0;
    for (int64_t r = 0; r < kBatch; ++r) {
        double sum = 0;
        for (int64_t c = 0; c < kClasses; ++c) {
            const size_t i = static_cast<size_t>(r * kClasses + c);
            sum += probs[i];
            worst_logit = std::max(worst_logit, static_cast<double>(std::fabs(logits[i] - ref[i])));
        }
        worst_sum = std::max(worst_sum, std::fabs(sum - 1.0));
        const int32_t p = preds[static_cast<size_t>(r)];
        const float* row = &logits[static_cast<size_t>(r * kClasses)];
        if (p < 0 || p >= kClasses || row[p] != *std::max_element(row, row + kClasses)) ++failures;
    }
    std::printf("[%s] max |row sum - 1| = %.2e, max |logit - reference| = %.2e, argmax %s\n", what,
                worst_sum, worst_logit, failures ? "WRONG" : "ok");
    if (worst_sum > 1e-5) {
        std::printf("FAILED: a softmax row does not sum to 1 within 1e-5\n");
        ++failures;
    }
    if (worst_logit > 1e-3) {
        std::printf("FAILED: logits differ from the reference forward pass\n");
        ++failures;
    }
    return failures;
}

} // namespace

int main() {
    Rng rng{42};
    const MnistNet net(rng);
    const std::vector<float> images = mnist_synthetic::images(kBatch, rng);

    // ---- the lazy graph ----------------------------------------------------------------------
    const Tensor logits_graph = net.forward(Tensor::from_vector(images, {kBatch, kIn}));
    std::printf("=== IR tree of the logits (lazy, before realize; %zu nodes) ===\n%s\n",
                logits_graph.uop().node_count(), head(logits_graph.uop().tree(), 40).c_str());

    // ---- first run: graph -> kernels -> JIT -> result, with compilation ------------------------
    const auto misses0 = tempura::runtime::cpu_kernel_cache_stats().misses;
    auto t0 = std::chrono::steady_clock::now();
    const Outputs first = run(net, images);
    const double cold_ms = ms_since(t0);
    const auto compiled = tempura::runtime::cpu_kernel_cache_stats().misses - misses0;

    // Kernels named r_* reduce, E_* are elementwise; the numbers are the loop extents. A kernel
    // whose program was compiled before (argmax's row max is softmax's) is not compiled again.
    std::printf("=== Generated kernels: %zu ran, %zu distinct programs compiled ===\n",
                first.kernels.size(), static_cast<size_t>(compiled));
    const std::pair<const char*, const Tensor*> parts[] = {
        {"logits", &first.logits}, {"softmax", &first.probs}, {"argmax", &first.preds}};
    for (const auto& [part, t] : parts)
        for (const tempura::KernelInfo& k : t->kernels())
            std::printf("  %-8s %-16s backend %s, %zu lines of LLVM IR\n", part, k.name.c_str(),
                        k.backend.c_str(),
                        static_cast<size_t>(std::count(k.source.begin(), k.source.end(), '\n')));
    if (!first.kernels.empty()) {
        // The first kernel is the hidden layer: matmul, bias and ReLU fused (the attribute line
        // with the host CPU's feature list is long, so the listing is cut before it).
        const tempura::KernelInfo& k = first.kernels.front();
        std::string src = k.source.substr(0, k.source.find("\nattributes #"));
        std::printf("\n=== LLVM IR of kernel %s ===\n%s\n", k.name.c_str(), head(src, 60).c_str());
    }

    // ---- the result ----------------------------------------------------------------------------
    const std::vector<int32_t> preds = first.preds.to_vector<int32_t>();
    const std::vector<float> probs = first.probs.to_vector<float>();
    std::printf("\n=== Result (untrained network, synthetic images) ===\npredicted classes:");
    for (int64_t i = 0; i < kBatch; ++i)
        std::printf("%s%d", i % 32 ? " " : "\n  ", preds[static_cast<size_t>(i)]);
    std::printf("\nprobabilities of image 0:");
    double row0 = 0;
    for (int64_t c = 0; c < kClasses; ++c) {
        std::printf(" %.4f", static_cast<double>(probs[static_cast<size_t>(c)]));
        row0 += probs[static_cast<size_t>(c)];
    }
    std::printf("  (sum %.6f)\n", row0);
    int failures = check(net, images, first, "batch 1");

    // ---- second run: new images, same structure: every kernel comes from the cache -------------
    const std::vector<float> images2 = mnist_synthetic::images(kBatch, rng);
    const auto before = tempura::runtime::cpu_kernel_cache_stats();
    t0 = std::chrono::steady_clock::now();
    const Outputs second = run(net, images2);
    const double warm_ms = ms_since(t0);
    const auto after = tempura::runtime::cpu_kernel_cache_stats();
    failures += check(net, images2, second, "batch 2");

    std::printf("\n=== Timings (batch %lld, %lld-%lld-%lld, wall clock) ===\n",
                static_cast<long long>(kBatch), static_cast<long long>(kIn),
                static_cast<long long>(kHidden), static_cast<long long>(kClasses));
    // The first realize schedules the graph, lowers every kernel and JIT-compiles each distinct
    // one (softmax's and argmax's row-max kernels are the same program: compiled once). The
    // second finds the plan of this graph structure cached: it only allocates and runs.
    std::printf("first realize  (schedule + codegen + LLVM compile + run), %zu kernels compiled: "
                "%8.2f ms\n",
                static_cast<size_t>(compiled), cold_ms);
    std::printf("second realize (new images, warm cache),                  %zu kernels compiled: "
                "%8.2f ms\n",
                after.misses - before.misses, warm_ms);
    std::printf("speed-up from the cache: %.1fx\n", cold_ms / warm_ms);
    if (failures) std::printf("\n%d check(s) FAILED\n", failures);
    return failures ? 1 : 0;
}
