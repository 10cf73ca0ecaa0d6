# st_value.py — one tensor of a safetensors file: "NAME DTYPE [SHAPE] VALUES" (I64 and F32
# only, at most 8 values), or "NAME missing"; without numpy, so any python3 runs it.
import json
import struct
import sys

path, name = sys.argv[1], sys.argv[2]
with open(path, 'rb') as f:
    data = f.read()
n = struct.unpack('<Q', data[:8])[0]
entry = json.loads(data[8:8 + n]).get(name)
if entry is None:
    print(name, 'missing')
    sys.exit(0)
begin, end = entry['data_offsets']
raw = data[8 + n + begin:8 + n + end]
fmt = {'I64': 'q', 'F32': 'f'}[entry['dtype']]
values = struct.unpack('<%d%s' % (len(raw) // struct.calcsize(fmt), fmt), raw)[:8]
print(name, entry['dtype'], entry['shape'], ' '.join(str(v) for v in values))
