#pragma once
// tempura::Error: the one exception type users see. Messages start with "[op]" and name the values.
#include <stdexcept>
#include <string>

namespace tempura {

class Error : public std::runtime_error {
  public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Builds "[op] message" and throws; kept out of line so callers stay small.
[[noreturn]] void fail(const std::string& op, const std::string& message);

} // namespace tempura
