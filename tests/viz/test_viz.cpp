// TEMPURA_VIZ's page, UOp::to_dot, the rewrite trace, and what each TEMPURA_DEBUG level prints.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../support.hpp"
#include "tempura/codegen/stages.hpp"
#include "tempura/pattern/rule.hpp"
#include "tempura/pattern/table.hpp"
#include "tempura/realize/realize.hpp"
#include "tempura/realize/viz.hpp"
#include "tempura/rewrite/graph_rewrite.hpp"
#include "tempura/rewrite/trace.hpp"
#include "tempura/tempura.hpp"

using namespace tempura;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// The repository, from this file's path (tests/viz/test_viz.cpp).
fs::path repo_root() { return fs::path(TEMPURA_REPO_ROOT); }

// A fresh empty directory under the system's temporary one.
fs::path fresh_dir(const std::string& name) {
    const fs::path d =
        fs::temp_directory_path() / ("tempura_viz_test_" + name + "_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

// What f writes to stderr (fd 2), f's own output included.
template <class F>
std::string capture_stderr(F&& f) {
    std::fflush(stderr);
    char path[] = "/tmp/tempura_stderr_XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    const int saved = dup(2);
    dup2(fd, 2);
    try {
        f();
    } catch (...) {
        std::fflush(stderr);
        dup2(saved, 2);
        close(saved);
        close(fd);
        std::remove(path);
        throw;
    }
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    std::string out = read_file(path);
    std::remove(path);
    return out;
}

std::vector<std::string> lines_of(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string l; std::getline(ss, l);) out.push_back(l);
    return out;
}

size_t count_matching(const std::vector<std::string>& lines, const std::string& re) {
    const std::regex r(re);
    size_t n = 0;
    for (const std::string& l : lines) n += std::regex_match(l, r) ? 1 : 0;
    return n;
}

// TEMPURA_VIZ set for a scope (it is read once; reread() reads it again).
struct VizDir {
    EnvVar var;
    explicit VizDir(const fs::path& d) : var("TEMPURA_VIZ", d.string()) { viz::reread(); }
    ~VizDir() {
        unsetenv("TEMPURA_VIZ");
        viz::reread();
    }
};

// A small graph of two kernels (a sum, then an elementwise op reading it), new each call so no
// cache or earlier result answers it.
int g_two_kernels_line = 0;
Tensor two_kernels(float base) {
    std::vector<float> v(64);
    for (size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(i);
    Tensor a = Tensor::from_vector(v, {8, 8});
    // (The column sums over axis 0: a reduce over an outer axis, broadcast back, is a kernel of
    // its own; a row's would run inside the output's kernel.)
    g_two_kernels_line = __LINE__ + 1; // the line the nodes below record
    return (a - a.sum(0, true)) * 2.0f;
}

} // namespace

TEST_CASE("viz: UOp::to_dot draws every node and edge, ids of the caller's choosing") {
    const UOp x = UOp::variable("x", 0, 9);
    const UOp e = (x + 3) * 2;
    const std::string d = e.to_dot();
    CHECK(d.rfind("digraph tempura {", 0) == 0);
    // Nodes: DEFINE_VAR x, 3, ADD, 2, MUL; edges: x->ADD, 3->ADD, ADD->MUL, 2->MUL.
    CHECK(count_of(d, "\" fillcolor=") == 5);
    CHECK(count_of(d, " -> ") == 4);
    // Each label ends with where the node was built (a node equal to one built earlier keeps
    // that one's line: the CONST may come from elsewhere).
    CHECK(d.find("label=\"ADD\\nindex\\n@test_viz.cpp:") != std::string::npos);
    CHECK(d.find("label=\"CONST\\nindex\\n3\\n@") != std::string::npos);
    CHECK(d.find(" [label=\"0\"]") != std::string::npos); // source positions on edges
    CHECK(d.find(" id=") == std::string::npos);
    const std::string named =
        e.to_dot([](const UOp& u) { return std::string(op_name(u.op())); }, {e.get()});
    CHECK(named.find("id=\"MUL\" fillcolor=\"#ff6b6b\" penwidth=2") != std::string::npos);
    CHECK(count_of(named, "penwidth=2") == 1);
    // A 100,000-deep chain: no recursion.
    UOp chain = x;
    for (int i = 0; i < 100000; ++i) chain = chain + 1;
    CHECK(count_of(chain.to_dot(), "[label=\"ADD") == 100000);
}

namespace {
using namespace tempura::pattern;
inline constexpr auto viz_rules = rules(rule(x + 0, x)); // VIZ_RULE_LINE
} // namespace

TEST_CASE("viz: the trace records each step with the rule's text, source line and nodes") {
    const auto table = compile(viz_rules);
    const UOp v = UOp::variable("v", 0, 9);
    const UOp g = (v + 0) * (v + 0 + 0);
    // No recorder: nothing is recorded anywhere.
    CHECK(trace::current() == nullptr);
    trace::Recorder rec;
    UOp out;
    {
        const trace::Scope scope(&rec);
        CHECK(trace::current() == &rec);
        out = trace::stage("test stage", g, [&] { return graph_rewrite(g, table); });
    }
    CHECK(trace::current() == nullptr);
    CHECK(out.render() == "v * v");
    REQUIRE(rec.stages().size() == 1);
    const trace::Stage& st = rec.stages()[0];
    CHECK(st.name == "test stage");
    CHECK(st.input.same(g));
    CHECK(st.output.same(out));
    // Top-down: (v + 0) + 0 -> v + 0 first (its left operand, v + 0, is then the memo's v), then
    // the shared v + 0 -> v inside the multiplication's left operand.
    REQUIRE(st.steps.size() == 2);
    for (const trace::Step& s : st.steps) {
        CHECK(s.rule == "x + 0 -> x");
        CHECK(fs::path(s.file).filename() == "test_viz.cpp");
    }
    CHECK(st.steps[0].before.render() + " => " + st.steps[0].after.render() == "v + 0 => v");
    CHECK(st.steps[1].before.render() + " => " + st.steps[1].after.render() ==
          "v + 0 + 0 => v + 0");
    // The line is the rule's own.
    const std::vector<std::string> src =
        lines_of(read_file(repo_root() / "tests/viz/test_viz.cpp"));
    REQUIRE(st.steps[0].line >= 1);
    REQUIRE(st.steps[0].line <= src.size());
    CHECK(src[st.steps[0].line - 1].find("VIZ_RULE_LINE") != std::string::npos);
    // Steps outside any stage are not kept; a stage keeps at most kMaxSteps.
    trace::Recorder rec2;
    {
        const trace::Scope scope(&rec2);
        graph_rewrite(g, table);
    }
    CHECK(rec2.stages().empty());
    UOp chain = v;
    for (int i = 0; i < 2500; ++i) chain = chain + 0;
    {
        const trace::Scope scope(&rec2);
        CHECK(trace::stage("long", chain, [&] { return graph_rewrite(chain, table); }).same(v));
    }
    REQUIRE(rec2.stages().size() == 1);
    CHECK(rec2.stages()[0].steps.size() == trace::Recorder::kMaxSteps);
    CHECK(rec2.stages()[0].dropped == 2500 - trace::Recorder::kMaxSteps);
}

TEST_CASE("viz: TEMPURA_VIZ writes one self-contained page of calls, kernels, stages, steps") {
    const fs::path dir = fresh_dir("page");
    {
        const VizDir viz(dir);
        const EnvVar dbg("TEMPURA_DEBUG", "2");
        clear_caches();
        std::string err = capture_stderr([] {
            Tensor t = two_kernels(1.0f);
            t.realize();
            CHECK(t.kernels().size() == 2);
            Tensor u = two_kernels(1.0f); // the same graph of new buffers: the cached plan
            u.realize();
            Tensor w = two_kernels(1.0f); // again: counted on the same line
            w.realize();
        });
        CHECK(err.find("*** kernel") != std::string::npos);
        viz::flush(); // the repeat of a cached call is written at most every 2 s, and at exit
    }
    const fs::path page = dir / "tempura_viz.html";
    REQUIRE(fs::exists(page));
    const std::string html = read_file(page);
    // Self-contained: no fetched script, style or image.
    CHECK(html.find("src=\"http") == std::string::npos);
    CHECK(html.find("href=\"http") == std::string::npos);
    CHECK(html.find("<script src") == std::string::npos);
    // The calls, the kernels and every stage of the codegen pipeline for each kernel.
    CHECK(html.find("<section class=\"view\" id=\"c0\"") != std::string::npos);
    CHECK(html.find("realize 1 (and 1 more like it)</a> <small>2 kernels, cached") !=
          std::string::npos);
    CHECK(html.find("realize 2") == std::string::npos);
    CHECK(count_of(html, "<section class=\"view\" id=\"c0-k") ==
          2 * (1 + codegen::pipeline().size()));
    for (const codegen::Stage& s : codegen::pipeline())
        CHECK(count_of(html, std::string(": ") + s.name + "</h2>") >= 2);
    CHECK(html.find("scheduling › early rewrites</h2>") != std::string::npos);
    CHECK(html.find("scheduling › rangeify ") != std::string::npos);
    // The linear program and the LLVM IR of each kernel; the timing table (TEMPURA_DEBUG=2).
    CHECK(count_of(html, "<h3>linear program</h3>") == 2);
    CHECK(count_of(html, "<h3>LLVM IR</h3><pre class=\"code\">") == 2);
    CHECK(count_of(html, "define void @") >= 2);
    CHECK(html.find("<table class=\"timing\">") != std::string::npos);
    // Graphs drawn by dot, with node ids that the steps refer to.
    CHECK(count_of(html, "<svg") >= 2 * codegen::pipeline().size());
    CHECK(count_of(html, "class=\"node\"") > 20);
    // Every step names a rule and a source line, and that line is the rule's.
    const std::regex step_re("data-rule=\"([^\"]*)\" data-src=\"([^\":]*):([0-9]+)\"");
    size_t steps = 0;
    for (auto it = std::sregex_iterator(html.begin(), html.end(), step_re);
         it != std::sregex_iterator(); ++it, ++steps) {
        const std::string file = (*it)[2];
        const size_t line = std::stoul((*it)[3]);
        const std::vector<std::string> src = lines_of(read_file(repo_root() / file));
        REQUIRE_MESSAGE(line <= src.size(), file << ":" << line);
        INFO(file << ":" << line << " for " << (*it)[1]);
        CHECK(src[line - 1].find("rule(") != std::string::npos);
    }
    CHECK(steps > 10);
    CHECK(html.find("data-rule=\"index dtype: x -&gt; &lt;code&gt;\" "
                    "data-src=\"src/codegen/lowering_rules.cpp:") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("viz: with TEMPURA_VIZ unset nothing is recorded or written") {
    unsetenv("TEMPURA_VIZ");
    viz::reread();
    CHECK(viz::directory().empty());
    {
        viz::CallScope scope;
        CHECK(viz::current_call() == nullptr);
        CHECK(trace::current() == nullptr);
    }
    const fs::path dir = fresh_dir("unset");
    const fs::path cwd = fs::current_path();
    fs::current_path(dir);
    Tensor t = two_kernels(3.0f);
    t.realize();
    fs::current_path(cwd);
    CHECK(fs::is_empty(dir));
    fs::remove_all(dir);
}

// CTest runs this with --no-skip (test viz_browser): it needs Chromium, and says SKIPPED (exit
// 77) without it.
TEST_CASE("viz: the page renders in headless Chromium" * doctest::skip()) {
    const char* browsers[] = {"chromium", "chromium-browser", "google-chrome"};
    std::string browser;
    for (const char* b : browsers)
        if (std::system((std::string("command -v ") + b + " >/dev/null 2>&1").c_str()) == 0) {
            browser = b;
            break;
        }
    if (browser.empty()) {
        std::printf("SKIPPED: no Chromium (scripts/setup.sh installs the chromium package)\n");
        std::fflush(stdout);
        std::_Exit(77);
    }
    const fs::path dir = fresh_dir("browser");
    {
        const VizDir viz(dir);
        clear_caches();
        Tensor t = two_kernels(5.0f);
        t.realize();
    }
    const fs::path page = dir / "tempura_viz.html";
    REQUIRE(fs::exists(page));
    const std::string html = read_file(page);
    // A step with a drawing of its own and a highlight in the stage's graph.
    const std::regex step_re("<li id=\"(c0-k[0-9]+-s[0-9]+-t[0-9]+)\" data-b=\"[^\"]*\" "
                             "data-a=\"[^\"]*\" data-rule=\"([^\"]*)\"");
    std::smatch m;
    REQUIRE(std::regex_search(html, m, step_re));
    const std::string step = m[1], rule_html = m[2];
    const std::string flags = " --headless --no-sandbox --disable-gpu --hide-scrollbars "
                              "--user-data-dir=" +
                              (dir / "profile").string() + " --window-size=1400,900 ";
    const std::string url = "'file://" + page.string() + "#" + step + "'";
    const fs::path dom_file = dir / "dom.html", shot = dir / "shot.png";
    const std::string dump = "timeout 120 " + browser + flags + "--dump-dom " + url + " > " +
                             dom_file.string() + " 2>/dev/null";
    REQUIRE(std::system(dump.c_str()) == 0);
    const std::string dom = read_file(dom_file);
    // The script ran: the step's rule is in the selection panel, its list item is current.
    CHECK(dom.find("<b id=\"sel-rule\">" + rule_html + "</b>") != std::string::npos);
    CHECK(dom.find("<li id=\"" + step + "\"") != std::string::npos);
    CHECK(dom.find("class=\"cur\"") != std::string::npos);
    // The visible section's graph has nodes: its slots hold the SVGs moved out of the pool.
    const std::string sec = step.substr(0, step.rfind("-t"));
    const size_t at = dom.find("<section class=\"view\" id=\"" + sec + "\"");
    REQUIRE(at != std::string::npos);
    const size_t end = dom.find("</section>", at);
    const std::string visible = dom.substr(at, end - at);
    CHECK(visible.find("hidden") > visible.find('>')); // the shown section is not hidden
    CHECK(visible.find("<svg") != std::string::npos);
    CHECK(count_of(visible, "class=\"node") > 3);
    // The screenshot: a PNG of the page.
    const std::string snap = "timeout 120 " + browser + flags + "--screenshot=" + shot.string() +
                             " " + url + " >/dev/null 2>&1";
    REQUIRE(std::system(snap.c_str()) == 0);
    const std::string png = read_file(shot);
    REQUIRE(png.size() > 10000);
    CHECK(png.compare(1, 3, "PNG") == 0);
    fs::remove_all(dir);
}

// ---- TEMPURA_DEBUG, level by level ------------------------------------------------------------

namespace {
std::vector<std::string> debug_lines(int level, float base) {
    const EnvVar dbg("TEMPURA_DEBUG", std::to_string(level));
    clear_caches();
    return lines_of(capture_stderr([&] {
        Tensor t = two_kernels(base);
        t.realize();
    }));
}
const char* const kKernelLine1 = R"(\*\*\* [A-Za-z0-9_]+ +CPU *)";
const char* const kHeader2 = R"(\*\*\* kernel +backend +ms +GFLOP/s +GB/s)";
const char* const kKernelLine2 =
    R"(\*\*\* [A-Za-z0-9_]+ +CPU +[0-9.]+ +[0-9.]+ +[0-9.]+  \(compiled in [0-9.]+ ms\))";
const char* const kOptsLine3 = R"(opts [A-Za-z0-9_]+: \[.*\])";
} // namespace

TEST_CASE("debug: TEMPURA_DEBUG=1 prints a line per kernel run, and nothing else") {
    const auto l = debug_lines(1, 10.0f);
    CHECK(l.size() == 2);
    CHECK(count_matching(l, kKernelLine1) == 2);
}

TEST_CASE("debug: TEMPURA_DEBUG=2 prints a table: kernel, backend, ms, GFLOP/s, GB/s") {
    const auto l = debug_lines(2, 11.0f);
    CHECK(l.size() == 3);
    CHECK(count_matching(l, kHeader2) == 1);
    CHECK(count_matching(l, kKernelLine2) == 2);
    REQUIRE(!l.empty());
    CHECK(std::regex_match(l[0], std::regex(kHeader2)));
}

TEST_CASE("debug: TEMPURA_DEBUG=3 adds the opts of each kernel compiled") {
    const auto l = debug_lines(3, 12.0f);
    CHECK(count_matching(l, kHeader2) == 1);
    CHECK(count_matching(l, kKernelLine2) == 2);
    CHECK(count_matching(l, kOptsLine3) == 2);
    CHECK(l.size() == 5);
}

TEST_CASE("debug: TEMPURA_DEBUG=4 adds each kernel's LLVM IR") {
    const auto l = debug_lines(4, 13.0f);
    CHECK(count_matching(l, kKernelLine2) == 2);
    CHECK(count_matching(l, kOptsLine3) == 2);
    CHECK(count_matching(l, R"(define void @[A-Za-z0-9_]+\(.*)") == 2);
    CHECK(l.size() > 20);
}

TEST_CASE("debug: TEMPURA_DEBUG=5 adds the kernel after rangeify, each stage, and linearize") {
    const auto l = debug_lines(5, 14.0f);
    CHECK(count_matching(l, kKernelLine2) == 2);
    CHECK(count_matching(l, R"(=== [A-Za-z0-9_]+: rangeify)") == 2);
    for (const codegen::Stage& s : codegen::pipeline())
        CHECK_MESSAGE(count_matching(l, std::string("=== [A-Za-z0-9_]+: ") + s.name) >= 2, s.name);
    CHECK(count_matching(l, R"(=== [A-Za-z0-9_]+: linearize)") == 2);
    CHECK(count_matching(l, R"(define void @[A-Za-z0-9_]+\(.*)") == 2);
    // The dumped nodes name the user's line that built them: the sum, the sub and the mul.
    const std::string site = "@test_viz.cpp:" + std::to_string(g_two_kernels_line);
    size_t named = 0;
    for (const std::string& line : l) named += line.find(site) != std::string::npos;
    CHECK(named >= 3);
}

TEST_CASE("debug: BEAM at TEMPURA_DEBUG=1 prints a progress line per round") {
    const fs::path cache = fresh_dir("beam_cache"); // a search, not a cached answer
    const EnvVar cache_dir("TEMPURA_CACHE_DIR", cache.string());
    const EnvVar beam("TEMPURA_BEAM", "2");
    const auto l = debug_lines(1, 15.0f);
    fs::remove_all(cache);
    // Round 0 (the heuristics and no opts), then rounds that say how many of how many.
    const std::string progress = R"(BEAM [A-Za-z0-9_]+: round [0-9]+, tried ([0-9]+) of \1, best )"
                                 R"([0-9.]+ (ms|us) \[.*\])";
    CHECK(count_matching(l, R"(BEAM [A-Za-z0-9_]+: round 0, tried [12] of 2, best .*)") == 2);
    CHECK(count_matching(l, progress) >= 4); // two kernels, round 0 and at least round 1 each
    CHECK(count_matching(l, R"(BEAM [A-Za-z0-9_]+: [0-9.]+ (ms|us) \[.*\] \(heuristics .*)") == 2);
}
