"""safetensors.tensorflow: save, save_file, load, load_file for TensorFlow tensors.

Loading (``load_file``, ``safe_open(..., framework="tf")``) gives tensors that view the file's copy-on-write mapping through DLPack (bf16 and float8 bitcast in place); no copy.
Saving writes the reference's bytes: the tensors' bytes in C order, little-endian.
"""

from __future__ import annotations

import tensorflow  # noqa: F401 (this module needs TensorFlow, as the reference's does)

from ._errors import SafetensorError
from ._frameworks import API, public_functions
from ._safe_open import safe_open
from ._safeweights import TensorSpec, deserialize, serialize, serialize_file

save, save_file, load, load_file = public_functions("tf")

__all__ = list(API)
