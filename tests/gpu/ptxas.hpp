#pragma once
// The GPU tests' check of PTX with the CUDA toolkit's ptxas, when CMake found it (TEMPURA_PTXAS).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

// What ptxas prints for a kernel's PTX for one arch (its warnings where it assembles), and
// whether it assembled.
inline std::string ptxas_output(const std::string& ptx, const std::string& arch,
                                bool* ok = nullptr) {
#ifdef TEMPURA_PTXAS
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path();
    const std::string stem = "tempura_ptx_" + std::to_string(::getpid());
    const fs::path src = dir / (stem + ".ptx"), log = dir / (stem + ".log");
    std::ofstream(src) << ptx;
    const std::string cmd = std::string(TEMPURA_PTXAS) + " -arch=" + arch + " " + src.string() +
                            " -o /dev/null > " + log.string() + " 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream in(log);
    std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fs::remove(src);
    fs::remove(log);
    if (ok != nullptr) *ok = rc == 0;
    return out;
#else
    (void)ptx;
    (void)arch;
    if (ok != nullptr) *ok = true;
    return "";
#endif
}

// ptxas's verdict on a kernel's PTX for one arch: "" when it assembles, else its output.
inline std::string ptxas(const std::string& ptx, const std::string& arch) {
    bool ok = false;
    const std::string out = ptxas_output(ptx, arch, &ok);
    return ok ? "" : "ptxas -arch=" + arch + " failed: " + out;
}
