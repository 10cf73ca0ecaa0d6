#!/usr/bin/env bash
# resnet18.sh — torchvision's ResNet-18 on this CPU: coil (`coil bench
# examples/resnet18.coil`, the same network with random weights) against PyTorch eager
# (bench/resnet18_peer.py: torchvision.models.resnet18, eval mode), alternating rounds,
# each in a process of its own; the table gives each one's median over the rounds of its
# per-round median latency, and coil's ratio to eager (above 1: coil is faster).
#
#   bench/resnet18.sh [--batch 1] [--threads 2] [--rounds 3] [--runs 10] [--warmup 2]
#                     [--python PATH]
set -euo pipefail
cd "$(dirname "$0")/.."

BATCH=1 THREADS=2 ROUNDS=3 RUNS=10 WARMUP=2 PY=bench/.venv/bin/python
COIL=${COIL:-build/coil}
usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --batch) BATCH=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --python) PY=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "resnet18.sh: unknown option '$1'" >&2; usage ;;
  esac
done
for tool in "$COIL" "$PY"; do
  [[ -x $tool ]] || { echo "resnet18.sh: $tool is not there (build coil; set up bench/.venv with torch and torchvision)" >&2; exit 1; }
done

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
coil_ms=() eager_ms=()
for ((r = 1; r <= ROUNDS; r++)); do
  c=$("$COIL" bench examples/resnet18.coil --dim B="$BATCH" --threads "$THREADS" \
        --runs "$RUNS" --warmup "$WARMUP" | awk '/^latency/ {print $2}')
  e=$("$PY" bench/resnet18_peer.py "$BATCH" "$THREADS" "$RUNS" "$WARMUP")
  echo "round $r: coil $c ms, eager $e ms" >&2
  coil_ms+=("$c") eager_ms+=("$e")
done
c=$(printf '%s\n' "${coil_ms[@]}" | median)
e=$(printf '%s\n' "${eager_ms[@]}" | median)
echo "| ResNet-18, B=$BATCH, $THREADS threads | coil $c ms | PyTorch eager $e ms | coil $(awk -v c="$c" -v e="$e" 'BEGIN {printf "%.2f", e / c}')x eager |"
