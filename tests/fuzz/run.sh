#!/bin/bash
# run.sh — build coil's libFuzzer harnesses (clang-19, ASan + UBSan) and run them.
# usage: tests/fuzz/run.sh [SECONDS [coil|ir|safetensors|cache|all]]   (default: 60 s each, all)
# Seeds: examples/ and every .coil/.cir/.safetensors under tests/. Crashes land in $FUZZ_DIR/crashes/
# (reproduce one: $FUZZ_DIR/fuzz_coil FILE). FUZZ_DIR defaults to build-fuzz/.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${1:-60}
which=${2:-all}
out=${FUZZ_DIR:-$root/build-fuzz}
cc=${CC:-clang-19}
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
cflags="-std=c11 -D_GNU_SOURCE -DCOIL_HAVE_FRONTEND -O1 -g $san -I$root -I$root/include -I$out/gen"

build() {
    mkdir -p "$out/obj" "$out/gen"
    bison -d -o "$out/gen/parser.c" "$root/frontend/parser.y"
    flex -o "$out/gen/lexer.c" "$root/frontend/lexer.l"
    local objs=() src obj
    # the readers the harnesses drive: ir/, the frontend, and the runtime's file formats (the
    # rest of runtime/ needs codegen, LLVM and OpenBLAS, which no harness exercises)
    for src in "$root"/ir/*.c "$root"/frontend/*.c "$root"/runtime/{safetensors,json,npy}.c \
               "$root"/codegen/autotune/cache.c \
               "$out/gen/parser.c" "$out/gen/lexer.c"; do
        obj="$out/obj/$(basename "$(dirname "$src")")_$(basename "$src" .c).o"
        if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ "$root/ir/ir.h" -nt "$obj" ]; then
            $cc $cflags -fsanitize=fuzzer-no-link -w -c "$src" -o "$obj"
        fi
        objs+=("$obj")
    done
    for h in coil ir safetensors cache; do
        $cc $cflags -fsanitize=fuzzer "$root/tests/fuzz/fuzz_$h.c" "${objs[@]}" -lm -o "$out/fuzz_$h"
    done
}

# A corpus directory seeded with copies of the project's files of one extension.
seed() {
    local name=$1 ext=$2 dir="$out/corpus/$1"
    mkdir -p "$dir"
    find "$root/examples" "$root/tests" -name "*.$ext" -type f 2>/dev/null | while read -r f; do
        cp "$f" "$dir/seed-$(echo "$f" | md5sum | cut -c1-12)"
    done
    echo "$dir"
}

fuzz() {
    local name=$1 ext=$2 corpus
    corpus=$(seed "$name" "$ext")
    mkdir -p "$out/crashes" "$out/run"
    echo "fuzz_$name: $(ls "$corpus" | wc -l) inputs in the corpus, $seconds s"
    # Run in an empty directory: `include` in a .coil input resolves there.
    (cd "$out/run" && timeout $((seconds + 120)) "$out/fuzz_$name" -max_total_time="$seconds" \
        -timeout=20 -rss_limit_mb=3072 -max_len=8192 -print_final_stats=1 \
        $(dict "$name") -artifact_prefix="$out/crashes/$name-" "$corpus" </dev/null)
}

# The token dictionary of a harness, when it has one.
dict() {
    if [ -f "$root/tests/fuzz/$1.dict" ]; then echo "-dict=$root/tests/fuzz/$1.dict"; fi
}

build
case $which in
coil) fuzz coil coil ;;
ir) fuzz ir cir ;;
safetensors) fuzz safetensors safetensors ;;
cache) fuzz cache json ;;
all) fuzz coil coil && fuzz ir cir && fuzz safetensors safetensors && fuzz cache json ;;
*) echo "usage: $0 [SECONDS [coil|ir|safetensors|cache|all]]" >&2; exit 2 ;;
esac
