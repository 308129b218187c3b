#pragma once
// The test process's side of the mock CUDA driver (mock_cuda.hpp): tempura_mock_cuda_run, which
// the mock's cuLaunchKernel calls (mock_run.cpp, linked into the test executables that load the
// mock, with their symbols exported), and what it could not run.
#include <string>

// The message of the last launch the mock could not run on EMU ("" when none since the last
// clear).
std::string mock_run_error();
void clear_mock_run_error();
