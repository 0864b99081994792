"""huggingface_hub's DDUF functions, strict and zero-copy.

``read_dduf_file`` checks the archive with safeweights' strict ZIP64 reader (one end record, entries
tiling the file, local and central headers agreeing, no compression, no encryption, ...) and then the
hub's DDUF rules, in the hub's order and with its messages. ``DDUFEntry.as_mmap()`` yields the entry's
bytes as ``bytes``, as the hub's does (a copy; the reference ``safetensors.torch.load`` takes nothing else);
``DDUFEntry.as_memoryview()`` yields a read-only ``memoryview`` of the entry inside one shared mapping of
the archive, and ``load_safetensors(entry)`` opens a ``.safetensors`` entry in place, its tensors views
of the archive: both zero-copy.

``export_entries_as_dduf`` / ``export_folder_as_dduf`` check every name (and ``model_index.json``) before
writing the entry, write to a temporary file and rename it into place only when the whole archive is
valid: on any error no file is left behind (the hub leaves a partial archive). By default the data of
``.safetensors`` entries starts on a 4096-byte boundary (padding in a ZIP extra field, readable by every
ZIP reader); ``reference_layout=True`` writes the hub's exact bytes instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Dict, Generator, Iterable, Tuple, Union

from . import _safeweights
from ._errors import (
    DDUFBadZipFileError,
    DDUFCorruptedFileError,
    DDUFError,
    DDUFExportError,
    DDUFInvalidEntryNameError,
)
from ._safe_open import safe_open

DDUF_ALLOWED_ENTRIES = {".json", ".model", ".safetensors", ".txt"}
DDUF_FOLDER_REQUIRED_ENTRIES = {
    "config.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
    "scheduler_config.json",
}


@dataclasses.dataclass
class DDUFEntry:
    """An entry of a DDUF file: its name, and where its bytes are (``offset``, ``length``) in ``dduf_path``."""

    filename: str
    length: int
    offset: int
    dduf_path: Union[Path, str] = dataclasses.field(repr=False)  # a URL stays a str
    # The archive this entry was read from (shared by all entries of one read_dduf_file call).
    _archive: Any = dataclasses.field(default=None, repr=False, compare=False)

    def __post_init__(self):
        # A URL stays a string (Path would fold its "//").
        if not isinstance(self.dduf_path, Path) and not _is_url(self.dduf_path):
            self.dduf_path = Path(self.dduf_path)

    def _source(self):
        if self._archive is None:
            # Built by hand (not by read_dduf_file): map a local file as a plain byte range; a URL is
            # opened (and checked) as an archive.
            if _is_url(self.dduf_path):
                self._archive = _Archive(_safeweights._DDUFArchive.open(self.dduf_path))
            else:
                self._archive = _RawFile(self.dduf_path)
        return self._archive

    @contextlib.contextmanager
    def as_mmap(self) -> Generator[bytes, None, None]:
        """The entry's bytes as ``bytes``, what the hub's ``as_mmap`` yields (a slice of its ``mmap.mmap``),
        so that it goes wherever the hub's goes: the reference ``safetensors.torch.load`` takes only
        ``bytes``. A copy; ``as_memoryview()`` is the zero-copy form."""
        yield bytes(self._source().view(self.offset, self.length, self.filename))

    @contextlib.contextmanager
    def as_memoryview(self) -> Generator[memoryview, None, None]:
        """A read-only, zero-copy ``memoryview`` of the entry's bytes inside the archive's one mapping
        (compares equal to bytes; safeweights' ``load`` functions take it as it is)."""
        yield self._source().view(self.offset, self.length, self.filename)

    def read_text(self, encoding: str = "utf-8") -> str:
        """The entry's bytes decoded as text."""
        return bytes(self._source().view(self.offset, self.length, self.filename)).decode(encoding)


def _is_url(path) -> bool:
    return isinstance(path, str) and _safeweights._is_remote(path)


class _RawFile:
    """A mapped file for DDUFEntry objects built by hand; ranges are checked against its size."""

    def __init__(self, path):
        self._handle = None
        self._path = os.fspath(path)
        with open(self._path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                self._view = memoryview(b"")
            else:
                import mmap  # noqa: PLC0415

                self._view = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))

    def view(self, offset, length, name):
        if offset < 0 or length < 0 or offset + length > len(self._view):
            raise DDUFCorruptedFileError(
                f"entry {name!r} ({length} bytes at offset {offset}) runs past the end of {self._path} "
                f"({len(self._view)} bytes)"
            )
        return self._view[offset : offset + length]


class _Archive:
    """An archive opened by read_dduf_file: one mapping (or HTTP source) shared by its entries."""

    def __init__(self, native):
        self.native = native
        buf = native.buffer(writable=False)
        self._view = memoryview(buf) if buf is not None else None

    def view(self, offset, length, name):
        if self._view is None:
            return memoryview(self.native.read(offset, length))
        return self._view[offset : offset + length]


def read_dduf_file(dduf_path: Union[os.PathLike, str]) -> Dict[str, DDUFEntry]:
    """Reads and checks a DDUF file; returns its entries by name, in archive order.

    ``dduf_path`` may be an ``http://`` or ``https://`` URL: only the end records and the central
    directory are fetched (Range requests), and each entry's bytes when they are read.

    Raises DDUFCorruptedFileError (DDUFBadZipFileError, also a zipfile.BadZipFile, for ZIP-level
    faults) naming the rule, the entry and the byte offset; FileNotFoundError when there is no file.
    """
    path = os.fspath(dduf_path)
    native = _safeweights._DDUFArchive.open(path)
    archive = _Archive(native)
    dduf_path_obj = path if _is_url(path) else Path(path)
    return {
        name: DDUFEntry(filename=name, length=length, offset=offset, dduf_path=dduf_path_obj, _archive=archive)
        for name, offset, length in native.entries()
    }


def verify_dduf_file(dduf_path: Union[os.PathLike, str], *, crc: bool = True, contents: bool = True) -> None:
    """Deep checks beyond read_dduf_file: every entry's CRC-32, every .safetensors entry against the
    safetensors rules, every .json entry parses. Raises DDUFCorruptedFileError on the first failure."""
    _safeweights._DDUFArchive.open(os.fspath(dduf_path)).verify(crc=crc, contents=contents)


def load_safetensors(entry: DDUFEntry, framework: str = "np", device="cpu") -> Dict[str, Any]:
    """The tensors of a ``.safetensors`` entry, zero-copy views of the archive, in file order."""
    with open_safetensors(entry, framework, device) as f:
        return f.get_tensors()


def open_safetensors(entry: DDUFEntry, framework: str = "np", device="cpu") -> safe_open:
    """A ``safe_open`` handle over a ``.safetensors`` entry (keys, metadata, get_slice, ...), zero-copy."""
    archive = entry._archive if isinstance(entry._archive, _Archive) else None
    if archive is None:
        archive = _Archive(_safeweights._DDUFArchive.open(str(entry.dduf_path)))
    handle = archive.native.open_safetensors(entry.filename)
    return safe_open._from_handle(handle, framework, device)


def _validate_dduf_entry_name(entry_name: str) -> str:
    ok, result = _safeweights._validate_entry_name(entry_name)
    if not ok:
        raise DDUFInvalidEntryNameError(result)
    return result


def _validate_dduf_structure(index: Any, entry_names: Iterable[str]) -> None:
    if not isinstance(index, dict):
        raise DDUFCorruptedFileError(f"Invalid 'model_index.json' content. Must be a dictionary. Got {type(index)}.")
    _safeweights._validate_structure(json.dumps(index), list(entry_names))


def _content_kind(filename: str, content) -> Tuple[str, Any]:
    if isinstance(content, (str, os.PathLike)):
        return "file", os.fspath(content)
    if isinstance(content, (bytes, bytearray, memoryview)):
        return "bytes", content
    raise DDUFExportError(f"Invalid content type for {filename}. Must be str, Path or bytes.")


def export_entries_as_dduf(
    dduf_path: Union[str, os.PathLike],
    entries: Iterable[Tuple[str, Union[str, Path, bytes]]],
    *,
    alignment: int = 4096,
    reference_layout: bool = False,
) -> None:
    """Writes a DDUF file from ``(name, content)`` pairs, taken from the iterable one at a time; content
    is a file path (str or PathLike) or bytes-like. Entries are written in the given order.

    Raises DDUFExportError (DDUFInvalidEntryNameError as its ``__cause__`` for bad names) before
    anything reaches the target path; the target is replaced only when the export succeeds.
    """
    exporter = _safeweights._DDUFExporter.create(dduf_path, alignment, reference_layout)
    try:
        for filename, content in entries:
            kind, value = _content_kind(filename, content)
            if kind == "file":
                exporter.add_file(filename, value)
            else:
                exporter.add_bytes(filename, value)
        exporter.finish()
    except BaseException:
        exporter.abort()
        raise


def export_folder_as_dduf(
    dduf_path: Union[str, os.PathLike],
    folder_path: Union[str, os.PathLike],
    *,
    alignment: int = 4096,
    reference_layout: bool = False,
) -> None:
    """Packs a diffusers folder: files with an allowed extension (.json, .model, .safetensors, .txt) at
    most one folder deep, ``model_index.json`` first and the rest sorted, so the output is deterministic."""
    _safeweights._pack_folder(folder_path, dduf_path, alignment, reference_layout)


__all__ = [
    "DDUFEntry",
    "DDUFError",
    "DDUFCorruptedFileError",
    "DDUFBadZipFileError",
    "DDUFExportError",
    "DDUFInvalidEntryNameError",
    "read_dduf_file",
    "verify_dduf_file",
    "export_entries_as_dduf",
    "export_folder_as_dduf",
    "load_safetensors",
    "open_safetensors",
]
