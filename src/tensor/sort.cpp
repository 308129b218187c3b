// sort, argsort, topk: a bitonic sorting network along the last axis, written as tensor ops.
// The axis is padded to a power of two p; each of the log2(p) (log2(p) + 1) / 2 stages pairs
// element i with i ^ j (the axis viewed as [p / 2j, 2, j]), compares, and swaps where the pair is
// out of its block's order: elementwise work on a view, one kernel per stage (each stage is
// materialized, so no stage recomputes the ones before it).
#include <string>
#include <vector>

#include "tempura/error.hpp"
#include "tempura/tensor/shape.hpp"
#include "tensor_impl.hpp"

namespace tempura {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

struct Order {
    bool descending;
    int64_t n; // elements before the padding (indices >= n are padding: last, whatever the key)
};

// Whether key a goes before key b: ascending puts NaN last, descending first (as PyTorch).
Tensor key_before(const Order& o, const Tensor& a, const Tensor& b) {
    if (!a.dtype().is_float()) return o.descending ? a > b : a < b;
    const Tensor an = a.isnan(), bn = b.isnan();
    if (o.descending) return logical_or(a > b, logical_and(an, logical_not(bn)));
    return logical_or(a < b, logical_and(logical_not(an), bn));
}

Tensor key_equal(const Tensor& a, const Tensor& b) {
    if (!a.dtype().is_float()) return a == b;
    return logical_or(a == b, logical_and(a.isnan(), b.isnan()));
}

// (a, ia) before (b, ib): padding last, then the key, then the index (ties keep their order).
Tensor before(const Order& o, const Tensor& a, const Tensor& ia, const Tensor& b,
              const Tensor& ib) {
    const Tensor n = TensorAccess::scalar_int(ia.dtype(), o.n);
    const Tensor ap = ia >= n, bp = ib >= n;
    const Tensor by_key = logical_or(key_before(o, a, b), logical_and(key_equal(a, b), ia < ib));
    return logical_or(logical_and(logical_not(ap), bp), logical_and(ap == bp, by_key));
}

// A slice of the middle dim of [..., blocks, 2, j].
Tensor half(const Tensor& x, int64_t which) {
    std::vector<std::pair<int64_t, int64_t>> b;
    for (int64_t d : x.shape()) b.push_back({0, d});
    b[b.size() - 2] = {which, which + 1};
    return x.shrink(b);
}

// Sorts the last axis (length p, a power of two) by (key, index); returns {keys, indices}.
std::pair<Tensor, Tensor> bitonic(const Order& o, Tensor v, Tensor idx) {
    const Shape s = v.shape();
    const int64_t p = s.back();
    const Tensor up_down = Tensor::from_vector(std::vector<bool>{true, false}, {2});
    const Tensor first_row = up_down.reshape({2, 1});
    for (int64_t k = 2; k <= p; k *= 2)
        for (int64_t j = k / 2; j >= 1; j /= 2) {
            const int64_t blocks = p / (2 * j);
            Shape r(s.begin(), s.end() - 1);
            r.insert(r.end(), {blocks, 2, j});
            const Tensor vr = v.reshape(r), ir = idx.reshape(r);
            const Tensor a = half(vr, 0), b = half(vr, 1), ia = half(ir, 0), ib = half(ir, 1);
            // Block `blk` (elements blk * 2j ...) is sorted up where bit k of its start is 0,
            // i.e. bit m = k / 2j of blk: runs of m blocks up, m down, from a 2-element pattern
            // (a view: no host array per stage). The last merge (k = p) sorts every block up.
            const int64_t m = k / (2 * j);
            const Tensor dir = k == p ? up_down.shrink({{0, 1}}).reshape({1, 1, 1})
                                      : up_down.reshape({1, 2, 1})
                                            .expand({blocks / (2 * m), 2, m})
                                            .reshape({blocks, 1, 1});
            const Tensor swap = where(dir, before(o, b, ib, a, ia), before(o, a, ia, b, ib));
            // Lane 0 of the pair takes the first, lane 1 the second: a select, not a sum (which
            // would turn -0 into +0), of broadcasts, not pads (whose loads would be gated).
            const auto pick = [&](const Tensor& x, const Tensor& y) {
                const Tensor lo = where(swap, y, x), hi = where(swap, x, y);
                return where(first_row, lo.expand(r), hi.expand(r)).reshape(s).contiguous();
            };
            const Tensor nv = pick(a, b), ni = pick(ia, ib);
            v = nv;
            idx = ni;
        }
    return {v, idx};
}

// Sorts along `axis`: {values, Int32 indices}, the first `keep` of them.
std::pair<Tensor, Tensor> sort_impl(const char* op, const Tensor& x, int64_t axis, bool desc,
                                    int64_t keep) {
    const auto on = detail::on_device_of(x);
    const int64_t nd = x.ndim();
    if (nd == 0) fail(op, "needs a tensor with at least one dim");
    axis = normalize_axis(op, axis, nd);
    if (x.dtype().is_bool()) {
        auto [v, i] = sort_impl(op, x.cast(DType::Int32), axis, desc, keep);
        return {v.cast(DType::Bool), i};
    }
    const bool last = axis == nd - 1;
    const Tensor t = last ? x : x.transpose(axis, -1);
    const int64_t n = t.shape().back();
    if (n > (int64_t{1} << 30)) fail(op, "sorts at most 2^30 elements per row, got " + str(n));
    int64_t p = 1;
    while (p < n) p *= 2;
    std::vector<std::pair<int64_t, int64_t>> pad(static_cast<size_t>(nd), {0, 0});
    pad.back() = {0, p - n};
    const Tensor v = p == n ? t : t.pad(pad);
    Shape one(static_cast<size_t>(nd), 1);
    one.back() = p;
    const Tensor idx = detail::iota(p, DType::Int32).reshape(one).expand(v.shape());
    auto [sv, si] = bitonic(Order{desc, n}, v, idx);
    std::vector<std::pair<int64_t, int64_t>> cut;
    for (int64_t d : sv.shape()) cut.push_back({0, d});
    cut.back() = {0, keep};
    sv = sv.shrink(cut);
    si = si.shrink(cut);
    if (!last) {
        sv = sv.transpose(axis, -1);
        si = si.transpose(axis, -1);
    }
    return {sv, si};
}

int64_t axis_size(const char* op, const Tensor& x, int64_t axis) {
    const int64_t nd = x.ndim();
    if (nd == 0) fail(op, "needs a tensor with at least one dim");
    return x.shape()[static_cast<size_t>(normalize_axis(op, axis, nd))];
}

} // namespace

Tensor Tensor::sort(int64_t axis, bool descending, std::source_location loc) const {
    const UserCall site(loc);
    return sort_impl("sort", *this, axis, descending, axis_size("sort", *this, axis)).first;
}

Tensor Tensor::argsort(int64_t axis, bool descending, std::source_location loc) const {
    const UserCall site(loc);
    return sort_impl("argsort", *this, axis, descending, axis_size("argsort", *this, axis)).second;
}

std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t axis, std::source_location loc) const {
    const UserCall site(loc);
    const int64_t n = axis_size("topk", *this, axis);
    if (k < 0 || k > n)
        fail("topk", "k " + str(k) + " is out of range for an axis of " + str(n) + " elements");
    return sort_impl("topk", *this, axis, true, k);
}

} // namespace tempura
