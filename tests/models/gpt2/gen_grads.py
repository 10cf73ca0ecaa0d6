#!/usr/bin/env python3
"""gen_grads.py — PyTorch autograd's gradients of the tiny GPT-2 of gen.py, for
tests/unit/test_train.c: the same weights (weights.safetensors) and token ids (ids.npy),
targets drawn here (targets.npy), the loss mean cross-entropy over every position, its
value (loss.npy) and the gradient of every parameter (grads.safetensors, float64
computation stored as float32; the tied wte's gradient is the sum of both uses, as
autograd gives it).

Run with any Python that has torch and numpy (bench/.venv has them):
    bench/.venv/bin/python tests/models/gpt2/gen_grads.py
"""
import json
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

from gen import GPT, TINY, unique_state_dict, write_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype="<f4").reshape(info["shape"]).copy())
    return out


def main():
    model = GPT(TINY)
    weights = read_safetensors(os.path.join(HERE, "weights.safetensors"))
    state = unique_state_dict(model)
    with torch.no_grad():
        for name, t in state.items():
            t.copy_(weights[name])
    model = model.double()
    ids = torch.from_numpy(np.load(os.path.join(HERE, "ids.npy")))
    targets = torch.from_numpy(np.random.RandomState(7).randint(0, TINY.vocab_size, ids.shape).astype(np.int64))
    logits = model(ids)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    loss.backward()
    grads = {name: t.grad.float() for name, t in unique_state_dict(model).items()}
    np.save(os.path.join(HERE, "targets.npy"), targets.numpy())
    np.save(os.path.join(HERE, "loss.npy"), np.array(loss.item(), dtype=np.float32))
    write_safetensors(grads, os.path.join(HERE, "grads.safetensors"),
                      {"producer": "tests/models/gpt2/gen_grads.py", "loss": repr(loss.item())})
    print(f"loss {loss.item():.6f}; {len(grads)} gradients")


if __name__ == "__main__":
    main()
