"""Code written for `safetensors` and for huggingface_hub's DDUF functions runs unchanged after swapping
the import.

Each program below is written exactly as a user of those packages writes it (the safetensors README and
docs, the huggingface_hub DDUF guide). It is run twice: unchanged, in a subprocess whose `safetensors` and
`huggingface_hub` modules are aliases of safeweights (sys.modules shim); and with its import lines
rewritten to safeweights, in this process. The program prints a JSON summary that the test checks
against values computed here with numpy/torch/zipfile.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest

SHIM = textwrap.dedent(
    """
    import sys, types
    import safeweights, safeweights.numpy, safeweights.dduf
    sys.modules["safetensors"] = safeweights
    sys.modules["safetensors.numpy"] = safeweights.numpy
    try:
        import safeweights.torch
        sys.modules["safetensors.torch"] = safeweights.torch
    except ImportError:
        pass
    hub = types.ModuleType("huggingface_hub")
    errors = types.ModuleType("huggingface_hub.errors")
    for name in ("DDUFEntry", "read_dduf_file", "export_entries_as_dduf", "export_folder_as_dduf"):
        setattr(hub, name, getattr(safeweights.dduf, name))
    for name in ("DDUFError", "DDUFCorruptedFileError", "DDUFExportError", "DDUFInvalidEntryNameError"):
        setattr(errors, name, getattr(safeweights.dduf, name))
    hub.errors = errors
    sys.modules["huggingface_hub"] = hub
    sys.modules["huggingface_hub.errors"] = errors
    path = sys.argv[1]
    sys.argv = sys.argv[1:]
    code = compile(open(path).read(), path, "exec")
    exec(code, {"__name__": "__main__", "__file__": path})
    """
)

REWRITES = [
    (r"^(\s*)from safetensors\.(numpy|torch) import", r"\1from safeweights.\2 import"),
    (r"^(\s*)from safetensors import", r"\1from safeweights import"),
    (r"^(\s*)import safetensors\.(numpy|torch)$", r"\1import safeweights.\2 as safetensors_\2_alias"),
    (r"^(\s*)from huggingface_hub\.errors import", r"\1from safeweights.dduf import"),
    (r"^(\s*)from huggingface_hub import", r"\1from safeweights.dduf import"),
]


def rewrite_imports(source):
    out = source
    for pattern, repl in REWRITES:
        out = re.sub(pattern, repl, out, flags=re.M)
    assert "safetensors import" not in out and "huggingface_hub" not in out
    return out


def run_shimmed(tmp_path, source):
    prog = tmp_path / "user_program.py"
    prog.write_text(source)
    shim = tmp_path / "shim.py"
    shim.write_text(SHIM)
    proc = subprocess.run([sys.executable, str(shim), str(prog)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_rewritten(tmp_path, source, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = compile(rewrite_imports(source), str(tmp_path / "user_program.py"), "exec")
    capsys.readouterr()
    exec(code, {"__name__": "__main__"})
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.fixture(params=["shim", "rewritten"])
def run(request, tmp_path, capsys, monkeypatch):
    def runner(source, subdir):
        d = tmp_path / subdir / request.param
        d.mkdir(parents=True)
        if request.param == "shim":
            return run_shimmed(d, source), d
        return run_rewritten(d, source, capsys, monkeypatch), d

    return runner


NUMPY_README = '''
import json
import numpy as np
from safetensors.numpy import save_file, load_file, save, load
from safetensors import safe_open

tensors = {
   "a": np.zeros((2, 2)),
   "b": np.zeros((2, 3), dtype=np.uint8)
}
save_file(tensors, "./model.safetensors")

# Now loading
loaded = load_file("./model.safetensors")

byte_data = save({"c": np.arange(6, dtype=np.int32).reshape(2, 3)}, metadata={"format": "np"})
restored = load(byte_data)

with safe_open("model.safetensors", framework="np") as f:
    meta = f.metadata()
    tensor_slice = f.get_slice("b")
    rows, cols = tensor_slice.get_shape()
    part = tensor_slice[:, :cols - 1]

print(json.dumps({
    "keys": sorted(loaded),
    "a": [str(loaded["a"].dtype), list(loaded["a"].shape), float(loaded["a"].sum())],
    "b": [str(loaded["b"].dtype), list(loaded["b"].shape)],
    "c": restored["c"].tolist(),
    "meta": meta,
    "part": list(part.shape),
}))
'''


def test_numpy_readme(run):
    result, d = run(NUMPY_README, "numpy")
    assert result == {"keys": ["a", "b"], "a": ["float64", [2, 2], 0.0], "b": ["uint8", [2, 3]],
                      "c": np.arange(6).reshape(2, 3).tolist(), "meta": None, "part": [2, 2]}
    header_len = int.from_bytes((d / "model.safetensors").read_bytes()[:8], "little")
    header = json.loads((d / "model.safetensors").read_bytes()[8 : 8 + header_len])
    assert header["a"]["dtype"] == "F64" and header["b"]["dtype"] == "U8"


TORCH_README = '''
import json
import torch
from safetensors import safe_open
from safetensors.torch import save_file, load_file, save_model, load_model

tensors = {
    "weight1": torch.zeros((1024, 1024)),
    "weight2": torch.zeros((1024, 1024)),
    "embedding": torch.arange(64 * 16, dtype=torch.float32).reshape(64, 16),
}
save_file(tensors, "model.safetensors")

tensors = {}
with safe_open("model.safetensors", framework="pt", device="cpu") as f:
    for key in f.keys():
        tensors[key] = f.get_tensor(key)

with safe_open("model.safetensors", framework="pt", device="cpu") as f:
    tensor_slice = f.get_slice("embedding")
    vocab_size, hidden_dim = tensor_slice.get_shape()
    tensor = tensor_slice[:, :hidden_dim // 2]

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = self.a

model = Model()
save_model(model, "tied.safetensors")
other = Model()
missing, unexpected = load_model(other, "tied.safetensors")

state_dict = load_file("model.safetensors")

print(json.dumps({
    "keys": list(tensors),
    "sum": float(tensors["embedding"].sum()),
    "slice": list(tensor.shape),
    "slice_sum": float(tensor.sum()),
    "loaded_keys": sorted(state_dict),
    "tied_equal": bool(torch.equal(model.a.weight, other.a.weight)),
    "missing": sorted(missing),  # a set, as the reference returns it
    "unexpected": unexpected,
}))
'''


def test_torch_readme(run):
    pytest.importorskip("torch")
    result, _ = run(TORCH_README, "torch")
    emb = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)
    assert result == {
        "keys": ["embedding", "weight1", "weight2"],
        "sum": float(emb.sum()),
        "slice": [64, 8],
        "slice_sum": float(emb[:, :8].sum()),
        "loaded_keys": ["embedding", "weight1", "weight2"],
        "tied_equal": True,
        "missing": [],
        "unexpected": [],
    }


HUB_DDUF = '''
import json
from pathlib import Path
from huggingface_hub import export_entries_as_dduf, export_folder_as_dduf, read_dduf_file
from huggingface_hub.errors import DDUFCorruptedFileError, DDUFExportError
from safetensors.numpy import load, save_file
import numpy as np

# a diffusers-like folder
folder = Path("FLUX.1-dev")
(folder / "vae").mkdir(parents=True)
(folder / "model_index.json").write_text(json.dumps({"_class_name": "FluxPipeline", "vae": ["diffusers", "AutoencoderKL"]}))
(folder / "vae" / "config.json").write_text(json.dumps({"latent_channels": 16}))
save_file({"decoder.weight": np.ones((4, 4), dtype=np.float32)}, folder / "vae" / "diffusion_pytorch_model.safetensors")
(folder / "README.md").write_text("not exported")

export_folder_as_dduf("FLUX.1-dev.dduf", folder_path="FLUX.1-dev")

dduf_entries = read_dduf_file("FLUX.1-dev.dduf")
model_index = json.loads(dduf_entries["model_index.json"].read_text())
with dduf_entries["vae/diffusion_pytorch_model.safetensors"].as_mmap() as mm:
    state_dict = load(mm)
    total = float(state_dict["decoder.weight"].sum())

def as_entries():
    yield "model_index.json", json.dumps({"text_encoder": ["transformers", "CLIPTextModel"]}).encode()
    yield "text_encoder/config.json", b"{}"
    yield "text_encoder/model.safetensors", str(folder / "vae" / "diffusion_pytorch_model.safetensors")

export_entries_as_dduf(dduf_path="from-entries.dduf", entries=as_entries())
entries2 = read_dduf_file("from-entries.dduf")

try:
    export_entries_as_dduf(dduf_path="bad.dduf", entries=[("model.bin", b"x")])
    export_error = None
except DDUFExportError as e:
    export_error = type(e.__cause__).__name__

Path("corrupt.dduf").write_bytes(b"not a zip")
try:
    read_dduf_file("corrupt.dduf")
    corrupted = False
except DDUFCorruptedFileError:
    corrupted = True

print(json.dumps({
    "entries": sorted(dduf_entries),
    "model_index": model_index,
    "total": total,
    "entries2": list(entries2),
    "export_error": export_error,
    "corrupted": corrupted,
}))
'''


def test_hub_dduf(run):
    result, d = run(HUB_DDUF, "dduf")
    assert result == {
        "entries": ["model_index.json", "vae/config.json", "vae/diffusion_pytorch_model.safetensors"],
        "model_index": {"_class_name": "FluxPipeline", "vae": ["diffusers", "AutoencoderKL"]},
        "total": 16.0,
        "entries2": ["model_index.json", "text_encoder/config.json", "text_encoder/model.safetensors"],
        "export_error": "DDUFInvalidEntryNameError",
        "corrupted": True,
    }
    with zipfile.ZipFile(d / "FLUX.1-dev.dduf") as zf:
        assert zf.testzip() is None
        assert zf.read("vae/config.json") == (d / "FLUX.1-dev" / "vae" / "config.json").read_bytes()


HANDLE = '''
import json
import numpy as np
from safetensors import _safe_open_handle, SafetensorError
from safetensors.numpy import save_file

save_file({"a": np.arange(3, dtype=np.int16)}, "h.safetensors")
with open("h.safetensors", "rb") as fh:
    with _safe_open_handle(fh, "np") as f:
        value = f.get_tensor("a").tolist()
try:
    from safetensors import safe_open
    safe_open("h.safetensors", framework="np").get_tensor("missing")
    err = None
except SafetensorError as e:
    err = str(e)
print(json.dumps({"value": value, "err": err}))
'''


def test_safe_open_handle_program(run):
    result, _ = run(HANDLE, "handle")
    assert result == {"value": [0, 1, 2], "err": "File does not contain tensor missing"}


def test_rewrite_is_only_imports():
    for src in (NUMPY_README, TORCH_README, HUB_DDUF, HANDLE):
        new = rewrite_imports(src)
        changed = [(a, b) for a, b in zip(src.splitlines(), new.splitlines()) if a != b]
        assert changed and all(a.lstrip().startswith(("from ", "import ")) for a, _ in changed)
