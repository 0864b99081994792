from os import PathLike
from typing import Any, Dict, List, Optional, Union

_Path = Union[str, bytes, PathLike]

def detect_format(path: _Path) -> str: ...
def validate(path: _Path, *, strict: bool = ..., crc: bool = ..., detect: bool = ...) -> str: ...
def inspect(path: _Path, entry: Optional[str] = ...) -> Dict[str, Any]: ...
def convert(
    input: _Path,
    output: _Path,
    *,
    type: Optional[str] = ...,
    to: Optional[str] = ...,
    entry: Optional[str] = ...,
    threads: int = ...,
    dedup: bool = ...,
    durable: bool = ...,
    carry_metadata: bool = ...,
    split_max_bytes: int = ...,
    split_max_tensors: int = ...,
    allow_unknown: bool = ...,
    key: Optional[str] = ...,
    llama_version: Optional[str] = ...,
    max_position_embeddings: int = ...,
    instruct: bool = ...,
    output_tensor_type: Optional[str] = ...,
    token_embedding_type: Optional[str] = ...,
    tensor_types: Optional[Any] = ...,
    tensor_type_file: Optional[Union[_Path, List[_Path]]] = ...,
    pure: bool = ...,
    leave_output_tensor: bool = ...,
    allow_requantize: bool = ...,
    imatrix: Optional[_Path] = ...,
    include_weights: Optional[List[str]] = ...,
    exclude_weights: Optional[List[str]] = ...,
    override_kv: Optional[List[str]] = ...,
    prune_layers: Optional[List[int]] = ...,
    dry_run: bool = ...,
    keep_split: bool = ...,
) -> Dict[str, Any]: ...
