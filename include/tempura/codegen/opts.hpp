#pragma once
// The codegen stage "apply opts" (docs/ARCHITECTURE.md): the optimization actions on a kernel's
// ranges, each checked for validity, the hand-coded heuristics that pick them, and BEAM search.
//
// Axes. A kernel's axes are its output ranges in loop order (outermost first), then its reduce
// ranges in the order the REDUCEs name them; `Opt::axis` indexes that list. Expanded ranges
// (UPCAST, UNROLL) leave the list: the expander turns them into vector lanes and copies.
//
//   UPCAST(a, n)   split output axis a by n; the inner n become vector lanes (the first UPCAST or
//                  UNROLL of a kernel) or unrolled copies (later ones)
//   UNROLL(a, n)   the same for a reduce axis
//   LOCAL(a, n)    cache blocking on the CPU: the inner n of output axis a become the innermost
//                  output loop (on a GPU: the workgroup axis)
//   GROUP(a, n), GROUPTOP(a, n)
//                  a reduce shared by a workgroup through shared memory: invalid on the CPU
//   THREAD(a, n)   the outer n of output axis a run on n threads (one thread range per kernel)
//   NOLOCALS       forbids LOCAL from here on
//   SWAP(a, b)     swaps the loop order of output axes a and b
//   PADTO(a, n)    pads axis a up to a multiple of n; the extra iterations are masked (loads
//                  gated, stores skipped, reduces fed their identity)
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tempura/ir/uop.hpp"

namespace tempura::codegen {

enum class OptOp : uint8_t {
    Upcast,
    Unroll,
    Local,
    Group,
    GroupTop,
    Thread,
    NoLocals,
    Swap,
    PadTo,
    Tc, // a matmul on tensor cores (GPU, sm_80 and later): TC(stage, tiles), tiles = 16 * rows +
        // columns of 16 x 8 blocks a warp computes (0: one); stage 0 reads the fragments from
        // global memory, any other stages the operands through shared memory (TcStage)
    Smem // a float32 matmul on a GPU's threads, its operands staged through shared memory:
         // SMEM(tile, block), tile = 16 * rows + columns of the thread's register tile, block
         // = 10000 * k-step + 100 * row threads + column threads (SmemTile)
};

std::string_view opt_op_name(OptOp op); // "UPCAST", ...

struct Opt {
    OptOp op = OptOp::Upcast;
    int64_t axis = 0;
    int64_t arg = 0; // the amount, or SWAP's second axis
    bool operator==(const Opt&) const = default;
};

std::string to_string(const Opt& o);                 // "UPCAST(1, 16)"
std::string to_string(const std::vector<Opt>& opts); // "[UPCAST(1, 16), THREAD(0, 2)]"

// What the target offers the opts.
struct DeviceLimits {
    int64_t vector_bytes = 64; // SIMD register width: 64 with AVX-512, 32 with AVX2, else 16
    int64_t threads = 1;       // cores THREAD may use
    bool has_shared = false;   // workgroup shared memory (GROUP); the CPU has none
    int64_t max_upcast = 256;  // vector lanes x unrolled copies per kernel
    std::string name = "CPU";  // the device, for messages and the BEAM cache key
    // A GPU (CUDA, EMU): output axes become block and thread indices (the "gpu dims" stage)
    // instead of loops, within these limits.
    bool gpu = false;
    int64_t max_threads_per_block = 1;
    std::array<int64_t, 3> max_block{1, 1, 1}; // threads along x, y, z
    std::array<int64_t, 3> max_grid{1, 1, 1};  // blocks along x, y, z
    int64_t shared_bytes = 0;                  // per block
    int64_t warp_size = 1;
    int sm = 0; // compute capability x 10 (80 for sm_80); 0 on the CPU

    bool operator==(const DeviceLimits&) const = default;
};

// The limits of a GPU of compute capability `sm` (80 for sm_80) as every Ampere-or-newer part
// has them: 1024 threads per block, blocks of (1024, 1024, 64), grids of (2^31 - 1, 65535,
// 65535), 163 KiB of shared memory per block with opt-in (an A100's; more than 48 KiB is
// dynamic shared memory), warps of 32.
DeviceLimits gpu_limits(const std::string& name, int sm);

// True when TEMPURA_NOOPT=1: kernels are lowered with no opts at all.
bool noopt_requested();

// True on an sm_90 GPU unless TEMPURA_WGMMA=0: the heuristics then pick, and BEAM also starts
// from, Hopper's warpgroup-mma kernels (TC(10000 + ...) and TC(20000 + ...)). The TC opt takes
// them on any sm_90 device whatever the flag; TEMPURA_WGMMA=0 keeps them out of the automatic
// choices (mma.sync's staged kernels instead). Every variant has given the CPU's products bit
// for bit on an H200, and the heuristics' choice runs at 0.87x cuBLAS there (4096^3).
bool wgmma_offered(const DeviceLimits& lim);

// A kernel AST with opts applied one at a time. Each apply() checks the opt against the kernel
// and the device and throws tempura::Error ("[opt] UPCAST(1, 3): ...") when it is invalid,
// leaving the kernel unchanged.
class OptKernel {
  public:
    OptKernel(UOp ast, DeviceLimits limits);

    void apply(const Opt& o);
    // apply() that reports validity instead of throwing.
    bool try_apply(const Opt& o);

    const UOp& ast() const { return ast_; }
    const std::vector<Opt>& applied() const { return applied_; }
    const DeviceLimits& limits() const { return limits_; }

    // The axes: output ranges in loop order, then reduce ranges.
    const std::vector<UOp>& axes() const { return axes_; }
    size_t output_axes() const { return n_out_; }
    std::vector<int64_t> shape() const;
    int64_t upcast_size() const; // product of the expanded ranges' sizes
    int64_t thread_count() const;
    bool has_vector_axis() const;

  private:
    void refresh();
    void check_axis(const Opt& o, bool output, bool reduce) const;
    UOp split(const UOp& r, int64_t amount, AxisType inner_type, bool inner_first);

    UOp from_; // the AST it was made from
    UOp ast_;
    DeviceLimits limits_;
    std::vector<Opt> applied_;
    std::vector<UOp> axes_;
    size_t n_out_ = 0;
    bool no_locals_ = false;
    bool serial_ = false; // reads what it writes: no opts (see reads_what_it_writes)
    int64_t next_axis_ = 0;
};

// The hand-coded CPU heuristics: vector lanes on the contiguous axis, unrolled copies for
// register reuse (matmul-like kernels), THREAD on the outermost output axis when the kernel is
// big enough to gain.
std::vector<Opt> heuristic_opts(const UOp& ast, const DeviceLimits& limits);

// Whether a kernel loads from a buffer it stores to (SCATTER_ADD's read-modify-write at the
// places its index names, which may repeat or be the same everywhere): such a kernel runs
// serially and in order, since threads or vector lanes would race on one element. OptKernel
// gives it no axes and refuses every opt.
bool reads_what_it_writes(const UOp& ast);

// TC's staging of the operands through shared memory, stage = 1000 pipe + 100 ks + 10 wm + wn:
// a block of wm x wn warps (each 1, 2 or 4) copies k-steps of 16 ks (1, 2 or 4) of both operands
// into shared memory, through registers into two tiles taken in turn (pipe 0, one barrier a
// k-step) or by a cp.async pipeline of pipe (2, 3 or 4) tiles, pipe - 1 k-steps in flight.
// With 10000 wg added (wg 1 or 2), the block is wm x wn warpgroups of 128 threads (Hopper,
// sm_90): tiles of 128-byte swizzled rows that the warpgroup's wgmma reads from shared memory
// itself, k-steps of 64 (ks 4), and `tiles` is then a warpgroup's columns (64, 128 or 256) over
// its 64 rows. wg 1 waits for each k-step's mma before the next barrier; wg 2 (pipelines of 3 or
// 4 tiles) keeps one k-step's mma in flight while the next is issued, the copies then running
// pipe - 2 k-steps ahead.
struct TcStage {
    int64_t pipe = 0, ks = 1, wm = 1, wn = 1;
    int64_t wg = 0;
    static TcStage decode(int64_t stage) {
        return {stage / 1000 % 10, stage / 100 % 10, stage / 10 % 10, stage % 10, stage / 10000};
    }
    int64_t code() const { return 10000 * wg + 1000 * pipe + 100 * ks + 10 * wm + wn; }
    bool valid() const {
        const auto one_two_four = [](int64_t v) { return v == 1 || v == 2 || v == 4; };
        return (pipe == 0 || (pipe >= 2 && pipe <= 4)) && one_two_four(ks) && wg >= 0 && wg <= 2 &&
               (wg == 0 || ks == 4) && (wg != 2 || pipe >= 3) && one_two_four(wm) &&
               one_two_four(wn);
    }
};

// The TC opt's rewrite (src/codegen/tensor_cores.cpp): a matmul of 16-bit float operands as
// warps of WMMA (mma.sync.m16n8k16). Throws "[opt] <what>..." when the kernel or the device does
// not allow it.
// `tiles` = 16 * rows + columns: each warp computes rows x columns blocks of 16 x 8 (each 1,
// 2, 4 or 8; 0 is 1 x 1). `stage` 0: the warps read their fragments from global memory; else
// TcStage::decode(stage), the warps reading each fragment from shared memory with ldmatrix, or
// (wg) warpgroups of WGMMA reading their operands there.
UOp tensor_core_ast(const UOp& ast, const DeviceLimits& limits, int64_t& next_axis, int64_t stage,
                    int64_t tiles, const std::string& what);
// After TC(0, tiles): 2 x 2 warps a thread block, LOCAL 2 on the block rows and on the block
// columns (the two innermost loop axes) where each is even; whether both applied.
bool tc_warps_2x2(OptKernel& k);

// Tests only: staged TC copies every k-step to the same buffer (EMU's race detector must then
// report the write of step t + 1 over what step t's fragments read).
void set_tc_single_buffer_for_testing(bool single);
// Tests only: warpgroups that keep an mma in flight still copy pipe - 1 k-steps ahead, into the
// tile that mma reads (EMU's race detector must report the copies).
void set_tc_full_lead_for_testing(bool full);

// SMEM's tiling of a float32 matmul (src/codegen/smem_matmul.cpp): a block of lm x ln threads
// computes bm x bn = (lm tm) x (ln tn) outputs, each thread a register tile of tm x tn of them
// (rows ty tm + ti, columns tx tn + tj of the block's). Each k-step of bk, the block's threads
// copy A's bm x bk and B's bk x bn elements into shared memory (laid out along M and N), through
// registers into two tiles taken in turn (pipe 0, one barrier a k-step) or by a cp.async
// pipeline of pipe (2, 3 or 4) tiles, pipe - 1 k-steps in flight; every thread then reads its
// tm values of A and tn of B there for each k (16-byte loads where four run along a row), tm x
// tn fused multiply-adds a k in k order (the products and sums of the plain loop, bit for bit).
// M, N and K are padded up to the block and the k-step: the copies read zeros past them and the
// stores past M and N do not happen. SMEM(16 tm + tn, 1000000 pipe + 10000 bk + 100 lm + ln).
struct SmemTile {
    int64_t tm = 4, tn = 4, lm = 16, ln = 16, bk = 16;
    int64_t pipe = 0;
    static SmemTile decode(int64_t tile, int64_t block) {
        return {tile / 16,   tile % 16,           block / 100 % 100,
                block % 100, block / 10000 % 100, block / 1000000};
    }
    int64_t tile() const { return 16 * tm + tn; }
    int64_t block() const { return 1000000 * pipe + 10000 * bk + 100 * lm + ln; }
    bool valid() const {
        const auto pow2 = [](int64_t v, int64_t most) {
            return v >= 1 && v <= most && (v & (v - 1)) == 0;
        };
        return pow2(tm, 8) && pow2(tn, 8) && pow2(lm, 32) && pow2(ln, 32) && lm * ln >= 32 &&
               (bk == 4 || bk == 8 || bk == 16 || bk == 32) &&
               (pipe == 0 || (pipe >= 2 && pipe <= 4));
    }
};

// The SMEM opt's rewrite: throws "[opt] <what>..." when the kernel is no matmul of Float32
// operands (one sum over one axis of the product of two loads) or the device refuses the tiling.
UOp smem_matmul_ast(const UOp& ast, const DeviceLimits& limits, int64_t& next_axis, int64_t tile,
                    int64_t block, const std::string& what);
// The heuristics' SMEM for a float32 matmul on a GPU whose M and N are both 32 or more ({}
// otherwise): blocks of 16 x 16 threads of 8 x 8, 4 x 4 or 2 x 2 outputs each (smem_matmul.cpp
// says which where).
std::vector<Opt> smem_heuristic_opts(const UOp& ast, const DeviceLimits& limits);

// The ast with `opts` applied in order (throws on the first invalid one).
UOp apply_opts(const UOp& ast, const std::vector<Opt>& opts, const DeviceLimits& limits);

// How a kernel's index depends on a range: the coefficient when `idx` is a sum of terms in
// which `r` appears only as `r * c` (0 when it does not appear), or -1 when `r` appears in any
// other way (under a division, a modulo, a product with another variable, ...).
int64_t linear_coefficient(const UOp& idx, const UOp& r);

// An integer expression as a linear form: its monomials with their coefficients (the symbolic
// simplifier's decomposition, symbolic::decompose; the constant term left out).
std::vector<std::pair<UOp, int64_t>> linear_terms(const UOp& e);

} // namespace tempura::codegen
