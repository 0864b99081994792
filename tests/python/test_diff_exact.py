"""`safeweights diff` on values float64 cannot hold: integers of every width compared exactly, cosine
in [-1, 1], F64 values near the largest double. Known answers from numpy and from Python's exact
arithmetic (int, fractions.Fraction, decimal.Decimal), never from safeweights.
"""

import json
import math
import os
import subprocess
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest

from conftest import build_file

CLI = os.environ.get("SAFEWEIGHTS_CLI")
pytestmark = pytest.mark.skipif(not CLI, reason="SAFEWEIGHTS_CLI (the command-line tool) not given")


def write(path, tensors):
    """tensors: (name, safetensors code, numpy array)."""
    path.write_bytes(build_file([(n, code, a.shape, a.tobytes()) for n, code, a in tensors]))
    return path


def diff(a, b):
    j = subprocess.run([CLI, "diff", "--json", str(a), str(b)], capture_output=True, timeout=60)
    text = subprocess.run([CLI, "diff", str(a), str(b)], capture_output=True, timeout=60)
    assert j.returncode == text.returncode, (j, text)
    doc = json.loads(j.stdout, parse_float=Decimal)
    return j.returncode, {t["name"]: t for t in doc["tensors"]}, text.stdout.decode()


INTS = [("I8", "i1"), ("U8", "u1"), ("I16", "<i2"), ("U16", "<u2"), ("I32", "<i4"), ("U32", "<u4"),
        ("I64", "<i8"), ("U64", "<u8")]


@pytest.mark.parametrize("code,np_code", INTS, ids=[c for c, _ in INTS])
def test_integers_compare_exactly_at_every_width(tmp_path, code, np_code):
    info = np.iinfo(np_code)
    a = np.array([info.max, info.min, 0, info.max - 1], np_code)
    b = a.copy()
    b[0] = info.max - 1  # differs by one at the top of the range
    pa = write(tmp_path / "a.safetensors", [("t", code, a)])
    pb = write(tmp_path / "b.safetensors", [("t", code, b)])
    pc = write(tmp_path / "c.safetensors", [("t", code, a.copy())])
    exact = [int(x) - int(y) for x, y in zip(a.tolist(), b.tolist())]  # Python ints: exact
    code_, t, text = diff(pa, pb)
    assert code_ == 1 and t["t"]["identical"] is False and t["t"]["same"] is False, t
    assert t["t"]["differing"] == sum(1 for d in exact if d) == 1
    assert int(t["t"]["max_abs_diff"]) == max(abs(d) for d in exact) == 1
    assert "1 of 4 values differ" in text and text.rstrip().endswith("(1 differ), 0 only in A, 0 only in B")
    assert diff(pa, pc)[0] == 0


def test_i64_and_u64_beyond_2_53(tmp_path):
    # The case: [2**62] vs [2**62 + 1], equal as float64.
    assert float(2**62) == float(2**62 + 1)
    pa = write(tmp_path / "a.safetensors", [("i", "I64", np.array([2**62, -2**63], "<i8")),
                                            ("u", "U64", np.array([2**64 - 1, 2**63], "<u8"))])
    pb = write(tmp_path / "b.safetensors", [("i", "I64", np.array([2**62 + 1, -2**63 + 1], "<i8")),
                                            ("u", "U64", np.array([2**64 - 2, 2**63 + 2], "<u8"))])
    code, t, text = diff(pa, pb)
    assert code == 1
    assert t["i"]["differing"] == 2 and int(t["i"]["max_abs_diff"]) == 1 and t["i"]["rmse"] == 1
    assert t["u"]["differing"] == 2 and int(t["u"]["max_abs_diff"]) == 2
    assert float(t["u"]["rmse"]) == math.sqrt((1 + 4) / 2)
    assert "i: I64 [2]: 2 of 2 values differ, max abs 1, rmse 1" in text


def test_bool_and_integer_against_float(tmp_path):
    pa = write(tmp_path / "a.safetensors", [("b", "BOOL", np.array([True, False, True])),
                                            ("x", "I64", np.array([2**53 + 1, 3], "<i8"))])
    pb = write(tmp_path / "b.safetensors", [("b", "BOOL", np.array([True, True, True])),
                                            ("x", "F64", np.array([2.0**53, 3.0], "<f8"))])
    code, t, _ = diff(pa, pb)
    assert code == 1
    assert t["b"]["differing"] == 1 and int(t["b"]["max_abs_diff"]) == 1
    # I64 2**53 + 1 against the double 2**53: one apart, exactly.
    assert t["x"]["differing"] == 1 and int(t["x"]["max_abs_diff"]) == 1


def test_cosine_stays_in_range(tmp_path, rng):
    # Parallel and anti-parallel vectors: cosine is +-1; float64 sums alone can land a few ulps past it.
    tensors_a, tensors_b, want = [], [], {}
    for i in range(40):
        x = rng.standard_normal(int(rng.integers(2, 300))) * 10.0 ** int(rng.integers(-30, 30))
        k = float(rng.choice([-3.0, -1.0, 0.5, 2.0, 7.0]))
        y = x * k
        tensors_a.append((f"t{i}", "F64", x.astype("<f8")))
        tensors_b.append((f"t{i}", "F64", y.astype("<f8")))
        want[f"t{i}"] = float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y)))
    pa = write(tmp_path / "a.safetensors", tensors_a)
    pb = write(tmp_path / "b.safetensors", tensors_b)
    _, t, _ = diff(pa, pb)
    for name, w in want.items():
        c = float(t[name]["cosine"])
        assert -1.0 <= c <= 1.0, (name, c)
        assert abs(c - w) <= 1e-12, (name, c, w)


def exact_stats(a, b):
    """max |a-b| and rmse as Decimals, from exact rational arithmetic."""
    getcontext().prec = 40
    d = [Fraction(float(x)) - Fraction(float(y)) for x, y in zip(a, b)]
    mx = max(abs(v) for v in d)
    mean_sq = sum(v * v for v in d) / len(d)
    rmse = (Decimal(mean_sq.numerator) / Decimal(mean_sq.denominator)).sqrt()
    return Decimal(mx.numerator) / Decimal(mx.denominator), rmse


def test_f64_near_the_largest_double(tmp_path):
    a = np.array([1e308, -1.7e308, 5.0, 1.7976931348623157e308], "<f8")
    b = np.array([-1e308, 1.7e308, 5.0, 1.5e308], "<f8")
    same_sign_a = np.array([1e308, 1e308, -1.5e308], "<f8")
    same_sign_b = np.array([1e308, 1.0000000001e308, -1.5e308], "<f8")
    pa = write(tmp_path / "a.safetensors", [("t", "F64", a), ("s", "F64", same_sign_a)])
    pb = write(tmp_path / "b.safetensors", [("t", "F64", b), ("s", "F64", same_sign_b)])
    code, t, text = diff(pa, pb)
    assert code == 1
    assert "inf" not in text and "nan" not in text, text
    for name, x, y in (("t", a, b), ("s", same_sign_a, same_sign_b)):
        mx, rmse = exact_stats(x, y)
        got_mx, got_rmse = t[name]["max_abs_diff"], t[name]["rmse"]
        assert isinstance(got_mx, Decimal) and isinstance(got_rmse, Decimal), t[name]  # numbers, not null
        assert abs(got_mx - mx) <= mx * Decimal("1e-15"), (name, got_mx, mx)
        assert abs(got_rmse - rmse) <= rmse * Decimal("1e-15"), (name, got_rmse, rmse)
        # numpy's cosine on the values scaled by 2^-1000 (exact), which do not overflow.
        xs, ys = x * 2.0**-1000, y * 2.0**-1000
        want = float(np.dot(xs, ys) / (np.linalg.norm(xs) * np.linalg.norm(ys)))
        c = float(t[name]["cosine"])
        assert -1.0 <= c <= 1.0 and abs(c - max(-1.0, min(1.0, want))) <= 1e-12, (name, c, want)
    assert t["t"]["differing"] == 3 and t["s"]["differing"] == 1
