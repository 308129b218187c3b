#pragma once
// The GPU tests' scoped default device.
#include <string>

#include "tempura/realize/device.hpp"

// Makes `d` the default device while alive; restores the one before when a test is done with it.
struct DefaultDevice {
    std::string before = tempura::default_device();
    explicit DefaultDevice(const std::string& d) { tempura::set_default_device(d); }
    ~DefaultDevice() { tempura::set_default_device(before); }
};
