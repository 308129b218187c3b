#pragma once
// The codegen stages that are rule groups, compiled once each (src/codegen/lowering_rules.cpp),
// and run by graph_rewrite in the pipeline of stages.hpp. docs/ARCHITECTURE.md lists them.
#include "tempura/ir/uop.hpp"
#include "tempura/pattern/table.hpp"

namespace tempura::codegen {

// "early decompositions": ops no backend has, into ones every backend has. POW of floats into
// EXP2(LOG2(x) * y) (POW of integers is an error); float32 EXP2 and LOG2, float32 and float64 SIN
// and COS into polynomials with argument reduction (no libm call per vector lane).
const pattern::RuleTable& early_decompositions();

// "gated loads": WHERE(g, LOAD(INDEX(p, i)), alt) into LOAD(INDEX(p, i), g, alt), which reads
// nothing where g is false, when g is index arithmetic the same for every vector lane (no LOAD,
// no UPCAST or UNROLL range in it).
const pattern::RuleTable& gated_loads();

// "vector folds" (the devectorizer's), after the expander: GEP of VECTORIZE is the picked
// sources, GEP of every lane in order is the vector, VECTORIZE of a vector's lanes in order is
// the vector, VECTORIZE of one element is the element.
const pattern::RuleTable& vector_folds();

// "MULACC": float a * b + c into MULACC(a, b, c), one FMA.
const pattern::RuleTable& mulacc_fusion();

// "index dtype lowering": every Index-typed node (and vector of Index) takes the dtype the
// rewrite context names: graph_rewrite(ast, index_dtype_lowering(), IndexDType{DType::Int32}).
struct IndexDType {
    DType to;
};
const pattern::RuleTable& index_dtype_lowering();

// "late decompositions", on integers after index lowering, where the bounds allow:
// x % 2^k -> x & (2^k - 1) and x / 2^k -> x >> k for x >= 0; x * 2^k -> x << k.
const pattern::RuleTable& late_decompositions();

// "cpu lowering": what the CPU renderer has no instruction for (MAX of bools -> OR).
const pattern::RuleTable& cpu_lowering();

} // namespace tempura::codegen
