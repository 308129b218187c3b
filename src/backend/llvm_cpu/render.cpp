// The linearized kernel (docs/KERNEL_IR.md section 2) -> LLVM IR, with llvm::IRBuilder.
//
// The program is a list in execution order, so rendering is one pass: each UOp becomes at most one
// llvm::Value, and control flow follows the list. RANGE opens a loop (a header block with the
// induction phi and the `r < end` test, then the body), END closes it (increment, back edge, exit
// block); IF/ENDIF open and close a conditional block. Blocks nest like the list, so a value
// defined before a loop dominates everything after it, inside the loop and after its END.
#include "backend/llvm_cpu/render.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

#include "tempura/backend/gpu.hpp"
#include "tempura/error.hpp"
#include "tempura/pattern/predicate.hpp"

// A switch over Op that misses an op is an error here, whatever the build's warning flags: the
// renderer must lower every ALU op of the table.
#pragma GCC diagnostic error "-Wswitch"

namespace tempura::llvm_backend {

namespace {

std::atomic<decltype(EmuHooks::fault)> g_emu_fault{nullptr};
std::atomic<decltype(EmuHooks::shared)> g_emu_shared{nullptr};
std::atomic<decltype(EmuHooks::barrier)> g_emu_barrier{nullptr};
std::atomic<decltype(EmuHooks::mma)> g_emu_mma{nullptr};
std::atomic<decltype(EmuHooks::copy_async)> g_emu_copy_async{nullptr};
std::atomic<decltype(EmuHooks::async_wait)> g_emu_async_wait{nullptr};
std::atomic<decltype(EmuHooks::ldmatrix)> g_emu_ldmatrix{nullptr};
std::atomic<decltype(EmuHooks::wgmma)> g_emu_wgmma{nullptr};
std::atomic<decltype(EmuHooks::wgmma_wait)> g_emu_wgmma_wait{nullptr};

// A 16-byte aligned array of shared memory (address space 3). LLVM's User classes pair a custom
// operator new with a sized operator delete, which GCC 12 (at -O1, under the sanitizers) takes
// for a mismatched pair on the constructor's unwind path: a false positive, silenced here only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
llvm::GlobalVariable* shared_array(llvm::Module& m, llvm::Type* type,
                                   llvm::GlobalValue::LinkageTypes linkage, llvm::Constant* init,
                                   const std::string& name) {
    auto* gv = new llvm::GlobalVariable(m, type, false, linkage, init, name, nullptr,
                                        llvm::GlobalValue::NotThreadLocal, 3);
    gv->setAlignment(llvm::Align(16));
    return gv;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

std::string describe(const UOp& u) {
    return std::string(op_name(u.op())) + " of dtype " + u.dtype().name();
}

class Renderer {
  public:
    Renderer(llvm::Module& m, const std::string& kernel, Target target, int64_t max_threads)
        : ctx_(m.getContext()), mod_(m), b_(m.getContext()), kernel_(kernel), target_(target),
          max_threads_(max_threads) {
        // No `contract`: every float instruction rounds once, as the reference interpreter's op
        // does, on every target. With it, NVPTX fused t - s * (1/3) into one FMA where the CPU
        // and EMU did not, and the GPU's mean-centred values differed in the last bit. The
        // lowering's MULACC (a * b + c) is the one fused op, and it is fused everywhere.
    }

    llvm::Function* render(const std::string& symbol, const std::vector<UOp>& linear,
                           RenderInfo& info) {
        // What the signature needs to know first: the buffer slots (and which are written)
        // and the number of variables.
        if (target_ == Target::Nvptx) dynamic_shared_ = runtime::dynamic_shared_bytes(linear) > 0;
        wgmma_ = runtime::uses_wgmma(linear);
        std::vector<bool> stored;
        for (const UOp& u : linear) {
            if (u.is_null()) continue;
            if (u.op() == Op::DefineVar) ++n_vars_;
            if (u.op() == Op::Param)
                if (const auto* a = std::get_if<std::vector<int64_t>>(&u.arg());
                    a && !a->empty() && (*a)[0] >= 0 && (*a)[0] < (int64_t{1} << 16))
                    n_slots_ = std::max(n_slots_, (*a)[0] + 1);
        }
        stored.assign(static_cast<size_t>(n_slots_), false);
        for (const UOp& u : linear)
            if (!u.is_null() && u.op() == Op::Store && u.src(0).op() == Op::Index &&
                u.src(0).src(0).op() == Op::Param)
                if (const auto* a = std::get_if<std::vector<int64_t>>(&u.src(0).src(0).arg());
                    a && !a->empty() && (*a)[0] >= 0 && (*a)[0] < n_slots_)
                    stored[static_cast<size_t>((*a)[0])] = true;
        if (target_ == Target::Nvptx) {
            std::vector<llvm::Type*> params(static_cast<size_t>(n_slots_),
                                            llvm::PointerType::get(ctx_, 1));
            params.resize(params.size() + n_vars_, b_.getInt64Ty());
            auto* fn_ty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
            fn_ = llvm::Function::Create(fn_ty, llvm::Function::ExternalLinkage, symbol, mod_);
            fn_->setCallingConv(llvm::CallingConv::PTX_Kernel);
            fn_->addFnAttr(llvm::Attribute::NoUnwind);
            // Distinct slots are distinct buffers; one only read is `readonly`, so that its
            // loads become ld.global.nc. Every buffer starts at an allocation of its own
            // (cuMemAlloc: 256-byte aligned), so 16-byte alignment holds, and neighbouring
            // 16-bit loads at an even index become one 32-bit load (a tensor-core fragment's
            // pairs).
            for (unsigned i = 0; i < static_cast<unsigned>(n_slots_); ++i) {
                fn_->addParamAttr(i, llvm::Attribute::getWithAlignment(ctx_, llvm::Align(16)));
                fn_->addParamAttr(i, llvm::Attribute::NoAlias);
                fn_->addParamAttr(i, llvm::Attribute::NoCapture);
                if (!stored[i]) fn_->addParamAttr(i, llvm::Attribute::ReadOnly);
                fn_->getArg(i)->setName("buf" + std::to_string(i));
            }
            // LLVM 19 reads the kernel flag and the block size from nvvm.annotations (it
            // ignores an "nvvm.maxntid" function attribute).
            llvm::NamedMDNode* ann = mod_.getOrInsertNamedMetadata("nvvm.annotations");
            auto entry = [&](const char* key, int64_t v) {
                ann->addOperand(llvm::MDNode::get(
                    ctx_, {llvm::ValueAsMetadata::get(fn_), llvm::MDString::get(ctx_, key),
                           llvm::ConstantAsMetadata::get(b_.getInt32(static_cast<uint32_t>(v)))}));
            };
            entry("kernel", 1);
            if (max_threads_ > 0) entry("maxntidx", max_threads_);
        } else {
            auto* ptr_ty = llvm::PointerType::get(ctx_, 0);
            auto* fn_ty = llvm::FunctionType::get(b_.getVoidTy(), {ptr_ty, ptr_ty}, false);
            fn_ = llvm::Function::Create(fn_ty, llvm::Function::ExternalLinkage, symbol, mod_);
            fn_->addFnAttr(llvm::Attribute::NoUnwind);
            // The two argument arrays are only read, and no buffer overlaps them: loads of
            // buffer pointers and variables can be hoisted out of loops that store.
            for (unsigned i = 0; i < 2; ++i) {
                fn_->addParamAttr(i, llvm::Attribute::NoAlias);
                fn_->addParamAttr(i, llvm::Attribute::NoCapture);
                fn_->addParamAttr(i, llvm::Attribute::ReadOnly);
            }
            buffers_ = fn_->getArg(0);
            vars_ = fn_->getArg(1);
            buffers_->setName("buffers");
            vars_->setName("vars");
        }

        // `entry` holds only the allocas of DEFINE_REG (so mem2reg/SROA can promote them); the
        // program starts in `body`.
        entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
        auto* body = llvm::BasicBlock::Create(ctx_, "body", fn_);
        b_.SetInsertPoint(body);

        make_alias_scopes(linear);
        vals_.assign(linear.size(), nullptr);
        pos_.reserve(linear.size());
        for (size_t i = 0; i < linear.size(); ++i) {
            const UOp& u = linear[i];
            if (u.is_null()) fail("cpu", where(i) + "a null UOp in the program");
            cur_ = i;
            vals_[i] = emit(u);
            pos_[u.get()] = i;
        }
        if (!frames_.empty()) {
            const Frame& f = frames_.back();
            fail("cpu", "kernel '" + kernel_ + "': " + (f.loop ? "RANGE" : "IF") + " at position " +
                            std::to_string(f.pos) + " is never closed (missing " +
                            (f.loop ? "END" : "ENDIF") + ")");
        }
        b_.CreateRetVoid();
        llvm::IRBuilder<> eb(entry_);
        eb.CreateBr(body);

        info.buffer_count = static_cast<size_t>(max_slot_ + 1);
        info.var_count = var_count_;
        info.shared_bytes = static_cast<size_t>(shared_bytes_);
        info.barriers = barriers_;
        return fn_;
    }

  private:
    struct Frame {
        bool loop;                // RANGE (else IF)
        const UOpNode* node;      // the RANGE or IF
        size_t pos;               // its position in the program
        llvm::PHINode* phi;       // loop: the induction variable
        llvm::BasicBlock* header; // loop: the block with the phi and the test
        llvm::BasicBlock* exit;   // loop: after the loop; if: after the conditional block
    };

    std::string where(size_t i) const {
        return "kernel '" + kernel_ + "', position " + std::to_string(i) + ": ";
    }
    [[noreturn]] void unsupported(const UOp& u, const std::string& why) const {
        fail("cpu", where(cur_) + "cannot render " + describe(u) + ": " + why);
    }

    // ---- types --------------------------------------------------------------------------------
    // The type of one lane in registers (bool is i1).
    llvm::Type* lane_type(DType dt, const UOp& u) const {
        switch (dt.scalar) {
        case Scalar::Bool: return b_.getInt1Ty();
        case Scalar::Int8:
        case Scalar::UInt8: return b_.getInt8Ty();
        case Scalar::Int16:
        case Scalar::UInt16: return b_.getInt16Ty();
        case Scalar::Int32:
        case Scalar::UInt32: return b_.getInt32Ty();
        case Scalar::Int64:
        case Scalar::UInt64:
        case Scalar::Index: return b_.getInt64Ty();
        case Scalar::Float16: return b_.getHalfTy();
        case Scalar::BFloat16: return b_.getBFloatTy();
        case Scalar::Float32: return b_.getFloatTy();
        case Scalar::Float64: return b_.getDoubleTy();
        case Scalar::Void: break;
        }
        unsupported(u, "it has no value type");
    }
    // `elem`, or <n x elem> for a vector dtype of n lanes.
    llvm::Type* lanes(llvm::Type* elem, DType dt, const UOp& u) const {
        if (dt.count == 0) unsupported(u, "a vector of 0 lanes");
        if (dt.count == 1) return elem;
        return llvm::FixedVectorType::get(elem, dt.count);
    }
    // Global memory is address space 1 on NVPTX; everything else is generic (0).
    unsigned addrspace(DType dt) const {
        if (target_ != Target::Nvptx) return 0;
        return dt.addrspace == AddrSpace::Global ? 1 : dt.addrspace == AddrSpace::Local ? 3 : 0;
    }
    // The type of a value in registers: a scalar, or a fixed vector <n x T> for T.vec(n) ...
    llvm::Type* value_type(DType dt, const UOp& u) const {
        if (dt.is_ptr) return llvm::PointerType::get(ctx_, addrspace(dt));
        return lanes(lane_type(dt, u), dt, u);
    }
    // ... and in memory (bool is one byte, as in C++ and numpy: <n x i8> for a bool vector).
    llvm::Type* mem_type(DType dt, const UOp& u) const {
        const DType e = dt.base();
        if (e.scalar == Scalar::Void) unsupported(u, "a pointer to void cannot be accessed");
        if (e.is_bool()) return lanes(b_.getInt8Ty(), e, u);
        return value_type(e, u);
    }
    // Accesses are aligned to one element, not to the vector: a vector access through
    // INDEX(PARAM, i) starts at any element i.
    llvm::Align access_align(DType dt, const UOp& u) const {
        return mod_.getDataLayout().getABITypeAlign(mem_type(dt.scalar_type(), u));
    }

    // ---- sources ------------------------------------------------------------------------------
    llvm::Value* val(const UOp& u, size_t k) const {
        const UOp& s = u.src(k);
        auto it = pos_.find(s.get());
        if (it == pos_.end())
            unsupported(u, "source " + std::to_string(k) + " (" + describe(s) +
                               ") does not precede it in the program");
        llvm::Value* v = vals_[it->second];
        if (v == nullptr)
            unsupported(u, "source " + std::to_string(k) + " (" + describe(s) + ") has no value");
        return v;
    }
    llvm::Value* typed_src(const UOp& u, size_t k, DType want) const {
        llvm::Value* v = val(u, k);
        if (u.src(k).dtype() != want)
            unsupported(u, "source " + std::to_string(k) + " has dtype " + u.src(k).dtype().name() +
                               ", expected " + want.name());
        return v;
    }
    llvm::Value* bool_src(const UOp& u, size_t k) const { return typed_src(u, k, DType::Bool); }
    llvm::Value* int_src(const UOp& u, size_t k) const {
        const DType dt = u.src(k).dtype();
        if (!dt.is_int() || dt.count != 1)
            unsupported(u, "source " + std::to_string(k) + " has dtype " + dt.name() +
                               ", expected an integer");
        return val(u, k);
    }
    // An integer index widened to i64, as GEP wants it.
    llvm::Value* index_src(const UOp& u, size_t k) {
        llvm::Value* v = int_src(u, k);
        if (v->getType()->getIntegerBitWidth() == 64) return v;
        return u.src(k).dtype().is_unsigned() ? b_.CreateZExt(v, b_.getInt64Ty())
                                              : b_.CreateSExt(v, b_.getInt64Ty());
    }
    llvm::Value* ptr_src(const UOp& u, size_t k) const {
        if (!u.src(k).dtype().is_ptr)
            unsupported(u, "source " + std::to_string(k) + " has dtype " + u.src(k).dtype().name() +
                               ", expected a pointer");
        return val(u, k);
    }

    // ---- constants ----------------------------------------------------------------------------
    // A scalar, or for a vector dtype the splat of the value (ConstantFP/ConstantInt::get splat
    // over a vector type).
    llvm::Value* constant(const UOp& u) {
        const DType dt = u.dtype();
        llvm::Type* ty = value_type(dt, u);
        if (dt.is_ptr) unsupported(u, "a pointer constant");
        const Arg& a = u.arg();
        if (dt.is_float()) {
            double d;
            if (auto* p = std::get_if<double>(&a))
                d = *p;
            else if (auto* q = std::get_if<int64_t>(&a))
                d = static_cast<double>(*q);
            else if (auto* r = std::get_if<bool>(&a))
                d = *r ? 1.0 : 0.0;
            else
                unsupported(u, "the value is not a number");
            return llvm::ConstantFP::get(ty, d);
        }
        int64_t v;
        if (auto* q = std::get_if<int64_t>(&a))
            v = *q;
        else if (auto* r = std::get_if<bool>(&a))
            v = *r ? 1 : 0;
        else if (auto* p = std::get_if<double>(&a))
            v = static_cast<int64_t>(*p);
        else
            unsupported(u, "the value is not a number");
        if (dt.is_bool()) return llvm::ConstantInt::get(ty, v != 0 ? 1 : 0);
        return llvm::ConstantInt::get(ty, static_cast<uint64_t>(wrap_to(dt, v)), !dt.is_unsigned());
    }

    // ---- control flow -------------------------------------------------------------------------
    llvm::Value* open_range(const UOp& u) {
        const DType dt = u.dtype();
        if (!dt.is_int() || dt.count != 1)
            unsupported(u, "a loop counter must be an integer (index, int32 or int64)");
        llvm::Value* end = typed_src(u, 0, dt);
        auto* pre = b_.GetInsertBlock();
        const std::string n = "r" + std::to_string(cur_);
        auto* header = llvm::BasicBlock::Create(ctx_, n + ".header", fn_);
        auto* body = llvm::BasicBlock::Create(ctx_, n + ".body", fn_);
        auto* exit = llvm::BasicBlock::Create(ctx_, n + ".exit", fn_);
        b_.CreateBr(header);
        b_.SetInsertPoint(header);
        llvm::PHINode* phi = b_.CreatePHI(value_type(dt, u), 2, n);
        phi->addIncoming(llvm::ConstantInt::get(phi->getType(), 0), pre);
        llvm::Value* more =
            dt.is_unsigned() ? b_.CreateICmpULT(phi, end) : b_.CreateICmpSLT(phi, end);
        b_.CreateCondBr(more, body, exit);
        b_.SetInsertPoint(body);
        frames_.push_back(Frame{true, u.get(), cur_, phi, header, exit});
        return phi;
    }

    void close_ranges(const UOp& u) {
        // END's sources: the RANGEs it closes (other sources only order the END after them).
        std::vector<const UOpNode*> ranges;
        for (const UOp& s : u.srcs())
            if (s.op() == Op::Range) ranges.push_back(s.get());
        if (ranges.empty()) unsupported(u, "END names no RANGE to close");
        for (size_t k = 0; k < ranges.size(); ++k) {
            if (frames_.empty() || !frames_.back().loop ||
                std::find(ranges.begin(), ranges.end(), frames_.back().node) == ranges.end()) {
                std::string open = frames_.empty() ? "nothing is open"
                                   : frames_.back().loop
                                       ? "the innermost open RANGE is at position " +
                                             std::to_string(frames_.back().pos)
                                       : "the IF at position " +
                                             std::to_string(frames_.back().pos) + " is still open";
                unsupported(u, "it closes a RANGE that is not the innermost open block (" + open +
                                   ")");
            }
            const Frame f = frames_.back();
            frames_.pop_back();
            // r + 1 cannot wrap: r < end <= the type's maximum.
            llvm::Value* next = b_.CreateAdd(f.phi, llvm::ConstantInt::get(f.phi->getType(), 1),
                                             f.phi->getName() + ".next", /*HasNUW=*/true,
                                             /*HasNSW=*/true);
            f.phi->addIncoming(next, b_.GetInsertBlock());
            b_.CreateBr(f.header);
            b_.SetInsertPoint(f.exit);
        }
    }

    void open_if(const UOp& u) {
        llvm::Value* cond = bool_src(u, 0);
        const std::string n = "if" + std::to_string(cur_);
        auto* then = llvm::BasicBlock::Create(ctx_, n + ".then", fn_);
        auto* exit = llvm::BasicBlock::Create(ctx_, n + ".end", fn_);
        b_.CreateCondBr(cond, then, exit);
        b_.SetInsertPoint(then);
        frames_.push_back(Frame{false, u.get(), cur_, nullptr, nullptr, exit});
    }

    void close_if(const UOp& u) {
        if (frames_.empty() || frames_.back().loop || frames_.back().node != u.src(0).get())
            unsupported(u, "it does not close the innermost open IF");
        const Frame f = frames_.back();
        frames_.pop_back();
        b_.CreateBr(f.exit);
        b_.SetInsertPoint(f.exit);
    }

    // ---- alias scopes -------------------------------------------------------------------------
    // Distinct PARAM slots are distinct buffers (docs/KERNEL_IR.md §2: the scheduler binds one
    // buffer per slot and never the same buffer twice). Telling LLVM so, with one alias scope
    // per slot, removes the vectorizer's runtime overlap checks and their extra loop versions.
    void make_alias_scopes(const std::vector<UOp>& linear) {
        std::vector<int64_t> slots;
        for (const UOp& u : linear)
            if (u.op() == Op::Param)
                if (const auto* a = std::get_if<std::vector<int64_t>>(&u.arg()); a && !a->empty())
                    slots.push_back((*a)[0]);
        std::sort(slots.begin(), slots.end());
        slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
        if (slots.size() < 2) return;
        llvm::MDBuilder mdb(ctx_);
        llvm::MDNode* domain = mdb.createAnonymousAliasScopeDomain("buffers");
        std::vector<llvm::Metadata*> scopes;
        for (int64_t s : slots)
            scopes.push_back(mdb.createAnonymousAliasScope(domain, "buf" + std::to_string(s)));
        for (size_t i = 0; i < slots.size(); ++i) {
            std::vector<llvm::Metadata*> others;
            for (size_t j = 0; j < slots.size(); ++j)
                if (j != i) others.push_back(scopes[j]);
            scope_md_[slots[i]] = {llvm::MDNode::get(ctx_, {scopes[i]}),
                                   llvm::MDNode::get(ctx_, others)};
        }
    }
    // Tags a load or store through INDEX(PARAM, ...) with its buffer's scope.
    void tag_access(const UOp& index, llvm::Instruction* inst) {
        if (index.op() != Op::Index || index.src(0).op() != Op::Param) return;
        const auto* a = std::get_if<std::vector<int64_t>>(&index.src(0).arg());
        if (a == nullptr || a->empty()) return;
        auto it = scope_md_.find((*a)[0]);
        if (it == scope_md_.end()) return;
        inst->setMetadata(llvm::LLVMContext::MD_alias_scope, it->second.first);
        inst->setMetadata(llvm::LLVMContext::MD_noalias, it->second.second);
    }

    // ---- memory -------------------------------------------------------------------------------
    // A load of `dt` from `p` converted to its value type (bytes to i1 for bool: nonzero is true;
    // lane by lane for a bool vector).
    // The alignment of an access of `dt` (a vector: `dt.count` lanes) through `index`. A GPU has
    // no unaligned vector accesses: one aligned to an element is split into scalar ones. The
    // alignment the address is known to have (the buffer's, and the index's trailing zero bits)
    // lets a pair of 16-bit values be one 32-bit access, 8 of them one 16-byte access.
    llvm::Align known_align(DType dt, const UOp& u, const UOp& index) const {
        llvm::Align align = access_align(dt, u);
        if (target_ != Target::Nvptx || dt.count <= 1) return align;
        const uint64_t whole =
            llvm::PowerOf2Ceil(mod_.getDataLayout().getTypeStoreSize(mem_type(dt, u)));
        const uint64_t known = align.value() * index_multiple(index);
        return llvm::Align(std::min<uint64_t>({whole, known, 16}));
    }

    llvm::Value* load_value(const UOp& u, llvm::Value* p) {
        llvm::Type* ty = mem_type(u.dtype(), u);
        const llvm::Align align = known_align(u.dtype(), u, u.src(0));
        llvm::LoadInst* ld = b_.CreateAlignedLoad(ty, p, align);
        tag_access(u.src(0), ld);
        llvm::Value* x = ld;
        if (u.dtype().is_bool()) x = b_.CreateICmpNE(x, llvm::Constant::getNullValue(ty));
        return x;
    }

    // The largest power of two (up to 16) that the element index of INDEX(PARAM or DEFINE_LOCAL,
    // i) is known to be a multiple of (buffers and shared arrays start 16-byte aligned); 1 for
    // any other address.
    static uint64_t index_multiple(const UOp& index) {
        if (index.op() != Op::Index ||
            (base_of(index).op() != Op::Param && base_of(index).op() != Op::DefineLocal))
            return 1;
        for (int64_t m = 16; m > 1; m /= 2)
            if (pattern::is_multiple_of(index.src(1), m)) return static_cast<uint64_t>(m);
        return 1;
    }

    // `emit()` under `gate` (an IF of its own, `tag` naming its blocks), or unconditionally when
    // there is none.
    template <class F>
    void when(llvm::Value* gate, const char* tag, const F& emit) {
        if (gate == nullptr) {
            emit();
            return;
        }
        const std::string n = tag + std::to_string(cur_);
        auto* then = llvm::BasicBlock::Create(ctx_, n + ".then", fn_);
        auto* done = llvm::BasicBlock::Create(ctx_, n + ".end", fn_);
        b_.CreateCondBr(gate, then, done);
        b_.SetInsertPoint(then);
        emit();
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
    }

    // An EMU hook's address: what the emulator installed (it does before compiling anything).
    template <class F>
    const void* emu_hook(const std::atomic<F>& hook, const char* what) const {
        const F f = hook.load();
        if (f == nullptr)
            fail("emu", std::string("internal: no ") + what + " for kernel " + kernel_);
        return reinterpret_cast<const void*>(f);
    }

    // A call of a host function at a fixed address (EMU's hooks: the JIT runs in this process).
    llvm::Value* call_host(const void* fn, llvm::Type* ret, llvm::ArrayRef<llvm::Value*> args) {
        std::vector<llvm::Type*> types;
        for (llvm::Value* a : args) types.push_back(a->getType());
        auto* fty = llvm::FunctionType::get(ret, types, false);
        llvm::Value* callee = llvm::ConstantExpr::getIntToPtr(
            llvm::ConstantInt::get(b_.getInt64Ty(), reinterpret_cast<uintptr_t>(fn)),
            llvm::PointerType::get(ctx_, 0));
        return b_.CreateCall(fty, callee, args);
    }

    // What an INDEX addresses: its pointer, through any AFTER (a scatter reads its output,
    // GROUP its partials, through one).
    static UOp base_of(const UOp& idx) {
        UOp base = idx.src(0);
        while (base.op() == Op::After) base = base.src(0);
        return base;
    }
    // Whether an INDEX addresses shared memory (a DEFINE_LOCAL).
    static bool is_shared(const UOp& idx) {
        return idx.op() == Op::Index && base_of(idx).op() == Op::DefineLocal;
    }

    // Target::Emu: reports a shared-memory access to the emulator (bounds and races) and
    // returns whether it may proceed; null where there is nothing to report.
    llvm::Value* emu_shared(const UOp& idx, llvm::Value* p, llvm::Type* ty, bool is_store,
                            llvm::Value* gate) {
        if (target_ != Target::Emu || !is_shared(idx)) return nullptr;
        const void* hook = emu_hook(g_emu_shared, "shared-memory hook");
        llvm::Type* i64 = b_.getInt64Ty();
        const uint64_t bytes = mod_.getDataLayout().getTypeStoreSize(ty);
        // Only where the access happens: a gated-off one is not an access.
        llvm::BasicBlock* from = b_.GetInsertBlock();
        llvm::BasicBlock* then = nullptr;
        llvm::BasicBlock* done = nullptr;
        if (gate != nullptr) {
            const std::string n = "sh" + std::to_string(cur_);
            then = llvm::BasicBlock::Create(ctx_, n, fn_);
            done = llvm::BasicBlock::Create(ctx_, n + ".end", fn_);
            b_.CreateCondBr(gate, then, done);
            b_.SetInsertPoint(then);
        }
        llvm::Value* ok = call_host(hook, i64,
                                    {b_.CreatePtrToInt(p, i64), llvm::ConstantInt::get(i64, bytes),
                                     llvm::ConstantInt::get(i64, is_store ? 1 : 0)});
        ok = b_.CreateICmpNE(ok, llvm::ConstantInt::get(i64, 0));
        if (gate == nullptr) return ok;
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
        llvm::PHINode* phi = b_.CreatePHI(b_.getInt1Ty(), 2);
        phi->addIncoming(ok, then);
        phi->addIncoming(b_.getFalse(), from);
        return phi;
    }

    // Target::Emu: whether an access of `lanes` elements through `idx` (an INDEX of a PARAM of
    // known size) lies inside its buffer, after reporting one that does not (where `gate`, if
    // any, is on) to the emulator. Null where nothing is checked.
    llvm::Value* emu_in_bounds(const UOp& idx, int64_t lanes, bool is_store, llvm::Value* gate) {
        if (target_ != Target::Emu || idx.op() != Op::Index) return nullptr;
        return emu_in_bounds_at(idx, index_src(idx, 1), lanes, is_store, gate);
    }
    // The same check of an access at element offset `off` of idx's buffer.
    llvm::Value* emu_in_bounds_at(const UOp& idx, llvm::Value* off, int64_t lanes, bool is_store,
                                  llvm::Value* gate) {
        if (target_ != Target::Emu || idx.op() != Op::Index) return nullptr;
        const UOp base = base_of(idx);
        if (base.op() != Op::Param) return nullptr;
        const auto& a = base.arg_as<std::vector<int64_t>>();
        if (a.size() < 2 || a[1] < 0) return nullptr; // a symbolic size
        const void* report = emu_hook(g_emu_fault, "fault handler");
        llvm::Type* i64 = b_.getInt64Ty();
        llvm::Value* ok = b_.CreateAnd(
            b_.CreateICmpSGE(off, llvm::ConstantInt::get(i64, 0)),
            b_.CreateICmpSLE(off,
                             llvm::ConstantInt::get(i64, static_cast<uint64_t>(a[1] - lanes))));
        llvm::Value* bad = b_.CreateNot(ok);
        if (gate != nullptr) bad = b_.CreateAnd(bad, gate);
        when(bad, "oob", [&] {
            call_host(report, b_.getVoidTy(),
                      {llvm::ConstantInt::get(i64, static_cast<uint64_t>(a[0])),
                       llvm::ConstantInt::get(i64, static_cast<uint64_t>(a[1])), off,
                       llvm::ConstantInt::get(i64, static_cast<uint64_t>(lanes)),
                       llvm::ConstantInt::get(i64, is_store ? 1 : 0)});
        });
        return ok;
    }

    llvm::Value* load(const UOp& u) {
        llvm::Value* p = ptr_src(u, 0);
        if (u.dtype().is_ptr) unsupported(u, "a LOAD yields a value, not a pointer");
        if (u.src(0).dtype().base() != u.dtype())
            unsupported(u, "it loads through a pointer of dtype " + u.src(0).dtype().name());
        llvm::Value* gate = nullptr;
        llvm::Value* alt = nullptr;
        auto g = gates_.find(u.src(0).get()); // INDEX(ptr, idx, gate): the gate rides the INDEX
        if (u.srcs().size() == 3) {
            // One gate, or (a vector load) one a lane.
            const bool per_lane = u.src(1).dtype().count > 1;
            gate = typed_src(u, 1, per_lane ? DType::Bool.vec(u.dtype().count) : DType::Bool);
            alt = typed_src(u, 2, u.dtype());
        } else if (u.srcs().size() == 2 && g != gates_.end()) {
            gate = g->second;
            alt = typed_src(u, 1, u.dtype());
        } else if (u.srcs().size() == 1 && g != gates_.end()) {
            gate = g->second;
            alt = llvm::Constant::getNullValue(value_type(u.dtype(), u));
        } else if (u.srcs().size() != 1) {
            unsupported(u, "a LOAD takes INDEX, or INDEX, gate and alt; got " +
                               std::to_string(u.srcs().size()) + " sources");
        }
        if (gate != nullptr && gate->getType()->isVectorTy()) return masked_load(u, gate, alt);
        llvm::Value* ok = emu_in_bounds(u.src(0), u.dtype().count, false, gate);
        if (ok == nullptr) ok = emu_shared(u.src(0), p, mem_type(u.dtype(), u), false, gate);
        if (ok != nullptr) {
            gate = gate == nullptr ? ok : b_.CreateAnd(gate, ok);
            if (alt == nullptr) alt = llvm::Constant::getNullValue(value_type(u.dtype(), u));
        }
        if (gate == nullptr) return load_value(u, p);
        // From a buffer known to hold the access: load from gate ? p : the buffer's start, then
        // select. No branch (a padded conv's loads stay vectorizable), and nothing outside the
        // buffer is read: where the gate is false, element 0 is, and its value is dropped.
        if (const UOp& idx = u.src(0); idx.op() == Op::Index && idx.src(0).op() == Op::Param) {
            const auto& a = idx.src(0).arg_as<std::vector<int64_t>>();
            if (a.size() >= 2 && a[1] >= static_cast<int64_t>(u.dtype().count)) {
                llvm::Value* safe = b_.CreateSelect(gate, p, ptr_src(idx, 0));
                return b_.CreateSelect(gate, load_value(u, safe), alt);
            }
        }
        // Otherwise gate ? *p : alt, and p is not touched when the gate is false: a branch, not
        // a select (p may be out of bounds exactly when the gate is false).
        const std::string n = "ld" + std::to_string(cur_);
        auto* from = b_.GetInsertBlock();
        auto* then = llvm::BasicBlock::Create(ctx_, n + ".then", fn_);
        auto* done = llvm::BasicBlock::Create(ctx_, n + ".end", fn_);
        b_.CreateCondBr(gate, then, done);
        b_.SetInsertPoint(then);
        llvm::Value* x = load_value(u, p);
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
        llvm::PHINode* phi = b_.CreatePHI(x->getType(), 2, n);
        phi->addIncoming(x, then);
        phi->addIncoming(alt, from);
        return phi;
    }

    // A vector load of consecutive elements of a buffer whose lanes have gates of their own (the
    // expander's form for a padded row: the lanes over the padding are off). Only the lanes whose
    // gate holds are read, by llvm.masked.load (a masked move on AVX-512 and AVX; NVPTX's code
    // generator splits it into guarded scalar loads); the others are alt's. The first lane's
    // address may lie outside the buffer, so it is formed without inbounds. On EMU each lane on
    // is checked against the buffer, then read alone.
    llvm::Value* masked_load(const UOp& u, llvm::Value* mask, llvm::Value* alt) {
        const UOp& idx = u.src(0);
        if (idx.op() != Op::Index || base_of(idx).op() != Op::Param || u.dtype().is_bool())
            unsupported(u, "a LOAD with a gate per lane reads numbers from a buffer");
        const DType st = u.dtype().scalar_type();
        llvm::Type* et = mem_type(st, u);
        llvm::Value* off = index_src(idx, 1);
        llvm::Value* first = b_.CreateGEP(et, ptr_src(idx, 0), off);
        if (target_ != Target::Emu) {
            llvm::CallInst* ld = b_.CreateMaskedLoad(value_type(u.dtype(), u), first,
                                                     known_align(u.dtype(), u, idx), mask, alt);
            tag_access(idx, ld);
            return ld;
        }
        llvm::Value* v = alt;
        for (uint64_t l = 0; l < u.dtype().count; ++l) {
            llvm::Value* on = b_.CreateExtractElement(mask, l);
            llvm::Value* at = b_.CreateAdd(off, llvm::ConstantInt::get(off->getType(), l));
            if (llvm::Value* ok = emu_in_bounds_at(idx, at, 1, false, on))
                on = b_.CreateAnd(on, ok);
            llvm::Value* other = b_.CreateExtractElement(alt, l);
            const std::string n = "mld" + std::to_string(cur_) + "." + std::to_string(l);
            auto* from = b_.GetInsertBlock();
            auto* then = llvm::BasicBlock::Create(ctx_, n + ".then", fn_);
            auto* done = llvm::BasicBlock::Create(ctx_, n + ".end", fn_);
            b_.CreateCondBr(on, then, done);
            b_.SetInsertPoint(then);
            llvm::LoadInst* ld = b_.CreateAlignedLoad(et, b_.CreateGEP(et, first, b_.getInt64(l)),
                                                      llvm::Align(st.itemsize()));
            tag_access(idx, ld);
            b_.CreateBr(done);
            b_.SetInsertPoint(done);
            llvm::PHINode* x = b_.CreatePHI(et, 2, n);
            x->addIncoming(ld, then);
            x->addIncoming(other, from);
            v = b_.CreateInsertElement(v, x, l);
        }
        return v;
    }

    void store(const UOp& u) {
        llvm::Value* p = ptr_src(u, 0);
        const DType et = u.src(0).dtype().base();
        llvm::Value* v = typed_src(u, 1, et);
        for (size_t k = 2; k < u.srcs().size(); ++k)
            if (u.src(k).op() != Op::Range)
                unsupported(u, "a STORE takes INDEX and value (extra sources may only be RANGEs)");
        if (et.is_bool()) v = b_.CreateZExt(v, mem_type(et, u));
        const llvm::Align align = known_align(et, u, u.src(0));
        auto g = gates_.find(u.src(0).get());
        llvm::Value* gate = g == gates_.end() ? nullptr : g->second;
        llvm::Value* ok = emu_in_bounds(u.src(0), u.src(1).dtype().count, true, gate);
        if (ok == nullptr) ok = emu_shared(u.src(0), p, mem_type(et, u), true, gate);
        if (ok != nullptr) gate = gate == nullptr ? ok : b_.CreateAnd(gate, ok);
        when(gate, "st", [&] { tag_access(u.src(0), b_.CreateAlignedStore(v, p, align)); });
    }

    llvm::Value* index(const UOp& u) {
        if (!u.dtype().is_ptr) unsupported(u, "an INDEX yields a pointer");
        llvm::Value* p = ptr_src(u, 0);
        if (u.src(0).dtype().scalar != u.dtype().scalar)
            unsupported(u, "it indexes a pointer of dtype " + u.src(0).dtype().name());
        llvm::Value* i = index_src(u, 1);
        if (u.srcs().size() == 3)
            gates_[u.get()] = bool_src(u, 2);
        else if (u.srcs().size() != 2)
            unsupported(u, "an INDEX takes a pointer and one index (and optionally a gate)");
        // The index counts elements of the pointer indexed (a PARAM's scalars, a DEFINE_REG's
        // scalars or vectors); the INDEX's own dtype only says how wide the access through it is.
        mem_type(u.dtype(), u); // checks the accessed type
        // inbounds: an out-of-bounds address is only ever formed under a false gate, and is then
        // never dereferenced.
        return b_.CreateInBoundsGEP(mem_type(u.src(0).dtype(), u), p, i);
    }

    llvm::Value* param(const UOp& u) {
        if (!u.dtype().is_ptr) unsupported(u, "a PARAM must have a pointer dtype");
        if (u.dtype().count != 1)
            unsupported(u, "a PARAM points to scalar elements (vector accesses go through an INDEX "
                           "of vector dtype)");
        mem_type(u.dtype(), u); // checks the element type
        const auto* slots = std::get_if<std::vector<int64_t>>(&u.arg());
        if (slots == nullptr || slots->empty() || (*slots)[0] < 0)
            unsupported(u, "its arg must be {slot, numel} with slot >= 0");
        const int64_t slot = (*slots)[0];
        max_slot_ = std::max(max_slot_, slot);
        if (target_ == Target::Nvptx) return fn_->getArg(static_cast<unsigned>(slot));
        auto* ptr_ty = llvm::PointerType::get(ctx_, 0);
        llvm::Value* at =
            b_.CreateConstInBoundsGEP1_64(ptr_ty, buffers_, static_cast<uint64_t>(slot));
        return b_.CreateLoad(ptr_ty, at, "buf" + std::to_string(slot));
    }

    llvm::Value* define_var(const UOp& u) {
        const DType dt = u.dtype();
        if (!dt.is_int() || dt.count != 1)
            unsupported(u, "a DEFINE_VAR must be an integer (index, int32 or int64)");
        const auto k = static_cast<uint64_t>(var_count_++);
        llvm::Type* ty = value_type(dt, u);
        if (target_ == Target::Nvptx) {
            llvm::Value* v = fn_->getArg(static_cast<unsigned>(n_slots_ + static_cast<int64_t>(k)));
            return ty == v->getType() ? v : b_.CreateTrunc(v, ty);
        }
        llvm::Value* at = b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), vars_, k);
        std::string name = "var";
        if (const auto* va = std::get_if<VarArg>(&u.arg())) name = va->name;
        llvm::Value* v = b_.CreateLoad(b_.getInt64Ty(), at, name);
        return ty == v->getType() ? v : b_.CreateTrunc(v, ty);
    }

    // SPECIAL(size) {kind, dim}: the block (kind 0) or thread (kind 1) index along x, y or z.
    llvm::Value* special(const UOp& u) {
        const DType dt = u.dtype();
        if (!dt.is_int() || dt.count != 1) unsupported(u, "a SPECIAL is an integer index");
        const auto* a = std::get_if<std::vector<int64_t>>(&u.arg());
        if (a == nullptr || a->size() != 2 || (*a)[0] < 0 || (*a)[0] > 1 || (*a)[1] < 0 ||
            (*a)[1] > 2)
            unsupported(u, "its arg must be {kind 0 or 1, dim 0 .. 2}");
        const int64_t kind = (*a)[0], dim = (*a)[1];
        llvm::Type* ty = value_type(dt, u);
        if (target_ == Target::Nvptx) {
            static constexpr llvm::Intrinsic::ID ids[2][3] = {
                {llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x,
                 llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
                 llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z},
                {llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x,
                 llvm::Intrinsic::nvvm_read_ptx_sreg_tid_y,
                 llvm::Intrinsic::nvvm_read_ptx_sreg_tid_z}};
            llvm::Value* v = b_.CreateIntrinsic(ids[kind][dim], {}, {});
            return b_.CreateZExtOrTrunc(v, ty);
        }
        if (target_ != Target::Emu) unsupported(u, "the CPU has no block or thread indices");
        const auto k = static_cast<uint64_t>(n_vars_) + static_cast<uint64_t>(kind * 3 + dim);
        llvm::Value* at = b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), vars_, k);
        llvm::Value* v = b_.CreateLoad(b_.getInt64Ty(), at, kind == 0 ? "block" : "thread");
        return b_.CreateZExtOrTrunc(v, ty);
    }

    // DEFINE_LOCAL {count, id[, alignment]}: the block's shared memory. NVPTX: an addrspace(3)
    // array; EMU: a slice of the block memory whose address is vars[n + 6].
    llvm::Value* define_local(const UOp& u) {
        if (!u.dtype().is_ptr || u.dtype().addrspace != AddrSpace::Local)
            unsupported(u, "a DEFINE_LOCAL is a pointer to local (shared) memory");
        const auto* a = std::get_if<std::vector<int64_t>>(&u.arg());
        if (a == nullptr || a->empty() || (*a)[0] <= 0 || (*a)[0] > (int64_t{1} << 18) ||
            (a->size() > 2 && (*a)[2] != 16 && (*a)[2] != 1024))
            unsupported(u, "its arg must be {count (1 .. 262144), id} or {count, id, alignment "
                           "(16 or 1024)}");
        auto* arr = llvm::ArrayType::get(mem_type(u.dtype(), u), static_cast<uint64_t>((*a)[0]));
        const uint64_t bytes = mod_.getDataLayout().getTypeAllocSize(arr);
        if (target_ == Target::Nvptx && dynamic_shared_) {
            // Over 48 KiB: one dynamic array (its size given at launch), each DEFINE_LOCAL at
            // the offset runtime::dynamic_shared_bytes counts it at.
            if (bytes != static_cast<uint64_t>((*a)[0] * u.dtype().base().itemsize()))
                unsupported(u, "its elements are padded in memory: no dynamic shared memory");
            if (dynamic_smem_ == nullptr)
                dynamic_smem_ = shared_array(mod_, llvm::ArrayType::get(b_.getInt8Ty(), 0),
                                             llvm::GlobalValue::ExternalLinkage, nullptr, "dsmem");
            if (runtime::shared_alignment(u) > 16) dynamic_smem_->setAlignment(llvm::Align(1024));
            return llvm::ConstantExpr::getInBoundsGetElementPtr(
                b_.getInt8Ty(), dynamic_smem_, b_.getInt64(place_shared(u, bytes)));
        }
        if (target_ == Target::Nvptx) {
            shared_bytes_ += bytes;
            llvm::GlobalVariable* gv =
                shared_array(mod_, arr, llvm::GlobalValue::InternalLinkage,
                             llvm::UndefValue::get(arr), "smem" + std::to_string(cur_));
            gv->setAlignment(llvm::Align(static_cast<uint64_t>(runtime::shared_alignment(u))));
            return gv;
        }
        if (target_ != Target::Emu) unsupported(u, "the CPU has no shared memory");
        llvm::Value* at = b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), vars_, n_vars_ + 6);
        llvm::Value* base = b_.CreateIntToPtr(b_.CreateLoad(b_.getInt64Ty(), at, "shared"),
                                              llvm::PointerType::get(ctx_, 0));
        // (EMU's block memory is 1024-byte aligned.)
        return b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), base, place_shared(u, bytes));
    }

    // The offset of DEFINE_LOCAL `u` of `bytes` bytes in the block's shared memory (dynamic, or
    // EMU's), past the ones placed before it.
    uint64_t place_shared(const UOp& u, uint64_t bytes) {
        auto used = static_cast<int64_t>(shared_bytes_);
        const int64_t at = runtime::place_shared(used, u, static_cast<int64_t>(bytes));
        shared_bytes_ = static_cast<uint64_t>(used);
        return static_cast<uint64_t>(at);
    }

    void barrier(const UOp& u) {
        barriers_ = true;
        if (target_ == Target::Nvptx) {
            // What the threads wrote to shared memory (stores, cp.async) before the barrier is
            // read by WGMMA through the async proxy: a proxy fence orders the two.
            if (wgmma_) inline_asm(b_.getVoidTy(), "fence.proxy.async.shared::cta;", "", {});
            b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
            return;
        }
        if (target_ != Target::Emu) unsupported(u, "the CPU has no thread blocks to wait for");
        const void* hook = emu_hook(g_emu_barrier, "barrier hook");
        call_host(hook, b_.getVoidTy(), {llvm::ConstantInt::get(b_.getInt64Ty(), cur_)});
    }

    // WMMA(a, b, c): the warp's m16n8k16 multiply-add, this lane's fragments in and out; C and
    // D are 4 float32 lanes, or 4 Float16 lanes with Float16 operands (the 16-bit accumulator).
    llvm::Value* wmma(const UOp& u) {
        const DType at = u.src(0).dtype(), bt = u.src(1).dtype(), ct = u.dtype();
        const bool f16_acc = ct == DType::Float16.vec(4);
        if ((ct != DType::Float32.vec(4) && !f16_acc) || u.src(2).dtype() != ct ||
            !at.is_16bit_float() || at.count != 8 || bt != at.scalar_type().vec(4) ||
            (f16_acc && at.scalar != Scalar::Float16))
            unsupported(u, "a WMMA takes 8 and 4 lanes of one 16-bit float and 4 lanes of "
                           "float32 (or of float16, with float16 operands)");
        llvm::Value* a = val(u, 0);
        llvm::Value* b = val(u, 1);
        llvm::Value* c = val(u, 2);
        const bool bf16 = at.scalar == Scalar::BFloat16;
        if (target_ == Target::Nvptx) {
            llvm::Function* fn = llvm::Intrinsic::getDeclaration(
                &mod_, bf16      ? llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_bf16
                       : f16_acc ? llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_f16_f16
                                 : llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_f32_f32);
            // Operands in the intrinsic's order: A's 4 registers of two 16-bit values, B's 2,
            // then C: 4 floats, or 2 registers <2 x half>. An operand register is <2 x half>
            // for f16, i32 for bf16.
            std::vector<llvm::Value*> args;
            const auto params = fn->getFunctionType()->params();
            for (unsigned p = 0; p < params.size(); ++p) {
                llvm::Value* src = p < 4 ? a : p < 6 ? b : c;
                const unsigned at_reg = p < 4 ? p : p < 6 ? p - 4 : p - 6;
                if (params[p]->isFloatTy()) {
                    args.push_back(b_.CreateExtractElement(c, at_reg));
                    continue;
                }
                const int lo = static_cast<int>(2 * at_reg);
                llvm::Value* pair = b_.CreateShuffleVector(src, {lo, lo + 1});
                args.push_back(pair->getType() == params[p] ? pair
                                                            : b_.CreateBitCast(pair, params[p]));
            }
            llvm::Value* d = b_.CreateCall(fn, args);
            if (f16_acc) // two <2 x half>
                return b_.CreateShuffleVector(b_.CreateExtractValue(d, 0),
                                              b_.CreateExtractValue(d, 1), {0, 1, 2, 3});
            llvm::Value* out = llvm::PoisonValue::get(value_type(u.dtype(), u));
            for (unsigned r = 0; r < 4; ++r)
                out = b_.CreateInsertElement(out, b_.CreateExtractValue(d, r), r);
            return out;
        }
        if (target_ != Target::Emu) unsupported(u, "the CPU has no tensor cores");
        const void* hook = emu_hook(g_emu_mma, "mma hook");
        barriers_ = true; // a warp-wide step: the threads run as fibers
        llvm::IRBuilder<> eb(entry_);
        llvm::Type* f32 = b_.getFloatTy();
        auto* pa = eb.CreateAlloca(llvm::ArrayType::get(f32, 8));
        auto* pb = eb.CreateAlloca(llvm::ArrayType::get(f32, 4));
        auto* pc = eb.CreateAlloca(llvm::ArrayType::get(f32, 4));
        auto* vf8 = llvm::FixedVectorType::get(f32, 8);
        auto* vf4 = llvm::FixedVectorType::get(f32, 4);
        // The arrays are float-aligned: their vector stores and loads must not assume more.
        const llvm::Align four(4);
        b_.CreateAlignedStore(b_.CreateFPExt(a, vf8), pa, four);
        b_.CreateAlignedStore(b_.CreateFPExt(b, vf4), pb, four);
        b_.CreateAlignedStore(f16_acc ? b_.CreateFPExt(c, vf4) : c, pc, four);
        call_host(hook, b_.getVoidTy(),
                  {llvm::ConstantInt::get(b_.getInt64Ty(), cur_), pa, pb, pc});
        llvm::Value* d = b_.CreateAlignedLoad(vf4, pc, four);
        // A 16-bit accumulator: the mma's float32 result rounded once to Float16.
        return f16_acc ? b_.CreateFPTrunc(d, value_type(u.dtype(), u)) : d;
    }

    // Inline PTX `text` that reads and writes an accumulator `acc` (its registers $0 .. $regs - 1:
    // floats, or i32 pairs of halves, tied as inputs after `args`, whose constraints are
    // `middle`, each after a comma), returning the accumulator as a vector of type `vec`.
    llvm::Value* accumulator_asm(const std::string& text, const std::string& middle,
                                 std::vector<llvm::Value*> args, llvm::Value* acc, bool f16,
                                 llvm::Type* vec) {
        const auto lanes = static_cast<int64_t>(
            llvm::cast<llvm::FixedVectorType>(acc->getType())->getNumElements());
        const int64_t regs = f16 ? lanes / 2 : lanes;
        llvm::Type* reg_t = f16 ? b_.getInt32Ty() : b_.getFloatTy();
        std::string cons;
        for (int64_t r = 0; r < regs; ++r)
            cons += std::string(r == 0 ? "=" : ",=") + (f16 ? "r" : "f");
        cons += middle;
        for (int64_t r = 0; r < regs; ++r) {
            cons += "," + std::to_string(r);
            const int lo = static_cast<int>(2 * r);
            args.push_back(f16 ? b_.CreateBitCast(b_.CreateShuffleVector(acc, {lo, lo + 1}), reg_t)
                               : b_.CreateExtractElement(acc, static_cast<uint64_t>(r)));
        }
        std::vector<llvm::Type*> outs(static_cast<size_t>(regs), reg_t);
        llvm::Value* d = inline_asm(llvm::StructType::get(ctx_, outs), text, cons, args);
        auto* pair = llvm::FixedVectorType::get(b_.getHalfTy(), 2);
        llvm::Value* out = llvm::PoisonValue::get(vec);
        for (int64_t r = 0; r < regs; ++r) {
            llvm::Value* v = b_.CreateExtractValue(d, static_cast<unsigned>(r));
            if (!f16) {
                out = b_.CreateInsertElement(out, v, static_cast<uint64_t>(r));
                continue;
            }
            llvm::Value* two = b_.CreateBitCast(v, pair);
            for (unsigned e = 0; e < 2; ++e)
                out = b_.CreateInsertElement(out, b_.CreateExtractElement(two, e),
                                             static_cast<uint64_t>(2 * r + e));
        }
        return out;
    }

    // PTX inline assembly (what LLVM 19's NVPTX has no intrinsic for: Hopper's wgmma, fences).
    llvm::Value* inline_asm(llvm::Type* ret, const std::string& text,
                            const std::string& constraints, llvm::ArrayRef<llvm::Value*> args) {
        std::vector<llvm::Type*> types;
        for (llvm::Value* a : args) types.push_back(a->getType());
        auto* fty = llvm::FunctionType::get(ret, types, false);
        return b_.CreateCall(fty, llvm::InlineAsm::get(fty, text, constraints, true), args);
    }

    // WGMMA(a, b, c) {n, ks, a_mn, b_mn[, in flight]}: the warpgroup's ks wgmma.mma_async.m64nNk16,
    // one per 16 of k, committed and waited for (in flight: for the group before them only). Each
    // operand is described to the hardware by a 64-bit descriptor of its shared-memory address
    // (bits 0-13: address >> 4; 16-29: the leading byte offset >> 4; 32-45: the stride byte offset
    // >> 4; 62-63: 1, the 128-byte swizzle): a K-major tile has rows of 128 bytes, 8 of them (1024
    // bytes) apart from the next 8 (the stride), the next 16 of k 32 bytes on; an MN-major one has
    // atoms of 64 columns 16 ks x 128 bytes apart (the leading offset), each 8 rows of k 1024 bytes
    // from the next 8, the next 16 of k 2048 bytes on.
    llvm::Value* wgmma(const UOp& u) {
        const auto* a = std::get_if<std::vector<int64_t>>(&u.arg());
        const DType in = u.src(0).dtype().base(), ct = u.dtype();
        const bool arity = a != nullptr && (a->size() == 4 || a->size() == 5);
        const int64_t n = arity ? (*a)[0] : 0;
        const int64_t ks = arity ? (*a)[1] : 0;
        const int64_t in_flight = arity && a->size() == 5 ? (*a)[4] : 0;
        const bool f16_acc = ct.scalar == Scalar::Float16;
        if (n < 8 || n > 256 || n % 8 != 0 || ks < 1 || ks > 8 || ((*a)[2] & ~1) != 0 ||
            ((*a)[3] & ~1) != 0 || !in.is_16bit_float() || in.count != 1 ||
            u.src(1).dtype().base() != in || !is_shared(u.src(0)) || !is_shared(u.src(1)) ||
            (ct.scalar != Scalar::Float32 && !f16_acc) || (f16_acc && in != DType::Float16) ||
            ct.count != n / 2 || u.src(2).dtype() != ct || (in_flight & ~1) != 0)
            unsupported(u, "a WGMMA {n (8 .. 256, a multiple of 8), k-steps (1 .. 8), A and B "
                           "MN-major (0 or 1)[, in flight (0 or 1)]} reads 16-bit floats of "
                           "shared memory and accumulates n / 2 lanes of float32 (or of float16 "
                           "from float16)");
        const bool a_mn = (*a)[2] != 0, b_mn = (*a)[3] != 0;
        llvm::Type* i64 = b_.getInt64Ty();
        // Shared-window addresses: NVPTX's shared pointers are; EMU's are host addresses, less
        // the block memory's.
        llvm::Value* base = nullptr;
        if (target_ == Target::Emu) {
            llvm::Value* at = b_.CreateConstInBoundsGEP1_64(i64, vars_, n_vars_ + 6);
            base = b_.CreateLoad(i64, at, "shared");
        } else if (target_ != Target::Nvptx) {
            unsupported(u, "the CPU has no tensor cores");
        }
        const auto window = [&](size_t k) {
            llvm::Value* p = b_.CreatePtrToInt(ptr_src(u, k), i64);
            return base == nullptr ? p : b_.CreateSub(p, base);
        };
        llvm::Value* wa = window(0);
        llvm::Value* wb = window(1);
        const auto desc = [&](llvm::Value* addr, bool mn, int64_t sub) {
            const uint64_t lead = mn ? static_cast<uint64_t>(2048 * ks) >> 4 : 1;
            const uint64_t fixed = (lead << 16) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
            llvm::Value* at =
                b_.CreateAdd(addr, b_.getInt64(static_cast<uint64_t>((mn ? 2048 : 32) * sub)));
            llvm::Value* enc = b_.CreateLShr(b_.CreateAnd(at, b_.getInt64(0x3FFFF)), 4);
            return b_.CreateOr(enc, b_.getInt64(fixed));
        };
        std::vector<llvm::Value*> descs;
        for (int64_t sub = 0; sub < ks; ++sub) {
            descs.push_back(desc(wa, a_mn, sub));
            descs.push_back(desc(wb, b_mn, sub));
        }
        llvm::Value* c = val(u, 2);
        if (target_ == Target::Nvptx) {
            const int64_t regs = f16_acc ? n / 4 : n / 2;
            std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, $" +
                               std::to_string(regs + 2 * ks) + ", 0;\nwgmma.fence.sync.aligned;\n";
            std::string dlist = "{";
            for (int64_t r = 0; r < regs; ++r) dlist += (r == 0 ? "$" : ", $") + std::to_string(r);
            dlist += "}";
            const std::string tname = in == DType::BFloat16 ? "bf16" : "f16";
            for (int64_t sub = 0; sub < ks; ++sub)
                text += "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k16." +
                        (f16_acc ? "f16" : "f32") + "." + tname + "." + tname + " " + dlist +
                        ", $" + std::to_string(regs + 2 * sub) + ", $" +
                        std::to_string(regs + 2 * sub + 1) + ", p, 1, 1, " + (a_mn ? "1" : "0") +
                        ", " + (b_mn ? "1" : "0") + ";\n";
            text += "wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned " +
                    std::to_string(in_flight) + ";\n}";
            std::string middle;
            for (int64_t d = 0; d < 2 * ks; ++d) middle += ",l";
            std::vector<llvm::Value*> args = descs;
            args.push_back(b_.getInt32(1));
            middle += ",r";
            return accumulator_asm(text, middle, args, c, f16_acc, value_type(ct, u));
        }
        // EMU: the descriptors and this thread's accumulator to the warpgroup's step.
        const void* hook = emu_hook(g_emu_wgmma, "wgmma hook");
        barriers_ = true; // a warpgroup-wide step: the threads run as fibers
        llvm::IRBuilder<> eb(entry_);
        llvm::Type* f32 = b_.getFloatTy();
        auto* pd = eb.CreateAlloca(llvm::ArrayType::get(i64, static_cast<uint64_t>(2 * ks)));
        auto* pc = eb.CreateAlloca(llvm::ArrayType::get(f32, static_cast<uint64_t>(n / 2)));
        for (size_t d = 0; d < descs.size(); ++d)
            b_.CreateStore(descs[d], b_.CreateConstInBoundsGEP1_64(i64, pd, d));
        auto* vf = llvm::FixedVectorType::get(f32, static_cast<unsigned>(n / 2));
        const llvm::Align four(4);
        b_.CreateAlignedStore(f16_acc ? b_.CreateFPExt(c, vf) : c, pc, four);
        const uint64_t shape = static_cast<uint64_t>(n) | static_cast<uint64_t>(ks) << 16 |
                               uint64_t{a_mn} << 24 | uint64_t{b_mn} << 25 |
                               uint64_t{in == DType::BFloat16} << 26 | uint64_t{f16_acc} << 27 |
                               static_cast<uint64_t>(in_flight) << 28;
        call_host(hook, b_.getVoidTy(),
                  {llvm::ConstantInt::get(i64, cur_), pd, llvm::ConstantInt::get(i64, shape), pc});
        llvm::Value* d = b_.CreateAlignedLoad(vf, pc, four);
        return f16_acc ? b_.CreateFPTrunc(d, value_type(ct, u)) : d;
    }

    // WGMMA_WAIT(d): wgmma.wait_group 0, d's registers tied through it (so that nothing reads
    // them before the mma in flight have written them).
    llvm::Value* wgmma_wait(const UOp& u) {
        const DType ct = u.dtype();
        if (u.src(0).dtype() != ct || ct.count < 4 || ct.count > 128 ||
            (ct.scalar != Scalar::Float32 && ct.scalar != Scalar::Float16))
            unsupported(u, "a WGMMA_WAIT passes a WGMMA's accumulator (float32 or float16 lanes) "
                           "through");
        llvm::Value* d = val(u, 0);
        if (target_ == Target::Emu) {
            const void* hook = emu_hook(g_emu_wgmma_wait, "wgmma wait hook");
            call_host(hook, b_.getVoidTy(), {llvm::ConstantInt::get(b_.getInt64Ty(), cur_)});
            return d;
        }
        if (target_ != Target::Nvptx) unsupported(u, "the CPU has no tensor cores");
        return accumulator_asm("wgmma.wait_group.sync.aligned 0;", "", {}, d,
                               ct.scalar == Scalar::Float16, value_type(ct, u));
    }

    // COPY_ASYNC(dst, src): cp.async of src's 4, 8 or 16 bytes to shared memory; src gated off
    // copies zeros (src-size 0, from the buffer's start: nothing is read), dst gated off copies
    // nothing.
    void copy_async(const UOp& u) {
        const UOp& dst = u.src(0);
        const UOp& src = u.src(1);
        const DType vt = src.dtype().base();
        if (dst.op() != Op::Index || src.op() != Op::Index || !is_shared(dst) ||
            base_of(src).op() != Op::Param || dst.dtype().base() != vt)
            unsupported(u, "a COPY_ASYNC copies an INDEX of a buffer to an INDEX of shared "
                           "memory of the same dtype");
        const uint64_t bytes = mod_.getDataLayout().getTypeStoreSize(mem_type(vt, u));
        if (bytes != 4 && bytes != 8 && bytes != 16)
            unsupported(u, "cp.async copies 4, 8 or 16 bytes, not " + std::to_string(bytes));
        llvm::Value* dp = ptr_src(u, 0);
        llvm::Value* sp = ptr_src(u, 1);
        const auto dg = gates_.find(dst.get());
        const auto sg = gates_.find(src.get());
        when(dg == gates_.end() ? nullptr : dg->second, "cp", [&] {
            if (target_ == Target::Nvptx) {
                namespace I = llvm::Intrinsic;
                const bool zfill = sg != gates_.end();
                // By size (16, 8, 4 bytes) and zero fill (the gated-off source copies none).
                constexpr I::ID ids[3][2] = {
                    {I::nvvm_cp_async_cg_shared_global_16, I::nvvm_cp_async_cg_shared_global_16_s},
                    {I::nvvm_cp_async_ca_shared_global_8, I::nvvm_cp_async_ca_shared_global_8_s},
                    {I::nvvm_cp_async_ca_shared_global_4, I::nvvm_cp_async_ca_shared_global_4_s}};
                const I::ID id = ids[bytes == 16 ? 0 : bytes == 8 ? 1 : 2][zfill ? 1 : 0];
                std::vector<llvm::Value*> args{dp, sp};
                if (zfill) {
                    args[1] = b_.CreateSelect(sg->second, sp, ptr_src(src, 0));
                    args.push_back(b_.CreateSelect(
                        sg->second, b_.getInt32(static_cast<uint32_t>(bytes)), b_.getInt32(0)));
                }
                b_.CreateCall(llvm::Intrinsic::getDeclaration(&mod_, id), args);
                return;
            }
            if (target_ != Target::Emu) unsupported(u, "the CPU has no shared memory");
            const void* hook = emu_hook(g_emu_copy_async, "cp.async hook");
            // The source is read now (gated off: zeros, and nothing is read), the bytes land
            // at the wait.
            llvm::Value* v = load(UOp::make(Op::Load, vt, {src}));
            llvm::IRBuilder<> eb(entry_);
            llvm::Value* tmp = eb.CreateAlloca(mem_type(vt, u));
            b_.CreateAlignedStore(v, tmp, llvm::Align(1));
            llvm::Value* from = b_.CreatePtrToInt(sp, b_.getInt64Ty());
            if (sg != gates_.end()) from = b_.CreateSelect(sg->second, from, b_.getInt64(0));
            call_host(hook, b_.getVoidTy(),
                      {b_.CreatePtrToInt(dp, b_.getInt64Ty()), from,
                       llvm::ConstantInt::get(b_.getInt64Ty(), bytes), tmp});
        });
    }

    // LDMATRIX(row) {count, trans}: the warp's ldmatrix.sync.aligned.m8n8 of `count` 8 x 8
    // matrices of 16-bit values, this lane giving the address of one row (16 bytes of shared
    // memory) and receiving 2 values of each matrix.
    llvm::Value* ldmatrix(const UOp& u) {
        const auto* a = std::get_if<std::vector<int64_t>>(&u.arg());
        const UOp& row = u.src(0);
        if (a == nullptr || a->size() != 2 || ((*a)[0] != 1 && (*a)[0] != 2 && (*a)[0] != 4) ||
            ((*a)[1] != 0 && (*a)[1] != 1) || !u.dtype().is_16bit_float() ||
            u.dtype().count != 2 * (*a)[0] || row.op() != Op::Index || !is_shared(row) ||
            row.dtype().base() != u.dtype().scalar_type().vec(8))
            unsupported(u, "an LDMATRIX {1, 2 or 4 matrices, transposed 0 or 1} reads 8 16-bit "
                           "values of shared memory a lane and yields 2 a matrix");
        const int64_t count = (*a)[0];
        const bool trans = (*a)[1] != 0;
        llvm::Value* p = ptr_src(u, 0);
        llvm::Type* ty = value_type(u.dtype(), u);
        if (target_ == Target::Nvptx) {
            namespace I = llvm::Intrinsic;
            // By matrices (1, 2, 4) and transposition.
            constexpr I::ID ids[3][2] = {{I::nvvm_ldmatrix_sync_aligned_m8n8_x1_b16,
                                          I::nvvm_ldmatrix_sync_aligned_m8n8_x1_trans_b16},
                                         {I::nvvm_ldmatrix_sync_aligned_m8n8_x2_b16,
                                          I::nvvm_ldmatrix_sync_aligned_m8n8_x2_trans_b16},
                                         {I::nvvm_ldmatrix_sync_aligned_m8n8_x4_b16,
                                          I::nvvm_ldmatrix_sync_aligned_m8n8_x4_trans_b16}};
            const I::ID id = ids[count == 1 ? 0 : count == 2 ? 1 : 2][trans ? 1 : 0];
            llvm::Value* r =
                b_.CreateCall(llvm::Intrinsic::getDeclaration(&mod_, id, {p->getType()}), {p});
            // Registers (i32 each) as 16-bit pairs, in order.
            llvm::Value* out = llvm::PoisonValue::get(ty);
            auto* pair = llvm::FixedVectorType::get(ty->getScalarType(), 2);
            for (int64_t q = 0; q < count; ++q) {
                llvm::Value* reg =
                    count == 1 ? r : b_.CreateExtractValue(r, static_cast<unsigned>(q));
                llvm::Value* two = b_.CreateBitCast(reg, pair);
                for (unsigned e = 0; e < 2; ++e)
                    out = b_.CreateInsertElement(out, b_.CreateExtractElement(two, e),
                                                 static_cast<uint64_t>(2 * q + e));
            }
            return out;
        }
        if (target_ != Target::Emu) unsupported(u, "the CPU has no warps");
        const void* hook = emu_hook(g_emu_ldmatrix, "ldmatrix hook");
        barriers_ = true; // a warp-wide step: the threads run as fibers
        llvm::IRBuilder<> eb(entry_);
        llvm::Value* tmp = eb.CreateAlloca(ty);
        llvm::Type* i64 = b_.getInt64Ty();
        call_host(hook, b_.getVoidTy(),
                  {llvm::ConstantInt::get(i64, cur_), b_.CreatePtrToInt(p, i64),
                   llvm::ConstantInt::get(i64, static_cast<uint64_t>(count)),
                   llvm::ConstantInt::get(i64, trans ? 1 : 0), tmp});
        return b_.CreateAlignedLoad(ty, tmp, llvm::Align(2));
    }

    // ASYNC_WAIT {n}: cp.async.commit_group, then cp.async.wait_group n.
    void async_wait(const UOp& u) {
        const auto* a = std::get_if<std::vector<int64_t>>(&u.arg());
        if (a == nullptr || a->size() != 1 || (*a)[0] < 0 || (*a)[0] > 8)
            unsupported(u, "its arg must be {n}, 0 .. 8 groups left in flight");
        if (target_ == Target::Nvptx) {
            b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_commit_group, {}, {});
            b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_wait_group, {},
                               {b_.getInt32(static_cast<uint32_t>((*a)[0]))});
            return;
        }
        if (target_ != Target::Emu) unsupported(u, "the CPU has no asynchronous copies");
        const void* hook = emu_hook(g_emu_async_wait, "cp.async wait hook");
        call_host(hook, b_.getVoidTy(),
                  {llvm::ConstantInt::get(b_.getInt64Ty(), static_cast<uint64_t>((*a)[0]))});
    }

    llvm::Value* define_reg(const UOp& u) {
        if (!u.dtype().is_ptr) unsupported(u, "a DEFINE_REG must have a pointer dtype");
        // arg: {count, id} (the id keeps distinct registers distinct under hash-consing). The
        // elements may be vectors: T.vec(n).ptr(Reg) is an array of `count` <n x T>, promoted
        // to registers by SROA as the scalar case is.
        const int64_t* n = nullptr;
        if (const auto* v = std::get_if<std::vector<int64_t>>(&u.arg()); v && !v->empty())
            n = &v->front();
        if (n == nullptr || *n <= 0 || *n > (int64_t{1} << 20))
            unsupported(u, "its arg must be the element count (1 .. 2^20)");
        llvm::IRBuilder<> eb(entry_);
        auto* arr = llvm::ArrayType::get(mem_type(u.dtype(), u), static_cast<uint64_t>(*n));
        return eb.CreateAlloca(arr, nullptr, "reg" + std::to_string(cur_));
    }

    // ---- ALU ----------------------------------------------------------------------------------
    // double f(double) or float f(float) from the C library, applied to each lane; 16-bit floats
    // go through float.
    // fptrunc, but to bfloat on the CPU as integer arithmetic: round to nearest even on the
    // float's bits (a NaN stays a quiet NaN). LLVM lowers fptrunc to bfloat to a call of
    // __truncsfbf2 where the CPU lacks AVX512-BF16, and libgcc 12 does not have it: the JIT then
    // fails to link the kernel. NVPTX has cvt.rn.bf16.f32.
    llvm::Value* fp_trunc(llvm::Value* x, llvm::Type* ty) {
        if (target_ == Target::Nvptx || !ty->getScalarType()->isBFloatTy())
            return b_.CreateFPTrunc(x, ty);
        llvm::Type* src = x->getType();
        if (!src->getScalarType()->isFloatTy()) {
            llvm::Type* f32 = b_.getFloatTy();
            if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(src))
                f32 = llvm::FixedVectorType::get(f32, vt->getNumElements());
            x = b_.CreateFPTrunc(x, f32); // double -> float -> bfloat (see cast below)
            src = f32;
        }
        llvm::Type* i32 = b_.getInt32Ty();
        llvm::Type* i16 = b_.getInt16Ty();
        if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(src)) {
            i32 = llvm::FixedVectorType::get(i32, vt->getNumElements());
            i16 = llvm::FixedVectorType::get(i16, vt->getNumElements());
        }
        const auto k = [&](uint32_t v) { return llvm::ConstantInt::get(i32, v); };
        llvm::Value* bits = b_.CreateBitCast(x, i32);
        llvm::Value* odd = b_.CreateAnd(b_.CreateLShr(bits, k(16)), k(1));
        llvm::Value* rounded = b_.CreateAdd(bits, b_.CreateAdd(odd, k(0x7FFF)));
        llvm::Value* quiet = b_.CreateOr(bits, k(0x00400000));
        llvm::Value* out = b_.CreateSelect(b_.CreateFCmpUNO(x, x), quiet, rounded);
        return b_.CreateBitCast(b_.CreateTrunc(b_.CreateLShr(out, k(16)), i16), ty);
    }

    llvm::Value* libm_per_lane(const char* name, llvm::Value* x) {
        if (target_ == Target::Nvptx)
            fail("nvptx", where(cur_) + "no GPU lowering of " + name +
                              " (it would call the C library, and GPU kernels link no libdevice)");
        llvm::Type* ty = x->getType();
        llvm::Type* elem = ty->getScalarType();
        llvm::Type* ct = elem->isDoubleTy() ? b_.getDoubleTy() : b_.getFloatTy();
        llvm::FunctionCallee fn =
            mod_.getOrInsertFunction(name, llvm::FunctionType::get(ct, {ct}, false));
        auto one = [&](llvm::Value* v) {
            llvm::Value* in = v->getType() == ct ? v : b_.CreateFPExt(v, ct);
            llvm::Value* r = b_.CreateCall(fn, {in});
            return v->getType() == ct ? r : fp_trunc(r, v->getType());
        };
        auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(ty);
        if (vt == nullptr) return one(x);
        llvm::Value* out = llvm::PoisonValue::get(ty);
        for (unsigned i = 0; i < vt->getNumElements(); ++i)
            out = b_.CreateInsertElement(out, one(b_.CreateExtractElement(x, i)), i);
        return out;
    }

    llvm::Value* intrinsic(llvm::Intrinsic::ID id, llvm::ArrayRef<llvm::Value*> args) {
        return b_.CreateIntrinsic(id, {args[0]->getType()}, args);
    }

    // Integer division and remainder with C semantics, and no trap: x / 0 is 0 and x % 0 is 0,
    // and INT_MIN / -1 wraps to INT_MIN (x86's idiv would raise SIGFPE on both). On vectors the
    // same holds lane by lane (the selects below are per lane).
    llvm::Value* div_rem(bool rem, bool is_unsigned, llvm::Value* a, llvm::Value* d) {
        // A constant divisor (a vector's: a splat) that is neither 0 nor -1 needs no guard.
        const llvm::ConstantInt* c = llvm::dyn_cast<llvm::ConstantInt>(d);
        if (auto* cv = llvm::dyn_cast<llvm::Constant>(d);
            c == nullptr && cv != nullptr && d->getType()->isVectorTy())
            c = llvm::dyn_cast_or_null<llvm::ConstantInt>(cv->getSplatValue());
        if (c != nullptr && !c->isZero() && (is_unsigned || !c->isMinusOne())) {
            if (rem) return is_unsigned ? b_.CreateURem(a, d) : b_.CreateSRem(a, d);
            return is_unsigned ? b_.CreateUDiv(a, d) : b_.CreateSDiv(a, d);
        }
        llvm::Type* ty = d->getType();
        llvm::Value* zero = b_.CreateICmpEQ(d, llvm::ConstantInt::get(ty, 0));
        llvm::Value* one = llvm::ConstantInt::get(ty, 1);
        if (is_unsigned) {
            llvm::Value* ds = b_.CreateSelect(zero, one, d);
            if (rem) return b_.CreateURem(a, ds); // a % 1 == 0
            return b_.CreateSelect(zero, llvm::ConstantInt::get(ty, 0), b_.CreateUDiv(a, ds));
        }
        llvm::Value* minus1 = b_.CreateICmpEQ(d, llvm::ConstantInt::getSigned(ty, -1));
        llvm::Value* ds = b_.CreateSelect(b_.CreateOr(zero, minus1), one, d);
        if (rem) return b_.CreateSRem(a, ds); // a % 1 == a % -1 == 0
        llvm::Value* q = b_.CreateSelect(minus1, b_.CreateNeg(a), b_.CreateSDiv(a, ds));
        return b_.CreateSelect(zero, llvm::ConstantInt::get(ty, 0), q);
    }

    // fptosi.sat/fptoui.sat of the same meaning, for vectors: LLVM 19 scalarizes the vector
    // intrinsics on x86 (a convert, two compares and two cmovs per lane: a float32 exp2 spent
    // most of its time there). Clamp into the range a plain convert handles, convert, then
    // put back the values it cannot give: the type's max for x >= 2^bits (a float below that
    // power of two truncates to less than the max for 32 and 64 bits), 0 for NaN. A NaN takes
    // the low clamp first (an unordered compare), so the plain convert never sees it.
    llvm::Value* saturating_vector_cast(llvm::Value* x, llvm::Type* ty, DType to) {
        llvm::Type* ft = x->getType();
        const llvm::fltSemantics& sem = ft->getScalarType()->getFltSemantics();
        const unsigned bits = ty->getScalarSizeInBits();
        const bool is_unsigned = to.is_unsigned();
        // The bounds are powers of two, exact in float and double.
        llvm::APFloat lo(sem), top(sem);
        lo = llvm::APFloat(is_unsigned ? 0.0 : -std::ldexp(1.0, static_cast<int>(bits) - 1));
        top = llvm::APFloat(std::ldexp(1.0, static_cast<int>(is_unsigned ? bits : bits - 1)));
        bool lost = false;
        lo.convert(sem, llvm::APFloat::rmNearestTiesToEven, &lost);
        top.convert(sem, llvm::APFloat::rmNearestTiesToEven, &lost);
        llvm::APFloat below_top = top;
        below_top.next(/*nextDown=*/true);
        llvm::Value* lo_v = llvm::ConstantFP::get(ft, lo);
        llvm::Value* top_v = llvm::ConstantFP::get(ft, top);
        llvm::Value* below_v = llvm::ConstantFP::get(ft, below_top);
        llvm::Value* xc = b_.CreateSelect(b_.CreateFCmpOGE(x, lo_v), x, lo_v);
        xc = b_.CreateSelect(b_.CreateFCmpOGT(xc, below_v), below_v, xc);
        llvm::Value* r = is_unsigned ? b_.CreateFPToUI(xc, ty) : b_.CreateFPToSI(xc, ty);
        const llvm::APInt max =
            is_unsigned ? llvm::APInt::getMaxValue(bits) : llvm::APInt::getSignedMaxValue(bits);
        r = b_.CreateSelect(b_.CreateFCmpOGE(x, top_v), llvm::ConstantInt::get(ty, max), r);
        return b_.CreateSelect(b_.CreateFCmpUNO(x, x), llvm::ConstantInt::get(ty, 0), r);
    }

    // Lane by lane for vectors: S.vec(n) -> T.vec(n).
    llvm::Value* cast(const UOp& u, llvm::Value* x, DType from, DType to) {
        llvm::Type* ty = value_type(to, u);
        if (from.is_ptr || to.is_ptr) unsupported(u, "casts of pointers");
        if (from.count != to.count)
            unsupported(u, "a cast keeps the number of lanes (from " + from.name() + ")");
        if (to.is_bool()) {
            if (from.is_bool()) return x;
            if (from.is_float())
                return b_.CreateFCmpUNE(x, llvm::ConstantFP::get(x->getType(), 0.0));
            return b_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
        }
        if (from.is_bool()) return to.is_float() ? b_.CreateUIToFP(x, ty) : b_.CreateZExt(x, ty);
        if (from.is_int() && to.is_int()) {
            const unsigned fb = x->getType()->getScalarSizeInBits(), tb = ty->getScalarSizeInBits();
            if (fb == tb) return x;
            if (fb > tb) return b_.CreateTrunc(x, ty);
            return from.is_unsigned() ? b_.CreateZExt(x, ty) : b_.CreateSExt(x, ty);
        }
        if (from.is_int() && to.is_float())
            return from.is_unsigned() ? b_.CreateUIToFP(x, ty) : b_.CreateSIToFP(x, ty);
        if (from.is_float() && to.is_int()) {
            // Saturating, NaN -> 0 (tempura/ir/scalar.hpp): plain fptosi of an out-of-range
            // value is poison, which LLVM folds into a dropped store. Half and bfloat widen
            // to float first (exactly): LLVM 19 lowers fptosi.sat from half with AVX512-FP16's
            // vcvtph2w, which turns NaN into INT16_MIN.
            if (from.bits() < 32) x = b_.CreateFPExt(x, lanes(b_.getFloatTy(), to, u));
            if (x->getType()->isVectorTy() && target_ != Target::Nvptx)
                return saturating_vector_cast(x, ty, to);
            return b_.CreateIntrinsic(to.is_unsigned() ? llvm::Intrinsic::fptoui_sat
                                                       : llvm::Intrinsic::fptosi_sat,
                                      {ty, x->getType()}, {x});
        }
        if (from.is_float() && to.is_float()) {
            if (x->getType() == ty) return x;
            // half <-> bfloat go through float. double -> bfloat too: the runtime has no
            // __truncdfbf2 (libgcc 12), at the price of a double rounding in rare ties.
            llvm::Type* f32 = lanes(b_.getFloatTy(), to, u);
            if (from.bits() == to.bits()) return fp_trunc(b_.CreateFPExt(x, f32), ty);
            if (to.scalar == Scalar::BFloat16 && from.bits() > 32)
                return fp_trunc(b_.CreateFPTrunc(x, f32), ty);
            return from.bits() < to.bits() ? b_.CreateFPExt(x, ty) : fp_trunc(x, ty);
        }
        unsupported(u, "no cast from " + from.name() + " to " + to.name());
    }

    llvm::Value* alu(const UOp& u) {
        const Op op = u.op();
        const DType dt = u.dtype();
        if (dt.is_ptr) unsupported(u, "ALU ops on pointers");
        llvm::Type* ty = value_type(dt, u);
        std::vector<llvm::Value*> a;
        for (size_t k = 0; k < u.srcs().size(); ++k) a.push_back(val(u, k));
        const DType st = u.src(0).dtype(); // the operand dtype (differs from dt for compares)
        const bool f = dt.is_float(), i = dt.is_int(), b = dt.is_bool();
        const bool sf = st.is_float(), si = st.is_int(), sb = st.is_bool();
        // A signed add, sub or mul whose exact result bounds (ir/bounds.cpp: the whole range of
        // its dtype wherever it might wrap) lie inside its dtype cannot wrap: `nsw` lets LLVM
        // widen it and fold constant offsets into addresses. Index arithmetic, bounded by its
        // loops, is all of this kind: an index `base + 4608 * j` sign-extended for its address
        // otherwise costs an add and a sign extension per load (16 of 46 instructions in a
        // convolution's inner loop), where `nsw` makes it an address displacement.
        const bool nsw = i && !dt.is_unsigned() && (u.vmin() != dt.min() || u.vmax() != dt.max());
        // Operands must agree with each other and with the result, except where the op says.
        auto same = [&](size_t from, DType want) {
            for (size_t k = from; k < u.srcs().size(); ++k)
                if (u.src(k).dtype() != want)
                    unsupported(u, "source " + std::to_string(k) + " has dtype " +
                                       u.src(k).dtype().name() + ", expected " + want.name());
        };
        auto not_for = [&](const char* what) -> llvm::Value* {
            unsupported(u, std::string("not defined for ") + what);
        };

        switch (op) {
        // unary ---------------------------------------------------------------------------------
        case Op::Cast: return cast(u, a[0], st, dt);
        case Op::BitCast:
            if (st.is_bool() || b || st.bits() != dt.bits() || st.is_ptr || st.count != dt.count)
                unsupported(u, "a bitcast needs two non-bool dtypes of one size and one number of "
                               "lanes (from " +
                                   st.name() + ")");
            return b_.CreateBitCast(a[0], ty);
        case Op::Neg:
            same(0, dt);
            if (f) return b_.CreateFNeg(a[0]);
            if (i) return b_.CreateNeg(a[0]);
            return b_.CreateNot(a[0]); // bool: logical not
        case Op::Not:
            same(0, dt);
            if (f) return not_for("floats");
            return b_.CreateNot(a[0]);
        case Op::Exp2:
        case Op::Log2:
        case Op::Sin:
        case Op::Cos:
        case Op::Sqrt: {
            same(0, dt);
            if (!f) return not_for("non-float dtypes");
            const llvm::Intrinsic::ID id = op == Op::Exp2   ? llvm::Intrinsic::exp2
                                           : op == Op::Log2 ? llvm::Intrinsic::log2
                                           : op == Op::Sin  ? llvm::Intrinsic::sin
                                           : op == Op::Cos  ? llvm::Intrinsic::cos
                                                            : llvm::Intrinsic::sqrt;
            // The GPU has sqrt.rn in hardware; EXP2, LOG2, SIN and COS are decomposed for every
            // float dtype (the decompositions stage) and reach here only in a program built
            // without it, where the NVPTX target would call a library GPU kernels do not link.
            if (target_ == Target::Nvptx && op != Op::Sqrt)
                fail("nvptx", where(cur_) + "no GPU lowering of " + describe(u) +
                                  " (it would call the C library, and GPU kernels link no "
                                  "libdevice)");
            return intrinsic(id, {a[0]});
        }
        case Op::Erf:
            // ERF is decomposed for every float dtype (early_decompositions); a program built
            // without that stage calls libm's erf/erff once per lane.
            same(0, dt);
            if (!f) return not_for("non-float dtypes");
            return libm_per_lane(dt.bits() == 64 ? "erf" : "erff", a[0]);
        case Op::Recip:
            same(0, dt);
            if (!f) return not_for("non-float dtypes");
            return b_.CreateFDiv(llvm::ConstantFP::get(ty, 1.0), a[0]);
        case Op::Trunc:
            same(0, dt);
            if (f) return intrinsic(llvm::Intrinsic::trunc, {a[0]});
            return a[0]; // integers are whole already
        // binary --------------------------------------------------------------------------------
        case Op::Add:
            same(0, dt);
            if (f) return b_.CreateFAdd(a[0], a[1]);
            if (i) return b_.CreateAdd(a[0], a[1], "", false, nsw);
            return b_.CreateOr(a[0], a[1]);
        case Op::Sub:
            same(0, dt);
            if (f) return b_.CreateFSub(a[0], a[1]);
            if (i) return b_.CreateSub(a[0], a[1], "", false, nsw);
            return not_for("bool");
        case Op::Mul:
            same(0, dt);
            if (f) return b_.CreateFMul(a[0], a[1]);
            if (i) return b_.CreateMul(a[0], a[1], "", false, nsw);
            return b_.CreateAnd(a[0], a[1]);
        case Op::Idiv:
        case Op::Mod:
            same(0, dt);
            if (i) return div_rem(op == Op::Mod, dt.is_unsigned(), a[0], a[1]);
            if (f && op == Op::Mod) return b_.CreateFRem(a[0], a[1]); // fmod
            return not_for(f ? "floats (use FDIV)" : "bool");
        case Op::Fdiv:
            same(0, dt);
            if (!f) return not_for("non-float dtypes (use IDIV)");
            return b_.CreateFDiv(a[0], a[1]);
        case Op::Max:
            same(0, dt);
            // NaN propagates (IEEE 754-2019 maximum), as NumPy's maximum and the reference do;
            // maxnum would drop it.
            if (f) return b_.CreateMaximum(a[0], a[1]);
            if (i)
                return b_.CreateBinaryIntrinsic(
                    dt.is_unsigned() ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, a[0], a[1]);
            return not_for("bool (the cpu_lowering rules make it an OR)");
        case Op::Pow:
            same(0, dt);
            if (!f) return not_for("non-float dtypes");
            if (target_ == Target::Nvptx) // decomposed before this; the GPU has no pow
                fail("nvptx", where(cur_) + "no GPU lowering of " + describe(u));
            return intrinsic(llvm::Intrinsic::pow, {a[0], a[1]});
        case Op::Shl:
        case Op::Shr:
            same(0, dt);
            if (!i) return not_for("non-integer dtypes");
            {
                // A shift by the width or more gives 0 (or the sign, shifting right
                // arithmetically), as tempura/ir/scalar.hpp defines; LLVM's own shifts would be
                // poison there.
                llvm::Type* ty = a[0]->getType();
                const unsigned width = ty->getScalarSizeInBits();
                llvm::Value* big =
                    b_.CreateICmpUGE(a[1], llvm::ConstantInt::get(ty, width)); // negative: huge
                llvm::Value* amount = b_.CreateSelect(big, llvm::ConstantInt::get(ty, 0), a[1]);
                if (op == Op::Shl)
                    return b_.CreateSelect(big, llvm::ConstantInt::get(ty, 0),
                                           b_.CreateShl(a[0], amount));
                if (dt.is_unsigned())
                    return b_.CreateSelect(big, llvm::ConstantInt::get(ty, 0),
                                           b_.CreateLShr(a[0], amount));
                // Arithmetic: shifting by width - 1 fills with the sign, which is what a bigger
                // shift means.
                llvm::Value* clamped =
                    b_.CreateSelect(big, llvm::ConstantInt::get(ty, width - 1), a[1]);
                return b_.CreateAShr(a[0], clamped);
            }
        case Op::And:
        case Op::Or:
        case Op::Xor:
            same(0, dt);
            if (f) return not_for("floats");
            if (op == Op::And) return b_.CreateAnd(a[0], a[1]);
            if (op == Op::Or) return b_.CreateOr(a[0], a[1]);
            return b_.CreateXor(a[0], a[1]);
        case Op::CmpLt:
        case Op::CmpNe:
        case Op::CmpEq:
            if (dt != DType::Bool.vec(st.count))
                unsupported(u, "a comparison of " + st.name() + " yields " +
                                   DType::Bool.vec(st.count).name());
            same(1, st);
            if (st.is_ptr) return not_for("pointers");
            if (sf) {
                // Ordered compares (false on NaN), except != which is true on NaN, as in C.
                if (op == Op::CmpLt) return b_.CreateFCmpOLT(a[0], a[1]);
                if (op == Op::CmpEq) return b_.CreateFCmpOEQ(a[0], a[1]);
                return b_.CreateFCmpUNE(a[0], a[1]);
            }
            if (op == Op::CmpEq) return b_.CreateICmpEQ(a[0], a[1]);
            if (op == Op::CmpNe) return b_.CreateICmpNE(a[0], a[1]);
            if (si && !st.is_unsigned()) return b_.CreateICmpSLT(a[0], a[1]);
            if (si || sb) return b_.CreateICmpULT(a[0], a[1]); // false < true
            return not_for("this operand dtype");
        // ternary -------------------------------------------------------------------------------
        case Op::Where:
            if (st != DType::Bool.vec(dt.count))
                unsupported(u, "WHERE's condition must be " + DType::Bool.vec(dt.count).name() +
                                   ", got " + st.name());
            same(1, dt);
            return b_.CreateSelect(a[0], a[1], a[2]);
        case Op::MulAcc:
            same(0, dt);
            if (f) return b_.CreateIntrinsic(llvm::Intrinsic::fma, {ty}, {a[0], a[1], a[2]});
            if (i) return b_.CreateAdd(b_.CreateMul(a[0], a[1]), a[2]);
            return not_for("bool");
            // Every op of the table that is not an ALU op: none reaches here (emit() sends only ALU
            // ops). There is no `default`: an ALU op added to the table without a lowering here is
            // a compile error (-Wswitch, an error in this file).
#define TEMPURA_NON_ALU_Unary(e)
#define TEMPURA_NON_ALU_Binary(e)
#define TEMPURA_NON_ALU_Ternary(e)
#define TEMPURA_NON_ALU_Const(e) case Op::e:
#define TEMPURA_NON_ALU_Define(e) case Op::e:
#define TEMPURA_NON_ALU_Memory(e) case Op::e:
#define TEMPURA_NON_ALU_Movement(e) case Op::e:
#define TEMPURA_NON_ALU_Reduce(e) case Op::e:
#define TEMPURA_NON_ALU_Control(e) case Op::e:
#define TEMPURA_NON_ALU_Vector(e) case Op::e:
#define TEMPURA_NON_ALU_Expansion(e) case Op::e:
#define TEMPURA_NON_ALU_Structure(e) case Op::e:
#define TEMPURA_NON_ALU_Hardware(e) case Op::e:
#define TEMPURA_NON_ALU_Tensor(e) case Op::e:
#define TEMPURA_X(e, n, a, m, c, f, r, k) TEMPURA_NON_ALU_##c(e)
            TEMPURA_OPS(TEMPURA_X)
#undef TEMPURA_X
            break;
        }
        unsupported(u, "not an ALU op the CPU backend knows");
    }

    // ---- vectors ------------------------------------------------------------------------------
    // VECTORIZE: T.vec(n) from exactly n scalars of dtype T (a splat when they are one UOp).
    llvm::Value* vectorize(const UOp& u) {
        const DType dt = u.dtype();
        if (dt.is_ptr || dt.count < 2)
            unsupported(u, "a VECTORIZE builds a vector of 2 or more lanes");
        const DType et = dt.scalar_type();
        llvm::Type* ty = value_type(dt, u);
        if (u.srcs().size() != dt.count)
            unsupported(u, "it takes " + std::to_string(dt.count) + " sources of dtype " +
                               et.name() + ", got " + std::to_string(u.srcs().size()));
        std::vector<llvm::Value*> xs;
        bool splat = true;
        for (size_t k = 0; k < u.srcs().size(); ++k) {
            xs.push_back(typed_src(u, k, et));
            splat = splat && u.src(k).same(u.src(0));
        }
        if (splat) return b_.CreateVectorSplat(dt.count, xs[0]);
        llvm::Value* v = llvm::PoisonValue::get(ty);
        for (size_t k = 0; k < xs.size(); ++k) v = b_.CreateInsertElement(v, xs[k], k);
        return v;
    }

    // GEP: lanes of a vector; one lane is a scalar (extractelement), k >= 2 lanes a vector of k
    // (shufflevector).
    llvm::Value* gep(const UOp& u) {
        const DType dt = u.dtype();
        if (u.srcs().size() != 1) unsupported(u, "a GEP takes one vector source");
        const DType st = u.src(0).dtype();
        if (st.is_ptr || dt.is_ptr) unsupported(u, "GEP of pointers");
        if (st.count < 2) unsupported(u, "source 0 has dtype " + st.name() + ", expected a vector");
        llvm::Value* v = val(u, 0);
        // UOp::make checked the lanes against the source and the dtype.
        const auto& lanes = u.arg_as<std::vector<int64_t>>();
        if (lanes.size() == 1)
            return b_.CreateExtractElement(v, static_cast<uint64_t>(lanes.front()));
        std::vector<int> mask;
        for (int64_t l : lanes) mask.push_back(static_cast<int>(l));
        return b_.CreateShuffleVector(v, mask);
    }

    // ---- dispatch -----------------------------------------------------------------------------
    llvm::Value* emit(const UOp& u) {
        if (is_alu(u.op())) return alu(u);
        switch (u.op()) {
        case Op::Const: return constant(u);
        case Op::Vectorize: return vectorize(u);
        case Op::Gep: return gep(u);
        case Op::Param: return param(u);
        case Op::DefineVar: return define_var(u);
        case Op::Special: return special(u);
        case Op::DefineLocal: return define_local(u);
        case Op::Barrier: barrier(u); return nullptr;
        case Op::Wmma: return wmma(u);
        case Op::Wgmma: return wgmma(u);
        case Op::WgmmaWait: return wgmma_wait(u);
        case Op::DefineReg: return define_reg(u);
        case Op::Index: return index(u);
        case Op::Load: return load(u);
        case Op::Store: store(u); return nullptr;
        case Op::CopyAsync: copy_async(u); return nullptr;
        case Op::AsyncWait: async_wait(u); return nullptr;
        case Op::LdMatrix: return ldmatrix(u);
        case Op::Range: return open_range(u);
        case Op::End: close_ranges(u); return nullptr;
        case Op::If: open_if(u); return nullptr;
        case Op::EndIf: close_if(u); return nullptr;
        case Op::After: return val(u, 0); // ordering only: the value of its first source
        case Op::Sink:
        case Op::Group:
        default: break;
        }
        unsupported(u, "not an op of the linearized CPU kernel (docs/KERNEL_IR.md section 2)");
    }

    llvm::LLVMContext& ctx_;
    llvm::Module& mod_;
    mutable llvm::IRBuilder<> b_; // its type getters are non-const
    std::string kernel_;
    Target target_;
    int64_t max_threads_;
    int64_t n_slots_ = 0; // 1 + the highest PARAM slot
    uint64_t shared_bytes_ = 0;
    bool dynamic_shared_ = false;                  // NVPTX: DEFINE_LOCALs over 48 KiB
    bool wgmma_ = false;                           // the program has a WGMMA
    llvm::GlobalVariable* dynamic_smem_ = nullptr; // their one dynamic array
    bool barriers_ = false;
    size_t n_vars_ = 0; // DEFINE_VARs
    llvm::Function* fn_ = nullptr;
    llvm::BasicBlock* entry_ = nullptr;
    llvm::Value* buffers_ = nullptr;
    llvm::Value* vars_ = nullptr;
    std::unordered_map<const UOpNode*, size_t> pos_;
    std::unordered_map<const UOpNode*, llvm::Value*> gates_; // INDEX -> its gate
    // PARAM slot -> (its alias scope, the scopes of every other slot)
    std::unordered_map<int64_t, std::pair<llvm::MDNode*, llvm::MDNode*>> scope_md_;
    std::vector<llvm::Value*> vals_;
    std::vector<Frame> frames_;
    size_t cur_ = 0;
    size_t var_count_ = 0;
    int64_t max_slot_ = -1;
};

} // namespace

std::string sanitize(const std::string& name) {
    std::string s;
    for (char c : name.substr(0, 48))
        s += (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_') ? c : '_';
    return s.empty() ? "kernel" : s;
}

llvm::Function* render_kernel(llvm::Module& module, const std::string& symbol,
                              const std::string& kernel, const std::vector<UOp>& linear,
                              RenderInfo& info, Target target, int64_t max_threads) {
    Renderer r(module, kernel, target, max_threads);
    return r.render(symbol, linear, info);
}

void set_emu_hooks(const EmuHooks& hooks) {
    g_emu_fault.store(hooks.fault);
    g_emu_shared.store(hooks.shared);
    g_emu_barrier.store(hooks.barrier);
    g_emu_mma.store(hooks.mma);
    g_emu_copy_async.store(hooks.copy_async);
    g_emu_async_wait.store(hooks.async_wait);
    g_emu_ldmatrix.store(hooks.ldmatrix);
    g_emu_wgmma.store(hooks.wgmma);
    g_emu_wgmma_wait.store(hooks.wgmma_wait);
}

} // namespace tempura::llvm_backend
