"""safe_open: the reference's handle API, its exact error strings, and the malformed-file corpus."""

import io
import os
import pickle
import struct

import numpy as np
import pytest

import safeweights
from safeweights import SafetensorError, _safe_open_handle, safe_open
from safeweights.numpy import save_file

from conftest import SAFETENSORS_CORPUS, build_file, corpus_files, header_bytes, parse_file

HEADER_PREFIX = "Error while deserializing header: "


@pytest.fixture
def sample(tmp_path):
    """A file whose data order (c, a, b) differs from both sorted and insertion order."""
    tensors = [
        ("c", "F32", [2, 3], np.arange(6, dtype="<f4").reshape(2, 3)),
        ("a", "I64", [4], np.array([1, -2, 3, -4], dtype="<i8")),
        ("b", "U8", [2, 2], np.array([[1, 2], [3, 250]], dtype="u1")),
    ]
    path = tmp_path / "sample.safetensors"
    path.write_bytes(build_file([(n, c, s, a.tobytes()) for n, c, s, a in tensors], metadata={"k": "v"}))
    return path, {n: a for n, _, _, a in tensors}


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_keys_offset_keys_get_tensor(sample, backend):
    path, arrays = sample
    with safe_open(path, framework="np", backend=backend) as f:
        assert f.keys() == ["a", "b", "c"]
        assert f.offset_keys() == ["c", "a", "b"]
        assert f.metadata() == {"k": "v"}
        for k, v in arrays.items():
            np.testing.assert_array_equal(f.get_tensor(k), v)
            assert f.get_tensor(k).dtype == v.dtype
        got = f.get_tensors()
        assert list(got) == ["c", "a", "b"]
        for k, v in arrays.items():
            np.testing.assert_array_equal(got[k], v)


@pytest.mark.parametrize("fw", ["np", "numpy", "pt", "torch", "pytorch"])
def test_framework_aliases(sample, fw):
    torch = pytest.importorskip("torch") if fw in ("pt", "torch", "pytorch") else None
    path, arrays = sample
    with safe_open(str(path), framework=fw) as f:
        t = f.get_tensor("c")
        if torch is not None:
            assert isinstance(t, torch.Tensor)
            t = t.numpy()
        np.testing.assert_array_equal(t, arrays["c"])


def test_closed_file_raises(sample):
    path, _ = sample
    with safe_open(path, framework="np") as f:
        pass
    for call in (f.keys, f.offset_keys, f.metadata, f.get_tensors, lambda: f.get_tensor("a"),
                 lambda: f.get_slice("a"), lambda: f.get_raw("a")):
        with pytest.raises(SafetensorError):
            call()
    f2 = safe_open(path, framework="np")
    s = f2.get_slice("c")
    f2.close()
    with pytest.raises(SafetensorError):
        s[0]


def test_file_not_found():
    with pytest.raises(FileNotFoundError) as e:
        safe_open("notafile", framework="pt")
    assert str(e.value) == "No such file or directory: notafile"
    with pytest.raises(FileNotFoundError):
        safe_open("notafile", framework="np", backend="pread")


def test_invalid_framework(sample):
    path, _ = sample
    with pytest.raises(SafetensorError) as e:
        safe_open(path, framework="xx")
    assert str(e.value) == "framework xx is invalid"


@pytest.mark.parametrize("backend", ["x", "MMAP", ""])
def test_invalid_backend(sample, backend):
    path, _ = sample
    with pytest.raises(SafetensorError) as e:
        safe_open(path, framework="np", backend=backend)
    assert str(e.value) == f'backend "{backend}" is invalid (expected one of: "mmap", "pread")'


def test_device_not_supported_for_numpy(sample):
    path, _ = sample
    with pytest.raises(SafetensorError) as e:
        safe_open(path, framework="np", device="cuda")
    assert str(e.value) == "Device cuda is not supported for framework numpy"


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_unknown_tensor(sample, backend):
    path, _ = sample
    with safe_open(path, framework="np", backend=backend) as f:
        for call in (f.get_tensor, f.get_slice, f.get_raw):
            with pytest.raises(SafetensorError) as e:
                call("x")
            assert str(e.value) == "File does not contain tensor x"
        assert "a" in f and "x" not in f


def test_get_raw(sample):
    path, arrays = sample
    for backend in ("mmap", "pread"):
        with safe_open(path, framework="np", backend=backend) as f:
            for k, v in arrays.items():
                assert bytes(f.get_raw(k)) == v.tobytes()


def test_safe_open_handle(sample):
    path, arrays = sample
    with open(path, "rb") as fh:
        with _safe_open_handle(fh, "np") as f:
            assert f.keys() == ["a", "b", "c"]
            np.testing.assert_array_equal(f.get_tensor("b"), arrays["b"])


def test_pathlike_and_str(sample):
    path, _ = sample
    for p in (path, str(path)):
        with safe_open(p, "np") as f:
            assert f.keys() == ["a", "b", "c"]


# ---- malformed files ----

def _write(tmp_path, blob, name="bad.safetensors"):
    p = tmp_path / name
    p.write_bytes(blob)
    return p


VALID_HEADER = b'{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'


@pytest.mark.parametrize(
    "kind,blob",
    [
        ("HeaderTooSmall", b"\x05\0\0"),
        ("HeaderTooSmall", b""),
        ("InvalidHeaderLength", struct.pack("<Q", 1000) + b"{}"),
        ("HeaderTooLarge", struct.pack("<Q", 2**63) + b"{}"),
        ("InvalidHeaderDeserialization", struct.pack("<Q", 1) + b"{"),
        ("InvalidHeaderDeserialization", struct.pack("<Q", 9) + b'{"a":1,}' + b" "),
        ("InvalidHeader", struct.pack("<Q", 2) + b"\xff\xff"),
        ("InvalidOffset", header_bytes({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                        "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}) + bytes(12)),
        ("MetadataIncompleteBuffer", struct.pack("<Q", len(VALID_HEADER)) + VALID_HEADER + bytes(6)),
        ("MetadataIncompleteBuffer", struct.pack("<Q", len(VALID_HEADER)) + VALID_HEADER + bytes(9)),
        ("TensorInvalidInfo", header_bytes({"a": {"dtype": "I32", "shape": [2, 2], "data_offsets": [0, 4]}}) + bytes(4)),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_malformed_files(tmp_path, kind, blob, backend):
    p = _write(tmp_path, blob)
    with pytest.raises(SafetensorError) as e:
        safe_open(p, framework="np", backend=backend)
    assert e.value.kind == kind
    assert str(e.value).startswith(HEADER_PREFIX)


def test_truncated_valid_file_every_length(tmp_path):
    blob = build_file([("t", "F32", [4], np.arange(4, dtype="<f4").tobytes())])
    for n in range(len(blob)):
        p = _write(tmp_path, blob[:n], f"t{n}.safetensors")
        with pytest.raises(SafetensorError) as e:
            safe_open(p, framework="np")
        assert str(e.value).startswith(HEADER_PREFIX)
        assert e.value.kind in ("HeaderTooSmall", "InvalidHeaderLength", "MetadataIncompleteBuffer")
    with safe_open(_write(tmp_path, blob, "full.safetensors"), framework="np") as f:
        assert f.keys() == ["t"]


BAD_CORPUS = [p for p in corpus_files(SAFETENSORS_CORPUS, ".safetensors")
              if p.values[0] not in ("valid", "UnknownField")]
GOOD_CORPUS = [p for p in corpus_files(SAFETENSORS_CORPUS, ".safetensors")
               if p.values[0] in ("valid", "UnknownField")]


def test_corpus_is_present():
    assert len(BAD_CORPUS) > 40 and len(GOOD_CORPUS) > 10


@pytest.mark.parametrize("kind,path", BAD_CORPUS)
def test_bad_corpus(kind, path):
    for backend in ("mmap", "pread"):
        with pytest.raises(SafetensorError) as e:
            safe_open(path, framework="np", backend=backend)
        assert e.value.kind == kind, str(e.value)
        assert str(e.value).startswith(HEADER_PREFIX)


@pytest.mark.parametrize("kind,path", GOOD_CORPUS)
def test_good_corpus(kind, path):
    # UnknownField files parse by default (the reference ignores unknown fields too).
    from conftest import NP_CODES

    blob = path.read_bytes()
    header, data = parse_file(blob)
    header_start = 8 + struct.unpack("<Q", blob[:8])[0]
    with safe_open(path, framework="np") as f:
        names = [k for k in header if k != "__metadata__"]
        assert f.keys() == sorted(names)
        assert f.metadata() == header.get("__metadata__")
        for name in names:
            info = header[name]
            b, e = info["data_offsets"]
            assert bytes(f.get_raw(name)) == blob[header_start + b : header_start + e]
            if info["dtype"] in NP_CODES:
                try:
                    expected = np.frombuffer(data[b:e], dtype=NP_CODES[info["dtype"]]).reshape(info["shape"])
                except ValueError:  # a shape numpy cannot represent (e.g. a dimension >= 2**63)
                    with pytest.raises((ValueError, SafetensorError)):
                        f.get_tensor(name)
                    continue
                np.testing.assert_array_equal(f.get_tensor(name), expected)


def test_exceptions_are_picklable(tmp_path):
    p = _write(tmp_path, struct.pack("<Q", 1) + b"{")
    with pytest.raises(SafetensorError) as e:
        safe_open(p, framework="np")
    err = pickle.loads(pickle.dumps(e.value))
    assert type(err) is SafetensorError
    assert str(err) == str(e.value)
    with pytest.raises(SafetensorError) as e2:
        safe_open(p, framework="xx")
    err2 = pickle.loads(pickle.dumps(e2.value))
    assert type(err2) is SafetensorError and str(err2) == "framework xx is invalid"
    for cls in (safeweights.SliceIndexError, safeweights.DDUFCorruptedFileError, safeweights.DDUFBadZipFileError):
        x = pickle.loads(pickle.dumps(cls("msg")))
        assert type(x) is cls and str(x) == "msg"


def test_error_module_importable():
    from safeweights import SafetensorError as E

    assert issubclass(E, Exception)


@pytest.mark.parametrize("fw", ["np", "pt"])
@pytest.mark.parametrize("device", ["foo", "cuda:x", "mps:1", "gpu"])
def test_invalid_device(sample, fw, device):
    path, _ = sample
    with pytest.raises(SafetensorError) as e:
        safe_open(path, framework=fw, device=device)
    assert str(e.value) == f"device {device} is invalid"


def test_other_argument_errors(sample):
    path, _ = sample
    with pytest.raises(TypeError):
        safe_open(123, framework="np")
    with pytest.raises(SafetensorError, match="framework keras is invalid"):
        safe_open(path, framework="keras")
    for name in ("tf", "flax", "jax", "paddle", "mlx"):  # opened without importing the framework (tests/frameworks)
        with safe_open(path, framework=name) as f:
            assert f.keys() == ["a", "b", "c"]
    with safe_open(path, framework="np", device=None) as f:
        assert f.keys() == ["a", "b", "c"]
        with pytest.raises(SafetensorError):
            f.get_slice("c")[True]
