#!/usr/bin/env python3
"""bench/project_scaling.py: data-parallel scaling projected to 2, 4, 8 and 64 GPUs from a
training step's compute time on one GPU and NCCL's bus-bandwidth model of a ring
all-reduce (NCCL's PERFORMANCE.md: busbw = algbw * 2(n-1)/n, so summing B bytes over n
ranks takes B * 2(n-1)/n / busbw).

The compute time is measured (--train-json: bench/train.sh's JSON from a GPU, as the GPU
kit writes it) or given (--step-ms, say coil plan's roofline, which is then a bound and
is said to be). The model's parameter count Ψ comes from `coil plan --world 2`.

  bench/project_scaling.py --model gpt2 --dim B=8 --dim T=1024 --precision bf16 \\
      --train-json bench/results/train-gpt2-b8-s1024-cuda-bf16-h100.json [--out FILE.md]

Each projection is printed twice: the gradients reduced after the backward (no overlap),
and in buckets during it (coil's DDP), where the backward (about 2/3 of a step's FLOPs)
hides up to --overlap of its time. Bandwidths are assumptions, printed with the table:
--intra GB/s between the GPUs of a node (NVLink), --inter GB/s per GPU across nodes.
"""
import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = {"gpt2": "examples/gpt2.coil", "mlp": "examples/mlp.coil"}


def parameter_count(coil, model, dims, precision):
    """Ψ from coil plan's ZeRO lines (they print it exactly)."""
    cmd = [coil, "plan", MODELS.get(model, model), "--loss", "cross_entropy",
           "--world", "2", "--precision", precision or "f32", "--peak", "1", "--bandwidth", "1"]
    for d in dims:
        cmd += ["--dim", d]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return int(re.search(r"Ψ = (\d+) parameters", out).group(1)), " ".join(cmd[1:])


def step_ms(args):
    """The one-GPU step time and where it came from."""
    if args.train_json:
        data = json.loads(Path(args.train_json).read_text())
        ms = data["engines"]["coil"]["step_ms"]
        if ms is None:
            sys.exit(f"{args.train_json}: coil's step was not measured")
        return ms, f"measured: coil's median step in {args.train_json} ({data['meta'].get('machine', '?')})"
    if args.step_ms is None:
        sys.exit("give the step time: --train-json FILE (measured) or --step-ms MS")
    return args.step_ms, args.step_source or "given with --step-ms"


def projection(compute_ms, grad_bytes, n, busbw_gbs, overlap):
    comm_ms = grad_bytes * 2 * (n - 1) / n / (busbw_gbs * 1e9) * 1e3
    hidden = min(comm_ms, overlap * compute_ms * 2 / 3)  # the backward's share of the step
    serial = compute_ms / (compute_ms + comm_ms)
    overlapped = compute_ms / (compute_ms + comm_ms - hidden)
    return comm_ms, serial, overlapped


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--coil", default=str(ROOT / "build" / "coil"))
    p.add_argument("--model", default="gpt2", help="gpt2, mlp or a model file")
    p.add_argument("--dim", action="append", default=[], help="NAME=N, as coil plan takes")
    p.add_argument("--precision", default="bf16")
    p.add_argument("--train-json", help="bench/train.sh's JSON of a one-GPU run")
    p.add_argument("--step-ms", type=float, help="the one-GPU step time, when not measured")
    p.add_argument("--step-source", help="where --step-ms came from, for the table")
    p.add_argument("--reduce-bytes", type=int, default=4,
                   help="bytes a gradient element takes on the wire: 4 (f32, coil's default), "
                        "2 (--reduce-dtype bf16)")
    p.add_argument("--intra", type=float, default=360.0, help="NVLink busbw in a node, GB/s")
    p.add_argument("--inter", type=float, default=45.0, help="busbw across nodes, GB/s a GPU")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--overlap", type=float, default=1.0,
                   help="the part of the backward's time the sums may hide under (0..1)")
    p.add_argument("--out", help="also write the table here")
    args = p.parse_args()

    compute_ms, source = step_ms(args)
    psi, plan_cmd = parameter_count(args.coil, args.model, args.dim, args.precision)
    grad_bytes = psi * args.reduce_bytes
    lines = [
        f"## {args.model} ({' '.join(args.dim)}, {args.precision}): data-parallel scaling projected",
        "",
        f"One GPU's step: {compute_ms:.2f} ms ({source}). Ψ = {psi} parameters (`coil {plan_cmd}`), "
        f"{grad_bytes / 1e6:.1f} MB of gradients a step at {args.reduce_bytes} bytes each. "
        f"Ring all-reduce busbw: {args.intra:g} GB/s within a node of {args.gpus_per_node}, "
        f"{args.inter:g} GB/s a GPU across nodes (assumed, not measured).",
        "",
        "| GPUs | busbw GB/s | all-reduce ms | efficiency, reduced after the backward | "
        "efficiency, overlapped with it | seed's bar |",
        "|---|---|---|---|---|---|",
    ]
    bars = {2: 0.85, 4: 0.80, 8: 0.75}
    for n in (2, 4, 8, 64):
        bw = args.intra if n <= args.gpus_per_node else args.inter
        comm, serial, over = projection(compute_ms, grad_bytes, n, bw, args.overlap)
        bar = f"{bars[n]:.2f}" if n in bars else "—"
        lines.append(f"| {n} | {bw:g} | {comm:.2f} | {serial:.3f} | {over:.3f} | {bar} |")
    lines += ["", f"Command: `{shlex.join(sys.argv)}`", ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
