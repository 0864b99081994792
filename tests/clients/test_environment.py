"""The suite runs against the clients its requirements pin: each pinned client imports, at the pinned
version (a venv made from other pins would test something else than the docs and the issue name)."""
import importlib
import re
from importlib import metadata
from pathlib import Path

import pytest

REQUIREMENTS = Path(__file__).with_name("requirements.txt")
# distribution name -> module imported
CLIENTS = {"torch": "torch", "transformers": "transformers", "diffusers": "diffusers", "accelerate": "accelerate",
           "huggingface_hub": "huggingface_hub", "safetensors": "safetensors", "gguf": "gguf", "llama_cpp_python": "llama_cpp"}


def pins():
    out = {}
    for line in REQUIREMENTS.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)$", line.strip())
        if m:
            out[m.group(1).lower().replace("-", "_")] = m.group(2)
    return out


@pytest.mark.parametrize("dist", sorted(CLIENTS))
def test_each_client_imports_at_its_pin(dist):
    importlib.import_module(CLIENTS[dist])
    assert metadata.version(dist.replace("_", "-")) == pins()[dist]
