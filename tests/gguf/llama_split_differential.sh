#!/usr/bin/env bash
# Differential test of split GGUF files against llama.cpp's own llama-gguf-split.
#
#   tests/gguf/llama_split_differential.sh [LLAMA_CPP_DIR] [SAFEWEIGHTS_CLI]
#       (or LLAMA_CPP_DIR=... / SAFEWEIGHTS_CLI=... in the environment; the CLI defaults to build/safeweights)
#
# Uses LLAMA_CPP_DIR/build/bin/llama-gguf-split when it is there, else builds that one target from the
# checkout into a temporary folder. On a model of about 3 MB written here (16 F16 and F32 tensors of
# several sizes, converted by us to GGUF), it checks, byte for byte:
#   - llama-gguf-split --split (by size and by tensor count) of our single-file output == our split;
#   - llama-gguf-split --merge of our split, converted by us to one file (which drops the split.* keys
#     --merge leaves in) == our single-file output;
# and that we open its split from any file as the same model (safeweights diff: identical).
# Exit status 1 on any difference, 2 when it cannot run. CI does not run it (no llama.cpp checkout);
# docs/GGUF.md records the last result. Nothing of llama.cpp is copied into this repository.
set -euo pipefail

src=${1:-${LLAMA_CPP_DIR:-}}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cli=${2:-${SAFEWEIGHTS_CLI:-$root/build/safeweights}}
if [[ -z "$src" || ! -f "$src/examples/gguf-split/gguf-split.cpp" && ! -f "$src/tools/gguf-split/gguf-split.cpp" ]]; then
  echo "usage: $0 LLAMA_CPP_DIR [SAFEWEIGHTS_CLI]   (a llama.cpp checkout with gguf-split)" >&2
  exit 2
fi
[[ -x "$cli" ]] || { echo "no safeweights CLI at $cli" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/llama-split-differential.XXXXXX")
trap 'rm -rf "$work"' EXIT

split_tool=$src/build/bin/llama-gguf-split
if [[ ! -x "$split_tool" ]]; then
  cmake -S "$src" -B "$work/llama" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF >"$work/cmake.log" 2>&1 ||
    { cat "$work/cmake.log" >&2; exit 2; }
  cmake --build "$work/llama" --target llama-gguf-split -j "${JOBS:-2}" >"$work/build.log" 2>&1 || { tail -50 "$work/build.log" >&2; exit 2; }
  split_tool=$work/llama/bin/llama-gguf-split
fi

# The model: a safetensors file (standard library only), converted by us to GGUF.
python3 - "$work/model.safetensors" <<'PY'
import json, struct, sys
tensors, data = {}, b""
def add(name, dtype, shape, size):
    global data
    n = 1
    for d in shape:
        n *= d
    blob = bytes((i * 7 + len(name)) % 251 for i in range(n * size))
    tensors[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
    data += blob
for i, rows in enumerate([96, 700, 64, 300, 1200, 8, 500, 40]):
    add(f"blk.{i}.ffn_down.weight", "F16", [rows, 512], 2)
    add(f"blk.{i}.attn_norm.weight", "F32", [512], 4)
head = json.dumps(tensors, separators=(",", ":")).encode()
head += b" " * (-len(head) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(head)) + head + data)
PY
"$cli" convert "$work/model.safetensors" "$work/whole.gguf" >/dev/null

fail=0
check() {  # check LABEL A B: byte-for-byte equality
  if cmp -s "$2" "$3"; then echo "same:    $1"; else echo "DIFFERS: $1 ($2 vs $3)"; fail=1; fi
}
for mode in "--split-max-size 1M" "--split-max-tensors 3"; do
  rm -f "$work"/ours-* "$work"/theirs-* "$work/merged.gguf" "$work/merged-ours.gguf"
  # shellcheck disable=SC2086
  "$cli" convert "$work/model.safetensors" "$work/ours.gguf" $mode >/dev/null
  # shellcheck disable=SC2086
  "$split_tool" --split $mode "$work/whole.gguf" "$work/theirs" >"$work/split.log" 2>&1 || { cat "$work/split.log" >&2; exit 2; }
  ours=$(cd "$work" && ls ours-*.gguf)
  theirs=$(cd "$work" && ls theirs-*.gguf)
  [[ "$(echo "$ours" | sed 's/^ours/x/')" == "$(echo "$theirs" | sed 's/^theirs/x/')" ]] ||
    { echo "DIFFERS: $mode: file names: ours $(echo $ours) theirs $(echo $theirs)"; fail=1; continue; }
  n=$(echo "$ours" | wc -l)
  for f in $ours; do check "$mode: llama-gguf-split --split == ours: ${f#ours}" "$work/$f" "$work/theirs${f#ours}"; done
  last=$(echo "$theirs" | tail -1)
  if "$cli" diff "$work/whole.gguf" "$work/$last" >"$work/diff.log"; then
    echo "same:    $mode: we read llama-gguf-split's $n files (from the last) as the model"
  else
    echo "DIFFERS: $mode: reading llama-gguf-split's files"; cat "$work/diff.log"; fail=1
  fi
  first=$(echo "$ours" | head -1)
  "$split_tool" --merge "$work/$first" "$work/merged.gguf" >"$work/merge.log" 2>&1 || { cat "$work/merge.log" >&2; exit 2; }
  "$cli" convert "$work/merged.gguf" "$work/merged-ours.gguf" >/dev/null
  check "$mode: llama-gguf-split --merge of ours, split keys dropped == our single file" "$work/merged-ours.gguf" "$work/whole.gguf"
done
exit $fail
