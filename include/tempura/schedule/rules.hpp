#pragma once
// The scheduler's rule group (src/schedule/early_rules.cpp), run by graph_rewrite on the
// tensor-level graph before the kernel split. docs/ARCHITECTURE.md lists every stage.
#include "tempura/pattern/table.hpp"

namespace tempura {

// "early rewrites", on the tensor graph:
//   movement folds: a movement op that changes nothing (RESHAPE or EXPAND to the same shape, the
//   identity PERMUTE, PAD by zeros, SHRINK to the whole axis, FLIP of no axis) is its source;
//   RESHAPE of RESHAPE, EXPAND of EXPAND and PERMUTE of PERMUTE are one op;
//   split reduce: a reduction of at least 2^16 elements to at most 16 outputs, by an associative
//   op, is reduced in two kernels (up to 256 partial results first) so that THREAD has an axis
//   to share among cores.
const pattern::RuleTable& early_rewrites();

} // namespace tempura
