// A linear layer, y = x @ W^T + b, built from tensor operations. The weight is stored PyTorch
// style as [out_features, in_features], so row i holds every weight feeding output i.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <tempura/tempura.hpp>

namespace {

using tempura::Tensor;

struct Linear {
    Tensor weight;                     // [out_features, in_features]
    Tensor bias;                       // [out_features]
    std::vector<float> w_host, b_host; // kept to check the result by hand

    Linear(int64_t in_features, int64_t out_features) {
        // A simple deterministic initialization (real code would draw random numbers).
        for (int64_t i = 0; i < in_features * out_features; ++i)
            w_host.push_back(std::sin(static_cast<float>(i) * 0.1f) * 0.1f);
        for (int64_t o = 0; o < out_features; ++o)
            b_host.push_back(0.01f * static_cast<float>(o + 1));
        weight = Tensor::from_vector(w_host, {out_features, in_features});
        bias = Tensor::from_vector(b_host);
    }

    // x: [in] or [batch, in] -> [out] or [batch, out]. Lazy: builds the graph only.
    Tensor forward(const Tensor& x) const { return x.dot(weight.transpose(0, 1)) + bias; }
};

std::string shape_str(const tempura::Shape& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

} // namespace

int main() {
    const Linear layer(4, 2); // 4 inputs -> 2 outputs

    // One sample with 4 features, then a batch of 3.
    const std::vector<float> sample = {1, 2, 3, 4};
    Tensor out = layer.forward(Tensor::from_vector(sample));
    out.realize();
    const std::vector<float> y = out.to_vector<float>();
    std::printf("Weight %s, bias %s\n", shape_str(layer.weight.shape()).c_str(),
                shape_str(layer.bias.shape()).c_str());
    std::printf("forward([1, 2, 3, 4]) -> %s: [%.6f, %.6f]  (%zu kernel(s))\n",
                shape_str(out.shape()).c_str(), static_cast<double>(y[0]),
                static_cast<double>(y[1]), out.kernels().size());

    const std::vector<float> batch = {1, 2, 3, 4, 0, 0, 0, 0, -1, 0.5f, 2, -3};
    Tensor out_b = layer.forward(Tensor::from_vector(batch, {3, 4}));
    const std::vector<float> yb = out_b.to_vector<float>();
    std::printf("forward(batch %s) -> %s:\n", "[3, 4]", shape_str(out_b.shape()).c_str());
    int bad = 0;
    for (int r = 0; r < 3; ++r) {
        std::printf("  [");
        for (int o = 0; o < 2; ++o) {
            float ref = layer.b_host[static_cast<size_t>(o)];
            for (int i = 0; i < 4; ++i)
                ref += batch[static_cast<size_t>(r * 4 + i)] *
                       layer.w_host[static_cast<size_t>(o * 4 + i)];
            const float v = yb[static_cast<size_t>(r * 2 + o)];
            std::printf("%s%.6f", o ? ", " : "", static_cast<double>(v));
            if (std::fabs(v - ref) > 1e-5f) ++bad;
            if (r == 0 && std::fabs(y[static_cast<size_t>(o)] - ref) > 1e-5f) ++bad;
        }
        std::printf("]\n");
    }
    std::printf("%s\n", bad ? "MISMATCH against the hand-written reference"
                            : "matches the hand-written reference");
    return bad == 0 ? 0 : 1;
}
