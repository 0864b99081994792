#!/usr/bin/env bash
# The pinned llama.cpp, the reference for GGUF work: the tree that the llama-cpp-python sdist pinned in
# tests/clients/requirements.txt vendors (convert_hf_to_gguf.py with its conversion/ package, gguf-py,
# ggml, tools/quantize, tools/imatrix), so tests can run llama.cpp's own converter and quantizer offline
# and compare bytes.
#
#   scripts/llama-cpp.sh           prints the source folder (its convert_hf_to_gguf.py, ggml/, tools/)
#   scripts/llama-cpp.sh --tools   also builds llama-quantize and llama-imatrix; prints their bin folder
#
# Kept outside the clone, keyed by the pin and the build flags, as the test venvs are
# ($SAFEWEIGHTS_CACHE/llama.cpp-VERSION-KEY, default ~/.cache/safeweights): the sdist is fetched from the
# package index (pip's configuration) once per pin and the tools are built once per pin; later calls
# print at once. The tools are built for any x86-64 (the cache may outlive this machine's CPU), static,
# without curl. Test-only: nothing of llama.cpp is part of safeweights. Exit status 2 when it cannot be
# made (no package index, no compiler).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

want_tools=0
[[ ${1:-} == --tools ]] && want_tools=1
version=$(sed -n 's/^llama_cpp_python==\([^[:space:]]*\).*/\1/p' tests/clients/requirements.txt)
[[ -n $version ]] || { echo "llama-cpp.sh: no llama_cpp_python pin in tests/clients/requirements.txt" >&2; exit 2; }
flags="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON"
key=$(printf '%s\n%s\n' "$version" "$flags" | sha256sum | cut -c1-12)
cache="${SAFEWEIGHTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/safeweights}/llama.cpp-$version-$key"
python=${SAFEWEIGHTS_PYTHON:-/usr/bin/python3}
jobs=${JOBS:-$(nproc)}

# One maker at a time per cache folder (CI's background steps and a developer's run may race).
mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
flock 9

# The source: the sdist's vendor/llama.cpp, extracted into a temporary sibling and renamed into place
# whole, so an interrupted run leaves no half tree behind.
if [[ ! -f $cache/src/convert_hf_to_gguf.py ]]; then
  work=$(mktemp -d "$cache.tmp.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  # A throwaway venv for its pip (Debian's python3 has venv but not necessarily pip).
  "$python" -m venv "$work/venv" >&2
  "$work/venv/bin/python" -m pip download --quiet --no-deps --no-binary :all: "llama_cpp_python==$version" -d "$work/dl" >&2 ||
    { echo "llama-cpp.sh: cannot fetch the llama_cpp_python $version sdist" >&2; exit 2; }
  tar -xzf "$work/dl/llama_cpp_python-$version.tar.gz" -C "$work" "llama_cpp_python-$version/vendor/llama.cpp"
  rm -rf "$cache"
  mkdir -p "$cache"
  mv "$work/llama_cpp_python-$version/vendor/llama.cpp" "$cache/src"
  rm -rf "$work"
  trap - EXIT
fi

if ((want_tools)); then
  if [[ ! -x $cache/build/bin/llama-quantize || ! -x $cache/build/bin/llama-imatrix ]]; then
    # shellcheck disable=SC2086  # the flags are words
    cmake -S "$cache/src" -B "$cache/build" $flags >"$cache/cmake.log" 2>&1 ||
      { tail -30 "$cache/cmake.log" >&2; exit 2; }
    cmake --build "$cache/build" --target llama-quantize llama-imatrix -j "$jobs" >"$cache/build.log" 2>&1 ||
      { tail -30 "$cache/build.log" >&2; exit 2; }
  fi
  echo "$cache/build/bin"
else
  echo "$cache/src"
fi
