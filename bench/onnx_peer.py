#!/usr/bin/env python3
"""ONNX models for bench/onnx.sh: export them, and time the peers on them.

    onnx_peer.py export MODEL OUT.onnx [--seq T]  # random weights (seeded), dynamic batch
    onnx_peer.py time MODEL FILE.onnx --engine ort|eager --batch N [--seq T]
                 [--threads N] [--runs N] [--warmup N]

MODEL: resnet50 (torchvision's ResNet-50, 224 x 224 images) or bert-base (Hugging Face's
BERT-base encoder, 12 layers of 768, token ids of --seq). `time` prints one JSON line:
engine, model, batch, median_ms, min_ms, max_ms, runs, threads, versions. ort runs the
exported file on ONNX Runtime's CPU provider with every graph optimization and
intra_op_num_threads = threads; eager runs the same PyTorch model (rebuilt from the same
seed) under torch.inference_mode, with torch.set_num_threads(threads).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch


class LastHiddenState(torch.nn.Module):
    """BERT called with token ids only, giving last_hidden_state (what tracing sees)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(input_ids=x, attention_mask=torch.ones_like(x), return_dict=False)[0]


def build(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "resnet50":
        from torchvision.models import resnet50
        return resnet50().eval()
    if name == "bert-base":
        from transformers import BertConfig, BertModel
        cfg = BertConfig(attn_implementation="eager")  # bert-base-uncased's shape
        return LastHiddenState(BertModel(cfg, add_pooling_layer=False)).eval()
    raise SystemExit(f"onnx_peer.py: unknown model {name!r} (resnet50, bert-base)")


def example(name: str, batch: int, seq: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    if name == "resnet50":
        return torch.randn(batch, 3, 224, 224, generator=g)
    return torch.randint(0, 30522, (batch, seq), generator=g)


def export(a) -> None:
    model = build(a.model)
    x = example(a.model, 1, a.seq)
    axes = {"x": {0: "batch"}, "y": {0: "batch"}}  # BERT's length fixed: --seq
    torch.onnx.export(model, (x,), a.out, dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"], dynamic_axes=axes)


def timed(fn, runs: int, warmup: int) -> list[float]:
    times = []
    for i in range(warmup + runs):
        t0 = time.perf_counter()
        fn()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def time_engine(a) -> None:
    torch.set_num_threads(a.threads)
    x = example(a.model, a.batch, a.seq)
    versions = {"torch": torch.__version__}
    if a.engine == "ort":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(a.file, so, providers=["CPUExecutionProvider"])
        feed = {"x": x.numpy()}
        times = timed(lambda: sess.run(None, feed), a.runs, a.warmup)
        versions["onnxruntime"] = ort.__version__
    else:
        model = build(a.model)
        with torch.inference_mode():
            times = timed(lambda: model(x), a.runs, a.warmup)
    print(json.dumps({"engine": a.engine, "model": a.model, "batch": a.batch,
                      "median_ms": statistics.median(times), "min_ms": min(times),
                      "max_ms": max(times), "runs": a.runs, "threads": a.threads, **versions}))


def save_input(a) -> None:
    np.save(a.out, example(a.model, a.batch, a.seq).numpy())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("model")
    e.add_argument("out")
    e.add_argument("--seq", type=int, default=128)
    i = sub.add_parser("input", help="save the input `time` uses as .npy")
    i.add_argument("model")
    i.add_argument("out")
    t = sub.add_parser("time")
    t.add_argument("model")
    t.add_argument("file")
    for p in (i, t):
        p.add_argument("--batch", type=int, default=1)
        p.add_argument("--seq", type=int, default=128)
    t.add_argument("--engine", choices=["ort", "eager"], required=True)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--runs", type=int, default=10)
    t.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    {"export": export, "input": save_input, "time": time_engine}[a.cmd](a)


if __name__ == "__main__":
    main()
