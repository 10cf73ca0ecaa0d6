#!/usr/bin/env python3
"""PyTorch's torch.nn.functional.scaled_dot_product_attention on the CPU, timed as
bench/attention.sh times coil's attention step: q, k, v of [B, H, T, D] (contiguous,
normal(0, 1)), causal unless --plain, --warmup untimed calls, then the median of --runs.
Prints one JSON object: engine, seq, median_ms, min_ms, max_ms, runs, threads, torch.

    bench/.venv/bin/python bench/attention_peer.py --seq 1024 --threads 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--plain", action="store_true", help="not causal")
    a = ap.parse_args()

    import torch
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    shape = (a.batch, a.heads, a.seq, a.dim)
    q, k, v = (torch.randn(shape) for _ in range(3))
    times = []
    with torch.inference_mode():
        for i in range(a.warmup + a.runs):
            t0 = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v, is_causal=not a.plain)
            if i >= a.warmup:
                times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"engine": "sdpa", "seq": a.seq, "median_ms": statistics.median(times),
                      "min_ms": min(times), "max_ms": max(times), "runs": a.runs,
                      "threads": a.threads, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
