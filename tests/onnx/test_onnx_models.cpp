// Real models exported by PyTorch (scripts/onnx_models.py: torchvision's resnet18 and
// mobilenet_v2 with non-trivial BatchNorm statistics, a BERT-style encoder with a padding mask;
// opset 17, dynamic batch). Tempura's outputs must match PyTorch's at batch 1 and batch 8, and
// batch 8 must compile nothing new: the batch is a symbolic Dim. SKIPPED (visibly) without
// python3-torch/python3-torchvision or without ONNX support.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <doctest/doctest.h>

#include "tempura/backend/llvm_cpu.hpp"
#include "tempura/onnx.hpp"
#include "tempura/tempura.hpp"

namespace fs = std::filesystem;
using tempura::Tensor;

#ifndef TEMPURA_SOURCE_DIR
#define TEMPURA_SOURCE_DIR "."
#endif

#ifndef TEMPURA_ONNX_MODELS_DIR
#define TEMPURA_ONNX_MODELS_DIR "onnx_models"
#endif

#ifdef TEMPURA_HAVE_ONNX
namespace {

// The folder of exported models, made once in the build folder (wherever the test runs from);
// "" when torch is not there.
std::string exported_models() {
    static const std::string dir = [] {
        const std::string out = TEMPURA_ONNX_MODELS_DIR;
        if (fs::exists(out + "/bert.b8.out0.pb") && fs::exists(out + "/resnet18.b8.out0.pb") &&
            fs::exists(out + "/mobilenet_v2.b8.out0.pb"))
            return out;
        if (std::system("/usr/bin/python3 -c 'import torch, torchvision' >/dev/null 2>&1") != 0)
            return std::string();
        const std::string cmd = "/usr/bin/python3 " TEMPURA_SOURCE_DIR "/scripts/onnx_models.py " +
                                out + " resnet18 mobilenet_v2 bert >/dev/null 2>&1";
        if (std::system(cmd.c_str()) != 0) return std::string("!") + cmd;
        return out;
    }();
    return dir;
}

struct Diff {
    double max_abs = 0, max_rel = 0;
    bool ok = true;
};

// Within atol + rtol |want| everywhere.
Diff compare(const Tensor& got, const Tensor& want, double atol, double rtol) {
    Diff d;
    REQUIRE(got.shape() == want.shape());
    const auto g = got.to_vector<float>(), w = want.to_vector<float>();
    for (size_t k = 0; k < g.size(); ++k) {
        const double e = std::abs(static_cast<double>(g[k]) - w[k]);
        d.max_abs = std::max(d.max_abs, e);
        if (std::abs(w[k]) > 1e-3) d.max_rel = std::max(d.max_rel, e / std::abs(w[k]));
        if (!(e <= atol + rtol * std::abs(w[k]))) d.ok = false;
    }
    return d;
}

} // namespace
#endif

namespace {

void check_model(const std::string& name, const std::vector<std::string>& inputs, double atol,
                 double rtol) {
#ifndef TEMPURA_HAVE_ONNX
    MESSAGE("SKIPPED: this build has no ONNX support (libonnx-dev and protobuf not found)");
    (void)name, (void)inputs, (void)atol, (void)rtol;
#else
    const std::string dir = exported_models();
    if (dir.empty()) {
        MESSAGE("SKIPPED: " << name << " needs python3-torch and python3-torchvision to export it");
        return;
    }
    REQUIRE_MESSAGE(dir[0] != '!', "exporting the models failed: " << dir.substr(1));
    tempura::clear_caches();
    const auto model = tempura::onnx::Model::load(dir + "/" + name + ".onnx");
    CHECK(model.input_names() == inputs);
    CHECK(model.input_shape(inputs[0])[0] == -1); // the dynamic batch
    size_t compiled_after_first = 0;
    for (int batch : {1, 8}) {
        std::map<std::string, Tensor> feed;
        for (size_t k = 0; k < inputs.size(); ++k)
            feed.emplace(inputs[k], tempura::onnx::read_tensor(dir + "/" + name + ".b" +
                                                               std::to_string(batch) + ".in" +
                                                               std::to_string(k) + ".pb"));
        const auto out = model.run(feed);
        Tensor y = out.at(model.output_names().at(0));
        y.realize();
        const Tensor want = tempura::onnx::read_tensor(dir + "/" + name + ".b" +
                                                       std::to_string(batch) + ".out0.pb");
        const Diff d = compare(y, want, atol, rtol);
        std::printf("onnx model %-13s batch %d: max |diff| %.3g, max rel %.3g (atol %g, rtol %g), "
                    "%zu kernels\n",
                    name.c_str(), batch, d.max_abs, d.max_rel, atol, rtol, y.kernels().size());
        CHECK_MESSAGE(d.ok, name << " batch " << batch << ": max |diff| " << d.max_abs);
        const size_t compiled = tempura::runtime::cpu_kernel_cache_stats().misses;
        if (batch == 1)
            compiled_after_first = compiled;
        else
            CHECK_MESSAGE(compiled == compiled_after_first, name << ": batch 8 compiled "
                                                                 << compiled - compiled_after_first
                                                                 << " new kernels");
    }
#endif
}

} // namespace

TEST_CASE("onnx models: resnet18 from torchvision matches PyTorch at batch 1 and 8, one compile") {
    check_model("resnet18", {"input"}, 1e-4, 1e-3);
}

TEST_CASE(
    "onnx models: mobilenet_v2 from torchvision matches PyTorch at batch 1 and 8, one compile") {
    check_model("mobilenet_v2", {"input"}, 1e-4, 1e-3);
}

TEST_CASE(
    "onnx models: a BERT-style encoder with a padding mask matches PyTorch at batch 1 and 8") {
    check_model("bert", {"input_ids", "attention_mask"}, 1e-5, 1e-4);
}
