# resize_gen.py — writes resize_expected.npz, resize.coil's inputs and PyTorch's outputs for
# them (F.interpolate: nearest, nearest-exact, linear, bilinear, trilinear, bicubic; both
# align_corners; up and down; sizes and non-integer scales), so the test needs no PyTorch.
# Run from the repository root after changing a case here and in resize.coil:
#     bench/.venv/bin/python tests/lit/frontend/Inputs/resize_gen.py
import os

import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.RandomState(7)
inputs = {"x1": rng.randn(2, 3, 6), "x2": rng.randn(2, 3, 5, 7), "x3": rng.randn(1, 2, 3, 4, 5)}
inputs = {k: v.astype(np.float32) for k, v in inputs.items()}
x1, x2, x3 = (torch.tensor(inputs[k], dtype=torch.float64) for k in ("x1", "x2", "x3"))


def up(x, **kw):
    return F.interpolate(x, **kw)


want = {
    "n1": up(x2, scale_factor=2, mode="nearest"),
    "n2": up(x2, size=(3, 4), mode="nearest"),
    "n3": up(x2, scale_factor=1.7, mode="nearest"),
    "n4": up(x2, scale_factor=(0.6, 1.5), mode="nearest"),
    "n1d": up(x1, size=10, mode="nearest"),
    "n3d": up(x3, scale_factor=(2, 0.5, 1.5), mode="nearest"),
    "ne": up(x2, size=(8, 5), mode="nearest-exact"),
    "b1": up(x2, scale_factor=2, mode="bilinear"),
    "b2": up(x2, scale_factor=2, mode="bilinear", align_corners=True),
    "b3": up(x2, size=(3, 4), mode="bilinear"),
    "b4": up(x2, size=(3, 4), mode="bilinear", align_corners=True),
    "b5": up(x2, scale_factor=1.7, mode="bilinear"),
    "b6": up(x2, scale_factor=0.6, mode="bilinear"),
    "b7": up(x2, scale_factor=1.7, mode="bilinear", align_corners=True),
    "b8": up(x2, size=(1, 1), mode="bilinear"),
    "l1": up(x1, scale_factor=2.5, mode="linear"),
    "l2": up(x1, size=4, mode="linear", align_corners=True),
    "t1": up(x3, scale_factor=2, mode="trilinear"),
    "t2": up(x3, size=(2, 6, 3), mode="trilinear", align_corners=True),
    "c1": up(x2, scale_factor=2, mode="bicubic"),
    "c2": up(x2, size=(3, 9), mode="bicubic", align_corners=True),
}
out = {k: v.numpy().astype(np.float32) for k, v in want.items()}
for k, v in out.items():
    print(k, "f32[%s]" % ", ".join(map(str, v.shape)))
np.savez(os.path.join(os.path.dirname(os.path.abspath(__file__)), "resize_expected.npz"),
         **inputs, **{"want." + k: v for k, v in out.items()})
