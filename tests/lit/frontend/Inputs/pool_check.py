# Runs a model (pool.coil, norm.coil, resize.coil) on the inputs in its .npz
# (pool_expected.npz unless a fourth argument names another), compiled and with the
# interpreter, and compares every output with PyTorch's (written by pool_gen.py,
# norm_gen.py, resize_gen.py); prints one line that FileCheck matches, or the first
# difference and exits 1.
import os, sys
import numpy as np

import coil_run

coil, model, out = sys.argv[1], sys.argv[2], sys.argv[3]
npz = sys.argv[4] if len(sys.argv) > 4 else "pool_expected.npz"
data = np.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), npz))
want = {k[5:]: data[k] for k in data.files if k.startswith("want.")}
inputs = {k: data[k] for k in data.files if not k.startswith("want.")}
for how, extra in (("compiled", []), ("interpreted", ["--interp"])):
    d = os.path.join(out, how)
    coil_run.run(coil, model, d, inputs, extra)
    coil_run.check(d, want, close=True, label=how + " ")
print("%d outputs equal PyTorch's, compiled and interpreted" % len(want))
