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
from typing import Any, Dict, Optional, Union

import numpy as np

from ._dtypes import _NUMPY_NATIVE, numpy_dtype
from ._errors import SafetensorError
from ._frameworks import API, FRAMEWORKS
from ._safe_open import load_buffer as _load_buffer
from ._safe_open import safe_open
from ._safeweights import TensorSpec, deserialize, serialize, serialize_file
from ._write import write

# The reference module's name for its save path: TensorSpecs for the arrays, and what they point into.
_flatten = FRAMEWORKS["np"].flatten

# The reference module's table of numpy types by safetensors code: numpy's own types (bool as Python's).
_TYPES: Dict[str, Any] = {code: bool if code == "BOOL" else numpy_dtype(code).type for code in _NUMPY_NATIVE}


def _getdtype(dtype_str: str) -> Any:
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


__all__ = list(API)
