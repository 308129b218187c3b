// realize_graph: schedule, lower, compile (cached), allocate, run.
#include "tempura/schedule/realize.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "tempura/codegen/stages.hpp"
#include "tempura/error.hpp"
#include "tempura/runtime/buffer.hpp"
#include "tempura/runtime/cpu.hpp"
#include "tempura/schedule/schedule.hpp"
#include "tempura/tensor/graph.hpp"

namespace tempura {

namespace {
int debug_level() {
    const char* e = std::getenv("TEMPURA_DEBUG");
    return e ? std::atoi(e) : 0;
}
} // namespace

RealizeResult realize_graph(const UOp& root) {
    const int dbg = debug_level();
    RealizeResult result;
    if (root.op() == Op::Buffer) {
        result.buffer = runtime::lookup_buffer(root.arg_as<std::vector<int64_t>>().at(0));
        return result;
    }
    std::vector<ScheduledKernel> kernels = schedule_graph(root);
    UOpMap<std::shared_ptr<runtime::Buffer>> buffers;
    auto buffer_of = [&](const UOp& node) -> std::shared_ptr<runtime::Buffer> {
        if (node.op() == Op::Buffer)
            return runtime::lookup_buffer(node.arg_as<std::vector<int64_t>>().at(0));
        auto it = buffers.find(node);
        if (it == buffers.end())
            fail("realize", "internal: no buffer for " + std::string(op_name(node.op())));
        return it->second;
    };
    for (const ScheduledKernel& k : kernels) {
        const Shape shape = tensor_shape(k.output);
        auto out = runtime::make_buffer(k.output.dtype(), numel(shape));
        buffers.emplace(k.output, out);
        if (k.ast.is_null()) continue; // an empty output: nothing to compute
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<UOp> program = codegen::lower_kernel(k.name, k.ast);
        auto compiled = runtime::compile_cpu_kernel(k.name, program);
        std::vector<std::shared_ptr<runtime::Buffer>> held;
        std::vector<void*> args;
        for (const UOp& p : k.params) {
            held.push_back(buffer_of(p));
            args.push_back(held.back()->data());
        }
        const auto t1 = std::chrono::steady_clock::now();
        compiled->run(args.data(), nullptr);
        const auto t2 = std::chrono::steady_clock::now();
        if (dbg >= 1) {
            std::fprintf(stderr, "*** CPU  %-24s", k.name.c_str());
            if (dbg >= 2) {
                const double run_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
                const double prep_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
                size_t bytes = 0;
                for (const auto& b : held) bytes += b->nbytes();
                std::fprintf(stderr, "  run %8.3f ms  lower+compile %7.3f ms  %7.2f GB/s", run_ms,
                             prep_ms, run_ms > 0 ? bytes / run_ms / 1e6 : 0.0);
            }
            std::fprintf(stderr, "\n");
            if (dbg >= 4) std::fprintf(stderr, "%s\n", compiled->source().c_str());
        }
        result.kernels.push_back(KernelInfo{k.name, "CPU", compiled->source()});
    }
    result.buffer = buffer_of(root);
    return result;
}

} // namespace tempura
