# gen_conv.py — PyTorch's conv1d/conv2d on small f32 operands, the oracle test_conv holds
# coil's interpreter to. Run: bench/.venv/bin/python tests/models/conv/gen_conv.py
# (writes case<i>_{x,w,y}.npy here; y computed in f64 from the f32 operands, stored as f32). The cases must match
# `torch_cases` in tests/unit/test_conv.c.
import os

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))

# x shape, w shape, stride, padding (begins then ends, per axis), dilation, groups
CASES = [
    ((2, 4, 7, 6), (6, 4, 3, 2), (2, 1), (1, 0, 1, 0), (1, 1), 1),
    ((1, 4, 9, 8), (6, 2, 3, 3), (1, 2), (2, 1, 2, 1), (2, 1), 2),
    ((2, 4, 8, 7), (4, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 4),
    ((3, 2, 11), (3, 2, 4), (3,), (2, 2), (2,), 1),
    ((1, 3, 6, 5), (2, 3, 2, 3), (1, 1), (0, 2, 1, 0), (1, 1), 1),
]


def main():
    rng = np.random.default_rng(18)
    for i, (xs, ws, stride, pad, dil, groups) in enumerate(CASES):
        x = rng.uniform(-2, 2, xs).astype(np.float32)
        w = rng.uniform(-1, 1, ws).astype(np.float32)
        n = len(xs) - 2
        # F.pad takes (last axis begin, end, next-to-last begin, end, ...)
        torch_pad = []
        for a in reversed(range(n)):
            torch_pad += [pad[a], pad[n + a]]
        xt = F.pad(torch.from_numpy(x).double(), torch_pad)
        conv = F.conv1d if n == 1 else F.conv2d
        y = conv(xt, torch.from_numpy(w).double(), stride=stride, dilation=dil, groups=groups)
        for name, v in (("x", x), ("w", w), ("y", y.numpy().astype(np.float32))):
            np.save(os.path.join(HERE, "case%d_%s.npy" % (i, name)), v)


if __name__ == "__main__":
    main()
