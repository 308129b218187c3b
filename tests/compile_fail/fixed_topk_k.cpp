// EXPECT: topk: k 4 is out of range for an axis of 3 elements
// topk cannot take more elements than the axis has.
#include <tempura/tempura.hpp>

int main() {
    const auto x = tempura::FixedTensor<float, 2, 3>::zeros();
    const auto r = x.topk<4>();
    return static_cast<int>(r.first.numel());
}
