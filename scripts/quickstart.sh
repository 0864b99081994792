#!/usr/bin/env bash
# README command 1: install what the main job needs (not the test, fuzz and benchmark tools), build the
# library, the CLI and the Python package (not the tests), then write a small sample model and look at
# it with the CLI and from Python. Everything it writes goes under build/, so the source tree stays
# clean; scripts/test.sh later adds the rest to the same tree.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

section() { printf '\n==================== %s ====================\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

section "install dependencies (the main job's only)"
bash scripts/install-deps.sh --main

section "build (library, CLI, Python package)"
bash scripts/build.sh -DSAFEWEIGHTS_BUILD_TESTS=OFF -DSAFEWEIGHTS_BUILD_BENCH=OFF

sample=build/demo.safetensors
cli=build/safeweights

section "write a sample model"
run "$cli" sample "$sample"

section "validate"
run "$cli" validate "$sample"

section "inspect"
run "$cli" inspect "$sample"

# Pick a tensor with at least two dimensions straight from the file's JSON header, so this
# script does not depend on how the sample is laid out.
name=$(python3 - "$sample" <<'PY'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(n))
names = [k for k, v in header.items() if k != "__metadata__" and len(v["shape"]) >= 2]
# Prefer a weight matrix, which shows more interesting bytes than a mask.
names.sort(key=lambda k: (not k.endswith(".weight"), k))
print(names[0] if names else "")
PY
)
if [[ -z "$name" ]]; then
  echo "quickstart: the sample has no tensor with two or more dimensions" >&2
  exit 1
fi

section "slice rows 0:2 of $name, columns reversed (raw little-endian bytes)"
printf '$ %s cat %s %s --slice "0:2, ::-1" | od -A d -t x1 | head\n' "$cli" "$sample" "$name"
# Through a file (and sed rather than head) so that no stage of the pipe can die of SIGPIPE.
"$cli" cat "$sample" "$name" --slice "0:2, ::-1" > build/demo-slice.bin
od -A d -t x1 build/demo-slice.bin | sed -n '1,10p'

section "the same file from Python (PYTHONPATH=build/python)"
PYTHONPATH=build/python /usr/bin/python3 - "$sample" "$name" <<'PY'
import sys
from safeweights import safe_open
path, name = sys.argv[1], sys.argv[2]
with safe_open(path, framework="np") as f:
    print(f"{len(f.keys())} tensors, metadata {f.metadata()}")
    t = f.get_tensor(name)
    print(f"{name}: {t.dtype} {t.shape}, zero-copy view (writeable={t.flags.writeable})")
    print(f"{name}[0:2, ::-1] =\n{f.get_slice(name)[0:2, ::-1]}")
PY

section "done"
