"""The package's own modules pass mypy (tests/python/mypy.ini): the private ones fully annotated.

Runs where mypy is installed: the numpy 2 venv (tests/python/requirements.txt pins it), which
scripts/test.sh runs this suite in; elsewhere (Debian's python) it is skipped.
"""

import glob
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "..", "..", "python", "safeweights")


def test_the_package_type_checks(tmp_path):
    pytest.importorskip("mypy")
    sources = sorted(glob.glob(os.path.join(PACKAGE, "*.py")))
    assert any(s.endswith("_frameworks.py") for s in sources), sources
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", os.path.join(HERE, "mypy.ini"),
         "--cache-dir", str(tmp_path / "cache"), *sources],
        cwd=os.path.dirname(PACKAGE), capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
