// The kinds of CUSTOM_GRAD node (ops.hpp): the first value of its Ints arg names how autograd
// differentiates it; a node without an arg is the plain kind.
#pragma once

#include <cstdint>

namespace tempura {

enum class CustomGradKind : int64_t {
    // CUSTOM_GRAD(value, x, d), no arg: x takes g * d (a composite's own derivative).
    // CUSTOM_GRAD(value, x, w) {Conv, n, padding..., dilation..., groups}: a stride-1
    // convolution over the last n dims; x and w take the convolutions of g that give them.
    Conv = 1,
    // CUSTOM_GRAD(value, x, x) {Windows, n, k..., s...}: windows(x, k, s), a pool's window view;
    // x takes the sum of the window elements that hold it.
    Windows = 2,
    // CUSTOM_GRAD(value, x, m) {MaxPool, n, k..., s...}: the max over each of windows(x, k, s),
    // m the windows' one-hot mask of their first maximum (row-major, as PyTorch); x takes g
    // through the mask.
    MaxPool = 3,
};

// A kind's name in messages, nullptr for an unknown kind (kinds run 1, 2, ... without a gap).
constexpr const char* custom_grad_kind_name(int64_t kind) {
    switch (static_cast<CustomGradKind>(kind)) {
    case CustomGradKind::Conv: return "convolution";
    case CustomGradKind::Windows: return "window view";
    case CustomGradKind::MaxPool: return "max pool";
    }
    return nullptr;
}

// The arg's length for a kind over n dims (0 for an unknown kind).
constexpr int64_t custom_grad_arg_size(CustomGradKind kind, int64_t n) {
    switch (kind) {
    case CustomGradKind::Conv: return 3 + 2 * n;
    case CustomGradKind::Windows:
    case CustomGradKind::MaxPool: return 2 + 2 * n;
    }
    return 0;
}

} // namespace tempura
