// EXPECT: gather: the index [3, 2] is larger than [2, 3] in dim 0
// gather's index may not be larger than the source in a dim other than the axis.
#include <tempura/tempura.hpp>

int main() {
    const auto x = tempura::FixedTensor<float, 2, 3>::zeros();
    const auto i = tempura::FixedTensor<int32_t, 3, 2>::zeros();
    const auto g = x.gather<1>(i);
    return static_cast<int>(g.numel());
}
