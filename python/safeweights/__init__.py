"""safeweights: safe, zero-copy safetensors and DDUF for Python.

A drop-in for the ``safetensors`` package (``safe_open``, the low-level ``serialize`` /
``serialize_file`` / ``deserialize`` / ``TensorSpec``, and the ``safeweights.numpy`` and
``safeweights.torch`` modules) and for huggingface_hub's DDUF functions (``safeweights.dduf``), built on
the safeweights C++ library: stricter validation, zero-copy reads, the GIL released during I/O. Every
format the library reads (safetensors and its index, DDUF, GGUF, PyTorch checkpoints) is also reached
through ``detect_format`` / ``validate`` / ``inspect`` (``safeweights.formats``).
"""

from . import _errors, _safeweights
from ._errors import (
    DDUFCorruptedFileError,
    DDUFError,
    DDUFExportError,
    DDUFInvalidEntryNameError,
    EnvironmentFaultError,
    SafetensorError,
    SliceIndexError,
)
from ._safe_open import PySafeSlice, _safe_open_handle, safe_open
from ._safeweights import TensorSpec, deserialize, serialize, serialize_file
from .formats import convert, detect_format, inspect, validate

__version__ = _safeweights.__version__


def __getattr__(name):
    # DDUFBadZipFileError is created on first use (see _errors.py): importing zipfile for it would
    # cost more than the rest of `import safeweights`.
    if name == "DDUFBadZipFileError":
        return _errors.DDUFBadZipFileError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "DDUFBadZipFileError",
    "DDUFCorruptedFileError",
    "DDUFError",
    "DDUFExportError",
    "DDUFInvalidEntryNameError",
    "EnvironmentFaultError",
    "PySafeSlice",
    "SafetensorError",
    "SliceIndexError",
    "TensorSpec",
    "__version__",
    "_safe_open_handle",
    "convert",
    "deserialize",
    "detect_format",
    "inspect",
    "safe_open",
    "serialize",
    "serialize_file",
    "validate",
]
