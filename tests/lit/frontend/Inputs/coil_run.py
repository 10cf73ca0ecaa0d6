# coil_run.py — what the lit tests checked against numpy or PyTorch share: run a model with
# `coil run` on given inputs, then compare its outputs with the expected arrays.
import os, subprocess, sys
import numpy as np


def run(coil, model, out, inputs, extra=()):
    """coil run MODEL with inputs {name: array} (saved beside them); outputs in out/NAME.npy."""
    os.makedirs(out, exist_ok=True)
    args = [coil, "run", model, "--out", out] + list(extra)
    for name, value in inputs.items():
        path = os.path.join(out, "input." + name + ".npy")
        np.save(path, value)
        args += ["--input", "%s=%s" % (name, path)]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)


def check(out, want, close=False, label=""):
    """Each output in out/ equal to want {name: array} (close: to f32 rounding), or the
    first that is not printed and exit 1."""
    for name, w in want.items():
        got = np.load(os.path.join(out, name + ".npy"))
        same = got.shape == w.shape and (np.allclose(got, w, rtol=1e-5, atol=1e-6) if close
                                         else np.array_equal(got, w))
        if not same:
            print("%soutput %s: got %s %s, want %s %s" % (label, name, got.shape, got.ravel()[:8],
                                                          w.shape, w.ravel()[:8]))
            sys.exit(1)
