# Runs pad.coil with coil run on known inputs and compares each output with numpy's np.pad
# (PyTorch's F.pad: pairs from the last axis back; a negative pad cuts before the padding
# reads the axis); prints one line that FileCheck matches, or exits 1.
import sys
import numpy as np

import coil_run

MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def torch_pad(a, pads, mode="constant", value=0.0):
    for i in range(len(pads) // 2):
        axis, before, after = a.ndim - 1 - i, pads[2 * i], pads[2 * i + 1]
        cut = [slice(None)] * a.ndim
        cut[axis] = slice(max(-before, 0), a.shape[axis] - max(-after, 0))
        a = a[tuple(cut)]
        widths = [(0, 0)] * a.ndim
        widths[axis] = (max(before, 0), max(after, 0))
        kw = {"constant_values": value} if mode == "constant" else {}
        a = np.pad(a, widths, mode=MODES[mode], **kw)
    return a


coil, model, out = sys.argv[1], sys.argv[2], sys.argv[3]
x = np.arange(180, dtype=np.float32).reshape(2, 3, 5, 6)
y = np.arange(8, dtype=np.float32).reshape(2, 4) * 0.5
z = np.arange(120, dtype=np.float32).reshape(1, 2, 3, 4, 5) - 60
want = {"c1": torch_pad(x, [1, 2]), "c2": torch_pad(x, [1, 2, 3, 0], value=1.5),
        "c3": torch_pad(x, [-1, 2, 0, -2, 1, 1]), "r1": torch_pad(x, [2, 3, 4, 1], "reflect"),
        "r2": torch_pad(x, [-2, 1, 1, -1], "reflect"), "e1": torch_pad(x, [3, 0, 2, 7], "replicate"),
        "e2": torch_pad(y, [-1, 3], "replicate"), "w1": torch_pad(x, [6, 2, 1, 5], "circular"),
        "z1": torch_pad(z, [1, 1, 2, 0, 0, 2], "reflect")}
coil_run.run(coil, model, out, {"x": x, "y": y, "z": z})
coil_run.check(out, want)
print("all %d outputs equal numpy's np.pad" % len(want))
