# torch_mlp.py — makes tests/onnx/fixtures/torch_mlp*: a tiny MLP (Linear, GELU, LayerNorm,
# ReLU, Softmax; a symbolic batch) exported by torch.onnx.export at opset 17, with an input
# and PyTorch's output for it, which test_onnx.c holds coil's run against.
# usage: bench/.venv/bin/python tests/onnx/torch_mlp.py OUT_DIR [SITE_PACKAGES_WITH_ONNX]
# (the exporter needs the onnx package: give a site-packages that has it, after torch's own)
import sys

if len(sys.argv) > 2:
    sys.path.append(sys.argv[2])
import numpy as np
import torch

out = sys.argv[1]
torch.manual_seed(0)
mlp = torch.nn.Sequential(
    torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
    torch.nn.Linear(16, 16), torch.nn.ReLU(),
    torch.nn.Linear(16, 4), torch.nn.Softmax(-1)).eval()
x = torch.randn(5, 8)
torch.onnx.export(mlp, (x,), f"{out}/torch_mlp.onnx", dynamo=False, opset_version=17,
                  input_names=["x"], output_names=["probs"],
                  dynamic_axes={"x": {0: "batch"}, "probs": {0: "batch"}})
np.save(f"{out}/torch_mlp_x.npy", x.numpy())
with torch.no_grad():
    np.save(f"{out}/torch_mlp_y.npy", mlp(x).numpy())
