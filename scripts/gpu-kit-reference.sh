#!/usr/bin/env bash
# scripts/gpu-kit-reference.sh DIR — the CPU results the GPU kit holds the GPU's against,
# computed here with the full build (build/coil, LLVM kernels), which the GPU machine
# cannot build. `make gpu-kit` runs it with DIR = .gpu-kit/reference. Writes:
#   char-gpt2-cpu.jsonl   50 steps of the README's character-level GPT-2
#                         (scripts/gpu/char_gpt2.args) on /usr/share/common-licenses/GPL-3:
#                         one JSON line per step (loss, gradient norm, ...)
#   char-gpt2-cpu.cmd     the command that wrote it
#   char-gpt2-cpu-bf16.jsonl  the same run autocast to bf16 (--precision bf16)
#   onnx/NAME.cir.gz      each exported model of tests/onnx/fixtures/models as the IR it
#                         imports to (`coil dump`, which reads back exactly), since the GPU
#                         machine has no protobuf-c to read .onnx files itself
set -euo pipefail
die() { echo "gpu-kit-reference.sh: error: $*" >&2; exit 1; }
(($# == 1)) || die "usage: scripts/gpu-kit-reference.sh DIR"
DIR=$1
COIL=${COIL:-build/coil}
CORPUS=/usr/share/common-licenses/GPL-3
[[ -x $COIL ]] || die "$COIL is not built (run make build)"
[[ -f $CORPUS ]] || die "$CORPUS is missing (Debian's base-files has it)"
mkdir -p "$DIR"

ARGS=()
while read -r line; do
  [[ -z $line ]] && continue
  read -ra words <<<"$line"
  ARGS+=("${words[@]}")
done <scripts/gpu/char_gpt2.args

echo "$COIL train ${ARGS[*]} --data $CORPUS" >"$DIR/char-gpt2-cpu.cmd"
"$COIL" train "${ARGS[@]}" --data "$CORPUS" >"$DIR/char-gpt2-cpu.jsonl.tmp"
steps=$(grep -c '"step"' "$DIR/char-gpt2-cpu.jsonl.tmp" || true)
((steps >= 50)) || die "the CPU run logged $steps steps, not 50"
mv "$DIR/char-gpt2-cpu.jsonl.tmp" "$DIR/char-gpt2-cpu.jsonl"
echo "gpu-kit-reference.sh: $DIR/char-gpt2-cpu.jsonl ($steps steps on the CPU)"
"$COIL" train "${ARGS[@]}" --data "$CORPUS" --precision bf16 >"$DIR/char-gpt2-cpu-bf16.jsonl.tmp"
mv "$DIR/char-gpt2-cpu-bf16.jsonl.tmp" "$DIR/char-gpt2-cpu-bf16.jsonl"

mkdir -p "$DIR/onnx"
for model in tests/onnx/fixtures/models/*.onnx; do
  name=$(basename "$model" .onnx)
  "$COIL" dump "$model" | gzip -9 >"$DIR/onnx/$name.cir.gz.tmp"
  mv "$DIR/onnx/$name.cir.gz.tmp" "$DIR/onnx/$name.cir.gz"
done
echo "gpu-kit-reference.sh: $DIR/onnx ($(ls "$DIR/onnx" | wc -l) exported models as IR)"
