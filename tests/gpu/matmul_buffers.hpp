#pragma once
// The buffers of a scheduled matmul kernel (out = a @ b), in its parameters' order, as a launch
// takes them: the scheduler may list b's buffer before a's. `a` and `b` are the tensors the
// kernel was scheduled from; `a_at` and `b_at` hold the data it runs on (copies of them on the
// launch's device, or the same tensors).
#include <array>
#include <cstdint>

#include "tempura/schedule/schedule.hpp"
#include "tempura/tempura.hpp"

inline std::array<void*, 3> matmul_buffers(const tempura::ScheduledKernel& k,
                                           const tempura::Tensor& out, const tempura::Tensor& a,
                                           const tempura::Tensor& b, const tempura::Tensor& a_at,
                                           const tempura::Tensor& b_at) {
    const auto at = [](const tempura::Tensor& t) {
        return reinterpret_cast<void*>(static_cast<uintptr_t>(t.buffer()->address()));
    };
    if (k.params[1].same(b.uop()) || k.params[2].same(a.uop()))
        return {at(out), at(b_at), at(a_at)};
    return {at(out), at(a_at), at(b_at)};
}

inline std::array<void*, 3> matmul_buffers(const tempura::ScheduledKernel& k,
                                           const tempura::Tensor& out, const tempura::Tensor& a,
                                           const tempura::Tensor& b) {
    return matmul_buffers(k, out, a, b, a, b);
}
