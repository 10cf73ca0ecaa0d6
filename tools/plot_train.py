#!/usr/bin/env python3
"""plot_train.py — `coil train --json` progress lines drawn as an SVG, no dependencies.

One panel per series the lines carry (loss, learning rate, gradient norm, tokens/s)
against the step. A value that was not finite (null, with a "<key>_nonfinite" sibling) is
a gap in its line and a red tick on the axis. Lines without "step" (the run's summary)
and lines that are not JSON (text mixed in) are skipped.

Usage: python3 tools/plot_train.py [RUN.jsonl | -] [-o OUT.svg]   (default: stdin, train.svg)
"""
import argparse
import json
import math
import sys
from xml.sax.saxutils import escape

PANELS = [("loss", "loss"), ("lr", "learning rate"), ("grad_norm", "gradient norm"),
          ("tokens_per_s", "tokens/s")]
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 720, 170, 80, 20, 28, 30


def read_rows(f):
    """The progress lines of f, in order; the rest skipped."""
    rows = []
    for n, line in enumerate(f, 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            print(f"plot_train: line {n}: not JSON ({err}); skipped", file=sys.stderr)
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            rows.append(row)
    return rows


def finite(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def span(lo, hi):
    """A range that is never empty: a constant series gets room around it."""
    if hi > lo:
        return lo, hi
    pad = abs(lo) * 0.1 or 1.0
    return lo - pad, hi + pad


def segments(points):
    """Runs of consecutive finite points: a null breaks the line."""
    run = []
    for p in points:
        if p[1] is None:
            if run:
                yield run
            run = []
        else:
            run.append(p)
    if run:
        yield run


def panel(key, title, rows, y0, steps):
    """The SVG of one series at vertical offset y0, or None when no row carries it."""
    pts = [(r["step"], r[key] if finite(r.get(key)) else None) for r in rows if key in r]
    vals = [v for _, v in pts if v is not None]
    bad = [s for s, v in pts if v is None]
    if not pts:
        return None
    xlo, xhi = span(*steps)
    ylo, yhi = span(min(vals), max(vals)) if vals else (0.0, 1.0)
    w, h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    sx = lambda s: LEFT + (s - xlo) / (xhi - xlo) * w
    sy = lambda v: y0 + TOP + (yhi - v) / (yhi - ylo) * h
    out = [f'<text x="{LEFT}" y="{y0 + 18}" font-weight="bold">{escape(title)}</text>',
           f'<rect x="{LEFT}" y="{y0 + TOP}" width="{w}" height="{h}" fill="none" stroke="#999"/>']
    for v in (ylo, (ylo + yhi) / 2, yhi):
        out.append(f'<text x="{LEFT - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{v:.4g}</text>')
    for s in (xlo, round((xlo + xhi) / 2), xhi):  # steps are whole numbers
        out.append(f'<text x="{sx(s):.1f}" y="{y0 + HEIGHT - 10}" text-anchor="middle">'
                   f'{s:.6g}</text>')
    for seg in segments(pts):
        xy = " ".join(f"{sx(s):.1f},{sy(v):.1f}" for s, v in seg)
        if len(seg) == 1:  # a point between two gaps
            (s, v), = seg
            out.append(f'<circle cx="{sx(s):.1f}" cy="{sy(v):.1f}" r="2" fill="#1f77b4"/>')
        else:
            out.append(f'<polyline points="{xy}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>')
    for s in bad:  # where the value was NaN or infinite
        out.append(f'<line x1="{sx(s):.1f}" x2="{sx(s):.1f}" y1="{y0 + TOP + h - 8}" '
                   f'y2="{y0 + TOP + h}" stroke="#d62728" stroke-width="2"/>')
    return "\n".join(out)


def svg(rows):
    steps = (min(r["step"] for r in rows), max(r["step"] for r in rows))
    parts = []
    for key, title in PANELS:
        p = panel(key, title, rows, len(parts) * HEIGHT, steps)
        if p:
            parts.append(p)
    height = len(parts) * HEIGHT
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'font-family="sans-serif" font-size="11">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(parts) + "\n</svg>\n")


def main():
    ap = argparse.ArgumentParser(description="draw coil train --json progress as an SVG")
    ap.add_argument("input", nargs="?", default="-", help="JSON lines file (default: stdin)")
    ap.add_argument("-o", "--output", default="train.svg", help="SVG to write (default train.svg)")
    a = ap.parse_args()
    if a.input == "-":
        rows = read_rows(sys.stdin)
    else:
        with open(a.input) as f:
            rows = read_rows(f)
    if not rows:
        print(f"plot_train: {a.input}: no progress lines (run coil train with --json)",
              file=sys.stderr)
        return 1
    with open(a.output, "w") as f:
        f.write(svg(rows))
    print(f"plot_train: {len(rows)} steps drawn into {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
