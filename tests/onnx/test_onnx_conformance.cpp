// ONNX's own backend conformance suite (Debian's libonnx-testdata): each case is a model.onnx
// with test_data_set_*/input_*.pb and output_*.pb. A case passes when every output matches
// within ONNX's tolerances (rtol 1e-3, atol 1e-7; integers and bools exactly; NaN where NaN is
// expected), is refused when load or run says "not supported", and fails otherwise (a wrong
// answer or another error). String and sequence cases (inputs or outputs that are not numeric
// tensors) are counted apart.
//
// TEMPURA_ONNX_CASES=<substring> runs the cases whose path contains it (all by default);
// TEMPURA_ONNX_VERBOSE=1 prints every case.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tempura/onnx.hpp"
#include "tempura/tempura.hpp"

#ifdef TEMPURA_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace fs = std::filesystem;
using tempura::Tensor;

#ifndef TEMPURA_ONNX_TESTDATA
#define TEMPURA_ONNX_TESTDATA "/usr/share/libonnx-testdata/data"
#endif

namespace {

#ifdef TEMPURA_HAVE_ONNX

enum class Status { Pass, Refused, Failed, NonNumeric, BadData };

// Cases whose expected values do not follow from their model, with the reason.
const std::map<std::string, std::string>& bad_data() {
    static const std::map<std::string, std::string> m = {
        {"node/test_adam_multiple", "its expected values use epsilon 1e-2, which the model does "
                                    "not state (ONNX's default is 0)"},
    };
    return m;
}

struct CaseResult {
    std::string name;
    Status status = Status::Failed;
    std::string detail;
    std::set<std::string> ops;
};

struct ProtoInfo {
    std::vector<std::string> inputs, outputs; // every graph input (initializers too), outputs
    std::vector<int> input_types, output_types;
    std::set<std::string> ops;
    bool non_numeric = false;
};

bool numeric_type(const ::onnx::TypeProto& t) {
    if (!t.has_tensor_type()) return false;
    const int e = t.tensor_type().elem_type();
    return e != 8 && e != 14 && e != 15; // STRING, COMPLEX64, COMPLEX128
}

ProtoInfo proto_info(const fs::path& model) {
    ProtoInfo info;
    std::ifstream in(model, std::ios::binary);
    ::onnx::ModelProto m;
    if (!m.ParseFromIstream(&in)) return info;
    for (const auto& v : m.graph().input()) {
        info.inputs.push_back(v.name());
        info.input_types.push_back(v.type().tensor_type().elem_type());
        if (!numeric_type(v.type())) info.non_numeric = true;
    }
    for (const auto& v : m.graph().output()) {
        info.outputs.push_back(v.name());
        info.output_types.push_back(v.type().tensor_type().elem_type());
        if (!numeric_type(v.type())) info.non_numeric = true;
    }
    for (const auto& n : m.graph().node()) info.ops.insert(n.op_type());
    return info;
}

// Why `got` differs from `want`, or "".
std::string compare(const Tensor& got, const Tensor& want) {
    if (got.dtype() != want.dtype())
        return "dtype " + got.dtype().name() + ", expected " + want.dtype().name();
    if (got.shape() != want.shape())
        return "shape " + tempura::shape_str(got.shape()) + ", expected " +
               tempura::shape_str(want.shape());
    if (got.dtype().is_float()) {
        const auto g = got.to_vector<double>(), w = want.to_vector<double>();
        for (size_t k = 0; k < g.size(); ++k) {
            if (std::isnan(w[k]) && std::isnan(g[k])) continue;
            if (std::isinf(w[k]) && g[k] == w[k]) continue;
            if (!(std::abs(g[k] - w[k]) <= 1e-7 + 1e-3 * std::abs(w[k])))
                return "element " + std::to_string(k) + " is " + std::to_string(g[k]) +
                       ", expected " + std::to_string(w[k]);
        }
        return "";
    }
    if (got.dtype() == tempura::DType::UInt64) {
        if (got.to_vector<uint64_t>() != want.to_vector<uint64_t>()) return "values differ";
        return "";
    }
    const auto g = got.to_vector<int64_t>(), w = want.to_vector<int64_t>();
    for (size_t k = 0; k < g.size(); ++k)
        if (g[k] != w[k])
            return "element " + std::to_string(k) + " is " + std::to_string(g[k]) + ", expected " +
                   std::to_string(w[k]);
    return "";
}

// ONNX's test data holds BFLOAT16 tensors as UINT16 (their bits): read them back as bfloat16.
Tensor bf16_from_bits(const Tensor& bits) {
    std::vector<float> f;
    for (int64_t b : bits.to_vector<int64_t>()) {
        const uint32_t u = static_cast<uint32_t>(b) << 16;
        float v;
        std::memcpy(&v, &u, 4);
        f.push_back(v);
    }
    return Tensor::from_vector(f, bits.shape(), tempura::DType::BFloat16);
}

Tensor read_as(const fs::path& p, int declared) {
    Tensor t = tempura::onnx::read_tensor(p.string());
    if (declared == 16 && t.dtype() == tempura::DType::UInt16) return bf16_from_bits(t);
    return t;
}

// Cases whose expected outputs come from NumPy's random generator: Tempura draws its own numbers
// (Threefry), so these are checked by shape, dtype and the values each element may take.
bool numpy_random(const std::string& name) {
    return (name.find("test_bernoulli") != std::string::npos ||
            name.find("test_training_dropout") != std::string::npos) &&
           name.find("zero_ratio") == std::string::npos;
}

std::string check_random(const std::string& name, const std::map<std::string, Tensor>& inputs,
                         const std::vector<std::string>& input_names, const Tensor& got,
                         const Tensor& want, size_t output) {
    if (got.dtype() != want.dtype())
        return "dtype " + got.dtype().name() + ", expected " + want.dtype().name();
    if (got.shape() != want.shape())
        return "shape " + tempura::shape_str(got.shape()) + ", expected " +
               tempura::shape_str(want.shape());
    const auto g = got.to_vector<double>();
    if (name.find("bernoulli") != std::string::npos) {
        for (double v : g)
            if (v != 0 && v != 1) return "a Bernoulli draw of " + std::to_string(v);
        return "";
    }
    if (output != 0) return ""; // the mask: its shape and dtype
    const auto x = inputs.at(input_names.at(0)).to_vector<double>();
    double ratio = 0.5;
    if (input_names.size() > 1 && inputs.count(input_names[1]))
        ratio = inputs.at(input_names[1]).to_vector<double>().at(0);
    for (size_t k = 0; k < g.size(); ++k) {
        const double kept = x[k] / (1 - ratio);
        if (g[k] != 0 && std::abs(g[k] - kept) > 1e-5 * std::abs(kept) + 1e-7)
            return "element " + std::to_string(k) + " is " + std::to_string(g[k]) +
                   ", neither 0 nor " + std::to_string(kept);
    }
    return "";
}

bool says_unsupported(const std::string& what) {
    return what.find("not supported") != std::string::npos;
}

CaseResult run_case(const fs::path& dir) {
    CaseResult r;
    r.name = dir.parent_path().filename().string() + "/" + dir.filename().string();
    const ProtoInfo info = proto_info(dir / "model.onnx");
    r.ops = info.ops;
    if (bad_data().count(r.name)) {
        r.status = Status::BadData;
        r.detail = bad_data().at(r.name);
        return r;
    }
    if (info.non_numeric) {
        r.status = Status::NonNumeric;
        return r;
    }
    try {
        const auto model = tempura::onnx::Model::load((dir / "model.onnx").string());
        std::vector<fs::path> sets;
        for (const auto& e : fs::directory_iterator(dir))
            if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
                sets.push_back(e.path());
        std::sort(sets.begin(), sets.end());
        for (const auto& set : sets) {
            std::map<std::string, Tensor> inputs;
            for (size_t k = 0;; ++k) {
                const fs::path p = set / ("input_" + std::to_string(k) + ".pb");
                if (!fs::exists(p)) break;
                if (k >= info.inputs.size()) throw tempura::Error("more input files than inputs");
                inputs.emplace(info.inputs[k], read_as(p, info.input_types[k]));
            }
            // Files for initializers (old models list them as inputs) are defaults: leave
            // them out when the model does not name them as inputs.
            const auto names = model.input_names();
            for (auto it = inputs.begin(); it != inputs.end();)
                it = std::find(names.begin(), names.end(), it->first) == names.end()
                         ? inputs.erase(it)
                         : std::next(it);
            const auto all_inputs = inputs;
            auto out = model.run(inputs);
            for (size_t k = 0;; ++k) {
                const fs::path p = set / ("output_" + std::to_string(k) + ".pb");
                if (!fs::exists(p)) break;
                Tensor want = read_as(p, info.output_types.at(k));
                // ONNX 1.12's data truncates float to bfloat16 (later ONNX releases round to
                // nearest even, as PyTorch and Tempura do): the expected values are the input's,
                // rounded to nearest even.
                if (r.name.find("FLOAT_to_BFLOAT16") != std::string::npos)
                    want = Tensor::from_vector(all_inputs.at(info.inputs.at(0)).to_vector<float>(),
                                               want.shape(), tempura::DType::BFloat16);
                Tensor got = out.at(info.outputs.at(k));
                const std::string why =
                    numpy_random(r.name)
                        ? check_random(r.name, all_inputs, info.inputs, got, want, k)
                        : compare(got, want);
                if (!why.empty()) {
                    r.status = Status::Failed;
                    r.detail =
                        set.filename().string() + " output '" + info.outputs[k] + "': " + why;
                    return r;
                }
            }
        }
        r.status = Status::Pass;
    } catch (const std::exception& e) {
        r.detail = e.what();
        r.status = says_unsupported(r.detail) ? Status::Refused : Status::Failed;
    }
    return r;
}

#endif

} // namespace

TEST_CASE("onnx conformance: ONNX's backend test suite (libonnx-testdata)") {
#ifndef TEMPURA_HAVE_ONNX
    MESSAGE("SKIPPED: this build has no ONNX support (libonnx-dev and protobuf not found)");
    return;
#else
    const fs::path root = TEMPURA_ONNX_TESTDATA;
    if (!fs::exists(root)) {
        MESSAGE("SKIPPED: no ONNX test data at " << root.string()
                                                 << " (apt-get install libonnx-testdata)");
        return;
    }
    const char* filter = std::getenv("TEMPURA_ONNX_CASES");
    const bool verbose = std::getenv("TEMPURA_ONNX_VERBOSE") != nullptr;
    std::vector<fs::path> cases;
    for (const char* group : {"node", "pytorch-converted", "pytorch-operator", "simple"})
        for (const auto& e : fs::directory_iterator(root / group))
            if (fs::exists(e.path() / "model.onnx") &&
                (!filter || e.path().string().find(filter) != std::string::npos))
                cases.push_back(e.path());
    std::sort(cases.begin(), cases.end());
    struct Counts {
        int pass = 0, refused = 0, failed = 0, non_numeric = 0, bad_data = 0;
    };
    std::map<std::string, Counts> per_op;
    Counts total;
    std::vector<CaseResult> bad;
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& dir : cases) {
        CaseResult r = run_case(dir);
        auto bump = [&](Counts& c) {
            if (r.status == Status::Pass) ++c.pass;
            if (r.status == Status::Refused) ++c.refused;
            if (r.status == Status::Failed) ++c.failed;
            if (r.status == Status::NonNumeric) ++c.non_numeric;
            if (r.status == Status::BadData) ++c.bad_data;
        };
        bump(total);
        for (const auto& op : r.ops) bump(per_op[op]);
        if (verbose)
            std::printf("%-8s %s %s\n",
                        r.status == Status::Pass      ? "pass"
                        : r.status == Status::Refused ? "refused"
                        : r.status == Status::Failed  ? "FAILED"
                        : r.status == Status::BadData ? "baddata"
                                                      : "string",
                        r.name.c_str(), r.detail.c_str());
        if (r.status != Status::Pass && r.status != Status::NonNumeric) bad.push_back(r);
        tempura::clear_caches(); // keeps the JIT's memory flat over a thousand models
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "\nONNX conformance, per op type (a case counts for every op type of its model):\n");
    std::printf("%-34s %6s %6s %8s %7s\n", "op type", "cases", "pass", "refused", "failed");
    for (const auto& [op, c] : per_op) {
        if (c.pass + c.refused + c.failed + c.bad_data == 0) continue;
        std::printf("%-34s %6d %6d %8d %7d\n", op.c_str(),
                    c.pass + c.refused + c.failed + c.bad_data, c.pass, c.refused, c.failed);
    }
    for (const auto& r : bad)
        std::printf("%s %s: %s\n",
                    r.status == Status::Refused   ? "refused"
                    : r.status == Status::BadData ? "bad data"
                                                  : "FAILED ",
                    r.name.c_str(), r.detail.substr(0, 300).c_str());
    const int numeric = total.pass + total.refused + total.failed + total.bad_data;
    std::printf(
        "\nONNX conformance: %zu cases, %d string/sequence, %d numeric: %d pass (%.1f%%), "
        "%d refused, %d failed, %d with expected values their model does not give, in %.0f s\n",
        cases.size(), total.non_numeric, numeric, total.pass,
        numeric ? 100.0 * total.pass / numeric : 0.0, total.refused, total.failed, total.bad_data,
        secs);
    // No wrong answer and no error other than a refusal.
    CHECK(total.failed == 0);
#endif
}
