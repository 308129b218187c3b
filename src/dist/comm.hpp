#pragma once
// The MPI runtime behind tempura::dist (comm.cpp, compiled with MPI when the build found it):
// private to src/dist.
#include "tempura/dist.hpp"

namespace tempura::dist::detail {

// What every entry point that needs MPI says in a build without it.
inline constexpr const char* kBuiltWithoutMpi =
    "Tempura was built without MPI: install OpenMPI (Debian: libopenmpi-dev openmpi-bin) and "
    "configure again";

void comm_init();
bool comm_initialized();
void comm_finalize();
int comm_rank();
int comm_size();
int comm_local_rank(); // from the launcher's variables (0 without them)
CommStats comm_stats();

} // namespace tempura::dist::detail
