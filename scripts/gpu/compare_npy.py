"""Compare an output coil wrote with a reference, elementwise:
|got - want| <= atol + rtol * |want| everywhere (defaults 1e-3 each: the GPU sums in
other orders than PyTorch's CPU kernels did, and the models' outputs are O(1)).

    python3 scripts/gpu/compare_npy.py GOT.npy WANT.npy [--name NAME] [--atol A] [--rtol R]

Ends with `RESULT onnx-NAME pass|fail max_abs_err=...` (scripts/gpu-check.sh greps it);
exit status 0 on pass, 1 on fail.
"""

from __future__ import annotations

import argparse

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("got")
    ap.add_argument("want")
    ap.add_argument("--name", default="output")
    ap.add_argument("--atol", type=float, default=1e-3)
    ap.add_argument("--rtol", type=float, default=1e-3)
    a = ap.parse_args()
    got, want = np.load(a.got), np.load(a.want)
    if got.shape != want.shape:
        print(f"RESULT onnx-{a.name} fail shape={got.shape} want_shape={want.shape}")
        return 1
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    ok = bool(np.all(err <= a.atol + a.rtol * np.abs(want)))
    print(f"RESULT onnx-{a.name} {'pass' if ok else 'fail'} max_abs_err={err.max():.3g} "
          f"max_abs_want={np.abs(want).max():.3g}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
