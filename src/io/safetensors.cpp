// safetensors: load (the file mapped, each tensor copied once from the mapping), save (atomic:
// temporary file, fsync, rename), metadata. Every check of a file's structure happens before any
// byte of data is read, so a malformed file is an error, never a read outside the mapping.
#include "tempura/io.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "tempura/error.hpp"
#include "tempura/realize/device.hpp"
#include "tempura/runtime/buffer.hpp"
#include "tempura/tensor/shape.hpp"

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this host is not");

namespace tempura::io {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& what) {
    fail("safetensors", path + ": " + what);
}

std::string sys_error() { return std::strerror(errno); }

struct DTypeName {
    const char* name;
    DType dtype;
};
constexpr DTypeName kDTypes[] = {
    {"F64", DType::Float64},   {"F32", DType::Float32}, {"F16", DType::Float16},
    {"BF16", DType::BFloat16}, {"I64", DType::Int64},   {"I32", DType::Int32},
    {"I16", DType::Int16},     {"I8", DType::Int8},     {"U64", DType::UInt64},
    {"U32", DType::UInt32},    {"U16", DType::UInt16},  {"U8", DType::UInt8},
    {"BOOL", DType::Bool},
};

const char* dtype_code(const std::string& path, const std::string& name, DType dt) {
    for (const auto& d : kDTypes)
        if (d.dtype == dt) return d.name;
    bad(path, "tensor '" + name + "' has dtype " + dt.name() + ", which safetensors cannot hold");
}

// A read-only mapping of a whole file (nothing mapped for an empty file).
class Mapping {
  public:
    // populate: fault every page in now (a load reads them all; the metadata needs the header).
    Mapping(const std::string& path, bool populate) {
        fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd_ < 0) bad(path, "cannot open: " + sys_error());
        struct stat st {};
        if (::fstat(fd_, &st) != 0) {
            const std::string e = sys_error();
            ::close(fd_);
            bad(path, "cannot stat: " + e);
        }
        if (!S_ISREG(st.st_mode)) {
            ::close(fd_);
            bad(path, "not a regular file");
        }
        size_ = static_cast<size_t>(st.st_size);
        if (size_ > 0) {
            void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | (populate ? MAP_POPULATE : 0),
                             fd_, 0);
            if (p == MAP_FAILED) {
                const std::string e = sys_error();
                ::close(fd_);
                bad(path, "cannot map: " + e);
            }
            data_ = static_cast<const unsigned char*>(p);
        }
    }
    ~Mapping() {
        if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
        if (fd_ >= 0) ::close(fd_);
    }
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    const unsigned char* data() const { return data_; }
    size_t size() const { return size_; }

  private:
    int fd_ = -1;
    const unsigned char* data_ = nullptr;
    size_t size_ = 0;
};

struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin = 0, end = 0;
};

struct Header {
    std::vector<Entry> entries; // sorted by begin
    std::map<std::string, std::string> metadata;
    size_t data_start = 0; // 8 + header length
};

std::string range_str(uint64_t b, uint64_t e) {
    return "[" + std::to_string(b) + ", " + std::to_string(e) + "]";
}

uint64_t as_u64(const std::string& path, const std::string& what, const json& v) {
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<uint64_t>();
    bad(path, what + " must be a non-negative integer, got " + v.dump());
}

// Parses and checks the header of a file of `size` bytes whose first bytes are `bytes`
// (at least min(size, 8 + header length) of them are readable).
Header parse_header(const std::string& path, const unsigned char* bytes, size_t size) {
    if (size < 8)
        bad(path, "truncated file: " + std::to_string(size) +
                      " bytes, less than the 8-byte header length");
    uint64_t n = 0;
    std::memcpy(&n, bytes, 8);
    if (n > size - 8)
        bad(path, "header length " + std::to_string(n) + " runs past the end of the file (" +
                      std::to_string(size) + " bytes)");
    Header h;
    h.data_start = 8 + static_cast<size_t>(n);
    const size_t data_size = size - h.data_start;
    const char* text = reinterpret_cast<const char*>(bytes + 8);

    // Duplicate keys: nlohmann keeps the last one silently, so the parser's callback watches them.
    std::vector<std::set<std::string>> seen;
    std::string duplicate;
    int duplicate_depth = 0;
    json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) {
        if (ev == json::parse_event_t::object_start) {
            seen.resize(static_cast<size_t>(depth) + 2);
            seen[static_cast<size_t>(depth) + 1].clear();
        } else if (ev == json::parse_event_t::key && duplicate.empty()) {
            if (seen.size() <= static_cast<size_t>(depth))
                seen.resize(static_cast<size_t>(depth) + 1);
            const std::string key = parsed.get<std::string>();
            if (!seen[static_cast<size_t>(depth)].insert(key).second) {
                duplicate = key;
                duplicate_depth = depth;
            }
        }
        return true;
    };
    json j;
    try {
        j = json::parse(text, text + n, cb);
    } catch (const json::parse_error& e) {
        bad(path, "header is not JSON (" + std::string(e.what()) + ")");
    }
    if (!duplicate.empty()) {
        if (duplicate_depth == 1) bad(path, "duplicate tensor name '" + duplicate + "'");
        bad(path, "duplicate key '" + duplicate + "' in the header");
    }
    if (!j.is_object()) bad(path, "header is not a JSON object");

    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& name = it.key();
        const json& v = it.value();
        if (name == "__metadata__") {
            if (!v.is_object()) bad(path, "__metadata__ is not an object of strings");
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m.value().is_string())
                    bad(path, "__metadata__ value of '" + m.key() + "' is not a string");
                h.metadata[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        const std::string t = "tensor '" + name + "'";
        if (!v.is_object()) bad(path, t + " is not an object");
        for (const char* key : {"dtype", "shape", "data_offsets"})
            if (!v.contains(key)) bad(path, t + " has no " + key);
        Entry e;
        e.name = name;
        if (!v["dtype"].is_string()) bad(path, t + ": dtype is not a string");
        const std::string code = v["dtype"].get<std::string>();
        bool known = false;
        for (const auto& d : kDTypes)
            if (code == d.name) e.dtype = d.dtype, known = true;
        if (!known) bad(path, t + ": unknown dtype '" + code + "'");
        if (!v["shape"].is_array()) bad(path, t + ": shape is not an array");
        uint64_t count = 1;
        bool overflow = false;
        for (const json& d : v["shape"]) {
            const uint64_t s = as_u64(path, t + ": a dimension of its shape", d);
            if (s > static_cast<uint64_t>(INT64_MAX))
                bad(path, t + ": dimension " + d.dump() + " is too large");
            e.shape.push_back(static_cast<int64_t>(s));
            if (s != 0 && count > UINT64_MAX / s) overflow = true;
            count *= s;
        }
        const json& off = v["data_offsets"];
        if (!off.is_array() || off.size() != 2)
            bad(path, t + ": data_offsets is not a pair [begin, end]");
        e.begin = as_u64(path, t + ": data_offsets", off[0]);
        e.end = as_u64(path, t + ": data_offsets", off[1]);
        if (e.end < e.begin)
            bad(path, t + ": data_offsets " + range_str(e.begin, e.end) + " end before they begin");
        const auto item = static_cast<uint64_t>(e.dtype.itemsize());
        if (overflow || count > UINT64_MAX / item)
            bad(path, t + ": shape " + shape_str(e.shape) + " is too large");
        if (count * item != e.end - e.begin)
            bad(path, t + ": shape " + shape_str(e.shape) + " of " + code + " takes " +
                          std::to_string(count * item) + " bytes, but data_offsets " +
                          range_str(e.begin, e.end) + " hold " + std::to_string(e.end - e.begin));
        h.entries.push_back(std::move(e));
    }

    std::sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    // The tensors must tile the data area: no overlap, no gap, nothing outside it.
    uint64_t total = 0, last_end = 0;
    for (const Entry& e : h.entries) {
        const uint64_t len = e.end - e.begin;
        total = total > UINT64_MAX - len ? UINT64_MAX : total + len; // saturating
        last_end = std::max(last_end, e.end);
    }
    const bool contiguous_layout = total == last_end;
    if (last_end > data_size && contiguous_layout)
        bad(path, "truncated file: the tensors take " + std::to_string(last_end) +
                      " bytes of data, the file holds " + std::to_string(data_size) +
                      " after the header");
    for (const Entry& e : h.entries)
        if (e.end > data_size)
            bad(path, "tensor '" + e.name + "': data_offsets " + range_str(e.begin, e.end) +
                          " lie outside the data area (" + std::to_string(data_size) + " bytes)");
    uint64_t at = 0;
    const Entry* prev = nullptr;
    for (const Entry& e : h.entries) {
        if (e.begin < at)
            bad(path, "tensors '" + prev->name + "' " + range_str(prev->begin, prev->end) +
                          " and '" + e.name + "' " + range_str(e.begin, e.end) + " overlap");
        if (e.begin > at)
            bad(path, prev ? "a gap of " + std::to_string(e.begin - at) +
                                 " bytes between tensors '" + prev->name + "' (ends at " +
                                 std::to_string(at) + ") and '" + e.name + "' (begins at " +
                                 std::to_string(e.begin) + ")"
                           : "a gap of " + std::to_string(e.begin) +
                                 " bytes before the first tensor '" + e.name + "'");
        at = e.end;
        prev = &e;
    }
    if (at < data_size)
        bad(path, "a gap of " + std::to_string(data_size - at) +
                      " bytes after the last tensor (the data area has " +
                      std::to_string(data_size) + ")");
    return h;
}

std::mutex g_hook_mu;
std::function<void(size_t)> g_hook;

// A file descriptor closed (and its file removed, unless kept) when the save ends.
struct TempFile {
    std::string path;
    int fd = -1;
    bool keep = false;
    ~TempFile() {
        if (fd >= 0) ::close(fd);
        if (!keep && !path.empty()) ::unlink(path.c_str());
    }
};

void write_all(const std::string& path, int fd, const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    while (n > 0) {
        const ssize_t w = ::write(fd, p, std::min<size_t>(n, size_t{1} << 30));
        if (w < 0) {
            if (errno == EINTR) continue;
            bad(path, "cannot write: " + sys_error());
        }
        p += w;
        n -= static_cast<size_t>(w);
    }
}

} // namespace

std::map<std::string, Tensor> load_safetensors(const std::string& path, const std::string& device) {
    const int d = device.empty() ? runtime::default_device_index() : runtime::device_index(device);
    Mapping m(path, true);
    const Header h = parse_header(path, m.data(), m.size());
    runtime::DeviceScope scope(d);
    std::map<std::string, Tensor> out;
    const unsigned char* base = m.data() + h.data_start;
    for (const Entry& e : h.entries)
        out.emplace(e.name, Tensor::from_blob(base + e.begin, e.shape, e.dtype));
    return out;
}

std::map<std::string, std::string> safetensors_metadata(const std::string& path) {
    Mapping m(path, false);
    return parse_header(path, m.data(), m.size()).metadata;
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
    // The header first: every tensor's dtype and size (realizing each one here, before the file
    // is touched, so that a failing computation leaves nothing behind either).
    std::vector<Tensor> values;
    values.reserve(tensors.size());
    json header = json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const auto& [name, t] : tensors) {
        if (name == "__metadata__") bad(path, "'__metadata__' cannot name a tensor");
        const char* code = dtype_code(path, name, t.dtype());
        Tensor v = t;
        v.realize();
        const uint64_t bytes =
            static_cast<uint64_t>(v.numel()) * static_cast<uint64_t>(v.dtype().itemsize());
        header[name] = {
            {"dtype", code}, {"shape", v.shape()}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
        values.push_back(std::move(v));
    }
    std::string text;
    try {
        text = header.dump();
    } catch (const json::exception& e) {
        bad(path, std::string("a name or metadata string is not valid UTF-8 (") + e.what() + ")");
    }
    text.append((8 - (8 + text.size()) % 8) % 8, ' '); // the data starts 8-byte aligned
    const uint64_t n = text.size();

    // A temporary file beside the target (rename is atomic within one file system).
    const auto slash = path.find_last_of('/');
    const std::string dir =
        slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
    TempFile tmp;
    std::string templ = path + ".tmp.XXXXXX";
    tmp.fd = ::mkstemp(templ.data());
    if (tmp.fd < 0) bad(path, "cannot create a temporary file in " + dir + ": " + sys_error());
    tmp.path = templ;
    ::fchmod(tmp.fd, 0644);
    write_all(path, tmp.fd, &n, 8);
    write_all(path, tmp.fd, text.data(), text.size());
    size_t written = 0;
    std::function<void(size_t)> hook;
    {
        std::lock_guard<std::mutex> l(g_hook_mu);
        hook = g_hook;
    }
    std::vector<unsigned char> staging;
    for (const Tensor& v : values) {
        if (hook) hook(written);
        const auto& b = v.buffer();
        const size_t bytes =
            static_cast<size_t>(v.numel()) * static_cast<size_t>(v.dtype().itemsize());
        if (bytes == 0) continue;
        write_all(path, tmp.fd, runtime::host_bytes(*b, staging), bytes);
        written += bytes;
    }
    if (::fsync(tmp.fd) != 0) bad(path, "cannot flush to disk: " + sys_error());
    if (::close(tmp.fd) != 0) {
        tmp.fd = -1;
        bad(path, "cannot write: " + sys_error());
    }
    tmp.fd = -1;
    if (::rename(tmp.path.c_str(), path.c_str()) != 0)
        bad(path, "cannot replace the file: " + sys_error());
    tmp.keep = true;
    // The rename itself reaches the disk with the folder's entry.
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

namespace testing {
void set_save_hook(std::function<void(size_t)> hook) {
    std::lock_guard<std::mutex> l(g_hook_mu);
    g_hook = std::move(hook);
}
} // namespace testing

} // namespace tempura::io
