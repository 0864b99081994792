#!/usr/bin/env bash
# The Python package as users get it: a wheel built through the standard PEP 517 backend
# (scikit-build-core, pyproject.toml), made self-contained by `auditwheel repair`, installed into a
# clean venv of a Python other than the one the in-tree build targets (Debian's /usr/bin/python3), and
# tested there from outside the source tree:
#   - the extension's libraries resolve inside the wheel (simdjson, libdeflate vendored), so no -dev
#     package is needed; libcurl stays a run-time dlopen (remote files need the system's libcurl.so.4);
#   - the package imports, round-trips files, and passes the numpy, safe_open, DDUF and slicing tests;
#   - the type stubs match the installed modules (mypy's stubtest).
#
#   scripts/check-wheel.sh WORKDIR     (venvs, wheels and the build go under WORKDIR)
#
# Environment: SAFEWEIGHTS_WHEEL_PYTHON, the interpreter to build and test with (default: the first of
# python3.12, python3.13 in pyenv or on PATH; else /usr/bin/python3, said on stderr).
# Needs the package index (pip), like scripts/python-env.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${1:?usage: check-wheel.sh WORKDIR}
mkdir -p "$work"
work=$(cd "$work" && pwd)

# A candidate counts only if it runs (pyenv puts shims on PATH for versions that are not selected).
find_python() {
  if [[ -n ${SAFEWEIGHTS_WHEEL_PYTHON:-} ]]; then echo "$SAFEWEIGHTS_WHEEL_PYTHON"; return; fi
  local v p
  for v in 3.12 3.13; do
    for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/python"$v" "$(command -v "python$v" || true)"; do
      [[ -n $p && -x $p ]] && "$p" -c 'import venv' 2>/dev/null && { echo "$p"; return; }
    done
  done
  echo "check-wheel: no Python 3.12/3.13 found; testing the wheel with /usr/bin/python3" >&2
  echo /usr/bin/python3
}
python=$(find_python)
echo "check-wheel: $("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])')"

pip_quiet=(--quiet --disable-pip-version-check --no-input)
# The tools, in a venv of their own (never in the test venv: it must hold only the wheel and its deps).
rm -rf "$work/tools" "$work/dist" "$work/wheelhouse" "$work/venv" "$work/stubtest-site"
"$python" -m venv "$work/tools"
"$work/tools/bin/pip" install "${pip_quiet[@]}" -r "$root/tests/python/wheel-requirements.txt"

# Build (isolated: pip fetches pyproject.toml's pinned scikit-build-core and pybind11). The CMake build
# folder lives under WORKDIR, not in the source tree.
"$work/tools/bin/python" -m build --wheel --outdir "$work/dist" \
  -Cbuild-dir="$work/cmake" "$root" >"$work/build.log" 2>&1 || { tail -50 "$work/build.log"; exit 1; }
wheel=$(ls "$work"/dist/safeweights-*.whl)
echo "check-wheel: built $(basename "$wheel")"

# Repair: vendor every shared library outside the manylinux policy into the wheel.
PATH="$work/tools/bin:$PATH" "$work/tools/bin/auditwheel" repair --wheel-dir "$work/wheelhouse" "$wheel" \
  >"$work/repair.log" 2>&1 || { cat "$work/repair.log"; exit 1; }
repaired=$(ls "$work"/wheelhouse/safeweights-*.whl)
echo "check-wheel: repaired $(basename "$repaired")"

# A clean venv (no system site-packages): the wheel, its dependency numpy, and the test requirements.
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install "${pip_quiet[@]}" "$repaired"
"$work/venv/bin/pip" install "${pip_quiet[@]}" -r "$root/tests/python/requirements.txt"

cd "$work"  # nothing of the source tree on sys.path
"$work/venv/bin/python" - <<'PY'
import os, subprocess, sys
import numpy as np
import safeweights, safeweights.numpy, safeweights.dduf, safeweights.formats
from safeweights import _safeweights
here = os.path.dirname(safeweights.__file__)
assert "site-packages" in here, here
for stub in ("__init__.pyi", "numpy.pyi", "torch.pyi", "dduf.pyi", "formats.pyi", "py.typed"):
    assert os.path.exists(os.path.join(here, stub)), f"missing from the wheel: {stub}"
# Every library the extension needs resolves, and the ones auditwheel vendored resolve inside the wheel.
ldd = subprocess.run(["ldd", _safeweights.__file__], capture_output=True, text=True, check=True).stdout
assert "not found" not in ldd, ldd
for lib in ("libsimdjson", "libdeflate"):
    line = next((l for l in ldd.splitlines() if lib in l), None)
    assert line is None or "safeweights.libs" in line, f"{lib} not vendored: {line}"
a = {"w": np.arange(24, dtype=np.float32).reshape(2, 3, 4)}
safeweights.numpy.save_file(a, "roundtrip.safetensors", metadata={"k": "v"})
b = safeweights.numpy.load_file("roundtrip.safetensors")
assert np.array_equal(a["w"], b["w"]), b
assert safeweights.detect_format("roundtrip.safetensors") == "safetensors"
print(f"check-wheel: import ok, safeweights {safeweights.__version__} on Python {sys.version.split()[0]} from {here}")
PY

# The suites that need neither the CLI nor the build folder, against the installed wheel.
(cd "$root/tests/python" && env -u PYTHONPATH PYTHONDONTWRITEBYTECODE=1 \
  "$work/venv/bin/python" -m pytest -q -p no:cacheprovider \
  test_numpy.py test_safe_open.py test_dduf.py test_slicing.py test_lowlevel.py test_reference_diff.py)

# The stubs describe what the installed modules have (mypy's stubtest; a framework's module
# (safeweights.torch, .flax, .tensorflow, .paddle, .mlx) only where the framework is installed).
# stubtest runs from the tools venv over a copy of the wheel installed for it.
allow=(--allowlist "$root/tests/python/stubtest-allowlist.txt")
: >"$work/absent-frameworks-allowlist.txt"
for pair in torch:torch jax:flax tensorflow:tensorflow paddle:paddle mlx.core:mlx; do
  if ! "$work/venv/bin/python" -c "import ${pair%%:*}" 2>/dev/null; then
    printf 'safeweights.%s\n' "${pair#*:}" >>"$work/absent-frameworks-allowlist.txt"
  fi
done
allow+=(--allowlist "$work/absent-frameworks-allowlist.txt")
"$work/tools/bin/pip" install "${pip_quiet[@]}" --target "$work/stubtest-site" "$repaired" numpy==2.4.6
mkdir -p "$work/stubtest-cwd"
(cd "$work/stubtest-cwd" && PYTHONPATH="$work/stubtest-site" "$work/tools/bin/python" -m mypy.stubtest \
  --mypy-config-file "$root/tests/python/stubtest.ini" "${allow[@]}" safeweights)
echo "check-wheel: OK"
