"""The library's loaders from Python (docs/PYTHON.md, "Loading"): safeweights.torch.load_file with
shard=(dim, rank, world), load_tensors for any supported format, CUDA device loads (skipped without a
GPU; without one, the SafetensorError a CUDA load raises), and tensor-parallel loading with two CPU
processes (gloo) started by torchrun, or, where torchrun itself fails (Debian 12's torch 1.13 on Python
3.11), with torchrun's environment by the test itself.

Expected values come from torch itself: torch.tensor_split of the whole tensor, torch.load of the
checkpoint, the CPU load for the device load."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import build_file

try:
    import torch
except ImportError:
    # CI installs Debian's python3-torch for the system interpreter (scripts/install-deps.sh): there a
    # missing torch is a broken setup, and passing by skipping every test would hide it. A virtual
    # environment without torch (scripts/test.sh's numpy 2 venv) skips.
    if os.environ.get("CI") == "true" and sys.prefix == sys.base_prefix:
        pytest.fail("torch is not installed for the system Python under CI=true: scripts/install-deps.sh installs "
                    "python3-torch", pytrace=False)
    pytest.skip("torch is not installed", allow_module_level=True)
import safeweights  # noqa: E402 (after the torch check)
import safeweights.torch as swt  # noqa: E402

HERE = Path(__file__).resolve().parent


def tp_file(tmp_path):
    rng = np.random.default_rng(7)
    tensors = [
        ("w3", "F32", [5, 7, 9], rng.standard_normal((5, 7, 9)).astype("<f4").tobytes()),
        ("w2", "F16", [10, 6], rng.standard_normal((10, 6)).astype("<f2").tobytes()),
        ("ids", "I64", [3, 4], rng.integers(-(2**40), 2**40, (3, 4)).astype("<i8").tobytes()),
        ("mask", "BOOL", [2, 3], rng.integers(0, 2, (2, 3)).astype("?").tobytes()),
        ("bias", "F32", [2], rng.standard_normal(2).astype("<f4").tobytes()),
        ("scalar", "F64", [], np.float64(1.5).tobytes()),
        ("empty", "F32", [0, 4], b""),
    ]
    path = tmp_path / "tp.safetensors"
    path.write_bytes(build_file(tensors))
    return path


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("world", [1, 2, 3])
def test_each_rank_gets_its_tensor_split_part(tmp_path, dim, world):
    path = tp_file(tmp_path)
    whole = swt.load_file(path)
    for rank in range(world):
        part = swt.load_file(path, shard=(dim, rank, world))
        assert list(part) == list(whole)
        for name, t in whole.items():
            split = world > 1 and t.dim() > dim and t.shape[dim] >= world
            want = torch.tensor_split(t, world, dim)[rank] if split else t
            assert part[name].dtype == want.dtype and torch.equal(part[name], want), (name, rank)


def test_a_shard_reads_only_its_part(tmp_path):
    path = tmp_path / "big.safetensors"
    path.write_bytes(build_file([("w", "F32", [64, 1024], bytes(64 * 1024 * 4))]))
    with swt.safe_open(path, "pt") as f:
        whole = f._handle.plan_load(None, None).read_bytes
        half = f._handle.plan_load(None, (0, 1, 2)).read_bytes
        quarter_cols = f._handle.plan_load(None, (1, 0, 4)).read_bytes
    assert whole >= 64 * 1024 * 4
    assert half == 32 * 1024 * 4
    assert quarter_cols == 64 * 256 * 4


@pytest.mark.parametrize("shard", [(0, 2, 2), (0, -1, 2), (-1, 0, 2), (0, 0, 0), (0, 0), "x"])
def test_a_bad_shard_is_a_value_error(tmp_path, shard):
    with pytest.raises(ValueError):
        swt.load_file(tp_file(tmp_path), shard=shard)


def test_load_tensors_reads_a_pytorch_checkpoint_without_its_pickle_running(tmp_path):
    sd = {"a": torch.arange(12, dtype=torch.float32).reshape(3, 4), "b": torch.ones(5, dtype=torch.bfloat16),
          "t": torch.arange(6, dtype=torch.int64).reshape(2, 3).t()}
    path = tmp_path / "model.pt"
    torch.save(sd, path)
    got = swt.load_tensors(path)
    want = torch.load(path)
    assert list(got) == sorted(got, key=list(want).index)
    for name, t in want.items():
        assert got[name].dtype == t.dtype and torch.equal(got[name], t), name
    part = swt.load_tensors(path, shard=(0, 1, 2))
    assert torch.equal(part["a"], torch.tensor_split(want["a"], 2, 0)[1])


class TrainingState:
    """Extra state a training checkpoint holds beside its weights: a class of this module, which the
    checkpoint reader does not know."""

    def __init__(self, step):
        self.step = step


def test_load_tensors_allow_unknown_keeps_unknown_globals_inert(tmp_path):
    weights = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.ones(3, dtype=torch.float16)}
    path = tmp_path / "train.pt"
    torch.save({"model": weights, "state": TrainingState(7)}, path)
    with pytest.raises(safeweights.SafetensorError) as e:
        swt.load_tensors(path)
    assert e.value.kind == "UnsafePickle" and "TrainingState" in str(e.value)
    got = swt.load_tensors(path, allow_unknown=True)
    want = torch.load(path, weights_only=False)["model"]
    assert list(got) == list(want)
    for name, t in want.items():
        assert got[name].dtype == t.dtype and torch.equal(got[name], t), name
    # key= chooses the top-level entry, as the CLI's --key
    assert list(swt.load_tensors(path, allow_unknown=True, key="model")) == list(want)


def test_load_tensors_equals_load_file_for_safetensors(tmp_path):
    path = tp_file(tmp_path)
    got, want = swt.load_tensors(path), swt.load_file(path)
    assert list(got) == list(want)
    for name in want:
        assert torch.equal(got[name], want[name]), name


def test_runs_of_same_shape_tensors_come_out_as_separate_correct_views(tmp_path):
    # Runs of one dtype and shape (made with one unbind), broken by another shape, a dtype change,
    # scalars and an empty tensor: every tensor must still be its own bytes.
    rng = np.random.default_rng(11)
    tensors = []
    for i in range(40):
        shape = [3, 5] if i % 10 != 7 else [2, 2]
        code, np_t = ("F32", "<f4") if i < 25 else ("I16", "<i2")
        tensors.append((f"t{i:02d}", code, shape, rng.standard_normal(shape).astype(np_t).tobytes()))
    tensors += [(f"s{i}", "F64", [], np.float64(i).tobytes()) for i in range(3)] + [("e", "F32", [0], b"")]
    path = tmp_path / "runs.safetensors"
    path.write_bytes(build_file(tensors))
    got, want = swt.load_tensors(path), swt.load_file(path)
    assert list(got) == list(want)
    for name in want:
        assert got[name].shape == want[name].shape and torch.equal(got[name], want[name]), name
    got["t00"].fill_(0)  # views of separate bytes: one tensor's write leaves its neighbours alone
    assert torch.equal(got["t01"], want["t01"])


def converted_gguf(tmp_path, *convert_args):
    """A small safetensors file and its GGUF conversion by the CLI (``convert_args`` added, e.g.
    ``--type q8_0``): (safetensors path, GGUF path). Skips where the CLI is not built."""
    cli = os.environ.get("SAFEWEIGHTS_CLI")
    if not cli:
        pytest.skip("SAFEWEIGHTS_CLI is not set")
    rng = np.random.default_rng(5)
    src = tmp_path / "m.safetensors"
    src.write_bytes(build_file([
        ("a", "F32", [4, 32], rng.standard_normal((4, 32)).astype("<f4").tobytes()),
        ("b", "F16", [64], rng.standard_normal(64).astype("<f2").tobytes()),
        ("c", "I32", [2, 3], rng.integers(-5, 5, (2, 3)).astype("<i4").tobytes()),
    ]))
    gguf = tmp_path / "m.gguf"
    subprocess.run([cli, "convert", str(src), str(gguf), *convert_args], check=True, capture_output=True, timeout=60)
    return src, gguf


def test_load_tensors_reads_a_gguf_file_written_by_convert(tmp_path):
    src, gguf = converted_gguf(tmp_path)
    got, want = swt.load_tensors(gguf), swt.load_file(src)
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name].dtype == want[name].dtype and torch.equal(got[name], want[name]), name
    part = swt.load_tensors(gguf, shard=(1, 0, 2))
    assert torch.equal(part["a"], torch.tensor_split(want["a"], 2, 1)[0])


def test_a_quantized_gguf_raises_safetensor_error_naming_the_tensor_and_its_type(tmp_path):
    _, gguf = converted_gguf(tmp_path, "--type", "q8_0")
    quantized = [t for t in safeweights.inspect(str(gguf))["tensors"] if t["type"] == "Q8_0"]
    assert quantized, "convert --type q8_0 quantized nothing"
    with pytest.raises(safeweights.SafetensorError, match=rf"tensor {quantized[0]['name']} is Q8_0: it has no torch dtype"):
        swt.load_tensors(gguf)


def test_load_tensors_reads_a_split_gguf_from_any_of_its_files(tmp_path):
    """llama.cpp's split files open as one model in Python too (docs/GGUF.md, "Split files")."""
    cli = os.environ.get("SAFEWEIGHTS_CLI")
    if not cli:
        pytest.skip("SAFEWEIGHTS_CLI is not set")
    rng = np.random.default_rng(6)
    src = tmp_path / "m.safetensors"
    src.write_bytes(build_file([(f"t{i}", "F32", [3, 32], rng.standard_normal((3, 32)).astype("<f4").tobytes()) for i in range(5)]))
    subprocess.run([cli, "convert", str(src), str(tmp_path / "s.gguf"), "--split-max-tensors", "2"],
                   check=True, capture_output=True, timeout=60)
    want = swt.load_file(src)
    for k in (1, 2, 3):
        path = tmp_path / f"s-{k:05d}-of-00003.gguf"
        got = swt.load_tensors(path)
        assert list(got) == list(want)
        for name in want:
            assert torch.equal(got[name], want[name]), name
        assert safeweights.detect_format(str(path)) == "gguf"
    info = safeweights.inspect(str(tmp_path / "s-00002-of-00003.gguf"))
    assert [t["split"] for t in info["tensors"]] == [0, 0, 1, 1, 2]
    (tmp_path / "s-00003-of-00003.gguf").unlink()
    with pytest.raises(Exception, match="00003-of-00003"):
        swt.load_tensors(tmp_path / "s-00001-of-00003.gguf")


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@cuda
def test_cuda_loads_equal_the_cpu_load(tmp_path):
    path = tp_file(tmp_path)
    cpu = swt.load_file(path)
    for device in ("cuda", "cuda:0", 0, torch.device("cuda:0")):
        got = swt.load_file(path, device=device)
        for name, t in cpu.items():
            assert got[name].is_cuda and torch.equal(got[name].cpu(), t), (device, name)
    with swt.safe_open(path, "pt", device="cuda:0") as f:
        assert torch.equal(f.get_tensor("w2").cpu(), cpu["w2"])
    part = swt.load_file(path, device="cuda:0", shard=(1, 1, 2))
    assert torch.equal(part["w3"].cpu(), torch.tensor_split(cpu["w3"], 2, 1)[1])
    assert torch.equal(swt.load_tensors(path, device="cuda:0")["ids"].cpu(), cpu["ids"])


@cuda
def test_an_unquantized_gguf_loads_onto_the_device_equal_to_the_cpu_load(tmp_path):
    _, gguf = converted_gguf(tmp_path)
    cpu = swt.load_tensors(gguf)
    got = swt.load_tensors(gguf, device="cuda:0")
    assert list(got) == list(cpu)
    for name, t in cpu.items():
        assert got[name].is_cuda and got[name].dtype == t.dtype and torch.equal(got[name].cpu(), t), name


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is available")
@pytest.mark.parametrize("device", ["cuda", "cuda:0", 0])
def test_without_cuda_a_cuda_load_raises_a_device_error(tmp_path, device):
    path = tp_file(tmp_path)

    def through_safe_open():
        with swt.safe_open(path, "pt", device=device) as f:
            return f.get_tensors()

    for load in (lambda: swt.load_file(path, device=device), lambda: swt.load_tensors(path, device=device), through_safe_open):
        with pytest.raises(safeweights.SafetensorError, match="cannot load onto cuda") as e:
            load()
        assert e.value.kind == "DeviceError"


@cuda
def test_a_dduf_entry_loads_onto_the_device(tmp_path):
    import safeweights.dduf as dduf

    folder = tmp_path / "pipe"
    (folder / "unet").mkdir(parents=True)
    (folder / "model_index.json").write_text('{"unet": ["diffusers", "UNet2DConditionModel"]}')
    st = tp_file(tmp_path)
    (folder / "unet" / "config.json").write_text("{}")
    (folder / "unet" / "model.safetensors").write_bytes(st.read_bytes())
    archive = tmp_path / "p.dduf"
    dduf.export_folder_as_dduf(archive, folder)
    entries = dduf.read_dduf_file(archive)
    got = dduf.load_safetensors(entries["unet/model.safetensors"], "pt", device="cuda:0")
    for name, t in swt.load_file(st).items():
        assert got[name].is_cuda and torch.equal(got[name].cpu(), t), name


@pytest.mark.parametrize("ci", ["true", ""])
def test_without_torch_the_file_fails_under_ci_and_skips_elsewhere(tmp_path, ci):
    (tmp_path / "torch.py").write_text("raise ImportError('no torch here')\n")  # shadows the real one
    env = dict(os.environ, CI=ci, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(Path(__file__))],
                       cwd=HERE, env=env, capture_output=True, text=True, timeout=120)
    skipped = r.returncode in (0, 5) and "torch is not installed" in r.stdout  # 5: pytest collected nothing
    if ci and sys.prefix == sys.base_prefix:
        assert r.returncode not in (0, 5) and "python3-torch" in r.stdout, r.stdout + r.stderr
    else:  # outside CI, or in a virtual environment
        assert skipped, r.stdout + r.stderr


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_like_torchrun(env, args, world=2):
    """The two processes with the environment torchrun gives them (RANK, WORLD_SIZE, LOCAL_RANK,
    MASTER_ADDR, MASTER_PORT): for torch 1.13 on Python 3.11 (Debian 12), whose torchrun itself fails
    before starting anything (its elastic agent's enum handling breaks on Python 3.11)."""
    port = str(free_port())
    procs = [subprocess.Popen(args, env=dict(env, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world),
                                             LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=port),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(world)]
    outs = [p.communicate(timeout=240) for p in procs]
    return max(p.returncode for p in procs), "".join(o for o, _ in outs), "".join(e for _, e in outs)


def test_two_processes_under_torchrun_join_to_the_whole_tensors(tmp_path):
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    path = tp_file(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [os.environ.get("PYTHONPATH", "")] + sys.path if p),
               OMP_NUM_THREADS="1")
    for dim in (0, 1):
        worker = [sys.executable, str(HERE / "tp_worker.py"), str(path), str(dim)]
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc_per_node=2"] + worker[1:]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
        code, out, err = r.returncode, r.stdout, r.stderr
        if code != 0 and "in to_map" in err:
            code, out, err = launch_like_torchrun(env, worker)
        assert code == 0, out + err
        assert f"OK 7 tensors, world 2, dim {dim}" in out, out + err
