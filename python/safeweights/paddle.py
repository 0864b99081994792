"""safetensors.paddle: save, save_file, load, load_file for PaddlePaddle tensors.

Loading (``load_file``, ``safe_open(..., framework="paddle")``) gives tensors that view the file's copy-on-write mapping (paddle's frombuffer): writable, a write stays private; no copy.
Saving writes the reference's bytes: the tensors' bytes in C order, little-endian.
"""

from __future__ import annotations

import paddle  # noqa: F401 (this module needs PaddlePaddle, as the reference's does)

from ._errors import SafetensorError
from ._frameworks import API, public_functions
from ._safe_open import safe_open
from ._safeweights import TensorSpec, deserialize, serialize, serialize_file

save, save_file, load, load_file = public_functions("paddle")

__all__ = list(API)
