#pragma once
// The symbolic case files ($TEMPURA_CASES_DIR/<name>.tsv: symbolic.tsv, tinygrad_symbolic.tsv):
// reading them, and checking one case's simplify() against its row. test_cases.cpp and
// test_tinygrad_cases.cpp share this; what counts as a failure is theirs to say.
//
// A row: name, vars, expr, true_min, true_max, bound_min, bound_max, max_nodes, reference (the
// symbolic.tsv header states the grammar and what each column means).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
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

namespace tempura_test {

struct Case {
    int line = 0;
    std::string name, vars, expr;
    int64_t true_min = 0, true_max = 0, bound_min = 0, bound_max = 0;
    int64_t max_nodes = 0;
    std::string reference;
};

inline const std::vector<std::string>& case_header() {
    static const std::vector<std::string> h = {"name",      "vars",      "expr",
                                               "true_min",  "true_max",  "bound_min",
                                               "bound_max", "max_nodes", "reference"};
    return h;
}

// $TEMPURA_CASES_DIR/<file> (the variable is set by CTest), else the folder the build configured
// (TEMPURA_CASES_DIR_DEFAULT).
inline std::string cases_file(const std::string& file) {
    const char* dir = std::getenv("TEMPURA_CASES_DIR");
#ifdef TEMPURA_CASES_DIR_DEFAULT
    if (dir == nullptr || *dir == '\0') dir = TEMPURA_CASES_DIR_DEFAULT;
#endif
    if (dir == nullptr || *dir == '\0')
        throw std::runtime_error("TEMPURA_CASES_DIR is not set: it must name the folder holding " +
                                 file);
    return std::string(dir) + "/" + file;
}

namespace detail {

inline std::vector<std::string> read_lines(const std::string& path) {
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

inline bool is_blank(const std::string& s) {
    return s.find_first_not_of(" \t") == std::string::npos;
}
inline bool is_comment(const std::string& s) {
    size_t i = s.find_first_not_of(" \t");
    return i != std::string::npos && s[i] == '#';
}

inline std::vector<std::string> split_tabs(const std::string& s) {
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

inline int64_t to_int(const std::string& s, const std::string& where, const char* column) {
    try {
        size_t used = 0;
        long long v = std::stoll(s, &used);
        if (used != s.size()) throw std::invalid_argument("trailing characters");
        return static_cast<int64_t>(v);
    } catch (const std::exception&) {
        throw std::runtime_error(where + ": column " + column + " is not an integer: '" + s + "'");
    }
}

} // namespace detail

inline std::vector<Case> load_cases(const std::string& path) {
    std::vector<std::string> lines = detail::read_lines(path);
    std::string file = path.substr(path.find_last_of('/') + 1);
    std::vector<Case> cases;
    bool header_seen = false;
    for (size_t i = 0; i < lines.size(); ++i) {
        const std::string& l = lines[i];
        int line_no = static_cast<int>(i + 1);
        std::string where = file + " line " + std::to_string(line_no);
        if (detail::is_blank(l) || detail::is_comment(l)) continue;
        std::vector<std::string> f = detail::split_tabs(l);
        if (!header_seen) {
            if (f != case_header())
                throw std::runtime_error(
                    where +
                    ": expected the header 'name<TAB>vars<TAB>expr<TAB>true_min...', got '" + l +
                    "'");
            header_seen = true;
            continue;
        }
        if (f.size() != case_header().size())
            throw std::runtime_error(where + ": expected " + std::to_string(case_header().size()) +
                                     " tab-separated fields, got " + std::to_string(f.size()) +
                                     ": '" + l + "'");
        Case c;
        c.line = line_no;
        c.name = f[0];
        c.vars = f[1];
        c.expr = f[2];
        c.true_min = detail::to_int(f[3], where, "true_min");
        c.true_max = detail::to_int(f[4], where, "true_max");
        c.bound_min = detail::to_int(f[5], where, "bound_min");
        c.bound_max = detail::to_int(f[6], where, "bound_max");
        c.max_nodes = detail::to_int(f[7], where, "max_nodes");
        c.reference = f[8];
        cases.push_back(c);
    }
    if (!header_seen) throw std::runtime_error(file + " has no header line");
    return cases;
}

// Counts data rows with the plainest possible scan, independent of load_cases: every line that is
// not blank and not a comment, less the header.
inline size_t count_data_rows(const std::string& path) {
    size_t n = 0;
    for (const std::string& l : detail::read_lines(path))
        if (!detail::is_blank(l) && !detail::is_comment(l)) ++n;
    return n == 0 ? 0 : n - 1;
}

constexpr double kMaxPoints = 1e6;

inline double point_count(const std::vector<VarSpec>& specs) {
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

inline std::string show(const std::map<std::string, int64_t>& a) {
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

inline std::string safe_render(const tempura::UOp& u) {
    try {
        return u.render();
    } catch (const std::exception& e) {
        return std::string("<render threw: ") + e.what() + ">";
    }
}

// Where the reference form differs from expr (our evaluate at every point), or "" if nowhere. This
// checks the data file and the parser, not the simplifier (only construction and evaluate).
inline std::string reference_mismatch(const Case& c) {
    try {
        std::vector<VarSpec> specs = parse_vars(c.vars);
        auto vars = make_vars(specs);
        tempura::UOp e = parse_expr(c.expr, vars);
        tempura::UOp r = parse_expr(c.reference, vars);
        if (point_count(specs) > kMaxPoints)
            return "too many points to enumerate: " + std::to_string(point_count(specs));
        int64_t bad = 0;
        std::string first_bad;
        for_each_assignment(specs, [&](const std::map<std::string, int64_t>& a) {
            int64_t ve = tempura::evaluate(e, a), vr = tempura::evaluate(r, a);
            if (ve != vr && bad++ == 0)
                first_bad =
                    show(a) + ": expr=" + std::to_string(ve) + " reference=" + std::to_string(vr);
        });
        if (bad)
            return "reference differs from expr at " + std::to_string(bad) + " points, first " +
                   first_bad;
    } catch (const std::exception& ex) {
        return std::string("threw: ") + ex.what();
    }
    return "";
}

// The doctest checks every case file passes: load_cases reads as many rows as a plain count
// finds, at least min_cases; names are unique; true_min <= true_max, the bounds contain the true
// range, max_nodes >= 1. Returns the case names.
inline std::set<std::string> check_case_file(const std::string& path, size_t min_cases) {
    std::vector<Case> cases = load_cases(path);
    MESSAGE("read " << cases.size() << " cases from " << path);
    CHECK(cases.size() >= min_cases);
    CHECK(cases.size() == count_data_rows(path));
    std::set<std::string> names;
    for (const Case& c : cases) {
        INFO("line " << c.line << ": " << c.name);
        CHECK_MESSAGE(names.insert(c.name).second, "duplicate case name " << c.name);
        CHECK(c.true_min <= c.true_max);
        CHECK(c.bound_min <= c.true_min);
        CHECK(c.bound_max >= c.true_max);
        CHECK(c.max_nodes >= 1);
    }
    return names;
}

// The doctest check that every case's reference form states the same function as its expr.
inline void check_references(const std::string& path) {
    for (const Case& c : load_cases(path)) {
        INFO("case " << c.name << " (line " << c.line << "): expr '" << c.expr << "', reference '"
                     << c.reference << "', vars '" << c.vars << "'");
        std::string bad = reference_mismatch(c);
        CHECK_MESSAGE(bad.empty(), bad);
    }
}

// One case's simplify() against its row. `errors`: what is wrong (no parse, a throw, a wrong value,
// the file's true range not the enumerated one, unsound bounds); `weaker`: where the result is
// right but looser than bound_min/bound_max or bigger than max_nodes.
struct CaseResult {
    std::string rendered;
    int64_t vmin = 0, vmax = 0;
    size_t nodes = 0;
    std::vector<std::string> errors, weaker;
    bool ok() const { return errors.empty() && weaker.empty(); }
    // "name: 'expr' -> 'simplified': [problem] [problem]"
    std::string describe(const Case& c) const {
        std::string line = c.name + ": '" + c.expr + "' -> '" + rendered + "':";
        for (const std::string& p : errors) line += " [" + p + "]";
        for (const std::string& p : weaker) line += " [" + p + "]";
        return line;
    }
};

inline CaseResult check_case(const Case& c) {
    CaseResult r;
    std::vector<VarSpec> specs;
    std::optional<tempura::UOp> e, s;
    try {
        specs = parse_vars(c.vars);
        e = parse_expr(c.expr, make_vars(specs));
    } catch (const std::exception& ex) {
        r.errors.push_back(std::string("parsing failed: ") + ex.what());
        return r;
    }
    try {
        s = tempura::simplify(*e);
    } catch (const std::exception& ex) {
        r.errors.push_back(std::string("simplify threw: ") + ex.what());
        return r;
    }
    r.rendered = safe_render(*s);
    if (point_count(specs) > kMaxPoints) {
        r.errors.push_back("too many points to enumerate: " + std::to_string(point_count(specs)));
        return r;
    }

    // Exactness, and the true range of expr over all assignments.
    int64_t mismatches = 0, errors = 0, points = 0;
    std::string first_mismatch, first_error;
    int64_t tmin = INT64_MAX, tmax = INT64_MIN;
    for_each_assignment(specs, [&](const std::map<std::string, int64_t>& a) {
        ++points;
        // One side's value at a; false (the first error kept) when evaluate throws.
        const auto eval = [&](const tempura::UOp& u, const char* which, int64_t& v) {
            try {
                v = tempura::evaluate(u, a);
                return true;
            } catch (const std::exception& ex) {
                if (errors++ == 0)
                    first_error = std::string("evaluate(") + which + ") at " + show(a) +
                                  " threw: " + ex.what();
                return false;
            }
        };
        int64_t ve = 0, vs = 0;
        if (!eval(*e, "expr", ve)) return;
        tmin = std::min(tmin, ve);
        tmax = std::max(tmax, ve);
        if (!eval(*s, "simplified", vs)) return;
        if (vs != ve && mismatches++ == 0)
            first_mismatch = "at " + show(a) + ": expr=" + std::to_string(ve) +
                             " simplified=" + std::to_string(vs);
    });
    if (errors)
        r.errors.push_back(std::to_string(errors) + " evaluations threw; first: " + first_error);
    if (mismatches)
        r.errors.push_back("simplified differs from expr at " + std::to_string(mismatches) +
                           " of " + std::to_string(points) + " points; first " + first_mismatch);
    // The file's true range must be what enumeration finds (checks the file and evaluate).
    if (errors == 0 && (tmin != c.true_min || tmax != c.true_max))
        r.errors.push_back("enumerated range [" + std::to_string(tmin) + ", " +
                           std::to_string(tmax) + "] differs from the file's [" +
                           std::to_string(c.true_min) + ", " + std::to_string(c.true_max) + "]");

    // Bounds: sound (contain the true range) and tight (within the reference bounds).
    r.vmin = s->vmin();
    r.vmax = s->vmax();
    std::string b = "[" + std::to_string(r.vmin) + ", " + std::to_string(r.vmax) + "]";
    if (r.vmin > c.true_min || r.vmax < c.true_max)
        r.errors.push_back("unsound bounds " + b + ", true range [" + std::to_string(c.true_min) +
                           ", " + std::to_string(c.true_max) + "]");
    if (r.vmin < c.bound_min || r.vmax > c.bound_max)
        r.weaker.push_back("loose bounds " + b + ", want within [" + std::to_string(c.bound_min) +
                           ", " + std::to_string(c.bound_max) + "]");

    // Size.
    r.nodes = s->node_count();
    if (static_cast<int64_t>(r.nodes) > c.max_nodes)
        r.weaker.push_back(std::to_string(r.nodes) + " nodes > " + std::to_string(c.max_nodes));
    return r;
}

// check_case with the case and its simplified form in the failure context, each error (a wrong
// value or an unsound bound) failed, and with `weaker_fails` each weaker bound or larger form too.
inline CaseResult check_case_logged(const Case& c, bool weaker_fails) {
    INFO("case " << c.name << " (line " << c.line << "): '" << c.expr << "' vars '" << c.vars
                 << "' (reference '" << c.reference << "')");
    CaseResult r = check_case(c);
    INFO("simplified: " << r.rendered);
    for (const std::string& p : r.errors) FAIL_CHECK(p);
    if (weaker_fails)
        for (const std::string& p : r.weaker) FAIL_CHECK(p);
    return r;
}

} // namespace tempura_test
