#!/usr/bin/env python3
"""compare.py A.json B.json [A.safetensors B.safetensors] TOL: two coil train --json runs
agree: their progress lines' losses and their summaries' first and last loss within TOL
relative, and (given) every tensor of the two checkpoints (parameters, optimizer state) within TOL (max |a-b|
against max(max |a|, 1), per tensor). The safetensors reader is a few lines of the format: an 8-byte
header length, a JSON header, the raw little-endian data."""
import json, struct, sys
from array import array


def losses(path):
    lines = [json.loads(l) for l in open(path) if l.startswith("{")]
    steps = [l["loss"] for l in lines if "step" in l]
    summary = [l for l in lines if "steps" in l][-1]
    return steps + [summary["first_loss"], summary["last_loss"]]


def tensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        a, b = t["data_offsets"]
        out[name] = array("f", data[8 + n + a:8 + n + b])
    return out


def close(a, b, tol):
    """within tol of the tensor's largest value, or absolutely for values below 1 (a bias
    that starts at zero holds values whose last bits are the sums' rounding)"""
    scale = max(max((abs(x) for x in a), default=0.0), 1.0)
    return max((abs(x - y) for x, y in zip(a, b)), default=0.0) <= tol * scale


def main():
    args = sys.argv[1:]
    tol = float(args.pop())
    la, lb = losses(args[0]), losses(args[1])
    bad = [(i, x, y) for i, (x, y) in enumerate(zip(la, lb)) if abs(x - y) > tol * max(abs(x), 1e-30)]
    if len(la) != len(lb) or bad:
        sys.exit(f"losses differ: {len(la)} vs {len(lb)} values; first differences {bad[:3]}")
    print(f"{len(la)} losses agree within {tol}")
    if len(args) == 4:
        ta, tb = tensors(args[2]), tensors(args[3])
        if not ta or ta.keys() != tb.keys():
            sys.exit(f"the checkpoints hold different parameters: {sorted(ta)[:3]} vs {sorted(tb)[:3]}")
        for name in ta:
            if not close(ta[name], tb[name], tol):
                sys.exit(f"parameter {name} differs beyond {tol}")
        print(f"{len(ta)} parameters agree within {tol}")


main()
