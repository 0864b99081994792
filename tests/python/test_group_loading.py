"""Group loads (docs/PYTHON.md, "Loading across a process group"): 2 and 4 CPU processes joined by
torch.distributed (gloo), started with torchrun's environment (test_loading.launch_like_torchrun: Debian
12's torchrun fails before starting anything), each running group_worker.py.

Expected values come from each rank's single-process load (safeweights.torch.load_file without a
group, itself checked against torch in test_loading.py) and, for the bytes read, from the loader's
plans and from nginx's access log (the bytes it sent). Failures: a rank whose file is missing, whose
file shrinks while it loads, whose process ends, or that never calls the load; every other rank must
raise, and every process must end (communicate's timeout is the hang guard)."""
import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import build_file
from test_loading import launch_like_torchrun  # noqa: F401 (also skips without torch)
from test_remote import Nginx, server  # noqa: F401 (the nginx fixture)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="torch.distributed with gloo is not available")


def model_file(path):
    """About 1.2 MiB: layers of several dtypes and shapes (split along 0 and 1 by a shard), small tensors
    read whole, a scalar and an empty tensor."""
    rng = np.random.default_rng(3)
    tensors = []
    for i in range(6):
        rows, cols = 64 + 8 * i, 96 + 32 * i
        tensors.append((f"layer{i}.w", "F32", [rows, cols], rng.standard_normal((rows, cols)).astype("<f4").tobytes()))
        tensors.append((f"layer{i}.b", "F16", [cols], rng.standard_normal(cols).astype("<f2").tobytes()))
    tensors += [
        ("embed", "BF16", [500, 64], (rng.standard_normal((500, 64)).astype("<f4").view("<u4") >> 16).astype("<u2").tobytes()),
        ("ids", "I64", [3, 4], rng.integers(-(2**40), 2**40, (3, 4)).astype("<i8").tobytes()),
        ("mask", "BOOL", [1, 3], rng.integers(0, 2, (1, 3)).astype("?").tobytes()),
        ("scalar", "F64", [], np.float64(1.5).tobytes()),
        ("empty", "F32", [0, 4], b""),
    ]
    path.write_bytes(build_file(tensors))
    return path


def environment():
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [os.environ.get("PYTHONPATH", "")] + sys.path if p),
                OMP_NUM_THREADS="1")


def run_group(world, *args):
    code, out, err = launch_like_torchrun(environment(), [sys.executable, str(HERE / "group_worker.py"), *args], world)
    return code, out, err


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_every_rank_gets_its_single_process_tensors_and_the_group_reads_each_byte_once(tmp_path, world, dim):
    path = model_file(tmp_path / "m.safetensors")
    code, out, err = run_group(world, "load", str(path), str(dim))
    assert code == 0, out + err
    assert f"OK 17 tensors, world {world}, dim {dim}" in out, out + err
    figures = json.loads(re.search(r"^BYTES (.*)$", out, re.M).group(1))
    assert sum(figures["read"]) == figures["needed"]
    if dim < 0:  # the same bytes on every rank: each reads about 1/world of them
        assert all(abs(r - figures["needed"] / world) <= 4096 for r in figures["read"]), figures


def test_load_tensors_group_loads_a_pytorch_checkpoint(tmp_path):
    rng = np.random.default_rng(9)
    state = {f"w{i}": torch.from_numpy(rng.standard_normal((64, 48 + i)).astype(np.float32)) for i in range(6)}
    state["step"] = torch.tensor(7)
    path = tmp_path / "model.pt"
    torch.save(state, path)
    code, out, err = run_group(2, "tensors", str(path))
    assert code == 0 and "OK 7 tensors" in out, out + err


def nginx_bytes(srv, name):
    """Body bytes nginx sent for `name` (the access log's combined format: status, then bytes)."""
    total = 0
    for line in srv.access_log.read_text().splitlines():
        m = re.search(rf'"GET /{re.escape(name)}[ ?][^"]*" \d+ (\d+) ', line)
        if m:
            total += int(m.group(1))
    return total


def needed_bytes(path, world, dim):
    """The bytes a group of `world` needs from the file: with a shard, each rank's plan less the tensors
    read whole, plus those once (a plan of them alone)."""
    import safeweights.torch as swt

    with swt.safe_open(path, "pt") as f:
        if dim < 0:
            return f._handle.plan_load(None, None).read_bytes
        whole = [n for n in f.keys() if not (len(f.get_slice(n).get_shape()) > dim and f.get_slice(n).get_shape()[dim] >= world)]
        replicated = f._handle.plan_load(whole, None).read_bytes
        return sum(f._handle.plan_load(None, (dim, r, world)).read_bytes - replicated for r in range(world)) + replicated


BLOCK = 64 << 10  # the HTTP source's cache block (docs/HTTP.md)


def large_model_file(path):
    """16 MiB in tensors of 4 MiB, and two small ones. Large reads over HTTP fetch exactly their bytes,
    while small ones (up to 4 x the read-ahead: a shard part of a 1 MiB tensor is one) go through the
    HTTP source's cache of aligned 64 KiB blocks, which fetches whole blocks, a block twice at times
    on concurrent misses: a load without a group does the same (docs/HTTP.md)."""
    rng = np.random.default_rng(4)
    tensors = [(f"w{i}", "F32", [1024, 1024], rng.standard_normal((1024, 1024)).astype("<f4").tobytes()) for i in range(4)]
    tensors += [("b", "F32", [3], rng.standard_normal(3).astype("<f4").tobytes()), ("s", "F64", [], np.float64(2.5).tobytes())]
    path.write_bytes(build_file(tensors))
    return path


@pytest.mark.parametrize("world,dim", [(2, -1), (4, -1), (4, 0)])
def test_over_http_the_server_sends_each_needed_byte_once(server, world, dim):  # noqa: F811
    """Along dimension 0 a shard part is one range; along 1 it is rows of a slice, which the HTTP reader
    fetches in windows with the gaps (docs/HTTP.md), so it is left out here."""
    name = f"group-{world}-{dim}.safetensors"
    local = large_model_file(server.www / name)
    url = server.url(name)
    import safeweights.torch as swt

    before = nginx_bytes(server, name)
    with swt.safe_open(url, "pt"):
        pass
    opening = nginx_bytes(server, name) - before  # what opening the file costs a process
    code, out, err = run_group(world, "group", url, str(dim))
    assert code == 0, out + err
    read = [int(n) for n in re.findall(r"^READ (\d+)$", out, re.M)]
    needed = needed_bytes(local, world, dim)
    assert len(read) == world and sum(read) == needed, (read, needed)
    # What the server sent for the loads: the needed bytes once, and at most a few blocks of the HTTP
    # source's cache per rank beyond: a small read (up to 4 blocks: the tensors read whole are a few
    # bytes here) is fetched as whole blocks, at times twice on concurrent misses. Each rank reading it
    # all would be world x needed.
    sent = nginx_bytes(server, name) - before - opening - world * opening
    assert needed <= sent <= needed + world * 8 * BLOCK, (sent, needed)


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("mode", ["missing", "truncate", "exit", "stall"])
def test_a_rank_that_fails_makes_every_rank_raise(tmp_path, world, mode):
    path = model_file(tmp_path / "m.safetensors")
    for r in range(world):  # node-local copies: the truncated one is the bad rank's alone
        shutil.copy(path, tmp_path / f"m{r}.safetensors")
    bad = world - 1
    code, out, err = run_group(world, mode, str(tmp_path / "m{rank}.safetensors"), str(bad))
    raised = re.findall(r"^RAISED (\S+) (\S+) (.*)$", out, re.M)
    survivors = world - 1 if mode in ("exit", "stall") else world
    assert len(raised) == survivors and "LOADED" not in out, out + err
    if mode == "missing":
        assert all(cls == "FileNotFoundError" for cls, _, _ in raised), raised
        assert all(f"m{bad}.safetensors.missing" in message for _, _, message in raised), raised
    if mode == "truncate":
        peers = [message for _, _, message in raised if f"rank {bad} of {world} failed to read its part" in message]
        assert len(peers) == world - 1, raised
    if mode == "stall":
        # The first survivor to miss the deadline raises Timeout; one still waiting when it exits may see
        # its connection close first (IoError).
        kinds = [kind for _, kind, _ in raised]
        assert "Timeout" in kinds and set(kinds) <= {"Timeout", "IoError"}, raised
    if mode == "exit":
        assert code == 3, out + err  # the bad rank's own status; the others exited 0 after raising
    else:
        assert code == 0, out + err


def test_a_timeout_without_a_group_is_a_value_error(tmp_path):
    import safeweights.torch as swt

    path = model_file(tmp_path / "m.safetensors")
    for load in (swt.load_file, swt.load_tensors):
        with pytest.raises(ValueError, match="needs process_group"):
            load(path, timeout=5)


def test_timeouts_torch_reads_as_no_deadline_are_refused(tmp_path):
    """torch's Work.wait takes whole milliseconds and 0 means "wait forever" (in practice the process
    group's own 30 minutes): a deadline under 1 ms would make a surviving rank hang, so it is refused
    before any collective. Checked on a real one-rank gloo group, where such a load would otherwise
    succeed."""
    import datetime

    import safeweights.torch as swt

    path = model_file(tmp_path / "m.safetensors")
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        refused = [0, -1, 0.0009, 1e-300, float("nan"), float("inf"), 1e300,
                   datetime.timedelta(0), datetime.timedelta(microseconds=999), datetime.timedelta(seconds=-5)]
        for timeout in refused:
            for load in (swt.load_file, swt.load_tensors):
                with pytest.raises(ValueError, match="timeout"):
                    load(path, process_group=dist.group.WORLD, timeout=timeout)
        with pytest.raises(TypeError, match="timeout must be seconds or a datetime.timedelta, not bool"):
            swt.load_file(path, process_group=dist.group.WORLD, timeout=True)
        # The smallest deadline torch keeps is accepted as it is (not loaded with: 1 ms is too short for a
        # busy machine), and the ordinary forms still load.
        from safeweights import _load

        assert _load.group_timeout(0.001) == datetime.timedelta(milliseconds=1)
        assert _load.group_timeout(datetime.timedelta(milliseconds=1)) == datetime.timedelta(milliseconds=1)
        expected = swt.load_file(path)
        for timeout in (30, 30.5, datetime.timedelta(seconds=30), np.float64(30.0), np.int64(30)):
            got = swt.load_file(path, process_group=dist.group.WORLD, timeout=timeout)
            assert got.keys() == expected.keys() and all(torch.equal(got[k], expected[k]) for k in got)
    finally:
        dist.destroy_process_group()
