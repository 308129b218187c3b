// Reading ONNX protobuf files into the importer's own structures (src/onnx/graph.hpp). The only
// translation unit that includes protobuf headers; without libonnx-dev it compiles to the error
// that says so.
#include <cstring>
#include <fstream>
#include <sstream>

#include "onnx/graph.hpp"
#include "tempura/error.hpp"
#include "tempura/onnx.hpp"

#ifdef TEMPURA_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace tempura::onnx {

bool available() {
#ifdef TEMPURA_HAVE_ONNX
    return true;
#else
    return false;
#endif
}

namespace detail {

std::string onnx_type_name(int t) {
    static const char* names[] = {"UNDEFINED",  "FLOAT",   "UINT8",  "INT8",   "UINT16",
                                  "INT16",      "INT32",   "INT64",  "STRING", "BOOL",
                                  "FLOAT16",    "DOUBLE",  "UINT32", "UINT64", "COMPLEX64",
                                  "COMPLEX128", "BFLOAT16"};
    if (t >= 0 && t < 17) return names[t];
    return "type " + std::to_string(t);
}

std::optional<DType> dtype_of_onnx(int t) {
    switch (t) {
    case 1: return DType::Float32;
    case 2: return DType::UInt8;
    case 3: return DType::Int8;
    case 4: return DType::UInt16;
    case 5: return DType::Int16;
    case 6: return DType::Int32;
    case 7: return DType::Int64;
    case 9: return DType::Bool;
    case 10: return DType::Float16;
    case 11: return DType::Float64;
    case 12: return DType::UInt32;
    case 13: return DType::UInt64;
    case 16: return DType::BFloat16;
    default: return std::nullopt;
    }
}

#ifndef TEMPURA_HAVE_ONNX

Graph parse_model(const std::string& path) {
    fail("onnx", path + ": this build of Tempura has no ONNX support (it was configured without "
                        "libonnx-dev; install it and configure again)");
}

} // namespace detail

Tensor read_tensor(const std::string& path) {
    fail("onnx", path + ": this build of Tempura has no ONNX support (it was configured without "
                        "libonnx-dev; install it and configure again)");
}

#else

namespace {

[[noreturn]] void bad(const std::string& path, const std::string& what) {
    fail("onnx", path + ": " + what);
}

float half_to_float(uint16_t h) {
    const uint32_t sign = (h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { // subnormal: normalize
            exp = 127 - 15 + 1;
            while ((mant & 0x400u) == 0) {
                mant <<= 1;
                --exp;
            }
            bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

float bf16_to_float(uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

template <class T>
std::vector<T> from_bytes(const std::string& raw, int64_t n, const std::string& path,
                          const std::string& name) {
    if (static_cast<int64_t>(raw.size()) != n * static_cast<int64_t>(sizeof(T)))
        bad(path, "tensor '" + name + "' has " + std::to_string(raw.size()) +
                      " bytes of data for " + std::to_string(n) + " elements");
    std::vector<T> v(static_cast<size_t>(n));
    if (n > 0) std::memcpy(v.data(), raw.data(), raw.size());
    return v;
}

template <class T, class Src>
std::vector<T> from_field(const Src& field, int64_t n, const std::string& path,
                          const std::string& name) {
    if (field.size() != n)
        bad(path, "tensor '" + name + "' has " + std::to_string(field.size()) + " values for " +
                      std::to_string(n) + " elements");
    std::vector<T> v;
    v.reserve(static_cast<size_t>(n));
    for (const auto& x : field) v.push_back(static_cast<T>(x));
    return v;
}

// The bytes of external data: the file named by "location" (relative to the model's folder),
// from "offset", "length" bytes (or to the end).
std::string external_bytes(const ::onnx::TensorProto& t, const std::string& model_path) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& kv : t.external_data()) {
        if (kv.key() == "location") location = kv.value();
        if (kv.key() == "offset") offset = std::stoll(kv.value());
        if (kv.key() == "length") length = std::stoll(kv.value());
    }
    if (location.empty() || location.find("..") != std::string::npos || location[0] == '/')
        bad(model_path, "tensor '" + t.name() + "' names external data at '" + location +
                            "', which is not a file beside the model");
    const auto slash = model_path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : model_path.substr(0, slash);
    const std::string file = dir + "/" + location;
    std::ifstream in(file, std::ios::binary);
    if (!in) bad(model_path, "cannot open the external data file " + file);
    in.seekg(0, std::ios::end);
    const auto size = static_cast<int64_t>(in.tellg());
    if (offset < 0 || offset > size || (length >= 0 && offset + length > size))
        bad(model_path, "tensor '" + t.name() + "': bytes [" + std::to_string(offset) + ", " +
                            std::to_string(length < 0 ? size : offset + length) + ") lie outside " +
                            file + " (" + std::to_string(size) + " bytes)");
    if (length < 0) length = size - offset;
    std::string bytes(static_cast<size_t>(length), '\0');
    in.seekg(offset);
    in.read(bytes.data(), length);
    if (!in) bad(model_path, "cannot read " + file);
    return bytes;
}

Tensor to_tensor(const ::onnx::TensorProto& t, const std::string& path) {
    Shape shape;
    int64_t n = 1;
    for (int64_t d : t.dims()) {
        if (d < 0) bad(path, "tensor '" + t.name() + "' has a negative dim " + std::to_string(d));
        shape.push_back(d);
        n *= d;
    }
    const int type = t.data_type();
    const auto dtype = dtype_of_onnx(type);
    if (!dtype)
        bad(path, "tensor '" + t.name() + "' has element type " + onnx_type_name(type) +
                      ", which is not supported");
    if (t.has_segment())
        bad(path, "tensor '" + t.name() + "' is segmented, which is not supported");
    const bool external = t.data_location() == ::onnx::TensorProto::EXTERNAL;
    const bool raw = external || t.has_raw_data();
    const std::string bytes = external ? external_bytes(t, path)
                              : raw ? t.raw_data()
                                    : std::string();
    const std::string& name = t.name();
    switch (type) {
    case 1:
        return Tensor::from_vector(raw ? from_bytes<float>(bytes, n, path, name)
                                       : from_field<float>(t.float_data(), n, path, name),
                                   shape);
    case 11:
        return Tensor::from_vector(raw ? from_bytes<double>(bytes, n, path, name)
                                       : from_field<double>(t.double_data(), n, path, name),
                                   shape);
    case 7:
        return Tensor::from_vector(raw ? from_bytes<int64_t>(bytes, n, path, name)
                                       : from_field<int64_t>(t.int64_data(), n, path, name),
                                   shape);
    case 6:
        return Tensor::from_vector(raw ? from_bytes<int32_t>(bytes, n, path, name)
                                       : from_field<int32_t>(t.int32_data(), n, path, name),
                                   shape);
    case 5:
        return Tensor::from_vector(raw ? from_bytes<int16_t>(bytes, n, path, name)
                                       : from_field<int16_t>(t.int32_data(), n, path, name),
                                   shape);
    case 3:
        return Tensor::from_vector(raw ? from_bytes<int8_t>(bytes, n, path, name)
                                       : from_field<int8_t>(t.int32_data(), n, path, name),
                                   shape);
    case 2:
        return Tensor::from_vector(raw ? from_bytes<uint8_t>(bytes, n, path, name)
                                       : from_field<uint8_t>(t.int32_data(), n, path, name),
                                   shape);
    case 4:
        return Tensor::from_vector(raw ? from_bytes<uint16_t>(bytes, n, path, name)
                                       : from_field<uint16_t>(t.int32_data(), n, path, name),
                                   shape);
    case 12:
        return Tensor::from_vector(raw ? from_bytes<uint32_t>(bytes, n, path, name)
                                       : from_field<uint32_t>(t.uint64_data(), n, path, name),
                                   shape);
    case 13:
        return Tensor::from_vector(raw ? from_bytes<uint64_t>(bytes, n, path, name)
                                       : from_field<uint64_t>(t.uint64_data(), n, path, name),
                                   shape);
    case 9: {
        const auto v = raw ? from_bytes<uint8_t>(bytes, n, path, name)
                           : from_field<uint8_t>(t.int32_data(), n, path, name);
        std::vector<bool> b(v.begin(), v.end());
        return Tensor::from_vector(b, shape);
    }
    case 10:
    case 16: {
        const auto v = raw ? from_bytes<uint16_t>(bytes, n, path, name)
                           : from_field<uint16_t>(t.int32_data(), n, path, name);
        std::vector<float> f;
        f.reserve(v.size());
        for (uint16_t h : v) f.push_back(type == 10 ? half_to_float(h) : bf16_to_float(h));
        return Tensor::from_vector(f, shape, *dtype);
    }
    default: break;
    }
    bad(path, "tensor '" + name + "' has element type " + onnx_type_name(type) +
                  ", which is not supported");
}

ValueInfo value_info(const ::onnx::ValueInfoProto& v) {
    ValueInfo info;
    info.name = v.name();
    const auto& type = v.type();
    if (!type.has_tensor_type()) {
        info.is_tensor = false;
        return info;
    }
    info.elem_type = type.tensor_type().elem_type();
    if (type.tensor_type().has_shape()) {
        info.has_shape = true;
        for (const auto& d : type.tensor_type().shape().dim()) {
            if (d.has_dim_value()) {
                info.dims.push_back(d.dim_value());
                info.params.emplace_back();
            } else {
                info.dims.push_back(-1);
                info.params.push_back(d.has_dim_param() ? d.dim_param() : std::string());
            }
        }
    }
    return info;
}

Attr attribute(const ::onnx::AttributeProto& a, const std::string& path) {
    Attr r;
    using A = ::onnx::AttributeProto;
    switch (a.type()) {
    case A::INT:
        r.kind = Attr::Kind::Int;
        r.i = a.i();
        break;
    case A::FLOAT:
        r.kind = Attr::Kind::Float;
        r.f = a.f();
        break;
    case A::STRING:
        r.kind = Attr::Kind::String;
        r.s = a.s();
        break;
    case A::INTS:
        r.kind = Attr::Kind::Ints;
        r.ints.assign(a.ints().begin(), a.ints().end());
        break;
    case A::FLOATS:
        r.kind = Attr::Kind::Floats;
        r.floats.assign(a.floats().begin(), a.floats().end());
        break;
    case A::STRINGS:
        r.kind = Attr::Kind::Strings;
        r.strings.assign(a.strings().begin(), a.strings().end());
        break;
    case A::TENSOR:
        r.kind = Attr::Kind::Tensor;
        try {
            r.t = to_tensor(a.t(), path);
        } catch (const Error& e) {
            const std::string what = e.what(), head = "[onnx] " + path + ": ";
            r.unsupported = what.rfind(head, 0) == 0 ? what.substr(head.size()) : what;
        }
        break;
    case A::GRAPH:
    case A::GRAPHS: r.kind = Attr::Kind::Graph; break;
    default: r.kind = Attr::Kind::Other; break;
    }
    return r;
}

} // namespace

Graph parse_model(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) bad(path, "cannot open the file");
    ::onnx::ModelProto model;
    if (!model.ParseFromIstream(&in)) bad(path, "is not an ONNX model (protobuf parse failed)");
    Graph g;
    g.path = path;
    for (const auto& op : model.opset_import()) {
        const std::string domain = op.domain() == "ai.onnx" ? std::string() : op.domain();
        g.opsets[domain] = op.version();
    }
    if (model.opset_import_size() == 0) g.opsets[""] = 1;
    const auto& graph = model.graph();
    for (const auto& t : graph.initializer()) {
        try {
            g.initializers.emplace(t.name(), to_tensor(t, path));
        } catch (const Error& e) {
            // An element type Tempura lacks (strings) is a refusal, named with the others; a
            // broken file is an error of its own.
            const std::string what = e.what(), head = "[onnx] " + path + ": ";
            if (what.find("not supported") == std::string::npos) throw;
            g.bad_initializers.emplace(t.name(),
                                       what.rfind(head, 0) == 0 ? what.substr(head.size()) : what);
        }
    }
    if (graph.sparse_initializer_size() > 0) bad(path, "sparse initializers are not supported");
    for (const auto& v : graph.input()) g.inputs.push_back(value_info(v));
    for (const auto& v : graph.output()) g.outputs.push_back(value_info(v));
    g.nodes.reserve(static_cast<size_t>(graph.node_size()));
    for (const auto& n : graph.node()) {
        Node node;
        node.name = n.name();
        node.op_type = n.op_type();
        node.domain = n.domain() == "ai.onnx" ? std::string() : n.domain();
        node.inputs.assign(n.input().begin(), n.input().end());
        node.outputs.assign(n.output().begin(), n.output().end());
        for (const auto& a : n.attribute()) node.attrs.emplace(a.name(), attribute(a, path));
        g.nodes.push_back(std::move(node));
    }
    return g;
}

} // namespace detail

Tensor read_tensor(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("onnx", path + ": cannot open the file");
    ::onnx::TensorProto t;
    if (!t.ParseFromIstream(&in))
        fail("onnx", path + ": is not a TensorProto (protobuf parse failed)");
    return detail::to_tensor(t, path);
}

#endif

} // namespace tempura::onnx
