#pragma once
// The parsed form of an ONNX model, free of protobuf: what the importer reads (src/onnx/proto.cpp
// fills it from the file; model.cpp and ops.cpp never see a protobuf type).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tempura/tensor/tensor.hpp"

namespace tempura::onnx::detail {

struct Attr {
    enum class Kind { Int, Float, String, Ints, Floats, Strings, Tensor, Graph, Other };
    Kind kind = Kind::Other;
    int64_t i = 0;
    double f = 0;
    std::string s;
    std::vector<int64_t> ints;
    std::vector<double> floats;
    std::vector<std::string> strings;
    std::optional<tempura::Tensor> t;
    std::string unsupported; // why a tensor attribute could not be read (e.g. a string tensor)
};

struct Node {
    std::string name, op_type, domain;
    std::vector<std::string> inputs, outputs; // "" for an optional input or output left out
    std::map<std::string, Attr> attrs;
};

// A graph input or output: its element type (ONNX's TensorProto.DataType) and shape, a dim given
// by a dim_param (or unknown) is -1 with its name in params ("" when unknown).
struct ValueInfo {
    std::string name;
    int elem_type = 0;
    bool is_tensor = true; // false for sequences, maps, optionals
    bool has_shape = false;
    std::vector<int64_t> dims;
    std::vector<std::string> params;
};

struct Graph {
    std::string path;
    std::vector<Node> nodes;
    std::vector<ValueInfo> inputs, outputs;
    std::map<std::string, tempura::Tensor> initializers;
    std::map<std::string, std::string> bad_initializers; // name -> why it cannot be read
    std::map<std::string, int64_t> opsets;               // domain ("" = ai.onnx) -> version
};

// Reads a model (with its external data). Throws "[onnx] <path>: ...".
Graph parse_model(const std::string& path);
// The DType of an ONNX element type, or nullopt (strings, complex numbers).
std::optional<DType> dtype_of_onnx(int elem_type);
std::string onnx_type_name(int elem_type);

} // namespace tempura::onnx::detail
