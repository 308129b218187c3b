// Scans (cumsum, cumprod, cummax) as compositions of movement ops and reduces: a block of at
// most kBlock elements is a triangle (x broadcast to [.., i, j], j > i set to the identity,
// reduced over j); a longer axis is cut into blocks, each scanned as a triangle, and the
// blocks' totals are scanned recursively and combined in. Work O(kBlock n), depth log(n) / 4.
#include <cmath>
#include <limits>
#include <string>

#include "tempura/error.hpp"
#include "tempura/tensor/shape.hpp"
#include "tensor_impl.hpp"

namespace tempura {

namespace {

constexpr int64_t kBlock = 16;

enum class ScanKind { Sum, Prod, Max };

Tensor identity(ScanKind k, DType dt) {
    switch (k) {
    case ScanKind::Sum: return TensorAccess::scalar(dt, 0.0);
    case ScanKind::Prod: return TensorAccess::scalar(dt, 1.0);
    case ScanKind::Max:
        if (dt.is_float())
            return TensorAccess::scalar(dt, -std::numeric_limits<double>::infinity());
        return TensorAccess::scalar_int(dt, dt.min());
    }
    return {};
}

Tensor combine(ScanKind k, const Tensor& a, const Tensor& b) {
    switch (k) {
    case ScanKind::Sum: return a + b;
    case ScanKind::Prod: return a * b;
    case ScanKind::Max: return a.maximum(b);
    }
    return a;
}

Tensor reduce_last(ScanKind k, const Tensor& x) {
    switch (k) {
    case ScanKind::Sum: return x.sum(-1);
    case ScanKind::Prod: return x.prod(-1);
    case ScanKind::Max: return x.max(-1);
    }
    return x;
}

// The inclusive scan of x along its last dim.
Tensor scan_last(ScanKind k, const Tensor& x) {
    const Shape s = x.shape();
    const int64_t n = s.back();
    if (n <= kBlock) {
        Shape square = s;
        square.insert(square.end() - 1, n);                                  // [..., n (i), n (j)]
        const Tensor lower = Tensor::ones({n, n}, DType::Int32).tril() != 0; // j <= i
        return reduce_last(k, where(lower, x.unsqueeze(-2).expand(square), identity(k, x.dtype())));
    }
    const int64_t blocks = (n + kBlock - 1) / kBlock, m = blocks * kBlock;
    // Padding past the end changes nothing before it (the scan only looks back).
    std::vector<std::pair<int64_t, int64_t>> pad(s.size(), {0, 0});
    pad.back() = {0, m - n};
    Shape bs = s;
    bs.back() = blocks;
    bs.push_back(kBlock);
    const Tensor inner = scan_last(k, (m == n ? x : x.pad(pad)).reshape(bs));
    // Each block's total, scanned: what comes before block b is the scan at block b - 1.
    std::vector<std::pair<int64_t, int64_t>> last(bs.size(), {0, 0});
    for (size_t d = 0; d < bs.size(); ++d) last[d] = {0, bs[d]};
    last.back() = {kBlock - 1, kBlock};
    Shape ts = bs;
    ts.pop_back();
    const Tensor totals = scan_last(k, inner.shrink(last).reshape(ts));
    Shape one = ts;
    one.back() = 1;
    std::vector<std::pair<int64_t, int64_t>> drop(ts.size(), {0, 0});
    for (size_t d = 0; d < ts.size(); ++d) drop[d] = {0, ts[d]};
    drop.back() = {0, blocks - 1};
    const Tensor before =
        Tensor::cat({identity(k, x.dtype()).expand(one), totals.shrink(drop)}, -1).unsqueeze(-1);
    Shape flat = s;
    flat.back() = m;
    const Tensor out = combine(k, inner, before).reshape(flat);
    if (m == n) return out;
    std::vector<std::pair<int64_t, int64_t>> cut(s.size(), {0, 0});
    for (size_t d = 0; d < s.size(); ++d) cut[d] = {0, s[d]};
    return out.shrink(cut);
}

Tensor scan(const char* op, ScanKind k, const Tensor& x, int64_t axis) {
    const auto on = detail::on_device_of(x);
    const int64_t nd = x.ndim();
    axis = normalize_axis(op, axis, nd);
    if (x.dtype().is_bool()) {
        const Tensor r = scan(op, k, x.cast(DType::Int32), axis);
        return k == ScanKind::Max ? r.cast(DType::Bool) : r;
    }
    if (x.shape()[static_cast<size_t>(axis)] <= 1) return x;
    const bool last = axis == nd - 1;
    const Tensor t = last ? x : x.transpose(axis, -1);
    const Tensor r = scan_last(k, t);
    return last ? r : r.transpose(axis, -1);
}

} // namespace

Tensor Tensor::cumsum(int64_t axis, std::source_location loc) const {
    const UserCall site(loc);
    return scan("cumsum", ScanKind::Sum, *this, axis);
}
Tensor Tensor::cumprod(int64_t axis, std::source_location loc) const {
    const UserCall site(loc);
    return scan("cumprod", ScanKind::Prod, *this, axis);
}
Tensor Tensor::cummax(int64_t axis, std::source_location loc) const {
    const UserCall site(loc);
    return scan("cummax", ScanKind::Max, *this, axis);
}

} // namespace tempura
