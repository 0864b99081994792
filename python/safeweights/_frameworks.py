"""The frameworks safe_open and the framework modules serve: numpy, torch, jax/flax, TensorFlow, PaddlePaddle
and MLX, each one ``Framework`` registered in ``FRAMEWORKS``.

A framework says which names select it (safe_open's ``framework``), how it makes a tensor from a buffer
(zero-copy where it can import foreign memory: docs/PYTHON.md, "Frameworks"), where its tensors may go
(devices), and how its tensors become bytes for saving. numpy and torch make their tensors from the
buffer directly; the others from a numpy view of it (or of a fresh bytearray, for slices and
``backend="pread"``). Element types come from the one spelling table (``_dtypes.TABLE``: the numpy /
ml_dtypes name, and the torch name, which PaddlePaddle shares); a type the framework lacks raises
SafetensorError naming it. ``public_functions`` makes save / save_file / load / load_file of the
framework modules that have nothing of their own (flax, tensorflow, paddle, mlx).
"""

from __future__ import annotations

import functools
import importlib
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import _safeweights
from ._dtypes import TABLE, numpy_dtype, torch_dtype, torch_shape
from ._errors import SafetensorError

if TYPE_CHECKING:
    import os

    import numpy as np

# What the writer needs of a framework's tensors: TensorSpecs by name, and what they point into (kept
# alive until the native write returns).
Flattened = Tuple[Dict[str, Any], List[Any]]
# One tensor as the writer takes it: (C-ordered array of its bytes, dtype name, shape, owner to keep).
Bytes = Tuple["np.ndarray", str, Sequence[int], Any]
# One checked slice item of _safe_open._slice_items: ("i", index), ("s", start, stop, step), ("e",), ("n",).
SliceItem = Tuple[Any, ...]

# What every framework module exports (numpy, torch and the four made by public_functions; torch adds its own).
API = (
    "save", "save_file", "load", "load_file", "SafetensorError", "TensorSpec", "deserialize", "safe_open", "serialize",
    "serialize_file",
)


def _missing_type(code: str, framework: Framework, detail: str = "") -> SafetensorError:
    return SafetensorError(
        f"{code} tensors have no {framework.display} type in {framework.display} {framework.version()}{detail}; "
        f"read them with framework='np' (ml_dtypes) or as raw bytes with get_raw(name)"
    )


def _bits(code: str) -> np.dtype:
    """The numpy unsigned integer type as wide as one element of ``code`` (its bits, for a bitcast)."""
    import numpy as np

    bits = TABLE[code][0]
    if bits < 8:
        raise SafetensorError(f"{code} tensors pack several elements per byte; read them as raw bytes with get_raw(name)")
    return np.dtype(f"<u{bits // 8}") if bits > 8 else np.dtype(np.uint8)


def _native(code: str) -> bool:
    from ._dtypes import _NUMPY_NATIVE

    return code in _NUMPY_NATIVE


def _view_dtype(code: str) -> np.dtype:
    """numpy's type for ``code`` where numpy has it natively, else the bits of one element."""
    return numpy_dtype(code) if _native(code) else _bits(code)


def _view(arr: np.ndarray, code: str) -> np.ndarray:
    """``arr`` (raw bytes or already typed) as ``_view_dtype(code)``."""
    dt = _view_dtype(code)
    return arr if arr.dtype == dt else arr.view(dt)


def typed(raw: np.ndarray, code: str, shape: Sequence[int]) -> np.ndarray:
    """A tensor's raw bytes (a uint8 numpy view) as an array of ``shape`` in ``_view_dtype(code)``."""
    return _view(raw, code).reshape(shape)


class Framework:
    """One framework: its names, the module it needs, and how its tensors are made and saved.

    The defaults are those of a framework served through numpy views: ``tensor`` and ``to_numpy`` are
    what such a framework defines; numpy and torch, which take the buffer themselves, define
    ``from_buffer`` instead (and torch its own ``flatten``)."""

    names: Tuple[str, ...] = ()  # safe_open's names for it; the first is its key in FRAMEWORKS
    display = ""  # the reference's name for it in messages ("tensorflow")
    module = ""  # what `import` needs
    public_module = ""  # safeweights.<public_module>, which serves it
    value_kind = "tensor"  # what save's messages call a value ("Expected a dict of [str, tensor]")
    writable = False  # whether its tensors are writable (then they view the copy-on-write mapping)
    devices = False  # whether its tensors may be put on a device other than the CPU
    import_at_open = False  # whether opening a file imports it (else the first tensor does)
    views_slices = False  # whether slices of a mapped file are views (the framework's own indexing)
    loads_to_cuda = False  # whether a CUDA device loads through the library's loader (_load.py)

    @functools.cached_property
    def lib(self) -> Any:
        return importlib.import_module(self.module)

    def version(self) -> str:
        top = importlib.import_module(self.module.split(".")[0])
        return getattr(top, "__version__", "?")

    def from_buffer(self, buffer: Any, code: str, shape: Sequence[int], offset: int, nbytes: int) -> Any:
        """The framework's tensor of ``code`` and ``shape`` over ``nbytes`` of ``buffer`` from ``offset``."""
        import numpy as np

        if nbytes == 0:
            return self.empty(code, shape)
        raw = np.frombuffer(buffer, dtype=np.uint8, count=nbytes, offset=offset)
        return self.tensor(typed(raw, code, shape), code)

    def tensor(self, arr: np.ndarray, code: str) -> Any:
        """The framework's tensor over ``arr`` (a numpy view, in the file's element type where numpy has it)."""
        raise NotImplementedError

    def empty(self, code: str, shape: Sequence[int]) -> Any:
        import numpy as np

        return self.tensor(np.zeros(shape, dtype=_view_dtype(code)), code)

    def to_device(self, tensor: Any, device: Any) -> Any:
        raise SafetensorError(f"Device {device} is not supported for framework {self.display}")

    def index(self, whole: Any, items: List[SliceItem]) -> Any:
        """``whole[items]`` by the framework's own indexing (only where ``views_slices``)."""
        raise NotImplementedError

    def to_numpy(self, value: Any) -> Bytes:
        """``(array, dtype name, shape, keep)``: C-ordered bytes of ``value`` for the writer."""
        raise NotImplementedError

    def flatten(self, tensors: Any) -> Flattened:
        """``(specs, keep)`` for the writer (``_write.write``) from a dict of the framework's tensors."""
        return flatten(tensors, self.to_numpy, self.value_kind)


def flatten(tensor_dict: Any, to_numpy: Callable[[Any], Bytes], kind: str) -> Flattened:
    """TensorSpecs for the values, and the arrays (C-contiguous, little-endian) that must stay alive.

    ``to_numpy`` (a Framework's) turns each value into ``(array, dtype name, shape, owner)``: the array
    holds its bytes, named by the table's numpy name, and ``owner`` is held with it until the write
    returns. ``kind`` is what the message for anything but a dict calls a value."""
    import numpy as np

    if not isinstance(tensor_dict, dict):
        raise ValueError(f"Expected a dict of [str, {kind}] but received {type(tensor_dict)}")
    specs, keep = {}, []
    for name, value in tensor_dict.items():
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, got {type(name).__name__}")
        arr, dtype, shape, owner = to_numpy(value)
        if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and np.little_endian is False):
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        if not arr.flags.c_contiguous:  # (0-d arrays always are; np.ascontiguousarray would make them 1-d)
            arr = np.ascontiguousarray(arr)  # C order
        # Held until the write returns, taken before the address is read: the reference keeps the array
        # alive, and numpy refuses to resize an array that has a weak reference (even with
        # refcheck=False), which would free the memory the writer reads without the GIL.
        keep.append((arr, weakref.ref(arr), owner))
        specs[name] = _safeweights.TensorSpec(dtype=dtype, shape=list(shape), data_ptr=arr.ctypes.data, data_len=arr.nbytes)
    return specs, keep


class _Numpy(Framework):
    names = ("np", "numpy")
    display = "numpy"
    module = public_module = "numpy"
    value_kind = "np.ndarray"

    def from_buffer(self, buffer: Any, code: str, shape: Sequence[int], offset: int, nbytes: int) -> Any:
        np = self.lib
        dt = numpy_dtype(code)
        if nbytes == 0:
            return np.zeros(shape, dtype=dt)
        return np.frombuffer(buffer, dtype=dt, count=nbytes // dt.itemsize, offset=offset).reshape(shape)

    def to_numpy(self, value: Any) -> Bytes:
        arr = self.lib.asarray(value)
        return arr, arr.dtype.name, arr.shape, None


_TORCH_BOUND = 2**62  # beyond any dimension; torch warns about (or refuses) bounds near the int64 limits


def _torch_bound(x: Optional[int]) -> Optional[int]:
    return x if x is None else min(max(x, -_TORCH_BOUND), _TORCH_BOUND)


def _torch_index(item: SliceItem) -> Any:
    """One checked slice item as torch indexing takes it."""
    tag = item[0]
    if tag == "i":
        return item[1]
    if tag == "s":
        return slice(_torch_bound(item[1]), _torch_bound(item[2]), item[3])
    return Ellipsis if tag == "e" else None


class _Torch(Framework):
    names = ("pt", "torch", "pytorch")
    display = "pytorch"
    module = public_module = "torch"
    value_kind = "torch.Tensor"
    writable = devices = import_at_open = views_slices = loads_to_cuda = True

    def from_buffer(self, buffer: Any, code: str, shape: Sequence[int], offset: int, nbytes: int) -> Any:
        torch = self.lib
        dt = torch_dtype(code)
        tshape = torch_shape(code, shape)
        if nbytes == 0:
            return torch.empty(tshape, dtype=dt)
        itemsize = 1 if code == "F4" else TABLE[code][0] // 8
        return torch.frombuffer(buffer, dtype=dt, count=nbytes // itemsize, offset=offset).reshape(tshape)

    def to_device(self, tensor: Any, device: Any) -> Any:
        return tensor.to(device)

    def index(self, whole: Any, items: List[SliceItem]) -> Any:
        return whole[tuple(_torch_index(it) for it in items)]

    def flatten(self, tensors: Any) -> Flattened:
        # The reference's rules for torch (no sparse, shared or non-contiguous tensors), in safeweights.torch
        # (imported by name: its stub, which type checkers read, lists only the public API).
        return importlib.import_module(".torch", __package__)._flatten(tensors)


class _Jax(Framework):
    names = ("flax", "jax")
    display = public_module = "flax"
    module = "jax"

    def tensor(self, arr: np.ndarray, code: str) -> Any:
        # jax's CPU client takes a 64-byte aligned host array as it is (the jax.Array keeps the array, and
        # so the mapping, alive), and copies any other. jax arrays are immutable: the read-only view is
        # what it needs. Its types are ml_dtypes', so a numpy view in the file's type goes straight in.
        # Without jax_enable_x64, jax stores 64-bit types in 32 bits, as the reference's jnp.array does.
        try:
            dt = numpy_dtype(code)
        except SafetensorError as e:
            raise _missing_type(code, self, f" ({e})") from None
        return self.lib.device_put(arr if arr.dtype == dt else arr.view(dt))

    def to_numpy(self, value: Any) -> Bytes:
        import numpy as np

        arr = np.asarray(value)  # a view of a CPU jax.Array's buffer (a copy from another device)
        return arr, arr.dtype.name, arr.shape, value


class _TensorFlow(Framework):
    names = ("tf", "tensorflow")
    display = module = public_module = "tensorflow"
    writable = True

    @functools.cached_property
    def _dlpack(self) -> Callable[[Any], Any]:
        return self.lib.experimental.dlpack.from_dlpack

    def _dtype(self, code: str) -> Any:
        try:
            return self.lib.as_dtype(numpy_dtype(code))
        except (SafetensorError, TypeError, ValueError):
            raise _missing_type(code, self) from None

    def tensor(self, arr: np.ndarray, code: str) -> Any:
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

    def to_numpy(self, value: Any) -> Bytes:
        import numpy as np

        arr = np.asarray(value.numpy())  # a copy of the tensor's bytes, ml_dtypes types for bf16 / float8
        return arr, arr.dtype.name, arr.shape, value


class _Paddle(Framework):
    names = ("paddle",)
    display = module = public_module = "paddle"
    writable = devices = True

    def _dtype(self, code: str) -> Any:
        paddle = self.lib
        name = TABLE[code][2]  # paddle spells its types as torch does
        dt = getattr(paddle, name, None) if name else None
        if dt is None or not isinstance(dt, type(paddle.float32)):
            raise _missing_type(code, self)
        return dt

    def tensor(self, arr: np.ndarray, code: str) -> Any:
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
        flat = paddle.base.core.frombuffer(arr.reshape(-1).view("u1").data, dt)
        return flat.reshape(list(arr.shape))

    def empty(self, code: str, shape: Sequence[int]) -> Any:
        import numpy as np

        dt = self._dtype(code)
        if _native(code):  # (no CPU kernel fills a uint16/32/64 tensor: numpy's empty array, imported)
            return self.lib.utils.dlpack.from_dlpack(np.zeros(shape, dtype=_view_dtype(code)))
        return self.lib.zeros(list(shape), dtype=dt)

    def to_device(self, tensor: Any, device: Any) -> Any:
        # The reference's spelling: a CUDA device is paddle's gpu:N.
        device = str(device)
        if device.startswith("cuda"):
            device = "gpu" + device[4:] if ":" in device else "gpu:0"
        return tensor.to(device)

    def to_numpy(self, value: Any) -> Bytes:
        return _paddle_bytes(self.lib, value)


def _paddle_bytes(paddle: Any, value: Any) -> Bytes:
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


class _Mlx(Framework):
    names = ("mlx",)
    display = public_module = "mlx"
    module = "mlx.core"

    def version(self) -> str:
        return getattr(self.lib, "__version__", "?")

    def _dtype(self, code: str) -> Any:
        mx = self.lib
        name = TABLE[code][1]
        dt = getattr(mx, name, None) or getattr(mx, name + "_", None)  # mlx spells bool as bool_
        if not isinstance(dt, mx.Dtype):
            raise _missing_type(code, self)
        return dt

    def tensor(self, arr: np.ndarray, code: str) -> Any:
        # mx.array copies (MLX has no import of foreign memory). bf16 crosses as uint16 and is viewed,
        # so no ml_dtypes is needed.
        mx = self.lib
        dt = self._dtype(code)
        out = mx.array(_view(arr, code))  # (float64 becomes float32 there, as in the reference)
        return out if _native(code) else out.view(dt)

    @functools.cached_property
    def _names(self) -> Dict[Any, str]:
        """{mlx type: its safetensors code} for the table's types MLX has."""
        out = {}
        for code in TABLE:
            try:
                out[self._dtype(code)] = code
            except SafetensorError:
                pass
        return out

    def to_numpy(self, value: Any) -> Bytes:
        import numpy as np

        mx = self.lib
        code = self._names.get(value.dtype)
        if code is None:
            raise SafetensorError(f"mlx arrays of type {value.dtype} cannot be saved in safetensors")
        # numpy cannot take bf16 from MLX (no PEP 3118 spelling): its bits, saved under its name
        arr = np.asarray(value if _native(code) else value.view(getattr(mx, f"uint{value.dtype.size * 8}")))
        return arr, TABLE[code][1], arr.shape, value


# Every framework, by its key (safe_open's first name for it).
FRAMEWORKS: Dict[str, Framework] = {
    fw.names[0]: fw for fw in (_Numpy(), _Torch(), _Jax(), _TensorFlow(), _Paddle(), _Mlx())
}
# safe_open's framework names, each to its key in FRAMEWORKS.
ALIASES: Dict[str, str] = {name: key for key, fw in FRAMEWORKS.items() for name in fw.names}

PathLike = Union[str, "os.PathLike[str]"]


def public_functions(key: str) -> Tuple[Callable[..., bytes], Callable[..., None], Callable[..., Any], Callable[..., Any]]:
    """save, save_file, load and load_file of the module that serves ``FRAMEWORKS[key]`` (safeweights.flax
    and the like), with the reference's signatures: load and load_file take a device only where the
    framework has devices."""
    from ._safe_open import load_buffer, safe_open
    from ._write import write

    fw = FRAMEWORKS[key]

    def save(tensors: Dict[str, Any], metadata: Optional[Dict[str, str]] = None) -> bytes:
        """The safetensors file for these tensors, as bytes."""
        return write(fw.flatten(tensors), metadata)

    def save_file(tensors: Dict[str, Any], filename: PathLike, metadata: Optional[Dict[str, str]] = None) -> None:
        """Writes the tensors to ``filename`` atomically (a temporary file renamed into place)."""
        write(fw.flatten(tensors), metadata, filename)

    def load_on(data: bytes, device: Any = "cpu") -> Dict[str, Any]:
        return load_buffer(data, key, device)

    def load_file_on(filename: PathLike, device: Any = "cpu", *, backend: str = "mmap") -> Dict[str, Any]:
        with safe_open(filename, framework=key, device=device, backend=backend) as f:
            return f.get_tensors()

    def load(data: bytes) -> Dict[str, Any]:
        return load_on(data)

    def load_file(filename: PathLike, *, backend: str = "mmap") -> Dict[str, Any]:
        return load_file_on(filename, backend=backend)

    loads = (load_on, load_file_on) if fw.devices else (load, load_file)
    loads[0].__doc__ = "The tensors of a safetensors file held in memory, in file order."
    loads[1].__doc__ = "Every tensor of the file, in file order."
    functions = (save, save_file, *loads)
    for function, name in zip(functions, API):
        function.__name__ = function.__qualname__ = name
        function.__module__ = f"safeweights.{fw.public_module}"
    return functions
