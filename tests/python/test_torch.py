"""safeweights.torch: round trips, zero-copy copy-on-write views, save rules, save_model/load_model."""

import gc
import struct

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import safeweights  # noqa: E402
import safeweights.numpy  # noqa: E402,F401
from safeweights import SafetensorError, safe_open  # noqa: E402
from safeweights.torch import load, load_file, load_model, save, save_file, save_model  # noqa: E402

from conftest import build_file, parse_file  # noqa: E402

# torch dtype -> (safetensors code, numpy dtype used to check the raw bytes independently)
DTYPES = {
    torch.float64: ("F64", "<f8"), torch.float32: ("F32", "<f4"), torch.float16: ("F16", "<f2"),
    torch.bfloat16: ("BF16", None), torch.int64: ("I64", "<i8"), torch.int32: ("I32", "<i4"),
    torch.int16: ("I16", "<i2"), torch.int8: ("I8", "i1"), torch.uint8: ("U8", "u1"), torch.bool: ("BOOL", "?"),
    torch.complex64: ("C64", "<c8"),
}


def _sample(dtype, shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        lo = 0 if dtype == torch.uint8 else -100
        return torch.randint(lo, 100, shape, generator=g, dtype=dtype)
    if dtype == torch.complex64:
        return torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g))
    return (torch.randn(shape, generator=g) * 10).to(dtype)


@pytest.mark.parametrize("dtype", list(DTYPES), ids=lambda d: str(d).split(".")[-1])
def test_roundtrip_every_dtype(tmp_path, dtype):
    tensors = {"m": _sample(dtype, (3, 5)), "v": _sample(dtype, (7,), 1), "s": _sample(dtype, (), 2),
               "z": torch.empty((0, 4), dtype=dtype)}
    p = tmp_path / "t.safetensors"
    save_file(tensors, p)
    code, np_dt = DTYPES[dtype]
    header, data = parse_file(p.read_bytes())
    assert header["m"]["dtype"] == code and header["m"]["shape"] == [3, 5]
    if np_dt is not None:  # the bytes on disk are the little-endian C-order values
        b, e = header["m"]["data_offsets"]
        np.testing.assert_array_equal(np.frombuffer(data[b:e], dtype=np_dt).reshape(3, 5), tensors["m"].numpy())
    for loaded in (load_file(p), load_file(str(p), backend="pread"), load(save(tensors)), load(p.read_bytes())):
        assert set(loaded) == set(tensors)
        for k, v in tensors.items():
            assert loaded[k].dtype == v.dtype and loaded[k].shape == v.shape
            assert torch.equal(loaded[k], v)


def test_bf16_reference_vector():
    t = torch.ones((2, 2), dtype=torch.bfloat16)
    t[0, 0] = 2.25
    out = save({"test": t})
    js = b'{"test":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}}'
    assert len(js) == 60
    assert out == struct.pack("<Q", 64) + js + b"    " + bytes.fromhex("1040803f803f803f")


def test_i32_and_c64_reference_vectors():
    js = b'{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}'
    assert save({"test": torch.zeros((2, 2), dtype=torch.int32)}) == b"@" + bytes(7) + js + b"    " + bytes(16)
    c = torch.zeros((2, 2), dtype=torch.complex64)
    c[1][1] = complex(-1, 1)
    assert save({"test": c})[-8:] == bytes.fromhex("000080bf0000803f")


def test_zero_copy_views_are_writable_without_touching_the_file(tmp_path):
    p = tmp_path / "t.safetensors"
    orig = torch.arange(4096, dtype=torch.float32)
    save_file({"t": orig, "u": torch.ones(3, dtype=torch.int64)}, p)
    before = p.read_bytes()
    with safe_open(p, framework="pt") as f:
        t = f.get_tensor("t")
        t2 = f.get_tensor("t")
    loaded = load_file(p)
    loaded["t"].add_(1)
    loaded["u"].zero_()
    t.mul_(-1)
    assert torch.equal(loaded["t"], orig + 1)
    assert torch.equal(t, -orig)
    # Two tensors from one handle view one private mapping (as in the reference, whose tensors are views
    # of one torch storage): they alias each other, but never the file or other handles.
    assert torch.equal(t2, -orig)
    again = load_file(p)
    assert torch.equal(again["t"], orig) and torch.equal(again["u"], torch.ones(3, dtype=torch.int64))
    assert p.read_bytes() == before


def test_tensors_outlive_handle(tmp_path):
    p = tmp_path / "t.safetensors"
    x = _sample(torch.float32, (50, 20))
    save_file({"x": x}, p)
    f = safe_open(p, framework="pt")
    t = f.get_tensor("x")
    s = f.get_slice("x")[5:9, 1::3]
    f.close()
    del f
    gc.collect()
    assert torch.equal(t, x) and torch.equal(s, x[5:9, 1::3])


def test_load_file_order_and_metadata(tmp_path):
    p = tmp_path / "t.safetensors"
    save_file({"b": torch.zeros(2), "a": torch.zeros(2, dtype=torch.float64)}, p, metadata={"format": "pt"})
    with safe_open(p, framework="pt") as f:
        assert f.metadata() == {"format": "pt"}
        assert f.keys() == ["a", "b"]
        assert list(load_file(p)) == f.offset_keys()
    save_file({"b": torch.zeros(2)}, p)
    with safe_open(p, framework="pt") as f:
        assert f.metadata() is None


def test_compare_with_torch_save(tmp_path):
    tensors = {f"t{i}": _sample(dt, (4, 3), i) for i, dt in enumerate(DTYPES)}
    torch.save(tensors, tmp_path / "ref.pt")
    ref = torch.load(tmp_path / "ref.pt")
    save_file(tensors, tmp_path / "x.safetensors")
    ours = load_file(tmp_path / "x.safetensors")
    assert set(ours) == set(ref)
    for k in ref:
        assert ours[k].dtype == ref[k].dtype
        assert torch.equal(ours[k], ref[k])


def test_save_errors():
    with pytest.raises(ValueError) as e:
        save("test")
    assert str(e.value) == "Expected a dict of [str, torch.Tensor] but received <class 'str'>"
    with pytest.raises(ValueError) as e:
        save({"test": {"a": 1}})
    assert str(e.value) == "Key `test` is invalid, expected torch.Tensor but received <class 'dict'>"
    sparse = torch.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (3,))
    with pytest.raises(ValueError) as e:
        save({"test": sparse})
    assert str(e.value) == (
        "You are trying to save a sparse tensors: `['test']` which this library does not support. You can make it a"
        " dense tensor before saving with `.to_dense()` but be aware this might make a much larger file than needed."
    )
    with pytest.raises(ValueError) as e:
        save({"test": torch.zeros((4, 3)).t()})
    assert str(e.value).startswith("You are trying to save a non contiguous tensor: `test`")
    with pytest.raises(TypeError):
        save({"test": torch.zeros(2)}, metadata={"a": 2})


def test_shared_storage(tmp_path):
    base = torch.arange(10, dtype=torch.float32)
    with pytest.raises(RuntimeError, match="share memory"):
        save({"a": base, "b": base[2:5]})
    with pytest.raises(RuntimeError, match="save_model"):
        save_file({"a": base, "b": base}, tmp_path / "x.safetensors")
    # disjoint slices of one storage are fine
    out = load(save({"lo": base[:5], "hi": base[5:]}))
    assert torch.equal(out["lo"], base[:5]) and torch.equal(out["hi"], base[5:])


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)
        self.b.weight = self.a.weight


def test_save_model_load_model_tied(tmp_path):
    torch.manual_seed(0)
    model = Tied()
    p = tmp_path / "model.safetensors"
    with pytest.raises(RuntimeError):
        save_file(model.state_dict(), p)
    save_model(model, p)
    with safe_open(p, framework="pt") as f:
        assert f.keys() == ["a.bias", "a.weight", "b.bias"]
        assert f.metadata() == {"b.weight": "a.weight"}
    torch.manual_seed(1)
    other = Tied()
    assert not torch.equal(other.a.weight, model.a.weight)
    missing, unexpected = load_model(other, p)
    assert missing == set() and unexpected == []  # a set and a list, as the reference returns them
    for (k1, v1), (k2, v2) in zip(model.state_dict().items(), other.state_dict().items()):
        assert k1 == k2 and torch.equal(v1, v2)
    assert other.a.weight is other.b.weight  # the tie survives
    x = torch.randn(2, 4)
    assert torch.equal(model.b(model.a(x)), other.b(other.a(x)))


def test_save_model_keeps_user_metadata(tmp_path):
    model = Tied()
    p = tmp_path / "model.safetensors"
    save_model(model, p, metadata={"b.weight": "mine", "x": "y"})
    with safe_open(p, framework="pt") as f:
        assert f.metadata() == {"b.weight": "mine", "x": "y"}


def test_load_model_strict_errors(tmp_path):
    p = tmp_path / "m.safetensors"
    save_file({"weight": torch.zeros(3, 2)}, p)
    lin = torch.nn.Linear(2, 3)
    with pytest.raises(RuntimeError, match="Missing key"):
        load_model(lin, p)
    missing, unexpected = load_model(lin, p, strict=False)
    assert missing == {"bias"} and unexpected == []
    assert torch.equal(lin.weight.detach(), torch.zeros(3, 2))


@pytest.mark.parametrize(
    "code,raw",
    [("U16", np.arange(4, dtype="<u2").tobytes()), ("U32", np.arange(4, dtype="<u4").tobytes()),
     ("U64", np.arange(4, dtype="<u8").tobytes()), ("F8_E4M3", bytes([0x38, 0x40, 0x44, 0x48])),
     ("F8_E5M2", bytes([0x3C, 0x40, 0x42, 0x44]))],
    ids=["U16", "U32", "U64", "F8_E4M3", "F8_E5M2"],
)
def test_dtypes_missing_in_this_torch(tmp_path, code, raw):
    pt_name = {"U16": "uint16", "U32": "uint32", "U64": "uint64", "F8_E4M3": "float8_e4m3fn",
               "F8_E5M2": "float8_e5m2"}[code]
    if isinstance(getattr(torch, pt_name, None), torch.dtype):
        pytest.skip(f"this torch has torch.{pt_name}")
    p = tmp_path / "x.safetensors"
    p.write_bytes(build_file([("t", code, [4], raw)]))
    with safe_open(p, framework="pt") as f:
        assert f.get_slice("t").get_dtype() == code
        with pytest.raises(SafetensorError, match="torch"):
            f.get_tensor("t")
        assert bytes(f.get_raw("t")) == raw
    with pytest.raises(SafetensorError, match="torch"):
        load_file(p)
    if code.startswith("U"):  # numpy reads them
        arr = safeweights.numpy.load_file(p)["t"]
        np.testing.assert_array_equal(arr, np.arange(4))


def test_unsupported_dtypes_written_via_numpy_and_tensorspec(tmp_path):
    import safeweights.numpy as swnp

    a = np.arange(6, dtype=np.uint32).reshape(2, 3)
    p = tmp_path / "u.safetensors"
    swnp.save_file({"u": a}, p)
    if hasattr(torch, "uint32"):  # torch 2.3 and later read them
        assert torch.equal(load_file(p)["u"].to(torch.int64), torch.arange(6).reshape(2, 3))
    else:
        with pytest.raises(SafetensorError, match="torch"):
            load_file(p)
    raw = bytes([1, 2, 3, 4])
    buf = np.frombuffer(raw, dtype=np.uint8)
    spec = safeweights.TensorSpec(dtype="float8_e5m2", shape=[4], data_ptr=buf.ctypes.data, data_len=4)
    blob = safeweights.serialize({"f8": spec})
    header, data = parse_file(blob)
    assert header["f8"]["dtype"] == "F8_E5M2" and data == raw


def test_device_argument_cpu(tmp_path):
    p = tmp_path / "x.safetensors"
    save_file({"x": torch.ones(3)}, p)
    for dev in ("cpu", torch.device("cpu"), None):
        out = load_file(p, device=dev)
        assert out["x"].device.type == "cpu"


def test_path_argument(tmp_path):
    save_file({"x": torch.ones(3)}, tmp_path / "x.safetensors")
    save_file({"x": torch.ones(3)}, str(tmp_path / "y.safetensors"))
    assert (tmp_path / "x.safetensors").read_bytes() == (tmp_path / "y.safetensors").read_bytes()


# ---- the helpers transformers and accelerate import from safetensors.torch ----

def test_storage_ptr_and_size():
    from safeweights.torch import storage_ptr, storage_size

    base = torch.arange(12, dtype=torch.float32)
    view = base[4:8]
    # Expected values from torch's own storage API of this version.
    storage = base.untyped_storage() if hasattr(base, "untyped_storage") else base.storage()
    assert storage_ptr(base) == storage.data_ptr() == base.data_ptr()
    assert storage_ptr(view) == storage_ptr(base) != view.data_ptr()
    assert storage_size(base) == storage_size(view) == 12 * 4
    assert storage_size(torch.zeros(3, dtype=torch.float64)) == 24
    assert storage_size(torch.zeros(0)) == 0
    meta = torch.empty(4, device="meta")
    assert storage_size(meta) in (0, 16)  # torch >= 2 reports the meta storage's nbytes


def test_find_shared_tensors():
    from safeweights.torch import _find_shared_tensors

    base = torch.arange(10, dtype=torch.float32)
    other = torch.zeros(3)
    groups = _find_shared_tensors({"a": base, "b": base[2:5], "c": base[5:], "d": other, "e": other.view(3, 1),
                                   "m": torch.empty(2, device="meta"), "z": torch.zeros(0)})
    as_sets = sorted(sorted(g) for g in groups)
    # a overlaps b and c; b and c are disjoint slices but both overlap a, so one group; d/e alias.
    assert ["a", "b", "c"] in as_sets and ["d", "e"] in as_sets
    assert all("m" not in g and "z" not in g for g in as_sets)
    # Disjoint slices with nothing spanning them are separate groups.
    groups = _find_shared_tensors({"lo": base[:5], "hi": base[5:]})
    assert sorted(sorted(g) for g in groups) == [["hi"], ["lo"]]


def test_remove_duplicate_names():
    from safeweights.torch import _remove_duplicate_names

    w = torch.zeros(4, 4)
    sd = {"b.weight": w, "a.weight": w, "c": torch.ones(2)}
    assert dict(_remove_duplicate_names(sd)) == {"a.weight": ["b.weight"]}
    assert dict(_remove_duplicate_names(sd, preferred_names=["b.weight"])) == {"b.weight": ["a.weight"]}
    assert dict(_remove_duplicate_names(sd, discard_names=["a.weight"])) == {"b.weight": ["a.weight"]}
    base = torch.zeros(10)
    with pytest.raises(RuntimeError, match="None is covering the entire storage"):
        _remove_duplicate_names({"x": base[:6], "y": base[4:]})


def test_save_model_non_contiguous_hint(tmp_path):
    class T(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(4, 3).t())

    with pytest.raises(ValueError, match=r"non contiguous tensor.*force_contiguous=True"):
        save_model(T(), tmp_path / "m.safetensors", force_contiguous=False)
    save_model(T(), tmp_path / "m.safetensors")
    assert load_file(tmp_path / "m.safetensors")["w"].shape == (3, 4)


def test_public_names_of_the_reference():
    import safeweights.torch as swt

    for name in ("save", "save_file", "load", "load_file", "save_model", "load_model", "storage_ptr",
                 "storage_size", "_find_shared_tensors", "_remove_duplicate_names", "_is_complete", "_end_ptr",
                 "_filter_shared_not_shared", "_flatten"):
        assert callable(getattr(swt, name)), name


def test_conjugate_and_negative_views_are_saved_with_their_values(tmp_path):
    z = torch.tensor([1 + 2j, -3.5 - 4j], dtype=torch.complex64)
    views = {
        "conj": z.conj(),  # a flag over z's memory, which still holds 1+2j, -3.5-4j
        "neg": torch._neg_view(torch.tensor([1.0, -2.0])),
        "neg_imag": torch.tensor([[1 + 2j]]).conj().imag,  # a 1x1 negative view, contiguous
    }
    assert views["conj"].is_conj() and views["neg"].is_neg() and views["neg_imag"].is_neg()
    want = {  # torch's own values for the views
        "conj": torch.tensor([1 - 2j, -3.5 + 4j], dtype=torch.complex64),
        "neg": torch.tensor([-1.0, 2.0]),
        "neg_imag": torch.tensor([[-2.0]]),
    }
    for k, v in views.items():
        assert torch.equal(v.resolve_conj().resolve_neg(), want[k])
    path = tmp_path / "views.safetensors"
    save_file(views, path)
    for loaded in (load(save(views)), load_file(path)):
        for k, w in want.items():
            assert not loaded[k].is_conj() and not loaded[k].is_neg()
            assert torch.equal(loaded[k], w), k
    assert z[0] == 1 + 2j  # the source tensor is untouched
