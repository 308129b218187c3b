// The shared symbolic cases ($TEMPURA_CASES_DIR/symbolic.tsv): for each case, simplify(expr) must
// equal expr at every assignment of the variables, have sound and tight bounds, and be at most
// max_nodes nodes. The tsv header states the grammar and what passing means.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "case_file.hpp"

namespace {

using tempura_test::Case;

std::string cases_file() { return tempura_test::cases_file("symbolic.tsv"); }

} // namespace

TEST_CASE("symbolic cases: the data file is read completely") {
    tempura_test::check_case_file(cases_file(), 70);
}

// The reference column is for information, but it must state the same function as expr; this checks
// the data file and the parser, not the library's simplifier (only construction and evaluate).
TEST_CASE("symbolic cases: reference forms agree with expr") {
    tempura_test::check_references(cases_file());
}

TEST_CASE("symbolic cases: simplify is exact, sound, tight and small") {
    std::vector<Case> cases = tempura_test::load_cases(cases_file());
    std::vector<std::string> failing;
    for (const Case& c : cases) {
        const tempura_test::CaseResult r = tempura_test::check_case_logged(c, true);
        if (!r.ok()) failing.push_back(r.describe(c));
    }
    std::ostringstream summary;
    summary << (cases.size() - failing.size()) << "/" << cases.size() << " symbolic cases pass";
    for (const std::string& f : failing) summary << "\n  FAIL " << f;
    MESSAGE(summary.str());
    CHECK(failing.empty());
}
