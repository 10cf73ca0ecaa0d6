#!/usr/bin/env python3
"""gen.py — the PyTorch side of coil's model tests, written independently of coil:

  * GPT-2 in the style of nanoGPT's model.py (tied lm_head, pre-norm blocks, causal
    attention, tanh GELU) at a tiny size with fixed random weights: weights.safetensors,
    the input token ids ids.npy and the logits PyTorch computes, logits.npy
    (tests/unit/test_gpt2_torch.c runs examples/gpt2.coil on them);
  * the parameter names and shapes of the full-size models, gpt2.names.txt and
    mlp.names.txt (the seed's OptimizedModel at its production config), which
    tests/unit/test_state_dict.c holds examples/gpt2.coil and examples/mlp.coil to.

Run with Debian's python3 (it has torch 1.13 and numpy):
    /usr/bin/python3 tests/models/gpt2/gen.py
Output is deterministic (fixed seeds, CPU, float64 reference).
"""
import json
import math
import os
import struct
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))

# The size the numerical test runs at: the same --set values test_gpt2_torch.c passes.
TINY = SimpleNamespace(n_layer=2, n_head=4, n_embd=64, vocab_size=97, block_size=16)
BATCH, SEQ = 2, 11  # SEQ < block_size: positions are a prefix of wpe
GPT2_SMALL = SimpleNamespace(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, block_size=1024)
MLP_PRODUCTION = SimpleNamespace(hidden_size=1024, num_layers=24, num_classes=1000, dropout=0.1)


# ---------------------------------------------------------------- GPT-2, nanoGPT style

class CausalSelfAttention(nn.Module):
    def __init__(self, c, device=None):
        super().__init__()
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd, device=device)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd, device=device)
        self.n_head = c.n_head

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        heads = lambda t: t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, c, device=None):
        super().__init__()
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd, device=device)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd, device=device)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, c, device=None):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.n_embd, device=device)
        self.attn = CausalSelfAttention(c, device)
        self.ln_2 = nn.LayerNorm(c.n_embd, device=device)
        self.mlp = MLP(c, device)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c, device=None):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c.vocab_size, c.n_embd, device=device),
            wpe=nn.Embedding(c.block_size, c.n_embd, device=device),
            h=nn.ModuleList([Block(c, device) for _ in range(c.n_layer)]),
            ln_f=nn.LayerNorm(c.n_embd, device=device),
        ))
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False, device=device)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT does

    def forward(self, idx):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


# ---------------------------------------------------------------- the seed's OptimizedModel

class OptimizedModel(nn.Module):
    def __init__(self, config, device=None):
        super().__init__()
        layers = []
        for _ in range(config.num_layers):
            layers.extend([nn.Linear(config.hidden_size, config.hidden_size, device=device),
                           nn.LayerNorm(config.hidden_size, device=device), nn.GELU(),
                           nn.Dropout(config.dropout)])
        self.backbone = nn.Sequential(*layers)
        self.head = nn.Sequential(
            nn.Linear(config.hidden_size, config.hidden_size // 2, device=device), nn.ReLU(),
            nn.Linear(config.hidden_size // 2, config.num_classes, device=device))

    def forward(self, x):
        return self.head(self.backbone(x))


# ---------------------------------------------------------------- files

def unique_state_dict(model):
    """The state dict without aliases: a tied tensor keeps its first name (nanoGPT's
    lm_head.weight is transformer.wte.weight, which comes first), as safetensors'
    save_model does."""
    seen, out = set(), {}
    for name, t in model.state_dict(keep_vars=True).items():
        key = (t.device.type, t.data_ptr()) if t.device.type != "meta" else id(t)
        if key not in seen:
            seen.add(key)
            out[name] = t
    return out


def write_names(model, path):
    """One line per tensor: "name: f32[d0,d1]", in state-dict order."""
    with open(path, "w") as f:
        for name, t in unique_state_dict(model).items():
            assert t.dtype == torch.float32
            f.write(f"{name}: f32[{','.join(str(d) for d in t.shape)}]\n")


def write_safetensors(tensors, path, metadata):
    """The safetensors format, written out by hand (Debian's torch 1.13 has no safetensors
    package): 8-byte little-endian header length, JSON header, raw little-endian data."""
    header, blobs, at = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        raw = t.detach().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def randomize(model, gen):
    """Every parameter random and far from its default, so a misplaced or mis-transposed
    tensor shows: weights N(0, 0.2), LayerNorm gains 1 + N(0, 0.2), biases N(0, 0.2)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32) * 0.2
            p.copy_(noise + 1 if name.endswith("ln_1.weight") or name.endswith("ln_2.weight")
                    or name.endswith("ln_f.weight") else noise)


def gpt2_fixture():
    gen = torch.Generator().manual_seed(1234)
    model = GPT(TINY).eval()
    randomize(model, gen)
    ids = torch.randint(0, TINY.vocab_size, (BATCH, SEQ), generator=gen, dtype=torch.int64)
    write_safetensors(unique_state_dict(model), os.path.join(HERE, "weights.safetensors"),
                      {"producer": "tests/models/gpt2/gen.py", "config": json.dumps(vars(TINY))})
    with torch.no_grad():  # the reference in float64 from the same float32 weights
        logits = model.double()(ids)
    np.save(os.path.join(HERE, "ids.npy"), ids.numpy())
    np.save(os.path.join(HERE, "logits.npy"), logits.numpy().astype(np.float32))
    return logits


def main():
    logits = gpt2_fixture()
    write_names(GPT(GPT2_SMALL, device="meta"), os.path.join(HERE, "gpt2.names.txt"))
    write_names(OptimizedModel(MLP_PRODUCTION, device="meta"), os.path.join(HERE, "mlp.names.txt"))
    size = sum(os.path.getsize(os.path.join(HERE, f)) for f in os.listdir(HERE))
    print(f"logits {tuple(logits.shape)}, |logits| max {logits.abs().max():.3f}; {size} bytes in {HERE}")


if __name__ == "__main__":
    main()
