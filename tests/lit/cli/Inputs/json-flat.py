# json-flat.py — for the tests of `--json` output: reads one JSON document from stdin,
# strictly (NaN and Infinity literals, duplicate keys and anything after the value are
# refused), and prints each scalar as "PATH = VALUE", PATH the keys and indices down to
# it joined by '.', in document order, for FileCheck.
import json
import sys


def refuse_constant(name):
    sys.exit('json-flat: %s is not JSON' % name)


def refuse_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        sys.exit('json-flat: duplicate keys in %s' % keys)
    return dict(pairs)


def flat(value, path):
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from flat(v, path + [k])
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from flat(v, path + [str(i)])
    else:
        yield '.'.join(path), json.dumps(value)


doc = json.loads(sys.stdin.read(), parse_constant=refuse_constant,
                 object_pairs_hook=refuse_duplicates)
for path, value in flat(doc, []):
    print(path, '=', value)
