"""safetensors.paddle: save, save_file, load, load_file for PaddlePaddle tensors.

Loading (``load_file``, ``safe_open(..., framework="paddle")``) gives tensors that view the file's copy-on-write mapping (paddle's frombuffer): writable, a write stays private; no copy.
Saving writes the reference's bytes: the tensors' bytes in C order, little-endian.
"""

from __future__ import annotations

import os
from typing import Dict, Optional, Union

import paddle

from ._errors import SafetensorError
from ._frameworks import flatten as _flatten
from ._safe_open import load_buffer as _load_buffer
from ._safe_open import safe_open
from ._safeweights import TensorSpec, deserialize, serialize, serialize_file
from ._write import write

_FRAMEWORK = "paddle"


def save(tensors: Dict[str, paddle.Tensor], metadata: Optional[Dict[str, str]] = None) -> bytes:
    """The safetensors file for these tensors, as bytes."""
    return write(_flatten(tensors, _FRAMEWORK), metadata)


def save_file(
    tensors: Dict[str, paddle.Tensor],
    filename: Union[str, os.PathLike],
    metadata: Optional[Dict[str, str]] = None,
) -> None:
    """Writes the tensors to ``filename`` atomically (a temporary file renamed into place)."""
    write(_flatten(tensors, _FRAMEWORK), metadata, filename)


def load(data: bytes, device: str = "cpu") -> Dict[str, paddle.Tensor]:
    """The tensors of a safetensors file held in memory, in file order."""
    return _load_buffer(data, _FRAMEWORK, device)


def load_file(filename: Union[str, os.PathLike], device="cpu", *, backend: str = "mmap") -> Dict[str, paddle.Tensor]:
    """Every tensor of the file, in file order."""
    with safe_open(filename, framework=_FRAMEWORK, device=device, backend=backend) as f:
        return f.get_tensors()


__all__ = [
    "save", "save_file", "load", "load_file", "SafetensorError", "TensorSpec", "deserialize", "safe_open", "serialize",
    "serialize_file",
]
