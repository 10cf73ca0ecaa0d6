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
without coil ($COIL, default build/coil), or with --flops 0, gflops is null.
peak_fraction needs --peak-gflops; otherwise it is null (report.py fills it in from the
peak `coil bench` measured).
Each engine runs in a process of its own, so peak_memory_bytes, the process's peak
resident set (ru_maxrss: the Python runtime, the libraries and the model included), is
that engine's, and torch.compile's compile time is a cold one.

With --device cuda the model runs on the first GPU and every run is timed between two
torch.cuda.synchronize() calls, two ways, since `coil bench --device cuda` times include
copying the input in and the output out:
    with_copies      the input copied from a host tensor each run, the output copied back
                     (.cpu()); the top-level median_ms, samples_per_s and gflops are these,
                     and "timed" says so
    device_resident  the input already on the GPU, the output left there: the
                     "device_resident" object
and gpu_memory_bytes is the GPU memory the engine used (gpu_memory_how says how measured),
allow_tf32 whether the engine let float32 matmuls use TF32 (torch's flag as it was set,
ONNX Runtime's use_tf32).
--dtype bf16 casts the model (and a float input) to bfloat16.

Usage:
    bench/.venv/bin/python bench/peers.py mlp --batch 128 --threads 2
    bench/.venv/bin/python bench/peers.py gpt2 --seq 64 --set layers=2 --engines eager,ort
    python3 bench/peers.py gpt2 --batch 8 --seq 1024 --device cuda
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
# coil's binary: $COIL (relative to the repository root unless absolute), else build/coil.
COIL = REPO / (os.environ.get("COIL") or "build/coil")

# engine key on the command line -> name in the JSON output
ENGINES = {
    "eager": "pytorch-eager",
    "compile": "torch.compile",
    "autotune": "torch.compile-max-autotune-no-cudagraphs",
    "ort": "onnxruntime",
}
# On a GPU, autotune is mode "max-autotune", which replays CUDA graphs there; ORT runs on
# its CUDA execution provider.
ENGINES_CUDA = {**ENGINES, "autotune": "torch.compile-max-autotune",
                "ort": "onnxruntime-cuda"}
COMPILE_MODES = {
    ("compile", "cpu"): "default", ("autotune", "cpu"): "max-autotune-no-cudagraphs",
    ("compile", "cuda"): "default", ("autotune", "cuda"): "max-autotune",
}
ORT_PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
GPU = "cuda"  # torch's name for the GPU the peers run on (the first, as coil's)
TIMED = {
    "with_copies": "input copied from a host tensor each run and the output copied back "
                   "(.cpu()), as coil bench's GPU times include",
    "device_resident": "input already on the GPU, output left there",
}


def engine_names(device: str) -> dict[str, str]:
    return ENGINES_CUDA if device == "cuda" else ENGINES


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
    """The input on the host, in float32 (GPT: token ids)."""
    gen = torch.Generator().manual_seed(0)
    if kind == "GPT":
        if seq > cfg["context"]:
            fail(f"--seq {seq} is longer than the model's context ({cfg['context']})")
        return torch.randint(0, int(cfg["vocab"]), (batch, seq), generator=gen)
    return torch.randn(batch, int(cfg["hidden"]), generator=gen)


def torch_dtype(torch, dtype: str):
    return {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]


def coil_dims(kind: str, batch: int, seq: int) -> list[str]:
    dims = ["--dim", f"B={batch}"]
    if kind == "GPT":
        dims += ["--dim", f"T={seq}"]
    return dims


# ---------------------------------------------------------------------------- coil check


def coil_check(path: Path, sets: list[str], dims: list[str]) -> dict[str, int] | None:
    """Parameter count and FLOPs per call from `coil check`, or None without coil."""
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


def time_runs(step, warmup: int, runs: int, sync) -> list[float]:
    """Seconds of each of `runs` calls of step(), after `warmup` untimed calls.

    On a GPU, sync is torch.cuda.synchronize: a GPU runs its kernels after the call that
    queued them returns, so each timed run starts with nothing in flight and ends when its
    last kernel has finished.
    """
    for _ in range(warmup):
        step()
    times = []
    for _ in range(runs):
        sync()
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return times


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def torch_steps(torch, fn, x, args) -> dict:
    """What to time, by name: on the CPU one step; on a GPU the two of TIMED."""
    if args.device == "cpu":
        return {"cpu": lambda: fn(x)}
    x_gpu = x.to(GPU)
    return {"device_resident": lambda: fn(x_gpu),
            "with_copies": lambda: fn(x.to(GPU)).cpu()}


def run_torch(torch, engine: str, model, x, args, workdir: Path):
    """compile_s and the steps to time for eager or torch.compile.

    compile_s is a cold compile: Inductor gets an empty cache directory, so nothing that
    an earlier run compiled is reused (main runs each engine in a process of its own).
    """
    compile_s = 0.0
    fn = model
    if engine in ("compile", "autotune"):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(workdir / "inductor")
        fn = torch.compile(model, mode=COMPILE_MODES[engine, args.device])
        start = time.perf_counter()
        with torch.inference_mode():
            fn(x if args.device == "cpu" else x.to(GPU))  # the first call compiles
            synchronizer(torch, args)()
        compile_s = time.perf_counter() - start
    return compile_s, torch_steps(torch, fn, x, args)


def synchronizer(torch, args):
    """What waits for the device: nothing on the CPU, torch.cuda.synchronize on a GPU."""
    return torch.cuda.synchronize if args.device == "cuda" else (lambda: None)


def ort_session(ort, onnx_file: Path, args):
    """An ORT session on the CPU provider, or on a GPU the CUDA provider alone."""
    provider = ORT_PROVIDERS[args.device]
    if provider not in ort.get_available_providers():
        raise RuntimeError(
            f"this onnxruntime {ort.__version__} has no {provider} (it has "
            f"{', '.join(ort.get_available_providers())}; the GPU's is in onnxruntime-gpu)")
    options = {}
    if provider == "CUDAExecutionProvider":
        # ORT's CUDA provider allows TF32 unless told not to; coil and torch do not.
        options = {"device_id": 0, "use_tf32": int(args.allow_tf32)}
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(str(onnx_file), opts, providers=[(provider, options)])
    # ORT falls back to the CPU when its CUDA provider fails to load (a missing cuDNN, say).
    if session.get_providers()[0] != provider:
        raise RuntimeError(f"onnxruntime picked {session.get_providers()}, not {provider}")
    return session


def ort_steps(torch, session, x, want, args) -> dict:
    """What to time, as torch_steps. session.run with host arrays copies the input in
    and the output out itself; on a GPU, an I/O binding to tensors already there does not.
    """
    import numpy as np

    feed = {"x": x.numpy()}
    if args.device == "cpu":
        return {"cpu": lambda: session.run(None, feed)}
    x_gpu = x.to(GPU)
    out_gpu = torch.empty(want.shape, dtype=torch.float32, device=GPU)
    torch.cuda.synchronize()  # x_gpu is written on torch's stream, read on ORT's
    binding = session.io_binding()
    # ORT's name for the device is torch's ("cuda"), device 0 as GPU's.
    binding.bind_input("x", GPU, 0, x.numpy().dtype, tuple(x.shape), x_gpu.data_ptr())
    binding.bind_output("out", GPU, 0, np.float32, tuple(want.shape), out_gpu.data_ptr())
    session.run_with_iobinding(binding)
    check_close(out_gpu.cpu().numpy(), want, args, "onnxruntime's (I/O binding)")
    # x_gpu and out_gpu must live as long as the binding that points into them.
    return {"device_resident": lambda: (session.run_with_iobinding(binding), x_gpu, out_gpu),
            "with_copies": lambda: session.run(None, feed)}


def run_ort(torch, model, x, args, workdir: Path):
    """Export with torch.onnx.export, then onnxruntime: compile_s and the steps to time.

    The export is of the float32 model on the CPU. compile_s is the export plus the
    session's creation (where ORT optimizes the graph).
    """
    import onnxruntime as ort

    if args.dtype != "f32":
        raise RuntimeError(f"--dtype {args.dtype}: peers.py runs onnxruntime in float32 "
                           "only (numpy, its inputs' and outputs' type, has no bfloat16)")
    onnx_file = workdir / "model.onnx"
    start = time.perf_counter()
    # The exporter prints its progress on stdout, which is this script's JSON channel.
    with torch.inference_mode(), contextlib.redirect_stdout(sys.stderr):
        torch.onnx.export(model, (x,), str(onnx_file), input_names=["x"],
                          output_names=["out"], external_data=True)
    session = ort_session(ort, onnx_file, args)
    compile_s = time.perf_counter() - start

    # Check the export: ORT's output must match eager's (on the CPU, in float32).
    with torch.inference_mode():
        want = model(x).numpy()
    check_close(session.run(None, {"x": x.numpy()})[0], want, args, "onnxruntime's")
    return compile_s, ort_steps(torch, session, x, want, args)


def check_close(got, want, args, what: str) -> None:
    err = abs(got - want).max()
    tolerance = 5e-2 if args.allow_tf32 else 1e-2  # TF32 GEMMs: 10-bit mantissas
    if not err < tolerance * max(1.0, abs(want).max()):
        raise RuntimeError(f"{what} output differs from eager's by {err}")


def gpu_in_use(torch) -> int:
    """Bytes of GPU memory in use, by every allocator (ORT's has its own, not torch's)."""
    free, total = torch.cuda.mem_get_info()
    return total - free


def gpu_memory(torch, engine: str, in_use_before: int) -> tuple[int, str]:
    """The engine's GPU memory and how it was measured."""
    if engine == "ort":
        # ORT's arena grows and never shrinks, so its growth is about ORT's peak.
        return (gpu_in_use(torch) - in_use_before,
                "growth of the GPU memory in use (cudaMemGetInfo) over onnxruntime's runs")
    return torch.cuda.max_memory_allocated(), "torch.cuda.max_memory_allocated()"


def allow_tf32(torch, engine: str, args) -> bool:
    """Whether the engine's float32 matmuls may use TF32: ONNX Runtime's use_tf32 as
    ort_session set it; torch's flag as it stands (the engines compiled by Inductor
    read the same one)."""
    if engine == "ort":
        return bool(args.allow_tf32)
    return bool(torch.backends.cuda.matmul.allow_tf32)


def versions(engine: str, device: str) -> dict[str, str]:
    import torch

    out = {"torch": torch.__version__, "python": platform.python_version()}
    if device == "cuda":
        out["cuda"] = str(torch.version.cuda)
        if engine in ("compile", "autotune"):  # Inductor's GPU kernels are Triton's
            triton = sys.modules.get("triton")
            out["triton"] = getattr(triton, "__version__", "not loaded")
    if engine == "ort":
        import onnx
        import onnxruntime

        out["onnxruntime"] = onnxruntime.__version__
        out["onnx"] = onnx.__version__
    return out


def figures(times: list[float], args, flops: int | None) -> dict:
    median_s = statistics.median(times)
    gflops = flops / median_s / 1e9 if flops else None
    return {
        "median_ms": median_s * 1e3,
        "min_ms": min(times) * 1e3,
        "max_ms": max(times) * 1e3,
        "samples_per_s": args.batch / median_s,
        "gflops": gflops,
        "peak_fraction": gflops / args.peak_gflops if gflops and args.peak_gflops else None,
    }


def time_steps(torch, engine, model, x, args, workdir: Path) -> tuple[float, dict]:
    """compile_s and, per step of torch_steps or ort_steps, its run times."""
    if engine == "ort":
        compile_s, steps = run_ort(torch, model, x, args, workdir)
    else:
        compile_s, steps = run_torch(torch, engine, model, x, args, workdir)
    sync = synchronizer(torch, args)
    with torch.inference_mode():
        times = {name: time_runs(step, args.warmup, args.runs, sync)
                 for name, step in steps.items()}
    return compile_s, times


def bench_engine(torch, engine, model, x, args, info) -> dict:
    result = {"model": args.model_name, "engine": engine_names(args.device)[engine],
              "batch": args.batch}
    if args.device == "cpu":
        result["threads"] = args.threads
    else:
        result["device"] = torch.cuda.get_device_name(0)
    if info["kind"] == "GPT":
        result["seq"] = args.seq
    if args.dtype != "f32":
        result["dtype"] = args.dtype
    try:
        in_use_before = gpu_in_use(torch) if args.device == "cuda" else 0
        with tempfile.TemporaryDirectory(prefix="coil-bench-") as tmp:
            compile_s, times = time_steps(torch, engine, model, x, args, Path(tmp))
    except Exception as exc:  # a peer that fails is reported as such, never as a number
        traceback.print_exc(file=sys.stderr)
        result["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        return result

    # On a GPU the top-level figures are the with-copies ones, coil's like.
    primary = "cpu" if args.device == "cpu" else "with_copies"
    result["compile_s"] = round(compile_s, 3)
    result.update(figures(times[primary], args, info["flops"]))
    if args.device == "cuda":
        result["timed"] = f"with_copies: {TIMED['with_copies']}"
        result["device_resident"] = {**figures(times["device_resident"], args, info["flops"]),
                                     "timed": TIMED["device_resident"]}
        result["gpu_memory_bytes"], result["gpu_memory_how"] = gpu_memory(torch, engine,
                                                                          in_use_before)
        result["allow_tf32"] = allow_tf32(torch, engine, args)
    result.update({
        "peak_memory_bytes": peak_rss_bytes(),
        "runs": args.runs,
        "warmup": args.warmup,
        "flops": info["flops"],
        "params": info["params"],
        "versions": versions(engine, args.device),
    })
    return result


# ---------------------------------------------------------------------------- main


def check_gpu(torch) -> None:
    if not torch.cuda.is_available():
        fail(f"--device cuda: PyTorch {torch.__version__} sees no GPU here "
             f"(torch.cuda.is_available() is False; built for CUDA {torch.version.cuda})")


def place(torch, model, x, args):
    """The model on the device in --dtype; x stays on the host (the steps copy it), in
    --dtype when it is a float."""
    dtype = torch_dtype(torch, args.dtype)
    model = model.to(device=GPU if args.device == "cuda" else "cpu", dtype=dtype)
    return model, x.to(dtype) if x.is_floating_point() else x


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
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cuda: the first NVIDIA GPU, timed with and without copies")
    parser.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                        help="the model's (and a float input's) type (default f32)")
    parser.add_argument("--allow-tf32", action="store_true",
                        help="cuda: float32 matmuls in TF32 (torch and onnxruntime)")
    args = parser.parse_args()

    if args.batch < 1 or args.threads < 1 or args.runs < 1 or args.warmup < 0:
        fail("--batch, --threads and --runs must be at least 1, --warmup at least 0")
    if args.allow_tf32 and args.device != "cuda":
        fail("--allow-tf32 applies to --device cuda")
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
    if args.device == "cuda":
        check_gpu(torch)
        # Full float32 matmuls unless --allow-tf32, as coil's (torch's default, made explicit).
        torch.set_float32_matmul_precision("high" if args.allow_tf32 else "highest")

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

    if engines[0] != "ort":  # ORT exports the float32 model from the CPU
        model, x = place(torch, model, x, args)
    result = bench_engine(torch, engines[0], model, x, args, info)
    print(json.dumps(result), flush=True)
    sys.exit(1 if "error" in result else 0)


if __name__ == "__main__":
    main()
