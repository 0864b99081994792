"""safe_open: the reference's file handle, zero-copy.

With the default ``backend="mmap"`` the file is mapped once and every tensor is a view of the mapping:
numpy arrays are read-only (``arr.copy()`` gives a writable one), torch tensors are copy-on-write (an
in-place update copies the touched pages privately and never reaches the file). Views keep the mapping
alive after the handle is closed. ``backend="pread"`` reads each tensor into fresh, writable memory
instead (for network filesystems where page faults are slow). Slices read only the bytes they need.

``filename`` may be an ``http://`` or ``https://`` URL: the header is fetched with one Range request,
and each tensor or slice with the requests it needs (into fresh memory, as with ``backend="pread"``).

Handles are thread-safe: any method may be called from several threads at once, and the GIL is
released while bytes are read.
"""

from __future__ import annotations

import operator
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _load, _safeweights
from ._errors import SafetensorError, SliceIndexError
from ._frameworks import ALIASES, FRAMEWORKS, Framework, SliceItem

_BACKENDS = ("mmap", "pread")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _framework(name: object) -> str:
    fw = ALIASES.get(name) if isinstance(name, str) else None
    if fw is None:
        raise SafetensorError(f"framework {name} is invalid")
    return fw


def _check_backend(backend: object) -> None:
    if backend not in _BACKENDS:
        raise SafetensorError(f'backend "{backend}" is invalid (expected one of: "mmap", "pread")')


# The reference's device grammar; anything else is "device {name} is invalid" at open, as there.
_DEVICE_GRAMMAR = r"cpu|mps(:0)?|(cuda|npu|xpu|xla|mlu|musa|hpu)(:[0-9]+)?"


def _check_device(device: Any) -> None:
    # "cpu", the usual device, is checked without the re module, which `import safeweights` then
    # does not have to load.
    if isinstance(device, str) and device != "cpu":
        import re  # noqa: PLC0415 (lazy: only for devices other than cpu)

        if not re.fullmatch(_DEVICE_GRAMMAR, device):
            raise SafetensorError(f"device {device} is invalid")


def _check_framework_device(framework: str, device: Any) -> None:
    _check_device(device)
    fw = FRAMEWORKS[framework]
    if not fw.devices and not _is_cpu(device):
        raise SafetensorError(f"Device {device} is not supported for framework {fw.display}")


def _fspath(filename: Any) -> str:
    try:
        return os.fspath(filename)
    except TypeError:
        raise TypeError(f"filename must be str or os.PathLike, not {type(filename).__name__}") from None


def _is_cpu(device: Any) -> bool:
    return device is None or device == "cpu" or (hasattr(device, "type") and device.type == "cpu" and not isinstance(device, str))


class _TensorMaker:
    """Turns (dtype code, shape, offset, nbytes) into a tensor of the handle's framework."""

    def __init__(self, handle: Any, framework: str, device: Any):
        self._handle = handle
        self.fw: Framework = FRAMEWORKS[framework]
        self._device = device
        self._on_cpu = _is_cpu(device)
        self._buffer = handle.buffer(writable=self.fw.writable)
        # Slices are views of the mapping where the reference's are: torch on the CPU over a mapped file.
        # (The reference's numpy slices are fresh writable copies, and so are ours.)
        self.views_slices = self.fw.views_slices and self._buffer is not None and self._on_cpu
        if self.fw.import_at_open:
            self.fw.lib  # noqa: B018 (torch is imported at open, as the reference does)
        # numpy is imported with the first array, not here: opening a file and listing its keys or
        # metadata needs no numpy, as with the reference.

    def from_file(self, name: str, code: str, shape: Sequence[int], offset: int, nbytes: int) -> Any:
        if self._buffer is not None:
            return self.make(self._buffer, code, shape, offset, nbytes)
        return self.make(self._handle.read(name), code, shape, 0, nbytes)

    def make(self, buffer: Any, code: str, shape: Sequence[int], offset: int, nbytes: int) -> Any:
        t = self.fw.from_buffer(buffer, code, shape, offset, nbytes)
        return t if self._on_cpu else self.fw.to_device(t, self._device)


def _bound_text(x: Any) -> str:
    """A slice bound as the index was written: nothing for None."""
    return "" if x is None else str(x)


def _render_item(k: Any) -> str:
    if isinstance(k, slice):
        return f"{_bound_text(k.start)}:{_bound_text(k.stop)}" + ("" if k.step is None else f":{k.step}")
    if k is Ellipsis:
        return "..."
    return str(k)


def _render(key: Tuple[Any, ...]) -> str:
    return "[" + ", ".join(_render_item(k) for k in key) + "]"


def _bound(x: Any) -> Optional[int]:
    if x is None:
        return None
    x = operator.index(x)
    return min(max(x, _INT64_MIN), _INT64_MAX)


def _slice_items(key: Any, shape: Sequence[int]) -> List[SliceItem]:
    """numpy basic indexing -> the native slice items, with numpy's (and the reference's) errors."""
    key = key if isinstance(key, tuple) else (key,)
    items: List[SliceItem] = []
    consumes: List[bool] = []  # for each item: does it consume a dimension?
    for k in key:
        if k is Ellipsis:
            items.append(("e",))
            consumes.append(False)
        elif k is None:
            items.append(("n",))
            consumes.append(False)
        elif isinstance(k, slice):
            if k.step is not None and operator.index(k.step) == 0:
                raise ValueError("slice step cannot be zero")
            items.append(("s", _bound(k.start), _bound(k.stop), _bound(k.step)))
            consumes.append(True)
        elif isinstance(k, list):
            if k:
                raise SafetensorError("Non empty lists are not implemented")
            items.append(("s", 0, 0, None))  # the reference's reading of []: an empty range
            consumes.append(True)
        elif isinstance(k, bool) or type(k).__name__ == "bool_":
            raise SafetensorError("boolean indices are not supported (basic indexing only)")
        elif hasattr(k, "__index__"):
            items.append(("i", operator.index(k)))
            consumes.append(True)
        elif hasattr(k, "shape") or hasattr(k, "__len__"):
            raise SafetensorError("Non empty lists are not implemented")
        else:
            raise TypeError(f"invalid index {k!r}: only integers, slices, ..., None and [] are valid indices")
    if sum(1 for it in items if it[0] == "e") > 1:
        raise SliceIndexError("an index can only have a single ellipsis ('...')")
    ndim = len(shape)
    used = sum(consumes)
    if used > ndim:
        raise SliceIndexError(
            f"Error during slicing {_render(key)} with shape {list(shape)}: too many indices "
            f"({used}) for a tensor of {ndim} dimensions"
        )
    # Map each integer to its dimension (items after an Ellipsis count from the end) and check it.
    dim = 0
    for idx, (k, it) in enumerate(zip(key, items)):
        if it[0] == "e":
            dim = ndim - sum(consumes[idx + 1 :])
            continue
        if not consumes[idx]:
            continue
        if it[0] == "i":
            i, n = it[1], shape[dim]
            if i >= n:
                raise SliceIndexError(
                    f"Error during slicing {_render(key)} with shape {list(shape)}: "
                    f"index {i} out of bounds for tensor dimension #{dim} of size {n}"
                )
            if i < -n:
                raise SliceIndexError(f"Invalid index {i} for dimension {dim} of size {n}")
        dim += 1
    return items


class PySafeSlice:
    """A tensor not yet read: its shape and dtype, and numpy basic indexing that reads only what it needs."""

    def __init__(self, owner: "safe_open", name: str, code: str, shape: List[int], offset: int = 0, nbytes: int = 0):
        self._owner = owner
        self._name = name
        self._code = code
        self._shape = shape
        self._offset = offset
        self._nbytes = nbytes

    def get_shape(self) -> List[int]:
        return list(self._shape)

    def get_dtype(self) -> str:
        return self._code

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self._shape)

    @property
    def dtype(self) -> str:
        return self._code

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __getitem__(self, key: Any) -> Any:
        items = _slice_items(key, self._shape)
        maker = self._owner._maker
        if maker.views_slices and self._code != "F4" and all(it[0] != "s" or it[3] is None or it[3] > 0 for it in items):
            # A torch tensor over a mapped file: torch's own indexing of the tensor's view of the mapping,
            # as the reference does (zero-copy, copy-on-write, the mapping kept alive by the view). Negative
            # steps, which torch cannot view, and F4's packed last dimension are read as copies below.
            whole = maker.from_file(self._name, self._code, self._shape, self._offset, self._nbytes)
            if key is Ellipsis:
                return whole
            return maker.fw.index(whole, items)
        shape, data = self._owner._handle.read_slice(self._name, items)
        return maker.make(data, self._code, shape, 0, len(data))

    def __repr__(self) -> str:
        return f"PySafeSlice(name={self._name!r}, dtype={self._code!r}, shape={self._shape})"


class safe_open:  # noqa: N801 (the reference's name)
    """Opens a safetensors file for lazy, zero-copy access.

    ``safe_open(filename, framework, device="cpu", *, backend="mmap")``; framework is ``"np"``/``"numpy"``
    or ``"pt"``/``"torch"``/``"pytorch"``. Use it as a context manager; after it is closed every
    method raises SafetensorError("File is closed").
    """

    def __init__(self, filename: Any, framework: Any, device: Any = "cpu", *, backend: Any = "mmap"):
        fw = _framework(framework)
        _check_framework_device(fw, device)
        _check_backend(backend)
        path = _fspath(filename)
        self._filename = path
        self._handle = _safeweights._SafeFile.open(path, backend)
        self._framework = fw
        self._device = device
        self._maker = _TensorMaker(self._handle, fw, device)

    @classmethod
    def _from_handle(cls, handle: Any, framework: Any, device: Any = "cpu") -> safe_open:
        fw = _framework(framework)
        _check_framework_device(fw, device)
        self = cls.__new__(cls)
        self._filename = handle.name
        self._handle = handle
        self._framework = fw
        self._device = device
        self._maker = _TensorMaker(handle, self._framework, device)
        return self

    def __enter__(self) -> safe_open:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._handle.close()

    def keys(self) -> List[str]:
        """Tensor names, sorted."""
        return self._handle.keys()

    def offset_keys(self) -> List[str]:
        """Tensor names in the order of their bytes in the file."""
        return self._handle.offset_keys()

    def metadata(self) -> Optional[Dict[str, str]]:
        """The ``__metadata__`` dict, ``{}`` when present but empty, ``None`` when absent."""
        return self._handle.metadata()

    def __contains__(self, name: object) -> bool:
        try:
            return isinstance(name, str) and self._handle.contains(name)
        except ValueError:  # a str with no UTF-8 form (a lone surrogate) names no tensor
            return False

    def get_tensor(self, name: str) -> Any:
        if self._on_cuda():
            return self._load([name])[name]
        code, shape, offset, nbytes = self._handle.info(name)
        return self._maker.from_file(name, code, shape, offset, nbytes)

    def get_tensors(self) -> Dict[str, Any]:
        """Every tensor, in file order. On a CUDA device, in one load (one device allocation)."""
        if self._on_cuda():
            return self._load()
        make = self._maker.from_file
        return {name: make(name, code, shape, offset, nbytes) for name, code, shape, offset, nbytes in self._handle.infos()}

    def _on_cuda(self) -> bool:
        return self._maker.fw.loads_to_cuda and _load.is_cuda(self._device)

    def _load(self, names: Optional[List[str]] = None, shard: Any = None) -> Dict[str, Any]:
        """The named tensors (all, in the order of their bytes in the file, by default) loaded by the library's loader into one
        allocation on this file's device (torch only); `shard` = (dim, rank, world) loads this rank's part of
        every tensor split along dim (safeweights.torch.load_file)."""
        plan = self._handle.plan_load(names, _load.check_shard(shard))
        return _load.load_plan(plan, self._device)

    def get_slice(self, name: str) -> PySafeSlice:
        code, shape, offset, nbytes = self._handle.info(name)
        return PySafeSlice(self, name, code, shape, offset, nbytes)

    def get_raw(self, name: str) -> Any:
        """The tensor's bytes as stored (little-endian, C order): a read-only zero-copy memoryview when
        mapped, else bytes. Works for every dtype, including ones numpy or torch lack."""
        _, _, offset, nbytes = self._handle.info(name)
        buf = self._handle.buffer(writable=False)
        if buf is None:
            return bytes(self._handle.read(name))
        return memoryview(buf)[offset : offset + nbytes]

    def __repr__(self) -> str:
        state = "closed" if self._handle.closed else "open"
        return f"<safeweights.safe_open {self._filename!r} framework={self._framework} ({state})>"


def _safe_open_handle(f: Any, framework: Any, device: Any = "cpu", *, backend: Any = "mmap") -> safe_open:
    """The reference's helper: a safe_open over an open file object's path (``f.name``)."""
    return safe_open(f.name, framework, device, backend=backend)


def load_buffer(data: Any, framework: Any, device: Any = "cpu") -> Dict[str, Any]:
    """Every tensor of a safetensors file held in memory (``data``), in file order, as `framework` makes
    them: what each framework module's ``load`` returns."""
    handle = _safeweights._SafeFile.from_buffer(data)
    try:
        return safe_open._from_handle(handle, framework, device).get_tensors()
    finally:
        handle.close()
