import os
from typing import Dict, Optional, Union

import numpy as np

from ._errors import SafetensorError as SafetensorError

__all__ = ["save", "save_file", "load", "load_file", "SafetensorError"]

def save(tensor_dict: Dict[str, np.ndarray], metadata: Optional[Dict[str, str]] = None) -> bytes: ...
def save_file(
    tensor_dict: Dict[str, np.ndarray], filename: Union[str, os.PathLike[str]], metadata: Optional[Dict[str, str]] = None
) -> None: ...
def load(data: bytes) -> Dict[str, np.ndarray]: ...
def load_file(filename: Union[str, os.PathLike[str]], *, backend: str = "mmap") -> Dict[str, np.ndarray]: ...
