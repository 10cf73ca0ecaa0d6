#!/usr/bin/env bash
# bench/train.sh MODEL [--batch N] [--seq T] [--threads N] [--steps N] [--rounds R]
#                      [--set NAME=VALUE]... [--engines eager,compile] [--python PATH]
#                      [--device cpu|cuda] [--precision f32|bf16] [--coil-modes LIST]
#
# A training step (forward, mean cross-entropy against random targets, backward, AdamW
# with clipping) in coil (`coil train --synthetic`, in the modes of --coil-modes) and in
# PyTorch (bench/train_peer.py: eager, torch.compile) on this CPU with the same threads,
# alternating for R rounds (default 3). Each engine's figure is the median step time of a
# round (coil: over its JSON progress lines after the first 3 steps), then the median over
# rounds. Writes bench/results/train-<model>-b<N>[-s<T>]-t<threads>[-bf16]-<cpu>.{md,json}.
# Needs bench/.venv (bench/run.sh sets it up) or --python PATH (or BENCH_PYTHON) with torch.
# coil is $COIL, default build/coil. Exit status 1 when an engine failed a round (the
# results mark it not measured).
#
# --device cuda trains on the first NVIDIA GPU instead (`coil train --device cuda`; the
# peers' model, batch and optimizer on torch's cuda:0, each step between two
# torch.cuda.synchronize()), writing
# bench/results/train-<model>-b<N>[-s<T>]-cuda[-bf16]-<gpu>.{md,json}. --precision bf16 is
# `coil train --precision bf16` and, in PyTorch, torch.autocast(bfloat16) around the
# forward and the loss. --coil-modes picks coil's compile modes, of default and
# max-autotune (default: both on the CPU; default alone on a GPU, where max-autotune
# measures every kernel of the joint graph first).
set -euo pipefail

die() { echo "train.sh: error: $*" >&2; exit 1; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
COMMAND="bench/train.sh $*"
MODEL="" BATCH=128 SEQ=128 THREADS=$(nproc) STEPS=12 ROUNDS=3 ENGINES=eager,compile
PYTHON=${BENCH_PYTHON:-bench/.venv/bin/python} SETS=()
DEVICE=cpu PRECISION=f32 COIL_MODES="" THREADS_GIVEN=""
COIL=${COIL:-build/coil}
while (($#)); do
  case $1 in
    --batch|--seq|--threads|--steps|--rounds|--engines|--python|--set|--device|--precision|--coil-modes)
      (($# >= 2)) || die "$1 needs a value" ;;&
    --batch) BATCH=$2; shift 2 ;;
    --seq) SEQ=$2; shift 2 ;;
    --threads) THREADS=$2 THREADS_GIVEN=1; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --engines) ENGINES=$2; shift 2 ;;
    --python) PYTHON=$2; shift 2 ;;
    --set) SETS+=("$2"); shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --precision) PRECISION=$2; shift 2 ;;
    --coil-modes) COIL_MODES=$2; shift 2 ;;
    -h|--help) sed -n '2,24s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) [[ -z $MODEL ]] || die "one model only"; MODEL=$1; shift ;;
  esac
done
[[ -n $MODEL ]] || die "which model? (mlp or gpt2)"
[[ $DEVICE == cpu || $DEVICE == cuda ]] || die "--device $DEVICE: expected cpu or cuda"
[[ $PRECISION == f32 || $PRECISION == bf16 ]] || die "--precision $PRECISION: expected f32 or bf16"
[[ $DEVICE == cpu || -z $THREADS_GIVEN ]] || die "--threads applies to the CPU, not to --device cuda"
[[ -n $COIL_MODES ]] || { [[ $DEVICE == cpu ]] && COIL_MODES=default,max-autotune || COIL_MODES=default; }
for mode in ${COIL_MODES//,/ }; do
  [[ $mode == default || $mode == max-autotune ]] || die "--coil-modes: unknown mode $mode"
done
[[ -x $COIL ]] || die "$COIL is missing: run make first (or set COIL=PATH)"
PY=$(command -v "$PYTHON") || die "--python $PYTHON: no such program"
PATH_MODEL=examples/$MODEL.coil
[[ -f $PATH_MODEL ]] || die "no model $PATH_MODEL"

COIL_SETS=() PEER_SETS=()
for s in ${SETS[@]+"${SETS[@]}"}; do COIL_SETS+=(--set "$s"); PEER_SETS+=(--set "$s"); done
DIMS=(--dim "B=$BATCH") TAG="$MODEL-b$BATCH"
if [[ $MODEL == gpt2 ]]; then DIMS+=(--dim "T=$SEQ"); TAG+="-s$SEQ"; fi
slug() { tr 'A-Z' 'a-z' <<<"$1" | sed 's/[^a-z0-9]\+/-/g; s/^-//; s/-$//'; }
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
VARIANT="" COIL_PRECISION=()
[[ $PRECISION == f32 ]] || VARIANT=-$PRECISION COIL_PRECISION=(--precision "$PRECISION")
COIL_WHERE=(--threads "$THREADS") PEER_WHERE=(--threads "$THREADS" --device "$DEVICE")
if [[ $DEVICE == cuda ]]; then
  GPU=$("$PY" -c 'import sys, torch
if not torch.cuda.is_available(): sys.exit(1)
print(torch.cuda.get_device_name(0))' 2>/dev/null) ||
    die "--device cuda: $PY's torch sees no GPU (torch.cuda.is_available() is False)"
  MACHINE="$GPU (host: $CPU, $(nproc) CPUs)"
  COIL_WHERE=(--device cuda)
  OUT=bench/results/train-$TAG-cuda$VARIANT-$(slug "$GPU")
else
  MACHINE="$CPU ($(nproc) CPUs)"
  OUT=bench/results/train-$TAG-t$THREADS$VARIANT-$(slug "$CPU")
fi
WORK=$(mktemp -d)
CACHE=$WORK/autotune.json
trap 'rm -rf "$WORK"' EXIT

# The median step_ms of coil's step lines after the first 3 steps (all of them when
# there are no more); nothing (and the reason on stderr) when coil train fails.
coil_round() {
  if "$COIL" train "$PATH_MODEL" "${DIMS[@]}" ${COIL_SETS[@]+"${COIL_SETS[@]}"} \
       --loss cross_entropy --synthetic --steps "$STEPS" --log-every 1 --json \
       "${COIL_WHERE[@]}" ${COIL_PRECISION[@]+"${COIL_PRECISION[@]}"} "$@" \
       >"$WORK/coil.out" 2>"$WORK/coil.err"; then
    python3 -c 'import json,statistics,sys
rows=[json.loads(l) for l in sys.stdin if l.startswith("{")]
t=[r["step_ms"] for r in rows if "step_ms" in r]  # the last line is the run summary
print(statistics.median(t[3:] or t))' <"$WORK/coil.out"
  else
    echo "train.sh: coil train${*:+ $*} failed (status $?), not measured this round:" >&2
    tail -n 3 "$WORK/coil.err" | sed 's/^/    /' >&2
  fi
}

declare -A TIMES FAILS
ENGINE_ORDER=() FAILED=0
record() {  # record ENGINE MS: MS empty for a failed round
  [[ " ${ENGINE_ORDER[*]} " == *" $1 "* ]] || ENGINE_ORDER+=("$1")
  if [[ -n $2 ]]; then TIMES[$1]+=" $2"; else FAILS[$1]=$((${FAILS[$1]:-0} + 1)) FAILED=1; fi
}
for ((r = 1; r <= ROUNDS; r++)); do
  echo "round $r/$ROUNDS" >&2
  for mode in ${COIL_MODES//,/ }; do
    if [[ $mode == default ]]; then record coil "$(coil_round)"
    else record coil-max-autotune "$(coil_round --mode max-autotune --cache "$CACHE")"; fi
  done
  "$PY" bench/train_peer.py "$MODEL" --batch "$BATCH" --seq "$SEQ" "${PEER_WHERE[@]}" \
    --precision "$PRECISION" --steps "$STEPS" --engines "$ENGINES" \
    ${PEER_SETS[@]+"${PEER_SETS[@]}"} >"$WORK/peer.out" 2>"$WORK/peer.err" || {
      echo "train.sh: train_peer.py failed (status $?) this round:" >&2
      tail -n 3 "$WORK/peer.err" | sed 's/^/    /' >&2; }
  seen=" "
  while read -r line; do
    read -r engine ms < <(python3 -c 'import json,sys; r=json.loads(sys.argv[1])
print(r["engine"], r.get("median_ms", ""))' "$line")
    record "$engine" "$ms"
    seen+="$engine "
  done < <(grep '^{' "$WORK/peer.out" || true)
  for key in ${ENGINES//,/ }; do  # an engine train_peer.py died before reporting
    engine=torch.compile
    [[ $key != eager ]] || engine=pytorch-eager
    [[ $seen == *" $engine "* ]] || record "$engine" ""
  done
done

median() { python3 -c 'import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
COIL_MS=""
[[ -z ${TIMES[coil]:-} ]] || COIL_MS=$(median ${TIMES[coil]})
PRECISION_NOTE="float32 everywhere"
if [[ $PRECISION == bf16 ]]; then
  PRECISION_NOTE="bf16 autocasting: coil \`--precision bf16\` (each matmul reads its operands"
  PRECISION_NOTE+=" cast to bfloat16, its product cast back to float32); PyTorch"
  PRECISION_NOTE+=" torch.autocast($DEVICE, bfloat16) around the forward and the loss, its"
  PRECISION_NOTE+=" counterpart (matmuls in bfloat16, norms, softmax and the loss in float32,"
  PRECISION_NOTE+=" float32 master weights; autocast keeps a matmul's product in bfloat16)"
fi
TF32_NOTE=""
if [[ $DEVICE == cuda ]]; then
  TF32_NOTE="TF32: off for every engine (coil train has no TF32 switch; PyTorch:"
  TF32_NOTE+=" float32 matmul precision \"highest\", so allow_tf32 is False)."
fi
{
  if [[ $DEVICE == cuda ]]; then WHERE="on $GPU"; else WHERE="$THREADS threads"; fi
  echo "# Training step: $MODEL, batch $BATCH$([[ $MODEL == gpt2 ]] && echo ", seq $SEQ"), $WHERE"
  echo
  echo "Machine: $MACHINE. Date: $(date -u +%Y-%m-%d). Command: \`$COMMAND\`"
  echo
  echo "A step: forward, mean cross-entropy on random targets, backward, global-norm clip, AdamW."
  echo "Median over $ROUNDS alternating rounds of each round's median step ($STEPS steps)."
  echo "Precision: $PRECISION_NOTE.${TF32_NOTE:+ $TF32_NOTE}"
  echo
  echo "| engine | step (ms) | rounds (ms) | coil default's speed-up over it |"
  echo "|---|---|---|---|"
  for engine in "${ENGINE_ORDER[@]}"; do
    failed=${FAILS[$engine]:-0}
    if [[ -z ${TIMES[$engine]:-} ]]; then
      printf '| %s | not measured (%s rounds failed) | | |\n' "$engine" "$failed"; continue
    fi
    ms=$(median ${TIMES[$engine]})
    rounds=$(echo ${TIMES[$engine]} | tr ' ' '/')
    ((failed == 0)) || rounds+=" ($failed failed)"
    speedup="—"
    [[ -z $COIL_MS ]] || speedup=$(python3 -c "print(f'{$ms / $COIL_MS:.2f}x')")
    printf '| %s | %.1f | %s | %s |\n' "$engine" "$ms" "$rounds" "$speedup"
  done
} >"$OUT.md"
# The same figures as JSON, for scripts.
for engine in "${ENGINE_ORDER[@]}"; do
  echo "$engine ${FAILS[$engine]:-0} ${TIMES[$engine]:-}"
done | python3 -c 'import json, statistics, sys
meta = dict(a.split("=", 1) for a in sys.argv[1:])
engines = {}
for line in sys.stdin:
    name, failed, *ms = line.split()
    ms = [float(x) for x in ms]
    engines[name] = {"step_ms": statistics.median(ms) if ms else None, "rounds_ms": ms,
                     "rounds_failed": int(failed)}
print(json.dumps({"meta": meta, "engines": engines}, indent=2))' \
  "model=$MODEL" "batch=$BATCH" "seq=$SEQ" "steps=$STEPS" "rounds=$ROUNDS" \
  "device=$DEVICE" "precision=$PRECISION" "machine=$MACHINE" "command=$COMMAND" \
  "allow_tf32=no" "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$OUT.json"
cat "$OUT.md"
echo "wrote $OUT.md and $OUT.json" >&2
# Exit 1 when an engine failed a round (the report says which, and marks it).
((FAILED == 0)) || { echo "train.sh: not every engine was measured every round" >&2; exit 1; }
