#!/usr/bin/env python3
"""attention_sdpa.py — coil's fused attention kernel against PyTorch's SDPA.

What it checks: for causal and non-causal attention in float32 and bfloat16, a one-op
model (`%y = attention %q, %k, %v {causal=...}` on [B, H, T, D], written by this script
into its work directory) run by `coil run --device DEVICE` on q, k, v drawn from a fixed
torch seed, against torch.nn.functional.scaled_dot_product_attention on the same inputs:

  * the reference: SDPA in float64 on the same device from the same (rounded) inputs;
    PyTorch's own SDPA in the case's dtype is held to it as well, for context;
  * pass: max |coil - ref| / max |ref| <= 1e-4 (float32) or 2e-2 (bfloat16) in every case.

Then, on a GPU only, the speed of each case: coil's attention step by its own CUDA events
(`coil bench MODEL --device cuda --profile`, two runs differenced so that first-run
costs cancel: see common.coil_step_times; should the GPU pipeline not keep attention as
one step, all steps' time is used and the output says so), SDPA's by CUDA events
(warm-up, then the median of --reps), both with TF32 off and no L2 flush between runs;
TFLOP/s = 4*B*H*T*T*D (halved when causal) / time, and coil's over SDPA's.
--no-timing: correctness only (for a machine busy with other checks); --time-only: the
timing only (no coil run, nothing compared; passes when everything was timed).

Time: on an H100 at B=4 H=12 T=1024 D=64, about 40 s in all (three coil processes per
case, NVRTC's cubins cached after the first), about 20 s with --no-timing or
--time-only. On a 2-core CPU at the CPU default sizes (B=1 H=2 T=128 D=32, correctness
only): about 5 s.

Run (repository root; coil from $COIL, default build/coil):
    python3 scripts/gpu/attention_sdpa.py --no-timing --json attention.json   # check
    python3 scripts/gpu/attention_sdpa.py --time-only --json attention-tflops.json
    COIL=build-py/coil bench/.venv/bin/python scripts/gpu/attention_sdpa.py --device cpu
Ends with `RESULT attention-sdpa pass|fail|skipped|error max_rel_err_f32=...
max_rel_err_bf16=... f32_causal_tflops=COIL/SDPA ...`; exit 0 on pass (or skipped: no
GPU), 1 otherwise.
"""

from __future__ import annotations

import argparse
import zlib

import common
from common import CheckError

CHECK = "attention-sdpa"
TOLERANCE = {"f32": 1e-4, "bf16": 2e-2}
SIZES = {"cuda": (4, 12, 1024, 64), "cpu": (1, 2, 128, 32)}  # B, H, T, D


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_common_args(parser)
    parser.add_argument("--batch", type=int, help="B (default 4 on a GPU, 1 on the CPU)")
    parser.add_argument("--heads", type=int, help="H (default 12 on a GPU, 2 on the CPU)")
    parser.add_argument("--seq", type=int, help="T (default 1024 on a GPU, 128 on the CPU)")
    parser.add_argument("--head-dim", type=int, help="D (default 64 on a GPU, 32 on the CPU)")
    parser.add_argument("--dtypes", default="f32,bf16", help="of f32,bf16 (default both)")
    parser.add_argument("--masks", default="causal,full", help="of causal,full (default both)")
    parser.add_argument("--reps", type=int, default=50, help="SDPA's timed runs (default 50)")
    parser.add_argument("--no-timing", action="store_true", help="correctness only")
    parser.add_argument("--time-only", action="store_true",
                        help="timing only (a GPU): no coil run, no comparison")
    args = parser.parse_args()
    if args.no_timing and args.time_only:
        parser.error("--no-timing and --time-only exclude each other")
    if args.time_only and args.device != "cuda":
        parser.error("--time-only needs --device cuda (the CPU is not timed)")
    default = SIZES[args.device]
    args.shape = tuple(given or d for given, d in
                       zip((args.batch, args.heads, args.seq, args.head_dim), default))
    for name, values, known in (("--dtypes", args.dtypes, TOLERANCE),
                                ("--masks", args.masks, ("causal", "full"))):
        for v in values.split(","):
            if v not in known:
                parser.error(f"{name}: unknown {v!r} (know {', '.join(known)})")
    return args


def write_model(path, dtype: str, causal: bool, shape) -> None:
    ty = f"{dtype}[{','.join(map(str, shape))}]"
    attrs = " {causal=true}" if causal else ""
    path.write_text(
        f"// written by scripts/gpu/attention_sdpa.py\n"
        f"graph @attention_{dtype}_{'causal' if causal else 'full'}"
        f"(%q: {ty}, %k: {ty}, %v: {ty}) -> (y: {ty}) {{\n"
        f"  %y = attention %q, %k, %v{attrs} : {ty}\n"
        f"  return %y\n}}\n")


def sdpa(torch, q, k, v, causal: bool):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def attention_flops(shape, causal: bool) -> float:
    b, h, t, d = shape
    return 4.0 * b * h * t * t * d / (2 if causal else 1)


def rel_err(got, ref) -> float:
    return float((got.double() - ref).abs().max() / ref.abs().max())


def check_case(torch, coil, args, work, dtype: str, causal: bool) -> dict:
    """Correctness of one case (unless --time-only), then (on a GPU) its timing."""
    name = f"{dtype}-{'causal' if causal else 'full'}"
    tdtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
    gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))  # fixed per case
    q, k, v = (torch.randn(args.shape, generator=gen).to(tdtype) for _ in range(3))
    model = work / f"{name}.cir"
    write_model(model, dtype, causal, args.shape)
    case = {"case": name, "flops": attention_flops(args.shape, causal), "ok": True}
    if not args.time_only:
        case.update(check_values(torch, coil, args, work, name, model, (q, k, v), causal))
    if args.device == "cuda" and not args.no_timing:
        qd, kd, vd = (t.to(args.device) for t in (q, k, v))
        case.update(time_case(torch, coil, args, model, qd, kd, vd, causal, case["flops"]))
    return case


def check_values(torch, coil, args, work, name: str, model, qkv, causal: bool) -> dict:
    """coil run against SDPA in float64 (and SDPA in the case's dtype, for context)."""
    q, k, v = qkv
    dtype = name.split("-")[0]
    inputs = []
    for label, t in zip("qkv", (q, k, v)):
        common.save_npy(work / f"{name}.{label}.npy", t)
        inputs += ["--input", f"{label}={work / f'{name}.{label}.npy'}"]
    common.run_coil(coil, ["run", model, "--device", args.device, *inputs,
                           "--out", work / name])
    got = common.load_npy(work / name / "y.npy", q.dtype)
    if tuple(got.shape) != args.shape:
        raise CheckError(f"{name}: coil's output is {tuple(got.shape)}, not {args.shape}")

    dev = args.device
    qd, kd, vd = (t.to(dev) for t in (q, k, v))
    ref = sdpa(torch, qd.double(), kd.double(), vd.double(), causal)
    theirs = sdpa(torch, qd, kd, vd, causal)
    out = {"tol": TOLERANCE[dtype], "rel_err": rel_err(got.to(dev), ref),
           "sdpa_rel_err": rel_err(theirs, ref)}
    out["ok"] = out["rel_err"] <= out["tol"]
    return out


def time_case(torch, coil, args, model, q, k, v, causal: bool, flops: float) -> dict:
    prof = common.coil_step_times(coil, [model, "--device", args.device])
    attention = [s for s in prof["steps"].values() if s["name"] == "attention"]
    if attention:
        coil_ms, how = attention[0]["ms"], "the attention step's CUDA events"
    else:
        coil_ms, how = prof["total_ms"], "all steps (no step named attention)"
    sdpa_ms = common.cuda_median_ms(torch, lambda: sdpa(torch, q, k, v, causal),
                                    reps=args.reps)
    return {"coil_ms": coil_ms, "coil_timed": how, "coil_latency_ms": prof["latency_ms"],
            "coil_steps": prof["steps"], "sdpa_ms": sdpa_ms,
            "coil_tflops": flops / coil_ms * 1e-9, "sdpa_tflops": flops / sdpa_ms * 1e-9,
            "coil_over_sdpa": sdpa_ms / coil_ms}


def report(case: dict) -> None:
    line = f"{case['case']:12}"
    if "rel_err" in case:
        line += (f" coil rel err {case['rel_err']:.2e} (tol {case['tol']:g}; torch's own "
                 f"{case['sdpa_rel_err']:.2e})")
    if "coil_ms" in case:
        line += (f"  coil {case['coil_ms']:.3f} ms {case['coil_tflops']:.2f} TFLOP/s, SDPA "
                 f"{case['sdpa_ms']:.3f} ms {case['sdpa_tflops']:.2f} TFLOP/s, coil/SDPA "
                 f"speed {case['coil_over_sdpa']:.3f}")
        if case["coil_timed"].startswith("all"):
            line += " (coil timed over all its steps: no attention step)"
    print(line, flush=True)
    if not case["ok"]:
        print(f"FAIL attention-sdpa {case['case']}: rel err {case['rel_err']:.3e} > "
              f"{case['tol']:g}", flush=True)


def body(args) -> None:
    torch = common.import_torch()
    if (why := common.gpu_missing(torch, args.device)):
        common.skip(CHECK, why, args.json)
    coil = common.coil_binary()
    torch.backends.cuda.matmul.allow_tf32 = False  # SDPA's math path: full float32
    b, h, t, d = args.shape
    print(f"attention B={b} H={h} T={t} D={d} on {args.device}"
          + ("; timing only" if args.time_only else
             f"; reference: SDPA in float64 on {args.device}"))
    cases = []
    with common.workdir(args.keep, "coil-attention-") as work:
        for dtype in args.dtypes.split(","):
            for mask in args.masks.split(","):
                cases.append(check_case(torch, coil, args, work, dtype, mask == "causal"))
                report(cases[-1])
    ok = all(c["ok"] for c in cases)
    summary = common.attention_summary(cases, args.dtypes.split(","), args.shape, args.device)
    common.finish(CHECK, "pass" if ok else "fail", summary, args.json, {
        "cases": cases, "coil_version": common.coil_version(coil), "allow_tf32": False,
        "env": common.environment(torch, args.device)})


def main() -> None:
    args = parse_args()
    common.guarded(CHECK, args.json, lambda: body(args))


if __name__ == "__main__":
    main()
