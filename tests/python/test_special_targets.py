"""save_file never replaces a device node or a FIFO: tests/io/special_targets_test.py run with this
interpreter (numpy and the package importable), as root in a private mount namespace with scratch nodes;
skipped where that cannot run (not root, no unshare)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "tests", "io", "special_targets_test.py")
CLI = os.environ.get("SAFEWEIGHTS_CLI", os.path.join(ROOT, "build", "safeweights"))


def test_save_file_and_the_cli_refuse_device_nodes_and_fifos():
    r = subprocess.run([sys.executable, SCRIPT, "--cli", CLI, "--python"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    out = r.stdout.decode(errors="replace")
    if r.returncode == 77:
        pytest.skip(out.strip())
    assert r.returncode == 0, out
    assert "save_file checks skipped" not in out, out
