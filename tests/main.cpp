// doctest's main(): compiled once (tempura_test_main), linked into every test_<dir> executable.
// Every kernel a test lowers is checked for loads and stores outside their buffers
// (TEMPURA_CHECK_ACCESS, read when the first kernel is lowered).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>

int main(int argc, char** argv) {
    setenv("TEMPURA_CHECK_ACCESS", "1", 0);
    return doctest::Context(argc, argv).run();
}
