"""The exception classes of safeweights, shared by every module.

Every exception raised for a bad file carries, besides its message, the library's stable error kind
and where the problem is: ``kind`` (e.g. ``"InvalidOffset"``), ``file``, ``entry`` (DDUF entry),
``tensor`` and ``offset`` (byte offset), each ``None`` when not known.

The DDUF classes derive from huggingface_hub's when that package is installed, so ``except`` clauses
written for the hub keep working after switching the import.
"""

from __future__ import annotations

import zipfile

from . import _safeweights


class SafetensorError(Exception):
    """A safetensors file breaks a rule, or an operation on one fails."""

    kind: str | None = None
    file: str | None = None
    entry: str | None = None
    tensor: str | None = None
    offset: int | None = None


class SliceIndexError(SafetensorError, IndexError):
    """An integer index outside its dimension in ``get_slice(...)[...]`` (also an IndexError)."""


def _hub_bases():
    try:
        from huggingface_hub import errors as hub  # noqa: PLC0415 (optional dependency)
    except Exception:  # not installed, or an old version without the DDUF errors
        return None
    names = ("DDUFError", "DDUFCorruptedFileError", "DDUFExportError", "DDUFInvalidEntryNameError")
    if not all(hasattr(hub, n) for n in names):
        return None
    return hub


_hub = _hub_bases()

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


class DDUFBadZipFileError(DDUFCorruptedFileError, zipfile.BadZipFile):
    """The ZIP structure of a DDUF file is malformed (also a zipfile.BadZipFile)."""


for _cls in (SafetensorError, SliceIndexError, DDUFError, DDUFCorruptedFileError, DDUFExportError,
             DDUFInvalidEntryNameError, DDUFBadZipFileError):
    for _attr in ("kind", "file", "entry", "tensor", "offset"):
        if not hasattr(_cls, _attr):
            setattr(_cls, _attr, None)

_safeweights._set_error_classes(
    safetensor=SafetensorError,
    dduf_corrupted=DDUFCorruptedFileError,
    dduf_bad_zip=DDUFBadZipFileError,
    dduf_export=DDUFExportError,
    dduf_invalid_name=DDUFInvalidEntryNameError,
)
