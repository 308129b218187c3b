// simplify() throughput on index arithmetic: 2,000 expressions of the shape
//   ((a*c1 + b*c2 + c3) / c4) % c5 + (a*c1 + b*c2 + c3) % c4
// with a, b drawn from 64 bounded variables v0..v63 (bounds [0, 2^k - 1]) and random positive
// constants (c4, c5 in 2..64; c1, c2 sometimes multiples of c4, so the div/mod folding rules fire).
//
// Counters: input_nodes/s (sum of the inputs' node_count() over the timed simplify calls),
// out_in_ratio (output nodes / input nodes), and the peer figure: tinygrad's simplifier manages
// about 3,500 input nodes/s on this machine (tinygrad_nodes/s), x_vs_tinygrad being our rate over
// it.
//
// BM_SimplifyTinygradCases: tinygrad's own symbolic test expressions (tests/data/
// tinygrad_symbolic.tsv, 254 small expressions of comparisons, where, min/max, div/mod over a few
// variables), built afresh each iteration over new variables: the per-call cost of simplify() on
// small inputs. input_nodes/s as above (wall clock), cpu_nodes/s per second of this thread's CPU
// time (steadier on a shared machine), `x_vs_index` the latter over BM_SimplifyIndexExprs's.
//
// Before timing, every output is checked: node_count() no larger than its input's, and equal values
// at random points within the bounds; a failure skips the benchmark with the offending expression.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <tempura/tempura.hpp>

#include "../tests/symbolic/expr_parser.hpp"

namespace {

using tempura::UOp;

constexpr int kExprs = 2000;
constexpr int kVars = 64;
constexpr int kCheckPoints = 8;
constexpr double kTinygradInputNodesPerSecond = 3500.0;

struct Spec {
    int a, b; // variable indices
    int64_t c1, c2, c3, c4, c5;
};

int64_t var_max(int i) { return (int64_t{1} << (1 + (i * 7) % 12)) - 1; } // k in 1..12

std::vector<Spec> make_specs() {
    std::mt19937_64 rng(20240611);
    auto uniform = [&](int64_t lo, int64_t hi) {
        return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    };
    std::vector<Spec> specs;
    specs.reserve(kExprs);
    for (int i = 0; i < kExprs; ++i) {
        Spec s{};
        s.a = static_cast<int>(uniform(0, kVars - 1));
        s.b = static_cast<int>(uniform(0, kVars - 1));
        s.c4 = uniform(2, 64);
        s.c5 = uniform(2, 64);
        s.c1 = uniform(0, 9) < 4 ? s.c4 * uniform(1, 4) : uniform(1, 64);
        s.c2 = uniform(0, 9) < 4 ? s.c4 * uniform(1, 4) : uniform(1, 64);
        s.c3 = uniform(0, 64);
        specs.push_back(s);
    }
    return specs;
}

const std::vector<Spec>& specs() {
    static const std::vector<Spec> s = make_specs();
    return s;
}

std::string var_name(int i, const std::string& suffix) { return "v" + std::to_string(i) + suffix; }

// Builds the 2,000 inputs over variables named v<i><suffix>; a new suffix gives nodes that have
// never been simplified.
std::vector<UOp> build_inputs(const std::string& suffix) {
    std::vector<UOp> vars;
    vars.reserve(kVars);
    for (int i = 0; i < kVars; ++i)
        vars.push_back(UOp::variable(var_name(i, suffix), 0, var_max(i)));
    std::vector<UOp> in;
    in.reserve(kExprs);
    for (const Spec& s : specs()) {
        const UOp& a = vars[static_cast<size_t>(s.a)];
        const UOp& b = vars[static_cast<size_t>(s.b)];
        UOp t = a * s.c1 + b * s.c2 + s.c3;
        in.push_back((t / s.c4) % s.c5 + t % s.c4);
    }
    return in;
}

int64_t total_nodes(const std::vector<UOp>& v) {
    int64_t n = 0;
    for (const UOp& u : v) n += static_cast<int64_t>(u.node_count());
    return n;
}

struct Verification {
    std::string error; // empty when every output is fine
    int64_t in_nodes = 0, out_nodes = 0;
    double ratio() const {
        return in_nodes ? static_cast<double>(out_nodes) / static_cast<double>(in_nodes) : 0.0;
    }
};

Verification verify() {
    Verification v;
    try {
        std::vector<UOp> in = build_inputs("_check");
        std::mt19937_64 rng(7);
        for (size_t i = 0; i < in.size(); ++i) {
            const UOp& e = in[i];
            UOp s = tempura::simplify(e);
            size_t ne = e.node_count(), ns = s.node_count();
            v.in_nodes += static_cast<int64_t>(ne);
            v.out_nodes += static_cast<int64_t>(ns);
            if (ns > ne) {
                v.error = "simplify grew expression #" + std::to_string(i) + " from " +
                          std::to_string(ne) + " to " + std::to_string(ns) +
                          " nodes: " + e.render() + "  ->  " + s.render();
                return v;
            }
            const Spec& sp = specs()[i];
            for (int p = 0; p < kCheckPoints; ++p) {
                std::map<std::string, int64_t> env;
                env[var_name(sp.a, "_check")] =
                    std::uniform_int_distribution<int64_t>(0, var_max(sp.a))(rng);
                env[var_name(sp.b, "_check")] =
                    std::uniform_int_distribution<int64_t>(0, var_max(sp.b))(rng);
                int64_t ve = tempura::evaluate(e, env), vs = tempura::evaluate(s, env);
                if (ve != vs) {
                    std::string at;
                    for (const auto& [k, x] : env) at += k + "=" + std::to_string(x) + " ";
                    v.error = "simplify changed the value of expression #" + std::to_string(i) +
                              ": " + e.render() + "  ->  " + s.render() + " at " + at + ": " +
                              std::to_string(ve) + " vs " + std::to_string(vs);
                    return v;
                }
            }
        }
    } catch (const std::exception& ex) {
        v.error = std::string("exception while verifying: ") + ex.what();
    }
    return v;
}

const Verification& verification() {
    static const Verification v = [] {
        Verification r = verify();
        if (!r.error.empty())
            std::fprintf(stderr, "bench_simplify: verification failed: %s\n", r.error.c_str());
        return r;
    }();
    return v;
}

void set_counters(benchmark::State& state, int64_t input_nodes, int64_t exprs,
                  double simplify_seconds) {
    const Verification& v = verification();
    state.counters["input_nodes/s"] =
        benchmark::Counter(static_cast<double>(input_nodes), benchmark::Counter::kIsRate);
    state.counters["exprs/s"] =
        benchmark::Counter(static_cast<double>(exprs), benchmark::Counter::kIsRate);
    state.counters["out_in_ratio"] = v.ratio();
    state.counters["tinygrad_nodes/s"] = kTinygradInputNodesPerSecond;
    double ours = simplify_seconds > 0 ? static_cast<double>(input_nodes) / simplify_seconds : 0.0;
    state.counters["x_vs_tinygrad"] = ours / kTinygradInputNodesPerSecond;
}

std::atomic<int64_t> g_round{0};
double g_index_cpu_rate = 0; // BM_SimplifyIndexExprs's input nodes per CPU second in this run

// This thread's CPU time: on a shared machine the rate per CPU second is the steadier figure.
double thread_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Every iteration simplifies 2,000 freshly built inputs (over new variables, so nothing can have
// been simplified before); building and releasing them is outside the timed region.
// What simplify() did over the rounds of a benchmark, each on fresh inputs.
struct FreshRounds {
    int64_t input_nodes = 0, exprs = 0;
    double seconds = 0, cpu = 0; // simplify()'s wall and thread-CPU seconds
};

// Runs `state`'s rounds: each builds new inputs with `build(prefix + round)` (never simplified
// before), outside the timed region, and times simplify() on each of them.
template <class Build>
FreshRounds simplify_fresh_rounds(benchmark::State& state, Build build, const char* prefix) {
    FreshRounds r;
    for (auto _ : state) {
        state.PauseTiming();
        std::vector<UOp> in = build(prefix + std::to_string(g_round.fetch_add(1)));
        const int64_t n = total_nodes(in);
        std::vector<UOp> out;
        out.reserve(in.size());
        state.ResumeTiming();
        const double c0 = thread_cpu_seconds();
        auto t0 = std::chrono::steady_clock::now();
        for (const UOp& e : in) out.push_back(tempura::simplify(e));
        auto t1 = std::chrono::steady_clock::now();
        r.cpu += thread_cpu_seconds() - c0;
        benchmark::DoNotOptimize(out.data());
        state.PauseTiming();
        r.seconds += std::chrono::duration<double>(t1 - t0).count();
        r.input_nodes += n;
        r.exprs += static_cast<int64_t>(in.size());
        out.clear();
        in.clear();
        state.ResumeTiming();
    }
    return r;
}

void BM_SimplifyIndexExprs(benchmark::State& state) {
    const Verification& v = verification();
    if (!v.error.empty()) state.SkipWithError(v.error.c_str());
    const FreshRounds r = simplify_fresh_rounds(
        state, [](const std::string& suffix) { return build_inputs(suffix); }, "_r");
    set_counters(state, r.input_nodes, r.exprs, r.seconds);
    if (r.cpu > 0) {
        g_index_cpu_rate = static_cast<double>(r.input_nodes) / r.cpu;
        state.counters["cpu_nodes/s"] = g_index_cpu_rate;
    }
}
BENCHMARK(BM_SimplifyIndexExprs)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same 2,000 inputs, held across iterations: the difference to BM_SimplifyIndexExprs shows
// what, if anything, simplify() reuses from earlier calls on the same nodes.
void BM_SimplifyIndexExprsHeld(benchmark::State& state) {
    const Verification& v = verification();
    if (!v.error.empty()) state.SkipWithError(v.error.c_str());
    std::vector<UOp> in = build_inputs("_held");
    const int64_t n = total_nodes(in);
    int64_t input_nodes = 0, exprs = 0;
    double seconds = 0;
    std::vector<UOp> out;
    out.reserve(in.size());
    for (auto _ : state) {
        out.clear();
        auto t0 = std::chrono::steady_clock::now();
        for (const UOp& e : in) out.push_back(tempura::simplify(e));
        auto t1 = std::chrono::steady_clock::now();
        benchmark::DoNotOptimize(out.data());
        seconds += std::chrono::duration<double>(t1 - t0).count();
        input_nodes += n;
        exprs += static_cast<int64_t>(in.size());
    }
    set_counters(state, input_nodes, exprs, seconds);
}
BENCHMARK(BM_SimplifyIndexExprsHeld)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- tinygrad's test expressions -------------------------------------------------------------

struct TinyCase {
    std::vector<tempura_test::VarSpec> vars;
    std::string expr;
};

std::vector<TinyCase> read_tinygrad_cases() {
    const char* dir = std::getenv("TEMPURA_CASES_DIR");
    std::string path =
        std::string(dir != nullptr && *dir != '\0' ? dir : TEMPURA_CASES_DIR_DEFAULT) +
        "/tinygrad_symbolic.tsv";
    std::ifstream in(path);
    std::vector<TinyCase> out;
    std::string line;
    bool header = true;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        if (header) { // the column names
            header = false;
            continue;
        }
        std::vector<std::string> cols;
        std::stringstream ss(line);
        for (std::string c; std::getline(ss, c, '\t');) cols.push_back(c);
        if (cols.size() < 3) continue;
        out.push_back({tempura_test::parse_vars(cols[1]), cols[2]});
    }
    return out;
}

const std::vector<TinyCase>& tinygrad_cases() {
    static const std::vector<TinyCase> c = read_tinygrad_cases();
    return c;
}

// The expressions over variables renamed with `suffix` (new nodes, never simplified before).
std::vector<UOp> build_tinygrad(const std::string& suffix) {
    std::vector<UOp> out;
    for (const TinyCase& c : tinygrad_cases()) {
        std::map<std::string, UOp> vars;
        for (const auto& v : c.vars)
            vars.emplace(v.name, UOp::variable(v.name + suffix, v.min, v.max));
        out.push_back(tempura_test::parse_expr(c.expr, vars));
    }
    return out;
}

void BM_SimplifyTinygradCases(benchmark::State& state) {
    if (tinygrad_cases().empty()) state.SkipWithError("no cases in tinygrad_symbolic.tsv");
    const FreshRounds r = simplify_fresh_rounds(
        state, [](const std::string& suffix) { return build_tinygrad(suffix); }, "_t");
    const int64_t input_nodes = r.input_nodes, exprs = r.exprs;
    const double seconds = r.seconds, cpu = r.cpu;
    state.counters["input_nodes/s"] =
        benchmark::Counter(static_cast<double>(input_nodes), benchmark::Counter::kIsRate);
    state.counters["exprs/s"] =
        benchmark::Counter(static_cast<double>(exprs), benchmark::Counter::kIsRate);
    const double ours = seconds > 0 ? static_cast<double>(input_nodes) / seconds : 0.0;
    const double ours_cpu = cpu > 0 ? static_cast<double>(input_nodes) / cpu : 0.0;
    state.counters["simplify_nodes/s"] = ours;
    state.counters["cpu_nodes/s"] = ours_cpu;
    if (g_index_cpu_rate > 0) state.counters["x_vs_index"] = ours_cpu / g_index_cpu_rate;
}
BENCHMARK(BM_SimplifyTinygradCases)->Unit(benchmark::kMillisecond)->UseRealTime();

} // namespace

BENCHMARK_MAIN();
