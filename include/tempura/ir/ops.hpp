#pragma once
// Op: every operation Tempura builds, and the constexpr table of facts about each. An op enters
// the table with the stage that builds it (docs/ARCHITECTURE.md, "Adding an op").
// Every other part of Tempura reads op facts (arity, category, flags) from this table.
#include <array>
#include <cstdint>
#include <string_view>

namespace tempura {

enum class OpCategory : uint8_t {
    Unary,     // ALU, one source
    Binary,    // ALU, two sources
    Ternary,   // ALU, three sources
    Const,     // CONST
    Define,    // DEFINE_VAR, PARAM, DEFINE_REG, ...
    Memory,    // BUFFER, INDEX, LOAD, STORE, ...
    Movement,  // RESHAPE, PERMUTE, ... (tensor level, before rangeify)
    Reduce,    // REDUCE_AXIS, REDUCE
    Control,   // RANGE, END, IF, ENDIF
    Vector,    // VECTORIZE, GEP
    Structure, // SINK, GROUP, AFTER
    Tensor,    // CONTIGUOUS (tensor-level markers)
};

// What the `arg` of a node of this op holds.
enum class ArgKind : uint8_t {
    None,
    Value,    // CONST: an int64, double or bool
    Var,      // DEFINE_VAR: name, min, max
    Range,    // RANGE: axis id and axis type
    Ints,     // shapes, axes, permutations, GEP lanes
    ReduceOp, // REDUCE_AXIS / REDUCE: the combining op
    Any,      // op-specific payload (kernel info, device spec, ...)
};

enum OpFlag : uint8_t {
    kCommutative = 1,
    kAssociative = 2,
};

inline constexpr int8_t kVariadic = -1;

struct OpInfo {
    std::string_view name;
    int8_t arity; // exact number of sources, or kVariadic
    int8_t min_arity;
    OpCategory category;
    uint8_t flags;
    int8_t range_start; // first source index that is a closed RANGE for range-ending ops, else -1
    ArgKind arg;
};

// X-macro: name, printed name, arity, min arity, category, flags, range start, arg kind.
#define TEMPURA_OPS(X)                                                                             \
    /* ALU: unary */                                                                               \
    X(Neg, "NEG", 1, 1, Unary, 0, -1, None)                                                        \
    X(Not, "NOT", 1, 1, Unary, 0, -1, None)                                                        \
    X(Exp2, "EXP2", 1, 1, Unary, 0, -1, None)                                                      \
    X(Log2, "LOG2", 1, 1, Unary, 0, -1, None)                                                      \
    X(Sin, "SIN", 1, 1, Unary, 0, -1, None)                                                        \
    X(Cos, "COS", 1, 1, Unary, 0, -1, None)                                                        \
    X(Erf, "ERF", 1, 1, Unary, 0, -1, None)                                                        \
    X(Sqrt, "SQRT", 1, 1, Unary, 0, -1, None)                                                      \
    X(Recip, "RECIPROCAL", 1, 1, Unary, 0, -1, None)                                               \
    X(Trunc, "TRUNC", 1, 1, Unary, 0, -1, None)                                                    \
    X(Cast, "CAST", 1, 1, Unary, 0, -1, None)                                                      \
    X(BitCast, "BITCAST", 1, 1, Unary, 0, -1, None)                                                \
    /* ALU: binary */                                                                              \
    X(Add, "ADD", 2, 2, Binary, kCommutative | kAssociative, -1, None)                             \
    X(Sub, "SUB", 2, 2, Binary, 0, -1, None)                                                       \
    X(Mul, "MUL", 2, 2, Binary, kCommutative | kAssociative, -1, None)                             \
    X(Idiv, "IDIV", 2, 2, Binary, 0, -1, None)                                                     \
    X(Fdiv, "FDIV", 2, 2, Binary, 0, -1, None)                                                     \
    X(Mod, "MOD", 2, 2, Binary, 0, -1, None)                                                       \
    X(Max, "MAX", 2, 2, Binary, kCommutative | kAssociative, -1, None)                             \
    X(Shl, "SHL", 2, 2, Binary, 0, -1, None)                                                       \
    X(Shr, "SHR", 2, 2, Binary, 0, -1, None)                                                       \
    X(And, "AND", 2, 2, Binary, kCommutative | kAssociative, -1, None)                             \
    X(Or, "OR", 2, 2, Binary, kCommutative | kAssociative, -1, None)                               \
    X(Xor, "XOR", 2, 2, Binary, kCommutative | kAssociative, -1, None)                             \
    X(CmpLt, "CMPLT", 2, 2, Binary, 0, -1, None)                                                   \
    X(CmpNe, "CMPNE", 2, 2, Binary, kCommutative, -1, None)                                        \
    X(CmpEq, "CMPEQ", 2, 2, Binary, kCommutative, -1, None)                                        \
    X(Pow, "POW", 2, 2, Binary, 0, -1, None)                                                       \
    /* ALU: ternary */                                                                             \
    X(Where, "WHERE", 3, 3, Ternary, 0, -1, None)                                                  \
    X(MulAcc, "MULACC", 3, 3, Ternary, 0, -1, None)                                                \
    /* constants */                                                                                \
    X(Const, "CONST", 0, 0, Const, 0, -1, Value)                                                   \
    /* definitions */                                                                              \
    X(DefineVar, "DEFINE_VAR", 0, 0, Define, 0, -1, Var)                                           \
    X(Bind, "BIND", 1, 1, Define, 0, -1, Value)                                                    \
    X(DefineReg, "DEFINE_REG", 0, 0, Define, 0, -1, Ints)                                          \
    X(Param, "PARAM", kVariadic, 0, Define, 0, -1, Ints)                                           \
    /* SPECIAL(size) {kind, dim}: a GPU index in [0, size): kind 0 the block index (blockIdx), */  \
    /* kind 1 the thread index in the block (threadIdx), along dim 0, 1 or 2 (x, y, z) */          \
    X(Special, "SPECIAL", 1, 1, Define, 0, -1, Ints)                                               \
    /* DEFINE_LOCAL {count, id}: a block's shared memory of count elements (GROUP's partials) */   \
    X(DefineLocal, "DEFINE_LOCAL", 0, 0, Define, 0, -1, Ints)                                      \
    /* BARRIER(effects...): every thread of the block waits here; what it follows is visible */    \
    X(Barrier, "BARRIER", kVariadic, 0, Structure, 0, -1, None)                                    \
    /* program structure */                                                                        \
    X(Sink, "SINK", kVariadic, 0, Structure, 0, -1, Any)                                           \
    X(Group, "GROUP", kVariadic, 0, Structure, 0, -1, None)                                        \
    X(After, "AFTER", kVariadic, 1, Structure, 0, -1, None)                                        \
    /* memory */                                                                                   \
    X(Buffer, "BUFFER", kVariadic, 0, Memory, 0, -1, Ints)                                         \
    X(Index, "INDEX", kVariadic, 2, Memory, 0, -1, None)                                           \
    X(Load, "LOAD", kVariadic, 1, Memory, 0, -1, None)                                             \
    X(Store, "STORE", kVariadic, 2, Memory, 0, 2, None)                                            \
    /* vectors */                                                                                  \
    X(Vectorize, "VECTORIZE", kVariadic, 1, Vector, 0, -1, None)                                   \
    X(Gep, "GEP", 1, 1, Vector, 0, -1, Ints)                                                       \
    /* WMMA(a, b, c) {m, n, k}: a warp's tensor-core multiply-add D = A B + C, each operand this   \
     */                                                                                            \
    /* lane's fragment in the PTX m16n8k16 layout (a: 8, b: 4 16-bit floats; c, D: 4 float32 or */ \
    /* 4 float16) */                                                                               \
    X(Wmma, "WMMA", 3, 3, Vector, 0, -1, Ints)                                                     \
    /* COPY_ASYNC(dst, src): this thread's asynchronous copy (PTX cp.async) of 4, 8 or 16 bytes */ \
    /* from src (an INDEX of global memory; gated off: zeros) to dst (an INDEX of shared memory;   \
     */                                                                                            \
    /* gated off: no copy). The data lands by the ASYNC_WAIT that retires it. */                   \
    X(CopyAsync, "COPY_ASYNC", 2, 2, Memory, 0, -1, None)                                          \
    /* ASYNC_WAIT(effects...) {n}: the copies issued since the last one become a group; waits */   \
    /* until at most n groups are in flight (PTX cp.async.commit_group, wait_group n) */           \
    X(AsyncWait, "ASYNC_WAIT", kVariadic, 0, Memory, 0, -1, Ints)                                  \
    /* LDMATRIX(row) {count, trans}: the warp's ldmatrix.m8n8 of count (1, 2, 4) 8 x 8 matrices */ \
    /* of 16-bit values: lane 8 q + r gives row r of matrix q (an INDEX of 8 values in shared */   \
    /* memory); lane l gets 2 values of each: row l / 4, 2 (l % 4) and on (or transposed) */       \
    X(LdMatrix, "LDMATRIX", 1, 1, Memory, 0, -1, Ints)                                             \
    /* WGMMA(a, b, c) {n, ks, a_mn, b_mn[, 1]}: a warpgroup's (4 warps, 128 threads) */            \
    /* tensor-core multiply-add D = A B + C of 64 x n outputs over ks k-steps of 16 */             \
    /* (Hopper wgmma.mma_async, issued, committed and waited for): a and b are INDEXes */          \
    /* of the operands' first elements in shared memory, at 1024-byte boundaries, in the */        \
    /* 128-byte swizzled layouts of src/codegen/tensor_cores.cpp (a_mn, b_mn: 1 where */           \
    /* the tile runs along M or N, 0 along K); c and D are this thread's n / 2 */                  \
    /* accumulator lanes (float32, or float16 from float16 operands). {.., 1}: it returns */       \
    /* with this mma in flight (wgmma.wait_group 1: the one before it is done) */                  \
    X(Wgmma, "WGMMA", 3, 3, Vector, 0, -1, Ints)                                                   \
    /* WGMMA_WAIT(d): d, once the warpgroup's mma in flight are done (wgmma.wait_group 0) */       \
    X(WgmmaWait, "WGMMA_WAIT", 1, 1, Vector, 0, -1, None)                                          \
    /* control flow */                                                                             \
    X(Range, "RANGE", kVariadic, 1, Control, 0, -1, Range)                                         \
    X(End, "END", kVariadic, 1, Control, 0, 1, None)                                               \
    X(If, "IF", kVariadic, 1, Control, 0, -1, None)                                                \
    X(EndIf, "ENDIF", 1, 1, Control, 0, -1, None)                                                  \
    /* reductions */                                                                               \
    X(ReduceAxis, "REDUCE_AXIS", 1, 1, Reduce, 0, -1, ReduceOp)                                    \
    X(Reduce, "REDUCE", kVariadic, 1, Reduce, 0, 1, ReduceOp)                                      \
    /* movement (tensor level) */                                                                  \
    X(Reshape, "RESHAPE", 1, 1, Movement, 0, -1, Ints)                                             \
    X(Permute, "PERMUTE", 1, 1, Movement, 0, -1, Ints)                                             \
    X(Expand, "EXPAND", 1, 1, Movement, 0, -1, Ints)                                               \
    X(Pad, "PAD", 1, 1, Movement, 0, -1, Ints)                                                     \
    X(Shrink, "SHRINK", 1, 1, Movement, 0, -1, Ints)                                               \
    X(Flip, "FLIP", 1, 1, Movement, 0, -1, Ints)                                                   \
    /* GATHER(src, index) {axis}: out[I] = src[I with I[axis] := index[I]], 0 where index[I] is */ \
    /* outside [0, src.shape[axis]): a load whose address comes from a loaded value */             \
    X(Gather, "GATHER", 2, 2, Tensor, 0, -1, Ints)                                                 \
    /* SCATTER_ADD(base, index, src) {axis}: base, then out[K with K[axis] := index[K]] += src[K]  \
     */                                                                                            \
    /* for each K of index's shape, in order (an index outside [0, n) adds nothing): own kernel */ \
    X(ScatterAdd, "SCATTER_ADD", 3, 3, Tensor, 0, -1, Ints)                                        \
    /* COLLECTIVE(x) {kind, reduce, root, world, deterministic}: x combined across the ranks of */ \
    /* a distributed job (tempura/dist.hpp): kind 0 all_reduce (reduce 0 sum, 1 max, 2 min), 1 */  \
    /* broadcast from root, 2 all_gather along dim 0, 3 reduce_scatter along dim 0; a step of */   \
    /* its own between kernels, reading x's buffer */                                              \
    X(Collective, "COLLECTIVE", 1, 1, Tensor, 0, -1, Ints)                                         \
    /* tensor-level markers */                                                                     \
    X(Contiguous, "CONTIGUOUS", kVariadic, 1, Tensor, 0, -1, None)                                 \
    /* CUSTOM_GRAD(value, x, d): value's value; autograd sends x the adjoint g * d (g           */ \
    /* expanded to x's shape): a composite op's own derivative (sigmoid, tanh, max_pool's       */ \
    /* first maximum), so that its building blocks are never differentiated; realize strips it. */ \
    /* An Ints arg names another kind by its first value (CustomGradKind, custom_grad.hpp):     */ \
    /* {Conv, ...}: (value, x, w) is a convolution's, x and w take the convolutions of the      */ \
    /* adjoint that give their gradients; {Windows, ...}: (value, x, x) is a pool's window      */ \
    /* view, x takes the sum of the window elements that hold it (nn.cpp)                       */ \
    X(CustomGrad, "CUSTOM_GRAD", 3, 3, Tensor, 0, -1, Any)                                         \
    /* DETACH(x): x's value, through which no gradient flows (autograd); realize strips it */      \
    X(Detach, "DETACH", 1, 1, Tensor, 0, -1, None)

enum class Op : uint8_t {
#define TEMPURA_X(e, n, a, m, c, f, r, k) e,
    TEMPURA_OPS(TEMPURA_X)
#undef TEMPURA_X
};

inline constexpr std::array<OpInfo, static_cast<size_t>(Op::Detach) + 1> kOpTable = {{
#define TEMPURA_X(e, n, a, m, c, f, r, k)                                                          \
    OpInfo{n, a, m, OpCategory::c, static_cast<uint8_t>(f), r, ArgKind::k},
    TEMPURA_OPS(TEMPURA_X)
#undef TEMPURA_X
}};

inline constexpr size_t kNumOps = kOpTable.size();

constexpr const OpInfo& op_info(Op op) { return kOpTable[static_cast<size_t>(op)]; }
constexpr std::string_view op_name(Op op) { return op_info(op).name; }
constexpr bool is_commutative(Op op) { return (op_info(op).flags & kCommutative) != 0; }
constexpr bool is_associative(Op op) { return (op_info(op).flags & kAssociative) != 0; }
constexpr bool is_alu(Op op) {
    const auto c = op_info(op).category;
    return c == OpCategory::Unary || c == OpCategory::Binary || c == OpCategory::Ternary;
}
constexpr bool is_comparison(Op op) {
    return op == Op::CmpLt || op == Op::CmpNe || op == Op::CmpEq;
}
constexpr bool is_range_ending(Op op) { return op_info(op).range_start >= 0; }
constexpr bool arity_ok(Op op, size_t n) {
    const auto& i = op_info(op);
    return i.arity == kVariadic ? n >= static_cast<size_t>(i.min_arity)
                                : n == static_cast<size_t>(i.arity);
}

// Infix spelling for render(); empty where the op has none.
constexpr std::string_view op_symbol(Op op) {
    switch (op) {
    case Op::Add: return "+";
    case Op::Sub: return "-";
    case Op::Mul: return "*";
    case Op::Idiv: return "/";
    case Op::Fdiv: return "/";
    case Op::Mod: return "%";
    case Op::Shl: return "<<";
    case Op::Shr: return ">>";
    case Op::And: return "&";
    case Op::Or: return "|";
    case Op::Xor: return "^";
    case Op::CmpLt: return "<";
    case Op::CmpNe: return "!=";
    case Op::CmpEq: return "==";
    default: return "";
    }
}

// Scheduling behaviour of a RANGE (Bestiary: AxisType; lower priority = outer loop).
enum class AxisType : uint8_t {
    Placeholder,
    Loop,
    Global,
    Thread,
    Warp,
    Local,
    GroupReduce,
    Upcast,
    Reduce,
    Unroll
};
constexpr int axis_priority(AxisType t) {
    switch (t) {
    case AxisType::Placeholder: return -3;
    case AxisType::Loop: return -1;
    case AxisType::Global:
    case AxisType::Thread: return 0;
    case AxisType::Warp: return 1;
    case AxisType::Local:
    case AxisType::GroupReduce: return 2;
    case AxisType::Upcast: return 3;
    case AxisType::Reduce: return 4;
    case AxisType::Unroll: return 5;
    }
    return 0;
}
std::string_view axis_type_name(AxisType t);

} // namespace tempura
