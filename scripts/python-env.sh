#!/usr/bin/env bash
# Makes the pinned Python test environment: a venv of /usr/bin/python3 (Debian's 3.11, the interpreter
# the CMake build targets) without the system site-packages, holding tests/python/requirements.txt
# (numpy 2, ml_dtypes, the reference safetensors and huggingface_hub, pytest) from the package index.
#
#   scripts/python-env.sh [VENV]      default build/venv-np2; prints the venv's python on success
#
# Re-running is cheap: the venv is rebuilt only when requirements.txt changed since it was made.
# Environment: SAFEWEIGHTS_PYTHON (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=${1:-build/venv-np2}
python=${SAFEWEIGHTS_PYTHON:-/usr/bin/python3}
req=tests/python/requirements.txt
stamp="$venv/.requirements.txt"

if [[ -x "$venv/bin/python" && -f "$stamp" ]] && cmp -s "$req" "$stamp"; then
  echo "$venv/bin/python"
  exit 0
fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$req" >&2
cp "$req" "$stamp"
echo "$venv/bin/python"
