"""Element conversion against gguf-py's numpy quantizers and dequantizers (gguf/quants.py), byte for
byte: safeweights' quantize() and dequantize() through the private _safeweights._quantize/_dequantize.

gguf-py is an independent implementation of ggml's reference code. Expected bytes come from gguf-py
(and numpy for F16), never from safeweights. Quantizers are compared on finite input (gguf-py's numpy
max() lets a NaN win where ggml's C comparisons skip it, so it does not follow ggml there; ggml itself is
compared on NaN and infinities by tests/quant/ggml_differential.sh). Dequantizers are compared on
arbitrary bytes. Skipped when gguf is not installed (Debian's python under ctest); scripts/test.sh
runs it in the numpy-2 venv.
"""

import pytest

np = pytest.importorskip("numpy")
gguf = pytest.importorskip("gguf")
from gguf import quants  # noqa: E402

from safeweights import _safeweights  # noqa: E402

QT = gguf.GGMLQuantizationType
ROW = 1024  # a multiple of every block

# gguf-py quantizes these, and so do we.
QUANTIZED = ["F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]
# gguf-py dequantizes these, and so do we.
DEQUANTIZED = QUANTIZED + ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4"]
# We quantize these and gguf-py only dequantizes them: its dequantizer must read our bytes as we do.
OURS_ONLY = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]


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
    assert _same_bits(got, expected, quiet_nan=type_name == "F16"), f"first difference at element {np.argmax(got.view(np.uint32) != expected.view(np.uint32))}"


@pytest.mark.parametrize("type_name", OURS_ONLY + QUANTIZED)
@pytest.mark.parametrize("input_name", ["normal*1", "uniform*0.001", "heavy tails", "grid/15", "zeros"])
def test_gguf_py_reads_our_quantized_bytes(type_name, input_name):
    data = ours_quantize(type_name, INPUTS[input_name])
    with np.errstate(all="ignore"):
        expected = theirs_dequantize(type_name, data)
    assert _same_bits(ours_dequantize(type_name, data, ROW), expected)


def test_bad_arguments_raise():
    with pytest.raises(Exception, match="Q4_0"):
        _safeweights._quantize("Q4_0", np.zeros(31, np.float32))  # not whole blocks
    with pytest.raises(Exception, match="IQ2_XXS"):
        _safeweights._quantize("IQ2_XXS", np.zeros(256, np.float32))  # not supported, named
    with pytest.raises(ValueError):
        _safeweights._quantize("NOPE", np.zeros(32, np.float32))
