#pragma once
// The codegen stages of ../shared/seeds/004_… that correct scalar code needs, each a named
// function from kernel AST to kernel AST (or, last, to the linear program of
// docs/KERNEL_IR.md §2), runnable and dumpable on its own. The optimization stages (UPCAST,
// UNROLL, expander, devectorizer, THREAD) slot in between symbolic and linearize.
#include <string>
#include <vector>

#include "tempura/ir/uop.hpp"

namespace tempura::codegen {

// Stage "symbolic": the symbolic rules to fixpoint over the kernel's index arithmetic,
// gates and constant subexpressions.
UOp symbolic(const UOp& ast);

// Stage "index dtype lowering": Index becomes Int32 when every index value of the kernel fits
// in 32 bits, else Int64.
UOp lower_index_dtype(const UOp& ast);

// Stage "decompositions": rewrites ops the backend lacks into ones it has (POW into EXP2 and
// LOG2, integer MAX on bool into OR, ...).
UOp decompose(const UOp& ast);

// Stage "linearize" (with remove-reduce and add-loads): each REDUCE becomes an accumulator in
// a DEFINE_REG starting at the reduce op's identity, loops open and close around what depends
// on them (each op placed in the outermost loop it can live in), and stores through a gated
// INDEX become IF/STORE/ENDIF. Returns the program in execution order.
std::vector<UOp> linearize(const UOp& ast);

// All stages in order; with TEMPURA_DEBUG >= 5 each stage's result is printed.
std::vector<UOp> lower_kernel(const std::string& name, const UOp& ast);

// The identity of a reduce op for a dtype (0 for Add, 1 for Mul, the lowest value for Max).
UOp reduce_identity(Op op, DType dtype);

// A program listing: one op per line, loops indented.
std::string render_linear(const std::vector<UOp>& program);

} // namespace tempura::codegen
