#!/usr/bin/env python3
"""Summarize one bench/run.sh run: bench/results/NAME.json and NAME.md.

run.sh leaves, in one directory, for each round r: coil-r<r>.json (the stdout of
`coil bench --json`) or coil-r<r>.err (why coil was not measured), and peers-r<r>.jsonl
(peers.py's lines). For each engine this takes the round with the median latency (each
round's latency being the median of its timed runs), and gives coil's throughput divided
by each peer's. A number that was not
measured is written as such, never estimated.

Usage: report.py RAW_DIR OUT_BASE --meta KEY=VALUE...   (run.sh calls it)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from peers import ENGINES  # engine key on peers.py's command line -> its name

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
    for key in ("batch", "threads"):
        if result[key] != want[key]:
            return {"engine": "coil",
                    "error": f"it ran with {key} {result[key]}, not {want[key]}"}
    result["engine"] = "coil"  # whatever engine name it gives, its column is coil's
    return result


def read_peer_round(raw: Path, r: int) -> list[dict]:
    path = raw / f"peers-r{r}.jsonl"
    if not path.exists():
        return []
    results = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("{"):
            result = json.loads(line)
            # run.sh writes a line by the engine's key when peers.py died without one
            result["engine"] = ENGINES.get(result["engine"], result["engine"])
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
            latency = statistics.median_high(res["median_ms"] for res in measured)
            middle = next(res for res in measured if res["median_ms"] == latency)
            for field in ("median_ms", "samples_per_s", "gflops", "peak_fraction",
                          "peak_memory_bytes"):
                entry[field] = middle.get(field)
            entry["compile_s"] = median_or_none([res.get("compile_s") for res in measured])
            entry["round_median_ms"] = [res["median_ms"] for res in measured]
        summary[engine] = entry
    return summary


def fmt(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


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
            why = "; ".join(entry.get("errors", ["no result"]))
            why = " ".join(why.split()).replace("|", "\\|")  # one table cell
            lines.append(f"| {engine} | not measured: {why} | | | | | | | |")
            continue
        if engine == "coil":
            speedup = "1"
        elif coil["rounds_measured"]:
            speedup = f"{coil['samples_per_s'] / entry['samples_per_s']:.2f}"
        else:
            speedup = "coil not measured"
        mem = entry["peak_memory_bytes"]
        per_round = ", ".join(f"{ms:.2f}" for ms in entry["round_median_ms"])
        failed = f" ({entry['rounds_failed']} failed)" if entry["rounds_failed"] else ""
        lines.append(
            f"| {engine} | {entry['median_ms']:.2f} | {entry['samples_per_s']:.0f} "
            f"| {fmt(entry['gflops'], '.1f')} | {fmt(entry['peak_fraction'], '.2f')} "
            f"| {fmt(entry['compile_s'], '.2f')} | {fmt(mem and mem / 2**20, '.0f')} "
            f"| {speedup} | {per_round}{failed} |")
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
    meta = dict(item.split("=", 1) for item in args.meta)
    for key in ("batch", "threads", "rounds", "runs", "warmup", "cpus", "seq"):
        if key in meta:
            meta[key] = int(meta[key])

    rounds = []
    for r in range(1, meta["rounds"] + 1):
        rounds.append([read_coil_round(args.raw, r, meta), *read_peer_round(args.raw, r)])

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
    versions = next((res["versions"] for res in peer_results
                     if res.get("engine") == "onnxruntime" and "versions" in res),
                    next((res["versions"] for res in peer_results if "versions" in res), {}))
    meta["peer_versions"] = ", ".join(f"{k} {v}" for k, v in versions.items()) or "—"

    args.out.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = args.out.with_suffix(".json"), args.out.with_suffix(".md")
    json_path.write_text(json.dumps({"meta": meta, "flops": flops, "summary": summary,
                                     "rounds": rounds}, indent=2) + "\n")
    write_markdown(md_path, meta, summary, flops)
    print(md_path.read_text())
    print(f"report.py: wrote {md_path} and {json_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
