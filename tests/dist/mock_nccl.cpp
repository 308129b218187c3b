// A mock NCCL (libtempura_mock_nccl.so, loaded through TEMPURA_LIBNCCL) for the CUDA path without
// GPUs: the mock CUDA driver's device memory is host memory, so the collectives here are real
// ones between the processes of the job, through a POSIX shared-memory segment named in the
// unique id: each rank copies its data into its slot, waits at a barrier, combines the slots in
// rank order, waits again. It checks what Tempura passes (counts, types, ops, roots, a stream)
// and counts the calls (tempura_mock_nccl_calls).
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace {

constexpr size_t kSlot = size_t{8} << 20; // bytes a rank may send in one call

struct Header {
    std::atomic<int> arrived;
    std::atomic<int> generation;
};

struct Comm {
    int nranks = 0, rank = 0;
    Header* header = nullptr;
    unsigned char* slots = nullptr;
};

std::atomic<int> g_calls{0};

void barrier(Comm* c) {
    const int gen = c->header->generation.load();
    if (c->header->arrived.fetch_add(1) == c->nranks - 1) {
        c->header->arrived.store(0);
        c->header->generation.fetch_add(1);
    } else {
        while (c->header->generation.load() == gen) sched_yield();
    }
}

size_t type_size(int t) {
    switch (t) {
    case 0:
    case 1: return 1;
    case 2:
    case 3:
    case 7: return 4;
    case 4:
    case 5:
    case 8: return 8;
    default: return 0; // a type Tempura must not send here
    }
}

template <class T>
void combine_as(int op, const Comm* c, size_t count, size_t offset, void* recv) {
    auto* out = static_cast<T*>(recv);
    for (size_t i = 0; i < count; ++i) {
        T acc = reinterpret_cast<const T*>(c->slots)[offset + i];
        for (int r = 1; r < c->nranks; ++r) {
            const T v = reinterpret_cast<const T*>(c->slots + r * kSlot)[offset + i];
            acc = op == 0   ? static_cast<T>(acc + v)
                  : op == 2 ? (v > acc ? v : acc)
                            : (v < acc ? v : acc);
        }
        out[i] = acc;
    }
}

bool combine(int type, int op, const Comm* c, size_t count, size_t offset, void* recv) {
    switch (type) {
    case 0: combine_as<int8_t>(op, c, count, offset, recv); return true;
    case 1: combine_as<uint8_t>(op, c, count, offset, recv); return true;
    case 2: combine_as<int32_t>(op, c, count, offset, recv); return true;
    case 3: combine_as<uint32_t>(op, c, count, offset, recv); return true;
    case 4: combine_as<int64_t>(op, c, count, offset, recv); return true;
    case 5: combine_as<uint64_t>(op, c, count, offset, recv); return true;
    case 7: combine_as<float>(op, c, count, offset, recv); return true;
    case 8: combine_as<double>(op, c, count, offset, recv); return true;
    default: return false;
    }
}

constexpr int kSuccess = 0, kInvalidArgument = 4, kSystemError = 2;

bool bad_call(const Comm* c, int type, int op, const void* stream, size_t bytes) {
    return c == nullptr || type_size(type) == 0 || (op != 0 && op != 2 && op != 3) ||
           stream == nullptr || bytes > kSlot;
}

} // namespace

extern "C" {

struct ncclUniqueId {
    char internal[128];
};

__attribute__((visibility("default"))) int tempura_mock_nccl_calls() { return g_calls.load(); }

__attribute__((visibility("default"))) const char* ncclGetErrorString(int r) {
    return r == kSuccess           ? "no error"
           : r == kInvalidArgument ? "invalid argument (mock)"
                                   : "system error (mock)";
}

__attribute__((visibility("default"))) int ncclGetUniqueId(ncclUniqueId* id) {
    std::memset(id, 0, sizeof *id);
    std::snprintf(id->internal, sizeof id->internal, "/tempura_mock_nccl_%d_%ld", getpid(),
                  static_cast<long>(time(nullptr)));
    ++g_calls;
    return kSuccess;
}

__attribute__((visibility("default"))) int ncclCommInitRank(Comm** comm, int nranks,
                                                            ncclUniqueId id, int rank) {
    ++g_calls;
    if (nranks < 1 || rank < 0 || rank >= nranks || id.internal[0] != '/') return kInvalidArgument;
    const size_t bytes = 4096 + static_cast<size_t>(nranks) * kSlot;
    const int fd = shm_open(id.internal, O_CREAT | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) return kSystemError;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return kSystemError;
    auto* c = new Comm;
    c->nranks = nranks;
    c->rank = rank;
    c->header = static_cast<Header*>(p);
    c->slots = static_cast<unsigned char*>(p) + 4096;
    barrier(c); // everyone has it mapped: the name can go
    if (rank == 0) shm_unlink(id.internal);
    *comm = c;
    return kSuccess;
}

__attribute__((visibility("default"))) int ncclAllReduce(const void* send, void* recv, size_t count,
                                                         int type, int op, Comm* c, void* stream) {
    ++g_calls;
    const size_t bytes = count * type_size(type);
    if (bad_call(c, type, op, stream, bytes)) return kInvalidArgument;
    std::memcpy(c->slots + c->rank * kSlot, send, bytes);
    barrier(c);
    combine(type, op, c, count, 0, recv);
    barrier(c);
    return kSuccess;
}

__attribute__((visibility("default"))) int ncclReduceScatter(const void* send, void* recv,
                                                             size_t recvcount, int type, int op,
                                                             Comm* c, void* stream) {
    ++g_calls;
    const size_t bytes = recvcount * c->nranks * type_size(type);
    if (bad_call(c, type, op, stream, bytes)) return kInvalidArgument;
    std::memcpy(c->slots + c->rank * kSlot, send, bytes);
    barrier(c);
    combine(type, op, c, recvcount, recvcount * static_cast<size_t>(c->rank), recv);
    barrier(c);
    return kSuccess;
}

__attribute__((visibility("default"))) int ncclBroadcast(const void* send, void* recv, size_t count,
                                                         int type, int root, Comm* c,
                                                         void* stream) {
    ++g_calls;
    const size_t bytes = count * type_size(type);
    if (bad_call(c, type, 0, stream, bytes) || root < 0 || root >= c->nranks)
        return kInvalidArgument;
    if (c->rank == root) std::memcpy(c->slots, send, bytes);
    barrier(c);
    std::memcpy(recv, c->slots, bytes);
    barrier(c);
    return kSuccess;
}

__attribute__((visibility("default"))) int ncclAllGather(const void* send, void* recv, size_t count,
                                                         int type, Comm* c, void* stream) {
    ++g_calls;
    const size_t bytes = count * type_size(type);
    if (bad_call(c, type, 0, stream, bytes)) return kInvalidArgument;
    std::memcpy(c->slots + c->rank * kSlot, send, bytes);
    barrier(c);
    for (int r = 0; r < c->nranks; ++r)
        std::memcpy(static_cast<unsigned char*>(recv) + r * bytes, c->slots + r * kSlot, bytes);
    barrier(c);
    return kSuccess;
}

} // extern "C"
