#!/usr/bin/env bash
# tests/dp/zero.sh BUILD_DIR: ZeRO's sharding (coil train --zero K). 2 ranks at micro-batch b
# with the optimizer state (and, stage 2, the accumulated gradients) sharded must train as
# one process at 2b: losses within 1e-5, and the parameters and the optimizer state a
# checkpoint gathers; a sharded run resumes bit-identically on 2 ranks, on 1 rank, and a
# 1-rank checkpoint on 2 sharded ranks; each rank's resident training memory is what
# `coil plan --world 2 --zero K` plans, and the plan is the ZeRO paper's formula.
source "$(dirname "$0")/common.sh"

echo "== stage 1: 2 ranks x B=8 against 1 x B=16 (SGD with momentum; AdamW's losses)"
sgd="--optimizer sgd --momentum 0.9 --lr 0.05"
train one 1 16 --steps 20 $sgd --save "$tmp/one"
train z1 2 8 --steps 20 $sgd --save "$tmp/z1" --zero 1
same "$tmp/one.json" "$tmp/z1.json" "$tmp/one/checkpoint.safetensors" "$tmp/z1/checkpoint.safetensors"
grep -q '"overlap": true' "$tmp/z1.json" # reduce-scattered during the backward
train adam1 1 16 --steps 10
train adamz 2 8 --steps 10 --zero 1 --bucket-mb 1
same "$tmp/adam1.json" "$tmp/adamz.json"

echo "== stage 2 with --accum 2, and stage 1 with it; reduced in bf16"
train acc1 1 16 --steps 6 --accum 2
train accz2 2 8 --steps 6 --accum 2 --zero 2
train accz1 2 8 --steps 6 --accum 2 --zero 1
same "$tmp/acc1.json" "$tmp/accz2.json"
same "$tmp/acc1.json" "$tmp/accz1.json"
train bf 2 8 --steps 6 --accum 2 --zero 2 --reduce-dtype bf16
python3 "$here/compare.py" "$tmp/acc1.json" "$tmp/bf.json" 1e-2

echo "== resumed: on 2 ranks bit-identically, on 1 rank, and a 1-rank checkpoint on 2"
train whole 2 8 --steps 8 --zero 2 --save "$tmp/whole"
train half 2 8 --steps 4 --zero 2 --save "$tmp/half"
cp -r "$tmp/half" "$tmp/half1"
train rest 2 8 --steps 8 --zero 2 --save "$tmp/half" --resume
cmp "$tmp/whole/checkpoint.safetensors" "$tmp/half/checkpoint.safetensors"
train rest1 1 16 --steps 8 --save "$tmp/half1" --resume
train plain 1 16 --steps 8
train first 1 16 --steps 4 --save "$tmp/p1"
train rest2 2 8 --steps 8 --zero 1 --save "$tmp/p1" --resume
python3 - "$tmp/plain.json" "$tmp/rest1.json" "$tmp/rest2.json" <<'PY'
import json, sys
def losses(path):
    steps = {}
    for line in open(path):
        d = json.loads(line) if line.startswith("{") else {}
        if "step" in d and "loss" in d:
            steps[d["step"]] = d["loss"]
    return steps
whole = losses(sys.argv[1])
for path in sys.argv[2:]:
    part = losses(path)
    assert sorted(part) == [5, 6, 7, 8], (path, sorted(part))
    worst = max(abs(part[k] - whole[k]) / abs(whole[k]) for k in part)
    assert worst < 1e-5, (path, worst)
    print(f"{path}: steps 5-8 within {worst:.2g} of the uninterrupted run")
PY

echo "== each rank's memory: planned by coil plan, measured, and ZeRO's formula"
if [ -n "${COIL_SANITIZED:-}" ]; then
    echo "skipped: resident memory under the sanitizers is theirs, not the plan's"
    echo "zero: all checks passed"; exit 0
fi
big="$root/examples/mlp.coil --set hidden=1024 --set layers=4 --set classes=100 --set dropout_p=0
     --loss cross_entropy --dim B=16"
for stage in 0 1 2; do
    $coil plan $big --world 2 --zero $stage --accum 2 > "$tmp/plan$stage.txt"
    launch "$tmp/mem$stage.out" --nproc 2 -- $coil train $big --synthetic --threads 1 --json \
        --steps 2 --accum 2 --zero $stage
    rank0 "$tmp/mem$stage.out" > "$tmp/mem$stage.json"
    python3 - "$tmp/plan$stage.txt" "$tmp/mem$stage.json" "$stage" <<'PY'
import json, re, sys
plan, run, stage = open(sys.argv[1]).read(), open(sys.argv[2]).read(), int(sys.argv[3])
mib = lambda name: float(re.search(r"^  %s +([0-9.]+) MiB" % name, plan, re.M).group(1))
row = {int(m.group(1)): float(m.group(2))
       for m in re.finditer(r"^  stage (\d) .*? ([0-9.]+) MiB", plan, re.M)}
psi = int(re.search(r"Ψ = (\d+) parameters", plan).group(1))
p, g, k, n = 4 * psi, 4 * psi, 8 * psi, 2  # f32 parameters and gradients, AdamW's m and v
formula = {0: p + g + k, 1: p + g + k / n, 2: p + (g + k) / n, 3: (p + g + k) / n}
for s, want in formula.items():
    assert abs(row[s] - want / 2**20) < 0.01, (s, row[s], want / 2**20)
# this stage's parameters, gradients and state: the formula's, plus the gradients the joint
# graph writes whole each micro-batch (and at stages 0 and 1 the accumulated ones)
this = float(re.search(r"this plan, stage \d: ([0-9.]+) MiB", plan).group(1))
assert abs(this - (row[stage] + g / 2**20)) < 0.01, (this, row[stage])
parts = mib("parameters") + mib("gradients") + mib("optimizer state")
assert abs(this - parts) < 0.02, (this, parts)
summary = [json.loads(l) for l in run.splitlines() if l.startswith('{"steps"')][-1]
planned, measured = summary["planned_bytes"], summary["measured_bytes"]
print(f"stage {stage}: ZeRO's formula {row[stage]:.1f} MiB, planned {planned / 2**20:.1f} MiB, "
      f"measured {measured / 2**20:.1f} MiB")
open(sys.argv[2] + ".bytes", "w").write(f"{planned} {measured}\n")
PY
done
# measured against planned, and what each stage saves (the process's fixed part, threads
# and buffers, cancels out) against what the plan says it saves
python3 - "$tmp"/mem{0,1,2}.json.bytes <<'PY'
import sys
runs = [tuple(map(int, open(path).read().split())) for path in sys.argv[1:]]
for stage, (planned, measured) in enumerate(runs):
    assert abs(measured - planned) < 0.1 * planned, (stage, planned, measured)
for stage in (1, 2):
    plan_saved = runs[stage - 1][0] - runs[stage][0]
    saved = runs[stage - 1][1] - runs[stage][1]
    assert abs(saved - plan_saved) < 0.05 * plan_saved, (stage, plan_saved, saved)
    print(f"stage {stage} saves {saved / 2**20:.1f} MiB a rank, planned {plan_saved / 2**20:.1f} MiB")
PY
echo "zero: all checks passed"
