"""Element conversion against gguf-py's numpy quantizers and dequantizers (gguf/quants.py), byte for
byte: safeweights' quantize() and dequantize() through the private _safeweights._quantize/_dequantize.

gguf-py is an independent implementation of ggml's reference code. Expected bytes come from gguf-py
(and numpy for F16), never from safeweights. Quantizers are compared on finite input (gguf-py's numpy
max() lets a NaN win where ggml's C comparisons skip it, so it does not follow ggml there; ggml itself is
compared on NaN and infinities by tests/quant/ggml_differential.sh). Dequantizers are compared on
arbitrary bytes. Skipped when gguf is not installed (Debian's python under ctest); scripts/test.sh
runs it in the numpy-2 venv.
"""

import json
import os
import subprocess

import pytest

np = pytest.importorskip("numpy")
gguf = pytest.importorskip("gguf")
from gguf import quants  # noqa: E402

from conftest import REPO  # noqa: E402
from safeweights import _safeweights  # noqa: E402
from safeweights.numpy import load_file  # noqa: E402

QT = gguf.GGMLQuantizationType
ROW = 1024  # a multiple of every block

# gguf-py quantizes these, and so do we.
QUANTIZED = ["F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]
# gguf-py dequantizes these, and so do we.
DEQUANTIZED = QUANTIZED + ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4",
                            "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"]
# Grid types whose elements carry a sign (IQ1's carry a shift instead).
SIGNED_GRIDS = ["IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S"]
# We quantize these and gguf-py only dequantizes them (or quantizes them otherwise than ggml: its TQ and
# MXFP4 round with numpy): its dequantizer must read our bytes as we do.
OURS_ONLY = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4"]


def _inputs():
    rng = np.random.default_rng(20261123)
    rows = {}
    for scale in [1.0, 1e-3, 1e-6, 1e-8, 3.0, 100.0, 6e4, 1e10, 1e30]:
        rows[f"normal*{scale:g}"] = rng.standard_normal(ROW).astype(np.float32) * np.float32(scale)
        rows[f"uniform*{scale:g}"] = rng.uniform(-1, 1, ROW).astype(np.float32) * np.float32(scale)
        rows[f"positive*{scale:g}"] = (np.abs(rng.standard_normal(ROW)) + 1).astype(np.float32) * np.float32(scale)
    rows["heavy tails"] = (rng.standard_normal(ROW) * np.exp(2 * rng.standard_normal(ROW))).astype(np.float32)
    rows["zeros"] = np.zeros(ROW, np.float32)
    rows["negative zeros"] = np.full(ROW, -0.0, np.float32)
    rows["constant"] = np.full(ROW, 0.75, np.float32)
    rows["constant negative"] = np.full(ROW, -3.5, np.float32)
    one_hot = np.zeros(ROW, np.float32)
    one_hot[5::97] = -2.0
    rows["lone values"] = one_hot
    for steps in [7, 8, 15, 16, 127]:  # values on a grid: rounding ties everywhere
        rows[f"grid/{steps}"] = (rng.integers(-2 * steps, 2 * steps + 1, ROW) * (0.5 / steps)).astype(np.float32)
    rows["float16 edges"] = np.resize(np.array([65504, 65519.99, 65520, 2**-24, 2**-25, 3 * 2**-25, 2**-14, 1e-40],
                                               np.float32), ROW)
    rows["float32 subnormals"] = (rng.standard_normal(ROW) * 1e-40).astype(np.float32)
    return rows


INPUTS = _inputs()


def ours_quantize(type_name, values):
    return np.frombuffer(_safeweights._quantize(type_name, values), np.uint8)


def ours_dequantize(type_name, data, count):
    return np.frombuffer(_safeweights._dequantize(type_name, data, count), np.float32)


def theirs_quantize(type_name, values):
    if type_name == "F16":  # gguf-py converts with numpy (round to nearest even)
        return values.astype("<f2").view(np.uint8)
    return quants.quantize(values.reshape(1, -1), QT[type_name]).reshape(-1).view(np.uint8)


def theirs_dequantize(type_name, data):
    return quants.dequantize(data.reshape(1, -1), QT[type_name]).reshape(-1).astype(np.float32)


def _same_bits(a, b, quiet_nan=False):
    a = np.asarray(a, np.float32).view(np.uint32)
    b = np.asarray(b, np.float32).view(np.uint32)
    if quiet_nan:  # numpy widens a signalling float16 NaN without quieting it; ggml's arithmetic quiets it
        nan = ((a & 0x7F800000) == 0x7F800000) & ((a & 0x7FFFFF) != 0)
        b = np.where(nan, b | 0x400000, b)
    return np.array_equal(a, b)


@pytest.mark.parametrize("type_name", QUANTIZED)
@pytest.mark.parametrize("input_name", sorted(INPUTS))
def test_quantize_matches_gguf_py(type_name, input_name):
    values = INPUTS[input_name]
    if input_name == "negative zeros" and type_name in ("Q4_0", "Q5_0"):
        # ggml's first-met maximum of a block of -0.0 is its initial +0.0, so d = +0/-8 = -0.0 (0x8000);
        # gguf-py's argmax picks a -0.0 and writes +0.0. We follow ggml (tests/quant/ggml_differential.sh).
        assert ours_quantize(type_name, values)[:2].tobytes() == b"\x00\x80"
        return
    if type_name == "F16" and np.abs(values).max() > 65504:  # numpy warns on overflow; the bytes still compare
        with np.errstate(over="ignore"):
            expected = theirs_quantize(type_name, values)
    else:
        with np.errstate(all="ignore"):
            expected = theirs_quantize(type_name, values)
    got = ours_quantize(type_name, values)
    assert got.tobytes() == expected.tobytes(), f"first difference at byte {np.argmax(got != expected)}"


def _random_blocks(type_name, rng, rows=16):
    nbytes = quants.quant_shape_to_byte_shape((rows * ROW,), QT[type_name])[0] if type_name not in ("F16", "BF16") \
        else rows * ROW * 2
    return rng.integers(0, 256, nbytes, dtype=np.uint8), rows * ROW


@pytest.mark.parametrize("type_name", DEQUANTIZED)
def test_dequantize_matches_gguf_py(type_name):
    rng = np.random.default_rng(sum(map(ord, type_name)))
    data, count = _random_blocks(type_name, rng)
    with np.errstate(all="ignore"):
        expected = theirs_dequantize(type_name, data)
    got = ours_dequantize(type_name, data, count)
    if type_name in SIGNED_GRIDS:
        # A NaN scale times a negative sign: numpy's product flips the NaN's sign bit, ggml's C keeps the
        # NaN operand as it is (so do we: ggml_differential.sh compares with ggml itself). NaN is NaN.
        both_nan = np.isnan(got) & np.isnan(expected)
        got, expected = np.where(both_nan, np.nan, got), np.where(both_nan, np.nan, expected)
    assert _same_bits(got, expected, quiet_nan=type_name == "F16"), f"first difference at element {np.argmax(got.view(np.uint32) != expected.view(np.uint32))}"


@pytest.mark.parametrize("type_name", OURS_ONLY + QUANTIZED)
@pytest.mark.parametrize("input_name", ["normal*1", "uniform*0.001", "heavy tails", "grid/15", "zeros"])
def test_gguf_py_reads_our_quantized_bytes(type_name, input_name):
    data = ours_quantize(type_name, INPUTS[input_name])
    with np.errstate(all="ignore"):
        expected = theirs_dequantize(type_name, data)
    assert _same_bits(ours_dequantize(type_name, data, ROW), expected)


@pytest.mark.parametrize("type_name", [t for t in DEQUANTIZED if t not in ("F16", "BF16")])
def test_block_sizes_are_gguf_py_s(type_name):
    """A block's elements and bytes (core/tensor_type.cpp's table) are gguf-py's GGML_QUANT_SIZES: one
    block reads as `block` elements, and half of its bytes are not a block of half the elements."""
    block, size = gguf.GGML_QUANT_SIZES[QT[type_name]]
    assert len(ours_dequantize(type_name, np.zeros(size, np.uint8), block)) == block
    with pytest.raises(Exception, match=type_name):
        ours_dequantize(type_name, np.zeros(size // 2, np.uint8), block // 2)


def test_bad_arguments_raise():
    with pytest.raises(Exception, match="Q4_0"):
        _safeweights._quantize("Q4_0", np.zeros(31, np.float32))  # not whole blocks
    with pytest.raises(Exception, match="IQ2_XXS"):
        _safeweights._quantize("IQ2_XXS", np.zeros(256, np.float32))  # not supported, named
    with pytest.raises(ValueError):
        _safeweights._quantize("NOPE", np.zeros(32, np.float32))


# ---- the IQ grids, entry by entry -------------------------------------------------------------------
# Blocks that name every grid entry once, with no signs and a known scale, dequantized by us: each group
# of values divided by the scale (less IQ1's delta) must be gguf-py's own copy of the grid entry.

def _iq_blocks_2xxs(indices):  # 32 entries a block; s = 1: scale 1.5 x 0.25
    blocks = []
    for block in indices.reshape(-1, 32):
        out = bytearray(np.float16(1).tobytes())
        for group in block.reshape(8, 4):
            out += bytes(group.astype(np.uint8)) + (1 << 28).to_bytes(4, "little")
        blocks.append(out)
    return b"".join(blocks), 0.375, 8, 0.0


def _iq_blocks_2xs(indices):  # 32 entries a block, 9-bit indices in 16-bit words; scales 1: 0.375
    out = b""
    for block in indices.reshape(-1, 32):
        out += np.float16(1).tobytes() + block.astype("<u2").tobytes() + bytes([0x11] * 8)
    return out, 0.375, 8, 0.0


def _iq_blocks_2s(indices):  # 32 entries a block, 10-bit indices: low bytes, then 2 high bits each
    out = b""
    for block in indices.reshape(-1, 32):
        high = [sum(((int(i) >> 8) & 3) << (2 * l) for l, i in enumerate(group)) for group in block.reshape(8, 4)]
        out += np.float16(1).tobytes() + bytes((block & 255).astype(np.uint8)) + bytes(32) + bytes(high) + bytes([0x11] * 8)
    return out, 0.375, 8, 0.0


def _iq_blocks_3xxs(indices):  # 64 entries a block; s = 1: scale 1.5 x 0.5
    out = b""
    for block in indices.reshape(-1, 64):
        out += np.float16(1).tobytes() + bytes(block.astype(np.uint8)) + (1 << 28).to_bytes(4, "little") * 8
    return out, 0.75, 4, 0.0


def _iq_blocks_3s(indices):  # 64 entries a block, 9-bit indices: low bytes, then one high bit each
    out = b""
    for block in indices.reshape(-1, 64):
        high = [sum(((int(i) >> 8) & 1) << k for k, i in enumerate(group)) for group in block.reshape(8, 8)]
        out += np.float16(1).tobytes() + bytes((block & 255).astype(np.uint8)) + bytes(high) + bytes(32) + bytes(4)
    return out, 1.0, 4, 0.0


def _iq_blocks_1s(indices):  # 32 entries a block, 11-bit indices: low bytes, 3 high bits each; scale 1
    out = b""
    for block in indices.reshape(-1, 32):
        words = [sum(((int(i) >> 8) & 7) << (3 * l) for l, i in enumerate(group)) for group in block.reshape(8, 4)]
        out += np.float16(1).tobytes() + bytes((block & 255).astype(np.uint8)) + np.array(words, "<u2").tobytes()
    return out, 1.0, 8, 0.125


GRID_BLOCKS = {"IQ2_XXS": _iq_blocks_2xxs, "IQ2_XS": _iq_blocks_2xs, "IQ2_S": _iq_blocks_2s,
               "IQ3_XXS": _iq_blocks_3xxs, "IQ3_S": _iq_blocks_3s, "IQ1_S": _iq_blocks_1s}


@pytest.mark.parametrize("type_name", sorted(GRID_BLOCKS))
def test_iq_grids_match_gguf_py_entry_by_entry(type_name):
    cls = getattr(quants, type_name)
    cls.init_grid()
    grid = np.asarray(cls.grid, np.float32).reshape(cls.grid_shape)
    indices = np.arange(grid.shape[0])
    data, scale, width, delta = GRID_BLOCKS[type_name](indices)
    data = np.frombuffer(data, np.uint8)
    got = ours_dequantize(type_name, data, indices.size * width).reshape(-1, width)
    np.testing.assert_array_equal(got / np.float32(scale) - np.float32(delta), grid)
    with np.errstate(all="ignore"):
        assert _same_bits(got.reshape(-1), theirs_dequantize(type_name, data))


# ---- GGUF files of the grid types: convert and diff read them -------------------------------------------

def _gguf_of_grid_types(path, rng):
    """A GGUF written by gguf-py with one [2, 256] tensor of each grid type (random blocks, finite scales)."""
    w = gguf.GGUFWriter(str(path), "llama")
    expected = {}
    for type_name in sorted(GRID_BLOCKS) + ["IQ1_M"]:
        data, _ = _random_blocks(type_name, rng, rows=1)
        data = data[: quants.quant_shape_to_byte_shape((512,), QT[type_name])[0]].copy()
        block = len(data) // 2
        for b in range(2):  # a float16 1/64 scale where the type keeps one in front (IQ1_M spreads it)
            if type_name != "IQ1_M":
                data[b * block : b * block + 2] = np.frombuffer(np.float16(1 / 64).tobytes(), np.uint8)
        name = f"{type_name.lower()}.weight"
        w.add_tensor(name, data.reshape(2, -1), raw_dtype=QT[type_name])
        with np.errstate(all="ignore"):
            expected[name] = theirs_dequantize(type_name, data).reshape(2, 256)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return expected


def test_grid_type_ggufs_convert_and_diff(tmp_path):
    cli = os.environ.get("SAFEWEIGHTS_CLI") or str(REPO / "build" / "safeweights")
    if not os.path.exists(cli):
        pytest.skip("the safeweights CLI is not built")
    src = tmp_path / "iq.gguf"
    expected = _gguf_of_grid_types(src, np.random.default_rng(37))
    out = tmp_path / "iq.safetensors"
    subprocess.run([cli, "convert", str(src), str(out), "--type", "f32"], check=True, capture_output=True)
    got = load_file(str(out))
    assert sorted(got) == sorted(expected)
    for name, want in expected.items():
        assert got[name].dtype == np.float32 and got[name].shape == (2, 256), name
        np.testing.assert_array_equal(got[name], want, err_msg=name)
    # diff reads both sides' values: equal everywhere (the files still differ: IQ types against F32).
    compared = subprocess.run([cli, "diff", "--json", str(src), str(out)], capture_output=True)
    assert compared.returncode == 1, compared.stderr
    doc = json.loads(compared.stdout)
    assert {t["name"]: (t["identical"], t["differing"]) for t in doc["tensors"]} == {name: (True, 0) for name in expected}
