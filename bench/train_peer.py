#!/usr/bin/env python3
"""Time a training step of coil's example models in PyTorch: eager and torch.compile.

The model is peers.py's (the same config block and --set overrides as the .coil file), with
dropout off as `coil train` has it; a step is forward, mean cross-entropy against random
integer targets, backward and AdamW (lr 3e-4, betas 0.9/0.95, weight decay 0.1 on
parameters of rank >= 2, gradients clipped to norm 1), as `coil train`'s defaults. Prints
one JSON object per engine: engine, model, batch, threads, median_ms (per step), steps,
compile_s.

Usage:
    bench/.venv/bin/python bench/train_peer.py mlp --batch 128 --threads 2
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import peers


def make_step(torch, model, x, y, compiled: bool):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    fn = torch.compile(model) if compiled else model

    def step():
        opt.zero_grad(set_to_none=True)
        logits = fn(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--engines", default="eager,compile")
    ap.add_argument("--set", action="append", default=[])
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    path = peers.model_path(args.model)
    cfg = peers.apply_sets(peers.read_config(path), args.set)
    kind = peers.model_kind(path)
    if "dropout_p" in cfg:
        cfg["dropout_p"] = 0.0
    for engine in args.engines.split(","):
        model = peers.MODELS[kind](torch, cfg).train()
        x = peers.make_input(torch, kind, cfg, args.batch, args.seq)
        classes = int(cfg["vocab"] if kind == "GPT" else cfg["classes"])
        y = torch.randint(0, classes, x.shape if kind == "GPT" else x.shape[:1])
        step = make_step(torch, model, x, y, engine == "compile")
        start = time.perf_counter()
        step()  # compiles for torch.compile
        compile_s = time.perf_counter() - start
        times = peers.time_runs(step, args.warmup, args.steps, lambda: None)
        print(json.dumps({"engine": "pytorch-eager" if engine == "eager" else "torch.compile",
                          "model": args.model, "batch": args.batch, "threads": args.threads,
                          "median_ms": statistics.median(times) * 1e3, "steps": args.steps,
                          "compile_s": compile_s, "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
