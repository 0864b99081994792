"""What every framework module's save / save_file share: metadata checks and the native write."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Union

from . import _safeweights

if TYPE_CHECKING:
    import os

    from ._frameworks import Flattened


def check_metadata(metadata: Any) -> Optional[Dict[str, str]]:
    if metadata is not None and (
        not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
    ):
        raise TypeError("metadata must be a Dict[str, str]")
    return metadata


def write(flattened: Flattened, metadata: Any, filename: Union[str, "os.PathLike[str]", None] = None) -> Any:
    """Serializes ``(specs, keep)`` from a module's _flatten: to bytes, or atomically to ``filename``.

    ``keep`` holds the arrays / tensors the specs point into; it is referenced here until the native
    call (which reads the memory without the GIL) has returned.
    """
    specs, keep = flattened
    metadata = check_metadata(metadata)
    if filename is None:
        out = _safeweights.serialize(specs, metadata)
    else:
        out = _safeweights.serialize_file(specs, filename, metadata)
    del keep
    return out
