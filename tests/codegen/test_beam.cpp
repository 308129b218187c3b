// BEAM search: the list it picks applies and computes what the kernel without opts computes;
// the disk cache answers a second search, ignores a broken file and keys by kernel and width;
// beam_or_heuristic follows TEMPURA_BEAM and TEMPURA_NOOPT.
//
// TEMPURA_BEAM_MATMUL=N additionally searches the N x N x N matmul kernel with width 2 (no
// cache) and prints the time of the search and of the chosen kernel beside the heuristics'.
#include <doctest/doctest.h>

#include "../support.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <tempura/backend/llvm_cpu.hpp>
#include <tempura/codegen/stages.hpp>
#include <tempura/realize/beam.hpp>
#include <tempura/runtime/buffer.hpp>
#include <tempura/runtime/thread_pool.hpp>
#include <tempura/schedule/schedule.hpp>
#include <tempura/tempura.hpp>

namespace {

using tempura::DType;
using tempura::Op;
using tempura::Shape;
using tempura::Tensor;
using tempura::UOp;
using tempura::codegen::DeviceLimits;
using tempura::codegen::Opt;
using tempura::codegen::OptOp;
namespace cg = tempura::codegen;
namespace fs = std::filesystem;

// Multiples of 1/256 in [-1, 1]: products are exact in float and short sums stay exact, so a
// kernel computes the same bits whatever order its opts give the additions.
std::vector<float> dyadic(int64_t n, uint64_t seed) {
    std::vector<float> v(static_cast<size_t>(n));
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (float& x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x = static_cast<float>(static_cast<int64_t>(s >> 40) % 513 - 256) / 256.0f;
    }
    return v;
}

Tensor input(const Shape& shape, uint64_t seed) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return Tensor::from_vector(dyadic(n, seed), shape);
}

struct Kernel {
    std::string name;
    UOp ast;
};

// The one kernel that computes t.
Kernel only_kernel(const Tensor& t) {
    std::vector<Kernel> ks;
    for (const auto& k : tempura::schedule_graph(t.uop()))
        if (!k.ast.is_null()) ks.push_back({k.name, k.ast});
    REQUIRE(ks.size() == 1);
    return ks[0];
}

Kernel matmul_kernel(int64_t n) { return only_kernel(input({n, n}, 1).matmul(input({n, n}, 2))); }
Kernel elementwise_kernel(int64_t n) {
    return only_kernel(input({n}, 3) * input({n}, 4) + input({n}, 5));
}

// Lowers the kernel with `opts`, runs it on float buffers of dyadic values (one per PARAM) and
// returns the output (PARAM 0).
std::vector<float> run_with(const Kernel& k, const std::vector<Opt>& opts) {
    const DeviceLimits lim = tempura::runtime::host_limits();
    const cg::LoweredKernel low = cg::lower_kernel_opt(k.name, k.ast, lim, &opts);
    const auto ck = tempura::runtime::compile_cpu_kernel(k.name, low.program);
    std::vector<std::vector<float>> bufs;
    for (const UOp& u : cg::prepare_for_opts(k.ast).toposort()) {
        if (u.op() != Op::Param) continue;
        const auto& a = u.arg_as<std::vector<int64_t>>();
        REQUIRE(u.dtype().base().scalar_type() == DType::Float32);
        const auto slot = static_cast<size_t>(a.at(0));
        if (bufs.size() <= slot) bufs.resize(slot + 1);
        bufs[slot] = dyadic(a.at(1), 10 + slot);
    }
    std::vector<void*> ptrs;
    for (auto& b : bufs) ptrs.push_back(b.data());
    REQUIRE(ck->buffer_count() <= ptrs.size());
    if (low.threads > 1) {
        tempura::runtime::parallel_for(static_cast<size_t>(low.threads), [&](size_t core) {
            const int64_t var = static_cast<int64_t>(core);
            ck->run(ptrs.data(), &var);
        });
    } else {
        ck->run(ptrs.data(), nullptr);
    }
    return bufs.at(0);
}

void check_same_result(const Kernel& k, const std::vector<Opt>& opts) {
    const std::vector<float> want = run_with(k, {}), got = run_with(k, opts);
    REQUIRE(got.size() == want.size());
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i] ? 1 : 0;
    CHECK_MESSAGE(bad == 0, "opts " << cg::to_string(opts) << ": " << bad << " of " << got.size()
                                    << " elements differ from the kernel without opts");
}

bool applies(const Kernel& k, const std::vector<Opt>& opts) {
    cg::OptKernel ok(cg::prepare_for_opts(k.ast), tempura::runtime::host_limits());
    for (const Opt& o : opts)
        if (!ok.try_apply(o)) return false;
    return true;
}

// A fresh folder for the cache, removed afterwards, and TEMPURA_CACHE_DIR pointing at it.
class TempCache {
  public:
    TempCache() {
        std::string tmpl = (fs::temp_directory_path() / "tempura-beam-test-XXXXXX").string();
        REQUIRE(mkdtemp(tmpl.data()) != nullptr);
        dir_ = tmpl;
        env_ = std::make_unique<EnvVar>("TEMPURA_CACHE_DIR", dir_.c_str());
    }
    ~TempCache() {
        env_.reset();
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    TempCache(const TempCache&) = delete;
    TempCache& operator=(const TempCache&) = delete;
    const std::string& dir() const { return dir_; }

  private:
    std::string dir_;
    std::unique_ptr<EnvVar> env_;
};

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::trunc);
    out << text;
}

} // namespace

TEST_CASE("beam: a 64x64x64 matmul gets a valid list that computes the same") {
    TempCache cache;
    const Kernel k = matmul_kernel(64);
    const std::vector<Opt> opts =
        cg::beam_search(k.name, k.ast, tempura::runtime::host_limits(), 2);
    INFO("BEAM chose " << cg::to_string(opts));
    CHECK(applies(k, opts));
    CHECK_NOTHROW(
        cg::apply_opts(cg::prepare_for_opts(k.ast), opts, tempura::runtime::host_limits()));
    check_same_result(k, opts);
}

TEST_CASE("beam: an elementwise kernel of 2^16 gets a valid list that computes the same") {
    TempCache cache;
    const Kernel k = elementwise_kernel(int64_t{1} << 16);
    const std::vector<Opt> opts =
        cg::beam_search(k.name, k.ast, tempura::runtime::host_limits(), 1);
    INFO("BEAM chose " << cg::to_string(opts));
    CHECK(applies(k, opts));
    check_same_result(k, opts);
}

TEST_CASE("beam: the disk cache answers a second search and ignores a broken file") {
    TempCache cache;
    const DeviceLimits lim = tempura::runtime::host_limits();
    const Kernel k = elementwise_kernel(4096);
    const std::string path = cg::beam_cache_file(k.ast, lim, 1);
    REQUIRE(path.rfind(cache.dir() + "/", 0) == 0);
    CHECK_FALSE(fs::exists(path));

    const cg::BeamStats s0 = cg::beam_stats();
    const std::vector<Opt> first = cg::beam_search(k.name, k.ast, lim, 1);
    const cg::BeamStats s1 = cg::beam_stats();
    CHECK(s1.searches == s0.searches + 1);
    CHECK(s1.candidates_compiled > s0.candidates_compiled);
    REQUIRE(fs::exists(path));
    const std::string text = read_file(path);
    CHECK(text.rfind("tempura-beam 1\n", 0) == 0);
    CHECK(text.find(cg::format_opts(first)) != std::string::npos);

    SUBCASE("a second search with the same folder compiles nothing") {
        // The same kernel built again from fresh tensors: the key is structural.
        const Kernel again = elementwise_kernel(4096);
        CHECK(cg::beam_cache_file(again.ast, lim, 1) == path);
        const std::vector<Opt> second = cg::beam_search(again.name, again.ast, lim, 1);
        const cg::BeamStats s2 = cg::beam_stats();
        CHECK(second == first);
        CHECK(s2.searches == s1.searches);
        CHECK(s2.cache_hits == s1.cache_hits + 1);
        CHECK(s2.candidates_compiled == s1.candidates_compiled);
    }
    SUBCASE("a corrupt file is searched again and overwritten") {
        const char* broken[] = {
            "garbage\n",
            "",
            "tempura-beam 1\nUPCAST 0\nend\n",               // a missing number
            "tempura-beam 1\nWIDEN 0 4\nend\n",              // an unknown op
            "tempura-beam 1\nUPCAST 0 4 9\nend\n",           // trailing text
            "tempura-beam 1\nUPCAST 0 4\n",                  // truncated: no end line
            "tempura-beam 0\nend\n",                         // another version
            "tempura-beam 1\nUPCAST 7 4\nend\n",             // parses, but does not apply
            "tempura-beam 1\nUPCAST 0 3\nUPCAST 0 3\nend\n", // 4096 is no multiple of 3
        };
        for (const char* b : broken) {
            CAPTURE(b);
            write_file(path, b);
            const cg::BeamStats before = cg::beam_stats();
            const std::vector<Opt> opts = cg::beam_search(k.name, k.ast, lim, 1);
            const cg::BeamStats after = cg::beam_stats();
            CHECK(after.searches == before.searches + 1);
            CHECK(after.cache_hits == before.cache_hits);
            CHECK(applies(k, opts));
            CHECK(read_file(path).rfind("tempura-beam 1\n", 0) == 0);
        }
        // Rewritten: the next search is a hit again.
        const cg::BeamStats before = cg::beam_stats();
        cg::beam_search(k.name, k.ast, lim, 1);
        CHECK(cg::beam_stats().cache_hits == before.cache_hits + 1);
    }
    SUBCASE("a FIFO, a link to /dev/zero and an oversized file are not read") {
        // A hostile cache folder: opening a FIFO used to hang, and reading /dev/zero to grow
        // without limit. Each is skipped (searched again) and replaced by a regular file.
        for (int kind = 0; kind < 3; ++kind) {
            CAPTURE(kind);
            fs::remove(path);
            if (kind == 0) REQUIRE(mkfifo(path.c_str(), 0600) == 0);
            if (kind == 1) fs::create_symlink("/dev/zero", path);
            if (kind == 2)
                write_file(path,
                           "tempura-beam 1\n# " + std::string(100000, 'x') + "\nUPCAST 0 8\nend\n");
            const cg::BeamStats before = cg::beam_stats();
            const std::vector<Opt> opts = cg::beam_search(k.name, k.ast, lim, 1);
            CHECK(cg::beam_stats().searches == before.searches + 1);
            CHECK(applies(k, opts));
            CHECK(fs::is_regular_file(fs::symlink_status(path)));
        }
    }
    SUBCASE("a valid list written by hand is taken as it is") {
        write_file(path, "tempura-beam 1\n# by hand\nUPCAST 0 8\n\nend\n");
        const std::vector<Opt> opts = cg::beam_search(k.name, k.ast, lim, 1);
        CHECK(opts == std::vector<Opt>{{OptOp::Upcast, 0, 8}});
        CHECK(cg::beam_stats().searches == s1.searches);
    }
}

namespace {

// Sets a file's modification time (the cache's "last used") to `seconds` after the epoch.
void set_used(const std::string& path, time_t seconds) {
    const struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
    REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
}

size_t beam_files(const std::string& dir) {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        n += name.rfind("beam-", 0) == 0 && fs::is_regular_file(fs::symlink_status(e.path()));
    }
    return n;
}

} // namespace

TEST_CASE("beam: the disk cache is trimmed to its budget, least recently used first") {
    TempCache cache;
    const std::string& dir = cache.dir();
    for (int i = 0; i < 10; ++i) {
        const std::string p = dir + "/beam-" + std::to_string(i) + ".txt";
        write_file(p, "tempura-beam 1\nend\n");
        set_used(p, 1000 + (i * 7) % 10); // used in the order 0 3 6 9 2 5 8 1 4 7
    }
    // Not ours: another file, a folder and a link with BEAM's names, and what the link names.
    write_file(dir + "/notes.txt", "keep");
    fs::create_directory(dir + "/beam-folder.txt");
    write_file(dir + "/target", "keep");
    fs::create_symlink(dir + "/target", dir + "/beam-link.txt");

    // Three 4 KiB blocks: the seven least recently used files go.
    CHECK(cg::trim_beam_cache(dir, 3 * 4096) == 7);
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
    std::sort(left.begin(), left.end());
    CHECK(left == std::vector<std::string>{"beam-1.txt", "beam-4.txt", "beam-7.txt",
                                           "beam-folder.txt", "beam-link.txt", "notes.txt",
                                           "target"});
    CHECK(cg::trim_beam_cache(dir, 3 * 4096) == 0); // within the budget: nothing more
    CHECK(cg::trim_beam_cache(dir, 0) == 3);
    CHECK(read_file(dir + "/target") == "keep");
    CHECK(cg::trim_beam_cache(dir + "/absent", 0) == 0); // no folder: nothing to do

    SUBCASE("a search keeps TEMPURA_CACHE_MB; a hit renews its file") {
        EnvVar mb("TEMPURA_CACHE_MB", "1");
        const DeviceLimits lim = tempura::runtime::host_limits();
        const Kernel k = elementwise_kernel(4096);
        const std::string path = cg::beam_cache_file(k.ast, lim, 1);
        cg::beam_search(k.name, k.ast, lim, 1);
        REQUIRE(fs::exists(path));
        set_used(path, 500); // older than every filler below
        // 300 files of 4 KiB blocks: 1.2 MB, over the 1 MiB budget (256 blocks).
        for (int i = 0; i < 300; ++i) {
            const std::string p = dir + "/beam-filler" + std::to_string(i) + ".txt";
            write_file(p, "tempura-beam 1\nend\n");
            set_used(p, 1000 + i);
        }
        const cg::BeamStats before = cg::beam_stats();
        cg::beam_search(k.name, k.ast, lim, 1); // a hit: the file is the most recent now
        CHECK(cg::beam_stats().cache_hits == before.cache_hits + 1);
        const Kernel other = elementwise_kernel(2048);
        cg::beam_search(other.name, other.ast, lim, 1); // writes a file, then trims
        CHECK(beam_files(dir) == 256);
        CHECK(fs::exists(path));
        CHECK(fs::exists(cg::beam_cache_file(other.ast, lim, 1)));
        CHECK_FALSE(fs::exists(dir + "/beam-filler0.txt"));  // the least recently used went
        CHECK_FALSE(fs::exists(dir + "/beam-filler45.txt")); // 46 fillers out, 254 kept
        CHECK(fs::exists(dir + "/beam-filler46.txt"));
        CHECK(fs::exists(dir + "/beam-filler299.txt"));
    }
}

TEST_CASE("beam: cache keys differ by kernel, width and device, not by UOp identity") {
    const DeviceLimits lim = tempura::runtime::host_limits();
    const Kernel m64 = matmul_kernel(64), m64b = matmul_kernel(64), m32 = matmul_kernel(32);
    const Kernel e = elementwise_kernel(4096);
    const std::string key = cg::beam_cache_key(m64.ast, lim, 2);
    CHECK(key.size() == 32);
    CHECK(cg::beam_cache_key(m64b.ast, lim, 2) == key);
    CHECK(cg::beam_cache_key(m64.ast, lim, 1) != key);
    CHECK(cg::beam_cache_key(m32.ast, lim, 2) != key);
    CHECK(cg::beam_cache_key(e.ast, lim, 2) != key);
    DeviceLimits other = lim;
    other.threads = lim.threads + 1;
    CHECK(cg::beam_cache_key(m64.ast, other, 2) != key);
    other = lim;
    other.vector_bytes = lim.vector_bytes == 16 ? 32 : 16;
    CHECK(cg::beam_cache_key(m64.ast, other, 2) != key);
    other = lim;
    other.name = "CPU:other";
    CHECK(cg::beam_cache_key(m64.ast, other, 2) != key);
}

TEST_CASE("beam: the cache folder from the environment") {
    {
        EnvVar a("TEMPURA_CACHE_DIR", "/tmp/x-tempura"), b("XDG_CACHE_HOME", "/tmp/xdg");
        CHECK(cg::beam_cache_dir() == "/tmp/x-tempura");
    }
    {
        EnvVar a("TEMPURA_CACHE_DIR", nullptr), b("XDG_CACHE_HOME", "/tmp/xdg");
        CHECK(cg::beam_cache_dir() == "/tmp/xdg/tempura");
    }
    {
        EnvVar a("TEMPURA_CACHE_DIR", nullptr), b("XDG_CACHE_HOME", nullptr),
            c("HOME", "/home/someone");
        CHECK(cg::beam_cache_dir() == "/home/someone/.cache/tempura");
    }
}

TEST_CASE("beam: opt lists in the cache's text form") {
    const std::vector<Opt> opts{{OptOp::Upcast, 1, 16},  {OptOp::Unroll, 2, 4},
                                {OptOp::Local, 0, 8},    {OptOp::Thread, 0, 2},
                                {OptOp::NoLocals, 0, 0}, {OptOp::Swap, 0, 1},
                                {OptOp::PadTo, 2, 32},   {OptOp::Tc, 222, 72}};
    const std::string text = cg::format_opts(opts);
    CHECK(text == "UPCAST 1 16\nUNROLL 2 4\nLOCAL 0 8\nTHREAD 0 2\nNOLOCALS\nSWAP 0 1\nPADTO 2 "
                  "32\nTC 222 72\n");
    std::vector<Opt> back;
    REQUIRE(cg::parse_opts(text, back));
    CHECK(back == opts);
    CHECK(cg::parse_opts("", back));
    CHECK(back.empty());
    CHECK_FALSE(cg::parse_opts("UPCAST 1\n", back));
    CHECK_FALSE(cg::parse_opts("UPCAST x 1\n", back));
    CHECK_FALSE(cg::parse_opts("upcast 1 2\n", back));
    CHECK_FALSE(cg::parse_opts("NOLOCALS 1\n", back));
}

TEST_CASE("beam: beam_or_heuristic follows TEMPURA_BEAM and TEMPURA_NOOPT") {
    TempCache cache;
    const DeviceLimits lim = tempura::runtime::host_limits();
    const Kernel k = elementwise_kernel(4096);
    const std::vector<Opt> heur = cg::heuristic_opts(cg::prepare_for_opts(k.ast), lim);
    {
        EnvVar b("TEMPURA_BEAM", nullptr), n("TEMPURA_NOOPT", nullptr);
        CHECK(cg::beam_or_heuristic(k.name, k.ast, lim) == heur);
    }
    {
        EnvVar b("TEMPURA_BEAM", "0"), n("TEMPURA_NOOPT", nullptr);
        CHECK(cg::beam_or_heuristic(k.name, k.ast, lim) == heur);
    }
    {
        EnvVar b("TEMPURA_BEAM", "1"), n("TEMPURA_NOOPT", "1");
        CHECK(cg::beam_or_heuristic(k.name, k.ast, lim).empty());
    }
    {
        EnvVar b("TEMPURA_BEAM", "1"), n("TEMPURA_NOOPT", nullptr);
        const cg::BeamStats before = cg::beam_stats();
        const std::vector<Opt> opts = cg::beam_or_heuristic(k.name, k.ast, lim);
        CHECK(cg::beam_stats().searches == before.searches + 1);
        CHECK(applies(k, opts));
        CHECK(fs::exists(cg::beam_cache_file(k.ast, lim, 1)));
    }
    CHECK_THROWS_AS(cg::beam_search(k.name, k.ast, lim, 0), tempura::Error);
}

TEST_CASE("beam: the NxNxN matmul (TEMPURA_BEAM_MATMUL=N, a measurement)") {
    const char* e = std::getenv("TEMPURA_BEAM_MATMUL");
    if (e == nullptr || std::atoi(e) < 1) return;
    const int64_t n = std::atoi(e);
    TempCache cache;
    const DeviceLimits lim = tempura::runtime::host_limits();
    const Kernel k = matmul_kernel(n);
    const auto t0 = std::chrono::steady_clock::now();
    const cg::BeamStats s0 = cg::beam_stats();
    const std::vector<Opt> opts = cg::beam_search(k.name, k.ast, lim, 2);
    const double search_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const cg::BeamStats s1 = cg::beam_stats();
    const std::vector<Opt> heur = cg::heuristic_opts(cg::prepare_for_opts(k.ast), lim);
    // Both kernels timed alternately, best of 10 each.
    auto compile = [&](const std::vector<Opt>& o) {
        const cg::LoweredKernel low = cg::lower_kernel_opt(k.name, k.ast, lim, &o);
        return std::make_pair(tempura::runtime::compile_cpu_kernel(k.name, low.program),
                              low.threads);
    };
    const auto kb = compile(opts), kh = compile(heur);
    std::vector<std::vector<float>> bufs(3, dyadic(n * n, 7));
    std::vector<void*> ptrs{bufs[0].data(), bufs[1].data(), bufs[2].data()};
    auto time_once = [&](const auto& kt) {
        const auto t = std::chrono::steady_clock::now();
        tempura::runtime::parallel_for(static_cast<size_t>(kt.second), [&](size_t core) {
            const int64_t var = static_cast<int64_t>(core);
            kt.first->run(ptrs.data(), kt.second > 1 ? &var : nullptr);
        });
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t)
            .count();
    };
    double tb = 1e300, th = 1e300;
    for (int i = 0; i < 10; ++i) {
        tb = std::min(tb, time_once(kb));
        th = std::min(th, time_once(kh));
    }
    std::printf("BEAM=2 on %s: search %.1f s, %zu candidates compiled, %zu timed\n"
                "  beam       %-90s %8.2f ms  %7.1f GFLOP/s\n"
                "  heuristics %-90s %8.2f ms  %7.1f GFLOP/s\n",
                k.name.c_str(), search_s, s1.candidates_compiled - s0.candidates_compiled,
                s1.candidates_timed - s0.candidates_timed, cg::to_string(opts).c_str(), tb,
                2.0 * n * n * n / tb / 1e6, cg::to_string(heur).c_str(), th,
                2.0 * n * n * n / th / 1e6);
    CHECK(applies(k, opts));
}
