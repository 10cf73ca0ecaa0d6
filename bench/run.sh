#!/usr/bin/env bash
# bench/run.sh MODEL [--batch N] [--threads N] [--rounds R] [--runs N] [--warmup N]
#                    [--seq T] [--set NAME=VALUE]... [--engines LIST]
#                    [--device cpu|cuda] [--cuda-graphs] [--allow-tf32] [--dtype f32|bf16]
#                    [--python PATH]
#
# Times MODEL (mlp, gpt2, or a path to one of those .coil files) in coil and its peers on
# this machine with the same thread count, alternating: each of R rounds runs
# `build/coil bench MODEL --batch N --threads N --json`, then each peer (bench/peers.py,
# one process per engine). Writes bench/results/<model>-b<N>[-s<T>]-t<threads>-<cpu>.md
# and .json: the median over the rounds of each engine's latency and throughput, and coil's
# speed-up over each peer. --seq is gpt2's sequence length (default 128); --engines picks
# peers from eager,compile,autotune,ort (default all); --runs and --warmup (default 50, 10)
# are the peers'. Sets up bench/.venv (PyTorch, ONNX, ONNX Runtime) when it is missing.
#
# --device cuda runs coil (`--device cuda`, and --cuda-graphs, --allow-tf32 when given)
# and the peers on the first NVIDIA GPU instead (--threads does not apply), writing
# bench/results/<model>-b<N>[-s<T>]-cuda[-graphs][-tf32][-bf16]-<gpu>.{md,json}.
# --dtype bf16 runs every engine in bfloat16: the peers as model.to(torch.bfloat16), coil
# with `coil bench --dtype bf16` (the whole model retyped, kernels computing in f32 and
# storing bf16, as PyTorch's do). --python PATH (or BENCH_PYTHON=PATH) runs the peers in that
# Python as it is, with no venv and no pip: it needs torch (onnx, onnxscript and
# onnxruntime for the ort peer).
set -euo pipefail
# coil's compile times are cold compiles: its object cache (~/.cache/coil/cpu) stays off
export COIL_CODE_CACHE=0

die() { echo "run.sh: error: $*" >&2; exit 1; }
usage() { sed -n '2,22s/^# \{0,1\}//p' "$0"; exit 2; }

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# The command line, for the results; an argument with anything unusual in it is quoted.
COMMAND=bench/run.sh
for arg in "$@"; do
  if [[ $arg =~ ^[A-Za-z0-9_./=,:+-]+$ ]]; then COMMAND+=" $arg"; else COMMAND+=" '$arg'"; fi
done

MODEL="" BATCH=128 THREADS=$(nproc) ROUNDS=3 RUNS=50 WARMUP=10 SEQ=128
ENGINES=eager,compile,autotune,ort
DEVICE=cpu DTYPE=f32 PYTHON=${BENCH_PYTHON:-} THREADS_GIVEN="" GRAPHS=no TF32=no
SETS=()
while (($#)); do
  case $1 in
    --batch|--threads|--rounds|--runs|--warmup|--seq|--set|--engines|--device|--dtype|--python)
      (($# >= 2)) || die "$1 needs a value"
      case $1 in
        --batch) BATCH=$2 ;; --threads) THREADS=$2 THREADS_GIVEN=1 ;; --rounds) ROUNDS=$2 ;;
        --runs) RUNS=$2 ;; --warmup) WARMUP=$2 ;; --seq) SEQ=$2 ;;
        --set) SETS+=(--set "$2") ;; --engines) ENGINES=$2 ;;
        --device) DEVICE=$2 ;; --dtype) DTYPE=$2 ;; --python) PYTHON=$2 ;;
      esac
      shift 2 ;;
    --cuda-graphs) GRAPHS=yes; shift ;;
    --allow-tf32) TF32=yes; shift ;;
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
[[ $DEVICE == cpu || $DEVICE == cuda ]] || die "--device $DEVICE: expected cpu or cuda"
[[ $DTYPE == f32 || $DTYPE == bf16 ]] || die "--dtype $DTYPE: expected f32 or bf16"
if [[ $DEVICE == cpu ]]; then
  [[ $GRAPHS == no ]] || die "--cuda-graphs applies to --device cuda"
  [[ $TF32 == no ]] || die "--allow-tf32 applies to --device cuda"
else
  [[ -z $THREADS_GIVEN ]] || die "--threads applies to the CPU, not to --device cuda"
fi

if [[ $MODEL == *.coil ]]; then MODEL_FILE=$MODEL; else MODEL_FILE=examples/$MODEL.coil; fi
[[ -f $MODEL_FILE ]] || die "no model file $MODEL_FILE"
NAME=$(basename "$MODEL_FILE" .coil)
DIMS=()
if grep -q '^model GPT' "$MODEL_FILE"; then DIMS=(--dim "T=$SEQ"); fi
if [[ $DEVICE == cpu ]] && ((THREADS > $(nproc))); then
  echo "run.sh: warning: $THREADS threads on $(nproc) CPUs: timings will mean little" >&2
fi

# ---------------------------------------------------------------- the peers' Python
VENV=bench/.venv
PY=$VENV/bin/python
PACKAGES=(torch onnx onnxscript onnxruntime numpy)
have_peers() { [[ -x $PY ]] && "$PY" -c 'import torch, onnx, onnxscript, onnxruntime, numpy' 2>/dev/null; }
if [[ -n $PYTHON ]]; then
  # A Python given is used as it is: the GPU machine has no network, so no pip.
  PY=$(command -v "$PYTHON") || die "--python $PYTHON: no such program"
  "$PY" -c 'import torch' 2>/dev/null || die "$PY cannot import torch, which the peers need"
  for module in onnx onnxscript onnxruntime numpy; do
    "$PY" -c "import $module" 2>/dev/null ||
      echo "run.sh: warning: $PY lacks $module: the ort peer will be marked not measured" >&2
  done
elif ! have_peers; then
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
COIL=${COIL:-build/coil}  # the coil binary (another build: COIL=DIR/coil)
COIL_VERSION="not built"
if [[ ! -x $COIL ]]; then
  echo "run.sh: $COIL is not built (run make): coil will be marked not measured," \
       "and the peers' GFLOP/s left blank (the FLOPs come from coil check)" >&2
else
  COIL_VERSION=$("$COIL" --version 2>&1 | head -n 1) || COIL_VERSION="unknown version"
fi

slug() { tr 'A-Z' 'a-z' <<<"$1" | tr -cs 'a-z0-9' '-' | sed 's/^-//; s/-$//'; }
CPU=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
CPU=${CPU:-unknown CPU}
SLUG=$(slug "$CPU")
[[ -n $SLUG && $SLUG != unknown-cpu ]] || SLUG=$(hostname)
SEQ_TAG="" SEQ_META=()
if ((${#DIMS[@]})); then SEQ_TAG=-s$SEQ SEQ_META=(--meta "seq=$SEQ"); fi

# ---------------------------------------------------------------- the GPU
# The GPU's name is that of torch's cuda:0, the device the peers use; coil's "first
# NVIDIA GPU" is CUDA's device 0 too, where nvidia-smi may number the GPUs otherwise.
gpu_name() {
  "$PY" -c 'import sys, torch
if not torch.cuda.is_available(): sys.exit(1)
print(torch.cuda.get_device_name(0))' 2>/dev/null && return
  local smi="not installed"
  if command -v nvidia-smi >/dev/null; then smi=$(nvidia-smi -L 2>&1 | head -n 1); fi
  die "--device cuda: no NVIDIA GPU here that the peers' PyTorch can use" \
      "(torch.cuda.is_available() is False in $PY; nvidia-smi: $smi)"
}
# Where the engines run: coil's and the peers' arguments, the results' name and meta.
WHERE=t$THREADS VARIANT=""
COIL_WHERE=(--threads "$THREADS") PEER_WHERE=(--threads "$THREADS")
DEVICE_META=(--meta "device=$DEVICE" --meta "dtype=$DTYPE")
if [[ $DEVICE == cuda ]]; then
  GPU=$(gpu_name) || exit 1
  DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null |
           head -n 1) || DRIVER=""
  SLUG=$(slug "$GPU") WHERE=cuda
  COIL_WHERE=(--device cuda) PEER_WHERE=(--device cuda)
  if [[ $GRAPHS == yes ]]; then COIL_WHERE+=(--cuda-graphs) VARIANT+=-graphs; fi
  if [[ $TF32 == yes ]]; then
    COIL_WHERE+=(--allow-tf32) PEER_WHERE+=(--allow-tf32) VARIANT+=-tf32
  fi
  DEVICE_META+=(--meta "gpu=$GPU" --meta "gpu_driver=$DRIVER"
                --meta "allow_tf32=$TF32" --meta "coil_flags=${COIL_WHERE[*]}")
fi
if [[ $DTYPE != f32 ]]; then VARIANT+=-$DTYPE; fi
OUT=bench/results/$NAME-b$BATCH$SEQ_TAG-$WHERE$VARIANT-$SLUG

RAW=$(mktemp -d /tmp/coil-bench.XXXXXX)
trap 'rm -rf "$RAW"' EXIT

# ---------------------------------------------------------------- the rounds
coil_cmd=("$COIL" bench "$MODEL_FILE" --batch "$BATCH" "${COIL_WHERE[@]}" --dtype "$DTYPE"
          --json "${DIMS[@]}" "${SETS[@]}")
peer_cmd=("$PY" bench/peers.py "$MODEL_FILE" --batch "$BATCH" "${PEER_WHERE[@]}"
          --runs "$RUNS" --warmup "$WARMUP" --seq "$SEQ" --dtype "$DTYPE" "${SETS[@]}")
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
THREADS_META=()
[[ $DEVICE == cuda ]] || THREADS_META=(--meta "threads=$THREADS")
"$PY" bench/report.py "$RAW" "$OUT" \
  --meta "model=$NAME" --meta "batch=$BATCH" "${THREADS_META[@]}" \
  --meta "rounds=$ROUNDS" --meta "runs=$RUNS" --meta "warmup=$WARMUP" \
  --meta "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" --meta "cpu=$CPU" \
  --meta "cpus=$(nproc)" --meta "host=$(hostname)" \
  --meta "coil_version=$COIL_VERSION" --meta "command=$COMMAND" "${SEQ_META[@]}" \
  "${DEVICE_META[@]}"
