// assign_at_step: state updates realized with the next optimizer step (optim.hpp).
#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "tempura/error.hpp"
#include "tempura/tensor/optim.hpp"
#include "tensor_impl.hpp"

namespace tempura {
namespace {
std::mutex g_mu;
std::atomic<size_t> g_count{0}; // entries of g_pending, read without the lock
// At most one pending value per target (a later one replaces it: it was computed from it).
std::vector<std::pair<Tensor, Tensor>> g_pending;

bool same_target(const Tensor& a, const Tensor& b) {
    return TensorAccess::shared(a) && TensorAccess::shared(a) == TensorAccess::shared(b);
}
} // namespace

namespace detail {
std::vector<std::pair<Tensor, Tensor>> take_step_assigns() {
    std::lock_guard<std::mutex> l(g_mu);
    g_count = 0;
    return std::exchange(g_pending, {});
}

void restore_step_assigns(std::vector<std::pair<Tensor, Tensor>> taken) {
    std::lock_guard<std::mutex> l(g_mu);
    // A value added since for the same target was computed from the new one: it wins.
    for (auto& tv : g_pending) {
        for (auto it = taken.begin(); it != taken.end(); ++it)
            if (same_target(it->first, tv.first)) {
                taken.erase(it);
                break;
            }
    }
    g_pending.insert(g_pending.begin(), std::make_move_iterator(taken.begin()),
                     std::make_move_iterator(taken.end()));
    g_count = g_pending.size();
}

bool has_step_assign(const std::shared_ptr<Tensor::Shared>& s) {
    if (g_count.load(std::memory_order_relaxed) == 0) return false;
    std::lock_guard<std::mutex> l(g_mu);
    for (const auto& tv : g_pending)
        if (TensorAccess::shared(tv.first) == s) return true;
    return false;
}
} // namespace detail

namespace nn {

void assign_at_step(const Tensor& target, const Tensor& value) {
    if (!target.is_realized() || !TensorAccess::shared(target))
        fail("assign_at_step", "the target must be a realized tensor (a module's buffer)");
    if (value.dtype() != target.dtype() || value.shape() != target.shape())
        fail("assign_at_step", "the value (" + value.dtype().name() + " " +
                                   shape_str(value.shape()) + ") does not match the target (" +
                                   target.dtype().name() + " " + shape_str(target.shape()) + ")");
    NoGrad ng;
    Tensor v = value.detach();
    std::lock_guard<std::mutex> l(g_mu);
    for (auto& [t, pv] : g_pending)
        if (same_target(t, target)) {
            pv = v;
            return;
        }
    g_pending.emplace_back(target, v);
    g_count = g_pending.size();
}

bool has_step_assign(const Tensor& target) {
    std::lock_guard<std::mutex> l(g_mu);
    for (const auto& tv : g_pending)
        if (same_target(tv.first, target)) return true;
    return false;
}

void realize_step_assigns() {
    std::vector<std::pair<Tensor, Tensor>> pending = detail::take_step_assigns();
    if (pending.empty()) return;
    std::vector<std::reference_wrapper<Tensor>> values;
    for (auto& tv : pending) values.push_back(tv.second);
    try {
        tempura::realize(values);
    } catch (...) {
        detail::restore_step_assigns(std::move(pending)); // a failure loses nothing
        throw;
    }
    for (auto& [t, v] : pending) TensorAccess::rebind(t, v);
}

} // namespace nn
} // namespace tempura
