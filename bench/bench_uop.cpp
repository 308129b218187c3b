// UOp construction cost: building fresh (not yet interned) nodes, and re-building nodes that
// already exist (a hash-cons hit), with 1 and 2 threads. items_per_second is nodes per second; the
// "time_per_node" counter is its inverse (seconds per node, so "25n" reads 25 ns per node).
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <tempura/tempura.hpp>

namespace {

using tempura::UOp;

constexpr int64_t kChain =
    1000; // steps per chain; each step makes an Add and a Mul (and maybe a constant)

// A chain over a variable nobody else uses: every node in it is new to the intern table.
UOp build_chain(const std::string& var_name) {
    UOp cur = UOp::variable(var_name, 0, 1000);
    for (int64_t i = 1; i <= kChain; ++i) cur = (cur + i) * (i % 7 + 2);
    return cur;
}

std::atomic<int64_t> g_chain_id{0};

// Fresh nodes: each iteration builds a chain over a new variable, then drops it (so the benchmark
// measures construction of new nodes plus their release; the intern table holds no strong
// references).
void BM_BuildFreshNodes(benchmark::State& state) {
    const std::string prefix = "fresh_t" + std::to_string(state.thread_index()) + "_";
    // Every chain has the same shape, so one count serves all iterations.
    const int64_t nodes_per_chain = static_cast<int64_t>(
        build_chain("count_t" + std::to_string(state.thread_index())).node_count());
    int64_t nodes = 0;
    for (auto _ : state) {
        UOp chain = build_chain(prefix +
                                std::to_string(g_chain_id.fetch_add(1, std::memory_order_relaxed)));
        benchmark::DoNotOptimize(chain);
        nodes += nodes_per_chain;
    }
    state.SetItemsProcessed(nodes);
    state.counters["time_per_node"] = benchmark::Counter(
        static_cast<double>(nodes), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_BuildFreshNodes)->Threads(1)->Threads(2)->UseRealTime();

// Fresh nodes, kept alive: the chains of all iterations stay referenced until the end, so no node
// is released inside the timed region (construction only; the intern table grows).
void BM_BuildFreshNodesKept(benchmark::State& state) {
    const std::string prefix = "kept_t" + std::to_string(state.thread_index()) + "_";
    const int64_t nodes_per_chain = static_cast<int64_t>(
        build_chain("count_k" + std::to_string(state.thread_index())).node_count());
    std::vector<UOp> keep;
    int64_t nodes = 0;
    for (auto _ : state) {
        keep.push_back(build_chain(
            prefix + std::to_string(g_chain_id.fetch_add(1, std::memory_order_relaxed))));
        nodes += nodes_per_chain;
    }
    state.SetItemsProcessed(nodes);
    state.counters["time_per_node"] = benchmark::Counter(
        static_cast<double>(nodes), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    // `keep` is released after the timed loop has ended.
}
BENCHMARK(BM_BuildFreshNodesKept)->Threads(1)->Threads(2)->UseRealTime()->Iterations(200);

// Hash-cons hits: re-building nodes that already exist (held alive outside the loop). Each item is
// one node lookup: `x + c` with both operands existing UOps.
void BM_RebuildExistingNode(benchmark::State& state) {
    UOp x = UOp::variable("hit_x", 0, 1000);
    std::vector<UOp> consts, existing;
    for (int64_t i = 0; i < 64; ++i) consts.push_back(UOp::index(i));
    for (int64_t i = 0; i < 64; ++i) existing.push_back(x + consts[static_cast<size_t>(i)]);
    int64_t nodes = 0;
    for (auto _ : state) {
        for (size_t i = 0; i < consts.size(); ++i) {
            UOp again = x + consts[i];
            benchmark::DoNotOptimize(again);
        }
        nodes += static_cast<int64_t>(consts.size());
    }
    // Outside timing: make sure they were hits.
    for (size_t i = 0; i < consts.size(); ++i)
        if (!(x + consts[i]).same(existing[i]))
            state.SkipWithError("re-built node is not the existing node");
    state.SetItemsProcessed(nodes);
    state.counters["time_per_node"] = benchmark::Counter(
        static_cast<double>(nodes), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_RebuildExistingNode)->Threads(1)->Threads(2)->UseRealTime();

// Hash-cons hits through the int64_t overload: `x + i` also looks up the constant i (two lookups
// per item, both hits).
void BM_RebuildExistingNodeWithConstant(benchmark::State& state) {
    UOp x = UOp::variable("hit_y", 0, 1000);
    std::vector<UOp> existing;
    for (int64_t i = 0; i < 64; ++i) existing.push_back(x + i);
    int64_t items = 0;
    for (auto _ : state) {
        for (int64_t i = 0; i < 64; ++i) {
            UOp again = x + i;
            benchmark::DoNotOptimize(again);
        }
        items += 64;
    }
    state.SetItemsProcessed(items);
    state.counters["time_per_expr"] = benchmark::Counter(
        static_cast<double>(items), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_RebuildExistingNodeWithConstant)->Threads(1)->Threads(2)->UseRealTime();

} // namespace

BENCHMARK_MAIN();
