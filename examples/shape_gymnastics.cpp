// Shape gymnastics: reshape, transpose, broadcasting, squeeze/unsqueeze. Movement operations
// cost nothing by themselves: they become index arithmetic inside the one kernel that realize()
// generates.
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

// Prints a realized 2-D float tensor row by row.
void print_matrix(const tempura::Tensor& t) {
    const std::vector<float> v = t.to_vector<float>();
    const int64_t rows = t.shape()[0], cols = t.shape()[1];
    for (int64_t r = 0; r < rows; ++r) {
        std::printf("  [");
        for (int64_t c = 0; c < cols; ++c)
            std::printf("%s%g", c ? ", " : "",
                        static_cast<double>(v[static_cast<size_t>(r * cols + c)]));
        std::printf("]\n");
    }
}

} // namespace

int main() {
    using tempura::Tensor;
    const Tensor data = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6});
    std::printf("Original shape:   %s\n", shape_str(data.shape()).c_str());

    const Tensor matrix = data.reshape({2, 3});
    std::printf("Matrix shape:     %s\n", shape_str(matrix.shape()).c_str());
    print_matrix(matrix);

    const Tensor inferred = data.reshape({-1, 3}); // -1: inferred from the element count
    std::printf("reshape({-1, 3}): %s\n", shape_str(inferred.shape()).c_str());

    const Tensor transposed = matrix.transpose(0, 1);
    std::printf("Transposed shape: %s\n", shape_str(transposed.shape()).c_str());
    print_matrix(transposed);

    // Broadcasting: [3, 2] + [1, 2] -> [3, 2]: the bias row is added to every row.
    const Tensor bias = Tensor::from_vector(std::vector<float>{100, 200}).reshape({1, 2});
    Tensor biased = transposed + bias;
    biased.realize();
    std::printf("Transposed + [[100, 200]] (%s), %zu kernel(s):\n",
                shape_str(biased.shape()).c_str(), biased.kernels().size());
    print_matrix(biased);

    // [3, 2] + [2] broadcasts too (an implicit leading 1); [3, 2] + [3] does not.
    const Tensor row = Tensor::from_vector(std::vector<float>{100, 200});
    std::printf("[3, 2] + [2] -> %s\n", shape_str((transposed + row).shape()).c_str());
    try {
        const Tensor bad = transposed + Tensor::from_vector(std::vector<float>{1, 2, 3});
        std::printf("[3, 2] + [3] -> %s (unexpected)\n", shape_str(bad.shape()).c_str());
        return 1;
    } catch (const tempura::Error& e) {
        std::printf("[3, 2] + [3] -> error: %s\n", e.what());
    }

    const Tensor with_axis = data.unsqueeze(0);
    std::printf("unsqueeze(0):     %s\n", shape_str(with_axis.shape()).c_str());
    std::printf("squeeze(0):       %s\n", shape_str(with_axis.squeeze(0).shape()).c_str());

    const std::vector<float> got = biased.to_vector<float>();
    const std::vector<float> want = {101, 204, 102, 205, 103, 206};
    return got == want ? 0 : 1;
}
