// EXPECT: split: split size must be positive, got 0
// Pieces of size 0 would never end.
#include <tempura/tempura.hpp>

int main() {
    const auto m = tempura::FixedTensor<float, 6>::zeros();
    const auto parts = m.split<0>();
    return static_cast<int>(std::tuple_size_v<decltype(parts)>);
}
