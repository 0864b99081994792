#!/usr/bin/env python3
"""transformers 5 `from_pretrained` through the safetensors drop-in against the real safetensors, same run.

Makes a Llama-shaped model at run time (random weights, float32, about 240 MB in one
model.safetensors of 75 tensors by default), then, round after round in alternating order, starts one
fresh process per contender:

  real   the installed safetensors package (the reference, 0.8 in the clients' venv)
  shim   `import safetensors` is safeweights: tests/python/upstream_shim first on PYTHONPATH, as the
         upstream test suite and tests/clients/ run it

Each process imports transformers and torch, then measures:

  peak      VmHWM - VmRSS around its first from_pretrained (the memory the load adds at its peak,
            mapped file pages included: both contenders map the file)
  load      from_pretrained(folder) wall time, --loads times after that first one (warm: imports
            done, file in the page cache), the model dropped in between
  slices    every tensor read as transformers 5 reads it, `get_slice(name)[...]`, under safe_open(.., "pt")

and checks that the logits of the loaded model equal those of the model that was saved. Prints the
medians per contender, the ratios shim/real, and the machine. The file is read once before timing.

Run with the clients' interpreter, after building (scripts/build.sh):

    PYTHONPATH=build/python "$(bash scripts/python-env.sh --cached venv-clients tests/clients/requirements.txt)" bench/dropin_transformers.py

Nothing is downloaded (HF_HUB_OFFLINE=1); the model is written to a temporary folder (--dir to choose).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHIM = REPO / "tests" / "python" / "upstream_shim"

CHILD = r"""
import gc, json, os, sys, time
import torch
import safetensors
from safetensors import safe_open
from transformers import AutoModelForCausalLM

folder, loads, slice_reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)

ids = torch.load(os.path.join(folder, "ids.pt"))
expected = torch.load(os.path.join(folder, "logits.pt"))
gc.collect()
before = status("VmRSS")
t0 = time.perf_counter()
model = AutoModelForCausalLM.from_pretrained(folder)
first = time.perf_counter() - t0
peak = status("VmHWM") - before
with torch.no_grad():
    same = bool(torch.equal(model(ids).logits, expected))
del model
gc.collect()

times = []
for _ in range(loads):
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(folder)
    times.append(time.perf_counter() - t0)
    del model
    gc.collect()

slices = []
path = os.path.join(folder, "model.safetensors")
for _ in range(slice_reps):
    t0 = time.perf_counter()
    with safe_open(path, framework="pt") as f:
        out = [f.get_slice(k)[...] for k in f.keys()]
    slices.append(time.perf_counter() - t0)
    n_tensors = len(out)
    del out

print(json.dumps({"module": safetensors.__file__, "first": first, "loads": times, "slices": slices,
                  "peak": peak, "same_logits": same, "tensors": n_tensors}))
"""


def make_model(folder: Path, layers: int, hidden: int, intermediate: int, vocab: int) -> int:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
        num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=256, tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(folder)  # the real safetensors writes the file both contenders read
    ids = torch.randint(0, vocab, (1, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(ids).logits
    torch.save(ids, folder / "ids.pt")
    torch.save(logits, folder / "logits.pt")
    return (folder / "model.safetensors").stat().st_size


def run_child(mode: str, folder: Path, loads: int, slice_reps: int) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if mode == "shim":
        path = [str(SHIM), *path]
    env["PYTHONPATH"] = os.pathsep.join(path)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(folder), str(loads), str(slice_reps)], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} child failed:\n{proc.stderr}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    is_shim = str(SHIM) in out["module"]
    if is_shim != (mode == "shim"):
        raise SystemExit(f"{mode} child imported safetensors from {out['module']}")
    if not out["same_logits"]:
        raise SystemExit(f"{mode}: the loaded model's logits differ from the saved model's")
    return out


def machine() -> str:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import safetensors  # the real one: the parent's path has no shim
    import torch
    import transformers

    return (f"{cpu}, {os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}, "
            f"torch {torch.__version__}, transformers {transformers.__version__}, safetensors {safetensors.__version__}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rounds", type=int, default=5, help="processes per contender (alternating order)")
    ap.add_argument("--loads", type=int, default=5, help="timed from_pretrained calls per process")
    ap.add_argument("--slice-reps", type=int, default=5, help="timed passes of get_slice(k)[...] per process")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--intermediate", type=int, default=1536)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--dir", default=None, help="folder for the model (default: a temporary one)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp) / "model"
        size = make_model(folder, args.layers, args.hidden, args.intermediate, args.vocab)
        (folder / "model.safetensors").read_bytes()  # into the page cache
        results = {"real": [], "shim": []}
        for r in range(args.rounds):
            for mode in (("real", "shim") if r % 2 == 0 else ("shim", "real")):
                results[mode].append(run_child(mode, folder, args.loads, args.slice_reps))

    def med(mode, key):
        values = [v for out in results[mode] for v in (out[key] if isinstance(out[key], list) else [out[key]])]
        return statistics.median(values)

    tensors = results["real"][0]["tensors"]
    print(f"machine: {machine()}")
    print(f"model: {size / 1e6:.0f} MB, {tensors} tensors (float32); {args.rounds} processes per contender, "
          f"{args.loads} warm loads and {args.slice_reps} slice passes each; medians")
    print(f"{'':24}{'real':>12}{'shim':>12}{'shim/real':>11}")
    rows = [
        ("from_pretrained warm", "loads", 1e3, "ms"),
        ("from_pretrained first", "first", 1e3, "ms"),
        ("get_slice(k)[...] x all", "slices", 1e3, "ms"),
        ("peak memory added", "peak", 1e-6, "MB"),
    ]
    for label, key, scale, unit in rows:
        real, shim = med("real", key), med("shim", key)
        print(f"{label:24}{real * scale:>9.1f} {unit}{shim * scale:>9.1f} {unit}{shim / real:>10.2f}x")


if __name__ == "__main__":
    main()
