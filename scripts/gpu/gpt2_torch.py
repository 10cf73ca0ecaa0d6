#!/usr/bin/env python3
"""gpt2_torch.py — coil's GPT-2 (examples/gpt2.coil) against PyTorch's, same weights.

What it checks: the logits `coil run examples/gpt2.coil --device DEVICE` computes against
those of nanoGPT's GPT in PyTorch (bench/peers.py's build_gpt2, which is
examples/gpt2.coil op for op: tanh GELU, LayerNorm eps 1e-5, lm_head tied to wte, causal
attention), from the same weights:

  * the weights: random from a fixed torch seed, nanoGPT's init (N(0, 0.02), the residual
    projections N(0, 0.02/sqrt(2*layers))) so activations are GPT-2-like, plus small
    noise (std 0.02) in every bias and LayerNorm gain/bias so that a bias or a norm
    loaded into the wrong place shows; saved with safetensors under the names
    `coil check --params` lists (checked first);
  * the input: token ids [B, T] (int64 .npy) from the same seed, fed as `idx`;
  * the reference: PyTorch's logits in float64 (the float32 weights widened), computed on
    the same device (a GPU's float64 GEMMs are IEEE float64; no TF32);
  * for context, PyTorch's own float32 logits on the device with TF32 off
    (torch.backends.cuda.matmul.allow_tf32 = False), held to the same reference.

Pass: max |coil - ref| / max |ref| <= --tol (1e-4, float32) and top-1 agreement >= 99.9%
of positions, where a position whose reference top-2 logits lie within tol * max|ref|
of each other counts as agreeing (a near-tie that float32 rounding may flip; the raw
agreement is printed too).

Time: full size (12 layers, 768 wide, vocab 50257, B=2, T=256) on an H100: about 30 s,
most of it torch's start-up, drawing and saving 124M weights (500 MB) and coil's compile.
On a 2-core CPU at the small size below: about 10 s.

Run (repository root; coil from $COIL, default build/coil):
    python3 scripts/gpu/gpt2_torch.py --json gpt2.json                  # the GPU, full size
    COIL=build-py/coil bench/.venv/bin/python scripts/gpu/gpt2_torch.py --device cpu \\
        --set layers=2 --set hidden=128 --set heads=4 --set vocab=1000 --seq 64
Ends with `RESULT gpt2-torch pass|fail|skipped|error max_rel_err=... argmax_agree=...`;
exit 0 on pass (or skipped: no GPU), 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import sys
import time

import common
from common import CheckError

CHECK = "gpt2-torch"
MODEL = common.REPO / "examples" / "gpt2.coil"

sys.path.insert(0, str(common.BENCH))
import peers  # noqa: E402  (bench/peers.py: the config reader and nanoGPT's GPT)


@contextlib.contextmanager
def peers_errors():
    """peers.py reports a bad config or --set by exiting; make that a CheckError."""
    try:
        yield
    except SystemExit:
        raise CheckError("bench/peers.py refused the model's config (its message is above)") \
            from None


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_common_args(parser)
    parser.add_argument("--batch", type=int, default=2, help="B (default 2)")
    parser.add_argument("--seq", type=int, default=256, help="T (default 256)")
    parser.add_argument("--set", dest="sets", action="append", default=[],
                        metavar="NAME=VALUE", help="override examples/gpt2.coil's config")
    parser.add_argument("--seed", type=int, default=0, help="torch seed (default 0)")
    parser.add_argument("--tol", type=float, default=1e-4,
                        help="max error relative to max |logit| (default 1e-4)")
    parser.add_argument("--min-agree", type=float, default=0.999,
                        help="top-1 agreement needed (default 0.999)")
    return parser.parse_args()


def init_weights(torch, model, config: dict, seed: int) -> None:
    """nanoGPT's initialisation (std: the config's init_std, 0.02) from a fixed seed,
    plus noise of that std in biases and norms."""
    gen = torch.Generator().manual_seed(seed)
    std = float(config.get("init_std", 0.02))
    residual_std = std / math.sqrt(2 * int(config["layers"]))
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if p.dim() >= 2:
                p.copy_(noise * (residual_std if name.endswith("c_proj.weight") else std))
            elif re.search(r"ln_\w+\.weight$", name):
                p.copy_(1 + std * noise)
            else:
                p.copy_(std * noise)


def check_names(coil, model, sets: list[str]) -> None:
    """The state dict's names and shapes must be those `coil check --params` lists."""
    args = ["check", MODEL, "--params"] + [a for s in sets for a in ("--set", s)]
    out, _ = common.run_coil(coil, args)
    want = dict(re.findall(r"^(\S+): f32\[([\d,]*)\]", out, re.M))
    have = {n: ",".join(map(str, p.shape)) for n, p in model.named_parameters()}
    if want != have:
        only_coil = sorted(set(want) - set(have))[:3]
        only_torch = sorted(set(have) - set(want))[:3]
        shapes = [n for n in set(want) & set(have) if want[n] != have[n]][:3]
        raise CheckError(f"parameter names differ: only coil's {only_coil}, only torch's "
                         f"{only_torch}, shapes differ {shapes}")


def run_coil(coil, args, sets, weights, ids_file, out_dir) -> tuple[object, float]:
    import numpy as np

    cmd = ["run", MODEL, "--device", args.device, "--weights", weights,
           "--input", f"idx={ids_file}", "--out", out_dir]
    for s in sets:
        cmd += ["--set", s]
    text, seconds = common.run_coil(coil, cmd, timeout=400)
    print("coil run:", " ".join(line for line in text.splitlines()
                                 if line.startswith(("compile", "time"))))
    return np.load(out_dir / "logits.npy"), seconds


def torch_logits(torch, model, ids, device: str):
    """PyTorch's float32 logits on the device (TF32 off), then the float64 reference."""
    torch.backends.cuda.matmul.allow_tf32 = False
    model = model.to(device)
    ids = ids.to(device)
    with torch.inference_mode():
        f32 = model(ids).double().cpu().numpy()
        ref = model.double()(ids).cpu().numpy()
    return f32, ref


def compare(got, ref, tol: float) -> dict:
    """Max error relative to max |ref|; top-1 agreement, raw and with near-ties agreeing."""
    import numpy as np

    scale = float(np.abs(ref).max())
    err = float(np.abs(got.astype(np.float64) - ref).max())
    top_ref, top_got = ref.argmax(-1), got.argmax(-1)
    same = top_ref == top_got
    gap = np.take_along_axis(ref, top_ref[..., None], -1) - \
        np.take_along_axis(ref, top_got[..., None], -1)
    near_tie = (~same) & (gap[..., 0] <= tol * scale)
    return {"max_rel_err": err / scale, "max_abs_err": err, "max_abs_logit": scale,
            "argmax_agree": float(same.mean()),
            "argmax_agree_ties_ok": float((same | near_tie).mean()),
            "positions": int(same.size), "argmax_differ": int((~same).sum()),
            "near_ties": int(near_tie.sum())}


def body(args) -> None:
    torch = common.import_torch()
    if (why := common.gpu_missing(torch, args.device)):
        common.skip(CHECK, why, args.json)
    coil = common.coil_binary()
    with peers_errors():
        config = peers.apply_sets(peers.read_config(MODEL), args.sets)
    if args.seq > config["context"]:
        raise CheckError(f"--seq {args.seq} exceeds the model's context {config['context']}")
    sets = [f"{k}={v}" for k, v in config.items()
            if k in {s.split("=", 1)[0] for s in args.sets}]

    start = time.perf_counter()
    torch.manual_seed(args.seed)
    with peers_errors():
        model = peers.build_gpt2(torch, config).eval()  # eval: dropout is the identity
    init_weights(torch, model, config, args.seed)
    check_names(coil, model, sets)
    gen = torch.Generator().manual_seed(args.seed + 1)
    ids = torch.randint(0, int(config["vocab"]), (args.batch, args.seq), generator=gen)

    from safetensors.torch import save_file

    with common.workdir(args.keep, "coil-gpt2-") as work:
        weights, ids_file = work / "weights.safetensors", work / "ids.npy"
        save_file({n: p.detach().contiguous() for n, p in model.named_parameters()},
                  str(weights))
        common.save_npy(ids_file, ids)
        setup_s = time.perf_counter() - start
        got, coil_s = run_coil(coil, args, sets, weights, ids_file, work / "out")
    f32, ref = torch_logits(torch, model, ids, args.device)
    if got.shape != ref.shape:
        raise CheckError(f"coil's logits are {got.shape}, PyTorch's {ref.shape}")

    result = compare(got, ref, args.tol)
    torch_f32 = compare(f32, ref, args.tol)
    ok = result["max_rel_err"] <= args.tol and result["argmax_agree_ties_ok"] >= args.min_agree
    params = sum(p.numel() for p in model.parameters())
    print(f"GPT-2 {config['layers']} layers, {config['hidden']} wide, vocab "
          f"{config['vocab']}, {params:,} parameters; B={args.batch} T={args.seq} on "
          f"{args.device}")
    print(f"reference: PyTorch float64 on {args.device}; max |logit| "
          f"{result['max_abs_logit']:.4g}")
    print(f"coil:          max rel err {result['max_rel_err']:.3e} (tol {args.tol:g}), "
          f"top-1 agree {result['argmax_agree']:.4%} ({result['argmax_differ']} differ, "
          f"{result['near_ties']} near-ties), coil run {coil_s:.1f} s")
    print(f"torch float32: max rel err {torch_f32['max_rel_err']:.3e}, top-1 agree "
          f"{torch_f32['argmax_agree']:.4%} (TF32 off)")
    if not ok:
        print(f"FAIL gpt2-torch: max_rel_err {result['max_rel_err']:.3e} > {args.tol:g} or top-1 "
              f"agreement {result['argmax_agree_ties_ok']:.4%} < {args.min_agree:.2%}")
    summary = {"max_rel_err": result["max_rel_err"], "argmax_agree": result["argmax_agree"],
               "torch_f32_rel_err": torch_f32["max_rel_err"], "device": args.device,
               "B": args.batch, "T": args.seq}
    common.finish(CHECK, "pass" if ok else "fail", summary, args.json, {
        "coil": result, "torch_f32": torch_f32, "config": config, "params": params,
        "tol": args.tol, "min_agree": args.min_agree, "coil_run_s": coil_s,
        "setup_s": setup_s, "coil_version": common.coil_version(coil),
        "reference": f"PyTorch float64 on {args.device} from the float32 weights",
        "env": common.environment(torch, args.device)})


def main() -> None:
    args = parse_args()
    common.guarded(CHECK, args.json, lambda: body(args))


if __name__ == "__main__":
    main()
