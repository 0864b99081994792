"""Element types for numpy and torch, derived from the library's one dtype table."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, List, Sequence

from . import _safeweights
from ._errors import SafetensorError

if TYPE_CHECKING:
    import numpy as np

# code -> (bits, numpy name, torch name); the single source is the C++ table python/src/dtype_names.h
# (kPythonDtypeNames, over the safetensors codes of src/safetensors/dtypes.cpp).
TABLE = {code: (bits, np_name, pt_name) for code, bits, np_name, pt_name in _safeweights._dtype_table()}

# Types numpy has natively; the rest (bfloat16, float8_*) come from ml_dtypes when it is installed.
_NUMPY_NATIVE = {"BOOL", "U8", "I8", "I16", "U16", "F16", "I32", "U32", "F32", "C64", "F64", "I64", "U64"}


@functools.lru_cache(maxsize=None)
def numpy_dtype(code: str) -> np.dtype[Any]:
    """The numpy dtype for a safetensors dtype code, or a SafetensorError that says how to get it."""
    import numpy as np

    bits, np_name, _ = TABLE[code]
    if code in _NUMPY_NATIVE:
        return np.dtype(np_name)
    if bits < 8:
        raise SafetensorError(
            f"{code} tensors pack {8 // bits if bits == 4 else 'several'} elements per byte and cannot be viewed as a "
            f"numpy array; read them with framework='pt' (torch >= 2.8 for F4) or as raw bytes with "
            f"safeweights.safe_open(...).get_raw(name)"
        )
    try:
        import ml_dtypes  # noqa: PLC0415 (optional dependency)
    except ImportError:
        raise SafetensorError(
            f"{code} tensors need the ml_dtypes package to be numpy arrays (numpy has no {np_name}): "
            f"`pip install ml_dtypes`, or use framework='pt', or read the raw bytes with get_raw(name)"
        ) from None
    dt = getattr(ml_dtypes, np_name, None)
    if dt is None:
        raise SafetensorError(
            f"{code} needs ml_dtypes.{np_name}, which this ml_dtypes ({getattr(ml_dtypes, '__version__', '?')}) "
            f"lacks: upgrade it with `pip install -U ml_dtypes`"
        )
    return np.dtype(dt)


@functools.lru_cache(maxsize=None)
def torch_dtype(code: str) -> Any:
    """The torch dtype for a safetensors dtype code, or a SafetensorError naming the torch it needs."""
    import torch

    _, _, pt_name = TABLE[code]
    dt = getattr(torch, pt_name, None) if pt_name else None
    if not isinstance(dt, torch.dtype):
        raise SafetensorError(
            f"{code} tensors have no torch dtype in torch {torch.__version__}"
            + (f" (torch.{pt_name} needs a newer torch)" if pt_name else "")
            + "; read them with framework='np' or as raw bytes with get_raw(name)"
        )
    return dt


def torch_shape(code: str, shape: Sequence[int]) -> List[int]:
    """torch stores F4 two to a byte: its tensors have the last dimension halved."""
    if code == "F4" and shape:
        return [*shape[:-1], shape[-1] // 2]
    return list(shape)
