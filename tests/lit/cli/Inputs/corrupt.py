# corrupt.py — damage files the way the integrity tests need: flip one bit at a byte offset
# (negative: from the end), replace one metadata value of a safetensors file (its digest
# left as it was), or list a directory (how many entries, and their names).
import json
import os
import struct
import sys


def flip(path, offset):
    with open(path, 'r+b') as f:
        data = bytearray(f.read())
        data[int(offset)] ^= 0x10
        f.seek(0)
        f.write(data)


def meta(path, key, value):
    with open(path, 'rb') as f:
        data = f.read()
    n = struct.unpack('<Q', data[:8])[0]
    header = json.loads(data[8:8 + n])  # keeps the order: tensors stay where they were
    header['__metadata__'][key] = value
    text = json.dumps(header, separators=(',', ':')).encode()
    text += b' ' * (-len(text) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text + data[8 + n:])


def entries(path):
    names = sorted(os.listdir(path))
    print('%d entries: %s' % (len(names), ' '.join(names)))


if __name__ == '__main__':
    commands = {'flip': flip, 'meta': meta, 'entries': entries}
    if len(sys.argv) < 3 or sys.argv[1] not in commands:
        sys.exit('usage: corrupt.py flip FILE OFFSET | meta FILE KEY VALUE | entries DIR')
    commands[sys.argv[1]](*sys.argv[2:])
