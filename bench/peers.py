#!/usr/bin/env python3
"""Time coil's example models in its peers: PyTorch eager, torch.compile and ONNX Runtime.

The models are built in PyTorch to match examples/mlp.coil (the seed's OptimizedModel) and
examples/gpt2.coil (nanoGPT's GPT), with their config read from the .coil file's `config`
block and the same `--set NAME=VALUE` overrides. Each engine does a warm-up, then `--runs`
timed forward passes; the median is reported. One JSON object per engine is printed on
stdout, with the fields of `coil bench --json` where they apply:

    model, batch, threads, compile_s, median_ms, samples_per_s, gflops, peak_fraction,
    peak_memory_bytes, engine   (and min_ms, max_ms, runs, warmup, flops, params, versions)

FLOPs per call come from `coil check MODEL --dim B=N` (the same count `coil bench` uses);
without build/coil, or with --flops 0, gflops is null. peak_fraction needs --peak-gflops;
otherwise it is null (report.py fills it in from the peak `coil bench` measured).
Each engine runs in a process of its own, so peak_memory_bytes, the process's peak
resident set (ru_maxrss: the Python runtime, the libraries and the model included), is
that engine's, and torch.compile's compile time is a cold one.

Usage:
    bench/.venv/bin/python bench/peers.py mlp --batch 128 --threads 2
    bench/.venv/bin/python bench/peers.py gpt2 --seq 64 --set layers=2 --engines eager,ort
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COIL = REPO / "build" / "coil"

# engine key on the command line -> name in the JSON output
ENGINES = {
    "eager": "pytorch-eager",
    "compile": "torch.compile",
    "autotune": "torch.compile-max-autotune-no-cudagraphs",
    "ort": "onnxruntime",
}


def fail(message: str) -> None:
    print(f"peers.py: error: {message}", file=sys.stderr)
    sys.exit(1)


# ---------------------------------------------------------------------------- config


def model_path(model: str) -> Path:
    """`mlp` -> examples/mlp.coil; a path to a .coil file is taken as it is."""
    path = Path(model)
    if path.suffix == ".coil":
        if not path.is_file():
            fail(f"{model}: no such file")
        return path.resolve()
    path = REPO / "examples" / f"{model}.coil"
    if not path.is_file():
        fail(f"no model {model!r}: {path} does not exist")
    return path


def read_config(path: Path) -> dict[str, int | float]:
    """The `config { name = number ... }` block of a .coil file."""
    match = re.search(r"^config\s*\{(.*?)^\}", path.read_text(), re.S | re.M)
    if not match:
        fail(f"{path}: no config block")
    config: dict[str, int | float] = {}
    for line in match.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        entry = re.fullmatch(r"(\w+)\s*=\s*(\S+)", line)
        if not entry:
            fail(f"{path}: config line not understood: {line!r}")
        config[entry.group(1)] = parse_number(entry.group(2), f"{path}: {entry.group(1)}")
    return config


def parse_number(text: str, what: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        fail(f"{what}: {text!r} is not a number")
        raise  # unreachable


def apply_sets(config: dict, sets: list[str]) -> dict:
    config = dict(config)
    for item in sets:
        name, eq, value = item.partition("=")
        if not eq:
            fail(f"--set {item!r}: expected NAME=VALUE")
        if name not in config:
            fail(f"--set {name}: the model's config has no such name "
                 f"(it has {', '.join(config)})")
        config[name] = parse_number(value, f"--set {name}")
    return config


# ---------------------------------------------------------------------------- models


def build_mlp(torch, cfg: dict):
    """The seed's OptimizedModel, as examples/mlp.coil writes it."""
    nn = torch.nn
    hidden, layers, classes = int(cfg["hidden"]), int(cfg["layers"]), int(cfg["classes"])

    class OptimizedModel(nn.Module):
        def __init__(self):
            super().__init__()
            blocks = []
            for _ in range(layers):
                blocks += [nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.GELU(),
                           nn.Dropout(cfg["dropout_p"])]
            self.backbone = nn.Sequential(*blocks)
            self.head = nn.Sequential(nn.Linear(hidden, hidden // 2), nn.ReLU(),
                                      nn.Linear(hidden // 2, classes))

        def forward(self, x):
            return self.head(self.backbone(x))

    return OptimizedModel()


def build_gpt2(torch, cfg: dict):
    """nanoGPT's GPT, as examples/gpt2.coil writes it (lm_head tied to wte)."""
    nn, F = torch.nn, torch.nn.functional
    C, n_head, p = int(cfg["hidden"]), int(cfg["heads"]), cfg["dropout_p"]

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)
            self.resid_dropout = nn.Dropout(p)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(C, 4 * C)
            self.gelu = nn.GELU(approximate="tanh")
            self.c_proj = nn.Linear(4 * C, C)
            self.dropout = nn.Dropout(p)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(C), CausalSelfAttention()
            self.ln_2, self.mlp = nn.LayerNorm(C), MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(int(cfg["vocab"]), C),
                wpe=nn.Embedding(int(cfg["context"]), C),
                drop=nn.Dropout(p),
                h=nn.ModuleList(Block() for _ in range(int(cfg["layers"]))),
                ln_f=nn.LayerNorm(C),
            ))

        def forward(self, idx):
            t = self.transformer
            pos = torch.arange(idx.shape[1], dtype=torch.long, device=idx.device)
            x = t.drop(t.wte(idx) + t.wpe(pos))
            for block in t.h:
                x = block(x)
            return F.linear(t.ln_f(x), t.wte.weight)  # lm_head, tied

    return GPT()


MODELS = {"OptimizedModel": build_mlp, "GPT": build_gpt2}


def model_kind(path: Path) -> str:
    match = re.search(r"^model\s+(\w+)", path.read_text(), re.M)
    if not match or match.group(1) not in MODELS:
        fail(f"{path}: peers.py knows the models {', '.join(MODELS)}; "
             f"this file's is {match.group(1) if match else 'missing'}")
    return match.group(1)


def make_input(torch, kind: str, cfg: dict, batch: int, seq: int):
    gen = torch.Generator().manual_seed(0)
    if kind == "GPT":
        if seq > cfg["context"]:
            fail(f"--seq {seq} is longer than the model's context ({cfg['context']})")
        return torch.randint(0, int(cfg["vocab"]), (batch, seq), generator=gen)
    return torch.randn(batch, int(cfg["hidden"]), generator=gen)


def coil_dims(kind: str, batch: int, seq: int) -> list[str]:
    dims = ["--dim", f"B={batch}"]
    if kind == "GPT":
        dims += ["--dim", f"T={seq}"]
    return dims


# ---------------------------------------------------------------------------- coil check


def coil_check(path: Path, sets: list[str], dims: list[str]) -> dict[str, int] | None:
    """Parameter count and FLOPs per call from `coil check`, or None without build/coil."""
    if not COIL.is_file():
        print(f"peers.py: note: {COIL} not built; FLOPs unknown, gflops will be null",
              file=sys.stderr)
        return None
    cmd = [str(COIL), "check", str(path), *dims]
    for s in sets:
        cmd += ["--set", s]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        fail(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    params = re.search(r"parameters: \d+ tensors, ([\d,]+) values", proc.stdout)
    flops = re.search(r"FLOPs per call.*\(([\d,]+)\)", proc.stdout)
    if not params or not flops:
        fail(f"could not read parameters and FLOPs from:\n{proc.stdout}")
    return {"params": int(params.group(1).replace(",", "")),
            "flops": int(flops.group(1).replace(",", ""))}


# ---------------------------------------------------------------------------- timing


def time_runs(step, warmup: int, runs: int) -> list[float]:
    """Seconds of each of `runs` calls of step(), after `warmup` untimed calls."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def run_torch(torch, engine: str, model, x, args, workdir: Path):
    """compile_s and the run times for eager or torch.compile.

    compile_s is a cold compile: Inductor gets an empty cache directory, so nothing that
    an earlier run compiled is reused (main runs each engine in a process of its own).
    """
    compile_s = 0.0
    fn = model
    if engine in ("compile", "autotune"):
        mode = "default" if engine == "compile" else "max-autotune-no-cudagraphs"
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(workdir / "inductor")
        fn = torch.compile(model, mode=mode)
        start = time.perf_counter()
        with torch.inference_mode():
            fn(x)  # the first call compiles
        compile_s = time.perf_counter() - start
    with torch.inference_mode():
        times = time_runs(lambda: fn(x), args.warmup, args.runs)
    return compile_s, times


def run_ort(torch, model, x, args, workdir: Path):
    """Export with torch.onnx.export, then time onnxruntime's CPU execution provider.

    compile_s is the export plus the session's creation (where ORT optimizes the graph).
    """
    import onnxruntime as ort

    onnx_file = workdir / "model.onnx"
    start = time.perf_counter()
    # The exporter prints its progress on stdout, which is this script's JSON channel.
    with torch.inference_mode(), contextlib.redirect_stdout(sys.stderr):
        torch.onnx.export(model, (x,), str(onnx_file), input_names=["x"],
                          output_names=["out"], external_data=True)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(str(onnx_file), opts, providers=["CPUExecutionProvider"])
    compile_s = time.perf_counter() - start

    if session.get_providers() != ["CPUExecutionProvider"]:
        raise RuntimeError(f"onnxruntime picked {session.get_providers()}, "
                           "not the CPU provider alone")
    # Check the export: ORT's output must match eager's.
    feed = {"x": x.numpy()}
    with torch.inference_mode():
        want = model(x).numpy()
    got = session.run(None, feed)[0]
    err = abs(got - want).max()
    if not err < 1e-2 * max(1.0, abs(want).max()):
        raise RuntimeError(f"onnxruntime's output differs from eager's by {err}")
    times = time_runs(lambda: session.run(None, feed), args.warmup, args.runs)
    return compile_s, times


def versions(engine: str) -> dict[str, str]:
    import torch

    out = {"torch": torch.__version__, "python": platform.python_version()}
    if engine == "ort":
        import onnx
        import onnxruntime

        out["onnxruntime"] = onnxruntime.__version__
        out["onnx"] = onnx.__version__
    return out


def bench_engine(torch, engine, model, x, args, info) -> dict:
    result = {"model": args.model_name, "engine": ENGINES[engine], "batch": args.batch,
              "threads": args.threads}
    if info["kind"] == "GPT":
        result["seq"] = args.seq
    try:
        with tempfile.TemporaryDirectory(prefix="coil-bench-") as tmp:
            if engine == "ort":
                compile_s, times = run_ort(torch, model, x, args, Path(tmp))
            else:
                compile_s, times = run_torch(torch, engine, model, x, args, Path(tmp))
    except Exception as exc:  # a peer that fails is reported as such, never as a number
        traceback.print_exc(file=sys.stderr)
        result["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        return result

    median_s = statistics.median(times)
    flops = info["flops"]
    gflops = flops / median_s / 1e9 if flops else None
    result.update({
        "compile_s": round(compile_s, 3),
        "median_ms": median_s * 1e3,
        "min_ms": min(times) * 1e3,
        "max_ms": max(times) * 1e3,
        "samples_per_s": args.batch / median_s,
        "gflops": gflops,
        "peak_fraction": gflops / args.peak_gflops if gflops and args.peak_gflops else None,
        "peak_memory_bytes": peak_rss_bytes(),
        "runs": args.runs,
        "warmup": args.warmup,
        "flops": flops,
        "params": info["params"],
        "versions": versions(engine),
    })
    return result


# ---------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Time a coil example model in PyTorch eager, torch.compile and "
                    "ONNX Runtime; one JSON line per engine on stdout.")
    parser.add_argument("model", help="mlp, gpt2, or a path to one of those .coil files")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--runs", type=int, default=50, help="timed runs (default 50)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed runs first (default 10)")
    parser.add_argument("--seq", type=int, default=128,
                        help="gpt2's sequence length T (default 128)")
    parser.add_argument("--set", dest="sets", action="append", default=[],
                        metavar="NAME=VALUE", help="override the model's config, as coil's")
    parser.add_argument("--engines", default="eager,compile,autotune,ort",
                        help=f"comma-separated, of {','.join(ENGINES)} (default all)")
    parser.add_argument("--flops", type=int, default=None,
                        help="FLOPs per call (default: from `coil check`; 0: unknown)")
    parser.add_argument("--peak-gflops", type=float, default=None,
                        help="the machine's peak, for peak_fraction (default: null)")
    args = parser.parse_args()

    if args.batch < 1 or args.threads < 1 or args.runs < 1 or args.warmup < 0:
        fail("--batch, --threads and --runs must be at least 1, --warmup at least 0")
    engines = args.engines.split(",")
    for e in engines:
        if e not in ENGINES:
            fail(f"--engines: unknown engine {e!r} (know {', '.join(ENGINES)})")
    if len(engines) > 1:
        # One fresh process per engine, so that neither compile caches nor the peak
        # resident set carry over from one engine to the next.
        failed = False
        for engine in engines:
            proc = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--engines", engine])
            failed |= proc.returncode != 0
        sys.exit(1 if failed else 0)

    path = model_path(args.model)
    args.model_name = path.stem
    config = apply_sets(read_config(path), args.sets)
    kind = model_kind(path)

    # The thread count must be fixed before torch (and its OpenMP) start.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    try:
        import torch
    except ImportError:
        fail("PyTorch is not installed here; run bench/run.sh, which sets up bench/.venv, "
             "or use bench/.venv/bin/python")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    model = MODELS[kind](torch, config).eval()  # eval: dropout is the identity
    x = make_input(torch, kind, config, args.batch, args.seq)
    params = sum(p.numel() for p in model.parameters())  # a tied weight counts once

    info = {"kind": kind, "params": params, "flops": args.flops or None}
    if args.flops is None:
        check = coil_check(path, args.sets, coil_dims(kind, args.batch, args.seq))
        if check:
            if check["params"] != params:
                fail(f"the PyTorch {kind} has {params:,} parameters, coil's "
                     f"{path.name} {check['params']:,}: the models differ")
            info["flops"] = check["flops"]

    result = bench_engine(torch, engines[0], model, x, args, info)
    print(json.dumps(result), flush=True)
    sys.exit(1 if "error" in result else 0)


if __name__ == "__main__":
    main()
