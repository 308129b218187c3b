// safetensors: round trips of every dtype, the exact error of each malformed file, the atomic
// save (an exception midway, a full disk, a read-only folder), a fuzz of truncations and byte
// flips, and files exchanged with Python (numpy, by hand: Debian has no safetensors package).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tempura/io.hpp>
#include <tempura/tempura.hpp>

#include "../error_at.hpp"
#include "../support.hpp"

namespace fs = std::filesystem;
using tempura::DType;
using tempura::Shape;
using tempura::Tensor;

namespace {

// A fresh folder under the system's temporary folder, removed at the end.
struct TempDir {
    fs::path path;
    TempDir() {
        std::string templ = (fs::temp_directory_path() / "tempura_io_XXXXXX").string();
        REQUIRE(::mkdtemp(templ.data()) != nullptr);
        path = templ;
    }
    ~TempDir() {
        std::error_code ec;
        fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
        fs::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file from a header text and data bytes.
std::string make_file(const std::string& header, const std::string& data, int64_t len = -1) {
    const uint64_t n = len < 0 ? header.size() : static_cast<uint64_t>(len);
    std::string out(8, '\0');
    std::memcpy(out.data(), &n, 8);
    return out + header + data;
}

std::string load_error(const std::string& path) {
    try {
        tempura::io::load_safetensors(path);
    } catch (const tempura::Error& e) {
        return e.what();
    }
    return "(no error)";
}

size_t files_in(const fs::path& dir) {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
    return n;
}

bool have_numpy() { return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0; }

} // namespace

TEST_CASE("from_blob: one copy of the caller's memory; from_vector of a span") {
    std::vector<float> v{1, 2, 3, 4, 5, 6};
    Tensor t = Tensor::from_blob(v.data(), {2, 3}, DType::Float32);
    v[0] = 100; // the tensor holds its own copy
    CHECK(t.is_realized());
    CHECK(t.shape() == Shape{2, 3});
    CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
    const unsigned char bools[3] = {0, 7, 1};
    CHECK(Tensor::from_blob(bools, {3}, DType::Bool).to_vector<bool>() ==
          std::vector<bool>{false, true, true});
    const uint16_t half_one = 0x3c00, bf16_two = 0x4000;
    CHECK(Tensor::from_blob(&half_one, {}, DType::Float16).item<float>() == 1.0f);
    CHECK(Tensor::from_blob(&bf16_two, {}, DType::BFloat16).item<float>() == 2.0f);
    CHECK(Tensor::from_blob(nullptr, {0, 3}, DType::Int32).numel() == 0);
    CHECK_THROWS_WITH(Tensor::from_blob(nullptr, {2}, DType::Int32),
                      at_line(__LINE__ - 1, "[from_blob] null data for 2 elements").c_str());
    CHECK_THROWS_WITH(Tensor::from_blob(v.data(), {-1}, DType::Float32),
                      at_line(__LINE__ - 1, "[from_blob] negative dimension in [-1]").c_str());

    const std::vector<int32_t> iv{1, 2, 3, 4};
    std::span<const int32_t> s(iv.data() + 1, 3);
    Tensor a = Tensor::from_vector(s, {3});
    CHECK(a.dtype() == DType::Int32);
    CHECK(a.to_vector<int32_t>() == std::vector<int32_t>{2, 3, 4});
    std::vector<double> dv{0.5, 1.5};
    CHECK(Tensor::from_vector(std::span<double>(dv), {2}, DType::Float32).to_vector<float>() ==
          std::vector<float>{0.5f, 1.5f});
    CHECK_THROWS_WITH(
        Tensor::from_vector(s, {2, 2}),
        at_line(__LINE__ - 2, "[from_vector] 3 values do not fill shape [2, 2] (4 elements)")
            .c_str());
}

TEST_CASE("safetensors: every dtype and the metadata round-trip exactly") {
    TempDir dir;
    const std::string path = dir.file("all.safetensors");
    std::map<std::string, Tensor> in;
    in["f64"] = Tensor::from_vector(std::vector<double>{1.0 / 3, -2.5}, {2});
    in["f32"] = Tensor::from_vector(std::vector<float>{1.5f, -0.25f, 3, 4, 5, 6}, {2, 3});
    in["f16"] = Tensor::from_vector(std::vector<float>{0.5f, -2, 65504}, {3}, DType::Float16);
    in["bf16"] = Tensor::from_vector(std::vector<float>{1, -3.5f}, {1, 2}, DType::BFloat16);
    in["i64"] = Tensor::from_vector(std::vector<int64_t>{INT64_MIN, 7}, {2});
    in["i32"] = Tensor::from_vector(std::vector<int32_t>{-5, 6, 7}, {3});
    in["i16"] = Tensor::from_vector(std::vector<int16_t>{-32768, 32767}, {2});
    in["i8"] = Tensor::from_vector(std::vector<int8_t>{-128, 127}, {2});
    in["u8"] = Tensor::from_vector(std::vector<uint8_t>{0, 255}, {2});
    in["u16"] = Tensor::from_vector(std::vector<uint16_t>{65535}, {1});
    in["u32"] = Tensor::from_vector(std::vector<uint32_t>{4000000000u}, {1});
    in["u64"] = Tensor::from_vector(std::vector<uint64_t>{~uint64_t{0}}, {1});
    in["bool"] = Tensor::from_vector(std::vector<bool>{true, false, true}, {3});
    in["scalar"] = Tensor::full(Shape{}, 2.0f);
    in["empty"] = Tensor::zeros({0, 4});
    in["lazy"] = Tensor::arange(6).reshape({2, 3}).transpose(); // realized by the save
    tempura::io::save_safetensors(path, in, {{"format", "pt"}, {"note", "é"}});
    const std::string bytes = read_bytes(path);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    CHECK((8 + n) % 8 == 0); // the data starts aligned

    auto out = tempura::io::load_safetensors(path);
    REQUIRE(out.size() == in.size());
    for (auto& [name, t] : in) {
        INFO(name);
        REQUIRE(out.count(name) == 1);
        CHECK(out[name].dtype() == t.dtype());
        CHECK(out[name].shape() == t.shape());
        CHECK(out[name].to_vector<double>() == t.to_vector<double>());
    }
    CHECK(out["u64"].to_vector<uint64_t>()[0] == ~uint64_t{0});
    CHECK(out["lazy"].to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
    const auto meta = tempura::io::safetensors_metadata(path);
    CHECK(meta == std::map<std::string, std::string>{{"format", "pt"}, {"note", "é"}});
    // On another device.
    auto emu = tempura::io::load_safetensors(path, "EMU");
    CHECK(emu["f32"].device() == "EMU");
    CHECK(emu["f32"].to_vector<float>() == in["f32"].to_vector<float>());
    const std::string meta_err =
        "[safetensors] " + dir.file("x") + ": '__metadata__' cannot name a tensor";
    CHECK_THROWS_WITH(tempura::io::save_safetensors(dir.file("x"), {{"__metadata__", in["f32"]}}),
                      meta_err.c_str());
}

TEST_CASE("safetensors: each malformed file names what is wrong") {
    TempDir dir;
    const std::string p = dir.file("bad.safetensors");
    const std::string pre = "[safetensors] " + p + ": ";
    const std::string data16(16, '\x01');
    const auto check = [&](const std::string& file, const std::string& what) {
        write_bytes(p, file);
        CHECK(load_error(p) == pre + what);
    };
    const std::string good = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"I32","shape":[2],"data_offsets":[8,16]}})";
    write_bytes(p, make_file(good, data16));
    CHECK(tempura::io::load_safetensors(p).size() == 2);

    CHECK(load_error(dir.file("none")) ==
          "[safetensors] " + dir.file("none") + ": cannot open: No such file or directory");
    check("abc", "truncated file: 3 bytes, less than the 8-byte header length");
    check(make_file(good, data16, 100000), "header length 100000 runs past the end of the file (" +
                                               std::to_string(8 + good.size() + 16) + " bytes)");
    {
        write_bytes(p, make_file("{\"a\": [1, 2", ""));
        const std::string e = load_error(p);
        CHECK(e.rfind(pre + "header is not JSON (", 0) == 0);
    }
    check(make_file("[1, 2]", ""), "header is not a JSON object");
    check(make_file(R"({"a":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", "xx"),
          "tensor 'a': unknown dtype 'F8_E4M3'");
    check(make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "12345678"),
          "tensor 'a': shape [3] of F32 takes 12 bytes, but data_offsets [0, 8] hold 8");
    check(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", "12345678"),
          "tensor 'a': data_offsets [8, 0] end before they begin");
    check(make_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", "12345678"),
          "tensor 'a': a dimension of its shape must be a non-negative integer, got -2");
    check(make_file(R"({"a":{"dtype":"F32","shape":[2]}})", "12345678"),
          "tensor 'a' has no data_offsets");
    check(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[32,40]}})",
                    data16),
          "tensor 'b': data_offsets [32, 40] lie outside the data area (16 bytes)");
    check(make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                    data16),
          "tensors 'a' [0, 12] and 'b' [8, 16] overlap");
    check(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                    data16),
          "a gap of 4 bytes between tensors 'a' (ends at 4) and 'b' (begins at 8)");
    check(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", data16),
          "a gap of 8 bytes before the first tensor 'a'");
    check(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data16),
          "a gap of 8 bytes after the last tensor (the data area has 16)");
    check(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("a":{"dtype":"I32","shape":[2],"data_offsets":[8,16]}})",
                    data16),
          "duplicate tensor name 'a'");
    check(make_file(good, data16.substr(0, 10)),
          "truncated file: the tensors take 16 bytes of data, the file holds 10 after the header");
    check(make_file(R"({"__metadata__":{"k":1}})", ""),
          "__metadata__ value of 'k' is not a string");
}

TEST_CASE("safetensors: a save that fails leaves the previous file intact") {
    TempDir dir;
    const std::string path = dir.file("model.safetensors");
    const std::map<std::string, Tensor> old{{"w", Tensor::from_vector(std::vector<float>{1, 2})}};
    tempura::io::save_safetensors(path, old);
    const std::string before = read_bytes(path);
    std::map<std::string, Tensor> big{{"a", Tensor::ones({1024})}, {"b", Tensor::ones({65536})}};

    SUBCASE("an exception while writing") {
        tempura::io::testing::set_save_hook([](size_t written) {
            if (written > 0) throw std::runtime_error("disk unplugged");
        });
        CHECK_THROWS_WITH(tempura::io::save_safetensors(path, big), "disk unplugged");
        tempura::io::testing::set_save_hook({});
    }
    SUBCASE("a full disk (a file size limit: writes fail with EFBIG)") {
        struct rlimit saved {};
        REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
        auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
        struct rlimit small = saved;
        small.rlim_cur = 4096;
        REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
        std::string err;
        try {
            tempura::io::save_safetensors(path, big);
        } catch (const tempura::Error& e) {
            err = e.what();
        }
        ::setrlimit(RLIMIT_FSIZE, &saved);
        ::signal(SIGXFSZ, old_handler);
        CHECK(err == "[safetensors] " + path + ": cannot write: File too large");
    }
    SUBCASE("a read-only folder") {
        fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_exec |
                                      fs::perms::group_read | fs::perms::group_exec |
                                      fs::perms::others_read | fs::perms::others_exec);
        std::string err;
        if (::geteuid() != 0) {
            try {
                tempura::io::save_safetensors(path, big);
            } catch (const tempura::Error& e) {
                err = e.what();
            }
        } else {
            // root ignores folder permissions: the save runs in a child that is not root.
            int fds[2];
            REQUIRE(::pipe(fds) == 0);
            const pid_t pid = ::fork();
            if (pid == 0) {
                ::close(fds[0]);
                std::string msg = "(saved)";
                if (::setgid(65534) != 0 || ::setuid(65534) != 0)
                    msg = "(setuid failed)";
                else
                    try {
                        tempura::io::save_safetensors(path, old);
                    } catch (const tempura::Error& e) {
                        msg = e.what();
                    }
                if (::write(fds[1], msg.data(), msg.size()) < 0) ::_exit(2);
                ::_exit(0);
            }
            ::close(fds[1]);
            char buf[1024];
            ssize_t got;
            while ((got = ::read(fds[0], buf, sizeof buf)) > 0)
                err.append(buf, static_cast<size_t>(got));
            ::close(fds[0]);
            int status = 0;
            ::waitpid(pid, &status, 0);
        }
        CHECK(err == "[safetensors] " + path + ": cannot create a temporary file in " +
                         dir.path.string() + ": Permission denied");
        fs::permissions(dir.path, fs::perms::owner_all, fs::perm_options::add);
    }
    CHECK(read_bytes(path) == before);
    CHECK(files_in(dir.path) == 1); // no temporary file left behind
    CHECK(tempura::io::load_safetensors(path)["w"].to_vector<float>() == std::vector<float>{1, 2});
}

TEST_CASE("safetensors fuzz: truncations and byte flips give an error or a faithful load") {
    TempDir dir;
    const std::string path = dir.file("valid.safetensors");
    tempura::io::save_safetensors(
        path,
        {{"w", Tensor::arange(12).reshape({3, 4})},
         {"ids", Tensor::from_vector(std::vector<int64_t>{1, 2, 3})},
         {"mask", Tensor::from_vector(std::vector<bool>{true, false})},
         {"h", Tensor::from_vector(std::vector<float>{1, 2}, {2}, DType::Float16)}},
        {{"k", "v"}});
    const std::string valid = read_bytes(path);
    uint64_t header_len = 0;
    std::memcpy(&header_len, valid.data(), 8);
    const size_t data_start = 8 + header_len;
    const std::string mutated = dir.file("mutated.safetensors");
    size_t errors = 0, loads = 0;
    const auto attempt = [&](const std::string& bytes) {
        write_bytes(mutated, bytes);
        try {
            auto got = tempura::io::load_safetensors(mutated);
            ++loads;
            size_t total = 0;
            for (auto& [n, t] : got) total += static_cast<size_t>(t.numel() * t.dtype().itemsize());
            CHECK(total == bytes.size() - data_start); // the tensors tile the data area
        } catch (const tempura::Error& e) {
            ++errors;
            CHECK(std::string(e.what()).rfind("[safetensors] " + mutated + ": ", 0) == 0);
        }
    };
    for (size_t len = 0; len < valid.size(); ++len) attempt(valid.substr(0, len));
    CHECK(loads == 0); // every truncation is an error
    std::mt19937 rng(1234);
    const int flips = 3000;
    for (int i = 0; i < flips; ++i) {
        std::string bytes = valid;
        const int k = 1 + static_cast<int>(rng() % 3);
        for (int j = 0; j < k; ++j)
            bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
        attempt(bytes);
    }
    // Flips in the data area alone always load, with exactly the file's bytes (tensors in name
    // order: h [0, 4], ids [4, 28], mask [28, 30] (bools: nonzero is true), w [30, 78]).
    const std::vector<std::pair<std::string, size_t>> at{
        {"h", 0}, {"ids", 4}, {"mask", 28}, {"w", 30}};
    for (int i = 0; i < 200; ++i) {
        std::string bytes = valid;
        bytes[data_start + rng() % (valid.size() - data_start)] ^= 0x40;
        write_bytes(mutated, bytes);
        auto got = tempura::io::load_safetensors(mutated);
        REQUIRE(got.size() == 4);
        for (const auto& [name, off] : at) {
            const Tensor& t = got[name];
            const auto* mem = static_cast<const unsigned char*>(t.buffer()->data());
            const size_t n = static_cast<size_t>(t.numel() * t.dtype().itemsize());
            for (size_t b = 0; b < n; ++b) {
                const auto want = static_cast<unsigned char>(bytes[data_start + off + b]);
                CHECK(mem[b] == (name == "mask" ? (want != 0) : want));
            }
        }
    }
    MESSAGE("fuzz: " << errors << " errors, " << loads << " loads");
}

TEST_CASE("safetensors: files written by Python load here, and this library's load in Python") {
    if (!have_numpy()) {
        MESSAGE("SKIPPED: /usr/bin/python3 with numpy (python3-numpy) is not available");
        return;
    }
    TempDir dir;
    const std::string script = dir.file("st.py"), from_py = dir.file("from_py.safetensors"),
                      from_us = dir.file("from_us.safetensors");
    // The format by hand, with numpy: 8-byte little-endian length, JSON, raw little-endian data.
    write_bytes(script, R"PY(
import json, struct, sys
import numpy as np

def save(path, tensors, meta):
    header, blobs, off = {}, [], 0
    for name, (code, arr) in tensors.items():
        b = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    header["__metadata__"] = meta
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h); f.write(b"".join(blobs))

def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n]); data = raw[8 + n:]
    np_types = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
                "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}
    out = {}
    for name, e in header.items():
        if name == "__metadata__": continue
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[b:end], dtype=np_types[e["dtype"]]).reshape(e["shape"])
    return out, header.get("__metadata__", {})

if sys.argv[1] == "write":
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 8
    bf16 = (np.array([1.0, -2.5, 3.0], dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    save(sys.argv[2], {
        "x": ("F32", x), "d": ("F64", np.array([0.1, 0.2])), "h": ("F16", np.array([1.5, -2], np.float16)),
        "b": ("BF16", bf16), "i": ("I64", np.array([[-1, 2**40]], np.int64)),
        "s": ("I16", np.array([-7], np.int16)), "u": ("U8", np.array([200, 3], np.uint8)),
        "m": ("BOOL", np.array([True, False, True]))}, {"source": "numpy"})
else:
    t, meta = load(sys.argv[2])
    assert meta == {"who": "tempura"}, meta
    assert t["w"].dtype == np.float32 and t["w"].shape == (2, 2), t["w"]
    assert (t["w"] == np.array([[1, 2], [3, 4.5]], np.float32)).all()
    assert (t["n"] == np.array([-3, 9], np.int32)).all() and t["n"].dtype == np.int32
    assert (t["m"] == np.array([False, True])).all()
    assert (t["h"] == np.array([0.25], np.float16)).all()
    print("python read OK")
)PY");
    REQUIRE(std::system(("/usr/bin/python3 " + script + " write " + from_py).c_str()) == 0);
    auto t = tempura::io::load_safetensors(from_py);
    std::vector<float> x(24);
    for (int i = 0; i < 24; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i) / 8;
    CHECK(t["x"].shape() == Shape{2, 3, 4});
    CHECK(t["x"].to_vector<float>() == x);
    CHECK(t["d"].to_vector<double>() == std::vector<double>{0.1, 0.2});
    CHECK(t["h"].dtype() == DType::Float16);
    CHECK(t["h"].to_vector<float>() == std::vector<float>{1.5f, -2});
    CHECK(t["b"].dtype() == DType::BFloat16);
    CHECK(t["b"].to_vector<float>() == std::vector<float>{1, -2.5f, 3});
    CHECK(t["i"].shape() == Shape{1, 2});
    CHECK(t["i"].to_vector<int64_t>() == std::vector<int64_t>{-1, int64_t{1} << 40});
    CHECK(t["s"].to_vector<int16_t>() == std::vector<int16_t>{-7});
    CHECK(t["u"].to_vector<int>() == std::vector<int>{200, 3});
    CHECK(t["m"].to_vector<bool>() == std::vector<bool>{true, false, true});
    CHECK(tempura::io::safetensors_metadata(from_py) ==
          std::map<std::string, std::string>{{"source", "numpy"}});

    tempura::io::save_safetensors(
        from_us,
        {{"w", Tensor::from_vector(std::vector<float>{1, 2, 3, 4.5f}, {2, 2})},
         {"n", Tensor::from_vector(std::vector<int32_t>{-3, 9})},
         {"m", Tensor::from_vector(std::vector<bool>{false, true})},
         {"h", Tensor::from_vector(std::vector<float>{0.25f}, {1}, DType::Float16)}},
        {{"who", "tempura"}});
    CHECK(std::system(("/usr/bin/python3 " + script + " read " + from_us).c_str()) == 0);
}
