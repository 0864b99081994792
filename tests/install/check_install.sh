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
set -euo pipefail
build=$(cd "${1:?usage: check_install.sh BUILD_DIR}" && pwd)
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

step "cmake --install $build --prefix <tmp>/prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }
(cd "$prefix" && find . -type f -o -type l | sort)

# lib/, or lib/<multiarch>/ when the build was configured for the prefix /usr (GNUInstallDirs).
pc=$(cd "$prefix" && find . -name safeweights.pc -path '*/pkgconfig/*' | head -n 1)
[[ -n $pc ]] || fail "safeweights.pc not installed"
lib=$(dirname "$(dirname "${pc#./}")")
expect=(include/safeweights/safetensors.h include/safeweights/error.h "$lib/libsafeweights.a" bin/safeweights
        "$lib/cmake/safeweights/safeweightsConfig.cmake" "$lib/cmake/safeweights/safeweightsConfigVersion.cmake"
        "$lib/cmake/safeweights/safeweightsTargets.cmake" "$lib/pkgconfig/safeweights.pc")
[[ $shared == ON ]] && expect+=("$lib/libsafeweights.so")
for f in "${expect[@]}"; do [[ -e $prefix/$f ]] || fail "not installed: $f"; done
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
"$prefix/bin/safeweights" validate "$tmp/model.safetensors" || fail "installed CLI: validate"

check_output() {  # NAME COMMAND...
  local name=$1; shift
  "$@" "$tmp/model.safetensors" >"$tmp/$name.out" || fail "$name: exit status $?"
  diff -u "$tmp/expected.txt" "$tmp/$name.out" || fail "$name: unexpected output"
  echo "$name: ok"
}
needed() { readelf -d "$1" | grep -c 'NEEDED.*libsafeweights' || true; }

consumer_cmake() {  # NAME CONSUMER_STATIC
  local name=$1 static=$2
  step "find_package consumer ($name)"
  nice "$cmake" -S "$here/consumer" -B "$tmp/$name" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" -DCONSUMER_STATIC="$static" >"$tmp/$name.log" \
    || { cat "$tmp/$name.log"; fail "$name: configure"; }
  grep 'safeweights .* from' "$tmp/$name.log" || true
  nice "$cmake" --build "$tmp/$name" >>"$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log"; fail "$name: build"; }
  check_output "$name" "$tmp/$name/consumer"
}

if [[ $shared == ON ]]; then
  consumer_cmake cmake-shared OFF
  [[ $(needed "$tmp/cmake-shared/consumer") == 1 ]] || fail "cmake-shared: not linked to libsafeweights.so"
fi
consumer_cmake cmake-static ON
[[ $(needed "$tmp/cmake-static/consumer") == 0 ]] || fail "cmake-static: linked to libsafeweights.so"

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
