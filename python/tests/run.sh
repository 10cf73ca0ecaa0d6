#!/usr/bin/env bash
# python/tests/run.sh BUILD_DIR: the Python package's tests against BUILD_DIR's libcoil.so
# and coil, with the first python3 that has NumPy (Debian's python3-numpy, or another);
# skipped (status 77) when none has it.
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
for py in python3 /usr/bin/python3; do
    if command -v "$py" > /dev/null && "$py" -c 'import numpy' 2> /dev/null; then
        export COIL_LIBRARY=$build/libcoil.so COIL_BIN=$build/coil PYTHONPATH=$here/..
        exec "$py" -m unittest discover -v -s "$here" -p 'test_*.py'
    fi
done
echo "skipped: no python3 with NumPy (apt-get install python3-numpy)"
exit 77
