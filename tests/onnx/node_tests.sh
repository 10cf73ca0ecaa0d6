#!/usr/bin/env bash
# node_tests.sh — ctest onnx/node_tests: fetches the onnx wheel (pinned) once with pip into a
# cached virtual environment, unpacks its backend node tests, and runs RUNNER over them
# against tests/onnx/expected_pass.txt. Exits 77 (skipped) when pip cannot reach PyPI.
# usage: tests/onnx/node_tests.sh RUNNER [runner options: -v, --only SUBSTR, --update]
set -uo pipefail
runner=${1:?usage: node_tests.sh RUNNER [options]}
shift
here=$(cd "$(dirname "$0")" && pwd)
version=1.22.0
cache=${COIL_ONNX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/coil/onnx-$version}
node=$cache/node

skip() {
    echo "SKIP: $*"
    exit 77
}

# The wheel is only unpacked, never installed: the runner reads the tests' files itself.
fetch() {
    mkdir -p "$cache" || skip "cannot create $cache"
    local venv=$cache/venv log=$cache/fetch.log
    if [ ! -x "$venv/bin/pip" ]; then
        python3 -m venv "$venv" >"$log" 2>&1 ||
            skip "python3 -m venv failed (is python3-venv installed?): $(tail -1 "$log")"
    fi
    rm -rf "$cache/wheel"
    timeout 300 "$venv/bin/pip" download --quiet --no-deps --only-binary=:all: \
        "onnx==$version" -d "$cache/wheel" >"$log" 2>&1 ||
        skip "pip cannot fetch onnx==$version (no network to PyPI?): $(tail -1 "$log")"
    rm -rf "$node.tmp"
    python3 - "$cache"/wheel/onnx-"$version"-*.whl "$node.tmp" <<'PY' || skip "cannot unpack the wheel"
import sys, zipfile
prefix = "onnx/backend/test/data/node/"
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            z.extract(name, sys.argv[2])
PY
    mv "$node.tmp/onnx/backend/test/data/node" "$node" && rm -rf "$node.tmp" "$cache/wheel" &&
        touch "$node/.complete"
}

[ -f "$node/.complete" ] || fetch
jobs=${COIL_ONNX_JOBS:-$(nproc 2>/dev/null || echo 2)}
exec "$runner" "$node" "$here/expected_pass.txt" --jobs "$jobs" "$@"
