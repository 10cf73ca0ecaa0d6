# Runs index.coil with coil run on known inputs and compares each output with numpy's
# indexing of the same inputs; prints one line that FileCheck matches, or exits 1.
import os, subprocess, sys
import numpy as np

coil, model, out = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(out, exist_ok=True)
x = np.arange(48, dtype=np.float32).reshape(2, 6, 4)
s = np.arange(18, dtype=np.float32).reshape(3, 6) * 0.5
np.save(os.path.join(out, "x.npy"), x)
np.save(os.path.join(out, "s.npy"), s)
subprocess.run([coil, "run", model, "--input", "x=" + os.path.join(out, "x.npy"),
                "--input", "s=" + os.path.join(out, "s.npy"), "--out", out], check=True,
               stdout=subprocess.DEVNULL)
want = {"a": x[:, 0], "b": x[..., :2], "c": x[1:3], "d": x[:, ::2], "e": x[-1, -2],
        "f": x[:, -4:-1:2], "g": s[:, 1:4]}
for name, w in want.items():
    got = np.load(os.path.join(out, name + ".npy"))
    if got.shape != w.shape or not np.array_equal(got, w):
        print("output %s: got %s %s, want %s %s" % (name, got.shape, got.ravel()[:8], w.shape, w.ravel()[:8]))
        sys.exit(1)
print("all %d outputs equal numpy's indexing" % len(want))
