# Runs pool.coil on the inputs in pool_expected.npz, compiled and with the interpreter, and
# compares every output with PyTorch's (written by pool_gen.py); prints one line that
# FileCheck matches, or the first difference and exits 1.
import os, sys
import numpy as np

import coil_run

coil, model, out = sys.argv[1], sys.argv[2], sys.argv[3]
data = np.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "pool_expected.npz"))
want = {k[5:]: data[k] for k in data.files if k.startswith("want.")}
inputs = {k: data[k] for k in ("x1", "x2", "x3")}
for how, extra in (("compiled", []), ("interpreted", ["--interp"])):
    d = os.path.join(out, how)
    coil_run.run(coil, model, d, inputs, extra)
    coil_run.check(d, want, close=True, label=how + " ")
print("%d outputs equal PyTorch's, compiled and interpreted" % len(want))
