import os
from typing import Dict, Optional, Union

from jax import Array

from ._errors import SafetensorError as SafetensorError
from . import TensorSpec as TensorSpec
from . import deserialize as deserialize
from . import safe_open as safe_open
from . import serialize as serialize
from . import serialize_file as serialize_file

__all__ = [
    "save", "save_file", "load", "load_file", "SafetensorError", "TensorSpec", "deserialize", "safe_open", "serialize",
    "serialize_file",
]

def save(tensors: Dict[str, Array], metadata: Optional[Dict[str, str]] = None) -> bytes: ...
def save_file(
    tensors: Dict[str, Array], filename: Union[str, os.PathLike[str]], metadata: Optional[Dict[str, str]] = None
) -> None: ...
def load(data: bytes) -> Dict[str, Array]: ...
def load_file(filename: Union[str, os.PathLike[str]], *, backend: str = "mmap") -> Dict[str, Array]: ...
