#pragma once
// Match: the nodes bound to wildcards while a rule is tried on a node.
#include <array>
#include <cstdint>

#include "tempura/ir/uop.hpp"

namespace tempura::pattern {

inline constexpr int kSlots = 8;

struct Match {
    std::array<const UOp*, kSlots> slot{}; // point into the graph being rewritten
    uint32_t bound = 0;
    const UOp* root = nullptr;
    void* ctx = nullptr; // the graph_rewrite context

    const UOp& at(int i) const { return *slot[static_cast<size_t>(i)]; }
    // m[x], m[c0]: the node a wildcard is bound to.
    template <class W>
    requires requires { W::kSlot; }
    const UOp& operator[](W) const { return at(W::kSlot); }
    template <class C>
    C& context() const {
        return *static_cast<C*>(ctx);
    }
};

} // namespace tempura::pattern
