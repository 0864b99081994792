"""Group loads from S3 (docs/PYTHON.md, "Loading across a process group"): 2 and 4 CPU processes joined by
torch.distributed (gloo) load one s3:// object with process_group=, each reading a disjoint part; every
rank's tensors equal its single-process load of the same object, and the bytes read add up to the bytes
needed once (tests/python/group_worker.py checks both). The processes run under a Python with torch
(Debian's python3-torch on CI machines; conftest.torch_python), reading from the moto server of this
suite with the credentials the standard way; a sharded load (dim 0) runs too."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import torch_python

WORKER = Path(__file__).resolve().parents[1] / "python" / "group_worker.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_has_gloo(python: str) -> bool:
    probe = "import torch.distributed as d, sys; sys.exit(0 if d.is_available() and d.is_gloo_available() else 1)"
    return subprocess.run([python, "-c", probe], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def model_url(s3, tmp_path_factory):
    from safeweights.numpy import save_file

    rng = np.random.default_rng(11)
    tensors = {f"layer{i}.w": rng.standard_normal((64 + 8 * i, 96)).astype(np.float32) for i in range(6)}
    # Tensors a shard along dimension 0 reads whole (one row): the group shares them.
    tensors.update({f"norm{i}": rng.standard_normal((1, 2048)).astype(np.float32) for i in range(4)})
    tensors.update({"embed": rng.standard_normal((300, 64)).astype(np.float16), "scalar": np.array(1.5), "bias": np.ones(3, np.float32)})
    path = tmp_path_factory.mktemp("group") / "model.safetensors"
    save_file(tensors, str(path))
    return s3.upload(path, "group load/\u00fcber model.safetensors")


@pytest.mark.parametrize("world,dim", [(2, -1), (4, -1), (2, 0)])
def test_a_group_loads_an_s3_object_reading_each_byte_once(s3, model_url, world, dim):
    python = torch_python()
    if python is None or not group_has_gloo(python):
        pytest.skip("no Python with torch.distributed and gloo to run the ranks")
    env = s3.env(PYTHONPATH=os.pathsep.join([str(WORKER.parent), *[p for p in sys.path if p.endswith("build/python")],
                                             os.environ.get("PYTHONPATH", "")]), OMP_NUM_THREADS="1")
    port = str(free_port())
    procs = [subprocess.Popen([python, str(WORKER), "load", model_url, str(dim)], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port)) for r in range(world)]
    outs = [p.communicate(timeout=240) for p in procs]
    out, err = "".join(o for o, _ in outs), "".join(e for _, e in outs)
    assert all(p.returncode == 0 for p in procs), out + err
    assert f"OK 13 tensors, world {world}, dim {dim}" in out, out + err
    assert "BYTES" in out, out
