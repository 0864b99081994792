#!/usr/bin/env bash
# Checks that `pip install .` works offline: a fresh virtual environment that sees Debian's numpy
# (--system-site-packages), pip with no package index, the in-tree build backend. Then imports the
# installed package from outside the source tree and round-trips a file.
#   scripts/check-pip-install.sh WORKDIR     (the venv and the CMake build go under WORKDIR)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${1:?usage: check-pip-install.sh WORKDIR}
python=${SAFEWEIGHTS_PYTHON:-/usr/bin/python3}
mkdir -p "$work"
work=$(cd "$work" && pwd)
rm -rf "$work/venv"
"$python" -m venv --system-site-packages "$work/venv"
# PIP_NO_INDEX: any attempt to reach a package index fails the install.
PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 SAFEWEIGHTS_BUILD_DIR="$work/cmake" \
  "$work/venv/bin/pip" install --quiet "$root"
cd "$work"
"$work/venv/bin/python" - <<'PY'
import os, sys
import numpy as np
import safeweights, safeweights.numpy, safeweights.dduf
here = os.path.dirname(safeweights.__file__)
assert "site-packages" in here, here
for stub in ("__init__.pyi", "numpy.pyi", "torch.pyi", "dduf.pyi", "py.typed"):
    assert os.path.exists(os.path.join(here, stub)), stub
a = {"w": np.arange(24, dtype=np.float32).reshape(2, 3, 4)}
safeweights.numpy.save_file(a, "roundtrip.safetensors", metadata={"k": "v"})
b = safeweights.numpy.load_file("roundtrip.safetensors")
assert np.array_equal(a["w"], b["w"]), b
print(f"pip install ok: safeweights {safeweights.__version__} from {here}")
PY
