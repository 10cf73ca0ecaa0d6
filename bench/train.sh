#!/usr/bin/env bash
# bench/train.sh MODEL [--batch N] [--seq T] [--threads N] [--steps N] [--rounds R]
#                      [--set NAME=VALUE]... [--engines eager,compile]
#
# A training step (forward, mean cross-entropy against random targets, backward, AdamW
# with clipping) in coil (`coil train --synthetic`, default and max-autotune modes) and in
# PyTorch (bench/train_peer.py: eager, torch.compile) on this CPU with the same threads,
# alternating for R rounds (default 3). Each engine's figure is the median step time of a
# round (coil: over its JSON progress lines after the first 3 steps), then the median over
# rounds. Writes bench/results/train-<model>-b<N>[-s<T>]-t<threads>-<cpu>.md. Needs
# bench/.venv (bench/run.sh sets it up) or --python PATH with torch.
set -euo pipefail

die() { echo "train.sh: error: $*" >&2; exit 1; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
COMMAND="bench/train.sh $*"
MODEL="" BATCH=128 SEQ=128 THREADS=$(nproc) STEPS=12 ROUNDS=3 ENGINES=eager,compile
PYTHON=${BENCH_PYTHON:-bench/.venv/bin/python} SETS=()
while (($#)); do
  case $1 in
    --batch) BATCH=$2; shift 2 ;;
    --seq) SEQ=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --engines) ENGINES=$2; shift 2 ;;
    --python) PYTHON=$2; shift 2 ;;
    --set) SETS+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,12s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) [[ -z $MODEL ]] || die "one model only"; MODEL=$1; shift ;;
  esac
done
[[ -n $MODEL ]] || die "which model? (mlp or gpt2)"
[[ -x build/coil ]] || die "build/coil is missing: run make first"
PATH_MODEL=examples/$MODEL.coil
[[ -f $PATH_MODEL ]] || die "no model $PATH_MODEL"

COIL_SETS=() PEER_SETS=()
for s in "${SETS[@]}"; do COIL_SETS+=(--set "$s"); PEER_SETS+=(--set "$s"); done
DIMS=(--dim "B=$BATCH") TAG="$MODEL-b$BATCH"
if [[ $MODEL == gpt2 ]]; then DIMS+=(--dim "T=$SEQ"); TAG+="-s$SEQ"; fi
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
SLUG=$(echo "$CPU" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9]\+/-/g; s/^-//; s/-$//')
OUT=bench/results/train-$TAG-t$THREADS-$SLUG.md
CACHE=$(mktemp -d)/autotune.json
trap 'rm -rf "$(dirname "$CACHE")"' EXIT

# The median step_ms of coil's JSON lines after the first 3 steps.
coil_round() {
  build/coil train "$PATH_MODEL" "${DIMS[@]}" "${COIL_SETS[@]}" --loss cross_entropy --synthetic \
    --steps "$STEPS" --log-every 1 --json --threads "$THREADS" "$@" |
    python3 -c 'import json,statistics,sys
t=[json.loads(l)["step_ms"] for l in sys.stdin if l.startswith("{")][3:]
print(statistics.median(t))'
}

declare -A TIMES
for ((r = 1; r <= ROUNDS; r++)); do
  echo "round $r/$ROUNDS" >&2
  TIMES[coil]+=" $(coil_round)"
  TIMES[coil-max-autotune]+=" $(coil_round --mode max-autotune --cache "$CACHE")"
  while read -r line; do
    engine=$(echo "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)["engine"])')
    ms=$(echo "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')
    TIMES[$engine]+=" $ms"
  done < <("$PYTHON" bench/train_peer.py "$MODEL" --batch "$BATCH" --seq "$SEQ" \
             --threads "$THREADS" --steps "$STEPS" --engines "$ENGINES" "${PEER_SETS[@]/#/}" 2>/dev/null)
done

median() { python3 -c 'import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
COIL_MS=$(median ${TIMES[coil]})
{
  echo "# Training step: $MODEL, batch $BATCH$([[ $MODEL == gpt2 ]] && echo ", seq $SEQ"), $THREADS threads"
  echo
  echo "Machine: $CPU ($(nproc) CPUs). Date: $(date -u +%Y-%m-%d). Command: \`$COMMAND\`"
  echo
  echo "A step: forward, mean cross-entropy on random targets, backward, global-norm clip, AdamW."
  echo "Median over $ROUNDS alternating rounds of each round's median step ($STEPS steps)."
  echo
  echo "| engine | step (ms) | rounds (ms) | coil default's speed-up over it |"
  echo "|---|---|---|---|"
  for engine in coil coil-max-autotune pytorch-eager torch.compile; do
    [[ -n ${TIMES[$engine]:-} ]] || continue
    ms=$(median ${TIMES[$engine]})
    printf '| %s | %.1f | %s | %.2fx |\n' "$engine" "$ms" "$(echo ${TIMES[$engine]} | tr ' ' '/')" \
      "$(python3 -c "print($ms / $COIL_MS)")"
  done
} > "$OUT"
cat "$OUT"
echo "wrote $OUT" >&2
