// The shared symbolic cases ($TEMPURA_CASES_DIR/symbolic.tsv): for each case, simplify(expr) must
// equal expr at every assignment of the variables, have sound and tight bounds, and be at most
// max_nodes nodes. The tsv header states the grammar and what passing means.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <tempura/tempura.hpp>

#include "expr_parser.hpp"

namespace {

using tempura_test::VarSpec;

struct Case {
    int line = 0;
    std::string name, vars, expr;
    int64_t true_min = 0, true_max = 0, bound_min = 0, bound_max = 0;
    int64_t max_nodes = 0;
    std::string reference;
};

const std::vector<std::string> kHeader = {"name",      "vars",      "expr",
                                          "true_min",  "true_max",  "bound_min",
                                          "bound_max", "max_nodes", "reference"};

// $TEMPURA_CASES_DIR (set by CTest), else the folder the build configured
// (TEMPURA_CASES_DIR_DEFAULT).
std::string cases_file() {
    const char* dir = std::getenv("TEMPURA_CASES_DIR");
#ifdef TEMPURA_CASES_DIR_DEFAULT
    if (dir == nullptr || *dir == '\0') dir = TEMPURA_CASES_DIR_DEFAULT;
#endif
    if (dir == nullptr || *dir == '\0')
        throw std::runtime_error(
            "TEMPURA_CASES_DIR is not set: it must name the folder holding symbolic.tsv");
    return std::string(dir) + "/symbolic.tsv";
}

std::vector<std::string> read_lines(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open the symbolic cases file '" + path + "'");
    std::vector<std::string> lines;
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        lines.push_back(line);
    }
    return lines;
}

bool is_blank(const std::string& s) { return s.find_first_not_of(" \t") == std::string::npos; }
bool is_comment(const std::string& s) {
    size_t i = s.find_first_not_of(" \t");
    return i != std::string::npos && s[i] == '#';
}

std::vector<std::string> split_tabs(const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    for (;;) {
        size_t tab = s.find('\t', start);
        if (tab == std::string::npos) {
            out.push_back(s.substr(start));
            return out;
        }
        out.push_back(s.substr(start, tab - start));
        start = tab + 1;
    }
}

int64_t to_int(const std::string& s, int line, const char* column) {
    try {
        size_t used = 0;
        long long v = std::stoll(s, &used);
        if (used != s.size()) throw std::invalid_argument("trailing characters");
        return static_cast<int64_t>(v);
    } catch (const std::exception&) {
        throw std::runtime_error("symbolic.tsv line " + std::to_string(line) + ": column " +
                                 column + " is not an integer: '" + s + "'");
    }
}

std::vector<Case> load_cases(const std::string& path) {
    std::vector<std::string> lines = read_lines(path);
    std::vector<Case> cases;
    bool header_seen = false;
    for (size_t i = 0; i < lines.size(); ++i) {
        const std::string& l = lines[i];
        int line_no = static_cast<int>(i + 1);
        if (is_blank(l) || is_comment(l)) continue;
        std::vector<std::string> f = split_tabs(l);
        if (!header_seen) {
            if (f != kHeader)
                throw std::runtime_error(
                    "symbolic.tsv line " + std::to_string(line_no) +
                    ": expected the header 'name<TAB>vars<TAB>expr<TAB>true_min...', got '" + l +
                    "'");
            header_seen = true;
            continue;
        }
        if (f.size() != kHeader.size())
            throw std::runtime_error("symbolic.tsv line " + std::to_string(line_no) +
                                     ": expected " + std::to_string(kHeader.size()) +
                                     " tab-separated fields, got " + std::to_string(f.size()) +
                                     ": '" + l + "'");
        Case c;
        c.line = line_no;
        c.name = f[0];
        c.vars = f[1];
        c.expr = f[2];
        c.true_min = to_int(f[3], line_no, "true_min");
        c.true_max = to_int(f[4], line_no, "true_max");
        c.bound_min = to_int(f[5], line_no, "bound_min");
        c.bound_max = to_int(f[6], line_no, "bound_max");
        c.max_nodes = to_int(f[7], line_no, "max_nodes");
        c.reference = f[8];
        cases.push_back(c);
    }
    if (!header_seen) throw std::runtime_error("symbolic.tsv has no header line");
    return cases;
}

// Counts data rows with the plainest possible scan, independent of load_cases: every line that is
// not blank and not a comment, less the header.
size_t count_data_rows(const std::string& path) {
    size_t n = 0;
    for (const std::string& l : read_lines(path))
        if (!is_blank(l) && !is_comment(l)) ++n;
    return n == 0 ? 0 : n - 1;
}

constexpr double kMaxPoints = 1e6;

double point_count(const std::vector<VarSpec>& specs) {
    double n = 1;
    for (const VarSpec& v : specs)
        n *= static_cast<double>(v.max) - static_cast<double>(v.min) + 1.0;
    return n;
}

// Calls f(assignment) for every assignment of the variables (odometer order).
template <class F>
void for_each_assignment(const std::vector<VarSpec>& specs, F&& f) {
    std::map<std::string, int64_t> a;
    for (const VarSpec& v : specs) a[v.name] = v.min;
    for (;;) {
        f(static_cast<const std::map<std::string, int64_t>&>(a));
        size_t k = 0;
        for (; k < specs.size(); ++k) {
            int64_t& x = a[specs[k].name];
            if (x < specs[k].max) {
                ++x;
                break;
            }
            x = specs[k].min;
        }
        if (k == specs.size()) return;
    }
}

std::string show(const std::map<std::string, int64_t>& a) {
    if (a.empty()) return "{}";
    std::ostringstream os;
    os << "{";
    bool first = true;
    for (const auto& [k, v] : a) {
        os << (first ? "" : ", ") << k << "=" << v;
        first = false;
    }
    os << "}";
    return os.str();
}

std::string safe_render(const tempura::UOp& u) {
    try {
        return u.render();
    } catch (const std::exception& e) {
        return std::string("<render threw: ") + e.what() + ">";
    }
}

} // namespace

TEST_CASE("symbolic cases: the data file is read completely") {
    std::string path = cases_file();
    std::vector<Case> cases = load_cases(path);
    size_t rows = count_data_rows(path);
    MESSAGE("read " << cases.size() << " cases from " << path);
    CHECK(cases.size() >= 70);
    CHECK(cases.size() == rows);
    std::set<std::string> names;
    for (const Case& c : cases) {
        INFO("line " << c.line << ": " << c.name);
        CHECK_MESSAGE(names.insert(c.name).second, "duplicate case name " << c.name);
        CHECK(c.true_min <= c.true_max);
        CHECK(c.bound_min <= c.true_min);
        CHECK(c.bound_max >= c.true_max);
        CHECK(c.max_nodes >= 1);
    }
}

// The reference column is for information, but it must state the same function as expr; this checks
// the data file and the parser, not the library's simplifier (only construction and evaluate).
TEST_CASE("symbolic cases: reference forms agree with expr") {
    std::vector<Case> cases = load_cases(cases_file());
    for (const Case& c : cases) {
        INFO("case " << c.name << " (line " << c.line << "): expr '" << c.expr << "', reference '"
                     << c.reference << "', vars '" << c.vars << "'");
        try {
            std::vector<VarSpec> specs = tempura_test::parse_vars(c.vars);
            auto vars = tempura_test::make_vars(specs);
            tempura::UOp e = tempura_test::parse_expr(c.expr, vars);
            tempura::UOp r = tempura_test::parse_expr(c.reference, vars);
            if (point_count(specs) > kMaxPoints) {
                FAIL_CHECK("too many points to enumerate: " << point_count(specs));
                continue;
            }
            int64_t bad = 0;
            std::string first_bad;
            for_each_assignment(specs, [&](const std::map<std::string, int64_t>& a) {
                int64_t ve = tempura::evaluate(e, a), vr = tempura::evaluate(r, a);
                if (ve != vr && bad++ == 0)
                    first_bad = show(a) + ": expr=" + std::to_string(ve) +
                                " reference=" + std::to_string(vr);
            });
            CHECK_MESSAGE(bad == 0, "reference differs from expr at " << bad << " points, first "
                                                                      << first_bad);
        } catch (const std::exception& ex) {
            FAIL_CHECK("threw: " << ex.what());
        }
    }
}

TEST_CASE("symbolic cases: simplify is exact, sound, tight and small") {
    std::vector<Case> cases = load_cases(cases_file());
    std::vector<std::string> failing;
    for (const Case& c : cases) {
        INFO("case " << c.name << " (line " << c.line << "): '" << c.expr << "' vars '" << c.vars
                     << "' (reference '" << c.reference << "')");
        std::vector<std::string> problems;
        auto problem = [&](const std::string& p) { problems.push_back(p); };

        std::vector<VarSpec> specs;
        std::optional<tempura::UOp> e, s;
        try {
            specs = tempura_test::parse_vars(c.vars);
            e = tempura_test::parse_expr(c.expr, tempura_test::make_vars(specs));
        } catch (const std::exception& ex) {
            FAIL_CHECK("parsing failed: " << ex.what());
            failing.push_back(c.name + " (parse: " + ex.what() + ")");
            continue;
        }
        try {
            s = tempura::simplify(*e);
        } catch (const std::exception& ex) {
            FAIL_CHECK("simplify threw: " << ex.what());
            failing.push_back(c.name + " (simplify threw: " + ex.what() + ")");
            continue;
        }
        std::string rendered = safe_render(*s);
        INFO("simplified: " << rendered);

        if (point_count(specs) > kMaxPoints) {
            FAIL_CHECK("too many points to enumerate: " << point_count(specs));
            failing.push_back(c.name + " (too many points)");
            continue;
        }

        // Exactness, and the true range of expr over all assignments.
        int64_t mismatches = 0, errors = 0, points = 0;
        std::string first_mismatch, first_error;
        int64_t tmin = INT64_MAX, tmax = INT64_MIN;
        for_each_assignment(specs, [&](const std::map<std::string, int64_t>& a) {
            ++points;
            int64_t ve = 0, vs = 0;
            try {
                ve = tempura::evaluate(*e, a);
            } catch (const std::exception& ex) {
                if (errors++ == 0)
                    first_error = "evaluate(expr) at " + show(a) + " threw: " + ex.what();
                return;
            }
            tmin = std::min(tmin, ve);
            tmax = std::max(tmax, ve);
            try {
                vs = tempura::evaluate(*s, a);
            } catch (const std::exception& ex) {
                if (errors++ == 0)
                    first_error = "evaluate(simplified) at " + show(a) + " threw: " + ex.what();
                return;
            }
            if (vs != ve && mismatches++ == 0)
                first_mismatch = "at " + show(a) + ": expr=" + std::to_string(ve) +
                                 " simplified=" + std::to_string(vs);
        });
        CHECK_MESSAGE(errors == 0, errors << " evaluations threw; first: " << first_error);
        CHECK_MESSAGE(mismatches == 0, "simplified differs from expr at "
                                           << mismatches << " of " << points << " points; first "
                                           << first_mismatch);
        if (errors) problem("evaluate threw: " + first_error);
        if (mismatches) problem("wrong value " + first_mismatch);

        // The data file's true range must be what enumeration finds (checks the file and evaluate).
        if (errors == 0) {
            CHECK_MESSAGE(tmin == c.true_min,
                          "enumerated min " << tmin << " but the file says " << c.true_min);
            CHECK_MESSAGE(tmax == c.true_max,
                          "enumerated max " << tmax << " but the file says " << c.true_max);
            if (tmin != c.true_min || tmax != c.true_max)
                problem("enumerated range [" + std::to_string(tmin) + ", " + std::to_string(tmax) +
                        "] differs from the file's");
        }

        // Bounds: sound (contain the true range) and tight (within the reference bounds).
        int64_t lo = s->vmin(), hi = s->vmax();
        CHECK_MESSAGE(lo <= c.true_min, "unsound: vmin " << lo << " > true_min " << c.true_min);
        CHECK_MESSAGE(hi >= c.true_max, "unsound: vmax " << hi << " < true_max " << c.true_max);
        CHECK_MESSAGE(lo >= c.bound_min, "loose: vmin " << lo << " < bound_min " << c.bound_min);
        CHECK_MESSAGE(hi <= c.bound_max, "loose: vmax " << hi << " > bound_max " << c.bound_max);
        if (lo > c.true_min || hi < c.true_max)
            problem("unsound bounds [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        if (lo < c.bound_min || hi > c.bound_max)
            problem("loose bounds [" + std::to_string(lo) + ", " + std::to_string(hi) +
                    "], want within [" + std::to_string(c.bound_min) + ", " +
                    std::to_string(c.bound_max) + "]");

        // Size.
        size_t nodes = s->node_count();
        CHECK_MESSAGE(static_cast<int64_t>(nodes) <= c.max_nodes,
                      "too big: " << nodes << " nodes, max_nodes " << c.max_nodes);
        if (static_cast<int64_t>(nodes) > c.max_nodes)
            problem(std::to_string(nodes) + " nodes > " + std::to_string(c.max_nodes));

        if (!problems.empty()) {
            std::string line = c.name + ": '" + c.expr + "' -> '" + rendered + "':";
            for (const std::string& p : problems) line += " [" + p + "]";
            failing.push_back(line);
        }
    }
    std::ostringstream summary;
    summary << (cases.size() - failing.size()) << "/" << cases.size() << " symbolic cases pass";
    for (const std::string& f : failing) summary << "\n  FAIL " << f;
    MESSAGE(summary.str());
    CHECK(failing.empty());
}
