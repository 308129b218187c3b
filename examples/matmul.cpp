// Matrix multiplication: [4, 3] @ [3, 2] -> [4, 2], then the other shapes dot() accepts.
// dot() is a broadcast multiply followed by a sum over K; the scheduler fuses both into one
// reduction kernel.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <tempura/tempura.hpp>

namespace {

std::string shape_str(const tempura::Shape& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

} // namespace

int main() {
    using tempura::Tensor;
    // 4 samples with 3 features each.
    const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    // 3 inputs -> 2 outputs.
    const std::vector<float> w = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
    const Tensor input = Tensor::from_vector(x, {4, 3});
    const Tensor weights = Tensor::from_vector(w, {3, 2});

    Tensor output = input.dot(weights);
    output.realize();
    std::printf("[4, 3] @ [3, 2] -> %s via %zu kernel(s) (%s)\n", shape_str(output.shape()).c_str(),
                output.kernels().size(),
                output.kernels().empty() ? "-" : output.kernels()[0].name.c_str());
    const std::vector<float> got = output.to_vector<float>();
    int bad = 0;
    for (int m = 0; m < 4; ++m) {
        std::printf("  [");
        for (int n = 0; n < 2; ++n) {
            float ref = 0;
            for (int k = 0; k < 3; ++k)
                ref += x[static_cast<size_t>(m * 3 + k)] * w[static_cast<size_t>(k * 2 + n)];
            const float v = got[static_cast<size_t>(m * 2 + n)];
            std::printf("%s%.2f", n ? ", " : "", static_cast<double>(v));
            if (std::fabs(v - ref) > 1e-4f) ++bad;
        }
        std::printf("]\n");
    }

    // The other shapes: vector @ matrix, matrix @ vector, batched.
    const Tensor v3 = Tensor::from_vector(std::vector<float>{1, 1, 1});
    std::printf("[3] @ [3, 2]          -> %s\n", shape_str(v3.dot(weights).shape()).c_str());
    std::printf("[4, 3] @ [3]          -> %s\n", shape_str(input.dot(v3).shape()).c_str());
    const Tensor batch_a = Tensor::ones({5, 4, 3});
    const Tensor batch_b = Tensor::ones({5, 3, 2});
    Tensor batched = batch_a.matmul(batch_b);
    const std::vector<float> bv = batched.to_vector<float>();
    std::printf("[5, 4, 3] @ [5, 3, 2] -> %s, every element %.0f (expected 3)\n",
                shape_str(batched.shape()).c_str(), static_cast<double>(bv[0]));
    for (float e : bv)
        if (e != 3.0f) ++bad;

    // Inner dimensions must match.
    try {
        (void)input.dot(input);
        ++bad;
    } catch (const tempura::Error& e) {
        std::printf("[4, 3] @ [4, 3]       -> error: %s\n", e.what());
    }
    return bad == 0 ? 0 : 1;
}
