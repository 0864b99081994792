"""safeweights.numpy: round trips, reference byte vectors, layouts, read-only views, lifetimes."""

import gc
import importlib.util
import json
import struct

import numpy as np
import pytest

import safeweights
from safeweights import SafetensorError, safe_open
from safeweights.numpy import load, load_file, save, save_file

from conftest import NP_CODES, build_file, header_bytes, parse_file

ALL_DTYPES = [np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64,
              np.float16, np.float32, np.float64, np.complex64]


def _sample(dtype, shape, rng):
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) if shape else 1
    if dtype == np.bool_:
        flat = rng.integers(0, 2, n).astype(bool)
    elif dtype.kind in "ui":
        info = np.iinfo(dtype)
        flat = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    elif dtype.kind == "c":
        flat = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
    else:
        flat = (rng.standard_normal(n) * 100).astype(dtype)
    return flat.reshape(shape)


def _assert_same(a, b):
    assert a.dtype == b.dtype
    assert a.shape == b.shape
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_roundtrip_every_dtype_file_and_bytes(tmp_path, rng, dtype):
    tensors = {"a": _sample(dtype, (3, 4), rng), "b": _sample(dtype, (5,), rng), "s": _sample(dtype, (), rng),
               "z": _sample(dtype, (0, 3), rng)}
    path = tmp_path / "x.safetensors"
    save_file(tensors, path)
    for loaded in (load_file(path), load_file(str(path), backend="pread"), load(save(tensors)),
                   load(path.read_bytes())):
        assert set(loaded) == set(tensors)
        for k, v in tensors.items():
            _assert_same(loaded[k], v)


@pytest.mark.parametrize("code", sorted(NP_CODES))
def test_data_bytes_match_numpy_tobytes(code, rng):
    arr = _sample(np.dtype(NP_CODES[code]).newbyteorder("="), (2, 3), rng)
    header, data = parse_file(save({"t": arr}))
    assert header["t"] == {"dtype": code, "shape": [2, 3], "data_offsets": [0, arr.nbytes]}
    assert data == arr.astype(NP_CODES[code]).tobytes()


def test_read_file_built_with_struct(tmp_path):
    a = np.arange(12, dtype="<f4").reshape(3, 4)
    b = np.array([[1, -2], [3, -4]], dtype="<i2")
    path = tmp_path / "x.safetensors"
    path.write_bytes(build_file([("w", "F32", [3, 4], a.tobytes()), ("b", "I16", [2, 2], b.tobytes())]))
    out = load_file(path)
    assert list(out) == ["w", "b"]  # file order
    _assert_same(out["w"], a)
    _assert_same(out["b"], b)


def test_zero_dim_and_zero_size(tmp_path):
    tensors = {"scalar": np.array(3.5, dtype=np.float64), "empty": np.zeros((0,), dtype=np.int32),
               "empty2": np.zeros((4, 0, 2), dtype=np.float16)}
    blob = save(tensors)
    header, data = parse_file(blob)
    assert header["scalar"]["shape"] == []
    assert header["empty2"]["shape"] == [4, 0, 2]
    assert header["empty"]["data_offsets"][0] == header["empty"]["data_offsets"][1]
    assert len(data) == 8
    out = load(blob)
    assert out["scalar"].shape == () and out["scalar"] == 3.5
    assert out["empty"].shape == (0,) and out["empty"].dtype == np.int32
    assert out["empty2"].shape == (4, 0, 2) and out["empty2"].dtype == np.float16


def test_metadata_none_empty_and_dict(tmp_path):
    a = {"t": np.ones(2, dtype=np.float32)}
    cases = [(None, None), ({}, {}), ({"framework": "pt", "ünï": "çödé"}, {"framework": "pt", "ünï": "çödé"})]
    for i, (md, expected) in enumerate(cases):
        p = tmp_path / f"m{i}.safetensors"
        save_file(a, p, metadata=md)
        with safe_open(p, framework="np") as f:
            assert f.metadata() == expected
        header, _ = parse_file(p.read_bytes())
        assert ("__metadata__" in header) == (md is not None)
        if md is not None:
            assert header["__metadata__"] == md


def test_metadata_must_be_str_to_str():
    with pytest.raises(TypeError):
        save({"t": np.zeros(1)}, metadata={"a": 1})
    with pytest.raises(TypeError):
        save({"t": np.zeros(1)}, metadata={1: "a"})


@pytest.mark.parametrize(
    "make",
    [
        lambda base: np.asfortranarray(base),
        lambda base: base.T,
        lambda base: base[::2, 1::3],
        lambda base: base[::-1, ::-2],
        lambda base: np.moveaxis(base.reshape(6, 2, 6), 0, 2),
    ],
    ids=["fortran", "transposed", "strided", "negative-strides", "moveaxis"],
)
def test_non_contiguous_arrays_saved_in_c_order(tmp_path, make):
    base = np.arange(72, dtype=np.float32).reshape(6, 12) * 1.5
    arr = make(base)
    assert not arr.flags.c_contiguous
    blob = save({"t": arr})
    header, data = parse_file(blob)
    assert header["t"]["shape"] == list(arr.shape)
    assert data == np.ascontiguousarray(arr).tobytes()  # C order, not memory order
    save_file({"t": arr}, tmp_path / "x.safetensors")
    np.testing.assert_array_equal(load_file(tmp_path / "x.safetensors")["t"], arr)


@pytest.mark.parametrize("code", ["I32", "F64", "U16", "C64", "F16"])
def test_big_endian_input(code, rng):
    le = _sample(np.dtype(NP_CODES[code]).newbyteorder("="), (3, 2), rng).astype(NP_CODES[code])
    be = le.astype(np.dtype(NP_CODES[code]).newbyteorder(">"))
    assert save({"t": be}) == save({"t": le})
    header, data = parse_file(save({"t": be}))
    assert data == le.tobytes()
    np.testing.assert_array_equal(load(save({"t": be}))["t"], le)


# ---- reference byte vectors (safetensors.md §2.5), built with struct/json from the document ----

def _entry(dtype, shape, begin, end):
    return '{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}' % (dtype, json.dumps(shape).replace(" ", ""), begin, end)


def test_vector_i32_zeros():
    js = '{"test":%s}' % _entry("I32", [2, 2], 0, 16)
    assert len(js) == 60
    expected = b"@\0\0\0\0\0\0\0" + js.encode() + b"    " + bytes(16)
    assert save({"test": np.zeros((2, 2), dtype=np.int32)}) == expected


def test_vector_alignment_and_order_invariance():
    js = '{"test1":%s,"test2":%s}' % (_entry("I32", [2, 2], 0, 16), _entry("F16", [2, 2], 16, 24))
    assert len(js) == 122
    expected = struct.pack("<Q", 128) + js.encode() + b" " * 6 + bytes(24)
    t1, t2 = np.zeros((2, 2), dtype=np.int32), np.zeros((2, 2), dtype=np.float16)
    assert save({"test1": t1, "test2": t2}) == expected
    assert save({"test2": t2, "test1": t1}) == expected


def test_vector_metadata_and_big_endian():
    js = '{"__metadata__":{"framework":"pt"},"test1":%s}' % _entry("I32", [2, 2], 0, 16)
    assert len(js) == 95
    data = np.array([[0, 1], [2, 3]], dtype="<i4").tobytes()
    expected = b"`\0\0\0\0\0\0\0" + js.encode() + b" " + data
    arr = np.array([[0, 1], [2, 3]], dtype=np.int32)
    assert save({"test1": arr}, metadata={"framework": "pt"}) == expected
    assert save({"test1": arr.astype(">i4")}, metadata={"framework": "pt"}) == expected


def test_vector_c64():
    arr = np.zeros((2, 2), dtype=np.complex64)
    arr[1][1] = -1 + 1j
    out = save({"test": arr})
    assert out[-8:] == bytes.fromhex("000080bf0000803f")
    assert len(out) == 8 + struct.unpack("<Q", out[:8])[0] + 32


def test_vector_rust_serialization():
    data = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], dtype="<f4")
    js = '{"attn.0":%s}' % _entry("F32", [1, 2, 3], 0, 24)
    assert len(js) == 64
    assert save({"attn.0": data.reshape(1, 2, 3)}) == struct.pack("<Q", 64) + js.encode() + data.tobytes()
    js = '{"attn0":%s}' % _entry("F32", [1, 1, 2, 3], 0, 24)
    assert save({"attn0": data.reshape(1, 1, 2, 3)}) == struct.pack("<Q", 72) + js.encode() + b" " * 7 + data.tobytes()


def test_vector_empty():
    assert save({}) == struct.pack("<Q", 8) + b"{}" + b" " * 6
    js = b'{"__metadata__":{"framework":"pt"}}'
    assert save({}, metadata={"framework": "pt"}) == struct.pack("<Q", 40) + js + b" " * 5


def test_save_file_equals_save(tmp_path, rng):
    tensors = {name: _sample(dt, (2, 3), rng) for name, dt in zip("abcdefg", ALL_DTYPES)}
    p = tmp_path / "x.safetensors"
    save_file(tensors, str(p), metadata={"k": "v"})
    assert p.read_bytes() == save(tensors, metadata={"k": "v"})


def test_numpy_bool_scalar_and_python_values():
    out = load(save({"b": np.bool_(True), "l": np.array([True, False])}))
    assert out["b"].dtype == np.bool_ and out["b"].shape == () and bool(out["b"]) is True
    np.testing.assert_array_equal(out["l"], [True, False])


# ---- views, writability, lifetimes ----

def test_load_file_arrays_are_read_only_and_copy_is_writable(tmp_path):
    p = tmp_path / "x.safetensors"
    save_file({"t": np.arange(10, dtype=np.int64)}, p)
    before = p.read_bytes()
    t = load_file(p)["t"]
    assert t.flags.writeable is False
    with pytest.raises(ValueError):
        t[0] = 5
    c = t.copy()
    assert c.flags.writeable
    c[0] = 5
    assert c[0] == 5 and t[0] == 0
    assert p.read_bytes() == before


def test_load_bytes_is_read_only(tmp_path):
    t = load(save({"t": np.arange(4, dtype=np.int16)}))["t"]
    assert t.flags.writeable is False


def test_pread_backend_is_writable(tmp_path):
    p = tmp_path / "x.safetensors"
    save_file({"t": np.arange(10, dtype=np.float32)}, p)
    before = p.read_bytes()
    t = load_file(p, backend="pread")["t"]
    assert t.flags.writeable
    t[:] = -1
    np.testing.assert_array_equal(load_file(p)["t"], np.arange(10, dtype=np.float32))
    assert p.read_bytes() == before
    with safe_open(p, framework="np", backend="pread") as f:
        assert f.get_tensor("t").flags.writeable


def test_arrays_outlive_the_handle(tmp_path, rng):
    p = tmp_path / "x.safetensors"
    a = rng.standard_normal((64, 33)).astype(np.float32)
    b = rng.integers(0, 100, (7,), dtype=np.int64)
    save_file({"a": a, "b": b}, p)
    f = safe_open(p, framework="np")
    ta = f.get_tensor("a")
    sl = f.get_slice("a")[3:9, ::2]
    tensors = f.get_tensors()
    f.close()
    del f
    gc.collect()
    np.testing.assert_array_equal(ta, a)
    np.testing.assert_array_equal(sl, a[3:9, ::2])
    tb = tensors["b"]
    del tensors
    gc.collect()
    np.testing.assert_array_equal(tb, b)
    # and after the file itself is gone
    p.unlink()
    gc.collect()
    assert float(ta.sum()) == pytest.approx(float(a.sum()), rel=1e-5)
    np.testing.assert_array_equal(tb, b)


def test_loaded_view_outlives_load_file_dict(tmp_path):
    p = tmp_path / "x.safetensors"
    save_file({"x": np.arange(1000, dtype=np.int32)}, p)
    views = [load_file(p)["x"] for _ in range(5)]
    gc.collect()
    for v in views:
        np.testing.assert_array_equal(v, np.arange(1000, dtype=np.int32))


@pytest.mark.skipif(importlib.util.find_spec("ml_dtypes") is not None, reason="ml_dtypes is installed")
def test_bf16_without_ml_dtypes(tmp_path):
    p = tmp_path / "bf16.safetensors"
    p.write_bytes(build_file([("t", "BF16", [2, 2], bytes.fromhex("1040803f803f803f"))]))
    with safe_open(p, framework="np") as f:
        assert f.get_slice("t").get_dtype() == "BF16"
        with pytest.raises(SafetensorError, match="ml_dtypes"):
            f.get_tensor("t")
        assert bytes(f.get_raw("t")) == bytes.fromhex("1040803f803f803f")
    with pytest.raises(SafetensorError, match="ml_dtypes"):
        load_file(p)


def test_save_rejects_non_dict_and_non_str_names():
    with pytest.raises(ValueError):
        save("not a dict")
    with pytest.raises(TypeError):
        save({1: np.zeros(2)})


def test_save_file_is_atomic_replacement(tmp_path):
    p = tmp_path / "x.safetensors"
    save_file({"a": np.zeros(3)}, p)
    save_file({"b": np.ones(2, dtype=np.int8)}, p)
    out = load_file(p)
    assert list(out) == ["b"]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["x.safetensors"]  # no leftover temp file


def test_strided_buffers_are_refused_not_misread(tmp_path):
    """A non-contiguous bytes-like object must not be read as if its bytes were contiguous."""
    import safeweights
    import safeweights.dduf
    import safeweights.numpy

    blob = safeweights.numpy.save({"a": np.arange(4, dtype=np.uint8)})
    interleaved = bytes(x for c in blob for x in (c, 0))
    strided = memoryview(interleaved)[::2]
    assert bytes(strided) == blob  # the same bytes, just not contiguous
    with pytest.raises(BufferError):
        safeweights.numpy.load(strided)
    with pytest.raises(BufferError):
        safeweights.deserialize(strided)
    out = tmp_path / "x.dduf"
    with pytest.raises(BufferError):
        safeweights.dduf.export_entries_as_dduf(out, [("model_index.json", b"{}"), ("a.txt", strided)])
    assert not out.exists()
    # The contiguous copy of the same bytes loads.
    assert safeweights.numpy.load(bytes(strided))["a"].tolist() == [0, 1, 2, 3]


def test_loaded_views_pin_a_bytearray():
    """Arrays from load(bytearray) view it; it cannot be resized (freed) under them."""
    import safeweights.numpy

    data = bytearray(safeweights.numpy.save({"a": np.arange(6, dtype=np.int32)}))
    arrays = safeweights.numpy.load(data)
    with pytest.raises(BufferError):
        data.extend(b"x" * 4096)
    assert arrays["a"].tolist() == list(range(6))


# bfloat16 and float8 as real numpy arrays, where ml_dtypes is installed (the numpy 2 venv of
# scripts/python-env.sh). Expected bytes are computed without safeweights: bf16 is the top half of the
# float32 bit pattern; the float8 codes are exact for these values (1.0, -2.0, 0.5, 0).
ML_CASES = [
    ("bfloat16", "BF16", [1.0, -2.0, 0.5, 0.0], b"".join(struct.pack("<f", v)[2:] for v in (1.0, -2.0, 0.5, 0.0))),
    ("float8_e4m3fn", "F8_E4M3", [1.0, -2.0, 0.5, 0.0], bytes([0x38, 0xC0, 0x30, 0x00])),
    ("float8_e5m2", "F8_E5M2", [1.0, -2.0, 0.5, 0.0], bytes([0x3C, 0xC0, 0x38, 0x00])),
]


@pytest.mark.parametrize("np_name,code,values,raw", ML_CASES, ids=[c[1] for c in ML_CASES])
def test_ml_dtypes_arrays_for_real(tmp_path, np_name, code, values, raw):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(getattr(ml_dtypes, np_name))
    arr = np.array(values, dtype=np.float32).astype(dt).reshape(2, 2)
    assert arr.tobytes() == raw  # ml_dtypes agrees with the hand-computed codes
    data = save({"t": arr})
    header, body = parse_file(data)
    assert header["t"] == {"dtype": code, "shape": [2, 2], "data_offsets": [0, len(raw)]}
    assert body == raw
    back = load(data)["t"]
    assert back.dtype == dt and back.shape == (2, 2)
    np.testing.assert_array_equal(back.astype(np.float32), np.array(values, dtype=np.float32).reshape(2, 2))
    p = tmp_path / "ml.safetensors"
    save_file({"t": arr, "u": np.arange(3, dtype=np.int8)}, p)
    with safe_open(p, framework="np") as f:
        t = f.get_tensor("t")
        assert t.dtype == dt and t.tobytes() == raw
        s = f.get_slice("t")[1:, ::-1]
        assert s.dtype == dt and s.tobytes() == arr[1:, ::-1].tobytes()
    assert {k: v.dtype for k, v in load_file(p).items()} == {"t": dt, "u": np.dtype(np.int8)}
