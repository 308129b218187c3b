// EMU, the emulated GPU: a GPU program's per-thread code JIT-compiled for the host (the shared
// renderer's Target::Emu: SPECIAL ids read from the variables, every access checked), run for
// every thread of every block. Blocks run in parallel on the worker threads. Within a block, the
// threads of a kernel without barriers run one after another, the last first; with barriers each
// thread is a fiber (ucontext) that runs until the next barrier, and the block moves on when every
// thread has reached it. Shared memory is per block, filled with NaN bits when the block starts,
// and every shared access goes through a shadow record per byte (last writer, readers,
// barrier epoch) that reports a race between two barriers: the missing-barrier bug a lockstep
// emulator cannot see.
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/llvm_cpu/render.hpp"
#include "tempura/backend/gpu.hpp"
#include "tempura/error.hpp"
#include "tempura/runtime/thread_pool.hpp"
#include "tempura/support/lru_cache.hpp"
#include "tensor/convert.hpp"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEMPURA_ASAN_BUILD 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(TEMPURA_ASAN_BUILD)
#include <sanitizer/common_interface_defs.h>
#define TEMPURA_ASAN_FIBERS 1
#endif

namespace tempura::runtime {

namespace {

std::string triple(int64_t x, int64_t y, int64_t z) {
    return "(" + std::to_string(x) + ", " + std::to_string(y) + ", " + std::to_string(z) + ")";
}

// A shared byte's accesses since the last barrier (epoch): who wrote it, who read it (threads of
// a block, at most 32767; -2 - g: warpgroup g's WGMMA, Block::who). Per byte, not per word:
// neighbouring threads may write the two halves of a word (16-bit tiles with an odd row length),
// which is no race on a GPU.
struct Shadow {
    int16_t writer = -1, reader = -1, other_reader = -1; // other_reader: a second one
    bool many_readers = false;
    uint32_t write_epoch = 0, read_epoch = 0;
};

constexpr size_t kStackBytes = 64 * 1024;

// Fiber stacks: one mapping per host thread, reused block after block (a block of 1024
// threads needs 1024 stacks: allocating 64 MiB per block cost more than small kernels run), with
// an inaccessible guard page below the lowest stack. The region is two kernel mappings however
// many stacks it holds (vm.max_map_count stays far away with many workers). A stack that
// overflows runs into its lower neighbour, so each stack's lowest bytes hold a canary that the
// block checks whenever a fiber comes back: an overflow is reported as an error and the block
// (whose other stacks it may have damaged) runs no further.
class StackRegion {
  public:
    ~StackRegion() { release(); }
    // Room for n stacks, each with its canary written.
    void reserve(size_t n) {
        if (n > count_) {
            release();
            const size_t bytes = n * kStackBytes + page();
            void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m == MAP_FAILED)
                fail("emu", "cannot map " + std::to_string(n) + " fiber stacks of " +
                                std::to_string(kStackBytes / 1024) + " KiB for a block");
            if (mprotect(m, page(), PROT_NONE) != 0) {
                munmap(m, bytes);
                fail("emu", "cannot protect the guard page below the fiber stacks");
            }
            base_ = static_cast<char*>(m) + page();
            count_ = n;
        }
        for (size_t i = 0; i < n; ++i) std::memset(stack(i), kCanary, kCanaryBytes);
    }
    char* stack(size_t i) const { return base_ + i * kStackBytes; }
    bool intact(size_t i) const {
        const char* c = stack(i);
        for (size_t k = 0; k < kCanaryBytes; ++k)
            if (c[k] != kCanary) return false;
        return true;
    }

  private:
    static constexpr size_t kCanaryBytes = 256;
    static constexpr char kCanary = 0x5a;
    static size_t page() {
        static const size_t g = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        return g;
    }
    void release() {
        if (base_ != nullptr) munmap(base_ - page(), count_ * kStackBytes + page());
        base_ = nullptr;
        count_ = 0;
    }
    char* base_ = nullptr;
    size_t count_ = 0;
};
thread_local StackRegion t_stacks;

// A thread's asynchronous copies (COPY_ASYNC) in flight: each lands in shared memory at the
// ASYNC_WAIT that retires its group.
struct AsyncCopies {
    struct Copy {
        int64_t address = 0, bytes = 0, group = 0;
        std::array<unsigned char, 16> data{};
    };
    std::vector<Copy> pending;
    int64_t committed = 0; // groups committed so far; a copy joins group `committed`
};

// The warp- and warpgroup-wide steps a thread waits at as at a barrier: the scheduler runs one
// (its *_step) once every thread of the block has reached it. By Collective: the op, the PTX
// instruction, and the threads that take part together.
enum class Collective { None, Mma, Ldmatrix, Wgmma };
struct CollectiveInfo {
    const char *op, *instruction;
    int64_t group;
    const char* unit;
};
constexpr CollectiveInfo kCollectives[] = {{"", "", 1, ""},
                                           {"WMMA", "an mma", 32, "warp"},
                                           {"LDMATRIX", "an ldmatrix", 32, "warp"},
                                           {"WGMMA", "a wgmma", 128, "warpgroup"}};

struct Fiber {
    ucontext_t ctx{};
    char* stack = nullptr; // in this host thread's StackRegion
    std::vector<int64_t> vars;
    int64_t tid = 0;
    bool done = false;
    int64_t barrier_at = -1;          // the program position of the barrier it waits at
    int64_t barriers = 0;             // barriers passed so far
    Collective at = Collective::None; // the step it waits at, if any (its operands below)
    float *a = nullptr, *b = nullptr, *cd = nullptr; // waiting at a WMMA: its fragments
    // Waiting at an LDMATRIX: its row's address, the matrices (1, 2, 4), transposed, and where
    // its registers go (2 16-bit values a matrix).
    uint16_t* ldm_out = nullptr;
    int64_t ldm_address = 0, ldm_count = 0, ldm_trans = 0;
    // Waiting at a WGMMA: its descriptors, shape and accumulator.
    const int64_t* wg_desc = nullptr;
    int64_t wg_shape = 0;
    float* wg_cd = nullptr;
    AsyncCopies copies; // its cp.async in flight
};

// What the block running on this host thread is doing (the hooks read it).
struct Block {
    const CompiledKernel* kernel = nullptr;
    void* const* buffers = nullptr;
    std::array<int64_t, 3> block_dims{}, block_id{};
    // Shared memory: 1024-byte aligned (as a GPU's block has it: the swizzled tiles that WGMMA
    // reads start at such boundaries), `shared_size` bytes from `shared`.
    std::vector<unsigned char> shared_storage;
    unsigned char* shared = nullptr;
    size_t shared_size = 0;
    std::vector<Shadow> shadow;
    uint32_t epoch = 1;
    // Per warpgroup, the shared addresses (2 bytes each) its WGMMA left in flight reads: read
    // again (for the race detector) in every epoch until a WGMMA or WGMMA_WAIT retires it, as
    // the hardware may read them any time until then.
    std::vector<std::vector<int64_t>> wg_pending;
    int64_t tid = 0;         // the thread running now
    AsyncCopies solo_copies; // the running thread's cp.async when the block runs no fibers
    std::string error;
    // fibers
    ucontext_t scheduler{};
    Fiber* running = nullptr;
    // ASan: the scheduler's stack, learned when a fiber starts or resumes (fiber switches are
    // announced to ASan, which otherwise takes a fiber's stack for a corrupt one).
    const void* sched_bottom = nullptr;
    size_t sched_size = 0;

    std::string thread(int64_t t) const {
        return triple(t % block_dims[0], t / block_dims[0] % block_dims[1],
                      t / (block_dims[0] * block_dims[1]));
    }
    // Who `t` is: a thread, or (t <= -2) warpgroup -2 - t's WGMMA, whose shared reads are no
    // thread's (the race detector then never takes them for the reading thread's own).
    std::string who(int64_t t) const {
        if (t <= -2) return "the WGMMA of the warpgroup of thread " + thread(128 * (-2 - t));
        return "thread " + thread(t);
    }
    std::string where(int64_t t) const {
        return "kernel " + kernel->name() + ": block " +
               triple(block_id[0], block_id[1], block_id[2]) + ", " + who(t) + ": ";
    }
    void problem(const std::string& what) {
        if (error.empty()) error = what;
    }
};
thread_local Block* t_block = nullptr;

void on_fault(int64_t slot, int64_t numel, int64_t offset, int64_t lanes, int64_t store) {
    Block* b = t_block;
    if (b == nullptr || !b->error.empty()) return;
    b->problem(b->where(b->tid) + (store != 0 ? "STORE" : "LOAD") +
               (lanes > 1 ? " of " + std::to_string(lanes) + " elements" : "") + " at element " +
               std::to_string(offset) + " of buffer " + std::to_string(slot) + " (" +
               std::to_string(numel) + " elements)");
}

int64_t on_shared(int64_t address, int64_t bytes, int64_t store) {
    Block* b = t_block;
    if (b == nullptr) return 0;
    const auto base = reinterpret_cast<int64_t>(b->shared);
    const int64_t off = address - base, size = static_cast<int64_t>(b->shared_size);
    const char* what = store != 0 ? "STORE" : "LOAD";
    if (off < 0 || off + bytes > size) {
        b->problem(b->where(b->tid) + "shared " + what + " of " + std::to_string(bytes) +
                   " bytes at byte " + std::to_string(off) + " is outside the block's " +
                   std::to_string(size) + " bytes of shared memory");
        return 0;
    }
    const auto tid = static_cast<int16_t>(b->tid);
    for (int64_t w = off; w < off + bytes; ++w) {
        Shadow& s = b->shadow[static_cast<size_t>(w)];
        const auto word = [&] { return "shared byte " + std::to_string(w); };
        if (s.write_epoch == b->epoch && s.writer != tid)
            b->problem(b->where(b->tid) + "shared-memory race: " + what + " of " + word() +
                       " written by " + b->who(s.writer) + " since the last barrier");
        if (store != 0) {
            if (s.read_epoch == b->epoch && (s.many_readers || s.reader != tid))
                b->problem(b->where(b->tid) + "shared-memory race: STORE of " + word() +
                           " read by " + b->who(s.reader != tid ? s.reader : s.other_reader) +
                           " since the last barrier");
            s.writer = tid;
            s.write_epoch = b->epoch;
        } else if (s.read_epoch != b->epoch) {
            s.read_epoch = b->epoch;
            s.reader = tid;
            s.other_reader = -1;
            s.many_readers = false;
        } else if (s.reader != tid) {
            s.many_readers = true;
            s.other_reader = tid;
        }
    }
    return 1;
}

// Scheduler -> fiber.
void enter(Fiber& f, ucontext_t* scheduler) {
#ifdef TEMPURA_ASAN_FIBERS
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, f.stack, kStackBytes);
    swapcontext(scheduler, &f.ctx);
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    swapcontext(scheduler, &f.ctx);
#endif
}

// The running thread's fiber; null when the kernel does not run as fibers (nothing to wait for).
Fiber* running_fiber() { return t_block == nullptr ? nullptr : t_block->running; }

// The thread waits at the barrier: back to the block's scheduler.
void on_barrier(int64_t position) {
    Fiber* f = running_fiber();
    if (f == nullptr) return;
    Block* b = t_block;
    f->barrier_at = position;
    ++f->barriers;
#ifdef TEMPURA_ASAN_FIBERS
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, b->sched_bottom, b->sched_size);
    swapcontext(&f->ctx, &b->scheduler);
    __sanitizer_finish_switch_fiber(fake, &b->sched_bottom, &b->sched_size);
#else
    swapcontext(&f->ctx, &b->scheduler);
#endif
}

// The running fiber waits at collective step `c` (its operands recorded already).
void wait_at(Fiber* f, Collective c, int64_t position) {
    f->at = c;
    on_barrier(position);
}

// The thread's WMMA: its fragments are left for the warp's step, which the scheduler computes
// when the warp's 32 threads have arrived (mma_step).
void on_mma(int64_t position, float* a, float* bf, float* cd) {
    Fiber* f = running_fiber();
    if (f == nullptr) return;
    f->a = a;
    f->b = bf;
    f->cd = cd;
    wait_at(f, Collective::Mma, position);
}

// D = A B + C for each warp of the block whose threads wait at a WMMA, from their fragments
// (see src/codegen/tensor_cores.cpp for the layout); float32 products of the 16-bit inputs are
// exact, and the sums are in float32 in k order (a Float16 accumulator's D is this rounded once
// to Float16 by the kernel).
void mma_step(std::vector<Fiber>& fibers) {
    for (size_t w = 0; w + 32 <= fibers.size(); w += 32) {
        float A[16][16], B[16][8], C[16][8];
        for (size_t l = 0; l < 32; ++l) {
            const Fiber& f = fibers[w + l];
            const size_t g = l / 4, t = l % 4;
            for (size_t r = 0; r < 8; ++r)
                A[g + 8 * ((r >> 1) & 1)][2 * t + (r & 1) + 8 * (r >> 2)] = f.a[r];
            for (size_t r = 0; r < 4; ++r) B[2 * t + (r & 1) + 8 * (r >> 1)][g] = f.b[r];
            for (size_t r = 0; r < 4; ++r) C[g + 8 * (r >> 1)][2 * t + (r & 1)] = f.cd[r];
        }
        for (size_t l = 0; l < 32; ++l) {
            Fiber& f = fibers[w + l];
            const size_t g = l / 4, t = l % 4;
            for (size_t r = 0; r < 4; ++r) {
                const size_t row = g + 8 * (r >> 1), col = 2 * t + (r & 1);
                float d = C[row][col];
                for (size_t x = 0; x < 16; ++x) d += A[row][x] * B[x][col];
                f.cd[r] = d;
            }
        }
    }
}

void check_copies_waited(Block& b, int64_t tid, AsyncCopies& c);

// The thread's LDMATRIX: its row is read (a shared load of 16 bytes, checked now) and its
// registers filled by the warp's step (ldmatrix_step) when the warp's 32 threads have arrived.
void on_ldmatrix(int64_t position, int64_t address, int64_t count, int64_t trans, uint16_t* out) {
    Fiber* f = running_fiber();
    if (f == nullptr) return;
    Block* b = t_block;
    // Only lanes 0 .. 8 count - 1 give addresses: the others' are not read.
    if (f->tid % 32 < 8 * count) {
        if (address % 16 != 0) {
            b->problem(b->where(b->tid) + "LDMATRIX row address " + std::to_string(address % 16) +
                       " bytes past a 16-byte boundary (ldmatrix needs 16-byte aligned rows)");
            return;
        }
        if (on_shared(address, 16, 0) == 0) return;
    }
    f->ldm_out = out;
    f->ldm_address = address;
    f->ldm_count = count;
    f->ldm_trans = trans;
    wait_at(f, Collective::Ldmatrix, position);
}

// PTX ldmatrix.m8n8.b16 for each warp waiting at one: lane 8 q + r gives the address of row r of
// matrix q (8 16-bit values); lane l's register q holds matrix q's row l / 4, values 2 (l % 4)
// and 2 (l % 4) + 1, or transposed, rows 2 (l % 4) and 2 (l % 4) + 1 of column l / 4.
void ldmatrix_step(std::vector<Fiber>& fibers) {
    for (size_t w = 0; w + 32 <= fibers.size(); w += 32) {
        uint16_t m[4][8][8];
        const auto count = static_cast<size_t>(fibers[w].ldm_count);
        for (size_t q = 0; q < count; ++q)
            for (size_t r = 0; r < 8; ++r)
                std::memcpy(m[q][r],
                            reinterpret_cast<const void*>(fibers[w + 8 * q + r].ldm_address), 16);
        for (size_t l = 0; l < 32; ++l) {
            Fiber& f = fibers[w + l];
            for (size_t q = 0; q < count; ++q)
                for (size_t e = 0; e < 2; ++e)
                    f.ldm_out[2 * q + e] = fibers[w].ldm_trans != 0 ? m[q][2 * (l % 4) + e][l / 4]
                                                                    : m[q][l / 4][2 * (l % 4) + e];
        }
    }
}

// Warpgroup g's mma in flight read their operands again now (the race detector's view of a read
// that may happen any time until it is retired); `retire` then forgets them.
void reread_pending(Block& b, size_t g, bool retire) {
    if (g >= b.wg_pending.size() || b.wg_pending[g].empty()) return;
    const int64_t saved = b.tid;
    b.tid = -2 - static_cast<int64_t>(g);
    for (const int64_t address : b.wg_pending[g])
        if (on_shared(address, 2, 0) == 0) break;
    b.tid = saved;
    if (retire) b.wg_pending[g].clear();
}

// The thread's WGMMA_WAIT: its warpgroup's mma in flight are done.
void on_wgmma_wait(int64_t) {
    Block* b = t_block;
    if (b == nullptr) return;
    reread_pending(*b, static_cast<size_t>(b->tid / 128), true);
}

// The thread's WGMMA: its descriptors and accumulator are left for the warpgroup's step.
void on_wgmma(int64_t position, const int64_t* descriptors, int64_t shape, float* cd) {
    Fiber* f = running_fiber();
    if (f == nullptr) return;
    f->wg_desc = descriptors;
    f->wg_shape = shape;
    f->wg_cd = cd;
    wait_at(f, Collective::Wgmma, position);
}

// PTX wgmma.mma_async.m64nNk16 (then committed and waited for) for each warpgroup (128
// consecutive threads) waiting at one: D = A B + C, A (64 x 16) and B (16 x n) read from shared
// memory as each k-step's descriptors say. Modelled: the 128-byte swizzle (the 16-byte unit of
// each address, bits 4-6, XORed with bits 7-9), K-major operands (element (x, k) of row x at
// start + (x / 8) stride + (x % 8) 128 + 2 k) and MN-major ones (at start + (x / 64) leading +
// (x % 64) 2 + (k % 8) 128 + (k / 8) stride); every thread of the warpgroup gives the same
// descriptors, the first k-step's addresses 1024-byte aligned. The reads are the WGMMA's own,
// for the race detector (Block::who); sums in float32 in k order, as mma_step's, a float16
// accumulator rounded after each k-step of 16 (as each mma's float16 D is).
void wgmma_step(Block& b, std::vector<Fiber>& fibers) {
    for (size_t g = 0; g + 128 <= fibers.size(); g += 128) {
        const Fiber& lead = fibers[g];
        const int64_t shape = lead.wg_shape, n = shape & 0xffff, ks = (shape >> 16) & 0xff;
        const bool a_mn = ((shape >> 24) & 1) != 0, b_mn = ((shape >> 25) & 1) != 0;
        const bool bf16 = ((shape >> 26) & 1) != 0, f16_acc = ((shape >> 27) & 1) != 0;
        const bool in_flight = ((shape >> 28) & 1) != 0;
        for (size_t t = g; t < g + 128; ++t)
            if (fibers[t].wg_shape != shape ||
                !std::equal(lead.wg_desc, lead.wg_desc + 2 * ks, fibers[t].wg_desc)) {
                b.problem(b.where(static_cast<int64_t>(t)) +
                          "gives a WGMMA other descriptors or another shape than thread " +
                          b.thread(static_cast<int64_t>(g)) + " of its warpgroup");
                return;
            }
        // This WGMMA's wait retires the one before it (in flight, its reads may happen until now).
        reread_pending(b, g / 128, true);
        b.tid = -2 - static_cast<int64_t>(g / 128); // the WGMMA reads, not a thread (Block::who)
        std::vector<int64_t> reads;                 // kept while this one is in flight
        // An operand's descriptor: its start, leading and stride byte offsets.
        struct Operand {
            int64_t start, lead, stride;
            bool mn;
        };
        const auto operand = [](int64_t d, bool mn) {
            return Operand{(d & 0x3fff) << 4, ((d >> 16) & 0x3fff) << 4, ((d >> 32) & 0x3fff) << 4,
                           mn};
        };
        // Element (x, k) of an operand (x: A's row or B's column).
        const auto element = [&](const Operand& o, int64_t x, int64_t k, float& out) {
            int64_t at = o.mn ? o.start + (x / 64) * o.lead + (x % 64) * 2 + (k % 8) * 128 +
                                    (k / 8) * o.stride
                              : o.start + (x / 8) * o.stride + (x % 8) * 128 + 2 * k;
            at ^= ((at >> 7) & 7) << 4;
            const auto host = reinterpret_cast<int64_t>(b.shared) + at;
            if (on_shared(host, 2, 0) == 0) return false;
            if (in_flight) reads.push_back(host);
            uint16_t bits;
            std::memcpy(&bits, reinterpret_cast<const void*>(host), 2);
            out = bf16 ? detail::bf16_to_float(bits) : detail::half_to_float(bits);
            return true;
        };
        std::vector<float> A(64 * 16), B(static_cast<size_t>(16 * n));
        for (int64_t sub = 0; sub < ks; ++sub) {
            const int64_t da = lead.wg_desc[2 * sub], db = lead.wg_desc[2 * sub + 1];
            if (sub == 0 && (((da | db) & 0x3fff) << 4) % 1024 != 0) {
                b.problem(b.where(b.tid) + "WGMMA operands at shared bytes " +
                          std::to_string((da & 0x3fff) << 4) + " and " +
                          std::to_string((db & 0x3fff) << 4) +
                          ", not both at 1024-byte boundaries (where the 128-byte swizzle's "
                          "pattern starts)");
                return;
            }
            if (((da >> 62) & 3) != 1 || ((db >> 62) & 3) != 1 || ((da | db) >> 49 & 7) != 0) {
                b.problem(b.where(b.tid) + "WGMMA descriptors other than the 128-byte swizzle "
                                           "with base offset 0, which EMU does not model");
                return;
            }
            const Operand oa = operand(da, a_mn), ob = operand(db, b_mn);
            for (int64_t r = 0; r < 64; ++r)
                for (int64_t k = 0; k < 16; ++k)
                    if (!element(oa, r, k, A[static_cast<size_t>(r * 16 + k)])) return;
            for (int64_t c = 0; c < n; ++c)
                for (int64_t k = 0; k < 16; ++k)
                    if (!element(ob, c, k, B[static_cast<size_t>(k * n + c)])) return;
            for (size_t t = 0; t < 128; ++t) {
                Fiber& f = fibers[g + t];
                const int64_t q = static_cast<int64_t>(t) / 32, l = static_cast<int64_t>(t) % 32;
                for (int64_t r = 0; r < n / 2; ++r) {
                    const int64_t row = 16 * q + l / 4 + 8 * ((r >> 1) & 1),
                                  col = 8 * (r >> 2) + 2 * (l % 4) + (r & 1);
                    float d = f.wg_cd[r];
                    for (int64_t k = 0; k < 16; ++k)
                        d += A[static_cast<size_t>(row * 16 + k)] *
                             B[static_cast<size_t>(k * n + col)];
                    // A float16 accumulator is float16 registers: each k-step's D rounded.
                    f.wg_cd[r] = f16_acc ? detail::half_to_float(detail::float_to_half(d)) : d;
                }
            }
        }
        if (in_flight) {
            if (b.wg_pending.size() <= g / 128) b.wg_pending.resize(g / 128 + 1);
            b.wg_pending[g / 128] = std::move(reads);
        }
    }
}

void fiber_main(unsigned lo, unsigned hi) {
    auto* f = reinterpret_cast<Fiber*>((static_cast<uintptr_t>(hi) << 32) | lo);
    Block* b = t_block;
#ifdef TEMPURA_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(nullptr, &b->sched_bottom, &b->sched_size);
#endif
    b->kernel->run(b->buffers, f->vars.data());
    check_copies_waited(*b, f->tid, f->copies);
    f->done = true;
    f->barrier_at = -1;
#ifdef TEMPURA_ASAN_FIBERS
    __sanitizer_start_switch_fiber(nullptr, b->sched_bottom, b->sched_size); // the fiber ends
#endif
    // returns to uc_link: the scheduler
}

// The running thread's copies (a kernel run without fibers has no barrier, so its threads run
// one after another: one set at a time).
AsyncCopies& copies_of_running() {
    Block* b = t_block;
    return b->running != nullptr ? b->running->copies : b->solo_copies;
}

// A thread's end: copies it never waited for are an error (their reads would see old data).
void check_copies_waited(Block& b, int64_t tid, AsyncCopies& c) {
    if (!c.pending.empty())
        b.problem(b.where(tid) + std::to_string(c.pending.size()) + " asynchronous cop" +
                  (c.pending.size() == 1 ? "y" : "ies") +
                  " to shared memory never retired by an ASYNC_WAIT (cp.async.wait_group)");
    c = AsyncCopies{};
}

// A COPY_ASYNC: the destination is claimed now (a store, for the race detector: the hardware
// may write it at any time until the wait), the bytes land at the wait.
void on_copy_async(int64_t address, int64_t source, int64_t bytes, const void* data) {
    Block* b = t_block;
    if (b == nullptr || bytes <= 0 || bytes > 16) return;
    // cp.async of n bytes needs both addresses n-byte aligned (the hardware faults otherwise).
    if (address % bytes != 0 || source % bytes != 0) {
        b->problem(b->where(b->tid) + "COPY_ASYNC of " + std::to_string(bytes) + " bytes from " +
                   (source % bytes != 0 ? "a global" : "a shared") + " address " +
                   std::to_string((source % bytes != 0 ? source : address) % bytes) +
                   " bytes past an aligned one (cp.async needs both aligned to its size)");
        return;
    }
    if (on_shared(address, bytes, 1) == 0) return; // outside shared memory: reported
    AsyncCopies& c = copies_of_running();
    AsyncCopies::Copy copy;
    copy.address = address;
    copy.bytes = bytes;
    copy.group = c.committed;
    std::memcpy(copy.data.data(), data, static_cast<size_t>(bytes));
    c.pending.push_back(copy);
}

// An ASYNC_WAIT {n}: the copies issued since the last one are a group; all but the newest n
// groups land now (each a store, for the race detector).
void on_async_wait(int64_t n) {
    Block* b = t_block;
    if (b == nullptr) return;
    AsyncCopies& c = copies_of_running();
    ++c.committed;
    std::vector<AsyncCopies::Copy> keep;
    for (const AsyncCopies::Copy& copy : c.pending) {
        if (copy.group >= c.committed - n) {
            keep.push_back(copy);
            continue;
        }
        if (on_shared(copy.address, copy.bytes, 1) != 0)
            std::memcpy(reinterpret_cast<void*>(copy.address), copy.data.data(),
                        static_cast<size_t>(copy.bytes));
    }
    c.pending = std::move(keep);
}

void install_hooks() {
    static const bool done = [] {
        llvm_backend::set_emu_hooks({&on_fault, &on_shared, &on_barrier, &on_mma, &on_copy_async,
                                     &on_async_wait, &on_ldmatrix, &on_wgmma, &on_wgmma_wait});
        return true;
    }();
    (void)done;
}

} // namespace

codegen::DeviceLimits emu_limits() {
    static const codegen::DeviceLimits lim = codegen::gpu_limits("EMU", 80);
    return lim;
}

namespace {
LruCache<std::shared_ptr<const CompiledKernel>>& emu_cache() {
    static auto* c = new LruCache<std::shared_ptr<const CompiledKernel>>; // outlives statics
    return *c;
}
} // namespace

void clear_emu_kernel_cache() { emu_cache().clear(); }

std::shared_ptr<const CompiledKernel>
compile_emu_kernel(const std::string& name, const std::vector<UOp>& linear, int64_t block_threads) {
    install_hooks();
    // The PTX and the host program, cached together by the program's structure and the block
    // size (the PTX's maxntid); a hit under another name gets that name.
    std::string key = std::to_string(block_threads) + ":" + structure_key(linear, "emu");
    if (auto hit = emu_cache().find(key)) {
        const auto& k = *hit;
        if (k->name() == name) return k;
        return std::make_shared<const CompiledKernel>(
            name, k->symbol(), k->source(), k->compile_ms(), k->entry(), k->buffer_count(),
            k->var_count(), k->code(), k->shared_bytes(), k->barriers(), k->code_bytes());
    }
    const auto t0 = std::chrono::steady_clock::now();
    // A program of Hopper's warpgroup mma (lowered for an sm_90 device's limits, run on EMU
    // under them) is PTX for sm_90a. The two compilations are independent: a long program's PTX
    // is rendered on a thread of its own meanwhile (each takes a large share of its realize).
    const bool beside = linear.size() > llvm_backend::kLongKernelOps;
    std::future<std::string> ptx =
        std::async(beside ? std::launch::async : std::launch::deferred, [&] {
            return render_ptx(name, linear, uses_wgmma(linear) ? 90 : emu_limits().sm,
                              block_threads);
        });
    const std::shared_ptr<const CompiledKernel> host =
        compile_for_host(name, linear, llvm_backend::Target::Emu);
    std::string text = ptx.get();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    auto k = std::make_shared<const CompiledKernel>(
        name, host->symbol(), std::move(text), ms, host->entry(), host->buffer_count(),
        host->var_count(), host->code(), host->shared_bytes(), host->barriers(),
        host->code_bytes());
    // Its key and what it holds: the PTX, and the host program's JIT sections (shared with the
    // CPU cache's entry, counted in both).
    const size_t bytes = key.size() + k->memory_bytes();
    return emu_cache().insert(key, std::move(k), bytes);
}

namespace {

// Runs one block: its threads in order, or as fibers between barriers. Returns the first
// problem ("" when none).
std::string run_block(const CompiledKernel& k, void* const* buffers, const int64_t* vars,
                      const std::array<int64_t, 3>& block_id, const std::array<int64_t, 3>& block) {
    const size_t nv = k.var_count();
    const int64_t threads = block[0] * block[1] * block[2];
    Block b;
    b.kernel = &k;
    b.buffers = buffers;
    b.block_dims = block;
    b.block_id = block_id;
    b.shared_storage.assign(k.shared_bytes() + 1024, 0xff); // NaN bits: what a fresh block finds
    b.shared = b.shared_storage.data() +
               (1024 - reinterpret_cast<uintptr_t>(b.shared_storage.data()) % 1024) % 1024;
    b.shared_size = k.shared_bytes();
    b.shadow.assign(k.shared_bytes(), Shadow{});
    struct Restore {
        Block* saved;
        ~Restore() { t_block = saved; }
    } restore{t_block};
    t_block = &b;
    auto vars_of = [&](int64_t t) {
        std::vector<int64_t> v(nv + 7);
        std::copy(vars, vars + nv, v.begin());
        v[nv + 0] = block_id[0];
        v[nv + 1] = block_id[1];
        v[nv + 2] = block_id[2];
        v[nv + 3] = t % block[0];
        v[nv + 4] = t / block[0] % block[1];
        v[nv + 5] = t / (block[0] * block[1]);
        v[nv + 6] = reinterpret_cast<int64_t>(b.shared);
        return v;
    };
    if (!k.barriers()) {
        // Last thread first: a GPU promises no order among a block's threads, and a program
        // that leans on the natural one (thread 0 first) shows it here.
        std::vector<int64_t> v = vars_of(0); // one argument list: only the thread ids change
        for (int64_t t = threads - 1; t >= 0 && b.error.empty(); --t) {
            b.tid = t;
            v[nv + 3] = t % block[0];
            v[nv + 4] = t / block[0] % block[1];
            v[nv + 5] = t / (block[0] * block[1]);
            k.run(buffers, v.data());
            check_copies_waited(b, t, b.solo_copies);
        }
        return b.error;
    }
    // Fibers: each runs until its next barrier; the block goes on when all have arrived.
    std::vector<Fiber> fibers(static_cast<size_t>(threads));
    t_stacks.reserve(static_cast<size_t>(threads));
    for (int64_t t = 0; t < threads; ++t) {
        Fiber& f = fibers[static_cast<size_t>(t)];
        f.tid = t;
        f.vars = vars_of(t);
        f.stack = t_stacks.stack(static_cast<size_t>(t));
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = kStackBytes;
        f.ctx.uc_link = &b.scheduler;
        const auto p = reinterpret_cast<uintptr_t>(&f);
        makecontext(&f.ctx, reinterpret_cast<void (*)()>(&fiber_main), 2,
                    static_cast<unsigned>(p & 0xffffffffu), static_cast<unsigned>(p >> 32));
    }
    while (b.error.empty()) {
        for (Fiber& f : fibers) {
            if (f.done) continue;
            b.tid = f.tid;
            b.running = &f;
            enter(f, &b.scheduler);
            b.running = nullptr;
            if (!t_stacks.intact(static_cast<size_t>(f.tid)))
                b.problem(b.where(f.tid) + "overflowed its fiber stack of " +
                          std::to_string(kStackBytes / 1024) +
                          " KiB (the block stops: the stack below it may be damaged)");
            if (!b.error.empty()) break;
        }
        if (!b.error.empty()) break;
        const Fiber* waiting = nullptr;
        const Fiber* finished = nullptr;
        for (const Fiber& f : fibers) (f.done ? finished : waiting) = &f;
        if (waiting == nullptr) break; // every thread is done
        if (finished != nullptr) {
            b.problem(b.where(waiting->tid) + "waits at the barrier at position " +
                      std::to_string(waiting->barrier_at) + ", which thread " +
                      b.thread(finished->tid) +
                      " finished without reaching (a barrier reached by part of the block)");
            break;
        }
        for (const Fiber& f : fibers)
            if (f.barrier_at != waiting->barrier_at || f.barriers != waiting->barriers)
                b.problem(b.where(f.tid) + "reached the barrier at position " +
                          std::to_string(f.barrier_at) + " " + std::to_string(f.barriers) +
                          " times while thread " + b.thread(waiting->tid) +
                          " reached the one at position " + std::to_string(waiting->barrier_at) +
                          " " + std::to_string(waiting->barriers) +
                          " times (loop trip counts differ across the block, with a barrier "
                          "inside the loop)");
        if (waiting->at != Collective::None) {
            // A warp- or warpgroup-wide step: every thread of the block is at the same one.
            const CollectiveInfo& c = kCollectives[static_cast<size_t>(waiting->at)];
            if (threads % c.group != 0) {
                b.problem(b.where(waiting->tid) + "reached a " + c.op + " in a block of " +
                          std::to_string(threads) + " threads, not whole " + c.unit + "s of " +
                          std::to_string(c.group) + " (" + c.instruction +
                          " reached by part of a " + c.unit + ")");
                break;
            }
            for (const Fiber& f : fibers)
                if (f.at != waiting->at ||
                    (f.at == Collective::Ldmatrix &&
                     (f.ldm_count != waiting->ldm_count || f.ldm_trans != waiting->ldm_trans)))
                    b.problem(b.where(f.tid) + "waits at a barrier while its " + c.unit + "'s " +
                              c.op + " runs");
            if (!b.error.empty()) break;
            switch (waiting->at) {
            case Collective::Mma: mma_step(fibers); break;
            case Collective::Ldmatrix: ldmatrix_step(fibers); break;
            case Collective::Wgmma: wgmma_step(b, fibers); break;
            case Collective::None: break;
            }
            for (Fiber& f : fibers) f.at = Collective::None;
            continue; // no memory barrier: the epoch stays
        }
        ++b.epoch; // the barrier: what was written before it may be read after it
        for (size_t g = 0; g < b.wg_pending.size(); ++g) reread_pending(b, g, false);
    }
    for (size_t g = 0; g < b.wg_pending.size() && b.error.empty(); ++g)
        if (!b.wg_pending[g].empty())
            b.problem(b.where(static_cast<int64_t>(g * 128)) +
                      "its warpgroup's WGMMA is still in flight at the kernel's end (no "
                      "WGMMA_WAIT, wgmma.wait_group 0, retired it)");
    return b.error;
}

} // namespace

void check_launch(const char* op, const CompiledKernel& kernel, const codegen::DeviceLimits& lim,
                  const std::array<int64_t, 3>& grid, const std::array<int64_t, 3>& block) {
    const std::string who = "kernel " + kernel.name() + ": ";
    for (size_t d = 0; d < 3; ++d) {
        if (grid[d] < 1 || grid[d] > lim.max_grid[d])
            fail(op, who + "grid " + triple(grid[0], grid[1], grid[2]) +
                         " is outside the device's limits " +
                         triple(lim.max_grid[0], lim.max_grid[1], lim.max_grid[2]));
        if (block[d] < 1 || block[d] > lim.max_block[d])
            fail(op, who + "block " + triple(block[0], block[1], block[2]) +
                         " is outside the device's limits " +
                         triple(lim.max_block[0], lim.max_block[1], lim.max_block[2]));
    }
    const int64_t per_block = block[0] * block[1] * block[2];
    if (per_block > lim.max_threads_per_block)
        fail(op, who + std::to_string(per_block) + " threads per block exceed the limit of " +
                     std::to_string(lim.max_threads_per_block));
    if (static_cast<int64_t>(kernel.shared_bytes()) > lim.shared_bytes)
        fail(op, who + std::to_string(kernel.shared_bytes()) +
                     " bytes of shared memory per block exceed the limit of " +
                     std::to_string(lim.shared_bytes));
}

void emu_launch(const CompiledKernel& kernel, void* const* buffers, const int64_t* vars,
                const std::array<int64_t, 3>& grid, const std::array<int64_t, 3>& block) {
    emu_launch(kernel, buffers, vars, grid, block, emu_limits());
}

void emu_launch(const CompiledKernel& kernel, void* const* buffers, const int64_t* vars,
                const std::array<int64_t, 3>& grid, const std::array<int64_t, 3>& block,
                const codegen::DeviceLimits& limits) {
    check_launch("emu", kernel, limits, grid, block);
    const int64_t per_block = block[0] * block[1] * block[2];
    if (per_block > std::numeric_limits<int16_t>::max()) // the race detector's thread ids
        fail("emu", "kernel " + kernel.name() + ": " + std::to_string(per_block) +
                        " threads per block exceed EMU's " +
                        std::to_string(std::numeric_limits<int16_t>::max()));
    install_hooks();
    const int64_t blocks = grid[0] * grid[1] * grid[2];
    std::atomic<bool> failed{false};
    std::mutex mu;
    std::string first; // the first problem
    auto run_blocks = [&](int64_t from, int64_t to) {
        for (int64_t i = from; i < to && !failed.load(std::memory_order_relaxed); ++i) {
            const std::array<int64_t, 3> id{i % grid[0], i / grid[0] % grid[1],
                                            i / (grid[0] * grid[1])};
            std::string e = run_block(kernel, buffers, vars, id, block);
            if (e.empty()) continue;
            std::lock_guard<std::mutex> l(mu);
            if (!failed.exchange(true)) first = std::move(e);
            return;
        }
    };
    // A few chunks of blocks per worker: enough to balance, few enough to cost nothing.
    const auto workers = static_cast<int64_t>(thread_count());
    const int64_t chunks = std::min<int64_t>(blocks, workers * 4);
    if (chunks <= 1 || per_block * blocks < 4096) {
        run_blocks(0, blocks);
    } else {
        parallel_for(static_cast<size_t>(chunks), [&](size_t c) {
            const auto ci = static_cast<int64_t>(c);
            run_blocks(blocks * ci / chunks, blocks * (ci + 1) / chunks);
        });
    }
    if (failed.load()) fail("emu", first);
}

} // namespace tempura::runtime
