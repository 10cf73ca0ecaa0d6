#!/usr/bin/env bash
# reduced-build.sh — configures and builds coil the way a GPU machine without LLVM, OpenBLAS,
# flex, bison and lit does, from a kit `make gpu-kit` wrote: the one place that line lives.
#
# usage: scripts/reduced-build.sh BUILD_DIR KIT_DIR [--target NAME...] [extra cmake args...]
#   e.g. scripts/reduced-build.sh build .gpu-kit          (on the GPU machine)
#   --target NAME...: build only these targets (the names up to the next argument that
#   starts with '-'); the other extra arguments go to the configure step.
# Sourced instead of run, it only defines reduced_build (same arguments) for other scripts.

# Configure (Ninja when it is there, else CMake's default; an existing tree keeps its
# generator), printing the line first, then build on every core.
reduced_build() {
    if [ $# -lt 2 ]; then
        echo "reduced-build: usage: scripts/reduced-build.sh BUILD_DIR KIT_DIR" \
             "[--target NAME...] [extra cmake args...]" >&2
        return 2
    fi
    local build=$1 kit=$2 root
    shift 2
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    if [ ! -d "$kit/frontend" ]; then
        echo "reduced-build: error: $kit/frontend not found: run \`make gpu-kit\` on a machine" \
             "with bison and flex and carry its .gpu-kit folder here" >&2
        return 1
    fi
    kit=$(cd "$kit" && pwd)

    local targets=() cmake_args=()
    while [ $# -gt 0 ]; do
        if [ "$1" = --target ]; then
            shift
            while [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; do
                targets+=("$1")
                shift
            done
        else
            cmake_args+=("$1")
            shift
        fi
    done

    local generator=()
    if [ ! -e "$build/CMakeCache.txt" ] && command -v ninja >/dev/null; then
        generator=(-G Ninja)
    fi
    local configure=(cmake -S "$root" -B "$build" "${generator[@]}" -DCOIL_LLVM=OFF
                     -DCOIL_OPENBLAS=OFF -DCOIL_LIT=OFF "-DCOIL_FRONTEND_SOURCES=$kit/frontend"
                     "${cmake_args[@]}")
    printf '%q ' "${configure[@]}"
    echo
    "${configure[@]}" || return 1

    local build_cmd=(cmake --build "$build" "-j$(nproc)")
    [ ${#targets[@]} -eq 0 ] || build_cmd+=(--target "${targets[@]}")
    printf '%q ' "${build_cmd[@]}"
    echo
    "${build_cmd[@]}"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail # here, not at the top: sourcing must leave the caller's options alone
    reduced_build "$@"
fi
