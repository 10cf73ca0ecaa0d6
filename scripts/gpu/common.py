"""Shared pieces of the scripts in scripts/gpu/: arguments, running coil, the RESULT line.

Every script here runs as `python3 scripts/gpu/NAME.py [--device cpu|cuda] [--json FILE]`
from the repository root, takes coil's binary from $COIL (default build/coil), and ends
with one line `RESULT <check> <pass|fail|skipped|error> key=value ...` that
scripts/gpu-check.sh greps. Exit status: 0 pass (or skipped: --device cuda without a GPU),
1 fail or error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
BENCH = REPO / "bench"


class CheckError(Exception):
    """A failure to run something (as opposed to a wrong number): reported as `error`."""


def add_common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda",
                        help="where coil and PyTorch run (default cuda)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON here")
    parser.add_argument("--keep", metavar="DIR",
                        help="write the generated models, inputs and outputs here and keep "
                             "them (default: a temporary directory, removed)")


@contextlib.contextmanager
def workdir(keep: str | None, prefix: str):
    """--keep DIR (created, kept), else a temporary directory removed afterwards."""
    if keep:
        path = Path(keep)
        path.mkdir(parents=True, exist_ok=True)
        yield path
    else:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            yield Path(tmp)


def coil_binary() -> Path:
    """$COIL, else build/coil, relative to the repository root when not absolute."""
    path = Path(os.environ.get("COIL") or "build/coil")
    if not path.is_absolute():
        path = REPO / path
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise CheckError(f"no coil binary at {path} (set COIL=PATH or build build/coil)")
    return path


def coil_version(coil: Path) -> str:
    proc = subprocess.run([str(coil), "--version"], capture_output=True, text=True)
    return (proc.stdout or proc.stderr).strip().splitlines()[0] if proc.returncode == 0 \
        else "unknown"


def run_coil(coil: Path, args: list[str], timeout: float = 300,
             env: dict | None = None) -> tuple[str, float]:
    """Run `coil ARGS`; its stdout and wall seconds. A failure raises CheckError with the
    command and the last lines coil printed."""
    cmd = [str(coil), *map(str, args)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        raise CheckError(f"`{' '.join(cmd)}` took more than {timeout:.0f} s") from None
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        said = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise CheckError(f"`{' '.join(cmd)}` exited with status {proc.returncode}: {said}")
    return proc.stdout, seconds


def coil_bench_json(coil: Path, args: list[str], env: dict | None = None,
                    timeout: float = 300) -> dict:
    """`coil bench ARGS --json`: its one JSON object."""
    out, _ = run_coil(coil, ["bench", *args, "--json"], timeout=timeout, env=env)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise CheckError(f"`coil bench {' '.join(args)} --json` printed no JSON: {out[:200]}")
    return json.loads(lines[-1])


# ------------------------------------------------------------------------- --profile

# tools/bench.c's print_profile: "  step N  MS ms  SHARE%  RATE GFLOP/s  NAME"
PROFILE_STEP = re.compile(r"^\s*step (\d+)\s+([\d.]+) ms\s+[\d.]+%\s+[\d.]+ GFLOP/s\s+(.+)$")
PROFILE_HEAD = re.compile(r"^profile\s+([\d.]+) ms per run in (\d+) steps")


def parse_profile(text: str) -> tuple[float, dict[int, tuple[str, float]]]:
    """`coil bench --profile`'s text: the ms per run of all steps, and {step: (name, ms)}
    for the (at most ten) slowest steps it lists."""
    total, steps = None, {}
    for line in text.splitlines():
        if (m := PROFILE_HEAD.match(line)):
            total = float(m.group(1))
        elif (m := PROFILE_STEP.match(line)):
            steps[int(m.group(1))] = (m.group(3), float(m.group(2)))
    if total is None:
        raise CheckError("coil bench --profile printed no profile line")
    return total, steps


def coil_step_times(coil: Path, model_args: list[str], runs: tuple[int, int] = (5, 45),
                    warmup: int = 1, env: dict | None = None) -> dict:
    """Each listed step's own time per run (device time: CUDA events on a GPU), from two
    `coil bench --profile` runs.

    --profile prints each step's time summed over the warm-up and the timed runs, divided
    by their count, so a first run's one-time costs (module loading, cold caches) are
    spread over them. Two processes with the same warm-up and R1 < R2 timed runs give the
    steady per-run time as (total(R2) - total(R1)) / (R2 - R1), which those costs cancel
    out of. Returns {"steps": {step: {"name", "ms", "ms_mean"}}, "total_ms",
    "latency_ms"} where ms_mean is the plain mean of the longer run, and latency_ms its
    whole-run median (copies in and out included)."""
    r1, r2 = runs
    totals, listed = [], []
    latency = None
    for r in (r1, r2):
        text, _ = run_coil(coil, ["bench", *model_args, "--profile", "--runs", r,
                                  "--warmup", warmup], env=env)
        total, steps = parse_profile(text)
        totals.append(total * (r + warmup))
        listed.append({s: (name, ms * (r + warmup)) for s, (name, ms) in steps.items()})
        if (m := re.search(r"^latency\s+([\d.]+) ms median", text, re.M)):
            latency = float(m.group(1))
    def steady(sum1: float, sum2: float) -> float:
        # the difference, unless noise or the profile's 3 decimals made it meaningless
        diff = (sum2 - sum1) / (r2 - r1)
        return diff if diff > 0 else sum2 / (r2 + warmup)

    steps = {}
    for s, (name, sum2) in listed[1].items():
        if s in listed[0]:
            steps[s] = {"name": name, "ms": steady(listed[0][s][1], sum2),
                        "ms_mean": sum2 / (r2 + warmup)}
    return {"steps": steps, "total_ms": steady(*totals), "latency_ms": latency}


# ------------------------------------------------------------------------- torch


def import_torch():
    try:
        import torch
    except ImportError:
        raise CheckError(f"{sys.executable} cannot import torch") from None
    return torch


def gpu_missing(torch, device: str) -> str | None:
    """Why --device cuda cannot run here, or None."""
    if device != "cuda" or torch.cuda.is_available():
        return None
    return (f"torch {torch.__version__} (CUDA {torch.version.cuda}): "
            "torch.cuda.is_available() is False")


def cuda_median_ms(torch, fn, warmup: int = 5, reps: int = 50) -> float:
    """The median of `reps` timings of fn() between two CUDA events, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def save_npy(path: Path, tensor) -> None:
    """A torch tensor as .npy; bfloat16 as its uint16 bits, as coil reads it."""
    import numpy as np
    import torch

    t = tensor.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        np.save(path, t.view(torch.int16).numpy().view(np.uint16))
    else:
        np.save(path, t.numpy())


def load_npy(path: Path, dtype=None):
    """A .npy coil wrote, as a torch tensor; dtype torch.bfloat16 reads uint16 bits."""
    import numpy as np
    import torch

    arr = np.load(path)
    if dtype == torch.bfloat16:
        if arr.dtype != np.uint16:
            raise CheckError(f"{path}: expected bf16 as uint16 bits, got {arr.dtype}")
        return torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(arr)


def attention_summary(cases: list, dtypes: list, shape, device: str) -> dict:
    """The attention checks' RESULT fields: the largest relative error per dtype (of the
    cases that were checked), each timed case's TFLOP/s as coil/SDPA (e.g.
    f32_causal_tflops=3.1/9.8), the shape and the device."""
    summary = {}
    for dtype in dtypes:
        errors = [c["rel_err"] for c in cases if c["case"].startswith(dtype) and "rel_err" in c]
        if errors:
            summary[f"max_rel_err_{dtype}"] = max(errors)
    for c in cases:
        if "coil_tflops" in c:
            summary[f"{c['case'].replace('-', '_')}_tflops"] = \
                f"{c['coil_tflops']:.3g}/{c['sdpa_tflops']:.3g}"
    summary["shape"] = "x".join(map(str, shape))
    summary["device"] = device
    return summary


def environment(torch, device: str) -> dict:
    """What ran: python, torch, the GPU."""
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "device": device}
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
        env["cuda"] = str(torch.version.cuda)
    return env


# ------------------------------------------------------------------------- the end


def fmt(value) -> str:
    """A RESULT field's value: floats to 4 digits, text with spaces quoted."""
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    return json.dumps(text) if any(c.isspace() or c == '"' for c in text) else text


def finish(check: str, status: str, summary: dict, json_path: str | None,
           data: dict | None = None) -> None:
    """Write the JSON, print the RESULT line and exit: 0 for pass or skipped, else 1."""
    if json_path:
        record = {"check": check, "status": status, **summary, **(data or {})}
        Path(json_path).write_text(json.dumps(record, indent=2, default=str) + "\n")
    fields = " ".join(f"{k}={fmt(v)}" for k, v in summary.items() if v is not None)
    print(f"RESULT {check} {status} {fields}".rstrip(), flush=True)
    sys.exit(0 if status in ("pass", "skipped") else 1)


def skip(check: str, why: str, json_path: str | None) -> None:
    print(f"skipped: no GPU ({why})", flush=True)
    finish(check, "skipped", {"reason": "no-GPU"}, json_path, {"why": why})


def guarded(check: str, json_path: str | None, body) -> None:
    """Run body(), which ends by calling finish(); a CheckError, or any other exception
    (a traceback first), ends as `RESULT CHECK error message="..."` with status 1."""
    try:
        body()
        return
    except CheckError as exc:
        message = str(exc)
    except Exception as exc:  # torch's or numpy's: still one RESULT line for the grep
        traceback.print_exc()
        message = f"{type(exc).__name__}: {exc}"
    print(f"{check}: error: {message}", file=sys.stderr, flush=True)
    finish(check, "error", {"message": " ".join(message.split())[:300]}, json_path)
