"""get_slice: numpy basic-indexing semantics checked against numpy itself on random shapes and indices."""

import random

import numpy as np
import pytest

from safeweights import SafetensorError, SliceIndexError, safe_open
from safeweights.numpy import save_file

torch = pytest.importorskip("torch")

N_SHAPES = 40
N_INDICES = 30
NP_DTYPES = ["<f4", "<i8", "u1", "?", "<f8", "<i2"]  # all have torch equivalents in torch 1.13


def _random_shape(r):
    return tuple(r.randint(0, 7) for _ in range(r.randint(1, 4)))


def _random_bound(r, n):
    c = r.random()
    if c < 0.25:
        return None
    if c < 0.8:
        return r.randint(-n - 1, n + 1)
    return r.choice([-100, 100, -(2**40), 2**40])  # far out of range: numpy clamps


def _random_item(r, n):
    c = r.random()
    if c < 0.35:
        # mostly in range; sometimes just outside, which numpy rejects with IndexError
        return r.randint(-n - 1, n) if r.random() < 0.15 else (r.randint(-n, n - 1) if n else 0)
    step = None if r.random() < 0.4 else r.choice([1, 2, 3, -1, -2, -3, 5])
    return slice(_random_bound(r, n), _random_bound(r, n), step)


def _random_index(r, shape):
    ndim = len(shape)
    k = r.randint(0, ndim + (1 if r.random() < 0.1 else 0))  # sometimes one index too many
    items = [_random_item(r, shape[i] if i < ndim else 1) for i in range(k)]
    if r.random() < 0.3:
        items.insert(r.randint(0, len(items)), Ellipsis)
        # items after the ellipsis index the last dims: re-draw them for those sizes
        pos = items.index(Ellipsis)
        after = len(items) - pos - 1
        for j in range(after):
            dim = ndim - after + j
            if 0 <= dim < ndim and pos + 1 + j < len(items):
                items[pos + 1 + j] = _random_item(r, shape[dim])
    for _ in range(r.randint(0, 2) if r.random() < 0.3 else 0):
        items.insert(r.randint(0, len(items)), None)
    if len(items) == 1 and r.random() < 0.5:
        return items[0]  # a bare (non-tuple) index
    return tuple(items)


@pytest.fixture(scope="module")
def random_file(tmp_path_factory):
    r = random.Random(1234)
    nr = np.random.default_rng(1234)
    arrays = {}
    for i in range(N_SHAPES):
        shape = _random_shape(r)
        dt = np.dtype(NP_DTYPES[i % len(NP_DTYPES)])
        if dt == np.bool_:
            a = nr.integers(0, 2, shape).astype(bool)
        elif dt.kind in "iu":
            a = nr.integers(0, 100, shape).astype(dt)
        else:
            a = nr.standard_normal(shape).astype(dt)
        arrays[f"t{i}"] = a
    path = tmp_path_factory.mktemp("slicing") / "random.safetensors"
    save_file(arrays, path)
    return path, arrays


@pytest.mark.parametrize("backend", ["mmap", "pread"])
@pytest.mark.parametrize("framework", ["np", "pt"])
def test_random_slices_match_numpy(random_file, framework, backend):
    path, arrays = random_file
    r = random.Random(f"{framework}-{backend}")
    checked = errors = 0
    with safe_open(path, framework=framework, backend=backend) as f:
        for name, full in arrays.items():
            sl = f.get_slice(name)
            assert sl.get_shape() == list(full.shape)
            for _ in range(N_INDICES):
                idx = _random_index(r, full.shape)
                try:
                    expected = full[idx]
                except IndexError:
                    with pytest.raises(IndexError):
                        sl[idx]
                    errors += 1
                    continue
                got = sl[idx]
                if framework == "pt":
                    assert isinstance(got, torch.Tensor), idx
                    assert tuple(got.shape) == np.shape(expected), (name, full.shape, idx)
                    got = got.numpy()
                assert got.shape == np.shape(expected), (name, full.shape, idx)
                assert got.dtype == full.dtype
                np.testing.assert_array_equal(got, expected, err_msg=f"{name} {full.shape} {idx!r}")
                checked += 1
    assert checked > N_SHAPES * N_INDICES // 2
    assert errors > 0


@pytest.fixture
def ten_by_five(tmp_path):
    a = np.arange(50, dtype=np.float32).reshape(10, 5)
    p = tmp_path / "s.safetensors"
    save_file({"test": a}, p)
    return p, a


@pytest.mark.parametrize("backend", ["mmap", "pread"])
@pytest.mark.parametrize("framework", ["np", "pt"])
def test_reference_slicing_examples(ten_by_five, framework, backend):
    p, a = ten_by_five
    with safe_open(p, framework=framework, backend=backend) as f:
        sl = f.get_slice("test")
        assert sl.get_shape() == [10, 5]
        assert sl.get_dtype() == "F32"

        def arr(x):
            return x.numpy() if framework == "pt" else x

        np.testing.assert_array_equal(arr(sl[:, :, ...]), a)
        np.testing.assert_array_equal(arr(sl[2:, :]), a[2:, :])
        np.testing.assert_array_equal(arr(sl[:, 2]), a[:, 2])
        np.testing.assert_array_equal(arr(sl[:, -1]), a[:, -1])
        np.testing.assert_array_equal(arr(sl[-3, 1:4]), a[-3, 1:4])
        np.testing.assert_array_equal(arr(sl[::-2, ::3]), a[::-2, ::3])
        np.testing.assert_array_equal(arr(sl[np.int64(3)]), a[3])
        np.testing.assert_array_equal(arr(sl[()]), a)

        with pytest.raises(SafetensorError) as e:
            sl[:, -6]
        assert str(e.value) == "Invalid index -6 for dimension 1 of size 5"
        assert isinstance(e.value, IndexError)

        with pytest.raises(SafetensorError) as e:
            sl[2:, 20]
        assert str(e.value) == (
            "Error during slicing [2:, 20] with shape [10, 5]: index 20 out of bounds for tensor dimension #1 of size 5"
        )
        assert isinstance(e.value, IndexError) and isinstance(e.value, SliceIndexError)

        with pytest.raises(SafetensorError) as e:
            sl[[0, 1]]
        assert str(e.value) == "Non empty lists are not implemented"

        # Documented difference: out-of-range slice bounds clamp as in numpy (the reference errors).
        np.testing.assert_array_equal(arr(sl[:20]), a[:20])
        np.testing.assert_array_equal(arr(sl[:, :20]), a[:, :20])
        np.testing.assert_array_equal(arr(sl[15:20]), a[15:20])
        assert arr(sl[15:20]).shape == (0, 5)

        # The reference silently ignored steps; we honour them.
        np.testing.assert_array_equal(arr(sl[::2]), a[::2])

        with pytest.raises(ValueError):
            sl[::0]
        with pytest.raises(IndexError):
            sl[1, 2, 3]
        with pytest.raises(IndexError):
            sl[..., ...]

        empty = sl[[]]
        assert tuple(empty.shape) == (0, 5)


@pytest.mark.parametrize("framework", ["np", "pt"])
def test_scalar_and_zero_size_slices(tmp_path, framework):
    p = tmp_path / "z.safetensors"
    save_file({"s": np.array(7, dtype=np.int64), "z": np.zeros((0, 3), dtype=np.float32)}, p)
    with safe_open(p, framework=framework) as f:
        s = f.get_slice("s")
        assert s.get_shape() == []
        v = s[()]
        assert tuple(v.shape) == () and int(v) == 7
        assert tuple(s[None].shape) == (1,)
        with pytest.raises(IndexError):
            s[0]
        z = f.get_slice("z")
        assert tuple(z[:, 1:].shape) == (0, 2)
        with pytest.raises(IndexError):
            z[0]


def test_slice_reads_are_independent_of_handle_lifetime(ten_by_five):
    p, a = ten_by_five
    with safe_open(p, framework="np") as f:
        part = f.get_slice("test")[3:5]
    np.testing.assert_array_equal(part, a[3:5])
