"""The low-level API (TensorSpec, serialize, serialize_file, deserialize) and thread behaviour."""

import os
import random
import sys
import threading
import time

import numpy as np
import pytest

import safeweights
from safeweights import SafetensorError, TensorSpec, deserialize, safe_open, serialize, serialize_file
from safeweights.numpy import load_file, save_file

from conftest import NP_CODES, build_file, parse_file



def run_threads(target, count):
    """Runs target(0) .. target(count - 1) on threads started together; returns when all are done."""
    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

def _spec(arr):
    return TensorSpec(dtype=arr.dtype.name, shape=list(arr.shape), data_ptr=arr.ctypes.data, data_len=arr.nbytes)


# ---- TensorSpec ----

def test_tensorspec_properties_and_repr():
    a = np.zeros((2, 3), dtype=np.float32)
    s = TensorSpec(dtype="float32", shape=[2, 3], data_ptr=a.ctypes.data, data_len=24)
    assert s.dtype == "F32" and s.shape == [2, 3] and s.data_ptr == a.ctypes.data and s.data_len == 24
    assert repr(s) == f"TensorSpec(dtype='F32', shape=[2, 3], data_ptr={a.ctypes.data}, data_len=24)"
    assert repr(TensorSpec(dtype="int8", shape=[], data_ptr=0, data_len=1)) == (
        "TensorSpec(dtype='I8', shape=[], data_ptr=0, data_len=1)")


@pytest.mark.parametrize("name,code", [("bool", "BOOL"), ("uint8", "U8"), ("int8", "I8"), ("int16", "I16"),
                                       ("uint16", "U16"), ("float16", "F16"), ("bfloat16", "BF16"),
                                       ("int32", "I32"), ("uint32", "U32"), ("float32", "F32"),
                                       ("complex64", "C64"), ("float64", "F64"), ("int64", "I64"),
                                       ("uint64", "U64"), ("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2")])
def test_tensorspec_dtype_names(name, code):
    assert TensorSpec(dtype=name, shape=[1], data_ptr=0, data_len=8).dtype == code


def test_tensorspec_keyword_only_and_frozen():
    with pytest.raises(TypeError):
        TensorSpec("float32", [1], 0, 4)
    s = TensorSpec(dtype="float32", shape=[1], data_ptr=0, data_len=4)
    with pytest.raises(AttributeError):
        s.dtype = "int8"
    with pytest.raises(AttributeError):
        s.shape = [2]


def test_tensorspec_unknown_dtype():
    with pytest.raises(SafetensorError) as e:
        TensorSpec(dtype="x", shape=[1], data_ptr=0, data_len=4)
    assert str(e.value).startswith('Unknown dtype "x". Supported dtypes:')
    assert "float32" in str(e.value) and "bool" in str(e.value)


def test_tensorspec_float4_x2_doubles_last_dim():
    s = TensorSpec(dtype="float4_e2m1fn_x2", shape=[3, 2], data_ptr=0, data_len=6)
    assert s.shape == [3, 4] and s.dtype == "F4"


# ---- serialize / deserialize ----

def test_serialize_matches_hand_built_file(tmp_path):
    a = np.arange(6, dtype="<f4").reshape(2, 3)
    b = np.array([1, 2, 3], dtype="<i8")
    # writer order: larger dtype first (I64 before F32), then name
    expected = build_file([("b", "I64", [3], b.tobytes()), ("a", "F32", [2, 3], a.tobytes())], metadata={"m": "x"})
    assert serialize({"a": _spec(a), "b": _spec(b)}, metadata={"m": "x"}) == expected
    p = tmp_path / "x.safetensors"
    assert serialize_file({"a": _spec(a), "b": _spec(b)}, str(p), metadata={"m": "x"}) is None
    assert p.read_bytes() == expected
    serialize_file({"a": _spec(a)}, p)  # PathLike, replaces
    assert p.read_bytes() == build_file([("a", "F32", [2, 3], a.tobytes())])


def test_deserialize_format():
    a = np.arange(4, dtype="<i2")
    c = np.array([1 + 2j], dtype="<c8")
    blob = build_file([("z", "C64", [1], c.tobytes()), ("a", "I16", [2, 2], a.tobytes())], metadata={"k": "v"})
    out = deserialize(blob)
    assert isinstance(out, list)
    d = dict(out)
    assert set(d) == {"a", "z"}
    assert all(isinstance(item, tuple) and len(item) == 2 for item in out)
    assert d["a"] == {"shape": [2, 2], "dtype": "I16", "data": bytearray(a.tobytes())}
    assert d["z"]["dtype"] == "C64" and bytes(d["z"]["data"]) == c.tobytes()
    assert isinstance(d["a"]["data"], bytearray)
    assert deserialize(serialize({})) == []


def test_raw_dicts_rejected(tmp_path):
    with pytest.raises(TypeError):
        serialize({"test": {"dtype": "F32", "shape": [1], "data": b"abcd"}})
    with pytest.raises(TypeError):
        serialize_file({"test": {"dtype": "F32", "shape": [1], "data": b"abcd"}}, tmp_path / "unused.safetensors")
    assert list(tmp_path.iterdir()) == []


def test_serialize_errors(tmp_path):
    a = np.zeros(4, dtype=np.float32)
    with pytest.raises(SafetensorError) as e:
        serialize({"a": TensorSpec(dtype="float32", shape=[4], data_ptr=a.ctypes.data, data_len=12)})
    assert str(e.value).startswith("Error while serializing: ")
    with pytest.raises(SafetensorError) as e:
        deserialize(b"abc")
    assert str(e.value).startswith("Error while deserializing: ")
    assert e.value.kind == "HeaderTooSmall"
    with pytest.raises(SafetensorError) as e:
        deserialize(build_file([("t", "F32", [2], bytes(8))])[:-1])
    assert e.value.kind == "MetadataIncompleteBuffer"
    with pytest.raises((FileNotFoundError, SafetensorError, OSError)):
        serialize_file({"a": _spec(a)}, tmp_path / "no" / "such" / "dir.safetensors")


# ---- threads ----

def test_serialize_file_from_four_threads(tmp_path):
    rng = np.random.default_rng(0)
    big = rng.integers(-128, 127, 40 * 1024 * 1024, dtype=np.int8)
    errors, done = [], []

    def work(i):
        try:
            mine = np.array([i], dtype=np.int64)  # the caller keeps TensorSpec memory alive
            serialize_file({"big": _spec(big), "i": _spec(mine)}, tmp_path / f"t{i}.st")
            done.append(i)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    run_threads(work, 4)
    assert errors == [] and sorted(done) == [0, 1, 2, 3]
    for i in range(4):
        out = load_file(tmp_path / f"t{i}.st")
        assert out["i"].tolist() == [i]
        assert np.array_equal(out["big"], big)
        del out


def test_serialize_file_releases_the_gil(tmp_path):
    """While one thread is inside serialize_file, another Python thread runs.

    The other thread sleeps briefly between iterations (so the main thread gets the GIL back at once),
    and the switch interval is raised to 5 s, so without a GIL release the other thread could only run
    during the call after a forced switch 5 s long: counting its iterations inside [t0, t1] is conclusive.
    """
    big = np.ones(40 * 1024 * 1024, dtype=np.uint8)
    spec = {"big": _spec(big)}
    stamps, stop = [], threading.Event()

    def ticker():
        while not stop.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0.0002)

    old = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    t = threading.Thread(target=ticker)
    t.start()
    try:
        while not stamps:  # the ticker is running
            time.sleep(0.001)
        inside = 0
        for attempt in range(10):
            t0 = time.perf_counter()
            serialize_file(spec, tmp_path / f"gil{attempt}.st")
            t1 = time.perf_counter()
            inside += sum(1 for s in list(stamps) if t0 < s < t1)
            if inside:
                break
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    assert inside > 0


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_concurrent_reads_on_one_handle(tmp_path, backend):
    rng = np.random.default_rng(1)
    arrays = {f"t{i}": rng.standard_normal((rng.integers(1, 40), rng.integers(1, 40))).astype(np.float32)
              for i in range(12)}
    p = tmp_path / "c.safetensors"
    save_file(arrays, p)
    failures = []
    f = safe_open(p, framework="np", backend=backend)

    def reader(seed):
        r = random.Random(seed)
        try:
            for _ in range(150):
                name = r.choice(list(arrays))
                full = arrays[name]
                if r.random() < 0.5:
                    got, want = f.get_tensor(name), full
                else:
                    i = r.randrange(full.shape[0])
                    got, want = f.get_slice(name)[i:, ::2], full[i:, ::2]
                if not np.array_equal(got, want):
                    failures.append((name, seed))
        except BaseException as e:  # pragma: no cover - reported below
            failures.append(e)

    run_threads(reader, 8)
    f.close()
    assert failures == []


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_close_while_reading(tmp_path, backend):
    a = np.arange(64 * 1024, dtype=np.int32).reshape(256, 256)
    p = tmp_path / "c.safetensors"
    save_file({"a": a, "b": a[::-1].copy()}, p)
    for round_ in range(5):
        f = safe_open(p, framework="np", backend=backend)
        outcomes = {"data": 0, "closed": 0}
        bad = []
        go = threading.Event()

        def reader():
            go.wait()
            for i in range(2000):
                try:
                    if i % 2:
                        x = f.get_tensor("a")
                        ok = np.array_equal(x, a)
                    else:
                        x = f.get_slice("b")[i % 256]
                        ok = np.array_equal(x, a[::-1][i % 256])
                    if not ok:
                        bad.append(i)
                    outcomes["data"] += 1
                except SafetensorError:
                    outcomes["closed"] += 1
                    return
                except BaseException as e:  # pragma: no cover - reported below
                    bad.append(e)
                    return

        threads = [threading.Thread(target=reader) for _ in range(4)]
        for t in threads:
            t.start()
        go.set()
        time.sleep(0.002 * round_)
        f.close()
        for t in threads:
            t.join()
        assert bad == []
        assert outcomes["data"] + outcomes["closed"] > 0
        with pytest.raises(SafetensorError):
            f.get_tensor("a")


def test_multithreaded_roundtrips(tmp_path):
    errors = []

    def work(tid):
        try:
            rng = np.random.default_rng(tid)
            for j in range(10):
                arrs = {"x": rng.standard_normal((17, 5)).astype(np.float64), "y": rng.integers(0, 9, (4,))}
                path = tmp_path / f"rt_{tid}_{j}.st"
                save_file(arrs, path)
                out = load_file(path)
                for k, v in arrs.items():
                    assert np.array_equal(out[k], v)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        run_threads(work, 4)
    finally:
        sys.setswitchinterval(old)
    assert errors == []
