#!/usr/bin/env bash
# tests/dp/data_parallel.sh BUILD_DIR: data-parallel training on this host, as a user runs
# it. N ranks at micro-batch b must train as one process at N*b: the losses of every step
# and the parameters and optimizer state after 20 steps within 1e-5 (f32), with gradient
# accumulation, with 1 MiB buckets and with one bucket; under coil launch and with the
# variables set by hand; a checkpoint of 2 ranks resumed on 1 and bit-identically on 2; a
# rank killed mid-run fails the other within its timeout, naming it.
source "$(dirname "$0")/common.sh"

# The parameters are compared after SGD: AdamW divides each update by the root of its
# second moment, so where a gradient is near zero the last bits of the sum's order (one
# rank's sum against the ring's) reach the parameter at lr's scale; the losses are
# compared with AdamW too.
echo "== 2 ranks x B=8 against 1 x B=16, 20 steps"
train one 1 16 --steps 20 --optimizer sgd --lr 0.05 --save "$tmp/one"
train two 2 8 --steps 20 --optimizer sgd --lr 0.05 --save "$tmp/two"
same "$tmp/one.json" "$tmp/two.json" "$tmp/one/checkpoint.safetensors" "$tmp/two/checkpoint.safetensors"
train adam1 1 16 --steps 20
train adam2 2 8 --steps 20
same "$tmp/adam1.json" "$tmp/adam2.json"
grep -q '"world": 2' "$tmp/two.json"
grep -q '"overlap": true' "$tmp/two.json" # the sums started during the backward
grep -q '^\[rank 1\] coil: rank 1 of 2 (local 1 of 2): CPU' "$tmp/two.out" # --bind cores
if grep -q '^\[rank 1\] {' "$tmp/two.out"; then echo "rank 1 printed progress"; exit 1; fi

echo "== --measure-scaling: rank 0 times its steps alone after the run"
train scaled 2 8 --steps 4 --measure-scaling
python3 - "$tmp/scaled.json" <<'PY'
import json, sys
d = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"steps"')][-1]
assert d["alone_step_s"] > 0 and d["step_s"] > 0, d
assert abs(d["scaling_efficiency"] - d["alone_step_s"] / d["step_s"]) < 1e-9, d
print(f"2-rank step {d['step_s'] * 1e3:.1f} ms, alone {d['alone_step_s'] * 1e3:.1f} ms: "
      f"efficiency {d['scaling_efficiency']:.3f}")
PY
if $coil train $mlp --dim B=8 --steps 1 --measure-scaling 2> "$tmp/alone.err"; then
    echo "--measure-scaling ran without other ranks"; exit 1
fi
grep -q 'compares N data-parallel ranks with one' "$tmp/alone.err"

echo "== the character GPT-2 on a token file: each rank draws its rows of every batch"
gpt="$root/examples/gpt2.coil --set layers=2 --set heads=4 --set hidden=64 --set vocab=256
     --set context=32 --dim T=32 --loss cross_entropy --data /usr/share/common-licenses/GPL-3
     --seed 5 --threads 1 --json --log-every 1 --steps 10 --lr 3e-3 --set dropout_p=0"
$coil train $gpt --dim B=8 > "$tmp/gpt1.json"
launch "$tmp/gpt2.out" --nproc 2 -- $coil train $gpt --dim B=4
rank0 "$tmp/gpt2.out" > "$tmp/gpt2.json"
same "$tmp/gpt1.json" "$tmp/gpt2.json"

echo "== with --accum 2"
train acc1 1 16 --steps 6 --accum 2
train acc2 2 8 --steps 6 --accum 2
same "$tmp/acc1.json" "$tmp/acc2.json"

echo "== 1 MiB buckets, and one bucket"
train small 2 8 --steps 6 --bucket-mb 1
train big 2 8 --steps 6 --bucket-mb 4096
train six 1 16 --steps 6
same "$tmp/six.json" "$tmp/small.json"
same "$tmp/six.json" "$tmp/big.json"

echo "== gradients reduced in bf16: the same training within bf16's rounding"
train bf16 2 8 --steps 6 --reduce-dtype bf16
python3 "$here/compare.py" "$tmp/six.json" "$tmp/bf16.json" 1e-2

echo "== 3 ranks with the variables set by hand (as torchrun or srun would)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])')
for r in 1 2; do
    RANK=$r WORLD_SIZE=3 MASTER_PORT=$port $coil train $mlp --dim B=4 --steps 4 > "$tmp/hand$r.json" &
done
RANK=0 WORLD_SIZE=3 MASTER_PORT=$port $coil train $mlp --dim B=4 --steps 4 > "$tmp/hand.json"
wait
train twelve 1 12 --steps 4
same "$tmp/twelve.json" "$tmp/hand.json"
[ ! -s "$tmp/hand1.json" ] # only rank 0 speaks
[ ! -s "$tmp/hand2.json" ]

echo "== a 2-rank checkpoint resumed on 1 rank and on 2 (bit-identical)"
sgd="--optimizer sgd --lr 0.05"
train part 2 8 --steps 10 $sgd --save "$tmp/part"
cp -r "$tmp/part" "$tmp/part1"
train rest2 2 8 --steps 20 $sgd --save "$tmp/part" --resume
train rest1 1 16 --steps 20 $sgd --save "$tmp/part1" --resume
cmp "$tmp/part/checkpoint.safetensors" "$tmp/two/checkpoint.safetensors"
same "$tmp/rest1.json" "$tmp/rest2.json" "$tmp/part1/checkpoint.safetensors" "$tmp/two/checkpoint.safetensors"

echo "== a rank killed mid-run: the other fails within --dp-timeout, naming it"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])')
RANK=1 WORLD_SIZE=2 MASTER_PORT=$port timeout -s KILL 3 $coil train $mlp --dim B=8 --steps 100000 \
    > /dev/null 2>&1 &
start=$(date +%s)
if RANK=0 WORLD_SIZE=2 MASTER_PORT=$port $coil train $mlp --dim B=8 --steps 100000 --dp-timeout 20 \
    > /dev/null 2> "$tmp/lost.err"; then
    echo "rank 0 went on without rank 1"; exit 1
fi
took=$(( $(date +%s) - start ))
wait || true
cat "$tmp/lost.err"
grep -q 'lost rank 1 during' "$tmp/lost.err"
[ "$took" -lt 30 ]

echo "== coil launch --max-restarts: a rank killed mid-run, the job restarted from the last checkpoint"
long="$root/examples/mlp.coil --set hidden=256 --set layers=4 --set classes=10 --set dropout_p=0
      --loss cross_entropy --synthetic --seed 3 --threads 1 --dim B=8 --steps 300 --save-every 10
      --log-every 1000 --optimizer sgd --lr 0.05"
launch "$tmp/whole.out" --nproc 2 -- $coil train $long --save "$tmp/whole"
# rank 1 of the first attempt dies as soon as a checkpoint exists
launch "$tmp/again.out" --nproc 2 --max-restarts 2 -- sh -c 'if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] &&
    [ "$RANK" = 1 ]; then (while [ ! -e "$1/checkpoint.safetensors" ]; do sleep 0.02; done;
    kill -9 $$) & fi; shift; exec "$@"' sh "$tmp/again" $coil train $long --save "$tmp/again" \
    --auto-resume --dp-timeout 20
grep 'restarting the job (restart 1 of 2)' "$tmp/again.out" || { cat "$tmp/again.out"; exit 1; }
cmp "$tmp/whole/checkpoint.safetensors" "$tmp/again/checkpoint.safetensors"

echo "== coil launch: one rank failing ends the job with its status"
set +e
$coil launch --nproc 2 -- sh -c 'if [ "$RANK" = 1 ]; then exit 3; fi; exec sleep 61' > "$tmp/launch.out" 2>&1
rc=$?
set -e
cat "$tmp/launch.out"
[ "$rc" = 3 ]
grep -q 'rank 1 exited with status 3: stopping the other ranks' "$tmp/launch.out"
# (a process may end between the glob and the read: not a failure)
for f in /proc/[0-9]*/cmdline; do { tr '\0' ' ' < "$f"; } 2> /dev/null || true; echo; done > "$tmp/procs"
if grep -q '^sleep 61 $' "$tmp/procs"; then echo "an orphan rank survived"; exit 1; fi
echo "data-parallel: all checks passed"
