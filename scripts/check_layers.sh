#!/usr/bin/env bash
# Checks that dependencies point one way, layer by layer (docs/ARCHITECTURE.md):
#   support, error  <-  ir  <-  pattern  <-  rewrite  <-  symbolic  <-  schedule, codegen, runtime
#   <-  backend  <-  realize  <-  tensor  <-  io (safetensors)  <-  nn (modules)
#   <-  tempura.hpp, testing.hpp, dist (MPI: only src/dist/comm.cpp includes mpi.h)  <-  onnx
# Every #include "tempura/<layer>/..." (or <tempura/<layer>/...>) in include/tempura/<L>/ and
# src/<L>/ must name a layer ranked at most L's. Prints each violation; exits 1 if there is one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

rank() {
    case "$1" in
        support | error.hpp) echo 0 ;;
        ir) echo 1 ;;
        pattern) echo 2 ;;
        rewrite) echo 3 ;;
        symbolic) echo 4 ;;
        schedule | codegen | runtime) echo 5 ;;
        backend) echo 6 ;;
        realize) echo 7 ;;
        tensor) echo 8 ;;
        io | io.hpp) echo 9 ;;
        nn) echo 10 ;;
        tempura.hpp | testing.hpp | dist | dist.hpp) echo 11 ;;
        onnx | onnx.hpp) echo 12 ;;
        *) echo "check_layers.sh: no rank for layer '$1'" >&2; exit 2 ;;
    esac
}

bad=0
checked=0
while IFS= read -r file; do
    case "$file" in
        include/tempura/*/*) layer=${file#include/tempura/}; layer=${layer%%/*} ;;
        src/*/*) layer=${file#src/}; layer=${layer%%/*} ;;
        *) continue ;;
    esac
    own=$(rank "$layer")
    while IFS= read -r inc; do
        target=${inc#tempura/}
        target=${target%%/*}
        if (( $(rank "$target") > own )); then
            echo "layering: $file ($layer) includes tempura/$target: $inc"
            bad=1
        fi
        checked=$((checked + 1))
    done < <(grep -oE '#include [<"]tempura/[^>"]+' "$file" | sed -E 's/#include [<"]//')
done < <(git ls-files --cached --others --exclude-standard 'include/tempura/*.hpp' 'src/*.cpp' 'src/*.hpp')

echo "check_layers.sh: $checked includes checked"
exit $bad
