#pragma once
// tempura::io: tensors in and out of files. safetensors (Hugging Face's format): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte range,
// then the raw little-endian data. The JSON is parsed inside the library (nlohmann-json): this
// header includes nothing beyond Tensor.
#include <functional>
#include <map>
#include <string>

#include "tempura/tensor/tensor.hpp"

namespace tempura::io {

// Every tensor of a safetensors file, by name, on `device` ("" = the default device). Dtypes
// F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8 and BOOL. The file is mapped, and
// each tensor is copied once from the mapping into its buffer. A malformed file throws
// "[safetensors] <path>: <what is wrong>" (a header past the end of the file, a header that is
// not JSON, an unknown dtype, a shape that does not fit its byte range, offsets outside the data
// area, overlapping or leaving gaps, a duplicate name, a truncated file).
std::map<std::string, Tensor> load_safetensors(const std::string& path,
                                               const std::string& device = "");

// Writes `tensors` (realizing lazy ones) and the string pairs of `metadata` (the header's
// "__metadata__") as a safetensors file. Atomic: the data goes to a temporary file in the same
// folder, which is flushed to disk (fsync) and then renamed over `path`; a save that fails (a
// full disk, a read-only folder, an exception while writing) leaves the previous file as it was
// and no temporary file behind. Throws "[safetensors] <path>: ...".
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// The "__metadata__" of a safetensors file (empty if it has none), read from the header only.
std::map<std::string, std::string> safetensors_metadata(const std::string& path);

namespace testing {
// For tests of the atomic save: while set, save_safetensors calls it with the number of data
// bytes written so far before writing each tensor; whatever it throws aborts the save as a
// failing write would. Pass an empty function to remove it.
void set_save_hook(std::function<void(size_t bytes_written)> hook);
} // namespace testing

} // namespace tempura::io
