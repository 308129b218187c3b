// realize_graph: a plan per graph structure, built once (schedule, lower, compile) and re-run.
//
// The plan cache is keyed by the graph's structure with its BUFFERs replaced by input
// positions, so the same computation on other buffers (the usual case: a model's forward pass
// on new inputs) skips scheduling and codegen entirely and only allocates and runs.
#include "tempura/realize/realize.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "tempura/backend/cuda.hpp"
#include "tempura/backend/gpu.hpp"
#include "tempura/backend/llvm_cpu.hpp"
#include "tempura/codegen/stages.hpp"
#include "tempura/error.hpp"
#include "tempura/realize/beam.hpp"
#include "tempura/realize/collective.hpp"
#include "tempura/realize/device.hpp"
#include "tempura/realize/viz.hpp"
#include "tempura/rewrite/trace.hpp"
#include "tempura/runtime/buffer.hpp"
#include "tempura/runtime/thread_pool.hpp"
#include "tempura/schedule/schedule.hpp"
#include "tempura/schedule/symbolic_shapes.hpp"
#include "tempura/support/env.hpp"
#include "tempura/support/lru_cache.hpp"
#include "tempura/symbolic/eval.hpp"
#include "tempura/symbolic/simplify.hpp"

namespace tempura {

namespace {

using env::debug_level;

// A buffer a plan step reads or writes: an input of the graph or a plan-allocated output.
struct Slot {
    bool input;
    size_t index;
};

struct Step {
    std::shared_ptr<const runtime::CompiledKernel> kernel; // null for an empty output
    std::vector<Slot> params;                              // params[0 .. outputs) are written
    size_t outputs;
    size_t level;        // independent steps share a level
    size_t work;         // output elements (for parallelism)
    double flops = 0;    // float ALU ops per run
    int64_t threads = 1; // runs, one per core (THREAD)
    // The kernel's DEFINE_VARs in program order: a variable of the plan (its index in
    // Plan::vars) or kCoreVar, the core a THREAD kernel's run is.
    std::vector<int64_t> vars;
    bool gpu = false; // a GPU kernel (EMU, CUDA): launched over grid x block
    std::array<int64_t, 3> grid{1, 1, 1}, block{1, 1, 1};
    std::array<UOp, 3> grid_size{}; // grid dims sized by the plan's variables (else null)
    // A COLLECTIVE (no kernel): params {out, in}, run by the collective runner.
    UOp collective{};
    std::shared_ptr<std::atomic<bool>> ran{}; // whether it ran once (the first run checks shapes)
};

std::atomic<CollectiveRunner*> g_collective_runner{nullptr};

constexpr int64_t kCoreVar = -1;

// Float ALU operations one run of a linear program performs (one thread's, for a GPU kernel):
// each op counted once per iteration of the loops around it (loop bounds are constants here;
// MULACC counts 2, a WMMA its warp's share).
double count_flops(const std::vector<UOp>& program) {
    double flops = 0, trips = 1;
    std::vector<double> stack;
    for (const UOp& u : program) {
        if (u.op() == Op::Range) {
            const double n = u.src(0).is_const() ? static_cast<double>(u.src(0).const_value()) : 1;
            stack.push_back(trips);
            trips *= n;
        } else if (u.op() == Op::End && !stack.empty()) {
            trips = stack.back();
            stack.pop_back();
        } else if (is_alu(u.op()) && u.dtype().is_float() && u.op() != Op::Cast &&
                   u.op() != Op::BitCast) {
            flops += trips * (u.op() == Op::MulAcc ? 2 : 1) * u.dtype().count;
        } else if (u.op() == Op::Wmma) {
            // An m16n8k16 mma: 2 x 16 x 8 x 16 flops, shared by its warp's 32 threads.
            flops += trips * 2 * 16 * 8 * 16 / 32;
        } else if (u.op() == Op::Wgmma) {
            // 64 x n x 16 ks, shared by its warpgroup's 128 threads.
            const auto& a = u.arg_as<std::vector<int64_t>>();
            flops += trips * 2 * 64 * static_cast<double>(a.at(0)) * 16 *
                     static_cast<double>(a.at(1)) / 128;
        }
    }
    return flops;
}

struct Plan {
    int device = runtime::kCpu;                     // where its kernels run and its outputs live
    std::vector<std::pair<DType, int64_t>> outputs; // buffers the plan allocates
    // Symbolic shapes: the variables the kernels read, and per output its number of elements
    // as an expression of them (null when fixed; outputs then holds the size it had when built).
    std::vector<std::string> vars;
    std::vector<UOp> output_numel;
    std::vector<Step> steps;                 // dependency order
    std::vector<std::vector<size_t>> levels; // step indices per level
    std::vector<Slot> results;               // per root (one, or the SINK's sources)
    std::shared_ptr<std::vector<KernelInfo>> kernels = std::make_shared<std::vector<KernelInfo>>();
    // Memory planning: intermediate outputs whose lifetimes do not overlap share a block.
    std::vector<int64_t> block_of; // per output: its block, or -1 for a buffer of its own
    std::vector<size_t> blocks;    // each block's bytes
    PlanMemory memory;
    bool collectives = false; // whether a step is a COLLECTIVE
};

size_t slot_bytes(const std::pair<DType, int64_t>& o) {
    return static_cast<size_t>(o.second) * static_cast<size_t>(o.first.itemsize());
}

// Assigns the plan's intermediate outputs to shared blocks. An output lives from the level of
// the step that writes it to the last level of a step that reads it; steps of one level may run
// at once, so two outputs share a block only when one's last level is before the other's first.
// The result gets a buffer of its own (it outlives the run). Greedy, in order of first level,
// into the smallest free block that is large enough (a block grows to its largest tenant).
void plan_memory(Plan& plan) {
    const size_t n = plan.outputs.size();
    std::vector<size_t> first(n, 0), last(n, 0);
    for (const Step& st : plan.steps)
        for (size_t p = 0; p < st.params.size(); ++p) {
            if (st.params[p].input) continue;
            const size_t o = st.params[p].index;
            if (p < st.outputs)
                first[o] = last[o] = std::max(last[o], st.level);
            else
                last[o] = std::max(last[o], st.level);
        }
    std::vector<bool> is_result(n, false);
    for (const Slot& r : plan.results)
        if (!r.input) is_result[r.index] = true;
    // A collective reads and writes its buffers while later levels run: buffers of their own.
    for (const Step& st : plan.steps)
        if (!st.collective.is_null())
            for (const Slot& sl : st.params)
                if (!sl.input) is_result[sl.index] = true;
    std::vector<size_t> order;
    for (size_t o = 0; o < n; ++o)
        if (!is_result[o]) order.push_back(o);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return first[a] < first[b]; });
    plan.block_of.assign(n, -1);
    std::vector<size_t> free_after; // per block: the last level its current tenant is used
    for (size_t o : order) {
        const size_t bytes = slot_bytes(plan.outputs[o]);
        int64_t best = -1;
        for (size_t b = 0; b < plan.blocks.size(); ++b) {
            if (free_after[b] >= first[o]) continue;
            const bool fits = plan.blocks[b] >= bytes;
            if (best < 0) {
                best = static_cast<int64_t>(b);
                continue;
            }
            const size_t cur = plan.blocks[static_cast<size_t>(best)];
            const bool best_fits = cur >= bytes;
            // Prefer a block that fits (the smallest), else the largest (least growth).
            if ((fits && (!best_fits || plan.blocks[b] < cur)) ||
                (!fits && !best_fits && plan.blocks[b] > cur))
                best = static_cast<int64_t>(b);
        }
        if (best < 0) {
            best = static_cast<int64_t>(plan.blocks.size());
            plan.blocks.push_back(0);
            free_after.push_back(0);
        }
        const auto b = static_cast<size_t>(best);
        plan.blocks[b] = std::max(plan.blocks[b], bytes);
        free_after[b] = last[o];
        plan.block_of[o] = best;
    }
    for (size_t o = 0; o < n; ++o) plan.memory.unplanned_bytes += slot_bytes(plan.outputs[o]);
    for (size_t o = 0; o < n; ++o)
        if (is_result[o]) plan.memory.planned_bytes += slot_bytes(plan.outputs[o]);
    for (size_t b : plan.blocks) plan.memory.planned_bytes += b;
}

// The structure of a graph with BUFFERs as input positions (and their sizes), and the BUFFER
// nodes in that order.
// With symbolic dims, a node that has them is keyed by them instead of its concrete sizes, and a
// BIND by its variable alone (the value is an argument of the run): one plan serves every value.
std::string plan_key(const std::vector<UOp>& topo, std::vector<UOp>& inputs,
                     const SymbolicShapes& sym, int device) {
    auto put = [](std::string& key, int64_t v) {
        key.append(reinterpret_cast<const char*>(&v), sizeof v);
    };
    return runtime::device_name(device) + ":" +
           structure_key(topo, "realize", [&](const UOp& u, std::string& key) {
               if (u.op() == Op::Bind) return true;
               const std::vector<UOp>* dims = nullptr;
               if (!sym.empty())
                   if (auto it = sym.dims.find(u); it != sym.dims.end()) dims = &it->second;
               if (u.op() == Op::Buffer) {
                   put(key, static_cast<int64_t>(inputs.size()));
                   put(key, dims != nullptr ? -1 : u.arg_as<std::vector<int64_t>>().at(1));
                   inputs.push_back(u);
                   return true;
               }
               if (dims == nullptr) return false;
               key += 'S';
               for (const UOp& d : *dims) {
                   if (d.is_const()) {
                       put(key, d.const_value());
                   } else {
                       key += d.render();
                       key += '\0';
                   }
               }
               if (u.op() == Op::Reshape || u.op() == Op::Expand)
                   return true; // the arg is the sizes
               if (u.op() == Op::Shrink) {
                   // The bounds, with the end of a whole symbolic dim (the only way a shrunk dim
                   // stays symbolic) as a marker instead of its size.
                   const auto& b = u.arg_as<std::vector<int64_t>>();
                   for (size_t d = 0; d < dims->size(); ++d) {
                       put(key, b[2 * d]);
                       put(key, (*dims)[d].is_const() ? b[2 * d + 1] : INT64_MIN);
                   }
                   return true;
               }
               return false; // PAD, PERMUTE, FLIP, REDUCE_AXIS, ALU: the arg is no size
           });
}

// Runs task(i) for i in [0, n) on up to `threads` threads (the caller is one of them). Plain
// threads, not the pool: a task may lower with BEAM, which times kernels on the pool. The first
// failing index's exception is rethrown, so errors do not depend on the timing.
void run_on_threads(size_t n, size_t threads, const std::function<void(size_t)>& task) {
    threads = std::min(threads, n);
    if (threads <= 1) {
        for (size_t i = 0; i < n; ++i) task(i);
        return;
    }
    std::vector<std::exception_ptr> errors(n);
    std::atomic<size_t> next{0};
    auto drain = [&] {
        for (size_t i; (i = next.fetch_add(1)) < n;) {
            try {
                task(i);
            } catch (...) {
                errors[i] = std::current_exception();
            }
        }
    };
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(drain);
    drain();
    for (std::thread& t : pool) t.join();
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
}

Plan build_plan(const UOp& root, const std::vector<UOp>& inputs, const SymbolicShapes& sym,
                int device) {
    Plan plan;
    plan.device = device;
    for (const auto& [name, value] : sym.values) plan.vars.push_back(name);
    UOpMap<Slot> slot_of;
    for (size_t i = 0; i < inputs.size(); ++i) slot_of.emplace(inputs[i], Slot{true, i});
    UOpMap<size_t> step_of_output;
    const std::vector<ScheduledKernel> kernels = schedule_graph(root, &sym);
    // The kernels are independent until they run: each is lowered and compiled on its own
    // thread (TEMPURA_COMPILE_THREADS, default the worker count), in kernel order otherwise.
    struct Built {
        std::shared_ptr<const runtime::CompiledKernel> kernel;
        int64_t threads = 1;
        std::array<int64_t, 3> grid{1, 1, 1}, block{1, 1, 1};
        std::array<UOp, 3> grid_size{};
        double flops = 0;
        std::vector<int64_t> vars;
    };
    std::vector<Built> built(kernels.size());
    const codegen::DeviceLimits limits = runtime::device_limits(device);
    const auto compile_threads = static_cast<size_t>(env::get_int(
        "TEMPURA_COMPILE_THREADS", static_cast<int64_t>(runtime::thread_count()), 1, 1024));
    viz::CallTrace* const vc = viz::current_call(); // TEMPURA_VIZ: each kernel's stages
    if (vc != nullptr) vc->kernels.resize(kernels.size());
    run_on_threads(kernels.size(), compile_threads, [&](size_t i) {
        const ScheduledKernel& k = kernels[i];
        if (k.ast.is_null()) return;
        std::vector<codegen::Opt> opts;
        {
            const trace::Scope untraced(nullptr); // BEAM's candidates are not the kernel
            opts = codegen::beam_or_heuristic(k.name, k.ast, limits);
        }
        codegen::LoweredKernel low;
        {
            const trace::Scope traced(vc != nullptr ? &vc->kernels[i].rec : nullptr);
            low = codegen::lower_kernel_opt(k.name, k.ast, limits, &opts);
        }
        const int64_t block_threads = low.block[0] * low.block[1] * low.block[2];
        if (runtime::is_cuda(device))
            built[i].kernel = runtime::compile_cuda_kernel(k.name, low.program, block_threads,
                                                           runtime::cuda_ordinal(device));
        else if (limits.gpu)
            built[i].kernel = runtime::compile_emu_kernel(k.name, low.program, block_threads);
        else
            built[i].kernel = runtime::compile_cpu_kernel(k.name, low.program);
        built[i].grid = low.grid;
        built[i].block = low.block;
        built[i].grid_size = low.grid_size;
        if (vc != nullptr) {
            viz::KernelTrace& kt = vc->kernels[i];
            kt.name = k.name;
            kt.opts = codegen::to_string(low.opts);
            kt.linear = codegen::render_linear(low.program);
            kt.code = built[i].kernel->source();
        }
        built[i].threads = low.threads;
        // Per run: a CPU kernel's program runs once per core, a GPU kernel's once per thread of
        // the grid.
        built[i].flops = count_flops(low.program) * static_cast<double>(low.threads) *
                         static_cast<double>(low.grid[0] * low.grid[1] * low.grid[2] *
                                             low.block[0] * low.block[1] * low.block[2]);
        for (const UOp& u : low.program) {
            if (u.op() != Op::DefineVar) continue;
            const std::string& name = u.arg_as<VarArg>().name;
            auto it = std::find(plan.vars.begin(), plan.vars.end(), name);
            if (it != plan.vars.end())
                built[i].vars.push_back(it - plan.vars.begin());
            else if (name == "core" && low.threads > 1)
                built[i].vars.push_back(kCoreVar);
            else
                fail("realize", "internal: kernel " + k.name + " reads variable " + name +
                                    ", which the graph does not bind");
        }
    });
    for (size_t ki = 0; ki < kernels.size(); ++ki) {
        const ScheduledKernel& k = kernels[ki];
        const Shape& shape = k.output.shape();
        const Slot out{false, plan.outputs.size()};
        for (size_t o = 0; o < k.outputs; ++o) {
            const UOp& node = k.params.at(o);
            plan.outputs.emplace_back(node.dtype(), numel(node.shape()));
            UOp n_sym;
            if (auto d = sym.dims.find(node); d != sym.dims.end()) {
                n_sym = UOp::index(1);
                for (const UOp& x : d->second) n_sym = n_sym * x;
                n_sym = simplify(n_sym);
            }
            plan.output_numel.push_back(n_sym);
            slot_of.emplace(node, Slot{false, out.index + o});
        }
        Step step{nullptr, {out}, k.outputs, 0,        static_cast<size_t>(numel(shape)), 0, 1,
                  {},      false, {1, 1, 1}, {1, 1, 1}};
        if (!k.ast.is_null()) {
            step.kernel = built[ki].kernel;
            step.threads = built[ki].threads;
            step.gpu = limits.gpu;
            step.grid = built[ki].grid;
            step.block = built[ki].block;
            step.grid_size = built[ki].grid_size;
            step.flops = built[ki].flops;
            step.vars = built[ki].vars;
            step.params.clear();
            for (const UOp& p : k.params) {
                auto it = slot_of.find(p);
                if (it == slot_of.end())
                    fail("realize", "internal: kernel " + k.name + " reads a " +
                                        std::string(op_name(p.op())) + " with no buffer");
                step.params.push_back(it->second);
                if (!it->second.input && step.params.size() > k.outputs) {
                    // After every step that writes what this one reads.
                    auto s = step_of_output.find(p);
                    if (s != step_of_output.end())
                        step.level = std::max(step.level, plan.steps[s->second].level + 1);
                }
            }
            // The kernel reads buffers[0 .. buffer_count) and vars[0 .. var_count): a slot past
            // what the plan passes would be read from beyond the argument array.
            if (step.kernel->buffer_count() > step.params.size() ||
                step.kernel->var_count() != step.vars.size())
                fail("realize", "internal: kernel " + k.name + " reads " +
                                    std::to_string(step.kernel->buffer_count()) + " buffers and " +
                                    std::to_string(step.kernel->var_count()) +
                                    " variables, the plan passes " +
                                    std::to_string(step.params.size()) + " and " +
                                    std::to_string(step.vars.size()));
            double bytes = 0;
            for (const UOp& p : k.params)
                bytes += static_cast<double>(slot_bytes({p.dtype().base(), numel(p.shape())}));
            plan.kernels->push_back(KernelInfo{k.name, runtime::device_name(device),
                                               step.kernel->source(), step.flops, bytes});
        } else if (k.output.op() == Op::Collective) {
            step.collective = k.output;
            plan.collectives = true;
            step.ran = std::make_shared<std::atomic<bool>>(false);
            auto it = slot_of.find(k.params.at(1));
            if (it == slot_of.end()) fail("realize", "internal: a collective reads no buffer");
            step.params.push_back(it->second);
            if (auto s = step_of_output.find(k.params[1]); s != step_of_output.end())
                step.level = plan.steps[s->second].level + 1;
        }
        for (size_t o = 0; o < k.outputs; ++o)
            step_of_output.emplace(k.params.at(o), plan.steps.size());
        if (plan.levels.size() <= step.level) plan.levels.resize(step.level + 1);
        plan.levels[step.level].push_back(plan.steps.size());
        plan.steps.push_back(std::move(step));
    }
    // Collectives start first in their level: their bytes move while its kernels run.
    for (auto& level : plan.levels)
        std::stable_partition(level.begin(), level.end(),
                              [&](size_t i) { return !plan.steps[i].collective.is_null(); });
    for (const UOp& r : root.op() == Op::Sink ? root.srcs() : std::vector<UOp>{root}) {
        auto it = slot_of.find(r);
        if (it == slot_of.end()) fail("realize", "internal: a root has no buffer");
        plan.results.push_back(it->second);
    }
    plan_memory(plan);
    return plan;
}

// Kernels of one level run concurrently when there is enough work to share.
constexpr size_t kParallelWork = size_t{1} << 16;

void run_plan(const Plan& plan, const std::vector<std::shared_ptr<runtime::Buffer>>& inputs,
              std::vector<std::shared_ptr<runtime::Buffer>>& outputs,
              const std::map<std::string, int64_t>& values) {
    outputs.clear();
    outputs.reserve(plan.outputs.size());
    // The variables' values, in the plan's order; the outputs' sizes at those values.
    std::vector<int64_t> var_values;
    for (const std::string& v : plan.vars) var_values.push_back(values.at(v));
    std::vector<std::pair<DType, int64_t>> sizes = plan.outputs;
    for (size_t o = 0; o < sizes.size(); ++o)
        if (!plan.output_numel[o].is_null())
            sizes[o].second = evaluate(plan.output_numel[o], values);
    std::vector<size_t> block_bytes = plan.blocks;
    if (!plan.vars.empty()) {
        std::fill(block_bytes.begin(), block_bytes.end(), 0);
        for (size_t o = 0; o < sizes.size(); ++o)
            if (plan.block_of[o] >= 0) {
                size_t& b = block_bytes[static_cast<size_t>(plan.block_of[o])];
                b = std::max(b, slot_bytes(sizes[o]));
            }
    }
    // Every kernel writes its whole output: no need to zero it first. Outputs that share a
    // block of the memory plan point into it; the others are buffers of their own.
    // Kernels get the buffers' addresses: host pointers, or a CUDA device's own addresses.
    auto address = [](const runtime::Buffer& b) { return reinterpret_cast<void*>(b.address()); };
    std::vector<std::shared_ptr<runtime::Buffer>> blocks;
    for (size_t bytes : block_bytes)
        blocks.push_back(
            runtime::make_buffer(DType::UInt8, static_cast<int64_t>(bytes), false, plan.device));
    std::vector<void*> out_ptr(plan.outputs.size());
    for (size_t o = 0; o < plan.outputs.size(); ++o) {
        const auto& [dt, n] = sizes[o];
        if (plan.block_of[o] >= 0) {
            outputs.emplace_back();
            out_ptr[o] = address(*blocks[static_cast<size_t>(plan.block_of[o])]);
        } else {
            outputs.push_back(runtime::make_buffer(dt, n, false, plan.device));
            out_ptr[o] = address(*outputs.back());
        }
    }
    const int dbg = debug_level();
    viz::CallTrace* const vc = dbg >= 2 ? viz::current_call() : nullptr;
    if (vc != nullptr) vc->timings.resize(plan.steps.size());
    if (dbg >= 2)
        std::fprintf(stderr, "*** %-32s %-7s %10s %10s %10s\n", "kernel", "backend", "ms",
                     "GFLOP/s", "GB/s");
    // The collectives in flight, by the output they write (waited for before a step reads it).
    std::vector<std::shared_ptr<void>> in_flight(plan.collectives ? plan.outputs.size() : 0);
    // The runner this run starts its collectives on, and waits on: read once. dist::finalize()
    // on another thread uninstalls it (the runtime object lives on, and fails what was in
    // flight); a ticket waited for through the global then dereferenced a null runner.
    CollectiveRunner* const runner = plan.collectives ? g_collective_runner.load() : nullptr;
    std::mutex in_flight_mu;
    auto wait_for = [&](const Step& s) {
        if (!plan.collectives) return;
        for (size_t p = s.outputs; p < s.params.size(); ++p) {
            if (s.params[p].input) continue;
            std::shared_ptr<void> t;
            {
                std::lock_guard<std::mutex> l(in_flight_mu);
                t = in_flight[s.params[p].index];
            }
            if (t) runner->wait(t);
        }
    };
    auto start_collective = [&](const Step& s) {
        if (runner == nullptr)
            fail("dist", "the graph has a collective, and no distributed runtime runs it (call "
                         "tempura::dist::init() first)");
        auto buffer = [&](const Slot& sl) {
            return sl.input ? inputs[sl.index] : outputs[sl.index];
        };
        std::shared_ptr<void> t = runner->start(s.collective, buffer(s.params[1]),
                                                buffer(s.params[0]), !s.ran->exchange(true));
        std::lock_guard<std::mutex> l(in_flight_mu);
        in_flight[s.params[0].index] = std::move(t);
    };
    auto run_step = [&](size_t i) {
        const Step& s = plan.steps[i];
        if (!s.collective.is_null()) {
            wait_for(s); // its source may be another collective's result
            return start_collective(s);
        }
        if (!s.kernel) return;
        wait_for(s);
        void* args[64];
        std::vector<void*> many;
        void** argv = args;
        if (s.params.size() > 64) {
            many.resize(s.params.size());
            argv = many.data();
        }
        size_t bytes = 0;
        for (size_t p = 0; p < s.params.size(); ++p) {
            const Slot& sl = s.params[p];
            if (sl.input) {
                argv[p] = address(*inputs[sl.index]);
                bytes += inputs[sl.index]->nbytes();
            } else {
                argv[p] = out_ptr[sl.index];
                bytes += slot_bytes(sizes[sl.index]);
            }
        }
        // The kernel's variables in its order (a few: no allocation); the core is per run.
        int64_t vars[8];
        if (s.vars.size() > 8) fail("realize", "internal: a kernel with more than 8 variables");
        size_t core_at = SIZE_MAX;
        for (size_t v = 0; v < s.vars.size(); ++v) {
            if (s.vars[v] == kCoreVar)
                core_at = v;
            else
                vars[v] = var_values[static_cast<size_t>(s.vars[v])];
        }
        const auto t0 = std::chrono::steady_clock::now();
        if (s.gpu) {
            std::array<int64_t, 3> grid = s.grid;
            for (size_t d = 0; d < 3; ++d)
                if (!s.grid_size[d].is_null()) grid[d] = evaluate(s.grid_size[d], values);
            if (runtime::is_cuda(plan.device))
                runtime::cuda_launch(*s.kernel, argv, vars, grid, s.block);
            else
                runtime::emu_launch(*s.kernel, argv, vars, grid, s.block);
        } else if (s.threads > 1) {
            runtime::parallel_for(static_cast<size_t>(s.threads), [&](size_t core) {
                int64_t mine[8];
                std::copy(vars, vars + s.vars.size(), mine);
                if (core_at != SIZE_MAX) mine[core_at] = static_cast<int64_t>(core);
                s.kernel->run(argv, mine);
            });
        } else {
            s.kernel->run(argv, vars);
        }
        if (dbg >= 1) {
            char buf[320];
            // A CUDA launch returns before the kernel ran: the timing waits for it.
            if (dbg >= 2 && runtime::is_cuda(plan.device))
                cuda::driver().context(runtime::cuda_ordinal(plan.device)).synchronize();
            if (dbg >= 2) {
                const double ms =
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
                const double gflops = ms > 0 ? s.flops / ms / 1e6 : 0.0;
                const double gbs = ms > 0 ? static_cast<double>(bytes) / ms / 1e6 : 0.0;
                std::snprintf(buf, sizeof buf,
                              "*** %-32s %-7s %10.4f %10.2f %10.2f  (compiled in %.2f ms)",
                              s.kernel->name().c_str(), runtime::device_name(plan.device).c_str(),
                              ms, gflops, gbs, s.kernel->compile_ms());
                if (vc != nullptr) vc->timings[i] = {s.kernel->name(), ms, gflops, gbs};
            } else {
                std::snprintf(buf, sizeof buf, "*** %-32s %s", s.kernel->name().c_str(),
                              runtime::device_name(plan.device).c_str());
            }
            std::fprintf(stderr, "%s\n", buf);
            if (dbg >= 4) std::fprintf(stderr, "%s\n", s.kernel->source().c_str());
        }
    };
    // Whatever happens, no collective is left writing into buffers this run may drop: after an
    // error the guard waits for them (their own errors are dropped, the first one is reported).
    auto wait_all = [&] {
        if (!plan.collectives) return;
        for (const std::shared_ptr<void>& t : in_flight)
            if (t) runner->wait(t);
    };
    struct Guard {
        const std::vector<std::shared_ptr<void>>& in_flight;
        CollectiveRunner* runner;
        bool dismissed = false; // wait_all() waited for every one
        ~Guard() {
            if (dismissed) return;
            for (const std::shared_ptr<void>& t : in_flight) {
                try {
                    if (t) runner->wait(t);
                } catch (...) {
                }
            }
        }
    };
    Guard guard{in_flight, runner};
    for (const auto& level : plan.levels) {
        size_t work = 0;
        bool threaded = false; // a kernel that runs on the pool itself: the level runs in order
        for (size_t i : level) {
            work += plan.steps[i].work;
            threaded = threaded || plan.steps[i].threads > 1 || plan.steps[i].gpu ||
                       !plan.steps[i].collective.is_null();
        }
        if (level.size() > 1 && work >= kParallelWork && runtime::thread_count() > 1 && !threaded)
            runtime::parallel_for(level.size(), [&](size_t j) { run_step(level[j]); });
        else
            for (size_t i : level) run_step(i);
    }
    wait_all();
    guard.dismissed = true; // each ticket is waited for once (a throw above leaves it armed)
}

LruCache<std::shared_ptr<const Plan>>& plans() {
    static auto* p = new LruCache<std::shared_ptr<const Plan>>; // outlives static destructors
    return *p;
}

// What a cached plan costs: its key, the kernels' texts it shows (KernelInfo), its steps, and the
// compiled kernels it keeps alive (their texts and JIT sections; a kernel also in a kernel cache
// is counted in both, so the sum never falls short of what the caches hold).
size_t plan_bytes(const std::string& key, const Plan& plan) {
    size_t n = key.size() + sizeof(Plan) + plan.steps.size() * (sizeof(Step) + 64);
    for (const KernelInfo& k : *plan.kernels)
        n += sizeof(KernelInfo) + k.name.size() + k.backend.size() + k.source.size();
    for (const Step& st : plan.steps) {
        n += st.params.size() * sizeof(Slot) + st.vars.size() * sizeof(int64_t);
        if (st.kernel) n += st.kernel->memory_bytes();
    }
    n += plan.outputs.size() * (sizeof(std::pair<DType, int64_t>) + sizeof(int64_t)) +
         plan.blocks.size() * sizeof(size_t);
    return n;
}

// The "becomes" map: a realized graph's root (by UOp id, unique for the process) -> the buffer
// holding its value, while that buffer lives. A later graph that contains the same node reads
// the buffer instead of computing it again. Weak: the map keeps neither nodes nor buffers alive;
// dead entries are dropped when the map has doubled since the last sweep.
class Becomes {
  public:
    void record(const UOp& root, const std::shared_ptr<runtime::Buffer>& b,
                const std::vector<UOp>& dims) {
        std::lock_guard<std::mutex> l(mu_);
        map_[root.id()] = Entry{b, root.shape(), dims};
        if (map_.size() >= sweep_at_) {
            std::erase_if(map_, [](const auto& kv) { return kv.second.buffer.expired(); });
            sweep_at_ = std::max<size_t>(256, 2 * map_.size());
        }
        size_.store(map_.size(), std::memory_order_relaxed);
    }
    // The graph with every node that has a live buffer replaced by RESHAPE(BUFFER); `held` keeps
    // those buffers alive until the caller is done. Returns root itself when nothing matched.
    UOp substitute(const UOp& root, const std::vector<UOp>& topo,
                   std::vector<std::shared_ptr<runtime::Buffer>>& held, int device) {
        if (size_.load(std::memory_order_relaxed) == 0) return root;
        std::unordered_map<const UOpNode*, UOp> repl;
        {
            std::lock_guard<std::mutex> l(mu_);
            // The root last in topological order: when it matched, nothing else is needed.
            for (auto t = topo.rbegin(); t != topo.rend(); ++t) {
                const UOp& u = *t;
                if (u.op() == Op::Buffer) continue;
                auto it = map_.find(u.id());
                if (it == map_.end()) continue;
                std::shared_ptr<runtime::Buffer> b = it->second.buffer.lock();
                if (!b || b->device() != device) continue; // computed on another device
                const UOp leaf = UOp::make(Op::Buffer, b->dtype(), it->second.dims,
                                           std::vector<int64_t>{b->id(), b->numel()});
                UOp view = UOp::make(Op::Reshape, b->dtype(), {leaf}, it->second.shape);
                held.push_back(std::move(b));
                if (u.same(root)) return view;
                repl.emplace(u.get(), std::move(view));
            }
        }
        return repl.empty() ? root : root.substitute(repl);
    }
    // The live buffer (and its dims) a realize of `root` itself left on `device`, if any: a
    // realized tensor read again (its loss after an optimizer's step) needs no graph walk.
    std::shared_ptr<runtime::Buffer> find(const UOp& root, int device, std::vector<UOp>& dims) {
        if (size_.load(std::memory_order_relaxed) == 0) return nullptr;
        std::lock_guard<std::mutex> l(mu_);
        auto it = map_.find(root.id());
        if (it == map_.end()) return nullptr;
        std::shared_ptr<runtime::Buffer> b = it->second.buffer.lock();
        if (!b || b->device() != device) return nullptr;
        dims = it->second.dims;
        return b;
    }
    void clear() {
        std::lock_guard<std::mutex> l(mu_);
        map_.clear();
        size_.store(0, std::memory_order_relaxed);
    }

  private:
    struct Entry {
        std::weak_ptr<runtime::Buffer> buffer;
        Shape shape;
        std::vector<UOp> dims; // symbolic dims (bound), or none
    };
    std::mutex mu_;
    std::unordered_map<uint64_t, Entry> map_;
    size_t sweep_at_ = 256;
    std::atomic<size_t> size_{0};
};

Becomes& becomes() {
    static auto* b = new Becomes; // outlives static destructors, like the caches
    return *b;
}

} // namespace

namespace {
std::mutex g_clearers_mu;
std::vector<void (*)()>& clearers() {
    static auto* c = new std::vector<void (*)()>;
    return *c;
}
} // namespace

void on_clear_caches(void (*clear)()) {
    std::lock_guard<std::mutex> lock(g_clearers_mu);
    clearers().push_back(clear);
}

void clear_caches() {
    std::vector<void (*)()> more;
    {
        std::lock_guard<std::mutex> lock(g_clearers_mu);
        more = clearers();
    }
    for (void (*clear)() : more) clear(); // outside the lock: a cache's values die there
    becomes().clear();
    plans().clear();
    runtime::clear_cpu_kernel_cache();
    runtime::clear_emu_kernel_cache();
    runtime::clear_cuda_kernel_cache();
    runtime::release_cached_blocks();
}

void set_collective_runner(CollectiveRunner* runner) { g_collective_runner.store(runner); }

PlanCacheStats plan_cache_stats() {
    const LruStats s = plans().stats();
    return PlanCacheStats{s.entries, s.bytes, s.evictions};
}

namespace {
// The cached plan of a graph (built and cached on a miss), and its BUFFER inputs in order.
std::shared_ptr<const Plan> plan_of(const UOp& graph, const std::vector<UOp>& topo,
                                    std::vector<UOp>& input_nodes, const SymbolicShapes& sym,
                                    int device) {
    std::string key = plan_key(topo, input_nodes, sym, device);
    if (auto hit = plans().find(key)) {
        if (viz::CallTrace* vc = viz::current_call()) {
            vc->cached = true;
            for (const KernelInfo& k : *(*hit)->kernels) vc->cached_kernels.push_back(k.name);
        }
        return std::move(*hit);
    }
    auto built = std::make_shared<const Plan>(build_plan(graph, input_nodes, sym, device));
    return plans().insert(key, built, plan_bytes(key, *built));
}

// DETACH and CUSTOM_GRAD only steer autograd; the value of each is its first source's, so the
// scheduler never sees them (nor a CUSTOM_GRAD's derivative, which only a backward pass reads).
// Returns whether the graph had any (then root and topo are the graph without them).
bool strip_detach(UOp& root, std::vector<UOp>& topo) {
    const auto marker = [](const UOp& u) {
        return u.op() == Op::Detach || u.op() == Op::CustomGrad;
    };
    bool any = false;
    for (const UOp& u : topo) any = any || marker(u);
    if (!any) return false;
    // Only the nodes above a DETACH change (an optimizer's update reads its parameters through
    // one; the forward and backward graphs under it have none): the rest are kept as they are,
    // without rebuilding the whole graph of a training step every step.
    std::unordered_map<const UOpNode*, UOp> changed;
    std::vector<UOp> srcs;
    for (const UOp& u : topo) {
        if (marker(u)) {
            const auto it = changed.find(u.src(0).get());
            changed.emplace(u.get(), it == changed.end() ? u.src(0) : it->second);
            continue;
        }
        bool moved = false;
        for (const UOp& s : u.srcs()) moved = moved || changed.count(s.get()) != 0;
        if (!moved) continue;
        srcs.clear();
        for (const UOp& s : u.srcs()) {
            const auto it = changed.find(s.get());
            srcs.push_back(it == changed.end() ? s : it->second);
        }
        changed.emplace(u.get(), with_srcs(u, srcs));
    }
    root = changed.at(root.get()); // the root is above every node, a DETACH among them
    topo = root.toposort();
    return true;
}
} // namespace

PlanMemory plan_memory(const UOp& graph) {
    UOp root = graph;
    if (root.op() == Op::Buffer) return {};
    std::vector<UOp> input_nodes;
    std::vector<UOp> topo = root.toposort();
    strip_detach(root, topo);
    return plan_of(root, topo, input_nodes, infer_symbolic_shapes(topo),
                   runtime::default_device_index())
        ->memory;
}

std::vector<RealizeResult> realize_graphs(const std::vector<UOp>& roots, int device) {
    std::vector<RealizeResult> results(roots.size());
    if (roots.empty()) return results;
    if (device < 0) device = runtime::default_device_index();
    runtime::device_name(device); // checks it
    // Kernels are built with no user call site: their nodes keep the locations their builders
    // pass on (lowering passes on the tensor node's, which names the user's line).
    const CallSiteOverride no_site(nullptr);
    viz::CallScope viz_call; // TEMPURA_VIZ: this call's trace, added to the page at the end
    // Shared work computed once: what an earlier realize computed is read from its buffer.
    std::vector<std::shared_ptr<runtime::Buffer>> held;
    if (roots.size() == 1 && roots[0].op() != Op::Buffer)
        if (auto b = becomes().find(roots[0], device, results[0].dims)) {
            results[0].buffer = std::move(b);
            return results;
        }
    UOp all = roots.size() == 1 ? roots[0] : UOp::sink(roots);
    std::vector<UOp> original_topo = all.toposort();
    strip_detach(all, original_topo); // (a DETACH of a buffer is that buffer, below)
    const UOp substituted = becomes().substitute(all, original_topo, held, device);
    // Roots that are buffers, or were realized before, need no kernel.
    std::vector<UOp> todo;
    std::vector<size_t> where;
    for (size_t i = 0; i < roots.size(); ++i) {
        const UOp& g = roots.size() == 1 ? substituted : substituted.src(i);
        if (g.op() == Op::Buffer) {
            results[i].buffer = runtime::lookup_buffer(g.arg_as<std::vector<int64_t>>().at(0));
            continue;
        }
        // A buffer an earlier realize computed, or a reshape of one (a reshape of a realized
        // tensor made before it was realized: RESHAPE(RESHAPE(BUFFER))): the same memory.
        UOp leaf = g;
        while (leaf.op() == Op::Reshape) leaf = leaf.src(0);
        if (g.op() == Op::Reshape && leaf.op() == Op::Buffer) {
            results[i].buffer = runtime::lookup_buffer(leaf.arg_as<std::vector<int64_t>>().at(0));
            results[i].dims = leaf.srcs();
            continue;
        }
        todo.push_back(g);
        where.push_back(i);
    }
    if (todo.empty()) return results;
    const UOp graph = todo.size() == 1 ? todo[0] : UOp::sink(todo);
    const std::vector<UOp> topo = graph.same(all) ? std::move(original_topo) : graph.toposort();
    std::vector<UOp> input_nodes;
    const SymbolicShapes sym = infer_symbolic_shapes(topo);
    // Every input on the device, checked before a plan is built for the graph.
    for (const UOp& u : topo)
        if (u.op() == Op::Buffer) {
            const int d = runtime::lookup_buffer(u.arg_as<std::vector<int64_t>>().at(0))->device();
            if (d != device) fail("realize", runtime::different_devices(d, device));
        }
    const std::shared_ptr<const Plan> plan = plan_of(graph, topo, input_nodes, sym, device);
    std::vector<std::shared_ptr<runtime::Buffer>> inputs, outputs;
    inputs.reserve(input_nodes.size());
    for (const UOp& b : input_nodes)
        inputs.push_back(runtime::lookup_buffer(b.arg_as<std::vector<int64_t>>().at(0)));
    run_plan(*plan, inputs, outputs, sym.values);
    for (size_t j = 0; j < todo.size(); ++j) {
        RealizeResult& r = results[where[j]];
        const Slot& slot = plan->results.at(j);
        r.buffer = slot.input ? inputs[slot.index] : outputs[slot.index];
        r.kernels = plan->kernels;
        if (auto d = sym.dims.find(todo[j]); d != sym.dims.end())
            for (const UOp& x : d->second) r.dims.push_back(sym.bound(x));
        becomes().record(roots[where[j]], r.buffer, r.dims);
    }
    viz_call.finish();
    return results;
}

RealizeResult realize_graph(const UOp& root, int device) {
    return std::move(realize_graphs({root}, device)[0]);
}

} // namespace tempura
