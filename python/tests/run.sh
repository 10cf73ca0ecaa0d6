#!/usr/bin/env bash
# python/tests/run.sh BUILD_DIR: the Python package's tests against BUILD_DIR's libcoil.so
# and coil, with the first python3 that has NumPy and PyTorch ($COIL_PYTHON, bench/.venv,
# python3) and the first that has NumPy without PyTorch (Debian's python3-numpy), so that
# both the DLPack cases and the NumPy-only paths run; skipped (77) when none has NumPy.
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
candidates=(${COIL_PYTHON:-} "$here/../../bench/.venv/bin/python" python3 /usr/bin/python3)

with_torch="" numpy_only=""
for py in "${candidates[@]}"; do
    command -v "$py" > /dev/null && "$py" -c 'import numpy' 2> /dev/null || continue
    if "$py" -c 'import torch' 2> /dev/null; then
        with_torch=${with_torch:-$(command -v "$py")}
    else
        numpy_only=${numpy_only:-$(command -v "$py")}
    fi
done
if [ -z "$with_torch$numpy_only" ]; then
    echo "skipped: no python3 with NumPy (apt-get install python3-numpy)"
    exit 77
fi
export COIL_LIBRARY=$build/libcoil.so COIL_BIN=$build/coil PYTHONPATH=$here/..
for py in $with_torch $numpy_only; do
    echo "== $py ($("$py" -c 'import numpy; print("NumPy", numpy.__version__)'))"
    "$py" -m unittest discover -v -s "$here" -p 'test_*.py'
done
