// Shape helpers of the tensor surface: broadcasting, axis normalization.
#include "tempura/tensor/shape.hpp"

#include <algorithm>

#include "tempura/error.hpp"

namespace tempura {

Shape broadcast_shapes(const Shape& a, const Shape& b) {
    const size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (size_t i = 0; i < n; ++i) {
        // Aligned at the right: missing leading dims are 1.
        const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
        const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
        if (da == db || db == 1)
            out[i] = da;
        else if (da == 1)
            out[i] = db;
        else
            fail("broadcast",
                 "shapes " + shape_str(a) + " and " + shape_str(b) + " cannot be broadcast");
    }
    return out;
}

int64_t normalize_axis(const std::string& op, int64_t axis, int64_t ndim) {
    if (axis < -ndim || axis >= ndim)
        fail(op, "axis " + std::to_string(axis) + " is out of range for " + std::to_string(ndim) +
                     " dims");
    return axis < 0 ? axis + ndim : axis;
}

} // namespace tempura
