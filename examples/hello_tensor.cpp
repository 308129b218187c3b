// Hello tensor: two small tensors, an elementwise expression, realize(), read the result back.
// Tensor operations are lazy: `sum` and `scaled` are graphs until realize() (or to_vector(),
// which realizes first) compiles them into one fused kernel and runs it.
#include <cstdio>
#include <vector>

#include <tempura/tempura.hpp>

int main() {
    using tempura::Tensor;
    const Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4});
    const Tensor b = Tensor::from_vector(std::vector<float>{10, 20, 30, 40});

    // Lazy: nothing runs here.
    const Tensor sum = a + b;
    Tensor scaled = sum * Tensor::from_vector(std::vector<float>{0.1f}); // [4] * [1] broadcasts
    std::printf("scaled is %s before realize()\n", scaled.is_realized() ? "realized" : "lazy");

    scaled.realize();
    const std::vector<float> data = scaled.to_vector<float>();
    std::printf("Result:");
    for (float v : data) std::printf(" %.1f", static_cast<double>(v));
    std::printf("   (expected 1.1 2.2 3.3 4.4)\n");
    std::printf("%zu kernel(s) ran: ", scaled.kernels().size());
    for (const auto& k : scaled.kernels()) std::printf("%s ", k.name.c_str());
    std::printf("\n");

    const float expected[] = {1.1f, 2.2f, 3.3f, 4.4f};
    for (int i = 0; i < 4; ++i)
        if (data[static_cast<size_t>(i)] < expected[i] - 1e-5f ||
            data[static_cast<size_t>(i)] > expected[i] + 1e-5f)
            return 1;
    return 0;
}
