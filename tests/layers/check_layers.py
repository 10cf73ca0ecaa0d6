#!/usr/bin/env python3
# check_layers.py — coil's layers may each use only the layers below them:
#
#     base <- ir <- {frontend, passes} <- codegen <- runtime <- pipeline <- io <- train
#       <- api <- tools
#
# Checked two ways, so a backward arrow fails the build (CMakeLists.txt runs this after
# building libcoil) instead of waiting for a reviewer:
#   - headers: no source file includes a header of a layer it may not use;
#   - symbols: no object file of a layer refers to a function or variable that only a
#     layer it may not use defines (read with nm from the objects CMake built).
# Usage: check_layers.py --source DIR [--nm NM] [--layer NAME OBJ:OBJ:...]...
# With no --layer the symbol check is skipped (the header check needs only the sources).
import argparse
import os
import re
import subprocess
import sys

# Each layer and the layers it may use (itself included).
USES = {
    'base': {'base'},
    'ir': {'base', 'ir'},
    'frontend': {'base', 'ir', 'frontend'},
    'passes': {'base', 'ir', 'passes'},
    'codegen': {'base', 'ir', 'passes', 'codegen'},
}
ORDER = ['runtime', 'pipeline', 'io', 'train', 'api', 'tools']
for i, name in enumerate(ORDER):  # each uses everything below it
    USES[name] = set(USES['codegen']) | {'frontend'} | set(ORDER[:i + 1])
# Folders of the source tree and their layer (the first component of a path decides).
FOLDER_LAYER = {name: name for name in USES}
FOLDER_LAYER['include'] = 'api'  # the public API, implemented by api/api.c

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of_path(path):
    return FOLDER_LAYER.get(path.replace('\\', '/').split('/')[0])


def check_headers(source):
    problems = []
    for folder, layer in FOLDER_LAYER.items():
        root = os.path.join(source, folder)
        for dirpath, _, files in os.walk(root):
            for name in files:
                if not name.endswith(('.c', '.h')):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, source)
                with open(path, encoding='utf-8', errors='replace') as f:
                    text = f.read()
                for inc in INCLUDE.findall(text):
                    target = layer_of_path(inc)
                    if target and target not in USES[layer]:
                        problems.append('%s (%s) includes "%s" (%s, a layer it may not use)'
                                        % (rel, layer, inc, target))
    return problems


def symbols(nm, objects):
    """(defined, undefined): symbol -> the first object defining or using it."""
    out = subprocess.run([nm, '-P', '-A'] + objects, capture_output=True, text=True,
                         check=True).stdout
    defined, undefined = {}, {}
    for line in out.splitlines():
        # "path/obj.o: symbol TYPE [value size]" (-A -P)
        head, _, rest = line.rpartition(': ')
        parts = rest.split()
        if len(parts) < 2:
            continue
        sym, kind = parts[0], parts[1]
        if kind == 'U':
            undefined.setdefault(sym, []).append(head)
        elif kind.isupper() or kind in 'uvw':
            defined.setdefault(sym, head)
    return defined, undefined


def short(obj):
    # CMakeFiles/coil_ir.dir/ir/dot.c.o -> ir/dot.c
    m = re.search(r'\.dir/(.*)\.o$', obj)
    return m.group(1) if m else obj


def check_symbols(nm, layers):
    owner = {}
    used = []
    for layer, objects in layers:
        defined, undefined = symbols(nm, objects)
        for sym in defined:
            owner.setdefault(sym, layer)
        used.append((layer, undefined))
    problems = []
    for layer, undefined in used:
        for sym, objs in sorted(undefined.items()):
            target = owner.get(sym)
            if target and target not in USES[layer]:
                problems.append('%s (%s) uses %s, defined in %s (a layer it may not use)'
                                % (short(objs[0]), layer, sym, target))
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--source', required=True)
    ap.add_argument('--nm', default='nm')
    ap.add_argument('--layer', nargs=2, action='append', default=[], metavar=('NAME', 'OBJS'))
    a = ap.parse_args()
    layers = []
    for name, objs in a.layer:
        if name not in USES:
            sys.exit('check_layers: unknown layer %s' % name)
        layers.append((name, [o for o in objs.split(':') if o]))
    problems = check_headers(a.source)
    if layers:
        problems += check_symbols(a.nm, layers)
    for p in problems:
        print('check_layers: ' + p, file=sys.stderr)
    if problems:
        print('check_layers: %d uses of a layer above; the layers: base <- ir <- '
              '{frontend, passes} <- codegen <- runtime <- pipeline <- io <- train <- api <- '
              'tools (docs/ARCHITECTURE.md)'
              % len(problems), file=sys.stderr)
        sys.exit(1)


main()
