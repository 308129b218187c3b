// EXPECT: slice: step must not be 0 (axis 1)
// A slice with step 0 takes nothing forever: refused at compile time.
#include <tempura/tempura.hpp>

int main() {
    const auto m = tempura::FixedTensor<float, 3, 4>::zeros();
    const auto s = m.slice<tempura::Slice{}, tempura::Slice{0, 4, 0}>();
    return static_cast<int>(s.numel());
}
