// tensor_shape(): the shape a tensor-level node was given when it was built (UOp::shape()).
#include "tempura/tensor/graph.hpp"

#include <string>

#include "tempura/error.hpp"

namespace tempura {

Shape tensor_shape(const UOp& root) {
    if (root.is_null()) fail("tensor_shape", "null UOp");
    if (!root.has_shape()) fail("tensor_shape", why_no_shape(root));
    return root.shape();
}

} // namespace tempura
