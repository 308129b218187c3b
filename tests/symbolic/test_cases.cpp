// The shared symbolic cases ($TEMPURA_CASES_DIR/symbolic.tsv): for each case, simplify(expr) must
// equal expr at every assignment of the variables, have sound and tight bounds, and be at most
// max_nodes nodes. The tsv header states the grammar and what passing means.
#include <doctest/doctest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "case_file.hpp"

namespace {

using tempura_test::Case;

std::string cases_file() { return tempura_test::cases_file("symbolic.tsv"); }

} // namespace

TEST_CASE("symbolic cases: the data file is read completely") {
    std::string path = cases_file();
    std::vector<Case> cases = tempura_test::load_cases(path);
    size_t rows = tempura_test::count_data_rows(path);
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
    for (const Case& c : tempura_test::load_cases(cases_file())) {
        INFO("case " << c.name << " (line " << c.line << "): expr '" << c.expr << "', reference '"
                     << c.reference << "', vars '" << c.vars << "'");
        std::string bad = tempura_test::reference_mismatch(c);
        CHECK_MESSAGE(bad.empty(), bad);
    }
}

TEST_CASE("symbolic cases: simplify is exact, sound, tight and small") {
    std::vector<Case> cases = tempura_test::load_cases(cases_file());
    std::vector<std::string> failing;
    for (const Case& c : cases) {
        INFO("case " << c.name << " (line " << c.line << "): '" << c.expr << "' vars '" << c.vars
                     << "' (reference '" << c.reference << "')");
        tempura_test::CaseResult r = tempura_test::check_case(c);
        INFO("simplified: " << r.rendered);
        for (const std::string& p : r.errors) FAIL_CHECK(p);
        for (const std::string& p : r.weaker) FAIL_CHECK(p);
        if (!r.ok()) failing.push_back(r.describe(c));
    }
    std::ostringstream summary;
    summary << (cases.size() - failing.size()) << "/" << cases.size() << " symbolic cases pass";
    for (const std::string& f : failing) summary << "\n  FAIL " << f;
    MESSAGE(summary.str());
    CHECK(failing.empty());
}
