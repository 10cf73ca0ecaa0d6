#!/usr/bin/env python3
"""gen_bn.py — a batch-norm net trained by SGD in PyTorch, step for step, for test_api_train.c.

bn/model.coil is conv 3x3 (padding 1) -> BatchNorm(4) -> relu -> flatten -> Linear(5); this
script builds the same net from torch.nn.functional, draws its weights and STEPS batches of
B samples, trains with plain SGD (lr LR, no momentum, no weight decay) on the cross-entropy,
and writes in bn/: the initial parameters in coil's parameter order (param.<name>.npy), the
batches (x.<k>.npy, y.<k>.npy), each step's loss (losses.npy, f32), the running statistics and
the head's weight after the last step (expect.<name>.npy), and the trained net's logits in
evaluation mode on one more batch (x.eval.npy, expect.eval.npy). float64 throughout.

Run from the repository root with any Python that has torch and numpy:
    bench/.venv/bin/python tests/models/train/gen_bn.py
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bn")
B, STEPS, LR = 8, 5, 0.1


def forward(x, p, training):
    h = F.conv2d(x, p["conv_w"], padding=1)
    h = F.batch_norm(h, p["bn.running_mean"], p["bn.running_var"], p["bn.weight"], p["bn.bias"],
                     training=training, momentum=0.1, eps=1e-5)
    return F.relu(h).reshape(x.shape[0], 144) @ p["head.weight"].T + p["head.bias"]


def main():
    rng = np.random.RandomState(5)
    shapes = {"conv_w": (4, 2, 3, 3), "bn.weight": (4,), "bn.bias": (4,),
              "bn.running_mean": (4,), "bn.running_var": (4,), "head.weight": (5, 144),
              "head.bias": (5,)}
    buffers = ("bn.running_mean", "bn.running_var")
    values = {k: rng.randn(*s).astype(np.float32) * 0.5 for k, s in shapes.items()}
    values["bn.weight"] += 1
    values["bn.running_var"] = np.abs(values["bn.running_var"]) + 0.5
    for k, a in values.items():
        np.save(os.path.join(HERE, f"param.{k}.npy"), a)
    p = {k: torch.tensor(a, dtype=torch.float64, requires_grad=k not in buffers)
         for k, a in values.items()}
    losses = []
    for step in range(STEPS):
        x = rng.randn(B, 2, 6, 6).astype(np.float32)
        y = rng.randint(0, 5, B).astype(np.int64)
        np.save(os.path.join(HERE, f"x.{step}.npy"), x)
        np.save(os.path.join(HERE, f"y.{step}.npy"), y)
        loss = F.cross_entropy(forward(torch.tensor(x, dtype=torch.float64), p, True),
                               torch.tensor(y))
        loss.backward()
        with torch.no_grad():
            for k, t in p.items():
                if k not in buffers:
                    t -= LR * t.grad
                    t.grad = None
        losses.append(loss.item())
    np.save(os.path.join(HERE, "losses.npy"), np.array(losses, dtype=np.float32))
    for k in buffers + ("head.weight",):
        np.save(os.path.join(HERE, f"expect.{k}.npy"), p[k].detach().numpy().astype(np.float32))
    x = rng.randn(3, 2, 6, 6).astype(np.float32)
    np.save(os.path.join(HERE, "x.eval.npy"), x)
    with torch.no_grad():
        logits = forward(torch.tensor(x, dtype=torch.float64), p, False)
    np.save(os.path.join(HERE, "expect.eval.npy"), logits.numpy().astype(np.float32))
    print("losses", " ".join(f"{v:.6f}" for v in losses))


if __name__ == "__main__":
    main()
