# lit.cfg.py — lit configuration for coil's golden tests: %coil is the CLI under test,
# FileCheck and not are LLVM 19's. ctest passes the build dir (see CMakeLists.txt).
import os
import sys

import lit.formats

config.name = 'coil'
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = ['.cir', '.coil', '.test']
config.excludes = ['Inputs']  # fixtures read by tests, not tests themselves
config.test_source_root = os.path.dirname(__file__)

bin_dir = lit_config.params.get('coil_bin_dir')
if not bin_dir:
    lit_config.fatal('run with --param coil_bin_dir=BUILD_DIR (ctest -R lit does this)')
bin_dir = os.path.abspath(bin_dir)
coil = os.path.join(bin_dir, 'coil')
if not os.access(coil, os.X_OK):
    lit_config.fatal('%s is not built; run cmake --build first' % coil)
config.test_exec_root = os.path.join(bin_dir, 'lit')  # Output/ stays out of the source tree

tools_dir = lit_config.params.get('llvm_tools_dir', '/usr/lib/llvm-19/bin')
for tool in ('FileCheck', 'not'):
    if not os.access(os.path.join(tools_dir, tool), os.X_OK):
        lit_config.fatal('%s not found in %s: install llvm-19-tools' % (tool, tools_dir))

config.substitutions.append(('%coil', coil))

# `REQUIRES: nvrtc`: tests that compile CUDA kernels (NVRTC runs without a GPU).
import ctypes
for name in ('libnvrtc.so', 'libnvrtc.so.13', 'libnvrtc.so.12'):
    try:
        ctypes.CDLL(name)
        config.available_features.add('nvrtc')
        break
    except OSError:
        pass
# `%{exit} CMD` prints "exit N" after CMD, for tests of exact exit statuses.
config.substitutions.append(('%{exit}', '%s %s' % (sys.executable,
                                                   os.path.join(config.test_source_root, 'exit_status.py'))))
config.environment['PATH'] = os.pathsep.join([tools_dir, config.environment['PATH']])
# The build's own caches (compiled objects, cubins), shared by the tests of one build: lit
# passes no HOME, and the user's cache is not the tests' to fill.
config.environment['COIL_CACHE_DIR'] = os.path.join(bin_dir, 'test-cache')
