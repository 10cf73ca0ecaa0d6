#!/usr/bin/env bash
# setup.sh — makes a Debian 12 machine ready to build and test coil: apt-get installs
# the packages that are missing, and nothing at all when every one is already there.
set -euo pipefail

# usage: scripts/setup.sh [--fuzz]
#   --fuzz: also what the libFuzzer harnesses need (`make test-fuzz`, tests/fuzz/run.sh):
#   clang-19, and libclang-rt-19-dev for its runtimes (libFuzzer, ASan, UBSan).

# package:probe — a command or a file that shows the package is there, for machines
# without dpkg.
REQUIRED=(
    cmake:cmake make:make gcc:gcc g++:g++ libc6-dev:gcc flex:flex bison:bison
    llvm-19-dev:llvm-config-19 llvm-19-tools:/usr/lib/llvm-19/bin/FileCheck
    python3:python3 libopenblas-dev:/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h
    pkg-config:pkg-config python3-numpy:/usr/lib/python3/dist-packages/numpy/__init__.py
    openmpi-bin:mpirun # the data-parallel tests under mpirun (coil opens libmpi at run time)
    # ONNX import: protoc-c turns libonnx-dev's onnx.proto into C at build time
    libprotobuf-c-dev:/usr/include/protobuf-c/protobuf-c.h protobuf-c-compiler:protoc-c
    libonnx-dev:/usr/include/onnx/onnx.proto
    python3-venv:/usr/lib/python3.11/ensurepip # pip for the ONNX node tests' wheel
)
if [ "${1:-}" = --fuzz ]; then
    REQUIRED+=(clang-19:clang-19
               libclang-rt-19-dev:/usr/lib/llvm-19/lib/clang/19/lib/linux/libclang_rt.fuzzer-x86_64.a)
fi

installed() { # package probe
    if command -v dpkg-query >/dev/null 2>&1; then
        dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
    else
        command -v "$2" >/dev/null 2>&1 || [ -e "$2" ]
    fi
}

missing=()
for entry in "${REQUIRED[@]}"; do
    installed "${entry%%:*}" "${entry#*:}" || missing+=("${entry%%:*}")
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

echo "setup: missing packages: ${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: error: apt-get not found; coil's set-up expects Debian 12. Install the" \
         "equivalents of: ${missing[*]}" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "setup: error: installing packages needs root. Run 'make' as root, or first:" \
         "sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "setup: installed ${missing[*]}"
