# Runs index.coil (or index-symbolic.coil) with coil run on known inputs and compares each output with numpy's
# indexing of the same inputs; prints one line that FileCheck matches, or exits 1.
import os, sys
import numpy as np

import coil_run

coil, model, out = sys.argv[1], sys.argv[2], sys.argv[3]
if os.path.basename(model) == "index-symbolic.coil":  # s: f32[B, T, 4] at B=2, T=5
    s = np.arange(40, dtype=np.float32).reshape(2, 5, 4)
    inputs = {"s": s}
    want = {"a": s[:, -1], "b": s[:, :2], "c": s[:, -3::2], "d": s[:, 1], "e": s[:, -3:-1],
            "f": s[:, 1:4:2]}
else:
    x = np.arange(48, dtype=np.float32).reshape(2, 6, 4)
    s = np.arange(18, dtype=np.float32).reshape(3, 6) * 0.5
    inputs = {"x": x, "s": s}
    want = {"a": x[:, 0], "b": x[..., :2], "c": x[1:3], "d": x[:, ::2], "e": x[-1, -2],
            "f": x[:, -4:-1:2], "g": s[:, 1:4]}
coil_run.run(coil, model, out, inputs)
coil_run.check(out, want)
print("all %d outputs equal numpy's indexing" % len(want))
