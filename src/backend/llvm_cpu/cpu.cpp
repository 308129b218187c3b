// The CPU backend: render (llvm/render.cpp) -> optimize with the host's TargetMachine (a short
// pipeline for expanded kernels, O2 for the others) -> ORC LLJIT.
//
// One LLJIT serves the whole process, created on first use from JITTargetMachineBuilder::
// detectHost(), which carries the host CPU and its features (without them LLVM emits SSE only).
// Every function gets those as "target-cpu"/"target-features" attributes, so the optimizer's
// TargetTransformInfo (and the loop vectorizer with it) sees AVX-512 where the host has it.
// Compiled kernels are cached by the structure of the program, not by UOp identity.
#include "tempura/backend/llvm_cpu.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/ExecutorProcessControl.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/TaskDispatch.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/OptimizationLevel.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CodeGen.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/Transforms/InstCombine/InstCombine.h>
#include <llvm/Transforms/Scalar/EarlyCSE.h>
#include <llvm/Transforms/Scalar/GVN.h>
#include <llvm/Transforms/Scalar/LICM.h>
#include <llvm/Transforms/Scalar/LoopPassManager.h>
#include <llvm/Transforms/Scalar/LoopRotation.h>
#include <llvm/Transforms/Scalar/SROA.h>
#include <llvm/Transforms/Scalar/SimplifyCFG.h>

#include "backend/llvm_cpu/render.hpp"
#include "tempura/error.hpp"
#include "tempura/runtime/thread_pool.hpp"
#include "tempura/support/lru_cache.hpp"

namespace tempura::llvm_backend {

namespace {

// The passes an expanded kernel needs, and no more (O2 runs some 90 passes, most of which find
// nothing in a kernel the codegen already simplified, vectorized and unrolled): registers
// (DEFINE_REG allocas) become SSA values, loops are rotated so the test sits at the bottom,
// invariant address arithmetic leaves the loops, and redundant loads and expressions go.
// Measured on the MLP's five kernels: the first realize 45 -> 28 ms, the warm forward pass the
// same (0.11 ms), as were bench_opt's and bench_nn's kernels.
llvm::ModulePassManager light_pipeline() {
    llvm::FunctionPassManager f;
    f.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
    f.addPass(llvm::EarlyCSEPass(/*UseMemorySSA=*/true));
    f.addPass(llvm::SimplifyCFGPass());
    f.addPass(llvm::createFunctionToLoopPassAdaptor(llvm::LoopRotatePass()));
    f.addPass(llvm::InstCombinePass());
    f.addPass(llvm::createFunctionToLoopPassAdaptor(llvm::LICMPass(llvm::LICMOptions()),
                                                    /*UseMemorySSA=*/true));
    f.addPass(llvm::GVNPass());
    f.addPass(llvm::SimplifyCFGPass());
    llvm::ModulePassManager m;
    m.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(f)));
    return m;
}

// A long kernel's passes (kLongKernelOps): SROA alone, so that the renderer's accumulators become
// registers; nothing else runs over a block whose every pass costs more than it will ever run.
llvm::ModulePassManager long_pipeline() {
    llvm::FunctionPassManager f;
    f.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
    llvm::ModulePassManager m;
    m.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(f)));
    return m;
}

// FastISel, the instruction selector at CodeGenOptLevel::None, cannot materialize a vector
// constant: at the first one it meets (it selects from the bottom) it hands the rest of the block
// to SelectionDAG, several times slower. A long kernel is one block of straight-line code, so
// each vector constant becomes one `freeze` of it in the entry block, a value FastISel reads
// from a register (llc -O0 on a chain of 20,000 vector adds: 0.26 -> 0.10 s). A floating-point
// scalar constant too: FastISel loads it from the constant pool at each use (the emulator's
// per-thread program of 100,000 scalar adds of 1.0: 0.72 -> 0.35 s). Runs after the passes,
// none of which may fold the freeze back.
void constants_in_registers(llvm::Function& f) {
    llvm::BasicBlock& entry = f.getEntryBlock();
    llvm::IRBuilder<> eb(entry.getTerminator());
    llvm::DenseMap<llvm::Constant*, llvm::Value*> frozen;
    for (llvm::BasicBlock& bb : f) {
        if (&bb == &entry) continue;
        for (llvm::Instruction& inst : bb) {
            auto* call = llvm::dyn_cast<llvm::CallBase>(&inst);
            for (unsigned k = 0; k < inst.getNumOperands(); ++k) {
                auto* c = llvm::dyn_cast<llvm::Constant>(inst.getOperand(k));
                if (c == nullptr ||
                    !(c->getType()->isVectorTy() || c->getType()->isFloatingPointTy()) ||
                    llvm::isa<llvm::UndefValue>(c) || llvm::isa<llvm::ConstantExpr>(c))
                    continue;
                if (call != nullptr &&
                    (k >= call->arg_size() || call->paramHasAttr(k, llvm::Attribute::ImmArg)))
                    continue;
                auto [it, fresh] = frozen.try_emplace(c, nullptr);
                if (fresh) it->second = eb.CreateFreeze(c);
                inst.setOperand(k, it->second);
            }
        }
    }
}

} // namespace

// `expanded`: the codegen's expander already vectorized and unrolled the kernel (it has vector
// dtypes). LLVM's own loop vectorizer and unroller then only add compile time (a fully unrolled
// reduce loop of 16 accumulators took ~100 ms to compile) and code size.
// The SLP vectorizer never runs: LLVM 19's miscompiles (llvm-project issue 117170, a shuffle
// that reads a poison lane where a reused scalar's lane belongs; found by the differential
// fuzzer in a fully unrolled 4 x 3 x 2 kernel, 6 of 24 elements wrong). Loops are vectorized by
// the codegen's expander or LLVM's loop vectorizer; what SLP added was straight-line code of
// tiny kernels.
void optimize(llvm::Module& m, llvm::TargetMachine& tm, bool expanded) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto; // vectorizers are off unless asked for (clang asks at O2)
    pto.LoopVectorization = !expanded;
    pto.SLPVectorization = false; // see above
    pto.LoopUnrolling = !expanded;
    llvm::PassBuilder pb(&tm, pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    // The GPU's kernels keep O2, whose NVPTX passes (address-space inference and others) the
    // target adds to it; kernels LLVM should vectorize itself keep it too.
    // Long straight-line code (a deep elementwise chain, on either target: EMU's per-thread
    // programs are scalar, so not `expanded`) gets long_pipeline(): SROA alone.
    size_t instructions = 0;
    for (const llvm::Function& f : m) instructions += f.getInstructionCount();
    llvm::ModulePassManager mpm =
        instructions > kLongKernelOps ? long_pipeline()
        : expanded && tm.getTargetTriple().isX86()
            ? light_pipeline()
            : pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
    mpm.run(m, mam);
}

} // namespace tempura::llvm_backend

namespace tempura::runtime {

CompiledKernel::CompiledKernel(std::string name, std::string symbol, std::string source,
                               double compile_ms, EntryFn entry, size_t buffer_count,
                               size_t var_count, std::shared_ptr<const void> code,
                               size_t shared_bytes, bool barriers, size_t code_bytes)
    : name_(std::move(name)), symbol_(std::move(symbol)), source_(std::move(source)),
      compile_ms_(compile_ms), entry_(entry), buffer_count_(buffer_count), var_count_(var_count),
      code_(std::move(code)), shared_bytes_(shared_bytes), barriers_(barriers),
      code_bytes_(code_bytes) {}

CompiledKernel::~CompiledKernel() = default;

namespace {

std::string to_string(llvm::Error e) { return llvm::toString(std::move(e)); }

// ---- the process-wide JIT -----------------------------------------------------------------------

// float -> bfloat, rounded to nearest even (a NaN stays a quiet NaN), returned as LLVM's libcall
// __truncsfbf2 returns it on x86-64: the 16 bits in the low half of xmm0. LLVM calls it for bfloat
// arithmetic and casts where the CPU lacks AVX512-BF16, and libgcc 12 does not define it: without
// this definition the JIT cannot link such kernels.
float truncsfbf2(float x) {
    uint32_t b = 0;
    std::memcpy(&b, &x, sizeof b);
    b = x != x ? (b | 0x00400000u) >> 16 : (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
    float out = 0;
    std::memcpy(&out, &b, sizeof out);
    return out;
}

// The runtime functions kernels may call that the process does not export.
void define_runtime_symbols(llvm::orc::LLJIT& jit) {
    llvm::orc::SymbolMap syms;
    syms[jit.mangleAndIntern("__truncsfbf2")] = {llvm::orc::ExecutorAddr::fromPtr(&truncsfbf2),
                                                 llvm::JITSymbolFlags::Exported |
                                                     llvm::JITSymbolFlags::Callable};
    if (auto err = jit.getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(syms))))
        fail("cpu", "cannot define the JIT's runtime symbols: " + to_string(std::move(err)));
}

// What the JIT reported while this thread's lookup materialized a module (ORC materializes on
// the thread that looks the symbol up: there are no compile threads).
thread_local std::string t_session_error;
// The size of the object file this thread's lookup generated last (the same reason).
thread_local size_t t_object_bytes = 0;

// What the JIT holds for a module whose object file has `object` bytes: JITLink copies its
// sections (a part of the file) into page-aligned segments (code, read-only data with the unwind
// tables, writable data: each rounded up to a page), and keeps per module the symbol tables, the
// resource tracker and the registration of the unwind tables (kJitRecordBytes, measured: RSS
// growth per live module minus its sections, about 10 KB here).
constexpr size_t kPageBytes = 4096;
constexpr size_t kJitRecordBytes = 12 * 1024;
size_t jit_bytes(size_t object) {
    return (object + kPageBytes - 1) / kPageBytes * kPageBytes + 2 * kPageBytes + kJitRecordBytes;
}

// Kernels compile concurrently: each thread renders into its own LLVMContext, optimizes with a
// TargetMachine of its own (taken from `idle_tms`; one is not shared safely) and has ORC, built
// for concurrent compilation, generate code on its own thread.
struct Jit {
    std::unique_ptr<llvm::orc::LLJIT> lljit;
    std::unique_ptr<llvm::orc::JITTargetMachineBuilder> jtmb; // makes the optimizers' machines
    std::unique_ptr<llvm::TargetMachine> tm; // the data layout and triple (const use only)
    std::string cpu, features;
    std::mutex tm_mu; // guards idle_tms
    std::vector<std::unique_ptr<llvm::TargetMachine>> idle_tms;
    std::atomic<uint64_t> next_id{0};
    std::atomic<size_t> live_modules{0};

    // A TargetMachine for one thread's optimization, given back by the returned handle.
    std::shared_ptr<llvm::TargetMachine> take_tm() {
        std::unique_ptr<llvm::TargetMachine> m;
        {
            std::lock_guard<std::mutex> l(tm_mu);
            if (!idle_tms.empty()) {
                m = std::move(idle_tms.back());
                idle_tms.pop_back();
            }
        }
        if (!m) {
            auto made = jtmb->createTargetMachine();
            if (!made) fail("cpu", "cannot create a TargetMachine: " + to_string(made.takeError()));
            m = std::move(*made);
        }
        return std::shared_ptr<llvm::TargetMachine>(m.release(), [this](llvm::TargetMachine* t) {
            std::lock_guard<std::mutex> l(tm_mu);
            idle_tms.emplace_back(t);
        });
    }
};

constexpr const char* kCodegenLevelFlag = "tempura.codegen-level";
// Below this many lane-operations (about 16,000 AVX-512 instructions) a kernel is small.
constexpr double kSmallKernelLanes = 262144;

// The code generator's level for a module: compile_uncached's choice, in a module flag.
llvm::CodeGenOptLevel codegen_level(const llvm::Module& m) {
    if (auto* c =
            llvm::mdconst::extract_or_null<llvm::ConstantInt>(m.getModuleFlag(kCodegenLevelFlag)))
        if (auto level = llvm::CodeGenOpt::getLevel(static_cast<int>(c->getZExtValue())))
            return *level;
    return llvm::CodeGenOptLevel::Default;
}

// A kernel's dynamic work: each operation's lanes times the trip counts of the loops around it
// (a loop whose end is not a constant counts its bound).
double dynamic_lanes(const std::vector<UOp>& linear) {
    std::vector<double> trips{1.0};
    double work = 0;
    for (const UOp& u : linear) {
        if (u.op() == Op::Range) {
            trips.push_back(trips.back() *
                            static_cast<double>(std::max<int64_t>(1, u.src(0).vmax())));
        } else if (u.op() == Op::End) {
            for (size_t i = 1; i < u.srcs().size() && trips.size() > 1; ++i) trips.pop_back();
        } else {
            work += trips.back() * u.dtype().count;
        }
    }
    return work;
}

// ORC's code generation with a TargetMachine from the Jit's pool (its ConcurrentIRCompiler makes a
// new machine for every module, which cost several ms per kernel).
class PooledCompiler : public llvm::orc::IRCompileLayer::IRCompiler {
  public:
    PooledCompiler(Jit& j, const llvm::TargetOptions& opts)
        : IRCompiler(llvm::orc::irManglingOptionsFromTargetOptions(opts)), j_(j) {}
    llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> operator()(llvm::Module& m) override {
        const std::shared_ptr<llvm::TargetMachine> tm = j_.take_tm();
        tm->setOptLevel(codegen_level(m));
        llvm::orc::SimpleCompiler compile(*tm);
        auto out = compile(m);
        if (out) t_object_bytes = (*out)->getBufferSize();
        tm->setOptLevel(llvm::CodeGenOptLevel::Default);
        return out;
    }

  private:
    Jit& j_;
};

Jit* make_jit() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) fail("cpu", "cannot describe the host for the JIT: " + to_string(jtmb.takeError()));
    jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);
    auto j = std::make_unique<Jit>();
    j->cpu = jtmb->getCPU();
    j->features = jtmb->getFeatures().getString();
    auto tm = jtmb->createTargetMachine();
    if (!tm) fail("cpu", "cannot create the host TargetMachine: " + to_string(tm.takeError()));
    j->tm = std::move(*tm);
    j->jtmb = std::make_unique<llvm::orc::JITTargetMachineBuilder>(*jtmb);
    // Process symbols (sinf, exp2f, fmodf, memset, ...) are linked by default.
    Jit* raw = j.get();
    // Materialization runs on the thread that looks the kernel up (an in-place dispatcher: ORC
    // would otherwise start a thread per compile), and may run on several threads at once.
    auto epc = llvm::orc::SelfExecutorProcessControl::Create(
        nullptr, std::make_unique<llvm::orc::InPlaceTaskDispatcher>());
    if (!epc) fail("cpu", "cannot create the JIT's executor: " + to_string(epc.takeError()));
    auto lljit =
        llvm::orc::LLJITBuilder()
            .setJITTargetMachineBuilder(std::move(*jtmb))
            .setExecutorProcessControl(std::move(*epc))
            .setSupportConcurrentCompilation(true)
            .setCompileFunctionCreator(
                [raw](llvm::orc::JITTargetMachineBuilder b)
                    -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
                    return std::make_unique<PooledCompiler>(*raw, b.getOptions());
                })
            .create();
    if (!lljit) fail("cpu", "cannot create the ORC JIT: " + to_string(lljit.takeError()));
    j->lljit = std::move(*lljit);
    define_runtime_symbols(*j->lljit);
    // ORC reports the cause of a failed materialization (an unresolved symbol, ...) here rather
    // than in the lookup's error: keep it for our exception instead of printing it.
    // (g++ 12 with -fsanitize=thread warns falsely inside llvm::unique_function here.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
    j->lljit->getExecutionSession().setErrorReporter([](llvm::Error e) {
        if (!t_session_error.empty()) t_session_error += "; ";
        t_session_error += llvm::toString(std::move(e));
    });
#pragma GCC diagnostic pop
    return j.release();
}

// Never destroyed: kernels may run until the process ends, and LLVM's own statics go away at
// exit in an order we do not control. (A static pointer keeps it reachable for LeakSanitizer.)
Jit& jit() {
    static Jit* j = make_jit(); // thread-safe initialization; a throw is retried on next use
    return *j;
}

std::shared_ptr<const CompiledKernel> compile_uncached(const std::string& name,
                                                       const std::vector<UOp>& linear,
                                                       llvm_backend::Target target) {
    Jit& j = jit();
    const auto t0 = std::chrono::steady_clock::now();
    const std::string symbol =
        "tempura_" + llvm_backend::sanitize(name) + "_" + std::to_string(j.next_id++);

    auto ctx = std::make_unique<llvm::LLVMContext>();
    auto mod = std::make_unique<llvm::Module>(symbol, *ctx);
    mod->setDataLayout(j.tm->createDataLayout());
    mod->setTargetTriple(j.tm->getTargetTriple().str());

    llvm_backend::RenderInfo info;
    llvm::Function* fn = llvm_backend::render_kernel(*mod, symbol, name, linear, info, target);
    fn->addFnAttr("target-cpu", j.cpu);
    fn->addFnAttr("target-features", j.features);
    // Intel's tuning (Sapphire Rapids and others) asks LLVM's vectorizers for 256-bit vectors
    // even with AVX-512; the expander already writes 512-bit ones on such hosts, so LLVM's own
    // vectorizer is told the same width, and a kernel compiles alike on AMD and Intel hosts.
    if (j.features.find("+avx512f") != std::string::npos)
        fn->addFnAttr("prefer-vector-width", "512");

    std::string problems;
    llvm::raw_string_ostream ps(problems);
    if (llvm::verifyModule(*mod, &ps))
        fail("cpu", "kernel '" + name + "' renders to invalid LLVM IR (a value used outside the " +
                        "block that defines it?): " + ps.str());

    bool expanded = false;
    for (const UOp& u : linear) expanded = expanded || u.dtype().count > 1;
    // A small kernel (a few microseconds of work) is generated without the code generator's
    // optimizations (instruction selection without DAG combining, the fast register allocator):
    // it halves the generation time, and what the kernel loses at run time is a microsecond or
    // two. The MLP's first realize: 28 -> 24 ms, its three softmax kernels being small.
    const bool long_kernel = linear.size() > llvm_backend::kLongKernelOps;
    const bool small = dynamic_lanes(linear) < kSmallKernelLanes || long_kernel;
    mod->addModuleFlag(llvm::Module::Warning, kCodegenLevelFlag,
                       static_cast<uint32_t>(small ? llvm::CodeGenOptLevel::None
                                                   : llvm::CodeGenOptLevel::Default));
    llvm_backend::optimize(*mod, *j.take_tm(), expanded);
    if (long_kernel) llvm_backend::constants_in_registers(*fn);
    // A CPU kernel's source is its IR. The emulator's shows its PTX instead (compile_emu_kernel):
    // the host program's text would be thrown away (on a long kernel, a tenth of the compile).
    std::string source;
    if (target != llvm_backend::Target::Emu) {
        llvm::raw_string_ostream os(source);
        mod->print(os, nullptr);
        os.flush();
    }

    llvm::orc::ThreadSafeModule tsm(std::move(mod), llvm::orc::ThreadSafeContext(std::move(ctx)));
    // One resource tracker per kernel: removing it frees the kernel's machine code, which the
    // owner handle below does when the last CompiledKernel sharing the code goes away.
    llvm::orc::ResourceTrackerSP rt = j.lljit->getMainJITDylib().createResourceTracker();
    // Straight to the IR transform layer: LLJIT::addIRModule's layer, under concurrent
    // compilation, first copies every module into a new LLVMContext (through bitcode, written
    // and parsed again), which a module made in a context of its own does not need: on a long
    // kernel that copy was 45% of the JIT's time. (That layer's other work, running a module's
    // static initializers, has nothing to do: kernels have none. Its data layout check: the
    // module's is the JIT's own, set above.)
    if (auto e = j.lljit->getIRTransformLayer().add(rt, std::move(tsm))) {
        llvm::consumeError(rt->remove());
        fail("cpu",
             "kernel '" + name + "': the JIT rejected the module: " + to_string(std::move(e)));
    }
    t_session_error.clear();
    t_object_bytes = 0;
    auto addr = j.lljit->lookup(symbol); // machine code is generated here
    if (!addr) {
        const std::string why = to_string(addr.takeError());
        llvm::consumeError(rt->remove());
        fail("cpu", "kernel '" + name + "': JIT compilation failed: " + why +
                        (t_session_error.empty() ? "" : " (" + t_session_error + ")"));
    }
    j.live_modules.fetch_add(1, std::memory_order_relaxed);
    std::shared_ptr<const void> code(new llvm::orc::ResourceTrackerSP(rt), [](const void* p) {
        auto* tracker = static_cast<const llvm::orc::ResourceTrackerSP*>(p);
        Jit& jj = jit();
        llvm::consumeError((*tracker)->remove()); // ORC's own session lock
        jj.live_modules.fetch_sub(1, std::memory_order_relaxed);
        delete tracker;
    });
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return std::make_shared<const CompiledKernel>(
        name, symbol, std::move(source), ms, addr->toPtr<CompiledKernel::EntryFn>(),
        info.buffer_count, info.var_count, std::move(code), info.shared_bytes, info.barriers,
        jit_bytes(t_object_bytes));
}

// ---- the kernel cache -------------------------------------------------------------------------

struct Cache {
    LruCache<std::shared_ptr<const CompiledKernel>> kernels;
    std::atomic<size_t> hits{0}, misses{0};
};
Cache& cache() {
    static Cache* c = new Cache(); // outlives every static that might still run kernels at exit
    return *c;
}

// A hit under another name: the same machine code, the caller's name.
std::shared_ptr<const CompiledKernel> renamed(const std::shared_ptr<const CompiledKernel>& k,
                                              const std::string& name) {
    if (k->name() == name) return k;
    return std::make_shared<const CompiledKernel>(
        name, k->symbol(), k->source(), k->compile_ms(), k->entry(), k->buffer_count(),
        k->var_count(), k->code(), k->shared_bytes(), k->barriers(), k->code_bytes());
}

} // namespace

std::shared_ptr<const CompiledKernel> compile_for_host(const std::string& name,
                                                       const std::vector<UOp>& linear,
                                                       llvm_backend::Target target) {
    const bool emu = target == llvm_backend::Target::Emu;
    std::string key = (emu ? "emu:" : "cpu:") + structure_key(linear, emu ? "emu" : "cpu");
    Cache& c = cache();
    if (auto hit = c.kernels.find(key)) {
        ++c.hits;
        return renamed(*hit, name);
    }
    // Compiles run outside the cache lock, concurrently with each other; two threads
    // racing on one new program both compile, and the first to finish is kept.
    auto k = compile_uncached(name, linear, target);
    ++c.misses;
    // What an entry costs: its key, and what the kernel holds (its IR text, the JIT's sections).
    const size_t bytes = key.size() + k->memory_bytes();
    return renamed(c.kernels.insert(key, k, bytes), name);
}

std::shared_ptr<const CompiledKernel> compile_cpu_kernel(const std::string& name,
                                                         const std::vector<UOp>& linear) {
    return compile_for_host(name, linear, llvm_backend::Target::Cpu);
}

CpuCacheStats cpu_kernel_cache_stats() {
    Cache& c = cache();
    const LruStats s = c.kernels.stats();
    return CpuCacheStats{c.hits.load(), c.misses.load(), s.entries,
                         s.bytes,       s.evictions,     jit().live_modules.load()};
}

void clear_cpu_kernel_cache() { cache().kernels.clear(); }

codegen::DeviceLimits host_limits() {
    static const codegen::DeviceLimits lim = [] {
        codegen::DeviceLimits l;
        const std::string f = host_cpu_features();
        l.vector_bytes = f.find("+avx512f") != std::string::npos ? 64
                         : f.find("+avx2") != std::string::npos  ? 32
                                                                 : 16;
        l.threads = static_cast<int64_t>(thread_count());
        l.name = "CPU:" + host_cpu_name();
        return l;
    }();
    return lim;
}

std::string host_cpu_name() { return jit().cpu; }
std::string host_cpu_features() { return jit().features; }

} // namespace tempura::runtime
