// Data-dependent indexing: GATHER(src, index) loads the element its index names (rangeify turns
// the index's value into the source's address under a gate), and the ops built on it.
#include <string>

#include "tempura/error.hpp"
#include "tempura/tensor/nn.hpp"
#include "tempura/tensor/shape.hpp"
#include "tensor_impl.hpp"

namespace tempura {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

void check_index(const char* op, const Tensor& index, int64_t size, int64_t axis) {
    if (index.dtype() != DType::Int32 && index.dtype() != DType::Int64)
        fail(op, "needs an Int32 or Int64 index, got " + index.dtype().name());
    if (!index.is_realized()) return; // computed in the plan: out of range reads 0
    for (int64_t v : index.to_vector<int64_t>())
        if (v < 0 || v >= size)
            fail(op, "index " + str(v) + " is out of range for dim " + str(axis) + " of size " +
                         str(size));
}

Tensor gather_node(const Tensor& x, int64_t axis, const Tensor& index) {
    UOp u = UOp::make(Op::Gather, x.dtype(), {x.uop(), index.uop()}, std::vector<int64_t>{axis});
    Tensor r = TensorAccess::make(
        std::move(u), index.shape(),
        TensorAccess::merge("gather", TensorAccess::buffers(x), TensorAccess::buffers(index)),
        TensorAccess::symbolic(x) || TensorAccess::symbolic(index), TensorAccess::tracks(x));
    TensorAccess::place("gather", r, {x, index});
    return r;
}

} // namespace

Tensor Tensor::gather(int64_t axis, const Tensor& index, std::source_location loc) const {
    const UserCall site(loc);
    const char* op = "gather";
    axis = normalize_axis(op, axis, ndim());
    if (index.ndim() != ndim())
        fail(op, "index of shape " + shape_str(index.shape()) + " needs " + str(ndim()) +
                     " dims, as the source " + shape_str(shape_));
    for (int64_t d = 0; d < ndim(); ++d)
        if (d != axis && index.shape()[d] > shape_[d])
            fail(op, "index of shape " + shape_str(index.shape()) + " is larger than the source " +
                         shape_str(shape_) + " in dim " + str(d));
    check_index(op, index, shape_[axis], axis);
    return gather_node(*this, axis, index);
}

Tensor Tensor::index_select(int64_t axis, const Tensor& index, std::source_location loc) const {
    const UserCall site(loc);
    const char* op = "index_select";
    axis = normalize_axis(op, axis, ndim());
    if (index.ndim() != 1) fail(op, "needs a 1-D index, got shape " + shape_str(index.shape()));
    check_index(op, index, shape_[axis], axis);
    Shape one(shape_.size(), 1), out = shape_;
    one[axis] = out[axis] = index.shape()[0];
    return gather_node(*this, axis, index.reshape(one).expand(out));
}

Tensor Tensor::scatter_add(int64_t axis, const Tensor& index, const Tensor& src,
                           std::source_location loc) const {
    const UserCall site(loc);
    const char* op = "scatter_add";
    axis = normalize_axis(op, axis, ndim());
    detail::check_same_dtype(op, *this, src);
    if (index.ndim() != ndim() || src.ndim() != ndim())
        fail(op, "index " + shape_str(index.shape()) + " and source " + shape_str(src.shape()) +
                     " need " + str(ndim()) + " dims, as " + shape_str(shape_));
    std::vector<std::pair<int64_t, int64_t>> part;
    for (int64_t d = 0; d < ndim(); ++d) {
        const int64_t n = index.shape()[d];
        if (n > src.shape()[d] || (d != axis && n > shape_[d]))
            fail(op, "index " + shape_str(index.shape()) + " is larger than the source " +
                         shape_str(src.shape()) + " or than " + shape_str(shape_) + " in dim " +
                         str(d));
        part.push_back({0, n});
    }
    check_index(op, index, shape_[axis], axis);
    const Tensor s = src.shape() == index.shape() ? src : src.shrink(part);
    UOp u = UOp::make(Op::ScatterAdd, dtype(), {uop(), index.uop(), s.uop()},
                      std::vector<int64_t>{axis});
    const auto bufs =
        TensorAccess::merge("scatter_add",
                            TensorAccess::merge("scatter_add", TensorAccess::buffers(*this),
                                                TensorAccess::buffers(index)),
                            TensorAccess::buffers(s));
    Tensor r = TensorAccess::make(std::move(u), shape_, bufs,
                                  TensorAccess::symbolic(*this) || TensorAccess::symbolic(index) ||
                                      TensorAccess::symbolic(s),
                                  TensorAccess::tracks(*this) || TensorAccess::tracks(s));
    TensorAccess::place("scatter_add", r, {*this, index, s});
    return r;
}

namespace nn {

Tensor embedding(const Tensor& index, const Tensor& table, std::source_location loc) {
    const UserCall site(loc);
    const char* op = "embedding";
    if (table.ndim() != 2) fail(op, "table must be [V, D], got " + shape_str(table.shape()));
    const int64_t v = table.shape()[0], d = table.shape()[1], n = index.numel();
    check_index(op, index, v, 0);
    Shape out = index.shape();
    out.push_back(d);
    return gather_node(table, 0, index.reshape({n, 1}).expand({n, d})).reshape(out);
}

} // namespace nn

} // namespace tempura
