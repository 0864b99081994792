"""What the clients' GGUF tests share: running our CLI's convert, a model folder linked with one file
changed, a refusal that must leave nothing behind, the judge against llama.cpp's own converter (same
tensors, bytes and keys but the deliberate differences), and llama.cpp's and transformers' logits.

Imported by the test modules after their own `pytest.importorskip` of transformers, torch and gguf;
llama_cpp, transformers and tokenizers are imported where a helper needs them.
"""

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
CLI = os.environ.get("SAFEWEIGHTS_CLI") or str(REPO / "build" / "safeweights")
LLAMA_CPP = os.environ.get("SAFEWEIGHTS_LLAMA_CPP")

# Float32 on both sides: differences are float32 rounding, relative to the largest logit.
F32_TOLERANCE = 1e-4
IDS = [1, 5, 77, 123, 250, 399, 42, 8, 300, 17, 200, 64]

# ---- running the CLI ---------------------------------------------------------------------------


def convert(source, out, *extra, type_="f32"):
    """`safeweights convert SOURCE OUT --type TYPE EXTRA...` (no --type when `type_` is None): the finished
    process, its output captured as text."""
    typed = ["--type", type_] if type_ else []
    return subprocess.run([CLI, "convert", str(source), str(out), *typed, *map(str, extra)], capture_output=True, text=True)


def converted_ok(source, out, *extra, type_="f32"):
    """convert() that must succeed; returns `out`."""
    r = convert(source, out, *extra, type_=type_)
    assert r.returncode == 0, r.stderr
    return out


def refused(source, out, *extra, type_="f32", code=None):
    """convert() that must fail (with exit status `code` when given) and leave nothing: no `out`, and its
    folder as it was (no temporary file left). Returns stderr for the caller's checks of the message."""
    before = sorted(out.parent.iterdir())
    r = convert(source, out, *extra, type_=type_)
    assert r.returncode != 0 if code is None else r.returncode == code, (r.returncode, r.stderr)
    assert not out.exists() and sorted(out.parent.iterdir()) == before, r.stderr
    return r.stderr


# ---- folders with one file changed -------------------------------------------------------------


def linked_copy(source, folder, config=None, weights=None):
    """`folder` (made here) with every file of the model folder `source` linked into it, but config.json
    written from the dict `config` and model.safetensors from the dict `weights` (name -> torch tensor),
    when given. Returns `folder`."""
    folder.mkdir()
    written = {"config.json": config, "model.safetensors": weights}
    for f in source.iterdir():
        if written.get(f.name) is None:
            (folder / f.name).symlink_to(f)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    if weights is not None:
        from safetensors.torch import save_file
        save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def edited(source, tmp_path, changes):
    """`source` linked into tmp_path/folder with its config.json changed: `changes` maps keys to values
    (None removes the key), or is a function that edits the dict in place. Returns the folder."""
    cfg = json.loads((source / "config.json").read_text())
    if callable(changes):
        changes(cfg)
    else:
        for key, value in changes.items():
            if value is None:
                cfg.pop(key, None)
            else:
                cfg[key] = value
    return linked_copy(source, tmp_path / "folder", config=cfg)


def with_weights(source, tmp_path, change):
    """`source` linked into tmp_path/folder with its model.safetensors rewritten: `change(state)` edits
    the dict of torch tensors in place. Returns the folder."""
    from safetensors.torch import load_file
    state = load_file(str(source / "model.safetensors"))
    change(state)
    return linked_copy(source, tmp_path / "folder", weights=state)


def fused_copy(model, source, folder):
    """`source` with its weights as transformers 5's modules hold them (experts fused), one file."""
    from safetensors.torch import save_file
    folder.mkdir()
    for f in source.iterdir():
        if f.is_file() and not f.name.startswith("model.safetensors"):
            (folder / f.name).write_bytes(f.read_bytes())
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight" or not model.config.tie_word_embeddings}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def both_layouts(make, root, types=("f32",)):
    """A mixture of experts made by `make(folder)` (saved per expert, at root/per-expert) and its fused copy
    (root/fused), each converted at each of `types`: {"model", "per_expert", "fused", f"{layout}-{type}"
    for types past the first: (folder, our gguf)}."""
    model = make(root / "per-expert")
    fused_copy(model, root / "per-expert", root / "fused")
    case = {"model": model}
    for layout in ("per_expert", "fused"):
        folder = root / layout.replace("_", "-")
        for type_ in types:
            ours = converted_ok(folder, root / f"{layout}-{type_}.gguf", type_=type_)
            case[layout if type_ == types[0] else f"{layout}-{type_}"] = (folder, ours)
    return case


# ---- the judge against llama.cpp's converter ---------------------------------------------------

# What we write otherwise, on purpose (docs/GGUF.md, "Hugging Face -> llama.cpp"): llama.cpp derives
# general.name (and basename, finetune) from its own heuristics over the folder name; we name the model
# after its folder (the size label, from the parameter count, is compared); we carry the weights' safetensors
# metadata as `safetensors.K` pairs (as every safetensors -> GGUF conversion does). The order of the
# tensors and keys in the file differs too: both are compared by name. The pre-tokenizer is recognised
# by us from tokenizer.json's split regex; llama.cpp's converter recognises only hashes of tokenizers it
# has seen, so the reference run is told the same name (REFERENCE_RUNNER).
DELIBERATE_DIFFERENCES = {"general.name", "general.basename", "general.finetune"}


def deliberate(key):
    """Whether `key` is one of the deliberate differences."""
    return key in DELIBERATE_DIFFERENCES or key.startswith("safetensors.")


# llama.cpp's converter on each (folder, out, outtype), in one process (importing torch once), with its
# pre-tokenizer lookup answering `pre`: a tokenizer trained here has no hash llama.cpp knows.
REFERENCE_RUNNER = r"""
import json, runpy, sys
llama_cpp, pre, jobs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
sys.path.insert(0, llama_cpp)
import conversion.base
conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
for folder, out, outtype in jobs:
    sys.argv = ["convert_hf_to_gguf.py", folder, "--outfile", out, "--outtype", outtype]
    runpy.run_path(llama_cpp + "/convert_hf_to_gguf.py", run_name="__main__")
"""


def need_llama_cpp():
    """Skips (fails under CI) when SAFEWEIGHTS_LLAMA_CPP, the reference converter's source, is unset."""
    if LLAMA_CPP:
        return
    if os.environ.get("CI") == "true":
        pytest.fail("SAFEWEIGHTS_LLAMA_CPP is unset under CI: the reference converter is required")
    pytest.skip("SAFEWEIGHTS_LLAMA_CPP is unset: no reference converter to compare with")


def run_reference(pre, jobs, runner=REFERENCE_RUNNER):
    """llama.cpp's converter (`runner`: REFERENCE_RUNNER or a variant with more options) on each
    (folder, out, outtype) of `jobs` in one process, offline, with its own gguf-py, naming the pre-tokenizer
    `pre`; it must succeed."""
    env = dict(os.environ, PYTHONPATH=os.path.join(LLAMA_CPP, "gguf-py"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    r = subprocess.run([sys.executable, "-c", runner, LLAMA_CPP, pre, json.dumps([[str(x) for x in job] for job in jobs])], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 0, r.stderr[-4000:]


def tensors_of(path):
    """A GGUF's tensors: name -> (type, shape, bytes)."""
    reader = gguf.GGUFReader(str(path))
    return {t.name: (int(t.tensor_type), [int(d) for d in t.shape], bytes(t.data.tobytes())) for t in reader.tensors}


def keys_of(path):
    """A GGUF's keys but the GGUF.* ones: name -> (types, value)."""
    reader = gguf.GGUFReader(str(path))
    out = {}
    for name, f in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        value = f.contents()
        out[name] = (tuple(int(t) for t in f.types), value)
    return out


def same_gguf(ours, theirs, skip=(), same_bytes=lambda name, x, y: x == y):
    """Judge (a): the two GGUFs hold the same tensors (name, type, shape; bytes as `same_bytes` says) and the
    same keys with the same values, but for the deliberate differences and the keys in `skip`. Returns both
    files' tensors and keys for the caller's own checks."""
    a, b = tensors_of(ours), tensors_of(theirs)
    assert sorted(a) == sorted(b)
    for name in b:
        assert a[name][:2] == b[name][:2], name
        assert same_bytes(name, a[name][2], b[name][2]), f"{name}: bytes differ"
    ka, kb = keys_of(ours), keys_of(theirs)
    judged = lambda k: not deliberate(k) and k not in skip  # noqa: E731
    only_ours = {k for k in set(ka) - set(kb) if judged(k)}
    only_theirs = {k for k in set(kb) - set(ka) if judged(k)}
    assert not only_ours and not only_theirs, (sorted(only_ours), sorted(only_theirs))
    for key in sorted(k for k in kb if judged(k)):
        assert ka[key] == kb[key], key
    return a, b, ka, kb


# ---- tokenizers and logits ---------------------------------------------------------------------

CORPUS = [
    "Hello world, this is a tiny corpus for a tiny tokenizer.",
    "Numbers 12345 and 67890 appear here, with 3.14 and 2024.",
    "Ünïcödé text: café, naïve, 東京, привет, emoji 🙂!",
    "  leading spaces and\ttabs and\nnewlines\n",
    "The quick brown fox jumps over the lazy dog.",
] * 30

# The split patterns of Llama 3's and Qwen2's tokenizer.json (llama.cpp's "llama-bpe" and "qwen2").
SPLITS = {
    "llama-bpe": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}


def bpe_tokenizer(pre="gpt-2"):
    """A byte-level BPE (tokenizers) with two special tokens, split as GPT-2 (ByteLevel's own regex), or
    as Llama 3 / Qwen2 (their Split pattern, then ByteLevel; Qwen2's with its NFC normalizer)."""
    import transformers
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(ignore_merges=pre == "llama-bpe"))  # as Llama 3's file has it
    if pre == "gpt-2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(SPLITS[pre]), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        if pre == "qwen2":
            tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")


def transformers_logits(model, ids):
    """The model's logits for the token ids, as numpy."""
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def llama_cpp_model(path):
    """llama.cpp's model of the GGUF `path`, with an F32 KV cache (llama.cpp defaults to F16): float32
    arithmetic on both sides."""
    llama_cpp = pytest.importorskip("llama_cpp")
    return llama_cpp.Llama(model_path=str(path), n_ctx=64, logits_all=True, verbose=False, n_threads=2, type_k=0, type_v=0)


def llama_cpp_logits(path, ids=IDS):
    """llama.cpp's logits for the token ids, as numpy."""
    llm = llama_cpp_model(path)
    llm.eval(ids)
    return np.array(llm.scores[: len(ids)], dtype=np.float64)


# llama.cpp's CPU GELU reads a table of float16 values at the float16-rounded input (ggml's GGML_GELU_FP16).
# With transformers' GELU computed the same way (ggml_gelu: input and output rounded to float16) the logits
# agree to this: what remains is float32 rounding that now and then moves a value across a float16 rounding
# boundary (5.9e-7 for two Gemma 2 layers, 8.7e-5 over six Gemma 3 layers).
GELU_FP16_TOLERANCE = 3e-4


def assert_close_logits(got, want, tolerance=F32_TOLERANCE, label=None):
    """Judge (b): llama.cpp's logits `got` within `tolerance` of the largest of transformers' `want`, and the
    same token chosen at every position. With a `label`, the error is printed under it."""
    err = np.abs(got - want).max() / np.abs(want).max()
    if label:
        print(f"{label}: max |llama.cpp - transformers| / max |transformers| = {err:.3g}")
    assert err <= tolerance
    assert (got.argmax(-1) == want.argmax(-1)).all()


@contextlib.contextmanager
def ggml_gelu(modules, name="act_fn"):
    """Inside, each module's activation `name` is ggml's float16-table GELU (Float16TableGelu)."""
    plain = [getattr(m, name) for m in modules]
    try:
        for m in modules:
            setattr(m, name, Float16TableGelu())
        yield
    finally:
        for m, act in zip(modules, plain):
            setattr(m, name, act)


class Float16TableGelu(torch.nn.Module):
    """transformers' gelu_pytorch_tanh as ggml computes it on the CPU: float16 in, float16 out, and
    0 / x beyond -10 / 10."""

    def forward(self, x):
        y = torch.nn.functional.gelu(x.half().float(), approximate="tanh").half().float()
        return torch.where(x <= -10, torch.zeros_like(x), torch.where(x >= 10, x, y))
