#pragma once
// BEAM search (the codegen stage "apply opts", docs/ARCHITECTURE.md, with BEAM >= 1): picks a
// kernel's opts by compiling and timing candidates instead of trusting the hand-coded heuristics.
//
// The search keeps the `width` fastest kernels of each round. Round 1 expands the kernel with
// no opts and the heuristics' choice (so BEAM is never slower than the heuristics, up to timing
// noise), a matmul that takes tensor cores with each of its tensor_core_variants and a float32
// one with each of its smem_matmul_variants (TC and SMEM come first, so no action reaches them);
// every later round expands the kept kernels of the round before by one more action (UPCAST,
// UNROLL, LOCAL, THREAD, SWAP, PADTO with a fixed set of amounts), each checked with
// OptKernel::try_apply, deduplicated by the structure of the resulting kernel (and by machine
// code), lowered, compiled and timed on buffers of small random values: a warm-up run, then the
// best of 3 (kernels under 1 ms repeated to fill each sample). A candidate is stopped as soon as it
// takes more than 10x the best time so far, even inside its warm-up run (a timer signal leaves the
// kernel's machine code), so hopeless ones cost little; one that faults on the random inputs is
// dropped the same way. The search stops when a round's best does not improve on the round before
// by more than 1%, or after 10 rounds. Its best is timed against the heuristics' choice once more
// (5 times each, alternately) and returned only when it is still more than 1% faster.
//
// On a CUDA device (limits of "CUDA:n") the candidates are PTX loaded into the device and timed
// there: each run is a launch on the stream, a sample ends when the stream is done, and the
// buffers are device memory filled the same way. A GPU kernel runs unguarded: one that faults
// is dropped with the driver's error, and the faulted context fails every later candidate. EMU
// is not timed (its timings would say nothing about a GPU): its kernels take the heuristics.
//
// Results are cached on disk, one file per kernel in TEMPURA_CACHE_DIR (default
// $XDG_CACHE_HOME/tempura, else $HOME/.cache/tempura), keyed by the kernel's structure, the
// width, the device limits and the host CPU (or the GPU's model); a cached list is revalidated by
// applying it, and an unreadable or invalid file is searched again and overwritten. The folder's
// BEAM files are kept within TEMPURA_CACHE_MB, least recently used first out (trim_beam_cache).
//
// On stderr: a progress line while it searches (rewritten in place, on a terminal only), a
// final line per search with its total time, and with TEMPURA_DEBUG >= 2 one line per
// candidate.
#include <cstddef>
#include <string>
#include <vector>

#include "tempura/codegen/opts.hpp"
#include "tempura/ir/uop.hpp"

namespace tempura::codegen {

// The fastest opt list found for the kernel `ast` (a kernel AST as the scheduler makes it;
// prepare_for_opts is applied here). `name` is for messages. Throws tempura::Error for a width
// below 1 or a GPU that is not a CUDA device. Searches are serialized process-wide (timing two at
// once would measure neither).
std::vector<Opt> beam_search(const std::string& name, const UOp& ast, const DeviceLimits& limits,
                             int width);

// A matmul's tensor-core opt lists that BEAM starts from (empty for a kernel TC refuses): each
// warp's tiles (2 x 2 ... 8 x 4 blocks of 16 x 8) with one warp or 2 x 2 warps a block, and the
// operands staged through shared memory (TC(stage, tiles): 2 x 2, 2 x 4 or 4 x 2 warps, k-steps
// of 16 or 32, copies through registers or a cp.async pipeline of 2 to 4 tiles), those the
// kernel and the device allow.
std::vector<std::vector<Opt>> tensor_core_variants(const UOp& prepared, const DeviceLimits& limits);

// A float32 matmul's starting points on a GPU (empty for any other kernel): its operands staged
// through shared memory (SMEM: register tiles of 4 x 4, 4 x 8, 8 x 4 and 8 x 8, blocks of 8 x 8
// to 16 x 16 threads, k-steps of 8, 16 and 32, copied through registers or by a cp.async pipeline
// of 3 tiles), those the kernel and the device allow.
std::vector<std::vector<Opt>> smem_matmul_variants(const UOp& prepared, const DeviceLimits& limits);

// The opts the environment asks for: {} with TEMPURA_NOOPT=1, beam_search with width N when
// TEMPURA_BEAM=N >= 1 (on the CPU and CUDA devices, for kernels of fixed sizes), else
// heuristic_opts on prepare_for_opts(ast).
std::vector<Opt> beam_or_heuristic(const std::string& name, const UOp& ast,
                                   const DeviceLimits& limits);

// The cache key of a search (32 hex digits) and the folder and file it lives in ("" when no
// folder can be named: none of the environment variables is set).
std::string beam_cache_key(const UOp& ast, const DeviceLimits& limits, int width);
std::string beam_cache_dir();
std::string beam_cache_file(const UOp& ast, const DeviceLimits& limits, int width);

// Keeps the disk cache within a byte budget (beam_search passes TEMPURA_CACHE_MB after every
// file it writes): while the `beam-*.txt` files of `dir` take more than `budget_bytes` (each
// counted as its size rounded up to 4 KiB blocks), the least recently used one is removed (a
// file's modification time; a cache hit renews it). Only regular files named so are counted or
// removed: links, folders and other files are left alone. Returns how many were removed.
size_t trim_beam_cache(const std::string& dir, size_t budget_bytes);

// Opt lists in the cache's text form: one "UPCAST 1 16" per line. parse_opts returns false for
// anything else (an unknown op, a missing or malformed number, trailing text).
std::string format_opts(const std::vector<Opt>& opts);
bool parse_opts(const std::string& text, std::vector<Opt>& opts);

// Counters since the start of the process (for tests and reports).
struct BeamStats {
    size_t searches = 0;            // searches run (cache misses)
    size_t cache_hits = 0;          // beam_search calls answered from the disk cache
    size_t candidates_compiled = 0; // candidates lowered and compiled
    size_t candidates_timed = 0;    // candidates run (stopped early or not)
};
BeamStats beam_stats();

} // namespace tempura::codegen
