"""safetensors.numpy, zero-copy: save, save_file, load, load_file.

Saving writes arrays in C order whatever their memory layout (a Fortran-ordered or strided array is
copied to C order first; the reference 0.8 writes such arrays in memory order, silently scrambling
them) and in little-endian byte order. Files are byte-identical to the reference's.

Loading returns read-only arrays that view the file's mapping (``load_file``) or the given bytes
(``load``); call ``.copy()`` on an array for a writable one, or pass ``backend="pread"`` to
``load_file`` to read into fresh writable memory.
"""

from __future__ import annotations

import os
import sys
import weakref
from typing import Dict, Optional, Union

import numpy as np

from . import _safeweights
from ._safe_open import load_buffer as _load_buffer
from ._safe_open import safe_open
from ._safeweights import TensorSpec, deserialize, serialize, serialize_file
from ._write import write
from ._errors import SafetensorError

# The reference module's table of numpy types by safetensors code (numpy's own types only).
_TYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "U64": np.uint64, "I32": np.int32,
    "U32": np.uint32, "I16": np.int16, "U16": np.uint16, "I8": np.int8, "U8": np.uint8, "BOOL": bool,
    "C64": np.complex64,
}


def _getdtype(dtype_str: str):
    """The numpy type of a safetensors code from ``_TYPES`` (KeyError for any other, as the reference)."""
    return _TYPES[dtype_str]


def _view2np(safeview) -> Dict[str, np.ndarray]:
    """Arrays from ``deserialize``'s ``[(name, {"dtype", "shape", "data"})]``, viewing each ``data``."""
    return {name: np.frombuffer(info["data"], dtype=_getdtype(info["dtype"])).reshape(info["shape"]) for name, info in safeview}


def _is_little_endian(tensor: np.ndarray) -> bool:
    """Whether the array's elements are stored little-endian (or have no byte order)."""
    order = tensor.dtype.byteorder
    if order == "=":
        return sys.byteorder == "little"
    if order in "|<>":
        return order != ">"
    raise ValueError(f"Unexpected byte order {order}")


def _flatten(tensor_dict: Dict[str, np.ndarray], to_numpy=None):
    """TensorSpecs for the arrays, and the arrays (C-contiguous, little-endian) that must stay alive.

    ``to_numpy`` (the other frameworks' modules, _frameworks.py) turns each value into ``(array, dtype
    name, shape, owner)``: the array holds its bytes, named by the table's numpy name, and ``owner`` is
    held with it until the write returns."""
    if not isinstance(tensor_dict, dict):
        kind = "np.ndarray" if to_numpy is None else "tensor"
        raise ValueError(f"Expected a dict of [str, {kind}] but received {type(tensor_dict)}")
    specs, keep = {}, []
    for name, value in tensor_dict.items():
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, got {type(name).__name__}")
        if to_numpy is None:
            arr = np.asarray(value)
            dtype, shape, owner = arr.dtype.name, arr.shape, None
        else:
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


def save(tensor_dict: Dict[str, np.ndarray], metadata: Optional[Dict[str, str]] = None) -> bytes:
    """The safetensors file for these arrays, as bytes."""
    return write(_flatten(tensor_dict), metadata)


def save_file(
    tensor_dict: Dict[str, np.ndarray],
    filename: Union[str, os.PathLike],
    metadata: Optional[Dict[str, str]] = None,
) -> None:
    """Writes the arrays to ``filename`` atomically (a temporary file renamed into place)."""
    write(_flatten(tensor_dict), metadata, filename)


def load(data: bytes) -> Dict[str, np.ndarray]:
    """The arrays of a safetensors file held in memory: read-only views of ``data``, in file order."""
    return _load_buffer(data, "np")


def load_file(filename: Union[str, os.PathLike], *, backend: str = "mmap") -> Dict[str, np.ndarray]:
    """Every array of the file, in file order: read-only views of the mapping (``backend="mmap"``) or
    writable copies (``backend="pread"``)."""
    with safe_open(filename, framework="np", backend=backend) as f:
        return f.get_tensors()


__all__ = [
    "save", "save_file", "load", "load_file", "SafetensorError", "TensorSpec", "deserialize", "safe_open", "serialize",
    "serialize_file",
]
