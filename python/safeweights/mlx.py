"""safetensors.mlx: save, save_file, load, load_file for MLX arrays.

Loading (``load_file``, ``safe_open(..., framework="mlx")``) gives copies: mx.array copies whatever it is given (MLX imports no foreign memory).
Saving writes the reference's bytes: the tensors' bytes in C order, little-endian.
"""

from __future__ import annotations

import os
from typing import Dict, Optional, Union

import mlx.core as mx

from ._errors import SafetensorError
from ._frameworks import flatten as _flatten
from ._safe_open import load_buffer as _load_buffer
from ._safe_open import safe_open
from ._safeweights import TensorSpec, deserialize, serialize, serialize_file
from ._write import write

_FRAMEWORK = "mlx"


def save(tensors: Dict[str, mx.array], metadata: Optional[Dict[str, str]] = None) -> bytes:
    """The safetensors file for these tensors, as bytes."""
    return write(_flatten(tensors, _FRAMEWORK), metadata)


def save_file(
    tensors: Dict[str, mx.array],
    filename: Union[str, os.PathLike],
    metadata: Optional[Dict[str, str]] = None,
) -> None:
    """Writes the tensors to ``filename`` atomically (a temporary file renamed into place)."""
    write(_flatten(tensors, _FRAMEWORK), metadata, filename)


def load(data: bytes) -> Dict[str, mx.array]:
    """The tensors of a safetensors file held in memory, in file order."""
    return _load_buffer(data, _FRAMEWORK)


def load_file(filename: Union[str, os.PathLike], *, backend: str = "mmap") -> Dict[str, mx.array]:
    """Every tensor of the file, in file order."""
    with safe_open(filename, framework=_FRAMEWORK, backend=backend) as f:
        return f.get_tensors()


__all__ = [
    "save", "save_file", "load", "load_file", "SafetensorError", "TensorSpec", "deserialize", "safe_open", "serialize",
    "serialize_file",
]
