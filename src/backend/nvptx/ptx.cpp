// GPU programs -> PTX: the shared renderer (src/backend/llvm_cpu/render.cpp, Target::Nvptx), LLVM's
// O2 pipeline with the NVPTX TargetMachine (its NVVM reflection and address-space inference
// included), then the NVPTX code generator, all in process.
#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/DiagnosticHandler.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/CodeGen.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include "backend/llvm_cpu/render.hpp"
#include "tempura/backend/gpu.hpp"
#include "tempura/error.hpp"

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace tempura::runtime {

namespace {

constexpr const char* kTriple = "nvptx64-nvidia-cuda";

const llvm::Target& nvptx_target() {
    static const llvm::Target* t = [] {
        LLVMInitializeNVPTXTargetInfo();
        LLVMInitializeNVPTXTarget();
        LLVMInitializeNVPTXTargetMC();
        LLVMInitializeNVPTXAsmPrinter();
        std::string err;
        const llvm::Target* found = llvm::TargetRegistry::lookupTarget(kTriple, err);
        if (found == nullptr) fail("nvptx", "LLVM has no NVPTX target: " + err);
        return found;
    }();
    return *t;
}

} // namespace

int64_t shared_alignment(const UOp& define_local) {
    const auto& a = define_local.arg_as<std::vector<int64_t>>();
    return a.size() > 2 ? a[2] : 16;
}

int64_t place_shared(int64_t& used, const UOp& define_local, int64_t bytes) {
    const int64_t align = shared_alignment(define_local);
    const int64_t at = (used + align - 1) / align * align;
    used = at + (bytes + 15) / 16 * 16;
    return at;
}

bool uses_wgmma(const std::vector<UOp>& linear) {
    return std::any_of(linear.begin(), linear.end(),
                       [](const UOp& u) { return !u.is_null() && u.op() == Op::Wgmma; });
}

int64_t dynamic_shared_bytes(const std::vector<UOp>& linear) {
    int64_t total = 0;
    for (const UOp& u : linear)
        if (u.op() == Op::DefineLocal)
            place_shared(total, u,
                         u.arg_as<std::vector<int64_t>>().at(0) * u.dtype().base().itemsize());
    return total > kStaticSharedBytes ? total : 0;
}

namespace {

constexpr size_t kPtxBlockOps = 4096;

void split_long_blocks(llvm::Module& mod) {
    for (llvm::Function& f : mod) {
        std::vector<llvm::BasicBlock*> blocks;
        for (llvm::BasicBlock& bb : f) blocks.push_back(&bb);
        for (llvm::BasicBlock* bb : blocks) {
            const size_t n = bb->size(); // (a walk over the block)
            if (n <= 2 * kPtxBlockOps) continue;
            // Split from the back, each split moving one piece (from the front, each would move
            // the whole rest of the block again).
            std::vector<llvm::Instruction*> at;
            size_t i = 0;
            for (llvm::Instruction& inst : *bb)
                if (++i % kPtxBlockOps == 0 && i + kPtxBlockOps / 2 < n &&
                    !llvm::isa<llvm::PHINode>(inst))
                    at.push_back(&inst);
            for (auto it = at.rbegin(); it != at.rend(); ++it)
                bb->splitBasicBlock(*it); // from *it on: a new block, branched to
        }
    }
}

} // namespace

std::string render_ptx(const std::string& name, const std::vector<UOp>& linear, int sm,
                       int64_t block_threads) {
    // sm_80 and later: what CUDA 13 accepts, with what the renderer relies on (bf16 max and
    // min, for one, have no sm_75 instruction: LLVM would abort the process).
    if (sm < 80 || sm > 90)
        fail("nvptx", "kernel " + name + ": sm_" + std::to_string(sm) +
                          " is outside the archs supported (sm_80 .. sm_90)");
    // Warpgroup mma (WGMMA) is Hopper's own: sm_90a, which runs on sm_90 parts only.
    const bool wgmma = uses_wgmma(linear);
    if (wgmma && sm != 90)
        fail("nvptx", "kernel " + name + ": warpgroup mma (WGMMA) needs sm_90, not sm_" +
                          std::to_string(sm));
    const std::string arch = "sm_" + std::to_string(sm) + (wgmma ? "a" : "");
    const llvm::Target& target = nvptx_target();
    llvm::TargetOptions opts;
    // Long straight-line code is generated at the lowest level, as on the CPU (kLongKernelOps).
    const bool long_kernel = linear.size() > llvm_backend::kLongKernelOps;
    std::unique_ptr<llvm::TargetMachine> tm(target.createTargetMachine(
        kTriple, arch, "", opts, llvm::Reloc::Static, std::nullopt,
        long_kernel ? llvm::CodeGenOptLevel::None : llvm::CodeGenOptLevel::Default));
    if (!tm) fail("nvptx", "cannot create the NVPTX TargetMachine for " + arch);

    llvm::LLVMContext ctx;
    // LLVM reports what the NVPTX target cannot lower (a libcall it has none for) as a
    // diagnostic, then goes on to emit broken PTX: collect the errors and fail on them.
    struct Diagnostics : llvm::DiagnosticHandler {
        std::string errors;
        bool handleDiagnostics(const llvm::DiagnosticInfo& d) override {
            if (d.getSeverity() != llvm::DS_Error) return true;
            std::string text;
            llvm::raw_string_ostream os(text);
            llvm::DiagnosticPrinterRawOStream printer(os);
            d.print(printer);
            errors += (errors.empty() ? "" : "; ") + os.str();
            return true;
        }
    };
    auto diagnostics = std::make_unique<Diagnostics>();
    Diagnostics* diag = diagnostics.get();
    ctx.setDiagnosticHandler(std::move(diagnostics));
    llvm::Module mod(llvm_backend::sanitize(name), ctx);
    mod.setDataLayout(tm->createDataLayout());
    mod.setTargetTriple(kTriple);
    llvm_backend::RenderInfo info;
    llvm_backend::render_kernel(mod, llvm_backend::sanitize(name), name, linear, info,
                                llvm_backend::Target::Nvptx, block_threads);
    std::string problems;
    llvm::raw_string_ostream ps(problems);
    if (llvm::verifyModule(mod, &ps))
        fail("nvptx", "kernel '" + name + "' renders to invalid LLVM IR: " + ps.str());

    // The codegen's opts did the unrolling and vectorizing the GPU gets.
    llvm_backend::optimize(mod, *tm, true);
    // NVPTX has no FastISel: SelectionDAG selects each block as one DAG, and on a long kernel's
    // single block of straight-line code its CSE map (a FoldingSet that re-profiles nodes on
    // every lookup) makes that slower than the sum of smaller DAGs. Blocks of kPtxBlockOps
    // instructions joined by branches (no register allocation on PTX: nothing spills): 100,000
    // chained adds render in 0.39 s instead of 0.57.
    if (long_kernel) split_long_blocks(mod);

    llvm::SmallString<0> ptx;
    llvm::raw_svector_ostream os(ptx);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
        fail("nvptx", "kernel '" + name + "': the NVPTX target cannot emit PTX");
    pm.run(mod);
    if (!diag->errors.empty())
        fail("nvptx", "kernel '" + name + "': the NVPTX target cannot lower it: " + diag->errors);
    return std::string(ptx.str());
}

} // namespace tempura::runtime
