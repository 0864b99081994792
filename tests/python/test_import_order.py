"""The extension loads next to torch in either import order, each in a fresh interpreter.

A module that exports C++ runtime symbols (a static libstdc++, std:: template instantiations) gets them
bound by libraries loaded after it: `import safeweights, torch` then aborted in free() inside torch's
import. Fresh processes, because the order only matters for the first load of each library.
"""

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

# Exercises torch's own C++ string streams and locale (what crashed), and a round trip through both.
WORK = """
import os
import numpy as np
repr(torch.zeros(2))
t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
f = torch.jit.trace(lambda x: x * 2, t)
str(f.graph)
data = safeweights.torch.save({"t": t})
back = safeweights.torch.load(data)["t"]
assert torch.equal(back, t), back
arr = safeweights.numpy.load(safeweights.numpy.save({"a": np.arange(3)}))["a"]
assert arr.tolist() == [0, 1, 2]
# The package under test is the one the caller meant (ctest runs this against two builds of it).
expected = os.environ.get("SAFEWEIGHTS_EXPECT_DIR")
assert not expected or safeweights.__file__.startswith(expected), safeweights.__file__
print("ok")
"""


@pytest.mark.parametrize("order", ["safeweights, torch", "torch, safeweights"])
def test_import_order(order):
    code = f"import {order}\nimport safeweights.torch, safeweights.numpy\n" + WORK
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy(),
                          timeout=300)
    assert proc.returncode == 0, f"import {order}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.strip().endswith("ok")
