#!/usr/bin/env bash
# Installs the Debian 12 packages Tempura needs, only those that are missing. Idempotent: when
# everything is present it touches nothing (no apt-get update). Root runs apt-get directly,
# another user goes through sudo.
set -euo pipefail

packages=(
    g++ cmake ninja-build ccache
    libboost-dev doctest-dev libbenchmark-dev libz3-dev llvm-19-dev nlohmann-json3-dev
    libeigen3-dev libopenblas-dev libdnnl-dev libtorch-dev
    clang-format git
    graphviz chromium fonts-dejavu-core
    libonnx-dev libprotobuf-dev libonnx-testdata python3-torch python3-torchvision
    libopenmpi-dev openmpi-bin
)

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "setup.sh: no dpkg here (not Debian?); make sure these are installed: ${packages[*]}" >&2
    exit 0
fi

missing=()
for pkg in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    if [[ "$status" != "install ok installed" ]]; then
        missing+=("$pkg")
    fi
done

if ((${#missing[@]} == 0)); then
    echo "setup.sh: all ${#packages[@]} packages present."
    exit 0
fi

echo "setup.sh: installing ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
else
    echo "setup.sh: missing packages (${missing[*]}) and not root, and no sudo." >&2
    echo "          As root: apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
