// A program that makes one rank fail, for the fault tests (tests/dist/run_fault.sh): rank 1
// throws, dies, exits or finalizes early while the others wait in an all_reduce. A rank that
// sees the error prints it and exits 3. Mode finalize_in_flight: rank 0 finalizes while another
// of its threads waits in an all_reduce that rank 1 never joins (the wait must end).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "tempura/dist.hpp"

using tempura::Tensor;
namespace dist = tempura::dist;

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    dist::init();
    const int me = dist::rank();
    try {
        // One collective that every rank completes.
        const float w = dist::all_reduce(Tensor::ones({3})).to_vector()[0];
        if (w != static_cast<float>(dist::world_size())) return 2;
        if (mode == "finalize_in_flight") {
            if (me != 0) {
                std::this_thread::sleep_for(std::chrono::seconds(3));
                dist::finalize();
                return 0;
            }
            std::string error = "no error";
            std::thread waiter([&] {
                try {
                    dist::all_reduce(Tensor::ones({5})).to_vector();
                } catch (const tempura::Error& e) {
                    error = e.what();
                }
            });
            // Time for the waiter to reach the runtime even on a loaded machine (300 ms was not:
            // ctest -j2 timed out once in six runs), and still before rank 1 finalizes (3 s).
            // (A collective that first arrives after finalize is a separate case, not tested here.)
            std::this_thread::sleep_for(std::chrono::milliseconds(1500));
            dist::finalize();
            waiter.join();
            std::fprintf(stderr, "rank %d: %s\n", me, error.c_str());
            return 3;
        }
        if (me == 1) {
            if (mode == "throw") throw std::runtime_error("boom");
            if (mode == "kill") std::raise(SIGKILL);
            if (mode == "exit") return 0; // no finalize
            if (mode == "finalize") {
                dist::finalize();
                return 0;
            }
        }
        // The others wait here for rank 1.
        dist::all_reduce(Tensor::ones({5}) * static_cast<float>(me)).to_vector();
    } catch (const tempura::Error& e) {
        std::fprintf(stderr, "rank %d: %s\n", me, e.what());
        dist::finalize();
        return 3;
    }
    dist::finalize();
    return 0;
}
