#pragma once
// ONNX import: a model file becomes a function over lazy Tensors.
//
//     auto model = tempura::onnx::Model::load("resnet18.onnx");
//     auto out = model.run({{"input", x}});      // lazy: fuses with what comes next
//     Tensor probs = out.at("logits").softmax(1);
//
// Each ONNX node is one entry of a dispatch table from op type to a short function over Tensor
// methods (src/onnx/ops.cpp); an op the table lacks, or an attribute it cannot honour, is refused
// at load with "[onnx] <file>: node '<name>' (<OpType>, opset N) is not supported" (every such
// node of the model in one message).
//
// Built on Debian's libonnx-dev (protobuf), optional at build time: without it, load() throws an
// error that says the build has no ONNX support. No protobuf header is included here.
#include <cstdint>
#include <map>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "tempura/tensor/tensor.hpp"

namespace tempura::onnx {

// Whether this build of Tempura can read ONNX files (it was configured with libonnx-dev).
bool available();

// Reads one serialized TensorProto (the input_N.pb / output_N.pb files of ONNX's test data) as a
// realized tensor. Throws "[onnx] <path>: ..." for a file that is not one, or a string tensor.
Tensor read_tensor(const std::string& path);

class Model {
  public:
    // Reads `path` (a .onnx file; tensors stored as external data are read from the files the
    // model names, beside it). Initializers become realized tensors; nodes whose inputs are all
    // constants are evaluated once, here; shape computations (Shape, Size and what is computed
    // from them and constants) are set apart and run on the host, without kernels. A dynamic
    // axis of a graph input (a dim_param such as "batch") becomes a symbolic Dim, so that one
    // compile serves every size. Throws "[onnx] <path>: ..." for an unreadable file or
    // unsupported nodes.
    static Model load(const std::string& path);

    std::vector<std::string> input_names() const; // graph inputs that are not initializers
    std::vector<std::string> output_names() const;
    // The declared shape of an input: -1 for a dynamic axis.
    std::vector<int64_t> input_shape(const std::string& name) const;
    int64_t opset() const; // the default domain's opset version

    // Runs the graph on `inputs` (one tensor per input name; an input with a default value, an
    // initializer, may be left out). The outputs are lazy tensors: nothing is computed until the
    // caller realizes them, so they fuse with what the caller computes next. Ops whose output
    // shape depends on data (NonZero, Unique, Compress, TopK's k, ...) realize what they need.
    // Throws "[onnx] <path>: node '<name>' (<OpType>): <what>" when a node fails. The nodes the
    // model's ops build, and the errors of those ops, name the line of the run() call.
    std::map<std::string, Tensor>
    run(const std::map<std::string, Tensor>& inputs,
        std::source_location loc = std::source_location::current()) const;

    struct Impl;

  private:
    Model() = default; // only load() makes one: a Model always holds a graph
    std::shared_ptr<const Impl> impl_;
};

} // namespace tempura::onnx
