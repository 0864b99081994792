#!/usr/bin/env bash
# Makes the pinned Python test environment: a venv of /usr/bin/python3 (Debian's 3.11, the interpreter
# the CMake build targets) without the system site-packages, holding tests/python/requirements.txt
# (numpy 2, ml_dtypes, the reference safetensors and huggingface_hub, pytest) from the package index.
#
#   scripts/python-env.sh [VENV [REQUIREMENTS]]   default build/venv-np2 and tests/python/requirements.txt;
#                                                 prints the venv's python on success
#   scripts/python-env.sh --cached NAME REQUIREMENTS
#                                                 the venv lives outside the clone, in
#                                                 $SAFEWEIGHTS_CACHE/NAME-KEY (default ~/.cache/safeweights),
#                                                 KEY a hash of the pins: heavy client environments
#                                                 (torch, transformers, llama.cpp) are made once per set of
#                                                 pins and shared by every clone and branch that has them
# (scripts/test.sh makes the clients' environment from tests/clients/requirements.txt this way: a current
# torch from the registry, transformers, diffusers, accelerate, gguf-py and llama-cpp-python, for the
# PyTorch checkpoint tests and tests/clients/.)
#
# Re-running is cheap: the venv is rebuilt only when the requirements (and the files they name with
# -c / -r) changed since it was made.
# Environment: SAFEWEIGHTS_PYTHON (default /usr/bin/python3); SAFEWEIGHTS_CACHE; CMAKE_ARGS and the like
# reach pip (packages built from source, such as llama-cpp-python, read them; they are not part of KEY).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cached=""
if [[ ${1:-} == --cached ]]; then
  cached=$2
  req=$3
else
  venv=${1:-build/venv-np2}
  req=${2:-tests/python/requirements.txt}
fi
python=${SAFEWEIGHTS_PYTHON:-/usr/bin/python3}

# The requirements as pip reads them: the file, then each file it names with -c / -r (relative to the
# file that names it), and theirs in turn.
requirements_text() {
  local file=${1:-$req} line
  cat "$file"
  while read -r line; do
    if [[ $line =~ ^-[cr][[:space:]]+(.+)$ ]]; then requirements_text "$(dirname "$file")/${BASH_REMATCH[1]}"; fi
  done <"$file"
}

if [[ -n $cached ]]; then
  key=$(requirements_text | sha256sum | cut -c1-16)
  venv="${SAFEWEIGHTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/safeweights}/$cached-$key"
fi
stamp="$venv/.requirements.txt"

if [[ -x "$venv/bin/python" && -f "$stamp" ]] && cmp -s <(requirements_text) "$stamp"; then
  echo "$venv/bin/python"
  exit 0
fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$req" >&2
requirements_text >"$stamp"
echo "$venv/bin/python"
