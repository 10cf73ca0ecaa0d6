#!/usr/bin/env python3
"""latency.py — coil's small-batch latency with and without CUDA graphs; compile times.

What it measures, per model (examples/mlp.coil at batch 1; examples/gpt2.coil at B=1,
T=128 unless --no-gpt2), with `coil bench MODEL --device DEVICE --json` in a fresh,
empty cache directory (COIL_CACHE_DIR, so NVRTC's cubin cache starts cold):

  1. cold: the first compile (NVRTC runs for every kernel) and its latency;
  2. warm: the same command again with the same cache (the cubins are loaded);
  3. graphs: the same with --cuda-graphs (each run replayed as one CUDA graph).

It reports each median latency (coil bench's: copies in and out included), the
speed-up from graphs (warm latency / graphs latency), the cold and warm compile times
(bench's compile_s) and the files the cold compile left in the cache. On the CPU
(--device cpu) steps 1 and 2 only (no graphs; the CPU has no compile cache, so cold and
warm are alike).

Pass: every bench ran, and with --cuda-graphs coil says it replayed a graph
(cuda_graph: true). A warm compile no faster than the cold one is printed as a warning,
not a failure.

Time: on an H100 about 30 s (three benches of each model; GPT-2's 124M parameters are
drawn on the host by coil each time). On a 2-core CPU with the small GPT-2 below: 10 s.

Run (repository root; coil from $COIL, default build/coil):
    python3 scripts/gpu/latency.py --json latency.json
    COIL=build-py/coil bench/.venv/bin/python scripts/gpu/latency.py --device cpu \\
        --gpt2-set layers=2 --gpt2-set hidden=128 --gpt2-set heads=4 --gpt2-set vocab=1000
Ends with `RESULT latency pass|fail|skipped|error mlp_ms=... mlp_graphs_ms=...
mlp_compile_s=COLD/WARM gpt2_ms=... gpt2_graphs_ms=... gpt2_compile_s=COLD/WARM` (the
speed-ups from graphs are in the lines above it and the JSON); exit 0 on pass (or
skipped: no GPU), 1 otherwise.
"""

from __future__ import annotations

import argparse

import common

CHECK = "latency"
EXAMPLES = common.REPO / "examples"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_common_args(parser)
    parser.add_argument("--runs", type=int, default=100, help="timed runs (default 100)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed runs (default 10)")
    parser.add_argument("--seq", type=int, default=128, help="GPT-2's T (default 128)")
    parser.add_argument("--no-gpt2", action="store_true", help="mlp only")
    parser.add_argument("--gpt2-set", action="append", default=[], metavar="NAME=VALUE",
                        help="override examples/gpt2.coil's config (repeatable)")
    parser.add_argument("--mlp-set", action="append", default=[], metavar="NAME=VALUE",
                        help="override examples/mlp.coil's config (repeatable)")
    return parser.parse_args()


def models(args) -> list[tuple[str, list[str]]]:
    """(name, coil bench arguments) of each model to time."""
    def sets(items):
        return [a for s in items for a in ("--set", s)]
    out = [("mlp", [EXAMPLES / "mlp.coil", "--batch", "1", *sets(args.mlp_set)])]
    if not args.no_gpt2:
        out.append(("gpt2", [EXAMPLES / "gpt2.coil", "--batch", "1", "--dim", f"T={args.seq}",
                             *sets(args.gpt2_set)]))
    return out


def bench_model(coil, args, name: str, model_args: list[str], cache) -> dict:
    env = {"COIL_CACHE_DIR": str(cache)}
    base = [*(str(a) for a in model_args), "--device", args.device, "--runs", str(args.runs),
            "--warmup", str(args.warmup)]
    cold = common.coil_bench_json(coil, base, env=env)
    cached = sum(1 for p in cache.rglob("*") if p.is_file())
    warm = common.coil_bench_json(coil, base, env=env)
    out = {"cold": cold, "warm": warm, "cache_files_after_cold": cached,
           "ms": warm["median_ms"], "compile_cold_s": cold["compile_s"],
           "compile_warm_s": warm["compile_s"]}
    if args.device == "cuda":
        graphs = common.coil_bench_json(coil, [*base, "--cuda-graphs"], env=env)
        out.update(graphs=graphs, graphs_ms=graphs["median_ms"],
                   graph_speedup=warm["median_ms"] / graphs["median_ms"],
                   graph_replayed=bool(graphs.get("cuda_graph")))
    report(name, out)
    return out


def report(name: str, r: dict) -> None:
    line = (f"{name:5} latency {r['ms']:.3f} ms (min {r['warm']['min_ms']:.3f}); compile "
            f"cold {r['compile_cold_s']:.2f} s ({r['cache_files_after_cold']} files cached), "
            f"warm {r['compile_warm_s']:.2f} s")
    if "graphs_ms" in r:
        line += (f"; with CUDA graphs {r['graphs_ms']:.3f} ms: {r['graph_speedup']:.2f}x"
                 + ("" if r["graph_replayed"] else " (NOT replayed as a graph)"))
    print(line, flush=True)
    if r["compile_warm_s"] >= r["compile_cold_s"] and r["cache_files_after_cold"]:
        print(f"warning: {name}'s warm compile ({r['compile_warm_s']:.2f} s) is no faster "
              f"than its cold one ({r['compile_cold_s']:.2f} s)", flush=True)


def body(args) -> None:
    torch = common.import_torch()  # only to ask whether there is a GPU, as the others do
    if (why := common.gpu_missing(torch, args.device)):
        common.skip(CHECK, why, args.json)
    coil = common.coil_binary()
    results, summary = {}, {}
    with common.workdir(args.keep, "coil-latency-") as work:
        for name, model_args in models(args):
            cache = work / f"cache-{name}"
            cache.mkdir()
            r = results[name] = bench_model(coil, args, name, model_args, cache)
            summary[f"{name}_ms"] = r["ms"]
            if "graphs_ms" in r:
                summary[f"{name}_graphs_ms"] = r["graphs_ms"]
            summary[f"{name}_compile_s"] = f"{r['compile_cold_s']:.3g}/{r['compile_warm_s']:.3g}"
    summary["device"] = args.device
    not_replayed = [n for n, r in results.items() if r.get("graph_replayed") is False]
    if not_replayed:
        print(f"FAIL latency: --cuda-graphs did not replay a graph for {', '.join(not_replayed)}")
    common.finish(CHECK, "fail" if not_replayed else "pass", summary, args.json, {
        "models": results, "runs": args.runs, "warmup": args.warmup, "gpt2_seq": args.seq,
        "coil_version": common.coil_version(coil),
        "env": common.environment(torch, args.device)})


def main() -> None:
    args = parse_args()
    common.guarded(CHECK, args.json, lambda: body(args))


if __name__ == "__main__":
    main()
