import datetime
import os
from typing import Any, Dict, List, Optional, Set, Tuple, Union

from ._errors import SafetensorError as SafetensorError
from . import TensorSpec as TensorSpec
from . import deserialize as deserialize
from . import safe_open as safe_open
from . import serialize as serialize
from . import serialize_file as serialize_file

import torch

__all__ = [
    "save", "save_file", "load", "load_file", "load_tensors", "save_model", "load_model", "storage_ptr", "storage_size",
    "SafetensorError", "TensorSpec", "deserialize", "safe_open", "serialize", "serialize_file",
]

def save(tensors: Dict[str, torch.Tensor], metadata: Optional[Dict[str, str]] = None) -> bytes: ...
def save_file(
    tensors: Dict[str, torch.Tensor], filename: Union[str, os.PathLike[str]], metadata: Optional[Dict[str, str]] = None
) -> None: ...
def load(data: bytes) -> Dict[str, torch.Tensor]: ...
def load_file(
    filename: Union[str, os.PathLike[str]],
    device: Union[str, int, torch.device] = "cpu",
    *,
    backend: str = "mmap",
    shard: Optional[Tuple[int, int, int]] = None,
    process_group: Optional[Any] = None,
    timeout: Optional[Union[float, datetime.timedelta]] = None,
) -> Dict[str, torch.Tensor]: ...
def load_tensors(
    filename: Union[str, os.PathLike[str]],
    device: Union[str, int, torch.device] = "cpu",
    *,
    shard: Optional[Tuple[int, int, int]] = None,
    allow_unknown: bool = False,
    key: Optional[str] = None,
    process_group: Optional[Any] = None,
    timeout: Optional[Union[float, datetime.timedelta]] = None,
) -> Dict[str, torch.Tensor]: ...
def save_model(
    model: torch.nn.Module, filename: str, metadata: Optional[Dict[str, str]] = None, force_contiguous: bool = True
) -> None: ...
def load_model(
    model: torch.nn.Module,
    filename: Union[str, os.PathLike[str]],
    strict: bool = True,
    device: Union[str, int, torch.device] = "cpu",
    *,
    backend: str = "mmap",
) -> Tuple[Set[str], List[str]]: ...
def storage_ptr(tensor: torch.Tensor) -> int: ...
def storage_size(tensor: torch.Tensor) -> int: ...
def _find_shared_tensors(state_dict: Dict[str, torch.Tensor]) -> List[Set[str]]: ...
def _remove_duplicate_names(
    state_dict: Dict[str, torch.Tensor],
    *,
    preferred_names: Optional[List[str]] = None,
    discard_names: Optional[List[str]] = None,
) -> Dict[str, List[str]]: ...
