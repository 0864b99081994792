"""The exception classes of safeweights, shared by every module.

Every exception raised for a bad file carries, besides its message, the library's stable error kind
and where the problem is: ``kind`` (e.g. ``"InvalidOffset"``), ``rule`` (the exact rule broken, for a kind
that covers several, e.g. ``"gguf.truncated"``), ``file``, ``entry`` (DDUF entry), ``tensor`` and
``offset`` (byte offset), each ``None`` when not known.

The DDUF classes derive from huggingface_hub's when that package is installed, so ``except`` clauses
written for the hub keep working after switching the import.

``DDUFBadZipFileError`` also derives from ``zipfile.BadZipFile``. It is created on first use (attribute
access, or the first ZIP-level error the extension raises): importing ``zipfile`` costs more than the
rest of ``import safeweights``, and only DDUF callers ever need it.
"""

from __future__ import annotations

import functools
from typing import Any

from . import _safeweights


class SafetensorError(Exception):
    """A safetensors file breaks a rule, or an operation on one fails."""

    kind: str | None = None
    rule: str | None = None
    file: str | None = None
    entry: str | None = None
    tensor: str | None = None
    offset: int | None = None


class SliceIndexError(SafetensorError, IndexError):
    """An integer index outside its dimension in ``get_slice(...)[...]`` (also an IndexError)."""


class EnvironmentFaultError(SafetensorError, OSError):
    """The environment cannot serve the request: credentials or configuration missing or unusable
    (kind ``EnvironmentFault``; no AWS credentials for an ``s3://`` name, say). Also an OSError, as the
    network's and the disk's failures are: the file is not at fault, and the call may succeed elsewhere."""


def _hub_bases() -> Any:
    try:
        from huggingface_hub import errors as hub  # noqa: PLC0415 (optional dependency)
    except Exception:  # not installed, or an old version without the DDUF errors
        return None
    names = ("DDUFError", "DDUFCorruptedFileError", "DDUFExportError", "DDUFInvalidEntryNameError")
    if not all(hasattr(hub, n) for n in names):
        return None
    return hub


_hub: Any = _hub_bases()  # huggingface_hub.errors, or None

if _hub is None:

    class DDUFError(Exception):
        """Base class for DDUF errors."""

    class DDUFCorruptedFileError(DDUFError):
        """The DDUF file is corrupted or breaks a DDUF rule."""

    class DDUFExportError(DDUFError):
        """A DDUF file cannot be written from these entries."""

    class DDUFInvalidEntryNameError(DDUFExportError):
        """An entry name breaks the DDUF naming rules."""

else:

    class DDUFError(_hub.DDUFError):  # type: ignore[no-redef]
        """Base class for DDUF errors."""

    class DDUFCorruptedFileError(DDUFError, _hub.DDUFCorruptedFileError):  # type: ignore[no-redef]
        """The DDUF file is corrupted or breaks a DDUF rule."""

    class DDUFExportError(DDUFError, _hub.DDUFExportError):  # type: ignore[no-redef]
        """A DDUF file cannot be written from these entries."""

    class DDUFInvalidEntryNameError(DDUFExportError, _hub.DDUFInvalidEntryNameError):  # type: ignore[no-redef]
        """An entry name breaks the DDUF naming rules."""


def _default_context(cls: type) -> None:
    for attr in ("kind", "rule", "file", "entry", "tensor", "offset"):
        if not hasattr(cls, attr):
            setattr(cls, attr, None)


@functools.lru_cache(maxsize=None)
def _bad_zip_class() -> type:
    import zipfile  # noqa: PLC0415 (lazy, see the module docstring)

    class DDUFBadZipFileError(DDUFCorruptedFileError, zipfile.BadZipFile):
        """The ZIP structure of a DDUF file is malformed (also a zipfile.BadZipFile)."""

    DDUFBadZipFileError.__module__ = __name__
    DDUFBadZipFileError.__qualname__ = "DDUFBadZipFileError"  # pickle finds it through __getattr__
    _default_context(DDUFBadZipFileError)
    return DDUFBadZipFileError


def _make_bad_zip_error(message: str) -> Exception:
    """What the extension calls in place of the class: an instance of DDUFBadZipFileError."""
    return _bad_zip_class()(message)


def __getattr__(name: str) -> type:
    if name == "DDUFBadZipFileError":
        return _bad_zip_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


for _cls in (SafetensorError, SliceIndexError, EnvironmentFaultError, DDUFError, DDUFCorruptedFileError, DDUFExportError,
             DDUFInvalidEntryNameError):
    _default_context(_cls)

_safeweights._set_error_classes(
    safetensor=SafetensorError,
    dduf_corrupted=DDUFCorruptedFileError,
    dduf_bad_zip=_make_bad_zip_error,
    dduf_export=DDUFExportError,
    dduf_invalid_name=DDUFInvalidEntryNameError,
    environment_fault=EnvironmentFaultError,
)
