// tempura::onnx::Model on small models built here with protobuf: loading (errors, external data,
// every unsupported node named at once), shape subgraphs folded away, a dim_param as a symbolic
// Dim (one compile for every batch), lazy outputs that fuse with the caller's ops.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tempura/backend/llvm_cpu.hpp"
#include "tempura/onnx.hpp"
#include "tempura/tempura.hpp"

#ifdef TEMPURA_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace fs = std::filesystem;
using tempura::Shape;
using tempura::Tensor;

namespace {

std::string error_of(const auto& f) {
    try {
        f();
    } catch (const tempura::Error& e) {
        return e.what();
    }
    return "(no error)";
}

} // namespace

#ifndef TEMPURA_HAVE_ONNX

TEST_CASE("onnx: without libonnx-dev, load says the build has no ONNX support") {
    MESSAGE("SKIPPED: this build has no ONNX support (libonnx-dev and protobuf not found)");
    CHECK_FALSE(tempura::onnx::available());
    CHECK(error_of([] { tempura::onnx::Model::load("m.onnx"); }) ==
          "[onnx] m.onnx: this build of Tempura has no ONNX support (it was configured without "
          "libonnx-dev; install it and configure again)");
}

#else

namespace {

fs::path temp_dir() {
    const fs::path d =
        fs::temp_directory_path() / ("tempura_onnx_test_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
}

// A small graph under construction.
struct Builder {
    ::onnx::ModelProto m;
    ::onnx::GraphProto* g;
    explicit Builder(int64_t opset = 17) {
        m.set_ir_version(8);
        auto* op = m.add_opset_import();
        op->set_domain("");
        op->set_version(opset);
        g = m.mutable_graph();
        g->set_name("test");
    }
    // A float input; a dim < 0 is the dim_param `param`.
    void input(const std::string& name, const std::vector<int64_t>& dims,
               const std::string& param = "batch", int elem = ::onnx::TensorProto::FLOAT) {
        auto* v = g->add_input();
        v->set_name(name);
        auto* t = v->mutable_type()->mutable_tensor_type();
        t->set_elem_type(elem);
        for (int64_t d : dims) {
            auto* dim = t->mutable_shape()->add_dim();
            if (d < 0)
                dim->set_dim_param(param);
            else
                dim->set_dim_value(d);
        }
    }
    void output(const std::string& name, int elem = ::onnx::TensorProto::FLOAT) {
        auto* v = g->add_output();
        v->set_name(name);
        v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
    }
    ::onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in,
                            const std::vector<std::string>& out, const std::string& name = "") {
        auto* n = g->add_node();
        n->set_op_type(op);
        n->set_name(name.empty() ? out.at(0) : name);
        for (const auto& i : in) n->add_input(i);
        for (const auto& o : out) n->add_output(o);
        return n;
    }
    ::onnx::TensorProto* initializer(const std::string& name, const std::vector<int64_t>& dims,
                                     const std::vector<float>& values) {
        auto* t = g->add_initializer();
        t->set_name(name);
        t->set_data_type(::onnx::TensorProto::FLOAT);
        for (int64_t d : dims) t->add_dims(d);
        for (float v : values) t->add_float_data(v);
        return t;
    }
    void int_initializer(const std::string& name, const std::vector<int64_t>& values) {
        auto* t = g->add_initializer();
        t->set_name(name);
        t->set_data_type(::onnx::TensorProto::INT64);
        t->add_dims(static_cast<int64_t>(values.size()));
        for (int64_t v : values) t->add_int64_data(v);
    }
    std::string save(const std::string& file) {
        const std::string path = (temp_dir() / file).string();
        std::ofstream out(path, std::ios::binary);
        REQUIRE(m.SerializeToOstream(&out));
        return path;
    }
};

void set_int(::onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
}

std::vector<float> iota(int64_t n, float from = 0) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k)] = from + static_cast<float>(k);
    return v;
}

size_t compiles() { return tempura::runtime::cpu_kernel_cache_stats().misses; }

} // namespace

TEST_CASE("onnx: this build has ONNX support") { CHECK(tempura::onnx::available()); }

TEST_CASE("onnx: load errors name the file and what is wrong") {
    CHECK(error_of([] { tempura::onnx::Model::load("/nonexistent/m.onnx"); }) ==
          "[onnx] /nonexistent/m.onnx: cannot open the file");
    const std::string junk = (temp_dir() / "junk.onnx").string();
    std::ofstream(junk) << "this is not protobuf at all \xff\xff\xff";
    CHECK(error_of([&] { tempura::onnx::Model::load(junk); }) ==
          "[onnx] " + junk + ": is not an ONNX model (protobuf parse failed)");
    CHECK(error_of([] { tempura::onnx::read_tensor("/nonexistent/t.pb"); }) ==
          "[onnx] /nonexistent/t.pb: cannot open the file");
}

TEST_CASE("onnx: every unsupported node of a model is named at once") {
    Builder b;
    b.input("x", {2, 3});
    b.node("Relu", {"x"}, {"a"});
    b.node("Loop", {"a"}, {"b"}, "my_loop");
    b.node("FancyOp", {"b"}, {"c"});
    auto* sc = b.node("ScatterElements", {"c", "c", "c"}, {"y"});
    auto* r = sc->add_attribute();
    r->set_name("reduction");
    r->set_type(::onnx::AttributeProto::STRING);
    r->set_s("mul");
    b.output("y");
    const std::string path = b.save("unsupported.onnx");
    CHECK(
        error_of([&] { tempura::onnx::Model::load(path); }) ==
        "[onnx] " + path +
            ": node 'my_loop' (Loop, opset 17) is not supported; node 'c' (FancyOp, " +
            "opset 17) is not supported; node 'y' (ScatterElements, opset 17) is not supported: " +
            "reduction 'mul'");
}

TEST_CASE("onnx: a Gemm model gives PyTorch's values; inputs are checked") {
    Builder b;
    b.input("x", {-1, 3});
    b.initializer("w", {2, 3}, {1, 2, 3, 4, 5, 6});
    b.initializer("bias", {2}, {0.5f, -1});
    auto* n = b.node("Gemm", {"x", "w", "bias"}, {"y"});
    set_int(n, "transB", 1);
    b.output("y");
    const std::string path = b.save("gemm.onnx");
    const auto model = tempura::onnx::Model::load(path);
    CHECK(model.input_names() == std::vector<std::string>{"x"});
    CHECK(model.output_names() == std::vector<std::string>{"y"});
    CHECK(model.input_shape("x") == std::vector<int64_t>{-1, 3});
    CHECK(model.opset() == 17);
    const auto out = model.run({{"x", Tensor::from_vector(iota(6), {2, 3})}});
    // x @ w^T + b = [[0 1 2] . [1 2 3] + .5, [0 1 2] . [4 5 6] - 1], ...
    CHECK(out.at("y").to_vector<float>() == std::vector<float>{8.5f, 16, 26.5f, 61});
    CHECK(error_of([&] {
              model.run({{"x", Tensor::from_vector(iota(4), {2, 2})}});
          }) == "[onnx] " + path + ": input 'x' has shape [2, 2], the model declares dim 1 = 3");
    CHECK(error_of([&] {
              model.run({{"x", Tensor::from_vector(std::vector<double>{1, 2, 3}, {1, 3})}});
          }) == "[onnx] " + path + ": input 'x' has dtype float64, the model declares FLOAT");
    CHECK(error_of([&] {
              model.run({{"z", Tensor::from_vector(iota(3), {1, 3})}});
          }) == "[onnx] " + path + ": 'z' is not an input of the model (its inputs: x)");
    CHECK(error_of([&] { model.run({}); }) == "[onnx] " + path + ": input 'x' is missing");
}

TEST_CASE("onnx: a node that fails at run is named with its op and opset") {
    Builder b;
    b.input("x", {2, 3});
    b.int_initializer("shape", {4, 2});
    b.node("Reshape", {"x", "shape"}, {"y"}, "reshape_it");
    b.output("y");
    const std::string path = b.save("bad_reshape.onnx");
    const auto model = tempura::onnx::Model::load(path);
    // The Tensor op's error names the line of the user's run() call.
    const std::string run_line = std::to_string(__LINE__ + 1);
    const auto run = [&] { model.run({{"x", Tensor::from_vector(iota(6), {2, 3})}}); };
    CHECK(error_of(run) == "[onnx] " + path +
                               ": node 'reshape_it' (Reshape, opset 17): [reshape] at "
                               "test_onnx.cpp:" +
                               run_line +
                               ": cannot reshape [2, 3] (6 elements) into [4, 2] (8 elements)");
}

TEST_CASE(
    "onnx: Shape -> Gather -> Concat -> Reshape runs on the host; one compile for every batch") {
    // y = Reshape(x, [Shape(x)[0], -1]) * 2 over x [batch, 2, 3]
    Builder b;
    b.input("x", {-1, 2, 3});
    b.int_initializer("zero", {0});
    b.int_initializer("minus_one", {-1});
    b.initializer("two", {}, {2});
    b.node("Shape", {"x"}, {"s"});
    auto* g = b.node("Gather", {"s", "zero"}, {"n"});
    set_int(g, "axis", 0);
    auto* c = b.node("Concat", {"n", "minus_one"}, {"shape"});
    set_int(c, "axis", 0);
    b.node("Reshape", {"x", "shape"}, {"r"});
    b.node("Mul", {"r", "two"}, {"y"});
    b.output("y");
    const auto model = tempura::onnx::Model::load(b.save("shapes.onnx"));
    tempura::clear_caches();
    size_t after_first = 0;
    for (int64_t n : {3, 1, 7, 2}) {
        auto out = model.run({{"x", Tensor::from_vector(iota(n * 6), {n, 2, 3})}});
        Tensor y = out.at("y");
        CHECK(y.shape() == Shape{n, 6});
        std::vector<float> want = iota(n * 6);
        for (float& v : want) v *= 2;
        CHECK(y.to_vector<float>() == want);
        // The shape computation left no kernel: the one kernel is the multiply, for `batch`.
        REQUIRE(y.kernels().size() == 1);
        CHECK(y.kernels()[0].name.find("batch") != std::string::npos);
        if (n == 3) after_first = compiles();
        CHECK(compiles() == after_first);
    }
}

TEST_CASE("onnx: run's outputs are lazy and fuse with what the caller computes next") {
    Builder b;
    b.input("x", {-1, 4});
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    const auto model = tempura::onnx::Model::load(b.save("relu.onnx"));
    const auto out =
        model.run({{"x", Tensor::from_vector(std::vector<float>{-1, 2, -3, 4}, {1, 4})}});
    const Tensor& y = out.at("y");
    CHECK_FALSE(y.is_realized());
    Tensor z = y * 3.0f + 1.0f; // relu, multiply and add: one kernel
    CHECK(z.to_vector<float>() == std::vector<float>{1, 7, 1, 13});
    CHECK(z.kernels().size() == 1);
}

TEST_CASE("onnx: constant subgraphs are folded at load; initializers may be inputs' defaults") {
    // y = x + Transpose(w) * 10, where the transposed and scaled weight is computed at load.
    Builder b;
    b.input("x", {3, 2});
    b.initializer("w", {2, 3}, iota(6));
    b.initializer("ten", {}, {10});
    b.node("Transpose", {"w"}, {"wt"});
    b.node("Mul", {"wt", "ten"}, {"w10"});
    b.node("Add", {"x", "w10"}, {"y"});
    b.output("y");
    const auto model = tempura::onnx::Model::load(b.save("fold.onnx"));
    auto out = model.run({{"x", Tensor::from_vector(std::vector<float>(6, 0.5f), {3, 2})}});
    Tensor y = out.at("y");
    CHECK(y.to_vector<float>() == std::vector<float>{0.5f, 30.5f, 10.5f, 40.5f, 20.5f, 50.5f});
    // Only the add is left to compute: the folded weight is a buffer.
    CHECK(y.kernels().size() == 1);
}

TEST_CASE("onnx: initializers stored as external data are read from the file beside the model") {
    Builder b;
    b.input("x", {4});
    auto* w = b.g->add_initializer();
    w->set_name("w");
    w->set_data_type(::onnx::TensorProto::FLOAT);
    w->add_dims(4);
    w->set_data_location(::onnx::TensorProto::EXTERNAL);
    auto kv = [&](const std::string& k, const std::string& v) {
        auto* e = w->add_external_data();
        e->set_key(k);
        e->set_value(v);
    };
    kv("location", "weights.bin");
    kv("offset", "8");
    kv("length", "16");
    b.node("Mul", {"x", "w"}, {"y"});
    b.output("y");
    const std::string path = b.save("external.onnx");
    {
        // 8 bytes of something else, then the 4 floats.
        std::ofstream bin(temp_dir() / "weights.bin", std::ios::binary);
        const std::vector<float> v{1.5f, -2, 3, 0.25f};
        bin.write("padding!", 8);
        bin.write(reinterpret_cast<const char*>(v.data()), 16);
    }
    const auto model = tempura::onnx::Model::load(path);
    auto out = model.run({{"x", Tensor::from_vector(std::vector<float>{2, 2, 2, 2}, {4})}});
    CHECK(out.at("y").to_vector<float>() == std::vector<float>{3, -4, 6, 0.5f});
    // A range outside the file is an error that says so.
    w->mutable_external_data(1)->set_value("32");
    const std::string bad = b.save("external_bad.onnx");
    CHECK(error_of([&] { tempura::onnx::Model::load(bad); }) ==
          "[onnx] " + bad + ": tensor 'w': bytes [32, 48) lie outside " +
              (temp_dir() / "weights.bin").string() + " (24 bytes)");
}

TEST_CASE("onnx: a dim_param shared by two inputs must agree") {
    Builder b;
    b.input("a", {-1, 2});
    b.input("b", {-1, 2});
    b.node("Add", {"a", "b"}, {"y"});
    b.output("y");
    const std::string path = b.save("two_inputs.onnx");
    const auto model = tempura::onnx::Model::load(path);
    CHECK(error_of([&] {
              model.run({{"a", Tensor::from_vector(iota(4), {2, 2})},
                         {"b", Tensor::from_vector(iota(6), {3, 2})}});
          }) == "[onnx] " + path + ": batch is 2 in one input and 3 in 'b'");
    auto out = model.run({{"a", Tensor::from_vector(iota(4), {2, 2})},
                          {"b", Tensor::from_vector(iota(4, 1), {2, 2})}});
    CHECK(out.at("y").to_vector<float>() == std::vector<float>{1, 3, 5, 7});
}

#endif

#ifdef TEMPURA_HAVE_ONNX
TEST_CASE("onnx: Det pivots (a zero on the diagonal), gives 0 for a singular matrix, and batches") {
    Builder b;
    b.input("x", {3, 3, 3});
    b.node("Det", {"x"}, {"y"});
    b.output("y");
    const auto model = tempura::onnx::Model::load(b.save("det.onnx"));
    const std::vector<float> x{
        0, 1,  0, 1,  0, 0,  0, 0,  1, // a row swap: -1
        1, 2,  3, 2,  4, 6,  1, 0,  1, // rows 1 and 2 dependent: 0
        2, -1, 0, -1, 2, -1, 0, -1, 2  // 2 (4 - 1) + 1 (-2) = 4
    };
    auto out = model.run({{"x", Tensor::from_vector(x, {3, 3, 3})}});
    const auto d = out.at("y").to_vector<float>();
    REQUIRE(d.size() == 3);
    CHECK(d[0] == -1.0f);
    CHECK(d[1] == 0.0f);
    CHECK(d[2] == doctest::Approx(4.0f).epsilon(1e-6));
}
#endif
