#!/usr/bin/env python3
"""Time a training step of coil's example models in PyTorch: eager and torch.compile.

The model is peers.py's (the same config block and --set overrides as the .coil file), with
dropout off as `coil train` has it; a step is forward, mean cross-entropy against random
integer targets, backward and AdamW (lr 3e-4, betas 0.9/0.95, weight decay 0.1 on
parameters of rank >= 2, gradients clipped to norm 1), as `coil train`'s defaults. Prints
one JSON object per engine: engine, model, batch, threads, median_ms (per step), steps,
compile_s, device, precision, allow_tf32 (and gpu on a GPU); an engine that fails prints
{"engine", "error"} instead and the others still run (exit status 1 at the end).

--device cuda puts the model, the batch and the optimizer state on the first GPU and
times each step between two torch.cuda.synchronize() calls; float32 matmuls stay float32
(torch.set_float32_matmul_precision("highest"): allow_tf32 is False), as `coil train`'s,
which has no TF32.
--precision bf16 runs the forward and the loss under torch.autocast(device, bfloat16):
PyTorch's counterpart of `coil train --precision bf16` (matmuls on bfloat16 operands,
reductions, norms and the loss in float32, float32 master weights), though autocast keeps
a matmul's product in bfloat16 where coil casts it back to float32.

Usage:
    bench/.venv/bin/python bench/train_peer.py mlp --batch 128 --threads 2
    python3 bench/train_peer.py gpt2 --batch 8 --seq 1024 --device cuda --precision bf16
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
import traceback

import peers


def make_step(torch, model, x, y, compiled: bool, autocast):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    fn = torch.compile(model) if compiled else model

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast():
            logits = fn(x)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                     y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    return step


def autocast_for(torch, args):
    """What wraps the forward and the loss: torch.autocast in bf16, or nothing."""
    if args.precision == "f32":
        return contextlib.nullcontext
    return lambda: torch.autocast(device_type=args.device, dtype=torch.bfloat16)


def run_engine(torch, engine: str, kind: str, cfg: dict, args) -> dict:
    model = peers.MODELS[kind](torch, cfg).train().to(args.device)
    x = peers.make_input(torch, kind, cfg, args.batch, args.seq)
    classes = int(cfg["vocab"] if kind == "GPT" else cfg["classes"])
    y = torch.randint(0, classes, x.shape if kind == "GPT" else x.shape[:1])
    x, y = x.to(args.device), y.to(args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    step = make_step(torch, model, x, y, engine == "compile", autocast_for(torch, args))
    start = time.perf_counter()
    step()  # compiles for torch.compile
    sync()
    compile_s = time.perf_counter() - start
    times = peers.time_runs(step, args.warmup, args.steps, sync)
    result = {"median_ms": statistics.median(times) * 1e3, "compile_s": compile_s}
    if args.device == "cuda":
        result["gpu"] = torch.cuda.get_device_name(0)
        result["gpu_memory_bytes"] = torch.cuda.max_memory_allocated()
    return result


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
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                    help="bf16: forward and loss under torch.autocast(bfloat16)")
    args = ap.parse_args()
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        peers.fail(f"--device cuda: PyTorch {torch.__version__} sees no GPU here")
    torch.set_num_threads(args.threads)
    torch.set_float32_matmul_precision("highest")  # no TF32: coil train's GEMMs are float32
    torch.manual_seed(0)
    path = peers.model_path(args.model)
    cfg = peers.apply_sets(peers.read_config(path), args.set)
    kind = peers.model_kind(path)
    if "dropout_p" in cfg:
        cfg["dropout_p"] = 0.0
    failed = False
    for engine in args.engines.split(","):
        result = {"engine": "pytorch-eager" if engine == "eager" else "torch.compile",
                  "model": args.model, "batch": args.batch, "threads": args.threads,
                  "steps": args.steps, "device": args.device, "precision": args.precision,
                  "allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                  "torch": torch.__version__}
        try:
            result.update(run_engine(torch, engine, kind, cfg, args))
        except Exception as exc:  # reported as not measured, never as a number
            traceback.print_exc(file=sys.stderr)
            result["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            failed = True
        print(json.dumps(result), flush=True)
        if args.device == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
