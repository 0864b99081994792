"""GGUF against gguf-py (llama.cpp's reference Python package): files GGUFWriter writes are read by
safeweights with the same keys, value types, values and tensors; files safeweights writes (tests/gguf's
gguf_copy tool rewrites a GGUFWriter file through our reader and writer) are read by GGUFReader with
the same content, byte for byte the same file.

Expected values come from the test's own spec and from gguf-py, never from safeweights. Skipped when
gguf is not installed (Debian's python under ctest); scripts/test.sh runs it in the numpy-2 venv.
"""

import os
import subprocess
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
gguf = pytest.importorskip("gguf")

import safeweights  # noqa: E402

from conftest import REPO  # noqa: E402

VT = gguf.GGUFValueType
QT = gguf.GGMLQuantizationType

# key, GGUF type name, value; arrays as ("ARRAY", (elem type name, items)).
KVS = [
    ("t.u8", "UINT8", 255), ("t.i8", "INT8", -128), ("t.u16", "UINT16", 65535), ("t.i16", "INT16", -32768),
    ("t.u32", "UINT32", 2**32 - 1), ("t.i32", "INT32", -2**31), ("t.f32", "FLOAT32", 0.1),
    ("t.bool", "BOOL", True), ("t.str", "STRING", "h\u00e9llo \u4e16\u754c\n"), ("t.u64", "UINT64", 2**64 - 1),
    ("t.i64", "INT64", -2**63), ("t.f64", "FLOAT64", 1e-300),
    ("tokenizer.ggml.tokens", "ARRAY", ("STRING", ["<s>", "", "\u00fc", "tok"] + [f"t{i}" for i in range(300)])),
    ("t.arr_i32", "ARRAY", ("INT32", [1, -2, 3])), ("t.arr_f32", "ARRAY", ("FLOAT32", [0.5, -1.25])),
    ("t.arr_bool", "ARRAY", ("BOOL", [True, False])), ("t.arr_u64", "ARRAY", ("UINT64", [0, 2**64 - 1])),
]


def _raw(n, seed):
    return np.array([(i * 31 + seed) % 256 for i in range(n)], dtype=np.uint8)


# name, ggml type name, row-major shape, what GGUFWriter gets.
TENSORS = [
    ("token_embd.weight", "F32", [2, 3], np.arange(6, dtype=np.float32).reshape(2, 3) / 7),
    ("norm.weight", "F16", [4], np.array([1.5, -2, 0.25, 65504], dtype=np.float16)),
    ("pos", "I32", [3, 2], np.arange(-3, 3, dtype=np.int32).reshape(3, 2)),
    ("bf", "BF16", [2, 4], _raw(16, 1).reshape(2, 8)),
    ("blk.0.attn_q.weight", "Q8_0", [2, 64], _raw(2 * 68, 2).reshape(2, 68)),
    ("blk.0.ffn_down.weight", "Q4_K", [1, 256], _raw(144, 3).reshape(1, 144)),
]


def _cli():
    cli = os.environ.get("SAFEWEIGHTS_CLI") or str(REPO / "build" / "safeweights")
    if not Path(cli).exists():
        pytest.skip("the safeweights CLI is not built")
    return cli


def _copy_tool():
    tool = os.environ.get("SAFEWEIGHTS_GGUF_COPY") or str(REPO / "build" / "tests" / "gguf" / "gguf_copy")
    if not Path(tool).exists():
        pytest.skip("tests/gguf's gguf_copy is not built")
    return tool


def _write_with_gguf_py(path, alignment=None):
    w = gguf.GGUFWriter(str(path), "llama")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, tname, value in KVS:
        if tname == "ARRAY":
            elem, items = value
            w.add_key_value(key, items, VT.ARRAY, sub_type=VT[elem])
        else:
            w.add_key_value(key, value, VT[tname])
    for name, tname, _shape, data in TENSORS:
        if tname in ("F32", "F16", "I32"):
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=QT[tname])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _same_value(tname, got, want):
    if tname == "FLOAT32":
        return np.float32(got) == np.float32(want)
    return got == want and type(got) is type(want)


@pytest.mark.parametrize("alignment", [None, 64])
def test_gguf_py_files_read_by_safeweights(tmp_path, alignment):
    path = tmp_path / "m.gguf"
    _write_with_gguf_py(path, alignment)
    assert safeweights.detect_format(path) == "gguf"
    info = safeweights.inspect(path)
    assert info["format"] == "gguf" and info["version"] == 3
    assert info["alignment"] == (alignment or 32)
    kv = info["kv"]
    expected = [("general.architecture", "STRING", "llama")]
    if alignment is not None:
        expected.append(("general.alignment", "UINT32", alignment))
    expected += KVS
    assert [e["key"] for e in kv] == [k for k, _, _ in expected]
    for entry, (key, tname, value) in zip(kv, expected):
        assert entry["type"] == tname, key
        if tname == "ARRAY":
            elem, items = value
            assert entry["elem_type"] == elem, key
            assert len(entry["value"]) == len(items)
            assert all(_same_value(elem, g, w) for g, w in zip(entry["value"], items)), key
        else:
            assert _same_value(tname, entry["value"], value), key
    reader = gguf.GGUFReader(str(path))
    assert info["data_offset"] == reader.data_offset
    assert len(info["tensors"]) == len(TENSORS)
    for got, (name, tname, shape, _data), theirs in zip(info["tensors"], TENSORS, reader.tensors):
        assert (got["name"], got["type"], got["shape"], got["ne"]) == (name, tname, shape, shape[::-1])
        assert got["nbytes"] == theirs.n_bytes
        assert info["data_offset"] + got["offset"] == theirs.data_offset
        out = subprocess.run([_cli(), "cat", str(path), name], capture_output=True, check=True).stdout
        assert out == theirs.data.tobytes(), name
    assert safeweights.validate(path).startswith(f"{len(TENSORS)} tensors,")


@pytest.mark.parametrize("alignment", [None, 64])
def test_safeweights_files_read_by_gguf_py(tmp_path, alignment):
    src, ours = tmp_path / "gguf_py.gguf", tmp_path / "ours.gguf"
    _write_with_gguf_py(src, alignment)
    subprocess.run([_copy_tool(), str(src), str(ours)], check=True)
    # Same layout rules (order, padding, the last tensor padded too): the same bytes.
    assert ours.read_bytes() == src.read_bytes()
    a, b = gguf.GGUFReader(str(src)), gguf.GGUFReader(str(ours))
    assert list(a.fields) == list(b.fields)
    for name in a.fields:
        fa, fb = a.fields[name], b.fields[name]
        assert fa.types == fb.types, name
        assert fa.contents() == fb.contents(), name
    for ta, tb in zip(a.tensors, b.tensors, strict=True):
        assert (ta.name, ta.tensor_type, list(ta.shape)) == (tb.name, tb.tensor_type, list(tb.shape))
        assert ta.data.tobytes() == tb.data.tobytes()
