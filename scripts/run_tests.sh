#!/usr/bin/env bash
# Installs what is missing, then builds and runs the whole test suite:
#   1. preset release: every test (unit, compile-fail, consumer/package, format);
#   2. preset asan (ASan + UBSan): every unit test (labels ir|pattern|rewrite|symbolic|llvm|tensor|schedule|fixed|codegen|viz|gpu|io), LeakSanitizer on;
#   3. preset tsan (ThreadSanitizer): the concurrency tests (label threads).
# Exits non-zero on the first failure. .ci/run calls this.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

./scripts/setup.sh

cmake --preset release
cmake --build --preset release
ctest --preset release --output-on-failure -j2

cmake --preset asan
cmake --build --preset asan
ctest --preset asan --output-on-failure -j2 -L '^(ir|pattern|rewrite|symbolic|llvm|tensor|schedule|fixed|codegen|viz|gpu|io)$'

# The concurrency tests under ThreadSanitizer (the preset builds only test_schedule).
cmake --preset tsan
cmake --build --preset tsan
ctest --preset tsan --output-on-failure

echo "run_tests.sh: all tests passed."
