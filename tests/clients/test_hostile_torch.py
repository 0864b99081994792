"""torch.load(weights_only=True) and our readers on the same hostile and odd checkpoints (issue 28): wherever
both read a file, they read the same tensor names, dtypes, shapes and bytes; wherever we refuse a file, the
refusal is the one docs/PYTORCH.md documents (kind and message), whatever torch does with it.

Our readers are the CLI (`inspect --json` for the names, `cat` for each tensor's bytes) and the Python package
(`safeweights.torch.load_tensors`). The files are made at test time: by torch.save (ZIP and legacy formats:
views that overlap, storage offsets, transposed, stepped and expanded strides, empty keys, nested dicts and
lists, integer keys, bf16, 0-dim and empty tensors) and byte by byte with tests/pytorch/pickles.py for what
torch.save never writes (legacy view keys bound twice or clashing with storage keys, a key list naming a view,
repeated dict keys, keys joining to one dotted name, data.pkl at the wrong depth, overlapping strides,
big-endian storages, always-refused globals). Offline; the clients' venv (torch from the registry).

    PYTHONPATH=$W/build/python SAFEWEIGHTS_CLI=$W/build/safeweights HF_HUB_OFFLINE=1 \\
        python -m pytest -q -p no:cacheprovider tests/clients/test_hostile_torch.py
"""
import json
import os
import struct
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
sw_torch = pytest.importorskip("safeweights.torch")
from safeweights import SafetensorError  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pytorch"))
import pickles as P  # noqa: E402

CLI = os.environ.get("SAFEWEIGHTS_CLI")
if not CLI or not os.path.exists(CLI):
    pytest.skip("SAFEWEIGHTS_CLI is not set to the built safeweights binary", allow_module_level=True)

F6 = struct.pack("<6f", 0, 1, 2, 3, 4, 5)


# --- reading a file three ways --------------------------------------------------------------------------------

def flat(obj, prefix=None):
    """torch.load's tensors by the names docs/PYTORCH.md gives them (each key one part, as it is)."""
    if isinstance(obj, torch.Tensor):
        yield "tensor" if prefix is None else prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from flat(v, str(k) if prefix is None else f"{prefix}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from flat(v, str(i) if prefix is None else f"{prefix}.{i}")


def raw(t):
    """(dtype, shape, the bytes .contiguous() gives)."""
    t = t.detach().contiguous()
    return str(t.dtype).replace("torch.", ""), list(t.shape), t.reshape(-1).view(torch.uint8).numpy().tobytes()


def torch_reads(path):
    """{name: (dtype, shape, bytes)} as torch.load(weights_only=True) gives the file, or the exception."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 (torch raises many kinds; any refusal counts)
        return e
    if isinstance(obj, dict):  # the level docs/PYTORCH.md reads ("Which level")
        obj = next((obj[k] for k in ("state_dict", "model", "module") if isinstance(obj.get(k), dict)), obj)
    return {name: raw(t) for name, t in flat(obj)}


TORCH_DTYPE = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
               "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool", "C64": "complex64"}


def cli_reads(path):
    """{name: (dtype, shape, bytes)} through the CLI, or the error object of `validate --json`."""
    result = json.loads(subprocess.run([CLI, "validate", "--json", path], capture_output=True, text=True).stdout)
    if not result["valid"]:
        return result["error"]
    listed = subprocess.run([CLI, "inspect", "--json", path], capture_output=True, text=True, check=True)
    out = {}
    for t in json.loads(listed.stdout)["tensors"]:
        cat = subprocess.run([CLI, "cat", path, t["name"]], capture_output=True, check=True)
        out[t["name"]] = (TORCH_DTYPE[t["dtype"]], t["shape"], cat.stdout)
    return out


def python_reads(path):
    """{name: (dtype, shape, bytes)} through safeweights.torch.load_tensors, or the SafetensorError."""
    try:
        tensors = sw_torch.load_tensors(path)
    except SafetensorError as e:
        return e
    return {name: raw(t) for name, t in tensors.items()}


# --- the files ------------------------------------------------------------------------------------------------

def saved(tmp_path, name, obj, legacy):
    path = str(tmp_path / f"{name}{'_legacy' if legacy else ''}.pt")
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    return path


def torch_saved_cases():
    """Odd but legal objects torch.save writes: every one must read the same everywhere."""
    base = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    return {
        "overlapping_views": {"base": base, "tied": base, "row": base[2], "block": base[1:4, 2:7], "t": base.t(),
                              "stepped": base[::2, ::3], "col": base[:, 5], "flat_tail": base.view(-1)[40:]},
        "offsets_and_expand": {"off": torch.arange(10, dtype=torch.int64)[3:7], "exp": torch.ones(3, 1).expand(3, 4),
                               "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3), "bf16": torch.randn(2, 3).to(torch.bfloat16)},
        "empty_keys": {"": torch.ones(2), "tensor": torch.zeros(3), "n": {"": torch.arange(4), "b": torch.ones(1)}, "b": torch.zeros(1)},
        "nested": {"net": {"a": {"b": {"c": torch.ones(2)}}}, "lists": [torch.ones(1), (torch.zeros(2), {"x": torch.ones(3)})],
                   "ints": {0: torch.ones(2), 1: torch.zeros(2)}, "meta": {"epoch": 3, "name": "run"}},
        "under_model": {"model": {"w": torch.ones(2), "": torch.zeros(1)}, "optimizer": {"state": {0: {"m": torch.ones(2)}}}},
    }


def views(*entries, **kw):
    return P.legacy_views(*entries, **kw)


def hand_read_cases():
    """Hand-built files with odd storages and strides that torch.save does not write, which we read."""
    w = P.s("w")
    be = struct.pack(">6f", 0, 1, 2, 3, 4, 5)
    return {
        # legacy views: two keys over one storage, and one key declared twice the same way (torch: one storage)
        "legacy_two_views": views(("a", P.legacy_pid("0", ("v", 0, 3))), ("b", P.legacy_pid("0", ("u", 3, 3)))),
        "legacy_view_redeclared_same": views(("a", P.legacy_pid("0", ("v", 3, 3))), ("b", P.legacy_pid("0", ("v", 3, 3)))),
        "legacy_view_and_root": views(("a", P.legacy_pid("0")), ("b", P.legacy_pid("0", ("v", 1, 3)))),
        # strides that overlap, stride 0, transposed, an offset, a storage with bytes no tensor uses
        "odd_strides": P.torch_zip(P.pickle(P.state_dict(
            (P.s("overlap"), P.tensor(P.storage_pid(numel=6), size=(3, 2), stride=(1, 1))),
            (P.s("zero"), P.tensor(P.storage_pid(numel=6), offset=2, size=(2, 3), stride=(0, 1))),
            (P.s("t"), P.tensor(P.storage_pid(numel=6), size=(3, 2), stride=(1, 3))),
            (P.s("tail"), P.tensor(P.storage_pid(numel=6), offset=5, size=(1,), stride=(1,))),
        )), {"0": F6}),
        "big_endian": P.torch_zip(P.pickle(P.state_dict((w, P.tensor(P.storage_pid(numel=6), size=(2, 3), stride=(1, 2))))),
                                  {"0": be}, byteorder=b"big"),
        "empty_key_hand": P.torch_zip(P.pickle(P.state_dict((P.s(""), P.tensor(P.storage_pid())),
                                                            (P.s("tensor"), P.tensor(P.storage_pid(), size=(2,)))))),
        "nested_empty_keys": P.torch_zip(P.pickle(P.state_dict((P.s(""), P.state_dict((P.s("b"), P.tensor(P.storage_pid())))),
                                                               (P.s("b"), P.tensor(P.storage_pid(), size=(2,)))))),
        # torch.save writes data.pkl first; torch.load finds every record by name, so other writers' orders read too
        "zip_version_first": P.zip_of({"archive/version": b"3\n", "archive/data.pkl": P.one_tensor(), "archive/data/0": F6[:16]}),
        "zip_byteorder_first": P.zip_of({"archive/byteorder": b"little", "archive/data.pkl": P.one_tensor(), "archive/data/0": F6[:16],
                                         "archive/version": b"3\n"}),
        "zip_format_version_first": P.zip_of({"archive/.format_version": b"1", "archive/.storage_alignment": b"64",
                                              "archive/data.pkl": P.one_tensor(), "archive/data/0": F6[:16], "archive/version": b"3\n"}),
        "zip_storage_first": P.zip_of({"archive/data/0": F6[:16], "archive/data.pkl": P.one_tensor(), "archive/version": b"3\n"}),
        # a repeated key whose values hold no tensor is not refused (nothing read depends on it)
        "repeated_metadata_key": P.torch_zip(P.pickle(P.state_dict((w, P.tensor(P.storage_pid())), (P.s("epoch"), P.i(1)),
                                                                   (P.s("epoch"), P.i(2))))),
    }


def refused_cases():
    """name -> (bytes, kind, the documented message): issue 28's corpus files, and always-refused globals."""
    cases = {name[:-3]: entry for name, entry in P.issue28_corpus().items()}
    good = P.tensor(P.storage_pid())
    never = "is never read, even with --allow-unknown: a checkpoint has no reason to name it"
    for label, module, name, entry in (("os_system", "os", "system", "os"), ("posixsubprocess", "_posixsubprocess", "fork_exec", "_posixsubprocess"),
                                       ("functools_partial", "functools", "partial", "functools"), ("torch_hub", "torch.hub", "load", "torch.hub"),
                                       ("torch_serialization_load", "torch.serialization", "load", "torch.serialization"),
                                       ("asyncio_submodule", "asyncio.unix_events", "_UnixSubprocessTransport", "asyncio")):
        data = P.torch_zip(P.pickle(P.state_dict((P.s("w"), good), (P.s("x"), P.glob(module, name) + P.tup(P.s("true")) + b"R"))))
        cases["global_" + label] = (data, "UnsafePickle", "pytorch.global-refused", f"(`{entry}` {never})")
    return cases


# --- the tests ------------------------------------------------------------------------------------------------

def same_everywhere(path):
    """torch, the CLI and Python read the file, and read the same."""
    want = torch_reads(path)
    assert not isinstance(want, Exception), f"torch.load refused {path}: {want}"
    got_cli, got_py = cli_reads(path), python_reads(path)
    assert isinstance(got_cli, dict), f"CLI refused {path}: {got_cli}"
    assert not isinstance(got_py, Exception), f"load_tensors refused {path}: {got_py}"
    assert sorted(got_cli) == sorted(want), f"CLI names {sorted(got_cli)} != torch's {sorted(want)}"
    assert sorted(got_py) == sorted(want), f"Python names {sorted(got_py)} != torch's {sorted(want)}"
    for name, t in want.items():
        assert got_cli[name] == t, f"{path}: CLI {name} {got_cli[name][:2]} differs from torch's {t[:2]}"
        assert got_py[name] == t, f"{path}: Python {name} {got_py[name][:2]} differs from torch's {t[:2]}"
    return want


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
@pytest.mark.parametrize("case", sorted(torch_saved_cases()))
def test_torch_saved_files_read_the_same(tmp_path, case, legacy):
    same_everywhere(saved(tmp_path, case, torch_saved_cases()[case], legacy))


@pytest.mark.parametrize("case", sorted(hand_read_cases()))
def test_hand_built_files_read_the_same(tmp_path, case):
    path = str(tmp_path / f"{case}.pt")
    with open(path, "wb") as f:
        f.write(hand_read_cases()[case])
    got = same_everywhere(path)
    if case == "legacy_view_redeclared_same":  # one view, bound once: both names give elements 3..5
        assert got["a"][2] == got["b"][2] == F6[12:]


@pytest.mark.parametrize("case", sorted(refused_cases()))
def test_refusals_are_the_documented_ones(tmp_path, case):
    data, kind, rule, message = refused_cases()[case]
    path = str(tmp_path / f"{case}.pt")
    with open(path, "wb") as f:
        f.write(data)
    got = cli_reads(path)
    assert isinstance(got, dict) and "kind" in got, f"the CLI read {case}"
    assert (got["kind"], got.get("rule")) == (kind, rule), got
    assert message in got["message"], f"CLI message {got['message']!r} does not say {message!r}"
    err = python_reads(path)
    assert isinstance(err, SafetensorError), f"load_tensors read {case}"
    assert (err.kind, err.rule) == (kind, rule) and message in str(err), f"{err.kind} {err.rule} {err}"
    # What torch does with it: the refusal's reason, where torch reads the file.
    theirs = torch_reads(path)
    if case == "legacy_view_key_reused":  # the file states b = [3, 4, 5]; torch runs b = a = [0, 1, 2]
        assert not isinstance(theirs, Exception), theirs
        assert theirs["a"][2] == theirs["b"][2] == F6[:12]
    if case == "legacy_view_key_is_storage_key":  # torch gives `b` the whole storage `0`
        assert not isinstance(theirs, Exception), theirs
        assert theirs["b"][1] == [3] and theirs["b"][2] == F6[:12]
    if case.startswith("repeated_key_tensor_then_int"):  # torch keeps the last value: no tensor `w`
        assert not isinstance(theirs, Exception) and "w" not in theirs, theirs
    if case.startswith("global_"):  # torch's weights-only unpickler refuses these too
        assert isinstance(theirs, Exception)


def test_empty_key_is_torchs_key(tmp_path):
    """{'': t, 'tensor': t2}: two tensors, named as torch keys them (issue 28 item 6)."""
    path = saved(tmp_path, "empty", {"": torch.ones(2), "tensor": torch.zeros(3)}, legacy=False)
    got = same_everywhere(path)
    assert sorted(got) == ["", "tensor"]
