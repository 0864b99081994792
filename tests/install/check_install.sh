#!/usr/bin/env bash
# Installs a safeweights build into a temporary prefix and builds a program outside the project against
# it, the ways a user would:
#   1. find_package(safeweights CONFIG REQUIRED) -> safeweights::safeweights (shared)
#   2. the same with safeweights::safeweights_static
#   3. g++ $(pkg-config --cflags --libs safeweights)            (shared, LD_LIBRARY_PATH)
#   4. g++ ... libsafeweights.a and the libraries of its Requires.private    (static)
# Each build runs on a small safetensors file written here with python3, and its output is compared
# with what python3 expects. The installed CLI validates the same file. The prefix is removed at the end.
#   check_install.sh BUILD_DIR      (environment: CMAKE, CMAKE_GENERATOR, CXX, SAFEWEIGHTS_SHARED=ON|OFF)
#
#   check_install.sh --minimal SOURCE_DIR   (environment: the same, and LAUNCHER, a compiler launcher)
# builds the library alone (static and shared) with every optional component off (CMakeLists.txt,
# "Components": http, cuda, pytorch, quant, hf), installs it and checks that: the components' headers
# are not installed and the package reports them missing; the find_package consumer (static and
# shared) reads the same file as above; neither the consumer nor libsafeweights.so holds any of their
# code (nm; the same patterns must match a full build's library, checked by the first form); and
# tests/install/consumer/minimal.cpp gets NotSupported naming the option from each stub.
set -euo pipefail
minimal=0
if [[ ${1:-} == --minimal ]]; then
  minimal=1
  shift
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmake=${CMAKE:-cmake}
cxx=${CXX:-c++}
shared=${SAFEWEIGHTS_SHARED:-ON}
generator=()
[[ -n ${CMAKE_GENERATOR:-} ]] && generator=(-G "$CMAKE_GENERATOR")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/safeweights-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "check_install: FAIL: $*" >&2; exit 1; }
step() { printf '\n--- %s\n' "$*"; }

# The code of each optional component, as nm -C names it: symbols of its implementation that its stub
# (src/*/*_disabled.cpp) does not define.
declare -A component_symbols=(
  [cuda]='safeweights::load::(\(anonymous namespace\)::(CudaDevice|cuda_api|cufile)|cuda_error)'
  [pytorch]='safeweights::pytorch::(\(anonymous namespace\)|pytorch_format|Pickle)'
  [quant]='safeweights::quant::\(anonymous namespace\)::(de)?quantize_(q[0-9]|k|affine|symmetric|iq|tq|mxfp)|kIq4Levels'
  [hf]='safeweights::hf::(\(anonymous namespace\)|TokenizerJson|read_config|is_model_config)'
)
# check_symbols FILE present|absent: every component's code is in FILE, or none of it.
check_symbols() {
  local file=$1 want=$2 component count
  "${NM:-nm}" -C "$file" >"$tmp/nm.txt" || fail "nm $file"
  for component in "${!component_symbols[@]}"; do
    count=$(grep -cE "${component_symbols[$component]}" "$tmp/nm.txt" || true)
    if [[ $want == present && $count == 0 ]]; then
      fail "$(basename "$file"): no symbol of component $component (is the pattern in check_install.sh out of date?)"
    elif [[ $want == absent && $count != 0 ]]; then
      grep -E "${component_symbols[$component]}" "$tmp/nm.txt" | head -n 5
      fail "$(basename "$file"): $count symbols of component $component, which the build left out"
    fi
  done
  echo "$(basename "$file"): the code of ${!component_symbols[*]}: $want"
}

if [[ $minimal == 1 ]]; then
  source_dir=$(cd "${1:?usage: check_install.sh --minimal SOURCE_DIR}" && pwd)
  build=$tmp/build
  launcher=()
  [[ -n ${LAUNCHER:-} ]] && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER="$LAUNCHER")
  step "the library alone, every optional component off"
  # -O1: what is checked does not depend on the optimisation, and the build is a test's cost.
  "$cmake" -S "$source_dir" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_CXX_COMPILER="$cxx" "${launcher[@]}" -DSAFEWEIGHTS_WITH_HTTP=OFF -DSAFEWEIGHTS_WITH_CUDA=OFF -DSAFEWEIGHTS_WITH_PYTORCH=OFF \
    -DSAFEWEIGHTS_WITH_QUANT=OFF -DSAFEWEIGHTS_WITH_HF=OFF -DSAFEWEIGHTS_BUILD_TESTS=OFF -DSAFEWEIGHTS_BUILD_BENCH=OFF \
    -DSAFEWEIGHTS_BUILD_PYTHON=OFF -DSAFEWEIGHTS_BUILD_SHARED=ON >"$tmp/configure.log" \
    || { cat "$tmp/configure.log"; fail "configure"; }
  "$cmake" --build "$build" --target safeweights safeweights_shared >"$tmp/build.log" 2>&1 \
    || { cat "$tmp/build.log"; fail "build"; }
  shared=ON
  step "cmake --install <tmp>/build --prefix <tmp>/prefix --component Development, Runtime (no CLI)"
  for component in Development Runtime; do
    "$cmake" --install "$build" --prefix "$prefix" --component $component >>"$tmp/install.log" \
      || { cat "$tmp/install.log"; fail "install"; }
  done
else
  build=$(cd "${1:?usage: check_install.sh BUILD_DIR}" && pwd)
  step "cmake --install $build --prefix <tmp>/prefix"
  "$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }
fi
(cd "$prefix" && find . -type f -o -type l | sort)

# lib/, or lib/<multiarch>/ when the build was configured for the prefix /usr (GNUInstallDirs).
pc=$(cd "$prefix" && find . -name safeweights.pc -path '*/pkgconfig/*' | head -n 1)
[[ -n $pc ]] || fail "safeweights.pc not installed"
lib=$(dirname "$(dirname "${pc#./}")")
expect=(include/safeweights/safetensors.h include/safeweights/error.h "$lib/libsafeweights.a"
        "$lib/cmake/safeweights/safeweightsConfig.cmake" "$lib/cmake/safeweights/safeweightsConfigVersion.cmake"
        "$lib/cmake/safeweights/safeweightsTargets.cmake" "$lib/pkgconfig/safeweights.pc")
[[ $shared == ON ]] && expect+=("$lib/libsafeweights.so")
[[ $minimal == 0 ]] && expect+=(bin/safeweights)
for f in "${expect[@]}"; do [[ -e $prefix/$f ]] || fail "not installed: $f"; done
if [[ $minimal == 1 ]]; then
  for f in include/safeweights/pytorch.h include/safeweights/hf_gguf.h; do
    [[ ! -e $prefix/$f ]] || fail "installed although its component is off: $f"
  done
fi
# Installed headers include only the standard library and each other (nothing from src/).
if grep -n '#include "' "$prefix"/include/safeweights/*.h | grep -v '#include "safeweights/'; then
  fail "an installed header includes a file that is not installed"
fi
# Every installed header declares its API inside the export region (include/safeweights/export.h): the
# library is compiled with hidden visibility, so a declaration outside it would not be exported.
for h in "$prefix"/include/safeweights/*.h; do
  [[ $(basename "$h") == export.h ]] && continue
  [[ $(grep -c '^SAFEWEIGHTS_API_BEGIN$' "$h") == 1 && $(grep -c '^SAFEWEIGHTS_API_END$' "$h") == 1 ]] ||
    fail "$(basename "$h"): no SAFEWEIGHTS_API_BEGIN / SAFEWEIGHTS_API_END region"
done

step "a small safetensors file and the expected output (python3)"
python3 - "$tmp/model.safetensors" "$tmp/expected.txt" <<'PY'
import json, struct, sys
tensors = [("bias", "I64", [3], struct.pack("<3q", -1, 0, 7)),
           ("weight", "F32", [2, 2], struct.pack("<4f", 1.0, 2.0, 3.0, 4.0))]
header, data = {"__metadata__": {"format": "pt"}}, b""
for name, dtype, shape, raw in tensors:
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + data)
with open(sys.argv[2], "w") as f:
    f.write(f"tensors: {len(tensors)}\n")
    for name, dtype, shape, raw in tensors:
        f.write(f"{name} {dtype} [{','.join(map(str, shape))}] bytesum={sum(raw)}\n")
PY
cat "$tmp/expected.txt"
[[ $minimal == 1 ]] || "$prefix/bin/safeweights" validate "$tmp/model.safetensors" || fail "installed CLI: validate"

check_output() {  # NAME COMMAND...
  local name=$1; shift
  "$@" "$tmp/model.safetensors" >"$tmp/$name.out" || fail "$name: exit status $?"
  diff -u "$tmp/expected.txt" "$tmp/$name.out" || fail "$name: unexpected output"
  echo "$name: ok"
}
needed() { readelf -d "$1" | grep -c 'NEEDED.*libsafeweights' || true; }

# The programs of docs/API.md, as a user runs them: write a file, read a tensor of it, convert it to GGUF
# and read the same tensor there, load every tensor. The file written is checked by python3 (its own
# reading of the format), and every output against what python3 computes from it. The page shows each
# program exactly as it is built here.
check_examples() {  # NAME DIR
  local name=$1 dir=$2 ex
  for ex in write_file read_tensor convert_file load_host; do
    python3 - "$here/../../docs/API.md" "$here/examples/$ex.cpp" <<'PY' || fail "docs/API.md does not show examples/$ex.cpp as it is"
import sys
sys.exit(0 if open(sys.argv[2]).read() in open(sys.argv[1]).read() else 1)
PY
  done
  local out=$tmp/$name-examples
  mkdir -p "$out"
  "$dir/write_file" "$out/ex.safetensors" >/dev/null || fail "$name: write_file"
  python3 - "$out/ex.safetensors" "$out/expected.txt" <<'PY' || fail "$name: write_file wrote an unexpected file"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
assert header.pop("__metadata__") == {"format": "pt"}
assert sorted(header) == ["embed", "ids"]
def tensor(name):
    t = header[name]
    b, e = t["data_offsets"]
    return t, data[b:e]
embed, embed_bytes = tensor("embed")
ids, ids_bytes = tensor("ids")
assert embed["dtype"] == "F32" and embed["shape"] == [2, 3]
assert ids["dtype"] == "I64" and ids["shape"] == [3] and struct.unpack("<3q", ids_bytes) == (7, -1, 42)
values = " ".join("%g" % v for v in struct.unpack("<6f", embed_bytes))
with open(sys.argv[2], "w") as f:
    for fmt in ("safetensors", "gguf"):
        f.write(f"embed ({fmt}): F32 [2, 3], 24 bytes: {values}\n")
    f.write("embed: F32 -> F32\nids: I64 -> I64\n")
    f.write(f"embed F32 [2, 3]: 24 bytes, byte sum {sum(embed_bytes)}\n")
    f.write(f"ids I64 [3]: 24 bytes, byte sum {sum(ids_bytes)}\n")
PY
  {
    "$dir/read_tensor" "$out/ex.safetensors" embed
    "$dir/read_tensor" "$out/ex.gguf" embed 2>/dev/null && fail "$name: read_tensor read a file not written yet"
    "$dir/convert_file" "$out/ex.safetensors" "$out/ex.gguf" >"$out/convert.txt" || fail "$name: convert_file"
    "$dir/read_tensor" "$out/ex.gguf" embed
    sort "$out/convert.txt"
    "$dir/load_host" "$out/ex.safetensors" | sort
  } >"$out/got.txt" || fail "$name: an example failed"
  diff -u "$out/expected.txt" "$out/got.txt" || fail "$name: the examples printed something else"
  echo "$name: the docs/API.md programs ran as documented"
}

consumer_cmake() {  # NAME CONSUMER_STATIC
  local name=$1 static=$2 mode=()
  step "find_package consumer ($name)"
  if [[ $minimal == 1 ]]; then
    # pytorch.h and hf_gguf.h from the source tree, beside the installed headers (minimal.cpp says why).
    mkdir -p "$tmp/uninstalled/safeweights"
    cp "$here/../../include/safeweights/pytorch.h" "$here/../../include/safeweights/hf_gguf.h" "$tmp/uninstalled/safeweights/"
    mode=(-DCONSUMER_MINIMAL="$tmp/uninstalled" "-DCONSUMER_EXPECT_MISSING=http;cuda;pytorch;quant;hf")
  else
    # The tests are built only with these on (tests/CMakeLists.txt); http may be either.
    mode=("-DCONSUMER_EXPECT_FOUND=cuda;pytorch;quant;hf")
  fi
  nice "$cmake" -S "$here/consumer" -B "$tmp/$name" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" -DCONSUMER_STATIC="$static" "${mode[@]}" >"$tmp/$name.log" \
    || { cat "$tmp/$name.log"; fail "$name: configure"; }
  grep -E 'safeweights .* from|components:' "$tmp/$name.log" || true
  nice "$cmake" --build "$tmp/$name" >>"$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log"; fail "$name: build"; }
  check_output "$name" "$tmp/$name/consumer"
  if [[ $minimal == 1 ]]; then
    mkdir -p "$tmp/hf-folder"
    echo '{"architectures": ["LlamaForCausalLM"]}' >"$tmp/hf-folder/config.json"
    cp "$tmp/model.safetensors" "$tmp/hf-folder/model.safetensors"  # weights, so only the plan is refused
    "$tmp/$name/minimal" "$tmp/hf-folder" "$tmp/model.safetensors" || fail "$name: minimal (above)"
  else
    check_examples "$name" "$tmp/$name"
  fi
}

if [[ $shared == ON ]]; then
  consumer_cmake cmake-shared OFF
  [[ $(needed "$tmp/cmake-shared/consumer") == 1 ]] || fail "cmake-shared: not linked to libsafeweights.so"
fi
consumer_cmake cmake-static ON
[[ $(needed "$tmp/cmake-static/consumer") == 0 ]] || fail "cmake-static: linked to libsafeweights.so"

if [[ $minimal == 1 ]]; then
  check_symbols "$tmp/cmake-static/consumer" absent
  check_symbols "$prefix/$lib/libsafeweights.so" absent
  echo
  echo "check_install --minimal: the library without its optional components installed, and a consumer built and run against it"
  exit 0
fi
[[ $shared == ON ]] && check_symbols "$prefix/$lib/libsafeweights.so" present

export PKG_CONFIG_PATH=$prefix/$lib/pkgconfig
step "pkg-config: $(pkg-config --cflags --libs safeweights)"
if [[ $shared == ON ]]; then
  # shellcheck disable=SC2046
  nice "$cxx" -std=c++20 -O1 -o "$tmp/pc-shared" "$here/consumer/main.cpp" $(pkg-config --cflags --libs safeweights) \
    || fail "pkg-config shared: build"
  [[ $(needed "$tmp/pc-shared") == 1 ]] || fail "pc-shared: not linked to libsafeweights.so"
  check_output pc-shared env LD_LIBRARY_PATH="$prefix/$lib" "$tmp/pc-shared"
fi
# Static libsafeweights, shared dependencies: the libraries of Requires.private (simdjson, libdeflate;
# libcurl is not among them, the library loads it at run time on the first URL).
requires_private=$(pkg-config --print-requires-private safeweights | awk '{print $1}' | tr '\n' ' ')
[[ -n $requires_private ]] || fail "safeweights.pc has no Requires.private"
static_libs="$prefix/$lib/libsafeweights.a -pthread $(pkg-config --libs $requires_private)"
step "pkg-config static (Requires.private: $requires_private): $static_libs"
# shellcheck disable=SC2086
nice "$cxx" -std=c++20 -O1 -o "$tmp/pc-static" "$here/consumer/main.cpp" $(pkg-config --cflags safeweights) \
  $static_libs || fail "pkg-config static: build"
[[ $(needed "$tmp/pc-static") == 0 ]] || fail "pc-static: linked to libsafeweights.so"
check_output pc-static "$tmp/pc-static"

echo
echo "check_install: all consumers built against the installed tree and printed the expected tensors"
