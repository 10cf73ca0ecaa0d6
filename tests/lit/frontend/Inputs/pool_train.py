# Trains a model (pool-train.coil, resize-train.coil) with coil train on 256 images of noise
# with a bright spot in one quadrant (the class), and prints its first and last loss when
# the last is under half the first; else says so and exits 1.
import json, os, subprocess, sys
import numpy as np

coil, model, out = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(out, exist_ok=True)
rng = np.random.RandomState(0)
n = 256
x = rng.randn(n, 1, 8, 8).astype(np.float32) * 0.3
targets = rng.randint(0, 4, n)
for i, q in enumerate(targets):
    x[i, 0, (q // 2) * 4 + rng.randint(0, 3), (q % 2) * 4 + rng.randint(0, 3)] += 3
np.save(os.path.join(out, "x.npy"), x)
np.save(os.path.join(out, "targets.npy"), targets.astype(np.int64))
run = subprocess.run([coil, "train", model, "--loss", "cross_entropy", "--input",
                      "x=" + os.path.join(out, "x.npy"), "--input",
                      "targets=" + os.path.join(out, "targets.npy"), "--dim", "B=32", "--steps", "40",
                      "--lr", "3e-3", "--log-every", "40", "--json"],
                     check=True, capture_output=True, text=True)
summary = json.loads(run.stdout.strip().splitlines()[-1])
first, last = summary["first_loss"], summary["last_loss"]
if not last < first / 2:
    print("the loss went from %.4f to %.4f in %d steps" % (first, last, summary["steps"]))
    sys.exit(1)
print("the loss fell from %.4f to %.4f in %d steps" % (first, last, summary["steps"]))
