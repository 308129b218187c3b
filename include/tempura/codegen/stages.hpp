#pragma once
// The codegen stages (docs/ARCHITECTURE.md lists them in order): each a named function from
// kernel AST to kernel AST (or, last, to the linear program of docs/KERNEL_IR.md §2),
// runnable and dumpable on its own; pipeline() is the list lower_kernel_opt runs.
#include <string>
#include <vector>

#include "tempura/codegen/opts.hpp"
#include "tempura/ir/uop.hpp"

namespace tempura::codegen {

// Stage "symbolic": the symbolic rules to fixpoint over the kernel's index arithmetic,
// gates and constant subexpressions.
UOp symbolic(const UOp& ast);

// Stage "index dtype lowering": Index becomes Int32 when every index value of the kernel fits
// in 32 bits, else Int64.
UOp lower_index_dtype(const UOp& ast);

// Stage "decompositions": rewrites ops the backend lacks into ones it has (POW into EXP2 and
// LOG2, float32 EXP2 and LOG2 and float32/float64 SIN and COS into integer and float arithmetic
// that vectorizes, ...).
UOp decompose(const UOp& ast);

// Stage "split ranges": RANGE(n) % c with c dividing n becomes two ranges (outer * c + inner),
// and the modulo and division fold away.
UOp split_ranges(const UOp& ast);

// Stage "simplify ranges": adjacent ranges of one END or REDUCE merge into one range where
// every index then simplifies without a division or modulo of it (a contiguous 2-D elementwise
// kernel becomes one loop, which THREAD and UPCAST can split freely).
UOp simplify_ranges(const UOp& ast);

// The symbolic rules on every INDEX's offset and gate.
UOp simplify_kernel_indices(const UOp& ast);

// Stage "expander" (with the devectorizer's fold to the host width, load collapse, split store
// and horizontal reduction): UPCAST and UNROLL ranges disappear. The expanded range created
// first (smallest axis id) becomes vector lanes, folded to `vector_bytes` (a wider one becomes
// unrolled copies of register-wide vectors); every other expanded range becomes unrolled
// copies. A load or store whose offset has the vector axis as a unit-stride term is one vector
// access; any other is split into one scalar access per lane. A REDUCE over unrolled copies
// combines them first (a tree); one over the vector lanes keeps a vector accumulator and reduces
// it horizontally after its loops.
UOp expand(const UOp& ast, int64_t vector_bytes);

// Stage "THREAD lowering": the THREAD range becomes DEFINE_VAR core in [0, threads), read from
// vars[0]; the runtime calls the kernel once per core. Sets `threads` (1 when there is none).
UOp lower_threads(const UOp& ast, int64_t& threads);

// Stage "group reduce" (GPU devices): a REDUCE over a GROUP range (GROUP/GROUPTOP: a block's
// threads share the reduce) becomes each thread's partial reduce, stored to shared memory
// (DEFINE_LOCAL, one element per thread of the group), a BARRIER, then the reduce of the
// partials read back after it.
UOp lower_group_reduces(const UOp& ast);
// Tests only: lower GROUP without its BARRIER (EMU's race detector must then report the race).
void set_group_barrier_for_testing(bool keep);

// Stage "gpu dims" (GPU devices only): the output ranges become SPECIAL block indices (global
// axes) and thread indices (LOCAL axes), each of up to three ranges on a dim of its own when it
// fits the device's limits, else merged into x and recovered by division and modulo. A store
// that does not use a LOCAL range is gated to that range's thread 0. Sets the launch size.
// Output ranges of symbolic size take the grid dims left free when `grid_size` is given: their
// sizes (expressions of the kernel's variables) are set there, to be evaluated at launch.
UOp gpu_dims(const UOp& ast, const DeviceLimits& limits, const std::string& kernel,
             std::array<int64_t, 3>& grid, std::array<int64_t, 3>& block,
             std::array<UOp, 3>* grid_size = nullptr);

// Stage "MULACC": float a * b + c becomes MULACC(a, b, c) (an FMA on the CPU).
UOp fuse_mulacc(const UOp& ast);

// Stage "linearize" (with remove-reduce and add-loads): each REDUCE becomes an accumulator in
// a DEFINE_REG starting at the reduce op's identity, loops open and close around what depends
// on them (each op placed in the outermost loop it can live in), and stores through a gated
// INDEX become IF/STORE/ENDIF. Returns the program in execution order.
std::vector<UOp> linearize(const UOp& ast);

// A kernel lowered with opts.
struct LoweredKernel {
    std::vector<UOp> program;
    int64_t threads = 1;                   // run the program once per core with vars[0] = core
    std::array<int64_t, 3> grid{1, 1, 1};  // a GPU kernel's blocks along x, y, z
    std::array<int64_t, 3> block{1, 1, 1}; // and threads per block
    std::array<UOp, 3> grid_size{};        // a grid dim sized by the variables (else null)
    std::vector<Opt> opts;                 // the opts applied
};

// What the stages of one kernel's lowering share.
struct KernelState {
    std::string name;
    UOp ast;                      // the kernel as the stages leave it
    DeviceLimits limits;          // of the device it is lowered for
    const std::vector<Opt>* opts; // given opts; null: the heuristics choose
    LoweredKernel out;            // opts applied, THREAD count, then the program
};

// A stage of the pipeline: a name (dumped at TEMPURA_DEBUG=5) and what it does to the kernel.
// Most stages are one graph_rewrite of a rule group (rules.hpp, symbolic_rules()); the rest are
// global by nature (docs/ARCHITECTURE.md says which and why).
struct Stage {
    const char* name;
    UOp (*run)(const UOp& ast, KernelState& k);
};

// The pipeline, in order. The stages before "apply opts" are prepare_for_opts(); linearize
// follows the last.
const std::vector<Stage>& pipeline();

// Every stage of pipeline() with opts: `opts` when given, else the heuristics (none with
// TEMPURA_NOOPT=1), then linearize. With TEMPURA_DEBUG >= 5 each stage's result is printed.
LoweredKernel lower_kernel_opt(const std::string& name, const UOp& ast, const DeviceLimits& limits,
                               const std::vector<Opt>* opts = nullptr);

// The kernel AST just before apply-opts (symbolic, early decompositions, split ranges, simplify
// ranges): what opts and BEAM work on.
UOp prepare_for_opts(const UOp& ast);

// The identity of a reduce op for a dtype (0 for Add, 1 for Mul, the lowest value for Max).
UOp reduce_identity(Op op, DType dtype);

// A program listing: one op per line, loops indented.
std::string render_linear(const std::vector<UOp>& program);

} // namespace tempura::codegen
