#!/usr/bin/env python3
"""gen_resnet.py — a small ResNet trained by SGD in PyTorch, step for step, for test_batch_norm.c.

resnet/model.coil is torchvision's layout at toy size (conv-bn-relu stem, max pool, a
BasicBlock, a strided BasicBlock with its downsample, global average pool, fc), with
torchvision's parameter names; this script builds the same net from torch.nn.functional,
draws its weights and STEPS batches of B images, trains with plain SGD (lr LR, no momentum,
no weight decay) on the cross-entropy, and writes in resnet/: the initial parameters and
buffers as a torchvision-style state dict saved with safetensors (state_dict.safetensors:
each batch norm's num_batches_tracked too, int64, at TRACKED, as a pretrained net's
would hold), the batches (x.<k>.npy, y.<k>.npy), each step's loss
(losses.npy, f32), every parameter and buffer after the last step (expect.<name>.npy),
and the trained net's logits in evaluation mode on one more batch (x.eval.npy,
expect.eval.npy). float64 throughout.

Run from the repository root with any Python that has torch and numpy:
    bench/.venv/bin/python tests/models/train/gen_resnet.py
"""
import os

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resnet")
B, STEPS, LR = 8, 10, 0.05
TRACKED = 12345  # num_batches_tracked in the state dict; nn.BatchNorm2d would add STEPS in training
BN = ("weight", "bias", "running_mean", "running_var")


def conv_bn(x, p, conv, bn, stride, padding, training):
    h = F.conv2d(x, p[conv + ".weight"], stride=stride, padding=padding)
    return F.batch_norm(h, *(p[f"{bn}.{k}"] for k in ("running_mean", "running_var", "weight", "bias")),
                        training=training, momentum=0.1, eps=1e-5)


def block(x, p, pre, stride, down, training):
    h = F.relu(conv_bn(x, p, pre + "conv1", pre + "bn1", stride, 1, training))
    h = conv_bn(h, p, pre + "conv2", pre + "bn2", 1, 1, training)
    s = conv_bn(x, p, pre + "downsample.0", pre + "downsample.1", stride, 0, training) if down else x
    return F.relu(h + s)


def forward(x, p, training):
    h = F.relu(conv_bn(x, p, "conv1", "bn1", 1, 1, training))
    h = F.max_pool2d(h, 3, stride=2, padding=1)
    h = block(h, p, "layer1.0.", 1, False, training)
    h = block(h, p, "layer2.0.", 2, True, training)
    return F.adaptive_avg_pool2d(h, 1).reshape(x.shape[0], 16) @ p["fc.weight"].T + p["fc.bias"]


def shapes():
    """model.coil's parameters and buffers in its order, with their shapes."""
    out = {}
    def conv(name, o, i, k):
        out[name + ".weight"] = (o, i, k, k)
    def bn(name, c):
        out.update({f"{name}.{k}": (c,) for k in BN})
    conv("conv1", 8, 3, 3), bn("bn1", 8)
    for pre, cin, c, down in (("layer1.0.", 8, 8, False), ("layer2.0.", 8, 16, True)):
        conv(pre + "conv1", c, cin, 3), bn(pre + "bn1", c)
        conv(pre + "conv2", c, c, 3), bn(pre + "bn2", c)
        if down:
            conv(pre + "downsample.0", c, cin, 1), bn(pre + "downsample.1", c)
    out["fc.weight"], out["fc.bias"] = (10, 16), (10,)
    return out


def draw(rng, name, shape):
    a = rng.randn(*shape)
    if name.endswith("running_var"):
        return (1 + 0.2 * np.abs(a)).astype(np.float32)
    if len(shape) == 4:  # a convolution: He's scale
        return (a * np.sqrt(2.0 / np.prod(shape[1:]))).astype(np.float32)
    return (a * (0.25 if name.startswith("fc.") else 0.1) + name.endswith("bn1.weight")).astype(np.float32)


def main():
    rng = np.random.RandomState(5)
    values = {k: draw(rng, k, s) for k, s in shapes().items()}
    state = {k: torch.tensor(a) for k, a in values.items()}
    for k in [k for k in values if k.endswith(".running_var")]:
        state[k[:-len("running_var")] + "num_batches_tracked"] = torch.tensor(TRACKED, dtype=torch.int64)
    save_file(state, os.path.join(HERE, "state_dict.safetensors"))
    buffers = [k for k in values if k.endswith(("running_mean", "running_var"))]
    p = {k: torch.tensor(a, dtype=torch.float64, requires_grad=k not in buffers)
         for k, a in values.items()}
    losses = []
    for step in range(STEPS):
        x = rng.randn(B, 3, 16, 16).astype(np.float32)
        y = rng.randint(0, 10, B).astype(np.int64)
        np.save(os.path.join(HERE, f"x.{step}.npy"), x)
        np.save(os.path.join(HERE, f"y.{step}.npy"), y)
        loss = F.cross_entropy(forward(torch.tensor(x, dtype=torch.float64), p, True), torch.tensor(y))
        loss.backward()
        with torch.no_grad():
            for k, t in p.items():
                if k not in buffers:
                    t -= LR * t.grad
                    t.grad = None
        losses.append(loss.item())
    np.save(os.path.join(HERE, "losses.npy"), np.array(losses, dtype=np.float32))
    for k, t in p.items():
        np.save(os.path.join(HERE, f"expect.{k}.npy"), t.detach().numpy().astype(np.float32))
    x = rng.randn(3, 3, 16, 16).astype(np.float32)
    np.save(os.path.join(HERE, "x.eval.npy"), x)
    with torch.no_grad():
        logits = forward(torch.tensor(x, dtype=torch.float64), p, False)
    np.save(os.path.join(HERE, "expect.eval.npy"), logits.numpy().astype(np.float32))
    print("losses", " ".join(f"{v:.6f}" for v in losses))


if __name__ == "__main__":
    main()
