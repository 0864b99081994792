import dataclasses
import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Dict, Iterable, Set, Tuple, Union

from ._errors import DDUFBadZipFileError as DDUFBadZipFileError
from ._errors import DDUFCorruptedFileError as DDUFCorruptedFileError
from ._errors import DDUFError as DDUFError
from ._errors import DDUFExportError as DDUFExportError
from ._errors import DDUFInvalidEntryNameError as DDUFInvalidEntryNameError
from . import safe_open

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

DDUF_ALLOWED_ENTRIES: Set[str]
DDUF_FOLDER_REQUIRED_ENTRIES: Set[str]

@dataclasses.dataclass
class DDUFEntry:
    filename: str
    length: int
    offset: int
    dduf_path: Path
    _archive: Any = ...
    def __post_init__(self) -> None: ...
    def as_mmap(self) -> AbstractContextManager[bytes]: ...
    def as_memoryview(self) -> AbstractContextManager[memoryview]: ...
    def read_text(self, encoding: str = "utf-8") -> str: ...

def read_dduf_file(dduf_path: Union[os.PathLike[str], str]) -> Dict[str, DDUFEntry]: ...
def verify_dduf_file(dduf_path: Union[os.PathLike[str], str], *, crc: bool = True, contents: bool = True) -> None: ...
def load_safetensors(entry: DDUFEntry, framework: str = "np", device: Any = "cpu") -> Dict[str, Any]: ...
def open_safetensors(entry: DDUFEntry, framework: str = "np", device: Any = "cpu") -> safe_open: ...
def export_entries_as_dduf(
    dduf_path: Union[str, os.PathLike[str]],
    entries: Iterable[Tuple[str, Union[str, os.PathLike[str], bytes, bytearray, memoryview]]],
    *,
    alignment: int = 4096,
    reference_layout: bool = False,
) -> None: ...
def export_folder_as_dduf(
    dduf_path: Union[str, os.PathLike[str]],
    folder_path: Union[str, os.PathLike[str]],
    *,
    alignment: int = 4096,
    reference_layout: bool = False,
) -> None: ...
