# pool_gen.py — writes pool_expected.npz, pool.coil's inputs and PyTorch's outputs for them
# (F.max_pool*, F.avg_pool*, adaptive pooling to 1), so the test needs no PyTorch. Run from
# the repository root after changing a case here and in pool.coil:
#     bench/.venv/bin/python tests/lit/frontend/Inputs/pool_gen.py
import os

import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.RandomState(5)
inputs = {"x1": rng.randn(2, 3, 11), "x2": rng.randn(2, 3, 9, 8), "x3": rng.randn(1, 2, 5, 6, 7)}
inputs = {k: v.astype(np.float32) for k, v in inputs.items()}
x1, x2, x3 = (torch.tensor(inputs[k], dtype=torch.float64) for k in ("x1", "x2", "x3"))
want = {
    "m1": F.max_pool2d(x2, 3, stride=2, padding=1),
    "m2": F.max_pool2d(x2, (3, 2), stride=(2, 3), padding=(1, 0), dilation=(2, 1), ceil_mode=True),
    "m3": F.max_pool2d(x2, 2),
    "m4": F.max_pool2d(x2, 3, stride=2, ceil_mode=True),
    "a1": F.avg_pool2d(x2, 3, stride=2, padding=1),
    "a2": F.avg_pool2d(x2, 3, stride=2, padding=1, count_include_pad=False),
    "a3": F.avg_pool2d(x2, (3, 2), stride=2, padding=1, ceil_mode=True),
    "a4": F.avg_pool2d(x2, (3, 2), stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    "m1d": F.max_pool1d(x1, 3, stride=2, padding=1, ceil_mode=True),
    "m1e": F.max_pool1d(x1, 2, stride=2, padding=1, ceil_mode=True),  # a last window would start in the end padding: dropped
    "a1d": F.avg_pool1d(x1, 4, stride=3, padding=2, ceil_mode=True, count_include_pad=False),
    "a1e": F.avg_pool1d(x1, 4, stride=3, padding=2, ceil_mode=True),
    "m3d": F.max_pool3d(x3, (2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0), dilation=(1, 1, 2)),
    "a3d": F.avg_pool3d(x3, 2, stride=2, ceil_mode=True),
    "ga": F.adaptive_avg_pool2d(x2, 1),
    "gm": F.adaptive_max_pool3d(x3, 1),
    "g1": F.adaptive_avg_pool1d(x1, 1),
}
out = {k: v.numpy().astype(np.float32) for k, v in want.items()}
for k, v in out.items():
    print(k, "f32[%s]" % ", ".join(map(str, v.shape)))
np.savez(os.path.join(os.path.dirname(os.path.abspath(__file__)), "pool_expected.npz"),
         **inputs, **{"want." + k: v for k, v in out.items()})
