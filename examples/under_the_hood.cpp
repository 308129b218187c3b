// Under the hood: the lazy graph of c = a + b (the UOp tree before compilation), then the kernels
// realize() generated for it: name, backend and the LLVM IR the CPU backend JIT-compiled.
// TEMPURA_DEBUG=1..5 prints more (per-kernel timings, applied opts, the graph after each stage).
#include <cstdio>
#include <vector>

#include <tempura/tempura.hpp>

int main() {
    using tempura::Tensor;
    const Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3});
    const Tensor b = Tensor::from_vector(std::vector<float>{4, 5, 6});
    Tensor c = a + b;

    std::printf("=== IR graph (before compilation) ===\n%s\n", c.uop().tree().c_str());

    c.realize();
    std::printf("=== Result ===\n");
    for (float v : c.to_vector<float>()) std::printf("%g ", static_cast<double>(v));
    std::printf("\n\n=== IR graph after realize() (the tensor is a buffer now) ===\n%s\n",
                c.uop().tree().c_str());

    std::printf("=== Generated kernels ===\n");
    for (size_t i = 0; i < c.kernels().size(); ++i) {
        const tempura::KernelInfo& k = c.kernels()[i];
        std::printf("Kernel %zu: %s\nBackend: %s\nCode:\n%s\n", i, k.name.c_str(),
                    k.backend.c_str(), k.source.c_str());
    }

    // A second graph that needs two kernels: a reduction (max) feeds an elementwise op.
    Tensor x = Tensor::from_vector(std::vector<float>{3, 1, 4, 1, 5, 9}, {2, 3});
    Tensor shifted = x - x.max(-1, true);
    shifted.realize();
    std::printf("=== x - x.max(-1, keepdim) ran %zu kernel(s):", shifted.kernels().size());
    for (const auto& k : shifted.kernels()) std::printf(" %s", k.name.c_str());
    std::printf(" ===\n");
    const std::vector<float> got = c.to_vector<float>();
    return got == std::vector<float>{5, 7, 9} ? 0 : 1;
}
