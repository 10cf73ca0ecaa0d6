#!/usr/bin/env bash
# bench/run.sh MODEL [--batch N] [--threads N] [--rounds R] [--runs N] [--warmup N]
#                    [--seq T] [--set NAME=VALUE]... [--engines LIST]
#
# Times MODEL (mlp, gpt2, or a path to one of those .coil files) in coil and its peers on
# this machine with the same thread count, alternating: each of R rounds runs
# `build/coil bench MODEL --batch N --threads N --json`, then each peer (bench/peers.py,
# one process per engine). Writes bench/results/<model>-b<N>[-s<T>]-t<threads>-<cpu>.md
# and .json: the median over the rounds of each engine's latency and throughput, and coil's
# speed-up over each peer. --seq is gpt2's sequence length (default 128); --engines picks
# peers from eager,compile,autotune,ort (default all); --runs and --warmup (default 50, 10)
# are the peers'. Sets up bench/.venv (PyTorch, ONNX, ONNX Runtime) when it is missing.
set -euo pipefail

die() { echo "run.sh: error: $*" >&2; exit 1; }
usage() { sed -n '2,12s/^# \{0,1\}//p' "$0"; exit 2; }

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# The command line, for the results; an argument with anything unusual in it is quoted.
COMMAND=bench/run.sh
for arg in "$@"; do
  if [[ $arg =~ ^[A-Za-z0-9_./=,:+-]+$ ]]; then COMMAND+=" $arg"; else COMMAND+=" '$arg'"; fi
done

MODEL="" BATCH=128 THREADS=$(nproc) ROUNDS=3 RUNS=50 WARMUP=10 SEQ=128
ENGINES=eager,compile,autotune,ort
SETS=()
while (($#)); do
  case $1 in
    --batch|--threads|--rounds|--runs|--warmup|--seq|--set|--engines)
      (($# >= 2)) || die "$1 needs a value"
      case $1 in
        --batch) BATCH=$2 ;; --threads) THREADS=$2 ;; --rounds) ROUNDS=$2 ;;
        --runs) RUNS=$2 ;; --warmup) WARMUP=$2 ;; --seq) SEQ=$2 ;;
        --set) SETS+=(--set "$2") ;; --engines) ENGINES=$2 ;;
      esac
      shift 2 ;;
    -h|--help) usage ;;
    -*) die "unknown option $1 (see bench/run.sh --help)" ;;
    *) [[ -z $MODEL ]] || die "one model at a time"; MODEL=$1; shift ;;
  esac
done
[[ -n $MODEL ]] || usage
for n in "$BATCH" "$THREADS" "$ROUNDS" "$RUNS" "$SEQ"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "'$n' is not a positive integer"
done
[[ $WARMUP =~ ^[0-9]+$ ]] || die "--warmup '$WARMUP' is not an integer"

if [[ $MODEL == *.coil ]]; then MODEL_FILE=$MODEL; else MODEL_FILE=examples/$MODEL.coil; fi
[[ -f $MODEL_FILE ]] || die "no model file $MODEL_FILE"
NAME=$(basename "$MODEL_FILE" .coil)
DIMS=()
if grep -q '^model GPT' "$MODEL_FILE"; then DIMS=(--dim "T=$SEQ"); fi
if ((THREADS > $(nproc))); then
  echo "run.sh: warning: $THREADS threads on $(nproc) CPUs: timings will mean little" >&2
fi

# ---------------------------------------------------------------- the peers' venv
VENV=bench/.venv
PY=$VENV/bin/python
PACKAGES=(torch onnx onnxscript onnxruntime numpy)
have_peers() { [[ -x $PY ]] && "$PY" -c 'import torch, onnx, onnxscript, onnxruntime, numpy' 2>/dev/null; }
if ! have_peers; then
  echo "run.sh: setting up $VENV with ${PACKAGES[*]} (a few GB; minutes)" >&2
  BASE=$(command -v python3.11 || command -v python3) || die "no python3 on PATH"
  "$BASE" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "$BASE is older than Python 3.10"
  [[ -x $PY ]] || "$BASE" -m venv "$VENV" \
    || die "could not create $VENV (on Debian: apt-get install python3-venv)"
  # pip talks on stderr here: stdout is the report's.
  "$PY" -m pip install --quiet --upgrade pip >&2 || die "pip could not upgrade itself"
  # PyPI's torch for Linux is the CUDA build; it runs on the CPU alike. With a CPU-only
  # wheel index at hand, TORCH_INDEX_URL=that-index makes the venv a few GB smaller.
  if [[ -n ${TORCH_INDEX_URL:-} ]]; then
    "$PY" -m pip install --index-url "$TORCH_INDEX_URL" torch >&2 \
      || die "pip could not install torch from $TORCH_INDEX_URL"
  fi
  "$PY" -m pip install "${PACKAGES[@]}" >&2 || die "pip could not install ${PACKAGES[*]}"
  have_peers || die "$VENV still lacks one of ${PACKAGES[*]}"
fi

# ---------------------------------------------------------------- coil
COIL=build/coil
COIL_VERSION="not built"
if [[ ! -x $COIL ]]; then
  echo "run.sh: $COIL is not built (run make): coil will be marked not measured," \
       "and the peers' GFLOP/s left blank (the FLOPs come from coil check)" >&2
else
  COIL_VERSION=$("$COIL" --version 2>&1 | head -n 1) || COIL_VERSION="unknown version"
fi

CPU=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
CPU=${CPU:-unknown CPU}
SLUG=$(tr 'A-Z' 'a-z' <<<"$CPU" | tr -cs 'a-z0-9' '-' | sed 's/^-//; s/-$//')
[[ -n $SLUG && $SLUG != unknown-cpu ]] || SLUG=$(hostname)
SEQ_TAG="" SEQ_META=()
if ((${#DIMS[@]})); then SEQ_TAG=-s$SEQ SEQ_META=(--meta "seq=$SEQ"); fi
OUT=bench/results/$NAME-b$BATCH$SEQ_TAG-t$THREADS-$SLUG

RAW=$(mktemp -d /tmp/coil-bench.XXXXXX)
trap 'rm -rf "$RAW"' EXIT

# ---------------------------------------------------------------- the rounds
coil_cmd=("$COIL" bench "$MODEL_FILE" --batch "$BATCH" --threads "$THREADS" --json
          "${DIMS[@]}" "${SETS[@]}")
peer_cmd=("$PY" bench/peers.py "$MODEL_FILE" --batch "$BATCH" --threads "$THREADS"
          --runs "$RUNS" --warmup "$WARMUP" --seq "$SEQ" "${SETS[@]}")
for ((r = 1; r <= ROUNDS; r++)); do
  echo "run.sh: round $r/$ROUNDS: coil" >&2
  if [[ ! -x $COIL ]]; then
    echo "$COIL is not built" >"$RAW/coil-r$r.err"
  elif "${coil_cmd[@]}" >"$RAW/coil-r$r.json" 2>"$RAW/coil-r$r.stderr"; then
    :
  else
    status=$?
    { echo "\`${coil_cmd[*]}\` exited with status $status:";
      head -c 300 "$RAW/coil-r$r.stderr"; } >"$RAW/coil-r$r.err"
    echo "run.sh: coil bench failed, so coil is not measured this round:" >&2
    sed 's/^/    /' "$RAW/coil-r$r.err" >&2
  fi
  for engine in ${ENGINES//,/ }; do
    echo "run.sh: round $r/$ROUNDS: $engine" >&2
    if "${peer_cmd[@]}" --engines "$engine" >"$RAW/peer.out" 2>"$RAW/peer.err"; then
      :
    else
      status=$?
      echo "run.sh: peer $engine failed this round (status $status):" >&2
      tail -n 5 "$RAW/peer.err" | sed 's/^/    /' >&2
      # peers.py reports an engine's failure as a JSON line; if it died before, say so.
      [[ -s $RAW/peer.out ]] ||
        printf '{"engine": "%s", "error": "peers.py exited with status %s"}\n' \
          "$engine" "$status" >"$RAW/peer.out"
    fi
    cat "$RAW/peer.out" >>"$RAW/peers-r$r.jsonl"
  done
done

# ---------------------------------------------------------------- the report
"$PY" bench/report.py "$RAW" "$OUT" \
  --meta "model=$NAME" --meta "batch=$BATCH" --meta "threads=$THREADS" \
  --meta "rounds=$ROUNDS" --meta "runs=$RUNS" --meta "warmup=$WARMUP" \
  --meta "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" --meta "cpu=$CPU" \
  --meta "cpus=$(nproc)" --meta "host=$(hostname)" \
  --meta "coil_version=$COIL_VERSION" --meta "command=$COMMAND" "${SEQ_META[@]}"
