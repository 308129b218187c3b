// doctest's main(): compiled once (tempura_test_main), linked into every test_<dir> executable.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
