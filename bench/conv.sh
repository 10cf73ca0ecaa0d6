#!/usr/bin/env bash
# conv.sh — ResNet-style convolution layers alone on this CPU: coil's conv step (`coil bench`
# on a graph of one conv, a GEMM over x's im2col windows), the same graph decomposed
# (`coil opt --passes=verify,decompose`: im2col by gathers, then a GEMM: what coil ran
# before conv was an op), and PyTorch eager's F.conv2d (bench/conv_peer.py).
#
#   bench/conv.sh [--threads 2] [--rounds 5] [--runs 20] [--warmup 3] [--python PATH]
#                 [--out FILE.md]
#
# Layers (N=1, f32, NCHW): 3x3 C=64 -> 64 on 56x56 with padding 1; 1x1 C=64 -> 256 on
# 56x56; the 3x3 again with bias and ReLU (coil: the GEMM's fused epilogue). Each round
# runs, for every layer in turn, coil, the decomposed graph and PyTorch, each in a process
# of its own; the table gives each one's median over the rounds of its per-round median.
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS=2 ROUNDS=5 RUNS=20 WARMUP=3 PY=bench/.venv/bin/python OUT=
COIL=${COIL:-build/coil}
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --threads) THREADS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --python) PY=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "conv.sh: unknown option '$1'" >&2; usage ;;
  esac
done
for tool in "$COIL" "$PY"; do
  [[ -x $tool ]] || { echo "conv.sh: $tool is not there (build coil; set up bench/.venv: see bench/README.md)" >&2; exit 1; }
done

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# name | IR body | conv_peer.py flags
cat >"$TMP/3x3.cir" <<'IR'
graph @conv3x3(%x: f32[1,64,56,56], %w: f32[64,64,3,3]) -> (y: f32[1,64,56,56]) {
  %y = conv %x, %w {padding=[1]} : f32[1,64,56,56]
  return %y
}
IR
cat >"$TMP/1x1.cir" <<'IR'
graph @conv1x1(%x: f32[1,64,56,56], %w: f32[256,64,1,1]) -> (y: f32[1,256,56,56]) {
  %y = conv %x, %w : f32[1,256,56,56]
  return %y
}
IR
cat >"$TMP/3x3-bias-relu.cir" <<'IR'
graph @conv3x3_bias_relu(%x: f32[1,64,56,56], %w: f32[64,64,3,3], %b: f32[1,64,1,1]) -> (y: f32[1,64,56,56]) {
  %c = conv %x, %w {padding=[1]} : f32[1,64,56,56]
  %cb = add %c, %b : f32[1,64,56,56]
  %y = relu %cb : f32[1,64,56,56]
  return %y
}
IR
declare -A PEER=(
  [3x3]="--channels 64 --out-channels 64 --size 56 --kernel 3 --padding 1"
  [1x1]="--channels 64 --out-channels 256 --size 56 --kernel 1"
  [3x3-bias-relu]="--channels 64 --out-channels 64 --size 56 --kernel 3 --padding 1 --bias-relu"
)
LAYERS="3x3 1x1 3x3-bias-relu"
for l in $LAYERS; do
  "$COIL" opt "$TMP/$l.cir" --passes=verify,decompose >"$TMP/$l-dec.cir"
done
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
RAW=$TMP/raw.jsonl
field() { "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]])' "$1"; }
# "median min" of one process's runs
pair() { "$PY" -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(d["median_ms"], d["min_ms"])'; }
bench() { "$COIL" bench "$1" --threads "$THREADS" --runs "$RUNS" --warmup "$WARMUP" --json 2>"$TMP/err" | pair || { cat "$TMP/err" >&2; exit 1; }; }
for ((r = 1; r <= ROUNDS; r++)); do
  for l in $LAYERS; do
    read -r c cm < <(bench "$TMP/$l.cir")
    read -r d dm < <(bench "$TMP/$l-dec.cir")
    # shellcheck disable=SC2086
    read -r p pm < <("$PY" bench/conv_peer.py ${PEER[$l]} --threads "$THREADS" --runs "$RUNS" --warmup "$WARMUP" | pair)
    echo "{\"round\": $r, \"layer\": \"$l\", \"coil_ms\": $c, \"dec_ms\": $d, \"torch_ms\": $p, \"coil_min\": $cm, \"dec_min\": $dm, \"torch_min\": $pm}" >>"$RAW"
  done
  echo "conv.sh: round $r of $ROUNDS done" >&2
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

TABLE=$("$PY" - "$RAW" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
flops = {"3x3": 2 * 64 * 56 * 56 * 64 * 9, "1x1": 2 * 256 * 56 * 56 * 64,
         "3x3-bias-relu": 2 * 64 * 56 * 56 * 64 * 9}
for what, pick, agg in (("median over the rounds of each process's median", "_ms", statistics.median),
                        ("minimum over every run (the least disturbed)", "_min", min)):
    print(f"\n{what}:\n")
    print("| layer | coil conv step ms | coil GFLOP/s | decomposed (gathers + GEMM) ms | PyTorch eager ms "
          "| coil speed-up over PyTorch | over decomposed |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for l in ["3x3", "1x1", "3x3-bias-relu"]:
        val = lambda k: agg(r[k + pick] for r in rows if r["layer"] == l)
        c, d, p = val("coil"), val("dec"), val("torch")
        print(f"| {l} | {c:.3f} | {flops[l] / c / 1e6:.1f} | {d:.3f} | {p:.3f} | {p / c:.2f}x | {d / c:.2f}x |")
PYEOF
)
REPORT=$(cat <<EOF
Convolution layers alone, N=1, 56x56, f32, $THREADS threads; $ROUNDS alternating rounds of $RUNS runs
after $WARMUP warm-up ($(date -u +%Y-%m-%dT%H:%MZ), $(lscpu | sed -n 's/^Model name: *//p'),
$("$COIL" --version 2>&1 | head -n 1), torch $("$PY" -c 'import torch; print(torch.__version__)');
load average before $LOAD_BEFORE, after $LOAD_AFTER).
Command: COIL=$COIL bench/conv.sh --threads $THREADS --rounds $ROUNDS --runs $RUNS --warmup $WARMUP

$TABLE
EOF
)
if [[ -n $OUT ]]; then echo "$REPORT" >"$OUT"; echo "conv.sh: wrote $OUT" >&2; else echo "$REPORT"; fi
