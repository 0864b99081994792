#!/usr/bin/env bash
# Makes the pinned Python test environment: a venv of /usr/bin/python3 (Debian's 3.11, the interpreter
# the CMake build targets) without the system site-packages, holding tests/python/requirements.txt
# (numpy 2, ml_dtypes, the reference safetensors and huggingface_hub, pytest) from the package index.
#
#   scripts/python-env.sh [VENV [REQUIREMENTS]]   default build/venv-np2 and tests/python/requirements.txt;
#                                                 prints the venv's python on success
# (scripts/test.sh also makes build/venv-torch from tests/pytorch/requirements-current-torch.txt: a
# current torch from the registry for the PyTorch checkpoint tests.)
#
# Re-running is cheap: the venv is rebuilt only when the requirements (and the files they name with
# -c / -r) changed since it was made.
# Environment: SAFEWEIGHTS_PYTHON (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=${1:-build/venv-np2}
req=${2:-tests/python/requirements.txt}
python=${SAFEWEIGHTS_PYTHON:-/usr/bin/python3}
stamp="$venv/.requirements.txt"

# The requirements as pip reads them: the file, then each file it names with -c / -r (relative to it).
requirements_text() {
  cat "$req"
  local line
  while read -r line; do
    if [[ $line =~ ^-[cr][[:space:]]+(.+)$ ]]; then cat "$(dirname "$req")/${BASH_REMATCH[1]}"; fi
  done <"$req"
}

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
