#pragma once
// The one place TEMPURA_* environment variables are read. Each read parses the variable anew
// (tests and users may change it while the process runs); a value that cannot be used is
// reported once per variable and value on stderr, naming both, and the default is used:
//   tempura: ignoring TEMPURA_BEAM=abc (not an integer); using 0
#include <cstdint>
#include <string>
#include <vector>

namespace tempura::env {

// An integer variable: `fallback` when unset or empty; when set to something that is not an
// integer, or lies outside [lo, hi], a warning and `fallback`.
int64_t get_int(const char* name, int64_t fallback, int64_t lo, int64_t hi);

// A flag: unset, empty or "0" is false; "1" is true; anything else warns and is false.
bool get_flag(const char* name);

// A string variable ("" when unset).
std::string get_string(const char* name);

// Prints "tempura: <message>" on stderr the first time this exact message is given.
void warn_once(const std::string& message);

// The warnings given so far, oldest first (for tests).
std::vector<std::string> warnings_given();

// TEMPURA_DEBUG (0 to 7; 0 when unset).
int debug_level();

} // namespace tempura::env
