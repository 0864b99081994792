"""safetensors.mlx: save, save_file, load, load_file for MLX arrays.

Loading (``load_file``, ``safe_open(..., framework="mlx")``) gives copies: mx.array copies whatever it is given (MLX imports no foreign memory).
Saving writes the reference's bytes: the tensors' bytes in C order, little-endian.
"""

from __future__ import annotations

import mlx.core  # noqa: F401 (this module needs MLX, as the reference's does)

from ._errors import SafetensorError
from ._frameworks import API, public_functions
from ._safe_open import safe_open
from ._safeweights import TensorSpec, deserialize, serialize, serialize_file

save, save_file, load, load_file = public_functions("mlx")

__all__ = list(API)
