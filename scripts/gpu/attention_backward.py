#!/usr/bin/env python3
"""attention_backward.py — coil's fused attention backward against PyTorch's SDPA backward.

What it checks: for causal and non-causal attention in bfloat16 (and float16 with
--dtypes), a model of attention's two training ops (`attention_lse` and `attention_grad`,
what autodiff puts in a training graph; written by this script into its work directory)
run by `coil run --device DEVICE` on q, k, v, the forward's output o and its gradient do,
drawn from a fixed torch seed, against autograd through
torch.nn.functional.scaled_dot_product_attention:

  * the reference: SDPA's gradients in float64 on the same device from the same (rounded)
    q, k, v and do, with o the float64 forward rounded to the case's dtype;
  * pass: max |coil - ref| / max |ref| <= 2e-2 for each of dq, dk and dv in every case
    (PyTorch's own backward in the case's dtype is held to the reference too, for context).

Then, on a GPU only, the speed: coil's two steps (the log-sum-exp and the backward) by
their CUDA events (`coil bench --profile`, two runs differenced: common.coil_step_times),
SDPA's backward alone (autograd.grad over a retained forward) by CUDA events; TFLOP/s =
10*B*H*T*T*D (halved when causal: the five products of a backward) / time. coil's time
includes the log-sum-exp pass, which a forward that returned it would save.

Time: on an H200 at B=4 H=12 T=1024 D=64, about 30 s. On a 2-core CPU at the CPU default
sizes (B=1 H=2 T=128 D=32, correctness only): about 5 s.

Run (repository root; coil from $COIL, default build/coil):
    python3 scripts/gpu/attention_backward.py --json attention-backward.json
    COIL=build/coil bench/.venv/bin/python scripts/gpu/attention_backward.py --device cpu
Ends with `RESULT attention-backward pass|fail|skipped|error max_rel_err_bf16=...
bf16_causal_tflops=COIL/SDPA ...`; exit 0 on pass (or skipped: no GPU), 1 otherwise.
"""

from __future__ import annotations

import argparse
import zlib

import common
from common import CheckError

CHECK = "attention-backward"
TOLERANCE = 2e-2
SIZES = {"cuda": (4, 12, 1024, 64), "cpu": (1, 2, 128, 32)}  # B, H, T, D
DTYPES = ("bf16", "f16")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_common_args(parser)
    parser.add_argument("--batch", type=int, help="B (default 4 on a GPU, 1 on the CPU)")
    parser.add_argument("--heads", type=int, help="H (default 12 on a GPU, 2 on the CPU)")
    parser.add_argument("--seq", type=int, help="T (default 1024 on a GPU, 128 on the CPU)")
    parser.add_argument("--head-dim", type=int, help="D (default 64 on a GPU, 32 on the CPU)")
    parser.add_argument("--dtypes", default="bf16", help="of bf16,f16 (default bf16)")
    parser.add_argument("--reps", type=int, default=50, help="SDPA's timed runs (default 50)")
    parser.add_argument("--no-timing", action="store_true", help="correctness only")
    args = parser.parse_args()
    default = SIZES[args.device]
    args.shape = tuple(given or d for given, d in
                       zip((args.batch, args.heads, args.seq, args.head_dim), default))
    for v in args.dtypes.split(","):
        if v not in DTYPES:
            parser.error(f"--dtypes: unknown {v!r} (know {', '.join(DTYPES)})")
    return args


def write_model(path, dtype: str, causal: bool, shape) -> None:
    ty = f"{dtype}[{','.join(map(str, shape))}]"
    rows = f"f32[{','.join(map(str, shape[:-1]))}]"
    grads = f"{dtype}[3,{','.join(map(str, shape))}]"
    attrs = " {causal=true}" if causal else ""
    path.write_text(
        f"// written by scripts/gpu/attention_backward.py\n"
        f"graph @attention_backward_{dtype}_{'causal' if causal else 'full'}"
        f"(%q: {ty}, %k: {ty}, %v: {ty}, %o: {ty}, %do: {ty}) -> (d: {grads}) {{\n"
        f"  %lse = attention_lse %q, %k{attrs} : {rows}\n"
        f"  %d = attention_grad %q, %k, %v, %o, %do, %lse{attrs} : {grads}\n"
        f"  return %d\n}}\n")


def backward_flops(shape, causal: bool) -> float:
    b, h, t, d = shape
    return 10.0 * b * h * t * t * d / (2 if causal else 1)


def sdpa_grads(torch, q, k, v, do, causal: bool):
    """SDPA's output and its gradients for q, k, v."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return (y.detach(), *torch.autograd.grad(y, (q, k, v), do))


def rel_err(got, ref) -> float:
    return float((got.double() - ref).abs().max() / ref.abs().max())


def check_case(torch, coil, args, work, dtype: str, causal: bool) -> dict:
    name = f"{dtype}-{'causal' if causal else 'full'}"
    tdtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    q, k, v, do = (torch.randn(args.shape, generator=gen).to(tdtype) for _ in range(4))
    dev = args.device
    ref = sdpa_grads(torch, *(t.to(dev).double() for t in (q, k, v, do)), causal)
    o = ref[0].to(tdtype).cpu()
    model = work / f"{name}.cir"
    write_model(model, dtype, causal, args.shape)
    inputs = []
    for label, t in zip(("q", "k", "v", "o", "do"), (q, k, v, o, do)):
        common.save_npy(work / f"{name}.{label}.npy", t)
        inputs += ["--input", f"{label}={work / f'{name}.{label}.npy'}"]
    common.run_coil(coil, ["run", model, "--device", dev, *inputs, "--out", work / name])
    got = common.load_npy(work / name / "d.npy", tdtype)
    if tuple(got.shape) != (3, *args.shape):
        raise CheckError(f"{name}: coil's output is {tuple(got.shape)}, not {(3, *args.shape)}")
    theirs = sdpa_grads(torch, *(t.to(dev) for t in (q, k, v, do)), causal)
    case = {"case": name, "flops": backward_flops(args.shape, causal), "tol": TOLERANCE}
    for i, part in enumerate(("dq", "dk", "dv")):
        case[f"rel_err_{part}"] = rel_err(got[i].to(dev), ref[1 + i])
        case[f"sdpa_rel_err_{part}"] = rel_err(theirs[1 + i], ref[1 + i])
    case["rel_err"] = max(case[f"rel_err_{p}"] for p in ("dq", "dk", "dv"))
    case["ok"] = case["rel_err"] <= TOLERANCE
    if dev == "cuda" and not args.no_timing:
        case.update(time_case(torch, coil, args, model, (q, k, v, do), causal, case["flops"]))
    return case


def time_case(torch, coil, args, model, qkvdo, causal: bool, flops: float) -> dict:
    prof = common.coil_step_times(coil, [model, "--device", "cuda"])
    coil_ms = prof["total_ms"]
    q, k, v, do = (t.to("cuda").requires_grad_() for t in qkvdo)
    y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    sdpa_ms = common.cuda_median_ms(
        torch, lambda: torch.autograd.grad(y, (q, k, v), do, retain_graph=True), reps=args.reps)
    return {"coil_ms": coil_ms, "coil_steps": prof["steps"], "sdpa_ms": sdpa_ms,
            "coil_tflops": flops / coil_ms * 1e-9, "sdpa_tflops": flops / sdpa_ms * 1e-9,
            "coil_over_sdpa": sdpa_ms / coil_ms}


def report(case: dict) -> None:
    errs = ", ".join(f"{p} {case[f'rel_err_{p}']:.2e} (torch's {case[f'sdpa_rel_err_{p}']:.2e})"
                     for p in ("dq", "dk", "dv"))
    line = f"{case['case']:12} rel err {errs}; tol {case['tol']:g}"
    if "coil_ms" in case:
        line += (f"  coil {case['coil_ms']:.3f} ms {case['coil_tflops']:.2f} TFLOP/s, SDPA "
                 f"backward {case['sdpa_ms']:.3f} ms {case['sdpa_tflops']:.2f} TFLOP/s, "
                 f"coil/SDPA speed {case['coil_over_sdpa']:.3f}")
    print(line, flush=True)
    if not case["ok"]:
        print(f"FAIL {CHECK} {case['case']}: rel err {case['rel_err']:.3e} > {TOLERANCE:g}",
              flush=True)


def body(args) -> None:
    torch = common.import_torch()
    if (why := common.gpu_missing(torch, args.device)):
        common.skip(CHECK, why, args.json)
    coil = common.coil_binary()
    b, h, t, d = args.shape
    print(f"attention backward B={b} H={h} T={t} D={d} on {args.device}; reference: SDPA's "
          f"gradients in float64 on {args.device}")
    cases = []
    with common.workdir(args.keep, "coil-attention-backward-") as work:
        for dtype in args.dtypes.split(","):
            for causal in (True, False):
                cases.append(check_case(torch, coil, args, work, dtype, causal))
                report(cases[-1])
    summary = common.attention_summary(cases, args.dtypes.split(","), args.shape, args.device)
    common.finish(CHECK, "pass" if all(c["ok"] for c in cases) else "fail", summary, args.json,
                  {"cases": cases, "coil_version": common.coil_version(coil),
                   "env": common.environment(torch, args.device)})


def main() -> None:
    args = parse_args()
    common.guarded(CHECK, args.json, lambda: body(args))


if __name__ == "__main__":
    main()
