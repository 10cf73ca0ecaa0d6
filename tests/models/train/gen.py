#!/usr/bin/env python3
"""gen.py — training fixtures: joint forward-and-backward graphs with PyTorch's gradients.

For each forward graph here (NAME.fwd.cir, or a .coil model NAME.fwd.coil: a small model
ending in a scalar `loss`), coil differentiates it (`build/coil opt NAME.fwd.cir
--passes=autodiff`), and this script writes
the result as tests/models/ops/NAME.cir with inputs and parameters drawn here, and the
expected outputs (the loss and grad.<param> for every parameter, update.<buffer> for every
buffer: a model's running statistics after the step) from PyTorch autograd in float64 on
the same model written independently below. Every test that walks
tests/models/ops then holds the joint graph to them: test_oracle (the interpreter against
PyTorch), test_compile (the CPU backend against the interpreter), test_cuda_codegen (NVRTC
compiles its kernels) and test_cuda_emu (its CUDA C, emulated, against the interpreter).

Run from the repository root with any Python that has torch and numpy:
    bench/.venv/bin/python tests/models/train/gen.py
"""
import os
import subprocess

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
OPS = os.path.join(ROOT, "tests", "models", "ops")


def train_mlp(x, targets, p):
    h = x @ p["w1"].T + p["b1"]
    h = F.layer_norm(h, (16,), p["g"], p["beta"], eps=1e-5)
    h = F.gelu(h)
    o = h @ p["w2"].T + p["b2"]
    return F.cross_entropy(o, targets)


def train_attn(x, targets, p):
    q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    r = a + x
    n = r * torch.rsqrt((r * r).mean(-1, keepdim=True) + 1e-6)
    s = F.silu(n)
    o = s @ p["wo"].T
    return F.cross_entropy(o.reshape(-1, 6), targets.reshape(-1))


def train_embed(x, targets, p):  # token ids x; the output head tied to the token table
    h = p["wte"][x] + p["wpe"][torch.arange(5)]
    h = torch.tanh(h @ p["w"])
    o = h @ p["wte"].T
    return F.cross_entropy(o.reshape(-1, 7), targets.reshape(-1))


def train_bn(x, targets, p):  # batch norm in training: batch statistics, buffers updated
    h = F.batch_norm(x, p["rm"], p["rv"], p["w"], p["b"], training=True, momentum=0.1, eps=1e-5)
    o = F.relu(h).reshape(4, 15) @ p["wo"].T
    return F.cross_entropy(o, targets)


def train_pool(x, targets, p):  # the .coil pools and pad: windows gathered, reduced
    h = torch.tanh(F.conv2d(F.pad(x, (1, 1, 2, 0), mode="reflect"), p["w"]))
    m = F.max_pool2d(h, 3, stride=2, padding=1, ceil_mode=True)
    a = F.avg_pool2d(h, (2, 3), stride=2, padding=1, count_include_pad=False)
    y = m[:, :, :, :3] * a + F.adaptive_avg_pool2d(h, 1)
    return F.cross_entropy(y.reshape(2, 36) @ p["fc"].T, targets)


def train_norm(x, targets, p):  # the .coil group_norm, instance_norm and conv_transpose
    h = F.conv_transpose2d(x, p["w"], stride=2, padding=1, output_padding=1, groups=2)
    y = F.group_norm(torch.tanh(h), 2, p["g"], p["beta"]) + F.instance_norm(h)
    return F.cross_entropy(y.reshape(2, 144) @ p["fc"].T, targets)


BUFFERS = {"train_bn": ("rm", "rv")}  # updated in place by the model, no gradient

MODELS = {
    "train_mlp": (train_mlp, {"x": (4, 8)}, {"targets": ((4,), 5)},
                  {"w1": (16, 8), "b1": (16,), "g": (16,), "beta": (16,), "w2": (5, 16), "b2": (5,)}),
    "train_attn": (train_attn, {"x": (2, 4, 8)}, {"targets": ((2, 4), 6)},
                   {"wq": (8, 8), "wk": (8, 8), "wv": (8, 8), "wo": (6, 8)}),
    # an embedding's gradient (index_add, with the head's GEMM product as its base)
    "train_embed": (train_embed, {}, {"x": ((2, 5), 7), "targets": ((2, 5), 7)},
                    {"wte": (7, 8), "wpe": (5, 8), "w": (8, 8)}),
    "train_bn": (train_bn, {"x": (4, 3, 5)}, {"targets": ((4,), 4)},
                 {"w": (3,), "b": (3,), "rm": (3,), "rv": (3,), "wo": (4, 15)}),
    # gathers' gradients (index_add) along the spatial axes, max's and mean's
    "train_pool": (train_pool, {"x": (2, 2, 7, 6)}, {"targets": ((2,), 5)}, {"w": (3, 2, 3, 3), "fc": (5, 36)}),
    # group and instance norm's means, conv_transpose's spread, flipped kernel and conv
    "train_norm": (train_norm, {"x": (2, 4, 3, 3)}, {"targets": ((2,), 5)},
                   {"w": (4, 2, 3, 3), "g": (4,), "beta": (4,), "fc": (5, 144)}),
}


def draw_param(rng, name, shape):
    """Weights about 0 (a norm's gain and a running variance about 1, the variance > 0)."""
    a = rng.randn(*shape) * 0.5 + (1 if name in ("g", "rv") else 0)
    return np.abs(a).astype(np.float32) if name == "rv" else a.astype(np.float32)


def forward_file(name):  # coil opt reads IR text and .coil models alike
    cir = os.path.join(HERE, name + ".fwd.cir")
    return cir if os.path.exists(cir) else os.path.join(HERE, name + ".fwd.coil")


def main():
    rng = np.random.RandomState(11)
    coil = os.path.join(ROOT, "build", "coil")
    for name, (fn, floats, ints, params) in MODELS.items():
        fwd = forward_file(name)
        joint = subprocess.run([coil, "opt", fwd, "--passes=autodiff"], check=True,
                               capture_output=True, text=True).stdout
        with open(os.path.join(OPS, name + ".cir"), "w") as f:
            f.write("// generated by tests/models/train/gen.py from " + os.path.basename(fwd) + "; do not edit\n")
            f.write(joint)
        inputs = {k: rng.randn(*s).astype(np.float32) for k, s in floats.items()}
        inputs.update({k: rng.randint(0, c, s).astype(np.int64) for k, (s, c) in ints.items()})
        values = {k: draw_param(rng, k, s) for k, s in params.items()}
        buffers = BUFFERS.get(name, ())
        for k, a in {**inputs, **values}.items():
            np.save(os.path.join(OPS, f"{name}.{k}.npy"), a)
        t = {k: torch.tensor(a, dtype=torch.float64, requires_grad=k not in buffers)
             for k, a in values.items()}
        args = {k: torch.tensor(a, dtype=torch.float64 if a.dtype == np.float32 else torch.int64)
                for k, a in inputs.items()}
        loss = fn(args["x"], args["targets"], t)
        loss.backward()
        np.save(os.path.join(OPS, f"{name}.expect.loss.npy"), np.array(loss.item(), dtype=np.float32))
        for k in params:
            got = t[k].detach() if k in buffers else t[k].grad
            np.save(os.path.join(OPS, f"{name}.expect.{'update' if k in buffers else 'grad'}.{k}.npy"),
                    got.numpy().astype(np.float32))
        print(f"{name}: loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
