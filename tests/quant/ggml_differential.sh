#!/usr/bin/env bash
# Differential test of safeweights' quantizers and dequantizers against ggml itself.
#
#   tests/quant/ggml_differential.sh [LLAMA_CPP_DIR]     (or LLAMA_CPP_DIR=... in the environment)
#
# Builds only ggml's base library (CPU, no llama, no backends) from a llama.cpp checkout into a
# temporary folder, compiles tests/quant/ggml_driver.cpp with our quantization sources against it, and
# runs it: a table of rows compared and rows that differ per type; exit status 1 on any difference, 2
# when it cannot run. CI does not run it (it has no llama.cpp checkout); docs/GGUF.md records the last
# result. Nothing of llama.cpp is copied into this repository.
set -euo pipefail

src=${1:-${LLAMA_CPP_DIR:-}}
if [[ -z "$src" || ! -f "$src/ggml/include/ggml.h" ]]; then
  echo "usage: $0 LLAMA_CPP_DIR   (a llama.cpp checkout with ggml/include/ggml.h)" >&2
  exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ggml-differential.XXXXXX")
trap 'rm -rf "$work"' EXIT
jobs=${JOBS:-2}

# ggml-base holds ggml.c and ggml-quants.c: the reference quantizers and dequantizers llama.cpp's
# quantizer calls. Built as a user builds it (Release), static.
# ggml is configured as a subproject (standalone, it wants a pkg-config template that llama.cpp's copy
# of ggml does not have).
mkdir -p "$work/wrap"
cat >"$work/wrap/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.14)
project(ggml_differential C CXX)
add_subdirectory("$src/ggml" ggml)
CMAKE
cmake -S "$work/wrap" -B "$work/ggml" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF >"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log" >&2; exit 2; }
cmake --build "$work/ggml" --target ggml-base -j "$jobs" >"$work/build.log" 2>&1 ||
  { tail -50 "$work/build.log" >&2; exit 2; }
lib=$(find "$work/ggml" -name 'libggml-base.a' | head -1)

# Our side: the quantization sources with the library's flags for them (no contraction, no fast-math).
${CXX:-c++} -std=c++20 -O3 -ffp-contract=off -fno-fast-math \
  -I "$root/include" -I "$root/src" -I "$src/ggml/include" \
  "$root/tests/quant/ggml_driver.cpp" $(ls "$root"/src/quant/*.cpp | grep -v quant_disabled) "$root/src/core/tensor_type.cpp" \
  "$root/src/core/error.cpp" "$lib" -lm -lpthread -fopenmp -o "$work/ggml_driver"
"$work/ggml_driver"
