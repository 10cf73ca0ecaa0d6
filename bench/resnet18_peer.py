"""resnet18_peer.py — torchvision's ResNet-18 (random weights, eval mode) on this CPU in
PyTorch eager: the median of RUNS timed calls after WARMUP, in ms, on one line.

    bench/.venv/bin/python bench/resnet18_peer.py BATCH THREADS RUNS WARMUP
"""
import sys
import time

import torch
import torchvision

batch, threads, runs, warmup = (int(a) for a in sys.argv[1:5])
torch.set_num_threads(threads)
model = torchvision.models.resnet18(weights=None).eval()
x = torch.randn(batch, 3, 224, 224)
with torch.inference_mode():
    for _ in range(warmup):
        model(x)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        model(x)
        times.append(time.perf_counter() - t)
times.sort()
print(f"{times[len(times) // 2] * 1e3:.3f}")
