#pragma once
// Match: the nodes bound to wildcards while a rule is tried on a node.
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <typeinfo>

#include "tempura/ir/uop.hpp"

namespace tempura::pattern {

inline constexpr int kSlots = 8;

// What graph_rewrite hands its rules: a reference to an object of some type, checked when a
// rule asks for it (m.context<T>() of the wrong type throws tempura::Error naming both types,
// instead of reinterpreting memory). Built implicitly from `&object`, an object, or nullptr.
class RewriteContext {
  public:
    RewriteContext() = default;
    RewriteContext(std::nullptr_t) {}
    template <class C>
    requires(!std::is_same_v<std::remove_cv_t<C>, RewriteContext>) RewriteContext(C* c)
        : type_(c ? &typeid(C) : nullptr), p_(c) {}
    template <class C>
    requires(!std::is_same_v<std::remove_cv_t<C>, RewriteContext> && !std::is_pointer_v<C> &&
             !std::is_same_v<C, std::nullptr_t>) RewriteContext(C& c)
        : type_(&typeid(C)), p_(&c) {}

    bool empty() const { return p_ == nullptr; }
    template <class C>
    C& get() const {
        if (p_ == nullptr) throw_bad(typeid(C), nullptr);
        if (*type_ != typeid(C)) throw_bad(typeid(C), type_);
        return *static_cast<C*>(p_);
    }

  private:
    [[noreturn]] static void throw_bad(const std::type_info& want, const std::type_info* have);
    const std::type_info* type_ = nullptr;
    void* p_ = nullptr;
};

struct Match {
    std::array<const UOp*, kSlots> slot{}; // point into the graph being rewritten
    uint32_t bound = 0;
    const UOp* root = nullptr;
    RewriteContext ctx; // the graph_rewrite context

    const UOp& at(int i) const { return *slot[static_cast<size_t>(i)]; }
    // m[x], m[c0]: the node a wildcard is bound to.
    template <class W>
    requires requires { W::kSlot; }
    const UOp& operator[](W) const { return at(W::kSlot); }
    template <class C>
    C& context() const {
        return ctx.get<C>();
    }
};

} // namespace tempura::pattern
