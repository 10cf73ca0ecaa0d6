#!/usr/bin/env python3
"""PyTorch's torch.nn.functional.conv2d on the CPU (eager), timed as bench/conv.sh times
coil's conv step: x [N, C, H, W] and w [M, C/groups, k, k] (normal(0, 1), contiguous f32),
optional bias and ReLU, --warmup untimed calls, then the median of --runs.
Prints one JSON object: engine, median_ms, min_ms, max_ms, runs, threads, torch.

    bench/.venv/bin/python bench/conv_peer.py --channels 64 --out-channels 64 --size 56 --kernel 3 --padding 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--channels", type=int, required=True)
    ap.add_argument("--out-channels", type=int, required=True)
    ap.add_argument("--size", type=int, required=True, help="H = W")
    ap.add_argument("--kernel", type=int, required=True)
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--padding", type=int, default=0)
    ap.add_argument("--groups", type=int, default=1)
    ap.add_argument("--bias-relu", action="store_true", help="relu(conv(x, w) + b)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()

    import torch
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    x = torch.randn(a.batch, a.channels, a.size, a.size)
    w = torch.randn(a.out_channels, a.channels // a.groups, a.kernel, a.kernel)
    b = torch.randn(a.out_channels) if a.bias_relu else None
    times = []
    with torch.inference_mode():
        for i in range(a.warmup + a.runs):
            t0 = time.perf_counter()
            y = F.conv2d(x, w, b, stride=a.stride, padding=a.padding, groups=a.groups)
            if a.bias_relu:
                y = F.relu(y)
            t1 = time.perf_counter()
            if i >= a.warmup:
                times.append((t1 - t0) * 1e3)
    print(json.dumps({"engine": "torch", "median_ms": statistics.median(times),
                      "min_ms": min(times), "max_ms": max(times), "runs": a.runs,
                      "threads": a.threads, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
