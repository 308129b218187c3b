// TEMPURA_VIZ: the page of realize calls, kernels, stages and rewrite steps.
//
// Layout by Graphviz's `dot` (Debian's graphviz), run once per realize call on all of that call's
// graphs: it is the standard layered layout for DAGs, it makes plain SVG at write time (the page
// needs no layout code, opens instantly from disk and is the same in every browser), and it adds
// no build step. Without `dot` the graphs are shown as text and the page says why.
#include "tempura/realize/viz.hpp"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "tempura/support/env.hpp"

namespace tempura::viz {

namespace {

thread_local CallTrace* g_call = nullptr;

constexpr size_t kMaxLayoutNodes = 600;            // larger graphs are shown as text
constexpr size_t kMiniDepth = 3;                   // a step's before/after: drawn this deep
constexpr size_t kMiniStepsPerStage = 16;          // steps per stage with their own drawings
constexpr size_t kMaxTextBytes = 200000;           // a graph's text, the IR: cut past this
constexpr size_t kMaxPageBytes = size_t{96} << 20; // older calls dropped past this

std::string esc(const std::string& s) {
    std::string o;
    o.reserve(s.size());
    for (char c : s) {
        switch (c) {
        case '&': o += "&amp;"; break;
        case '<': o += "&lt;"; break;
        case '>': o += "&gt;"; break;
        case '"': o += "&quot;"; break;
        default: o += c;
        }
    }
    return o;
}

std::string cut(const std::string& s) {
    if (s.size() <= kMaxTextBytes) return s;
    return s.substr(0, kMaxTextBytes) + "\n... (" + std::to_string(s.size() - kMaxTextBytes) +
           " more bytes not shown)\n";
}

// "src/symbolic/rules_fold.cpp" from a compiler's full path.
std::string short_path(const std::string& f) {
    for (const char* root : {"/src/", "/include/", "/tests/", "/examples/"}) {
        const auto p = f.rfind(root);
        if (p != std::string::npos) return f.substr(p + 1);
    }
    const auto p = f.find_last_of('/');
    return p == std::string::npos ? f : f.substr(p + 1);
}

// One call's graphs, laid out together by one run of dot.
class Layout {
  public:
    explicit Layout(std::string prefix) : prefix_(std::move(prefix)) {}
    // The page-wide id of drawing gi: "c<call>g<gi>".
    std::string id(int gi) const { return prefix_ + std::to_string(gi); }
    // The index of root's drawing with node ids "g<index>-u<node>" (-1: too large to draw).
    // With max_depth: the nodes within that many edges of root (a step's before or after).
    int graph(const UOp& root, const std::unordered_set<const UOpNode*>& highlight = {},
              size_t max_depth = SIZE_MAX) {
        if (root.is_null()) return -1;
        const bool plain = highlight.empty() && max_depth == SIZE_MAX;
        if (plain)
            if (auto it = plain_.find(root.get()); it != plain_.end()) return it->second;
        if (plain && root.node_count() > kMaxLayoutNodes) return -1;
        const int gi = static_cast<int>(dots_.size());
        const std::string prefix = id(gi) + "-u";
        dots_.push_back(
            root.to_dot([&](const UOp& u) { return prefix + std::to_string(node_id(u)); },
                        highlight, max_depth));
        keep_.push_back(root);
        if (plain) plain_.emplace(root.get(), gi);
        return gi;
    }
    // A node's number within the call (the same node has the same number in every graph).
    size_t node_id(const UOp& u) {
        auto [it, fresh] = ids_.emplace(u.get(), ids_.size());
        if (fresh) keep_.push_back(u);
        return it->second;
    }
    // Every drawing as SVG, in graph() order; empty (and why set) when dot could not run.
    std::vector<std::string> run(std::string& why) const {
        if (dots_.empty()) return {};
        char path[] = "/tmp/tempura_viz_XXXXXX";
        const int fd = mkstemp(path);
        if (fd < 0) {
            why = "could not write a temporary file for dot";
            return {};
        }
        {
            std::string all;
            for (const std::string& d : dots_) all += d;
            size_t off = 0;
            while (off < all.size()) {
                const ssize_t n = ::write(fd, all.data() + off, all.size() - off);
                if (n <= 0) break;
                off += static_cast<size_t>(n);
            }
            ::close(fd);
        }
        std::string out;
        const std::string cmd = std::string("dot -Tsvg '") + path + "' 2>/dev/null";
        if (FILE* p = popen(cmd.c_str(), "r")) {
            char buf[65536];
            size_t n;
            while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
            const int rc = pclose(p);
            if (rc != 0 && out.empty()) why = "Graphviz's dot did not run (is graphviz installed?)";
        } else {
            why = "could not start Graphviz's dot";
        }
        std::remove(path);
        std::vector<std::string> svgs;
        for (size_t at = 0;;) {
            const size_t b = out.find("<svg", at);
            if (b == std::string::npos) break;
            const size_t e = out.find("</svg>", b);
            if (e == std::string::npos) break;
            svgs.push_back(out.substr(b, e + 6 - b));
            at = e + 6;
        }
        if (svgs.size() != dots_.size()) {
            if (why.empty())
                why = "Graphviz's dot drew " + std::to_string(svgs.size()) + " of " +
                      std::to_string(dots_.size()) + " graphs";
            return {};
        }
        return svgs;
    }

  private:
    std::string prefix_;
    std::vector<std::string> dots_;
    std::vector<UOp> keep_; // the nodes numbered stay alive: no address is reused
    std::unordered_map<const UOpNode*, int> plain_;
    std::unordered_map<const UOpNode*, size_t> ids_;
};

struct Rendered {
    std::string nav, body, pool;
    bool cached = false;
    std::string cached_key; // the kernels of a cached call: repeats of it are merged
    size_t repeats = 1;
    size_t first_call = 0;
};

std::string graph_slot(const Layout& lay, int gi, const char* role, const UOp& g) {
    if (gi >= 0)
        return "<div class=\"slot\" data-g=\"" + lay.id(gi) + "\" data-role=\"" + role +
               "\"></div>";
    if (g.is_null()) return "<p class=\"note\">(none)</p>";
    return "<p class=\"note\">" + std::to_string(g.node_count()) +
           " nodes: too large to lay out; the graph as text:</p><pre>" + esc(cut(g.tree())) +
           "</pre>";
}

// One stage: its graphs before and after, and its steps.
void render_stage(const trace::Stage& st, const std::string& id, const std::string& title,
                  Layout& lay, std::string& body, std::string& nav) {
    nav += "<li><a href=\"#" + id + "\">" + esc(st.name) + "</a> <small>" +
           std::to_string(st.steps.size() + st.dropped) + "</small></li>";
    body += "<section class=\"view\" id=\"" + id + "\" hidden><h2>" + esc(title) + "</h2>";
    const bool same = !st.input.is_null() && !st.output.is_null() && st.input.same(st.output);
    body += "<p>" + std::to_string(st.steps.size() + st.dropped) + " rewrite steps" +
            (st.dropped ? " (the first " + std::to_string(st.steps.size()) + " kept)" : "") +
            (same ? "; the graph is unchanged" : "") +
            ".</p><div class=\"stage\"><div class=\"graphs\">";
    if (!same) {
        body += "<figure><figcaption>before</figcaption>" +
                graph_slot(lay, lay.graph(st.input), "i", st.input) + "</figure>";
    }
    body += "<figure><figcaption>" + std::string(same ? "graph" : "after") + "</figcaption>" +
            graph_slot(lay, lay.graph(st.output), same ? "io" : "o", st.output) + "</figure></div>";
    body += "<ol class=\"steps\" start=\"0\">";
    for (size_t t = 0; t < st.steps.size(); ++t) {
        const trace::Step& s = st.steps[t];
        const std::string sid = id + "-t" + std::to_string(t);
        const std::string src = short_path(s.file) + ":" + std::to_string(s.line);
        body += "<li id=\"" + sid + "\" data-b=\"u" + std::to_string(lay.node_id(s.before)) +
                "\" data-a=\"u" + std::to_string(lay.node_id(s.after)) + "\" data-rule=\"" +
                esc(s.rule) + "\" data-src=\"" + esc(src) + "\"";
        if (t < kMiniStepsPerStage) {
            const int mb = lay.graph(s.before, {s.before.get()}, kMiniDepth);
            const int ma = lay.graph(s.after, {s.after.get()}, kMiniDepth);
            if (mb >= 0) body += " data-mb=\"" + lay.id(mb) + "\"";
            if (ma >= 0) body += " data-ma=\"" + lay.id(ma) + "\"";
        }
        std::string before = s.before.render(), after = s.after.render();
        if (before.size() > 160) before = before.substr(0, 160) + "...";
        if (after.size() > 160) after = after.substr(0, 160) + "...";
        body += "><a href=\"#" + sid + "\"><code class=\"rule\">" + esc(s.rule) +
                "</code></a> <span class=\"src\">" + esc(src) + "</span><br><code>" + esc(before) +
                "</code> &rarr; <code>" + esc(after) + "</code></li>";
    }
    body += "</ol></div></section>";
}

Rendered render_call(const CallTrace& c, size_t n) {
    Rendered r;
    r.first_call = n;
    r.cached = c.cached;
    const std::string cid = "c" + std::to_string(n);
    Layout lay(cid + "g");
    std::string& nav = r.nav;
    std::string& body = r.body;
    const size_t nk = c.cached ? c.cached_kernels.size() : c.kernels.size();
    nav += "<details open><summary><a href=\"#" + cid + "\">realize " + std::to_string(n) +
           "</a> <small>" + std::to_string(nk) + " kernels" + (c.cached ? ", cached" : "") +
           "</small></summary><ul>";
    body += "<section class=\"view\" id=\"" + cid + "\" hidden><h2>realize " + std::to_string(n) +
            "</h2>";
    if (c.cached) {
        for (const std::string& k : c.cached_kernels) r.cached_key += k + "\n";
        body += "<p>The plan came from the cache: nothing was compiled. Its kernels:</p><ul>";
        for (const std::string& k : c.cached_kernels) body += "<li>" + esc(k) + "</li>";
        body += "</ul>";
    } else {
        body += "<p>" + std::to_string(c.kernels.size()) + " kernels, " +
                std::to_string(c.schedule.stages().size()) + " scheduling stages.</p>";
    }
    bool timed = false;
    for (const Timing& t : c.timings) timed = timed || t.ms >= 0;
    if (timed) {
        body += "<table class=\"timing\"><tr><th>kernel</th><th>backend</th><th>ms</th>"
                "<th>GFLOP/s</th><th>GB/s</th></tr>";
        for (const Timing& t : c.timings) {
            if (t.ms < 0) continue;
            char buf[160];
            std::snprintf(buf, sizeof buf, "<td>%.3f</td><td>%.2f</td><td>%.2f</td>", t.ms,
                          t.gflops, t.gbs);
            body += "<tr><td>" + esc(t.name) + "</td><td>CPU</td>" + buf + "</tr>";
        }
        body += "</table>";
    }
    body += "</section>";
    const auto& sched = c.schedule.stages();
    for (size_t s = 0; s < sched.size(); ++s)
        render_stage(sched[s], cid + "-s" + std::to_string(s),
                     "realize " + std::to_string(n) + " › scheduling › " + sched[s].name, lay, body,
                     nav);
    for (size_t k = 0; k < c.kernels.size(); ++k) {
        const KernelTrace& kt = c.kernels[k];
        if (kt.name.empty()) continue;
        const std::string kid = cid + "-k" + std::to_string(k);
        nav += "<li><details><summary><a href=\"#" + kid + "\">kernel " + esc(kt.name) +
               "</a></summary><ul>";
        body += "<section class=\"view\" id=\"" + kid + "\" hidden><h2>realize " +
                std::to_string(n) + " › kernel " + esc(kt.name) + "</h2><p>opts: <code>" +
                esc(kt.opts) + "</code></p><h3>linear program</h3><pre class=\"linear\">" +
                esc(cut(kt.linear)) + "</pre><h3>LLVM IR</h3><pre class=\"code\">" +
                esc(cut(kt.code)) + "</pre></section>";
        const auto& st = kt.rec.stages();
        for (size_t s = 0; s < st.size(); ++s)
            render_stage(st[s], kid + "-s" + std::to_string(s),
                         "realize " + std::to_string(n) + " › kernel " + kt.name + " › " +
                             std::to_string(s) + ": " + st[s].name,
                         lay, body, nav);
        nav += "</ul></details></li>";
    }
    nav += "</ul></details>";
    std::string why;
    const std::vector<std::string> svgs = lay.run(why);
    if (!why.empty()) body += "<p class=\"note\">No drawings for this call: " + esc(why) + ".</p>";
    for (size_t i = 0; i < svgs.size(); ++i)
        r.pool +=
            "<div id=\"" + lay.id(static_cast<int>(i)) + "\" class=\"g\">" + svgs[i] + "</div>";
    return r;
}

constexpr const char* kStyle = R"(
body{margin:0;font:13px Helvetica,Arial,sans-serif;display:flex;height:100vh}
nav{width:300px;overflow:auto;border-right:1px solid #ccc;padding:6px;background:#fafafa}
nav ul{list-style:none;padding-left:14px;margin:2px 0}nav a{text-decoration:none;color:#124}
main{flex:1;overflow:auto;padding:8px 14px}
#selected{position:sticky;top:0;background:#fff8d0;border:1px solid #e0c000;padding:6px;
 margin-bottom:8px;min-height:1.4em}
#selected .mini{display:flex;gap:12px}#selected .mini svg{max-height:260px;width:auto}
.stage{display:flex;gap:10px;align-items:flex-start}
.graphs{flex:3;display:flex;gap:8px;flex-wrap:wrap;max-height:80vh;overflow:auto}
figure{margin:0;border:1px solid #ddd;padding:4px}figure svg{max-width:100%;height:auto}
ol.steps{flex:2;max-height:80vh;overflow:auto;margin:0;font-size:12px}
ol.steps li{margin:3px 0;word-break:break-all}ol.steps li.cur{background:#fff2a8}
nav a.cur{font-weight:bold;background:#fff2a8}
code.rule{color:#a00}.src{color:#777}.note{color:#a60}
pre{background:#f4f4f4;padding:6px;overflow:auto;max-height:480px}
g.hl polygon,g.hl path,g.hl ellipse{stroke:#e00000;stroke-width:3px;fill:#ffb0b0}
table.timing td,table.timing th{padding:2px 8px;text-align:right}
)";

// A step selected by the fragment (#c0-k1-s3-t5) shows its rule, its source line and the
// nodes before and after, highlighted in the stage's graphs.
constexpr const char* kScript = R"(
function gEl(i){return document.getElementById(i);}
function place(slot,i){const g=gEl(i);if(g&&g.parentNode!==slot){slot.innerHTML='';slot.appendChild(g);}}
function show(h){
  const first=document.querySelector('section.view');
  if(!h&&first)h=first.id;
  const m=h.match(/^(.*)-t(\d+)$/);const sec=m?m[1]:h;
  const s=document.getElementById(sec);if(!s)return;
  document.querySelectorAll('section.view').forEach(v=>v.hidden=v!==s);
  document.querySelectorAll('nav a.cur').forEach(a=>a.classList.remove('cur'));
  const link=document.querySelector('nav a[href="#'+sec+'"]');
  if(link){link.classList.add('cur');for(let d=link.closest('details');d;d=d.parentElement.closest('details'))d.open=true;}
  s.querySelectorAll('.slot').forEach(sl=>place(sl,sl.dataset.g));
  document.querySelectorAll('.hl').forEach(e=>e.classList.remove('hl'));
  document.querySelectorAll('li.cur').forEach(e=>e.classList.remove('cur'));
  const rule=document.getElementById('sel-rule'),src=document.getElementById('sel-src');
  const mb=document.getElementById('sel-before'),ma=document.getElementById('sel-after');
  rule.textContent='';src.textContent='';mb.innerHTML='';ma.innerHTML='';
  if(!m)return;
  const li=document.getElementById(h);if(!li)return;
  li.classList.add('cur');
  const list=li.parentElement;list.scrollTop=li.offsetTop-list.offsetTop-40;
  rule.textContent=li.dataset.rule;src.textContent=li.dataset.src;
  s.querySelectorAll('.slot').forEach(sl=>{
    const r=sl.dataset.role;
    if(r.includes('i')){const e=document.getElementById(sl.dataset.g+'-'+li.dataset.b);if(e)e.classList.add('hl');}
    if(r.includes('o')){const e=document.getElementById(sl.dataset.g+'-'+li.dataset.a);if(e)e.classList.add('hl');}
  });
  if(li.dataset.mb)place(mb,li.dataset.mb);
  if(li.dataset.ma)place(ma,li.dataset.ma);
}
window.addEventListener('hashchange',()=>show(location.hash.slice(1)));
show(location.hash.slice(1));
)";

struct Page {
    std::mutex mu;
    std::vector<Rendered> calls;
    size_t next_call = 0;
    size_t dropped = 0;
    std::string dir;
    bool dirty = false;
    std::chrono::steady_clock::time_point last_write{};
    bool atexit_set = false;
};
Page& page() {
    static auto* p = new Page; // never destroyed: written from atexit
    return *p;
}

void write_page_locked(Page& p) {
    std::string html = "<!doctype html><html><head><meta charset=\"utf-8\"><title>Tempura "
                       "VIZ</title><style>";
    html += kStyle;
    html += "</style></head><body><nav id=\"nav\"><b>Tempura VIZ</b>";
    if (p.dropped)
        html += "<p class=\"note\">" + std::to_string(p.dropped) +
                " earlier realize calls dropped (the page is bounded).</p>";
    for (const Rendered& r : p.calls) html += r.nav;
    html += "</nav><main id=\"main\"><div id=\"selected\"><b id=\"sel-rule\"></b> <span "
            "id=\"sel-src\" class=\"src\"></span><div class=\"mini\"><div id=\"sel-before\">"
            "</div><div id=\"sel-after\"></div></div></div>";
    for (const Rendered& r : p.calls) html += r.body;
    html += "</main><div id=\"pool\" hidden>";
    for (const Rendered& r : p.calls) html += r.pool;
    html += "</div><script>";
    html += kScript;
    html += "</script></body></html>\n";
    std::error_code ec;
    std::filesystem::create_directories(p.dir, ec);
    const std::string path = page_path(p.dir);
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary);
        f << html;
        if (!f) {
            env::warn_once("TEMPURA_VIZ: cannot write " + path);
            return;
        }
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) env::warn_once("TEMPURA_VIZ: cannot write " + path + ": " + ec.message());
    p.dirty = false;
    p.last_write = std::chrono::steady_clock::now();
}

void add_call(const CallTrace& c) {
    Page& p = page();
    // Rendering (and dot) runs outside the lock; the call's number is taken under it.
    size_t n;
    {
        std::lock_guard<std::mutex> lock(p.mu);
        n = p.next_call++;
    }
    Rendered r = render_call(c, n);
    std::lock_guard<std::mutex> lock(p.mu);
    if (!p.atexit_set) {
        p.atexit_set = true;
        std::atexit([] { flush(); });
    }
    p.dir = c.dir;
    // A cached call that repeats the one before is counted there (a training loop).
    if (r.cached && !p.calls.empty() && p.calls.back().cached &&
        p.calls.back().cached_key == r.cached_key) {
        Rendered& last = p.calls.back();
        ++last.repeats;
        const std::string tag = "realize " + std::to_string(last.first_call);
        // The nav line and the heading say how many calls it stands for.
        const std::string note = " (and " + std::to_string(last.repeats - 1) + " more like it)";
        auto relabel = [&](std::string& s) {
            const auto at = s.find(tag);
            if (at == std::string::npos) return;
            auto end = at + tag.size();
            if (s.compare(end, 6, " (and ") == 0) s.erase(end, s.find(')', end) + 1 - end);
            s.insert(end, note);
        };
        relabel(last.nav);
        relabel(last.body);
        p.dirty = true;
        if (std::chrono::steady_clock::now() - p.last_write > std::chrono::seconds(2))
            write_page_locked(p);
        return;
    }
    p.calls.push_back(std::move(r));
    size_t bytes = 0;
    for (const Rendered& x : p.calls) bytes += x.nav.size() + x.body.size() + x.pool.size();
    while (bytes > kMaxPageBytes && p.calls.size() > 1) {
        const Rendered& x = p.calls.front();
        bytes -= x.nav.size() + x.body.size() + x.pool.size();
        p.calls.erase(p.calls.begin());
        ++p.dropped;
    }
    write_page_locked(p);
}

} // namespace

namespace {
// TEMPURA_VIZ as last read: 0 not read yet, 1 unset, 2 set (then g_dir holds it).
std::atomic<int> g_state{0};
std::mutex g_dir_mu;
std::string g_dir;

std::string read_directory() {
    std::lock_guard<std::mutex> lock(g_dir_mu);
    if (g_state.load(std::memory_order_acquire) == 0) {
        g_dir = env::get_string("TEMPURA_VIZ");
        g_state.store(g_dir.empty() ? 1 : 2, std::memory_order_release);
    }
    return g_dir;
}
} // namespace

std::string directory() {
    if (g_state.load(std::memory_order_acquire) == 1) return {};
    return read_directory();
}

void reread() {
    std::lock_guard<std::mutex> lock(g_dir_mu);
    g_state.store(0, std::memory_order_release);
}

std::string page_path(const std::string& dir) { return dir + "/tempura_viz.html"; }

CallTrace* current_call() { return g_call; }

void flush() {
    Page& p = page();
    std::lock_guard<std::mutex> lock(p.mu);
    if (p.dirty) write_page_locked(p);
}

CallScope::CallScope() {
    if (g_state.load(std::memory_order_acquire) == 1) return; // the common case: unset
    std::string dir = directory();
    if (dir.empty()) return;
    call_ = std::make_unique<CallTrace>();
    call_->dir = std::move(dir);
    saved_ = g_call;
    g_call = call_.get();
    scope_ = std::make_unique<trace::Scope>(&call_->schedule);
}

void CallScope::finish() {
    if (!call_) return;
    scope_.reset();
    g_call = saved_;
    std::unique_ptr<CallTrace> c = std::move(call_);
    if (!c->cached && c->kernels.empty() && c->schedule.stages().empty()) return; // nothing ran
    add_call(*c);
}

CallScope::~CallScope() {
    if (!call_) return;
    try {
        finish();
    } catch (...) { // a page that cannot be written must not turn a realize's error into another
    }
}

} // namespace tempura::viz
