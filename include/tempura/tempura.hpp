#pragma once
// Tempura: the public API. Include this one header.
#include "tempura/error.hpp"
#include "tempura/ir/bounds.hpp"
#include "tempura/ir/dtype.hpp"
#include "tempura/ir/ops.hpp"
#include "tempura/ir/uop.hpp"
#include "tempura/rewrite/graph_rewrite.hpp"
#include "tempura/symbolic/eval.hpp"
#include "tempura/symbolic/simplify.hpp"
#include "tempura/tensor/fixed_tensor.hpp"
#include "tempura/tensor/nn.hpp"
#include "tempura/tensor/optim.hpp"
#include "tempura/tensor/tensor.hpp"
