#pragma once
// The message of a Tensor or nn call's error as the tests expect it: the call names its own line.
#include <source_location>
#include <string>

// "[op] at <file>:<line>: <rest>" for an expected "[op] <rest>": the file is the caller's own
// (the test's), the line where the call is written (give it as __LINE__, or __LINE__ - k when
// the call is k lines above).
inline std::string at_line(int line, const std::string& expected,
                           std::source_location here = std::source_location::current()) {
    const std::string f = here.file_name();
    const size_t close = expected.find("] ");
    return expected.substr(0, close + 2) + "at " + f.substr(f.find_last_of('/') + 1) + ":" +
           std::to_string(line) + ": " + expected.substr(close + 2);
}
