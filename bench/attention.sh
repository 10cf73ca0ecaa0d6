#!/usr/bin/env bash
# attention.sh — attention alone on this CPU: coil's fused attention step (`coil bench` on
# a graph of one attention op) against PyTorch's scaled_dot_product_attention
# (bench/attention_peer.py), and the time its non-masked FLOPs take at the rate of coil's
# GEMM kernels (a 1024 x 1024 x 1024 f32 matmul through `coil bench`, the same threads).
#
#   bench/attention.sh [--threads 2] [--rounds 5] [--runs 20] [--warmup 3]
#                      [--seqs 128,256,512,1024,2048,4096] [--heads 12] [--dim 64]
#                      [--plain] [--python PATH] [--baseline COIL2] [--out FILE.md]
#
# Each round runs, for every T in turn, coil then PyTorch, each in a process of its own,
# and the GEMM once; the table gives each engine's median over the rounds of its per-round
# median latency. q, k, v are [1, H, T, D] contiguous f32, causal unless --plain. The
# non-masked FLOPs: causal, T(T+1)/2 scores per head, each 2D multiply-adds for q.k and
# 2D for p.v (4D FLOPs); plain, T^2 scores. coil is $COIL (default build/coil);
# --baseline times another coil binary too, in the same rounds (one that decomposes
# attention into two GEMMs and a softmax kernel, for the speed-up of fusing it).
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS=2 ROUNDS=5 RUNS=20 WARMUP=3 SEQS=128,256,512,1024,2048,4096 HEADS=12 DIM=64
CAUSAL=true PY=bench/.venv/bin/python OUT= BASELINE=
COIL=${COIL:-build/coil}
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --threads) THREADS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --seqs) SEQS=$2; shift 2 ;;
    --heads) HEADS=$2; shift 2 ;;
    --dim) DIM=$2; shift 2 ;;
    --plain) CAUSAL=false; shift ;;
    --python) PY=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --baseline) BASELINE=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "attention.sh: unknown option '$1'" >&2; usage ;;
  esac
done
for tool in "$COIL" "$PY" ${BASELINE:+"$BASELINE"}; do
  [[ -x $tool ]] || { echo "attention.sh: $tool is not there (build coil; set up bench/.venv: see bench/README.md)" >&2; exit 1; }
done

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat >"$TMP/attn.cir" <<EOF
graph @attention(%q: f32[1,$HEADS,T,$DIM], %k: f32[1,$HEADS,T,$DIM], %v: f32[1,$HEADS,T,$DIM]) -> (y: f32[1,$HEADS,T,$DIM]) {
  %y = attention %q, %k, %v {causal=$CAUSAL} : f32[1,$HEADS,T,$DIM]
  return %y
}
EOF
cat >"$TMP/gemm.cir" <<'EOF'
graph @gemm(%a: f32[1024,1024], %b: f32[1024,1024]) -> (y: f32[1024,1024]) {
  %y = matmul %a, %b : f32[1024,1024]
  return %y
}
EOF
PEER_FLAGS=(--heads "$HEADS" --dim "$DIM" --threads "$THREADS" --runs "$RUNS" --warmup "$WARMUP")
[[ $CAUSAL == true ]] || PEER_FLAGS+=(--plain)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
RAW=$TMP/raw.jsonl
field() { "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]])' "$1"; }
for ((r = 1; r <= ROUNDS; r++)); do
  for T in ${SEQS//,/ }; do
    c=$("$COIL" bench "$TMP/attn.cir" --dim "T=$T" --threads "$THREADS" --runs "$RUNS" \
        --warmup "$WARMUP" --json 2>"$TMP/err" | field median_ms) || { cat "$TMP/err" >&2; exit 1; }
    p=$("$PY" bench/attention_peer.py --seq "$T" "${PEER_FLAGS[@]}" | field median_ms)
    b=null
    if [[ -n $BASELINE ]]; then
      b=$("$BASELINE" bench "$TMP/attn.cir" --dim "T=$T" --threads "$THREADS" --runs "$RUNS" \
          --warmup "$WARMUP" --json 2>"$TMP/err" | field median_ms) || { cat "$TMP/err" >&2; exit 1; }
    fi
    echo "{\"round\": $r, \"seq\": $T, \"coil_ms\": $c, \"sdpa_ms\": $p, \"base_ms\": $b}" >>"$RAW"
  done
  g=$("$COIL" bench "$TMP/gemm.cir" --threads "$THREADS" --runs "$RUNS" --warmup "$WARMUP" --json \
      2>"$TMP/err" | field gflops) || { cat "$TMP/err" >&2; exit 1; }
  echo "{\"round\": $r, \"gemm_gflops\": $g}" >>"$RAW"
  echo "attention.sh: round $r of $ROUNDS done" >&2
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

TABLE=$("$PY" - "$RAW" "$HEADS" "$DIM" "$CAUSAL" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
heads, dim, causal = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "true"
gemm = statistics.median(r["gemm_gflops"] for r in rows if "gemm_gflops" in r)
print(f"coil's GEMM kernels (1024 x 1024 x 1024 f32, median of rounds): {gemm:.1f} GFLOP/s\n")
base = any(r.get("base_ms") is not None for r in rows)
print("| T | coil ms | SDPA ms | coil speed-up over SDPA | non-masked GFLOP | coil GFLOP/s "
      "| FLOPs at GEMM rate, ms | coil / that |" + (" baseline ms | coil speed-up over it |" if base else ""))
print("|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if base else ""))
for t in sorted({r["seq"] for r in rows if "seq" in r}):
    c = statistics.median(r["coil_ms"] for r in rows if r.get("seq") == t)
    p = statistics.median(r["sdpa_ms"] for r in rows if r.get("seq") == t)
    scores = t * (t + 1) / 2 if causal else t * t
    gf = heads * scores * 4 * dim / 1e9
    ideal = gf / gemm * 1e3
    line = (f"| {t} | {c:.3f} | {p:.3f} | {p / c:.2f}x | {gf:.3f} | {gf / (c / 1e3):.1f} "
            f"| {ideal:.3f} | {c / ideal:.2f}x |")
    if base:
        b = statistics.median(r["base_ms"] for r in rows if r.get("seq") == t)
        line += f" {b:.3f} | {b / c:.2f}x |"
    print(line)
EOF
)
REPORT=$(cat <<EOF
Attention alone, B=1, H=$HEADS, D=$DIM, causal=$CAUSAL, f32, $THREADS threads; $ROUNDS alternating
rounds of $RUNS runs after $WARMUP warm-up ($(date -u +%Y-%m-%dT%H:%MZ), $(lscpu | sed -n 's/^Model name: *//p'),
$("$COIL" --version 2>&1 | head -n 1), torch $("$PY" -c 'import torch; print(torch.__version__)');
load average before $LOAD_BEFORE, after $LOAD_AFTER).
Command: COIL=$COIL bench/attention.sh --threads $THREADS --rounds $ROUNDS --runs $RUNS --warmup $WARMUP --seqs $SEQS --heads $HEADS --dim $DIM$([[ $CAUSAL == true ]] || echo " --plain")${BASELINE:+ --baseline $BASELINE}

$TABLE
EOF
)
if [[ -n $OUT ]]; then echo "$REPORT" >"$OUT"; echo "attention.sh: wrote $OUT" >&2; else echo "$REPORT"; fi
