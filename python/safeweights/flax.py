"""safetensors.flax: save, save_file, load, load_file for jax arrays.

Loading (``load_file``, ``safe_open(..., framework="flax")``) gives read-only on the jax side (jax arrays are immutable): a 64-byte aligned tensor is the mapping itself, any other a copy jax makes (docs/PYTHON.md).
Saving writes the reference's bytes: the tensors' bytes in C order, little-endian.
"""

from __future__ import annotations

import jax  # noqa: F401 (this module needs jax, as the reference's does)

from ._errors import SafetensorError
from ._frameworks import API, public_functions
from ._safe_open import safe_open
from ._safeweights import TensorSpec, deserialize, serialize, serialize_file

save, save_file, load, load_file = public_functions("flax")

__all__ = list(API)
