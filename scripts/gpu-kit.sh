#!/usr/bin/env bash
# gpu-kit.sh — writes the kit a GPU machine without LLVM, OpenBLAS, flex and bison needs to
# build and check coil (scripts/reduced-build.sh builds it there), at most 16 MiB.
#
# usage: scripts/gpu-kit.sh [--no-reference] [OUT_DIR]      (`make gpu-kit`; OUT_DIR: .gpu-kit,
#        a relative one, and COIL, taken from the repository root)
#   OUT_DIR/frontend/   parser.c, parser.h, lexer.c from bison and flex, as CMake runs them,
#                       and SOURCES: the sha256 of the parser.y and lexer.l they came from
#   OUT_DIR/data/GPL-3  the README's character GPT-2 corpus
#   OUT_DIR/reference/  what scripts/gpu-kit-reference.sh writes there, if it is executable
#                       (CPU results from $COIL, default build/coil, passed on to it;
#                       --no-reference skips it)
#   OUT_DIR/MANIFEST    each file's size and purpose, and the total
set -euo pipefail

readonly LIMIT=$((16 * 1024 * 1024))
readonly CORPUS=/usr/share/common-licenses/GPL-3

die() { echo "gpu-kit: error: $*" >&2; exit 1; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export COIL=${COIL:-build/coil}
reference=yes
out=.gpu-kit
for arg in "$@"; do
    case $arg in
    --no-reference) reference=no ;;
    -*) die "unknown option $arg (usage: scripts/gpu-kit.sh [--no-reference] [OUT_DIR])" ;;
    *) out=$arg ;;
    esac
done
cd "$root"

for tool in bison flex sha256sum; do
    command -v "$tool" >/dev/null || die "$tool not found: install it (\`make setup\` does)"
done
[ -r "$CORPUS" ] || die "$CORPUS not found: it comes with Debian's base-files package"

# Start from nothing, but never delete a folder that is not an earlier kit.
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ] && [ ! -e "$out/MANIFEST" ]; then
    die "$out exists and holds no MANIFEST, so it is not a kit: move it or pick another OUT_DIR"
fi
rm -rf "$out"
mkdir -p "$out/frontend" "$out/data" "$out/reference"
abs=$(cd "$out" && pwd)

# The generated frontend: the options CMake's bison_target and flex_target use (absolute
# paths: #line directives name the grammar), then the hashes CMake checks it against.
bison --defines="$abs/frontend/parser.h" -o "$abs/frontend/parser.c" "$root/frontend/parser.y"
flex -o"$abs/frontend/lexer.c" "$root/frontend/lexer.l"
sha256sum frontend/parser.y frontend/lexer.l >"$out/frontend/SOURCES"

cp "$CORPUS" "$out/data/GPL-3"

hook=scripts/gpu-kit-reference.sh
if [ "$reference" = no ]; then
    echo "gpu-kit: reference results skipped (--no-reference)"
elif [ -x "$hook" ]; then
    [ -x "$COIL" ] || die "$COIL not found: the reference results need it (make build)"
    "$hook" "$out/reference"
elif [ -e "$hook" ]; then
    echo "gpu-kit: $hook is not executable: no reference results" >&2
fi

# What each file is for, by its path in the kit.
purpose() {
    case $1 in
    frontend/parser.c) echo "the .coil parser, $(bison --version | head -n1) from parser.y" ;;
    frontend/parser.h) echo "the parser's tokens and interface (lexer.c includes it)" ;;
    frontend/lexer.c) echo "the .coil lexer, $(flex --version | head -n1) from lexer.l" ;;
    frontend/SOURCES) echo "sha256 of parser.y and lexer.l: CMake refuses a stale kit" ;;
    data/GPL-3) echo "the character GPT-2's training corpus ($CORPUS)" ;;
    reference/*) echo "a CPU reference result from $COIL (scripts/gpu-kit-reference.sh)" ;;
    *) echo "?" ;;
    esac
}

manifest="$out/MANIFEST"
total=0
{
    echo "# coil GPU kit: what a machine without LLVM, OpenBLAS, flex and bison needs"
    echo "# (scripts/gpu-kit.sh; build there with scripts/reduced-build.sh BUILD_DIR $out)"
    while IFS= read -r file; do
        size=$(stat -c %s "$out/$file")
        total=$((total + size))
        printf '%10d  %-30s  %s\n' "$size" "$file" "$(purpose "$file")"
    done < <(cd "$out" && find . -type f ! -name MANIFEST | sed 's|^\./||' | LC_ALL=C sort)
    printf '%10d  %-30s  %s\n' "$total" "total" "bytes, this MANIFEST not included"
} >"$manifest"

all=$(find "$out" -type f -printf '%s\n' | awk '{ n += $1 } END { print n + 0 }')
if [ "$all" -gt "$LIMIT" ]; then
    die "$out holds $all bytes, over the limit of $LIMIT (16 MiB): see $manifest"
fi
echo "gpu-kit: wrote $out ($all bytes, limit $LIMIT); contents in $manifest"
