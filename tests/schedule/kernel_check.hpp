#pragma once
// The scheduler tests' checks of a realized tensor: its kernel count, its kernels' names, and its
// values against the reference interpreter.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <tempura/schedule/schedule.hpp>
#include <tempura/tempura.hpp>
#include <tempura/tensor/reference.hpp>

namespace kernel_check {

// Scheduled kernels that compute something (a kernel with an empty output has no AST and never
// runs, so realize() does not list it).
inline size_t planned(const tempura::Tensor& t) {
    size_t n = 0;
    for (const auto& k : tempura::schedule_graph(t.uop()))
        if (!k.ast.is_null()) ++n;
    return n;
}

// Realizes t and returns the number of kernels that ran; checks that the plan taken before
// realize() said the same, and that every value is the reference interpreter's within
// tol * max(1, |want|).
inline size_t realized_kernels(tempura::Tensor& t, double tol = 1e-5) {
    const size_t plan = planned(t);
    const std::vector<double> want = tempura::reference_eval(t.uop());
    t.realize();
    CHECK(t.is_realized());
    CHECK(t.kernels().size() == plan);
    const std::vector<float> got = t.to_vector<float>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i)
        if (!(std::fabs(got[i] - want[i]) <= tol * std::max(1.0, std::fabs(want[i])))) {
            FAIL_CHECK("element " << i << ": compiled " << got[i] << ", reference " << want[i]);
            break;
        }
    return t.kernels().size();
}

// The names of t's kernels, in the order they ran, separated by spaces.
inline std::string names(const tempura::Tensor& t) {
    std::string s;
    for (const auto& k : t.kernels()) s += (s.empty() ? "" : " ") + k.name;
    return s;
}

} // namespace kernel_check
