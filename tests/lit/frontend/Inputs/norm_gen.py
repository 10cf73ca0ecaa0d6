# norm_gen.py — writes norm_expected.npz, norm.coil's inputs and PyTorch's outputs for them
# (F.group_norm, F.instance_norm, F.conv_transpose1d/2d), so the test needs no PyTorch. Run
# from the repository root after changing a case here and in norm.coil:
#     bench/.venv/bin/python tests/lit/frontend/Inputs/norm_gen.py
import os

import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.RandomState(7)
shapes = {"x1": (2, 6, 7), "x2": (2, 6, 5, 4), "gw": (6,), "gb": (6,), "w1": (6, 2, 3),
          "w2": (6, 2, 3, 2), "w3": (6, 4, 3, 3), "w4": (6, 1, 2)}
inputs = {k: (rng.randn(*s) * (3 if k == "x2" else 1) + (1 if k == "x1" else 0)).astype(np.float32)
          for k, s in shapes.items()}
t = {k: torch.tensor(v, dtype=torch.float64) for k, v in inputs.items()}
x1, x2, gw, gb = t["x1"], t["x2"], t["gw"], t["gb"]
want = {
    "g1": F.group_norm(x1, 3, gw, gb),
    "g2": F.group_norm(x2, 2, gw, gb, eps=1e-3),
    "g3": F.group_norm(x2, 6),
    "i1": F.instance_norm(x1, weight=gw, bias=gb),
    "i2": F.instance_norm(x2),
    "t1": F.conv_transpose1d(x1, t["w1"], stride=2, padding=1, output_padding=1),
    "t2": F.conv_transpose2d(x2, t["w2"], stride=(2, 1), padding=(1, 0), output_padding=(1, 0),
                             groups=3, dilation=(1, 2)),
    "t3": F.conv_transpose2d(x2, t["w3"], padding=2),
    "t4": F.conv_transpose1d(x1, t["w4"], stride=3, groups=2),
}
out = {k: v.numpy().astype(np.float32) for k, v in want.items()}
for k, v in out.items():
    print(k, "f32[%s]" % ", ".join(map(str, v.shape)))
np.savez(os.path.join(os.path.dirname(os.path.abspath(__file__)), "norm_expected.npz"),
         **inputs, **{"want." + k: v for k, v in out.items()})
