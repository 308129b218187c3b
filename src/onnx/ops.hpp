#pragma once
// The importer's dispatch table: ONNX op type -> a short function over Tensor methods.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "onnx/graph.hpp"
#include "tempura/tensor/tensor.hpp"

namespace tempura::onnx::detail {

// What an op function sees: the node, its opset, its inputs (nullopt for one left out) and how
// many outputs the graph uses.
struct Ctx {
    const Node& node;
    int64_t opset = 0;
    std::vector<std::optional<Tensor>> in;
    size_t n_out = 1;
    std::vector<bool> out_used; // per output: whether the graph names it

    bool has(size_t i) const { return i < in.size() && in[i].has_value(); }
    const Tensor& x(size_t i) const; // a required input; throws when absent
    bool has_attr(const std::string& name) const { return node.attrs.count(name) != 0; }
    int64_t i(const std::string& name, int64_t def) const;
    double f(const std::string& name, double def) const;
    std::string s(const std::string& name, const std::string& def) const;
    std::vector<int64_t> ints(const std::string& name, std::vector<int64_t> def = {}) const;
    std::vector<double> floats(const std::string& name, std::vector<double> def = {}) const;
    const Tensor* tensor_attr(const std::string& name) const;
    // The values of input i (realized first if it is lazy).
    std::vector<int64_t> ints_of(size_t i) const;
    std::vector<double> doubles_of(size_t i) const;
    bool used(size_t output) const { return output < out_used.size() && out_used[output]; }
    [[noreturn]] void error(const std::string& what) const;
};

using Outs = std::vector<Tensor>;
using OpFn = Outs (*)(Ctx&);
// Why a node cannot be run whatever its inputs (an attribute the function does not honour), or
// "" when it can.
using RefuseFn = std::string (*)(const Node&, int64_t opset);

struct OpInfo {
    OpFn fn = nullptr;
    RefuseFn refuse = nullptr;
    bool random = false;   // draws random numbers: never folded at load
    bool sequence = false; // works on sequences of tensors: run by the model, not by fn
    bool gradient = false; // the training domain's Gradient: run by the model (it reads `y`)
};

// The entry for (domain, op_type), or null.
const OpInfo* find_op(const std::string& domain, const std::string& op_type);

} // namespace tempura::onnx::detail
