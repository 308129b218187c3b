#pragma once
// Helpers shared by the project's own tests.
#include <string>

#include "tempura/error.hpp"

// The message of the tempura::Error that f throws, or "<no error>".
template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const tempura::Error& e) {
        return e.what();
    }
    return "<no error>";
}
