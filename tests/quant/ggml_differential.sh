#!/usr/bin/env bash
# The quant judge: safeweights' quantizers (with and without importance weights) and dequantizers
# against ggml itself, byte for byte.
#
#   tests/quant/ggml_differential.sh [LLAMA_CPP_SRC]
#
# LLAMA_CPP_SRC is a llama.cpp source tree (ggml/include/ggml.h); without the argument, LLAMA_CPP_DIR or
# SAFEWEIGHTS_LLAMA_CPP (the pinned tree scripts/test.sh exports: scripts/llama-cpp.sh). ggml's base
# library (ggml.c, ggml-quants.c: the quantizers llama-quantize calls) is taken from the pinned tools'
# build when SAFEWEIGHTS_LLAMA_TOOLS names it (its ../ggml/src/libggml-base.a, built Release for any
# x86-64, so this costs seconds), else built from the tree into a temporary folder. Then
# tests/quant/ggml_driver.cpp is compiled with our quantization sources, with the library's flags for
# them, and run: a table per type of rows compared and rows that differ. Exit status 1 on any
# difference, 2 when it cannot run. CI runs it (scripts/test.sh, "quant judge"). Nothing of llama.cpp
# is copied into this repository. SAFEWEIGHTS_JUDGE_TYPES=IQ1_S,Q3_K (ggml's type names) runs only those
# types' rows, for checking one quantizer's change quickly.
set -euo pipefail

src=${1:-${LLAMA_CPP_DIR:-${SAFEWEIGHTS_LLAMA_CPP:-}}}
if [[ -z "$src" || ! -f "$src/ggml/include/ggml.h" ]]; then
  echo "usage: $0 LLAMA_CPP_SRC   (a llama.cpp source tree with ggml/include/ggml.h)" >&2
  exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ggml-differential.XXXXXX")
trap 'rm -rf "$work"' EXIT
jobs=${JOBS:-2}

lib=""
if [[ -n ${SAFEWEIGHTS_LLAMA_TOOLS:-} && -f $SAFEWEIGHTS_LLAMA_TOOLS/../ggml/src/libggml-base.a ]]; then
  lib=$SAFEWEIGHTS_LLAMA_TOOLS/../ggml/src/libggml-base.a
  echo "ggml: $lib (the pinned tools' build)"
else
  # Built as a user builds it (Release), static, ggml configured as a subproject (standalone, it wants
  # a pkg-config template that llama.cpp's copy of ggml does not have).
  mkdir -p "$work/wrap"
  cat >"$work/wrap/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.14)
project(ggml_differential C CXX)
add_subdirectory("$src/ggml" ggml)
CMAKE
  cmake -S "$work/wrap" -B "$work/ggml" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
    -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF >"$work/cmake.log" 2>&1 ||
    { cat "$work/cmake.log" >&2; exit 2; }
  cmake --build "$work/ggml" --target ggml-base -j "$jobs" >"$work/build.log" 2>&1 ||
    { tail -50 "$work/build.log" >&2; exit 2; }
  lib=$(find "$work/ggml" -name 'libggml-base.a' | head -1)
  echo "ggml: built from $src"
fi

# Our side: every quantization source but the stub that stands in for them when they are left out, with
# the library's flags for them (no contraction, no fast-math); ggml-base wants OpenMP's runtime (its IQ
# grids are built with it). The scale searches run several groups a vector (scale_search_lanes.cpp): the
# driver is linked four times, with the lanes this machine takes (AVX-512's 16 or AVX2's 8 where it has
# them), with at most 8 (AVX2, AVX-512 switched off), with 4 lanes (SSE2, as any x86-64 without AVX2
# runs), and with the plain one-group path, and each must be identical to ggml. The same builds hold for
# every *_lanes.cpp (the grid neighbour search too).
cxx=(${CXX:-c++} -std=c++20 -O3 -ffp-contract=off -fno-fast-math -I "$root/include" -I "$root/src" -I "$src/ggml/include")
objects=()
for f in "$root/tests/quant/ggml_driver.cpp" "$root"/src/quant/*.cpp "$root/src/core/tensor_type.cpp" "$root/src/core/error.cpp"; do
  case $f in */quant_disabled.cpp | */*_lanes.cpp) continue ;; esac
  o="$work/$(basename "$f" .cpp).o"
  "${cxx[@]}" -c "$f" -o "$o" 2>"$work/compile.log" || { cat "$work/compile.log" >&2; exit 2; }
  objects+=("$o")
done
status=0
for variant in "machine:" "8-lane:-DSAFEWEIGHTS_QUANT_AVX512=0" "4-lane:-DSAFEWEIGHTS_QUANT_AVX2=0" "plain:-DSAFEWEIGHTS_QUANT_SCALAR=1"; do
  name=${variant%%:*} flags=${variant#*:}
  lane_objects=()
  for f in "$root"/src/quant/*_lanes.cpp; do
    # shellcheck disable=SC2086  # the flags are words
    "${cxx[@]}" $flags -c "$f" -o "$work/$(basename "$f" .cpp).o" 2>"$work/compile.log" || { cat "$work/compile.log" >&2; exit 2; }
    lane_objects+=("$work/$(basename "$f" .cpp).o")
  done
  "${cxx[@]}" "${objects[@]}" "${lane_objects[@]}" "$lib" -fopenmp -lm -lpthread -o "$work/ggml_driver" || exit 2
  echo
  echo "== scale searches: $name"
  args=()
  [[ $name == machine ]] || args=(--no-speed)
  "$work/ggml_driver" "${args[@]}" || status=1
done
exit $status
