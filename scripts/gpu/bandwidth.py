#!/usr/bin/env python3
"""bandwidth.py — a fused memory-bound coil kernel's bandwidth against a device copy.

What it checks: the model y = gelu(x * 1.5 + 0.25) on a float32 vector x of N elements
(written by this script; coil fuses it into one kernel that reads x once and writes y
once: 8N bytes), first for correctness at a small size (`coil run` against PyTorch's
float64 gelu of the same input: max error relative to max |y| <= 1e-5), then for speed:

  * coil: the kernel's own time per run from `coil bench MODEL --device cuda --profile`
    (CUDA events around each step; two runs differenced so first-run costs cancel: see
    common.coil_step_times), GB/s = 8N bytes / time;
  * the copy: PyTorch's dst.copy_(src) of N float32 (also 8N bytes read and written),
    timed with CUDA events (warm-up, then the median of --reps);
  * coil's GB/s as a fraction of the copy's.

Exit 0 when the correctness check passes and both were timed (the fraction is reported,
not judged). On the CPU (--device cpu) the same at a small N, timed with coil's CPU
profile and time.perf_counter for the copy: it proves the script, not the machine.

Time: on an H100 at N = 64M (256 MiB per tensor) about 20 s (coil bench copies x in
and y out on every run through the host). On a 2-core CPU at N = 1M: about 5 s.

Run (repository root; coil from $COIL, default build/coil):
    python3 scripts/gpu/bandwidth.py --json bandwidth.json
    COIL=build-py/coil bench/.venv/bin/python scripts/gpu/bandwidth.py --device cpu
Ends with `RESULT bandwidth pass|fail|skipped|error coil_gbps=... copy_gbps=...
fraction_of_copy=...`; exit 0 on pass (or skipped: no GPU), 1 otherwise.
"""

from __future__ import annotations

import argparse
import statistics
import time

import common
from common import CheckError

CHECK = "bandwidth"
A, B = 1.5, 0.25
ELEMENTS = {"cuda": 64 << 20, "cpu": 1 << 20}
TOL = 1e-5


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_common_args(parser)
    parser.add_argument("--elements", type=int,
                        help="N (default 64M on a GPU, 1M on the CPU)")
    parser.add_argument("--check-elements", type=int, default=1 << 20,
                        help="N of the correctness run (default 1M, at most --elements)")
    parser.add_argument("--reps", type=int, default=50, help="the copy's timed runs")
    args = parser.parse_args()
    args.elements = args.elements or ELEMENTS[args.device]
    args.check_elements = min(args.check_elements, args.elements)
    return args


def write_model(path, n: int) -> None:
    ty = f"f32[{n}]"
    path.write_text(
        "// written by scripts/gpu/bandwidth.py: y = gelu(x * a + b), one fused kernel\n"
        f"graph @bandwidth(%x: {ty}) -> (y: {ty}) {{\n"
        f"  %a = full {{value={A}}} : f32[]\n"
        f"  %b = full {{value={B}}} : f32[]\n"
        f"  %m = mul %x, %a : {ty}\n"
        f"  %s = add %m, %b : {ty}\n"
        f"  %y = gelu %s : {ty}\n"
        "  return %y\n}\n")


def check_values(torch, coil, args, work) -> float:
    """coil run at --check-elements against float64 gelu(x * a + b): the relative error."""
    n = args.check_elements
    model = work / f"check-{n}.cir"
    write_model(model, n)
    x = torch.randn(n, generator=torch.Generator().manual_seed(0))
    common.save_npy(work / "x.npy", x)
    common.run_coil(coil, ["run", model, "--device", args.device,
                           "--input", f"x={work / 'x.npy'}", "--out", work / "out"])
    got = common.load_npy(work / "out" / "y.npy").double()
    ref = torch.nn.functional.gelu(x.double() * A + B)
    return float((got - ref).abs().max() / ref.abs().max())


def time_coil(coil, args, work) -> dict:
    model = work / f"bench-{args.elements}.cir"
    write_model(model, args.elements)
    prof = common.coil_step_times(coil, [model, "--device", args.device])
    names = sorted({s["name"] for s in prof["steps"].values()})
    return {"coil_ms": prof["total_ms"], "coil_steps": len(prof["steps"]),
            "coil_kernels": names, "coil_latency_ms": prof["latency_ms"]}


def time_copy(torch, args) -> float:
    src = torch.randn(args.elements, device=args.device)
    dst = torch.empty_like(src)
    if args.device == "cuda":
        return common.cuda_median_ms(torch, lambda: dst.copy_(src), reps=args.reps)
    times = []
    for i in range(args.reps + 5):
        start = time.perf_counter()
        dst.copy_(src)
        if i >= 5:
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def body(args) -> None:
    torch = common.import_torch()
    if (why := common.gpu_missing(torch, args.device)):
        common.skip(CHECK, why, args.json)
    coil = common.coil_binary()
    if args.elements < 1:
        raise CheckError("--elements must be at least 1")
    with common.workdir(args.keep, "coil-bandwidth-") as work:
        err = check_values(torch, coil, args, work)
        print(f"gelu(x*{A}+{B}) at N={args.check_elements}: max rel err {err:.2e} "
              f"(tol {TOL:g})", flush=True)
        coil_t = time_coil(coil, args, work)
    copy_ms = time_copy(torch, args)

    nbytes = 8 * args.elements  # 4 read + 4 written per element, for both
    coil_gbps = nbytes / coil_t["coil_ms"] * 1e-6
    copy_gbps = nbytes / copy_ms * 1e-6
    print(f"N={args.elements} float32 on {args.device}, "
          f"{nbytes / 2**20:.0f} MiB moved per run")
    print(f"coil kernel ({', '.join(coil_t['coil_kernels'])}): {coil_t['coil_ms']:.4f} ms, "
          f"{coil_gbps:.1f} GB/s (whole run with copies: {coil_t['coil_latency_ms']} ms)")
    print(f"torch copy_: {copy_ms:.4f} ms, {copy_gbps:.1f} GB/s; coil at "
          f"{coil_gbps / copy_gbps:.1%} of the copy")
    if coil_t["coil_steps"] != 1:
        print(f"note: coil ran {coil_t['coil_steps']} steps, not one fused kernel; their "
              "total time is used")
    ok = err <= TOL
    if not ok:
        print(f"FAIL bandwidth: max rel err {err:.2e} > {TOL:g}")
    common.finish(CHECK, "pass" if ok else "fail", {
        "coil_gbps": coil_gbps, "copy_gbps": copy_gbps,
        "fraction_of_copy": coil_gbps / copy_gbps, "max_rel_err": err,
        "elements": args.elements, "device": args.device,
    }, args.json, {**coil_t, "copy_ms": copy_ms, "bytes_per_run": nbytes,
                   "coil_version": common.coil_version(coil),
                   "env": common.environment(torch, args.device)})


def main() -> None:
    args = parse_args()
    common.guarded(CHECK, args.json, lambda: body(args))


if __name__ == "__main__":
    main()
