#!/usr/bin/env bash
# onnx.sh — ONNX models on this CPU: `coil bench model.onnx` against ONNX Runtime running the
# same file and PyTorch eager running the model it was exported from, same threads, in
# alternating rounds (issue 18's targets: ResNet-50 at B=1 and B=32, BERT-base at B=8, T=128).
#
#   bench/onnx.sh [--configs resnet50:1,resnet50:32,bert-base:8] [--seq 128] [--threads 2]
#                 [--rounds 3] [--runs 5] [--warmup 1] [--engines ort,eager] [--python PATH]
#                 [--out FILE.md]
#
# The models are exported once (bench/onnx_peer.py export: torchvision's ResNet-50 and
# Hugging Face's BERT-base at --seq tokens, random weights, seeded, a dynamic batch) into
# ${COIL_CACHE_DIR:-~/.cache/coil}/bench-onnx/. Each round runs, per config, coil then each
# peer, each in a process of its own; the table gives each engine's median over the rounds
# of its per-round median latency, and coil's compile time. coil is $COIL (default build/coil).
set -euo pipefail
# coil's compile times are cold compiles: its object cache (~/.cache/coil/cpu) stays off
export COIL_CODE_CACHE=0
cd "$(dirname "$0")/.."

CONFIGS=resnet50:1,resnet50:32,bert-base:8 SEQ=128 THREADS=2 ROUNDS=3 RUNS=5 WARMUP=1
ENGINES=ort,eager PY=bench/.venv/bin/python OUT=
COIL=${COIL:-build/coil}
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --configs) CONFIGS=$2; shift 2 ;;
    --seq) SEQ=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --engines) ENGINES=$2; shift 2 ;;
    --python) PY=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "onnx.sh: unknown option '$1'" >&2; usage ;;
  esac
done
for tool in "$COIL" "$PY"; do
  [[ -x $tool ]] || { echo "onnx.sh: $tool is not there (build coil; set up bench/.venv: see bench/README.md)" >&2; exit 1; }
done

CACHE=${COIL_CACHE_DIR:-$HOME/.cache/coil}/bench-onnx
mkdir -p "$CACHE"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
model_file() { # MODEL: the exported file (BERT's at --seq tokens)
  if [[ $1 == bert-base ]]; then echo "$CACHE/$1-s$SEQ.onnx"; else echo "$CACHE/$1.onnx"; fi
}
for cfg in ${CONFIGS//,/ }; do
  m=${cfg%%:*} f=$(model_file "${cfg%%:*}")
  if [[ ! -f $f ]]; then
    echo "onnx.sh: exporting $m to $f" >&2
    "$PY" bench/onnx_peer.py export "$m" "$f.tmp" --seq "$SEQ" 2>"$TMP/err" || { cat "$TMP/err" >&2; exit 1; }
    mv "$f.tmp" "$f"
  fi
done

field() { "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]])' "$1"; }
coil_json() { # MODEL BATCH: coil bench's JSON line on the exported file
  "$COIL" bench "$(model_file "$1")" --dim "batch=$2" --threads "$THREADS" --runs "$RUNS" \
    --warmup "$WARMUP" --json 2>"$TMP/err" | tail -n 1 || { cat "$TMP/err" >&2; return 1; }
}
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
RAW=$TMP/raw.jsonl
for ((r = 1; r <= ROUNDS; r++)); do
  for cfg in ${CONFIGS//,/ }; do
    m=${cfg%%:*} b=${cfg##*:}
    j=$(coil_json "$m" "$b") || exit 1
    echo "{\"round\": $r, \"config\": \"$cfg\", \"engine\": \"coil\", \"median_ms\": $(field median_ms <<<"$j"), \"compile_s\": $(field compile_s <<<"$j")}" >>"$RAW"
    for e in ${ENGINES//,/ }; do
      p=$("$PY" bench/onnx_peer.py time "$m" "$(model_file "$m")" --engine "$e" --batch "$b" \
          --seq "$SEQ" --threads "$THREADS" --runs "$RUNS" --warmup "$WARMUP" 2>"$TMP/err" |
          field median_ms) || { cat "$TMP/err" >&2; p=null; }
      echo "{\"round\": $r, \"config\": \"$cfg\", \"engine\": \"$e\", \"median_ms\": $p}" >>"$RAW"
    done
  done
  echo "onnx.sh: round $r of $ROUNDS done" >&2
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

TABLE=$("$PY" - "$RAW" "$ENGINES" "$SEQ" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
peers, seq = sys.argv[2].split(","), sys.argv[3]
def med(cfg, eng, key="median_ms"):
    v = [r[key] for r in rows if r["config"] == cfg and r["engine"] == eng and r.get(key) is not None]
    return statistics.median(v) if v else None
head = "| model | batch | coil ms | coil compile s |"
head += "".join(f" {p} ms | coil speed-up over {p} |" for p in peers)
print(head)
print("|---|---:|---:|---:|" + "---:|---:|" * len(peers))
for cfg in dict.fromkeys(r["config"] for r in rows):
    m, b = cfg.split(":")
    c = med(cfg, "coil")
    line = f"| {m}{f' (T={seq})' if m == 'bert-base' else ''} | {b} | {c:.1f} | {med(cfg, 'coil', 'compile_s'):.2f} |"
    for p in peers:
        t = med(cfg, p)
        line += " not measured | - |" if t is None else f" {t:.1f} | {t / c:.2f}x |"
    print(line)
EOF
)
REPORT=$(cat <<EOF
ONNX models, f32, $THREADS threads; $ROUNDS alternating rounds of $RUNS runs after $WARMUP warm-up
($(date -u +%Y-%m-%dT%H:%MZ), $(lscpu | sed -n 's/^Model name: *//p'), $("$COIL" --version 2>&1 | head -n 1),
$("$PY" -c 'import torch, onnxruntime; print("torch", torch.__version__, "onnxruntime", onnxruntime.__version__)');
load average before $LOAD_BEFORE, after $LOAD_AFTER).
Command: COIL=$COIL bench/onnx.sh --configs $CONFIGS --seq $SEQ --threads $THREADS --rounds $ROUNDS --runs $RUNS --warmup $WARMUP --engines $ENGINES

$TABLE
EOF
)
if [[ -n $OUT ]]; then echo "$REPORT" >"$OUT"; echo "onnx.sh: wrote $OUT" >&2; else echo "$REPORT"; fi
