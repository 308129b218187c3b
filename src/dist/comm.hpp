#pragma once
// The MPI runtime behind tempura::dist (comm.cpp, compiled with MPI when the build found it):
// private to src/dist.
#include "tempura/dist.hpp"

namespace tempura::dist::detail {

void comm_init();
bool comm_initialized();
void comm_finalize();
int comm_rank();
int comm_size();
CommStats comm_stats();

} // namespace tempura::dist::detail
