#!/usr/bin/env python3
"""Hold a GPU training run's losses to the CPU's, step by step.

Both runs are `coil train ... --json --log-every 1` with the same seed, data order and
dropout masks (Philox, keyed by step on every device), so they differ only by rounding:
a GPU sums in other orders (cuBLAS, block reductions) and the difference grows a little
with each step. Passes when every step's loss is within --rtol of the CPU's (default 2%)
and the last within --final-rtol (default 1%); both runs must have the same steps.

Usage: python3 scripts/gpu/compare_losses.py CPU.jsonl GPU.jsonl [--json FILE] [--check NAME]
Prints each tenth step, then `RESULT NAME pass|fail max_rel=...` (NAME: train-char-gpt2).
"""
import argparse
import json
import sys


def losses(path):
    steps = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{") and '"step"' in line:
                row = json.loads(line)
                steps[row["step"]] = row["loss"]
    return steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cpu")
    ap.add_argument("gpu")
    ap.add_argument("--rtol", type=float, default=0.02)
    ap.add_argument("--final-rtol", type=float, default=0.01)
    ap.add_argument("--json")
    ap.add_argument("--check", default="train-char-gpt2", help="the RESULT line's name")
    a = ap.parse_args()
    cpu, gpu = losses(a.cpu), losses(a.gpu)
    if not cpu or sorted(cpu) != sorted(gpu):
        print(f"steps differ: CPU {len(cpu)} ({a.cpu}), GPU {len(gpu)} ({a.gpu})")
        print(f"RESULT {a.check} fail steps-differ")
        return 1
    rel = {s: abs(gpu[s] - cpu[s]) / abs(cpu[s]) for s in cpu}
    for s in sorted(cpu):
        if s == 1 or s % 10 == 0:
            print(f"step {s:3d}: CPU {cpu[s]:.6f}  GPU {gpu[s]:.6f}  rel {rel[s]:.2e}")
    last = max(cpu)
    worst = max(rel.values())
    ok = worst <= a.rtol and rel[last] <= a.final_rtol
    result = {"check": a.check, "pass": ok, "steps": len(cpu), "max_rel": worst,
              "final_rel": rel[last], "cpu_final": cpu[last], "gpu_final": gpu[last]}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    print(f"RESULT {a.check} {'pass' if ok else 'fail'} max_rel={worst:.2e} "
          f"final: CPU {cpu[last]:.4f} GPU {gpu[last]:.4f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
