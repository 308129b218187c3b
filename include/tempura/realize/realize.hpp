#pragma once
// realize_graph: the whole path from a tensor-level graph (docs/KERNEL_IR.md §1) to its
// value: kernel split, rangeify, the codegen stages, the LLVM backend, and running the plan.
#include <memory>
#include <string>
#include <vector>

#include "tempura/ir/uop.hpp"

namespace tempura {

namespace runtime {
class Buffer;
}

struct KernelInfo {
    std::string name;    // e.g. "r_16_32" (reduce) or "E_1024" (elementwise)
    std::string backend; // "CPU"
    std::string source;  // the generated LLVM IR
    // One run at the sizes it was planned for: float operations (a multiply-add counts 2) and
    // the bytes of the buffers it reads and writes, each once.
    double flops = 0;
    double bytes = 0;
};

struct RealizeResult {
    std::shared_ptr<runtime::Buffer> buffer; // contiguous, row-major, tensor_shape(root)
    // The kernels that ran, in order; shared with the cached plan (their LLVM IR is tens of
    // kilobytes: copying it on every realize() cost more than the launches).
    std::shared_ptr<const std::vector<KernelInfo>> kernels;
    // Symbolic shapes: the root's dims as bound Index expressions (CONST or over BINDs) when
    // one of them is a variable's, else empty. The realized tensor's BUFFER records them, so
    // graphs built on the result stay symbolic.
    std::vector<UOp> dims;
};

// `device`: the device (realize/device.hpp's index) the kernels run on and the result lives on;
// -1 the default device.
RealizeResult realize_graph(const UOp& root, int device = -1);
// Several roots in one schedule: work they share is computed once, and roots of the same dims
// that do not read one another through a third kernel share one kernel (a max and a sum of one
// input: one pass over it). Each result's `kernels` lists the whole schedule's kernels.
std::vector<RealizeResult> realize_graphs(const std::vector<UOp>& roots, int device = -1);

// The memory of a graph's plan: what its intermediate and result buffers take if each has its
// own (unplanned_bytes, the peak without planning) and what they take with the memory plan,
// where intermediates whose lifetimes do not overlap share a block (planned_bytes, the peak).
struct PlanMemory {
    size_t unplanned_bytes = 0, planned_bytes = 0;
};
// Builds (or finds) the plan of `root` without running it.
PlanMemory plan_memory(const UOp& root);

// Empties the plan and kernel caches (each bounded by TEMPURA_CACHE_MB and evicted least recently
// used first); compiled code is freed once no tensor's realize still runs it. Memory blocks kept
// for reuse (host and device) are freed too.
void clear_caches();
// A cache of a layer above this one (autograd's recorded walks) that clear_caches() empties
// too: `clear` is called on every clear_caches() from now on. Registered once per cache.
void on_clear_caches(void (*clear)());

// The plan cache's size, for tests and reports.
struct PlanCacheStats {
    size_t entries = 0, bytes = 0, evictions = 0;
};
PlanCacheStats plan_cache_stats();

} // namespace tempura
