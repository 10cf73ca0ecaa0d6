#!/usr/bin/env bash
# bench/autotune.sh MODEL [--batch N] [--seq T] [--threads N] [--runs N] [--set NAME=VALUE]...
#                   [--device cuda]
#
# max-autotune against the default mode on this CPU (or GPU), in one run of this script: with a
# fresh cache, `coil autotune` (tuning time, the table, the JSON report of every
# candidate), then `coil autotune` again (the warm cache: nothing measured), then `coil
# bench --mode max-autotune`, which times the default and the tuned kernels back to back
# in one process. MODEL is mlp, gpt2 or a .coil path; --seq is gpt2's T (default 1024).
# Writes bench/results/autotune-<model>-b<N>[-s<T>]-t<threads>-<cpu>.md and .json (the
# report; -<gpu> instead of -t<threads>-<cpu> with --device cuda). Run it on an idle
# machine: the tuner times kernels one by one.
set -euo pipefail

die() { echo "autotune.sh: error: $*" >&2; exit 1; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
COMMAND="bench/autotune.sh $*"
MODEL="" BATCH=128 SEQ=1024 THREADS=$(nproc) RUNS=10 SETS=() DEVICE=cpu
while (($#)); do
  case $1 in
    --batch) BATCH=$2; shift 2 ;;
    --seq) SEQ=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --set) SETS+=(--set "$2"); shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    -h|--help) sed -n '2,13s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) [[ -z $MODEL ]] || die "one model only"; MODEL=$1; shift ;;
  esac
done
[[ -n $MODEL ]] || die "which model? (mlp, gpt2 or a .coil file)"
[[ -f $MODEL ]] || MODEL=examples/$MODEL.coil
[[ -f $MODEL ]] || die "no model $MODEL"
[[ -x build/coil ]] || die "build/coil is missing: run make first"

NAME=$(basename "$MODEL" .coil)
DIMS=(--dim "B=$BATCH")
TAG="$NAME-b$BATCH"
if grep -q 'T\]' "$MODEL"; then DIMS+=(--dim "T=$SEQ"); TAG+="-s$SEQ"; fi
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
SLUG=$(echo "$CPU" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9]\+/-/g; s/^-//; s/-$//')
OUT=bench/results/autotune-$TAG-t$THREADS-$SLUG
if [[ $DEVICE == cuda ]]; then
  CPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  SLUG=$(echo "$CPU" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9]\+/-/g; s/^-//; s/-$//')
  OUT=bench/results/autotune-$TAG-$SLUG
fi
SETS+=(--device "$DEVICE")
CACHE=$(mktemp -d)/autotune.json
trap 'rm -rf "$(dirname "$CACHE")"' EXIT

run() { echo "+ $*" >&2; "$@"; }
T0=$(date +%s.%N)
COLD=$(run build/coil autotune "$MODEL" "${DIMS[@]}" "${SETS[@]}" --threads "$THREADS" \
       --cache "$CACHE" --report "$OUT.json")
T1=$(date +%s.%N)
WARM=$(run build/coil autotune "$MODEL" "${DIMS[@]}" "${SETS[@]}" --threads "$THREADS" --cache "$CACHE")
T2=$(date +%s.%N)
BENCH=$(run build/coil bench "$MODEL" "${DIMS[@]}" "${SETS[@]}" --threads "$THREADS" \
        --runs "$RUNS" --warmup 1 --mode max-autotune --cache "$CACHE")

{
  echo "# max-autotune against default: $NAME, batch $BATCH, $THREADS threads"
  echo
  echo "Machine: $CPU ($(nproc) CPUs). Date: $(date -u +%Y-%m-%d). Command: \`$COMMAND\`"
  echo
  echo "## Whole model (coil bench --mode max-autotune: default and tuned, back to back)"
  echo
  echo '```'
  echo "$BENCH"
  echo '```'
  echo
  printf '## Tuning (cold cache: %.1f s for the whole command; warm cache: %.1f s)\n\n' \
    "$(echo "$T1 - $T0" | bc)" "$(echo "$T2 - $T1" | bc)"
  echo '```'
  echo "$COLD"
  echo '```'
  echo
  echo "Warm cache (every choice read back, nothing measured):"
  echo
  echo '```'
  echo "$WARM"
  echo '```'
  echo
  echo "Every candidate's configuration and time: $(basename "$OUT.json")."
} > "$OUT.md"
echo "wrote $OUT.md and $OUT.json"
