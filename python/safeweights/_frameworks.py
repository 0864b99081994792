"""The frameworks served through numpy views: jax/flax, TensorFlow, PaddlePaddle and MLX.

Each turns a numpy view of a tensor's bytes (or a fresh bytearray, for slices and ``backend="pread"``)
into its own tensor, zero-copy where it can import foreign memory (docs/PYTHON.md, "Frameworks"), and
a tensor of its own back into bytes for saving. Element types come from the one spelling table
(``_dtypes.TABLE``: the numpy / ml_dtypes name, and the torch name, which PaddlePaddle shares); a type
the framework lacks raises SafetensorError naming it.
"""

from __future__ import annotations

import functools
import importlib

from ._dtypes import TABLE, numpy_dtype
from ._errors import SafetensorError


def _missing_type(code: str, framework: "_Framework", detail: str = "") -> SafetensorError:
    return SafetensorError(
        f"{code} tensors have no {framework.display} type in {framework.display} {framework.version()}{detail}; "
        f"read them with framework='np' (ml_dtypes) or as raw bytes with get_raw(name)"
    )


def _bits(code: str):
    """The numpy unsigned integer type as wide as one element of ``code`` (its bits, for a bitcast)."""
    import numpy as np

    bits = TABLE[code][0]
    if bits < 8:
        raise SafetensorError(f"{code} tensors pack several elements per byte; read them as raw bytes with get_raw(name)")
    return np.dtype(f"<u{bits // 8}") if bits > 8 else np.dtype(np.uint8)


def _native(code: str) -> bool:
    from ._dtypes import _NUMPY_NATIVE

    return code in _NUMPY_NATIVE


class _Framework:
    """One framework: its names, the module it needs, and how its tensors are made and saved."""

    display = ""  # the reference's name for it in messages ("tensorflow")
    module = ""  # what `import` needs
    writable = False  # whether its tensors are writable (then they view the copy-on-write mapping)

    @functools.cached_property
    def lib(self):
        return importlib.import_module(self.module)

    def version(self) -> str:
        top = importlib.import_module(self.module.split(".")[0])
        return getattr(top, "__version__", "?")

    def tensor(self, arr, code: str):
        """The framework's tensor over ``arr`` (a numpy view, in the file's element type where numpy has it)."""
        raise NotImplementedError

    def to_numpy(self, value):
        """``(array, dtype name, shape, keep)``: C-ordered bytes of ``value`` for the writer."""
        raise NotImplementedError

    def to_device(self, tensor, device):
        raise SafetensorError(f"Device {device} is not supported for framework {self.display}")

    def empty(self, code: str, shape):
        import numpy as np

        return self.tensor(np.zeros(shape, dtype=_view_dtype(code)), code)


def _view_dtype(code: str):
    """numpy's type for ``code`` where numpy has it natively, else the bits of one element."""
    return numpy_dtype(code) if _native(code) else _bits(code)


def _view(arr, code):
    """``arr`` (raw bytes or already typed) as ``_view_dtype(code)``."""
    dt = _view_dtype(code)
    return arr if arr.dtype == dt else arr.view(dt)


def typed(raw, code: str, shape):
    """A tensor's raw bytes (a uint8 numpy view) as an array of ``shape`` in ``_view_dtype(code)``."""
    return _view(raw, code).reshape(shape)


class _Jax(_Framework):
    display = "flax"
    module = "jax"

    def tensor(self, arr, code):
        # jax's CPU client takes a 64-byte aligned host array as it is (the jax.Array keeps the array, and
        # so the mapping, alive), and copies any other. jax arrays are immutable: the read-only view is
        # what it needs. Its types are ml_dtypes', so a numpy view in the file's type goes straight in.
        # Without jax_enable_x64, jax stores 64-bit types in 32 bits, as the reference's jnp.array does.
        try:
            dt = numpy_dtype(code)
        except SafetensorError as e:
            raise _missing_type(code, self, f" ({e})") from None
        return self.lib.device_put(arr if arr.dtype == dt else arr.view(dt))

    def to_numpy(self, value):
        import numpy as np

        arr = np.asarray(value)  # a view of a CPU jax.Array's buffer (a copy from another device)
        return arr, arr.dtype.name, arr.shape, value


class _TensorFlow(_Framework):
    display = "tensorflow"
    module = "tensorflow"
    writable = True

    @functools.cached_property
    def _dlpack(self):
        return self.lib.experimental.dlpack.from_dlpack

    def _dtype(self, code):
        try:
            return self.lib.as_dtype(numpy_dtype(code))
        except (SafetensorError, TypeError, ValueError):
            raise _missing_type(code, self) from None

    def tensor(self, arr, code):
        tf = self.lib
        dt = self._dtype(code)
        bits = _view(arr, code)
        # DLPack: TensorFlow takes the memory as it is and keeps the exporter (and so the mapping) alive,
        # but its kernels abort on memory that is not 64-byte aligned (Eigen's alignment): such tensors
        # are copied, as jax's are. numpy exports only writable arrays this way and only its own types, so the
        # view is of the copy-on-write mapping (TensorFlow never writes to it; a tf.Variable copies),
        # and bf16 crosses as uint16 and is bitcast, which shares the buffer.
        # float8 types cannot be bitcast in TensorFlow: they are copied from their ml_dtypes view.
        if not bits.flags.writeable or not bits.size or bits.ctypes.data % 64:
            return tf.convert_to_tensor(arr.view(numpy_dtype(code)))  # a copy
        t = self._dlpack(bits.__dlpack__())
        if t.dtype == dt:
            return t
        try:
            return tf.bitcast(t, dt)
        except tf.errors.InvalidArgumentError:
            return tf.convert_to_tensor(arr.view(numpy_dtype(code)))

    def to_numpy(self, value):
        import numpy as np

        arr = np.asarray(value.numpy())  # a copy of the tensor's bytes, ml_dtypes types for bf16 / float8
        return arr, arr.dtype.name, arr.shape, value


class _Paddle(_Framework):
    display = "paddle"
    module = "paddle"
    writable = True

    def _dtype(self, code):
        paddle = self.lib
        name = TABLE[code][2]  # paddle spells its types as torch does
        dt = getattr(paddle, name, None) if name else None
        if dt is None or not isinstance(dt, type(paddle.float32)):
            raise _missing_type(code, self)
        return dt

    def tensor(self, arr, code):
        paddle = self.lib
        dt = self._dtype(code)
        if arr.size == 0:
            return paddle.zeros(list(arr.shape), dtype=dt)  # frombuffer refuses empty buffers
        # Both ways view the buffer (the copy-on-write mapping: paddle tensors are writable, and writes
        # stay private) and hold its export, so the mapping lives as long as the tensor. numpy's types
        # go through DLPack, shape and all (paddle has no CPU kernels for uint16/32/64, reshape
        # included); bf16 and float8, which numpy does not export, through frombuffer and a reshape.
        if _native(code):
            return paddle.utils.dlpack.from_dlpack(arr)
        flat = paddle.base.core.frombuffer(memoryview(arr.reshape(-1).view("u1")), dt)
        return flat.reshape(list(arr.shape))

    def empty(self, code, shape):
        import numpy as np

        dt = self._dtype(code)
        if _native(code):  # (no CPU kernel fills a uint16/32/64 tensor: numpy's empty array, imported)
            return self.lib.utils.dlpack.from_dlpack(np.zeros(shape, dtype=_view_dtype(code)))
        return self.lib.zeros(list(shape), dtype=dt)

    def to_device(self, tensor, device):
        # The reference's spelling: a CUDA device is paddle's gpu:N.
        device = str(device)
        if device.startswith("cuda"):
            device = "gpu" + device[4:] if ":" in device else "gpu:0"
        return tensor.to(device)

    def to_numpy(self, value):
        return _paddle_bytes(self.lib, value)


def _paddle_bytes(paddle, value):
    import ctypes

    import numpy as np

    if not isinstance(value, paddle.Tensor):
        raise ValueError(f"expected paddle.Tensor but received {type(value)}")
    if not value.is_contiguous():
        raise ValueError("You are trying to save a non contiguous tensor: call `.contiguous()` on it first")
    if not value.place.is_cpu_place():
        value = value.cpu()
    shape = list(value.shape)
    name = str(value.dtype).rsplit(".", 1)[-1]
    nbytes = int(np.prod(shape, dtype=np.int64)) * value.element_size()
    if nbytes == 0:
        return np.empty(0, np.uint8), name, shape, value
    # The tensor's own bytes (no copy); the tensor is held until the write returns.
    arr = np.ctypeslib.as_array(ctypes.cast(value.data_ptr(), ctypes.POINTER(ctypes.c_ubyte)), (nbytes,))
    return arr, name, shape, value


class _Mlx(_Framework):
    display = "mlx"
    module = "mlx.core"

    def version(self):
        return getattr(self.lib, "__version__", "?")

    def _dtype(self, code):
        mx = self.lib
        name = TABLE[code][1]
        dt = getattr(mx, name, None) or getattr(mx, name + "_", None)  # mlx spells bool as bool_
        if not isinstance(dt, mx.Dtype):
            raise _missing_type(code, self)
        return dt

    def tensor(self, arr, code):
        # mx.array copies (MLX has no import of foreign memory). bf16 crosses as uint16 and is viewed,
        # so no ml_dtypes is needed.
        mx = self.lib
        dt = self._dtype(code)
        out = mx.array(_view(arr, code))  # (float64 becomes float32 there, as in the reference)
        return out if _native(code) else out.view(dt)

    @functools.cached_property
    def _names(self):
        """{mlx type: its safetensors code} for the table's types MLX has."""
        out = {}
        for code in TABLE:
            try:
                out[self._dtype(code)] = code
            except SafetensorError:
                pass
        return out

    def to_numpy(self, value):
        import numpy as np

        mx = self.lib
        code = self._names.get(value.dtype)
        if code is None:
            raise SafetensorError(f"mlx arrays of type {value.dtype} cannot be saved in safetensors")
        # numpy cannot take bf16 from MLX (no PEP 3118 spelling): its bits, saved under its name
        arr = np.asarray(value if _native(code) else value.view(getattr(mx, f"uint{value.dtype.size * 8}")))
        return arr, TABLE[code][1], arr.shape, value


# The reference's framework names (safe_open's `framework`) and the display name in its messages.
FRAMEWORKS = {
    "flax": _Jax(), "tf": _TensorFlow(), "paddle": _Paddle(), "mlx": _Mlx(),
}
ALIASES = {"jax": "flax", "flax": "flax", "tf": "tf", "tensorflow": "tf", "paddle": "paddle", "mlx": "mlx"}


def flatten(tensors, framework: str):
    """``(specs, keep)`` for the writer (``_write.write``) from a dict of the framework's tensors."""
    from .numpy import _flatten

    return _flatten(tensors, FRAMEWORKS[framework].to_numpy)
