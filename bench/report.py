#!/usr/bin/env python3
"""Summarize one bench/run.sh run: bench/results/NAME.json and NAME.md.

run.sh leaves, in one directory, for each round r: coil-r<r>.json (the stdout of
`coil bench --json`) or coil-r<r>.err (why coil was not measured), and peers-r<r>.jsonl
(peers.py's lines). For each engine this takes the round with the median latency (each
round's latency being the median of its timed runs), and gives coil's throughput divided
by each peer's. A number that was not
measured is written as such, never estimated.

On a GPU (--meta device=cuda) the peers' primary figures are their "with copies" ones (the
input copied in and the output out each run, as in coil's GPU times), and their
device-resident figures get columns of their own, with coil's speed-up over those too.

Usage: report.py RAW_DIR OUT_BASE --meta KEY=VALUE...   (run.sh calls it)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from peers import engine_names  # engine key on peers.py's command line -> its name

COIL_FIELDS = ["model", "batch", "threads", "compile_s", "median_ms", "samples_per_s",
               "gflops", "peak_fraction", "peak_memory_bytes", "engine"]


def read_coil_round(raw: Path, r: int, want: dict) -> dict:
    """Round r's coil result, or {"error": why} when it was not measured."""
    out, err = raw / f"coil-r{r}.json", raw / f"coil-r{r}.err"
    if err.exists():
        return {"engine": "coil", "error": err.read_text().strip() or "failed"}
    try:
        result = json.loads(out.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        return {"engine": "coil", "error": f"its output is not one JSON object ({exc})"}
    if not isinstance(result, dict):
        return {"engine": "coil", "error": "its output is not a JSON object"}
    missing = [f for f in COIL_FIELDS if f not in result]
    if missing:
        return {"engine": "coil", "error": f"its JSON lacks {', '.join(missing)}"}
    for key in ("batch", "threads"):  # on a GPU there is no thread count to check
        if key in want and result[key] != want[key]:
            return {"engine": "coil",
                    "error": f"it ran with {key} {result[key]}, not {want[key]}"}
    if want["device"] == "cuda" and result.get("device", "cpu") == "cpu":
        return {"engine": "coil", "error": "it ran on the CPU, not the GPU"}
    result["engine"] = "coil"  # whatever engine name it gives, its column is coil's
    return result


def read_peer_round(raw: Path, r: int, device: str) -> list[dict]:
    path = raw / f"peers-r{r}.jsonl"
    if not path.exists():
        return []
    names = engine_names(device)
    results = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("{"):
            result = json.loads(line)
            # run.sh writes a line by the engine's key when peers.py died without one
            result["engine"] = names.get(result["engine"], result["engine"])
            results.append(result)
    return results


def median_or_none(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(rounds: list[list[dict]], engines: list[str]) -> dict[str, dict]:
    """Per engine: the figures of its median round, and the errors of its failed ones.

    The median round is the one with the median latency (of an even count, the slower of
    the middle two), so that latency, throughput and GFLOP/s all come from one real
    round; compile time, which varies apart from them, is the median over all rounds.
    """
    summary = {}
    for engine in engines:
        measured = [res for rnd in rounds for res in rnd
                    if res["engine"] == engine and "error" not in res]
        errors = [res["error"] for rnd in rounds for res in rnd
                  if res["engine"] == engine and "error" in res]
        entry: dict = {"rounds_measured": len(measured), "rounds_failed": len(errors)}
        if errors:
            entry["errors"] = sorted(set(errors))
        if measured:
            middle = median_round(measured)
            for field in ("median_ms", "samples_per_s", "gflops", "peak_fraction",
                          "peak_memory_bytes"):
                entry[field] = middle.get(field)
            entry["compile_s"] = median_or_none([res.get("compile_s") for res in measured])
            entry["round_median_ms"] = [res["median_ms"] for res in measured]
            entry.update(gpu_figures(measured, middle))
        summary[engine] = entry
    return summary


def median_round(results: list[dict]) -> dict:
    """The result with the median latency (of an even count, the slower middle one)."""
    latency = statistics.median_high(res["median_ms"] for res in results)
    return next(res for res in results if res["median_ms"] == latency)


def gpu_figures(measured: list[dict], middle: dict) -> dict:
    """A GPU run's extra figures: GPU memory (of the median round), and the peers'
    device-resident figures (of their own median round)."""
    out = {}
    if "gpu_memory_bytes" in middle:
        out["gpu_memory_bytes"] = middle["gpu_memory_bytes"]
        out["gpu_memory_how"] = middle.get("gpu_memory_how")
    elif middle.get("device", "cpu") != "cpu":  # coil's: its planned device buffers
        out["gpu_memory_bytes"] = middle.get("planned_bytes")
        out["gpu_memory_how"] = "coil's planned buffers (arena, parameters, inputs, outputs)"
    resident = [res["device_resident"] for res in measured if "device_resident" in res]
    if resident:
        out["device_resident"] = {**median_round(resident),
                                  "round_median_ms": [res["median_ms"] for res in resident]}
    if "timed" in middle:
        out["timed"] = middle["timed"]
    if "allow_tf32" in middle:  # the peers' (peers.py records it per engine)
        out["allow_tf32"] = middle["allow_tf32"]
    return out


def fmt(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def speedup(coil: dict, figures: dict | None) -> str:
    """coil's samples/s over an engine's (figures: its summary or device_resident)."""
    if not figures:
        return "—"
    if not coil["rounds_measured"]:
        return "coil not measured"
    return f"{coil['samples_per_s'] / figures['samples_per_s']:.2f}"


def not_measured_row(engine: str, entry: dict, columns: int) -> str:
    why = "; ".join(entry.get("errors", ["no result"]))
    why = " ".join(why.split()).replace("|", "\\|")  # one table cell
    return f"| {engine} | not measured: {why} |" + " |" * (columns - 2)


def write_markdown(path: Path, meta: dict, summary: dict, flops: int | None) -> None:
    coil = summary["coil"]
    lines = [
        f"# {meta['model']}, batch {meta['batch']}"
        + (f", sequence {meta['seq']}" if "seq" in meta else "")
        + f", {meta['threads']} threads",
        "",
        f"- date: {meta['date']}",
        f"- machine: {meta['cpu']}, {meta['cpus']} CPUs online (host {meta['host']})",
        f"- threads: {meta['threads']} for every engine",
        *([dtype_line(meta)] if meta["dtype"] != "f32" else []),  # f32: as it always was
        f"- rounds: {meta['rounds']}, alternating {', '.join(summary)} in each; peers: "
        f"{meta['warmup']} warm-up runs, then the median of {meta['runs']} timed runs",
        f"- FLOPs per call (`coil check`): {fmt(flops, ',')}",
        f"- coil: {meta['coil_version']}; peers: {meta['peer_versions']}",
        f"- command: `{meta['command']}`",
        "",
        "Each engine's figures are those of its median round (by latency; compile time is "
        "the median over the rounds). Speed-up is coil's samples/s over the "
        "engine's (above 1: coil is faster). Peak memory is the peak resident set of the "
        "engine's process. Peak fraction is against the peak `coil bench` measured.",
        "",
        "| engine | latency ms | samples/s | GFLOP/s | peak fraction | compile s "
        "| peak memory MiB | coil speed-up | latency ms per round |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for engine, entry in summary.items():
        if not entry["rounds_measured"]:
            lines.append(not_measured_row(engine, entry, 9))
            continue
        mem = entry["peak_memory_bytes"]
        lines.append(
            f"| {engine} | {entry['median_ms']:.2f} | {entry['samples_per_s']:.0f} "
            f"| {fmt(entry['gflops'], '.1f')} | {fmt(entry['peak_fraction'], '.2f')} "
            f"| {fmt(entry['compile_s'], '.2f')} | {fmt(mem and mem / 2**20, '.0f')} "
            f"| {'1' if engine == 'coil' else speedup(coil, entry)} | {per_round(entry)} |")
    path.write_text("\n".join(lines) + "\n")


def per_round(entry: dict, spec: str = ".2f") -> str:
    """The latency of every round, and how many failed."""
    text = ", ".join(format(ms, spec) for ms in entry["round_median_ms"])
    return text + (f" ({entry['rounds_failed']} failed)" if entry["rounds_failed"] else "")


def mib(value) -> str:
    return fmt(value and value / 2**20, ".0f")


def dtype_line(meta: dict) -> str:
    if meta["dtype"] == "f32":
        return "- dtype: float32 for every engine" + (
            ", GEMMs in TF32 (--allow-tf32)" if meta.get("allow_tf32") == "yes" else "")
    dtype = {"bf16": "bfloat16"}.get(meta["dtype"], meta["dtype"])
    return (f"- dtype: {dtype} for every engine: the peers as `model.to(torch.{dtype})`, "
            f"coil with `--dtype {meta['dtype']}` (the whole model retyped; kernels compute in "
            f"float32 and store {dtype}, as PyTorch's do)")


def tf32_line(meta: dict, summary: dict) -> str:
    """Whether each engine let float32 GEMMs use TF32: coil's from run.sh's --allow-tf32,
    the peers' as peers.py recorded it."""
    def state(engine: str, entry: dict) -> str:
        value = (meta.get("allow_tf32") == "yes" if engine == "coil"
                 else entry.get("allow_tf32"))
        return "not recorded" if value is None else "on" if value else "off"
    return "- TF32 for float32 GEMMs: " + ", ".join(
        f"{engine} {state(engine, entry)}" for engine, entry in summary.items()
        if entry["rounds_measured"])


def write_markdown_gpu(path: Path, meta: dict, summary: dict, flops: int | None) -> None:
    coil = summary["coil"]
    lines = [
        f"# {meta['model']}, batch {meta['batch']}"
        + (f", sequence {meta['seq']}" if "seq" in meta else "")
        + f", on {meta['gpu']}",
        "",
        f"- date: {meta['date']}",
        f"- machine: {meta['gpu']} (driver {meta.get('gpu_driver') or 'unknown'}); "
        f"host {meta['cpu']}, {meta['cpus']} CPUs online (host {meta['host']})",
        dtype_line(meta),
        tf32_line(meta, summary),
        f"- coil: `{meta['coil_flags']}`; rounds: {meta['rounds']}, alternating "
        f"{', '.join(summary)} in each; peers: {meta['warmup']} warm-up runs, then the "
        f"median of {meta['runs']} timed runs, each between two torch.cuda.synchronize()",
        f"- FLOPs per call (`coil check`): {fmt(flops, ',')}",
        f"- coil: {meta['coil_version']}; peers: {meta['peer_versions']}",
        f"- command: `{meta['command']}`",
        "",
        "coil's GPU times include copying the input to the GPU and the output back, so the "
        "peers' main figures are timed the same way, **with copies** (the input copied from "
        "a host tensor each run, the output copied back with `.cpu()`), and coil's speed-up "
        "(coil's samples/s over the engine's; above 1: coil is faster) is against those. "
        "The last columns time the peers **device-resident** (input already on the GPU, "
        "output left there), as a caller that keeps its tensors on the GPU would see "
        "them, with coil's speed-up over that. Each engine's figures are those of its "
        "median round (by latency; compile time is the median over the rounds). "
        "GPU memory: the peers' "
        "torch.cuda.max_memory_allocated() (ONNX Runtime's: the growth of the GPU's memory "
        "in use over its runs); coil's planned device buffers. Host memory is the peak "
        "resident set of the engine's process.",
        "",
        "| engine | latency ms (with copies) | samples/s | GFLOP/s | compile s "
        "| GPU memory MiB "
        "| host memory MiB | coil speed-up | device-resident latency ms "
        "| coil speed-up over device-resident | latency ms per round |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for engine, entry in summary.items():
        if not entry["rounds_measured"]:
            lines.append(not_measured_row(engine, entry, 11))
            continue
        resident = entry.get("device_resident")
        lines.append(
            f"| {engine} | {entry['median_ms']:.3f} | {entry['samples_per_s']:.0f} "
            f"| {fmt(entry['gflops'], '.1f')} | {fmt(entry['compile_s'], '.2f')} "
            f"| {mib(entry.get('gpu_memory_bytes'))} | {mib(entry['peak_memory_bytes'])} "
            f"| {'1' if engine == 'coil' else speedup(coil, entry)} "
            f"| {fmt(resident and resident['median_ms'], '.3f')} "
            f"| {speedup(coil, resident)} | {per_round(entry, '.3f')} |")
    path.write_text("\n".join(lines) + "\n")


def rounds_of(rounds: list[list[dict]], engine: str | None) -> list[dict]:
    """Every measured result of one engine (None: of all engines), over all rounds."""
    return [res for rnd in rounds for res in rnd
            if (engine is None or res["engine"] == engine) and "error" not in res]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path, help="the directory run.sh filled")
    parser.add_argument("out", type=Path, help="results path without .md/.json")
    parser.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    meta = {"device": "cpu", "dtype": "f32", **dict(item.split("=", 1) for item in args.meta)}
    for key in ("batch", "threads", "rounds", "runs", "warmup", "cpus", "seq"):
        if key in meta:
            meta[key] = int(meta[key])

    rounds = []
    for r in range(1, meta["rounds"] + 1):
        rounds.append([read_coil_round(args.raw, r, meta),
                       *read_peer_round(args.raw, r, meta["device"])])

    engines = ["coil"]
    for rnd in rounds:
        for res in rnd:
            if res["engine"] not in engines:
                engines.append(res["engine"])
    summary = summarize(rounds, engines)

    # The peers' peak fraction, against the peak coil measured (gflops / peak_fraction).
    coil_peaks = [res["gflops"] / res["peak_fraction"] for res in rounds_of(rounds, "coil")
                  if res.get("gflops") and res.get("peak_fraction")]
    peak = median_or_none(coil_peaks)
    for engine, entry in summary.items():
        if engine != "coil" and peak and entry.get("gflops"):
            entry["peak_fraction"] = entry["gflops"] / peak
    meta["peak_gflops"] = peak

    peer_results = [res for res in rounds_of(rounds, None) if res["engine"] != "coil"]
    flops = next((res["flops"] for res in peer_results if res.get("flops")), None)
    versions = {}  # every peer's, in the order they first appear: torch, python, ...
    for res in peer_results:
        for name, version in res.get("versions", {}).items():
            versions.setdefault(name, version)
    meta["peer_versions"] = ", ".join(f"{k} {v}" for k, v in versions.items()) or "—"

    args.out.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = args.out.with_suffix(".json"), args.out.with_suffix(".md")
    json_path.write_text(json.dumps({"meta": meta, "flops": flops, "summary": summary,
                                     "rounds": rounds}, indent=2) + "\n")
    if meta["device"] == "cuda":
        write_markdown_gpu(md_path, meta, summary, flops)
    else:
        write_markdown(md_path, meta, summary, flops)
    print(md_path.read_text())
    print(f"report.py: wrote {md_path} and {json_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
