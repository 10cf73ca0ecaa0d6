#!/bin/bash
# run.sh — coil's libFuzzer harnesses (tests/fuzz/fuzz_NAME.c; clang-19, ASan + UBSan): build
# them and run each for a while, or run one already built (what ctest's fuzz/NAME does).
#
# usage: tests/fuzz/run.sh [SECONDS [NAME|all]]        build into $FUZZ_DIR, run each (60 s)
#        tests/fuzz/run.sh --test NAME SECONDS BUILD    run BUILD/fuzz_NAME (ctest fuzz/NAME)
#
# NAME: coil ir safetensors cache npy package checkpoint tokens graph onnx. FUZZ_DIR defaults to
# build-fuzz/ (clang-19, -DCOIL_FUZZ=ON: the tree `make test-fuzz` makes). The
# corpus of each is BUILD/fuzz/corpus/NAME, seeded from the repository's files (seed() below)
# and kept between runs; a finding stops the run and lands in BUILD/fuzz/crashes/NAME-*:
# reproduce it with BUILD/fuzz_NAME FILE. KEEP_GOING=1 keeps fuzzing past findings (libFuzzer's
# fork mode, FUZZ_JOBS processes), for runs of hours; COIL_FUZZ_LLVM=1 lets fuzz_graph compile
# with LLVM too (inputs whose 9th byte has its top bits set; a few executions a second).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
all="coil ir safetensors cache npy package checkpoint tokens graph onnx"

# The corpus directory of a harness, with the repository's seeds copied in.
seed() { # name dir
    local name=$1 dir=$2 f ext= i
    mkdir -p "$dir"
    case $name in
    coil) ext=coil ;; ir) ext=cir ;; safetensors) ext=safetensors ;; cache) ext=json ;;
    npy) ext=npy ;; package) ext=cir ;; onnx) ext=onnx ;;
    esac
    if [ -n "$ext" ]; then
        find "$root/examples" "$root/tests" -name "*.$ext" -type f -not -path '*/Output/*' |
            while read -r f; do
                if [ "$name" = package ]; then # 2: the input is the package's model.cir
                    { printf '\002'; cat "$f"; } > "$dir/seed-$(echo "$f" | md5sum | cut -c1-12)"
                else
                    cp "$f" "$dir/seed-$(echo "$f" | md5sum | cut -c1-12)"
                fi
            done
    fi
    for f in "$root"/tests/fuzz/crashes/"$name"-*; do # findings kept: re-checked every run
        [ -f "$f" ] && cp "$f" "$dir/kept-$(basename "$f")"
    done
    case $name in
    tokens) # two bytes of choices (width 1, 2, 4; B; T; first batch), then text as tokens
        for f in "$root"/examples/*.coil "$root"/examples/*.cir; do
            for i in 0 1 2; do
                { printf "\\00$i\\037"; cat "$f"; } > "$dir/seed-$i-$(basename "$f")"
            done
        done ;;
    graph) # 8 bytes of seed (little-endian), then how to run: 0, or 0xff (LLVM too)
        for i in $(seq 1 24); do
            printf "\\$(printf %03o "$i")\\000\\000\\000\\000\\000\\000\\000\\000" > "$dir/seed-$i"
        done
        for i in 1 2 3; do
            printf "\\$(printf %03o "$i")\\000\\000\\000\\000\\000\\000\\000\\377" \
                > "$dir/seed-$i-llvm"
        done ;;
    esac
}

dict() { # name build: the token dictionary of a harness, when it has one
    case $1 in
    coil | ir | npy | cache | tokens | safetensors) echo "-dict=$root/tests/fuzz/$1.dict" ;;
    checkpoint) echo "-dict=$root/tests/fuzz/safetensors.dict" ;;
    package) # the manifest's words and the IR's, for model.cir
        cat "$root/tests/fuzz/package.dict" "$root/tests/fuzz/ir.dict" > "$2/fuzz/package.dict"
        echo "-dict=$2/fuzz/package.dict" ;;
    esac
}

# One harness for `seconds`: 0 when it found nothing. The harnesses whose seeds coil must
# write (package, checkpoint) write them into the corpus at start-up ($COIL_FUZZ_SEED_DIR).
run_one() { # name seconds build
    local name=$1 seconds=$2 build bin log rc=0
    build=$(cd "$3" && pwd) bin=$build/fuzz_$1
    local corpus=$build/fuzz/corpus/$name crashes=$build/fuzz/crashes work=$build/fuzz/run-$name
    [ -x "$bin" ] || { echo "run.sh: $bin is not built" >&2; return 2; }
    seed "$name" "$corpus"
    mkdir -p "$crashes" "$work"
    log=$build/fuzz/$name.log
    local opts=(-max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 -max_len=8192
                -print_final_stats=1 -artifact_prefix="$crashes/$name-" $(dict "$name" "$build"))
    if [ "${KEEP_GOING:-0}" = 1 ]; then
        opts+=(-fork="${FUZZ_JOBS:-1}" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
    fi
    echo "fuzz_$name: $(ls "$corpus" | wc -l) inputs in the corpus, $seconds s"
    local stamp=$build/fuzz/.started-$name
    touch "$stamp"
    # In an empty directory: `include` in a .coil input resolves there.
    (cd "$work" && COIL_FUZZ_SEED_DIR=$corpus OPENBLAS_NUM_THREADS=1 \
        timeout $((seconds + 300)) "$bin" "${opts[@]}" "$corpus" </dev/null) > "$log" 2>&1 || rc=$?
    local execs rate found
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    if [ -z "$execs" ]; then # fork mode: its last status line
        execs=$(sed -n 's/^#\([0-9]*\): .*/\1/p' "$log" | tail -1)
    fi
    # what this run saved (fork mode goes on past findings and exits 0)
    found=$(find "$crashes" -name "$name-*" -newer "$stamp" | sort | tr '\n' ' ')
    if [ $rc -ne 0 ] || [ -n "$found" ]; then
        tail -n 60 "$log"
        if [ -z "$found" ]; then
            echo "fuzz_$name: FAILED (exit $rc) without an input to blame: see $log"
        else
            echo "fuzz_$name: FINDING (exit $rc) after ${execs:-?} executions: $found"
            echo "  reproduce: $bin FILE   (the whole log: $log)"
        fi
        return 1
    fi
    echo "fuzz_$name: ${execs:-?} executions (${rate:-?}/s), corpus $(ls "$corpus" | wc -l)," \
         "no findings"
}

if [ "${1:-}" = --test ]; then
    [ $# -eq 4 ] || { echo "usage: $0 --test NAME SECONDS BUILD" >&2; exit 2; }
    run_one "$2" "$3" "$4"
    exit
fi

seconds=${1:-60}
which=${2:-all}
[ "$which" = all ] && which=$all
for name in $which; do
    case " $all " in
    *" $name "*) ;;
    *) echo "usage: $0 [SECONDS [$(echo $all | tr ' ' '|')|all]]" >&2; exit 2 ;;
    esac
done
out=${FUZZ_DIR:-$root/build-fuzz}
cc=${CC:-clang-19}
command -v "$cc" >/dev/null ||
    { echo "run.sh: $cc not found: scripts/setup.sh --fuzz installs clang-19" >&2; exit 1; }
mkdir -p "$out"
cmake -S "$root" -B "$out" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER="$cc" -DCOIL_FUZZ=ON \
      -DCOIL_LIT=OFF > "$out/configure.log" 2>&1 || { cat "$out/configure.log"; exit 1; }
grep -q '^COIL_HAVE_LIBFUZZER:INTERNAL=1' "$out/CMakeCache.txt" ||
    { echo "run.sh: $cc cannot link libFuzzer: scripts/setup.sh --fuzz installs it" >&2; exit 1; }
targets=()
for name in $which; do targets+=(--target "fuzz_$name"); done
cmake --build "$out" -j "${JOBS:-$(nproc)}" "${targets[@]}"
found=0
for name in $which; do
    run_one "$name" "$seconds" "$out" || found=1
done
exit $found
