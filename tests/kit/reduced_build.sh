#!/usr/bin/env bash
# reduced_build.sh — ctest kit/reduced_build: the build a GPU machine makes from `make gpu-kit`
# (no LLVM, OpenBLAS, flex, bison, lit), made here with those tools hidden, then smoke-tested.
#
# usage: tests/kit/reduced_build.sh WORK_DIR [NORMAL_BUILD_DIR]     (from the source root)
#   WORK_DIR gets kit/ (a kit without reference results), bin/ (the PATH it builds with),
#   build/ (the reduced build, from scratch each time) and the runs' outputs. With
#   NORMAL_BUILD_DIR, the kit's parser and lexer are held against the ones it compiled.
set -euo pipefail

if [ $# -lt 1 ]; then
    echo "usage: tests/kit/reduced_build.sh WORK_DIR [NORMAL_BUILD_DIR]" >&2
    exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$1"
work=$(cd "$1" && pwd)
normal=${2:+$(cd "$2" && pwd)}
kit=$work/kit bin=$work/bin build=$work/build
cd "$root"

fail() { echo "kit/reduced_build: FAIL: $*" >&2; exit 1; }
step() { echo "== $* (at ${SECONDS} s)"; }

# A generated file with this machine's paths (#line directives, bison's header guard,
# both derived from where it was written) replaced by a placeholder.
strip_paths() { # file dir
    local guard
    guard=$(printf '%s' "${2#/}" | tr '[:lower:]' '[:upper:]' | sed 's/[^A-Z0-9]/_/g')
    sed -e "s#$2#GEN#g" -e "s#$guard#GEN#g" "$1"
}

# The kit's frontend must be what the normal build compiles, up to those paths.
compare_frontend() { # normal_build_dir
    local f
    for f in parser.c parser.h lexer.c; do
        cmp -s <(strip_paths "$kit/frontend/$f" "$kit/frontend") \
               <(strip_paths "$1/frontend/$f" "$1/frontend") ||
            fail "the kit's $f differs from $1/frontend/$f (beyond paths)"
    done
}

# bin/: a link to every program of the PATH (the first of each name, as a search would find)
# except LLVM's tools, lit, FileCheck, flex, bison, lex and yacc.
hidden_path() {
    local hide='^(llvm.*|FileCheck.*|lit|flex.*|bison.*|lex|yacc|byacc)$' dir prog name
    local -A seen=()
    local links=()
    rm -rf "$bin"
    mkdir -p "$bin"
    local IFS=:
    for dir in $PATH; do
        [ -n "$dir" ] && [ -d "$dir" ] || continue
        for prog in "$dir"/*; do
            name=${prog##*/}
            [ -x "$prog" ] && [ ! -d "$prog" ] && [ -z "${seen[$name]:-}" ] || continue
            seen[$name]=1
            [[ $name =~ $hide ]] || links+=("$prog")
        done
    done
    ln -s -t "$bin" "${links[@]}"
}

# Nothing of LLVM, OpenBLAS, bison or flex in the cache (but the options' own names and help
# lines), in the build files (compile and link commands, the CMake modules configure read)
# or in what coil links.
check_clean() {
    local pattern='llvm|openblas|cblas|bison|flex' found files
    found=$(grep -inE "$pattern" "$build/CMakeCache.txt" |
            grep -vE '^[0-9]+:(//|COIL_(LLVM|OPENBLAS|LIT):BOOL=OFF$)' || true)
    [ -z "$found" ] || fail "the reduced build's CMakeCache.txt mentions them: $found"
    if [ -e "$build/build.ninja" ]; then
        files=("$build/build.ninja")
    else
        files=("$build/CMakeFiles/Makefile.cmake" "$build"/CMakeFiles/*.dir/flags.make
               "$build"/CMakeFiles/*.dir/link.txt)
    fi
    # (CMake's compiler identification reads a module per compiler vendor: IntelLLVM too)
    found=$(grep -ioE "[^ ]*($pattern)[^ ]*" "${files[@]}" | grep -v '/Modules/Compiler/' |
            sort -u | head -n 5 || true)
    [ -z "$found" ] || fail "the reduced build's build files mention them: $found"
    found=$(ldd "$build/coil" | grep -iE 'libLLVM|openblas' || true)
    [ -z "$found" ] || fail "the reduced coil links $found"
}

# The output lines of two `coil run`s ("NAME TYPE sum=S mean_abs=A"; timing lines aside)
# agree: same names and types, numbers within 1e-4 relative (f32 compiled, f64 interpreter).
compare_runs() { # compiled.txt interp.txt
    awk '
        function num(field) { sub(/^[a-z_]+=/, "", field); return field + 0 }
        function close_to(a, b,   d, m) {
            d = a - b; if (d < 0) d = -d
            m = (a < 0 ? -a : a) > (b < 0 ? -b : b) ? (a < 0 ? -a : a) : (b < 0 ? -b : b)
            return d <= 1e-4 * m
        }
        $3 !~ /^sum=/ { next }
        FNR == NR { want[++n] = $0; next }
        {
            split(want[++m], w, " ")
            if (w[1] != $1 || w[2] != $2 || !close_to(num(w[3]), num($3)) ||
                !close_to(num(w[4]), num($4))) {
                print "  compiled:    " want[m] "\n  interpreter: " $0; bad = 1
            }
        }
        END { if (n == 0 || m != n) { print "  " n " outputs compiled, " m " interpreted"; bad = 1 }
              exit bad }
    ' "$1" "$2" || fail "$3: the reduced coil and its interpreter disagree"
}

smoke_run() { # name, coil run arguments
    local name=$1
    shift
    PATH=$bin "$build/coil" run "$@" >"$work/$name.txt" || fail "coil run $* failed"
    PATH=$bin "$build/coil" run "$@" --interp >"$work/$name.interp.txt" ||
        fail "coil run $* --interp failed"
    cat "$work/$name.txt"
    compare_runs "$work/$name.txt" "$work/$name.interp.txt" "$name"
}

# A kit whose SOURCES no longer matches the grammar is refused at configure time.
check_stale_kit() {
    local stale=$work/stale-kit out
    rm -rf "$stale" "$work/stale-build"
    cp -r "$kit" "$stale"
    sed -i -E "s/^[0-9a-f]{64}(  frontend\/lexer\.l)\$/$(printf '%064d' 0)\1/" \
        "$stale/frontend/SOURCES"
    if out=$(PATH=$bin scripts/reduced-build.sh "$work/stale-build" "$stale" 2>&1); then
        fail "a stale kit was accepted"
    fi
    grep -q 'frontend/lexer.l has changed .*run `make gpu-kit` again' <<<"$out" ||
        fail "a stale kit was refused without naming lexer.l: $out"
    rm -rf "$stale" "$work/stale-build"
}

step "a kit in $kit"
bash scripts/gpu-kit.sh --no-reference "$kit"
if [ -n "$normal" ] && [ "$normal/frontend/parser.c" -nt frontend/parser.y ] &&
   [ "$normal/frontend/lexer.c" -nt frontend/lexer.l ]; then
    compare_frontend "$normal"
elif [ -n "$normal" ]; then
    echo "note: $normal/frontend is older than the grammar (not rebuilt): not compared"
fi

step "a PATH without LLVM, lit, FileCheck, flex, bison: $bin"
hidden_path
for tool in llvm-config llvm-config-19 flex bison lex yacc FileCheck lit; do
    [ ! -e "$bin/$tool" ] || fail "$tool is still on the PATH"
done

step "the reduced build, from scratch, in $build"
rm -rf "$build"
PATH=$bin scripts/reduced-build.sh "$build" "$kit" --target coil test_sgemm test_compile \
    test_gpu test_cuda_optim

step "no trace of LLVM, OpenBLAS, bison or flex in it"
check_clean

step "a stale kit is refused"
check_stale_kit

step "smoke runs against the interpreter"
smoke_run mlp examples/mlp.coil --set layers=2 --dim B=4 --seed 1
smoke_run tiny examples/tiny.coil

step "unit tests"
PATH=$bin "$build/test_sgemm" || fail "test_sgemm failed in the reduced build"
PATH=$bin "$build/test_compile" || fail "test_compile failed in the reduced build"

step "the GPU kit's script on the reduced build, here without a GPU"
out=$work/gpu-check
rm -rf "$out"
PATH=$bin scripts/gpu-check.sh --no-build --build "$build" --out "$out" >"$work/gpu-check.txt" 2>&1 ||
    { cat "$work/gpu-check.txt"; fail "scripts/gpu-check.sh failed without a GPU"; }
tail -n 30 "$work/gpu-check.txt"
grep -q '^| stage | result | seconds | detail |$' "$out/summary.md" ||
    fail "gpu-check.sh printed no summary table"
grep -q '^| fixtures | skipped | .*skipped: no GPU' "$out/summary.md" ||
    fail "gpu-check.sh's fixtures stage did not say 'skipped: no GPU'"
! grep -q '| \(FAIL\|STICKY\|TIMEOUT\|pass\) |' "$out/summary.md" ||
    fail "a GPU stage did not skip without a GPU"
(($(ls "$out" | wc -l) <= 8)) || fail "gpu-check.sh wrote more than 8 files into $out"

step "passed"
