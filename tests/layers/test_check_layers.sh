#!/bin/sh
# test_check_layers.sh — the layer check catches what it is for: a header included from a
# layer above, and a call into a layer above that no header shows (a local prototype).
# Usage: test_check_layers.sh SOURCE_DIR NM CC [--layer NAME OBJS]...  (the built objects)
set -eu
src=$1 nm=$2 cc=$3
shift 3
check=$src/tests/layers/check_layers.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_check_layers: $*" >&2; exit 1; }

# The tree as it is passes, headers and (given the objects) symbols.
python3 "$check" --source "$src" --nm "$nm" "$@" || fail "the source tree itself breaks the layers"

# ir including a pass's header.
mkdir -p "$tmp/tree/ir" "$tmp/tree/passes"
printf '#include "passes/passes.h"\n' > "$tmp/tree/ir/bad.c"
if python3 "$check" --source "$tmp/tree" 2> "$tmp/err"; then fail "an upward include passed"; fi
grep -q 'ir/bad.c (ir) includes "passes/passes.h" (passes' "$tmp/err" || fail "message: $(cat "$tmp/err")"

# ir calling into passes through its own prototype: only the symbols show it.
mkdir -p "$tmp/obj"
printf 'int pass_thing(void);\nint ir_thing(void) { return pass_thing(); }\n' > "$tmp/obj/a.c"
printf 'int pass_thing(void) { return 1; }\n' > "$tmp/obj/b.c"
"$cc" -c "$tmp/obj/a.c" -o "$tmp/obj/a.o"
"$cc" -c "$tmp/obj/b.c" -o "$tmp/obj/b.o"
rm "$tmp/tree/ir/bad.c"
if python3 "$check" --source "$tmp/tree" --nm "$nm" --layer ir "$tmp/obj/a.o" \
    --layer passes "$tmp/obj/b.o" 2> "$tmp/err"; then fail "an upward call passed"; fi
grep -q '(ir) uses pass_thing, defined in passes' "$tmp/err" || fail "message: $(cat "$tmp/err")"
# and downward is fine
python3 "$check" --source "$tmp/tree" --nm "$nm" --layer passes "$tmp/obj/a.o" \
    --layer ir "$tmp/obj/b.o" || fail "a downward call was refused"
echo "test_check_layers: upward includes and calls refused, downward ones accepted"
