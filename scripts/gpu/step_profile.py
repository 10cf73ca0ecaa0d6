#!/usr/bin/env python3
"""step_profile.py — where a compiled graph's time goes, from `coil bench --profile --json`.

Reads the JSON (a file, or - for stdin) and prints the time per run summed by kind of step
(gemm, attention, kernel, ...), then the slowest steps with their achieved rates (FLOP/s
for products, bytes/s for the rest) and the layers they compute. With --json FILE, writes
the same as a RESULT-style summary for the GPU kit.

The GPU kit profiles GPT-2's training step this way: `coil train ... --debug-dir D` writes
the joint graph (forward, loss and backward, after autocasting) as D/001-GPT/00-input.cir;
`coil bench` of that file with --profile times each of its steps by CUDA events. The
optimizer's update is not in the joint graph (its kernels run after it).

Usage: python3 scripts/gpu/step_profile.py BENCH.json [--top N] [--json OUT] [--check NAME]
"""
import argparse
import json
import sys
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench", help="coil bench --profile --json's output (- for stdin)")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("--check", default="step-profile", help="the RESULT line's name")
    a = ap.parse_args()
    text = sys.stdin.read() if a.bench == "-" else open(a.bench).read()
    steps = json.loads(text[text.index("{"):]).get("profile") or []
    if not steps:
        print(f"RESULT {a.check} fail no-profile")
        sys.exit(1)
    total = sum(s["ms"] for s in steps)
    kinds = defaultdict(lambda: [0.0, 0])
    for s in steps:
        kinds[s["kind"]][0] += s["ms"]
        kinds[s["kind"]][1] += 1
    print(f"{len(steps)} steps, {total:.3f} ms per run")
    for kind, (ms, n) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
        print(f"  {kind:12} {ms:9.3f} ms {100 * ms / total:5.1f}%  in {n} steps")
    print(f"the {a.top} slowest:")
    for s in sorted(steps, key=lambda s: -s["ms"])[: a.top]:
        sec = s["ms"] * 1e-3
        rate = (f"{s['flops'] / sec * 1e-12:7.2f} TFLOP/s" if s.get("flops")
                else f"{s.get('bytes', 0) / sec * 1e-9:7.1f} GB/s  ")
        print(f"  step {s['step']:4} {s['ms']:8.3f} ms {100 * s['ms'] / total:5.1f}%  {rate}  "
              f"{s['name']}")
    summary = {"total_ms": round(total, 3)}
    for kind, (ms, _) in kinds.items():
        summary[f"{kind}_ms"] = round(ms, 3)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"check": a.check, "status": "pass", **summary,
                       "kinds": {k: {"ms": v[0], "steps": v[1]} for k, v in kinds.items()},
                       "steps": steps}, f, indent=1)
    print(f"RESULT {a.check} pass " + " ".join(f"{k}={v}" for k, v in summary.items()))


if __name__ == "__main__":
    main()
