#!/usr/bin/env bash
# Installs what is missing, builds the release preset and runs an example (default: the main one).
#   ./scripts/run_example.sh [example-name] [args...]     e.g. ./scripts/run_example.sh symbolic_demo
# The main example is mlp (examples/mlp.cpp).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

example=${1:-mlp}
shift $(( $# > 0 ? 1 : 0 ))

./scripts/setup.sh
cmake --preset release
cmake --build --preset release --target "example_${example}"
exec "build/release/examples/${example}" "$@"
