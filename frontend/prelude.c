/* prelude.c — the blocks every .coil program can call without defining them, shaped like
 * torch.nn modules so parameter names and initialisers match a PyTorch state dict. */
#include "frontend/prelude.h"

const char coil_prelude[] =
    "# nn.Linear: weight [out, in], bias [out], both U(-1/sqrt(in), 1/sqrt(in))\n"
    "block Linear(x: f32[..., In], out: int, bias: bool = true) {\n"
    "  bound = 1 / sqrt(In)\n"
    "  param weight: f32[out, In] = uniform(-bound, bound)\n"
    "  y = linear(x, weight)\n"
    "  if bias {\n"
    "    param bias: f32[out] = uniform(-bound, bound)\n"
    "    y = y + bias\n"
    "  }\n"
    "  return y\n"
    "}\n"
    "\n"
    "# nn.LayerNorm over the last dimension: weight ones, bias zeros\n"
    "block LayerNorm(x: f32[..., D], eps: float = 1e-5) {\n"
    "  param weight: f32[D] = ones\n"
    "  param bias: f32[D] = zeros\n"
    "  return layer_norm(x, weight, bias, eps=eps)\n"
    "}\n"
    "\n"
    "# nn.Embedding: weight [num, dim] ~ N(0, 1)\n"
    "block Embedding(ids: i64[...], num: int, dim: int) {\n"
    "  param weight: f32[num, dim] = normal(1)\n"
    "  return embedding(weight, ids)\n"
    "}\n";
