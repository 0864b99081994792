"""Mixture-of-experts folders made by transformers 5 -> `safeweights convert FOLDER OUT.gguf` -> llama.cpp.

Each architecture is a tiny random model made here by transformers 5.24 (nothing downloaded), in both
expert layouts users have: one tensor per expert (`mlp.experts.N.gate_proj.weight`, as transformers 5.24
still saves these classes and the Hub's checkpoints hold them) and transformers 5's fused experts
(`mlp.experts.gate_up_proj` [E, 2F, D], `down_proj` [E, D, F]: the model's own state dict, saved as it
is). Each is converted by our CLI to an F32 GGUF and judged twice:

(a) against the pinned llama.cpp's own converter (`convert_hf_to_gguf.py` of SAFEWEIGHTS_LLAMA_CPP, run
    offline with the clients' torch and its own gguf-py) on the same folder: the same tensors (name,
    type, shape, bytes) and the same keys with the same values, but for DELIBERATE_DIFFERENCES;
(b) llama.cpp (llama-cpp-python) gives the logits transformers gives (f32, within F32_TOLERANCE of the
    largest logit) and tokenizes as the source tokenizer does.

Config keys llama.cpp would compute otherwise are refused by name, and no file is written.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp")
from safetensors.torch import save_file  # noqa: E402

from test_hf_gguf_llamacpp import CLI, bpe_tokenizer, llama_cpp_logits, transformers_logits  # noqa: E402

LLAMA_CPP = os.environ.get("SAFEWEIGHTS_LLAMA_CPP")
F32_TOLERANCE = 1e-4
IDS = [1, 5, 77, 123, 250, 399, 42, 8, 300, 17, 200, 64]

# What we write otherwise, on purpose (docs/GGUF.md, "Hugging Face -> llama.cpp"): llama.cpp derives
# general.name (and basename, finetune) from its own heuristics over the folder name; we name the model
# after its folder (the size label, from the parameter count, is compared); we carry the weights' safetensors
# metadata as `safetensors.K` pairs (as every safetensors -> GGUF conversion does). The order of the
# tensors and keys in the file differs too: both are compared by name. The pre-tokenizer is recognised
# by us from tokenizer.json's split regex; llama.cpp's converter recognises only hashes of tokenizers it
# has seen, so the reference run is told the same name (REFERENCE_RUNNER).
DELIBERATE_DIFFERENCES = {"general.name", "general.basename", "general.finetune"}


def deliberate(key):
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
    if LLAMA_CPP:
        return
    if os.environ.get("CI") == "true":
        pytest.fail("SAFEWEIGHTS_LLAMA_CPP is unset under CI: the reference converter is required")
    pytest.skip("SAFEWEIGHTS_LLAMA_CPP is unset: no reference converter to compare with")


def save(model, folder):
    """`model` saved by transformers with a Qwen2-style byte-level BPE tokenizer; returns the model."""
    with torch.no_grad():  # norms away from 1 and routers that choose clearly, so a wrong one would show
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") and p.dim() == 1:
                p.copy_(1 + 0.3 * torch.randn_like(p))
            if name.endswith(("mlp.gate.weight", "block_sparse_moe.gate.weight", "shared_expert_gate.weight")):
                p.copy_(0.5 * torch.randn_like(p))
    model.save_pretrained(str(folder))
    bpe_tokenizer("qwen2").save_pretrained(str(folder))
    return model


# Every model: 2 layers, 4 experts (2 used), GQA where the architecture has it, an untied head.
COMMON = dict(vocab_size=400, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=256,
              tie_word_embeddings=False, bos_token_id=0, eos_token_id=1, pad_token_id=None)


def qwen3moe(folder):
    """Experts of width 32 (intermediate_size 96 is the dense width llama.cpp's key still carries)."""
    cfg = transformers.Qwen3MoeConfig(intermediate_size=96, moe_intermediate_size=32, num_key_value_heads=2, head_dim=16, num_experts=4,
                                      num_experts_per_tok=2, norm_topk_prob=True, rms_norm_eps=1e-6, **COMMON)
    torch.manual_seed(7)
    return save(transformers.Qwen3MoeForCausalLM(cfg).eval(), folder)


def mixtral(folder):
    cfg = transformers.MixtralConfig(intermediate_size=32, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                                     rms_norm_eps=1e-5, **COMMON)
    torch.manual_seed(8)
    return save(transformers.MixtralForCausalLM(cfg).eval(), folder)


def qwen2moe(folder):
    """With its shared expert (width 48) and the shared expert's sigmoid gate."""
    cfg = transformers.Qwen2MoeConfig(intermediate_size=96, moe_intermediate_size=32, shared_expert_intermediate_size=48,
                                      num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
                                      rms_norm_eps=1e-6, **COMMON)
    torch.manual_seed(9)
    return save(transformers.Qwen2MoeForCausalLM(cfg).eval(), folder)


def olmoe(folder):
    """llama.cpp's olmoe has no GQA and an epsilon of 1e-5."""
    cfg = transformers.OlmoeConfig(intermediate_size=32, num_key_value_heads=4, num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
                                   rms_norm_eps=1e-5, **COMMON)
    torch.manual_seed(10)
    return save(transformers.OlmoeForCausalLM(cfg).eval(), folder)


def fused_copy(model, source, folder):
    """`source` with its weights as transformers 5's modules hold them (experts fused), one file."""
    folder.mkdir()
    for f in source.iterdir():
        if f.is_file() and not f.name.startswith("model.safetensors"):
            (folder / f.name).write_bytes(f.read_bytes())
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight" or not model.config.tie_word_embeddings}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


# arch -> (maker, the pre-tokenizer both converters name); the order of the issue.
MAKERS = {"qwen3moe": (qwen3moe, "qwen2"), "mixtral": (mixtral, "qwen2"), "qwen2moe": (qwen2moe, "qwen2"), "olmoe": (olmoe, "qwen2")}
# llama.cpp's converter reads Mixtral's and OLMoE's per-expert layout only (LlamaModel and OlmoeModel
# stack numbered experts; a fused one is "Unprocessed experts"): our file from the fused one is judged
# against its file from the per-expert one (the same weights).
REFERENCE_LAYOUTS = {"mixtral": ("per_expert",), "olmoe": ("per_expert",)}
# Stored types judged against the reference too (on one architecture, both layouts): experts quantized,
# routers kept F32, as llama.cpp's converter does.
TYPED = {"qwen3moe": ("q8_0",)}


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    """arch -> {"model", "per_expert", "fused"} (each layout: (folder, our gguf))."""
    out = {}
    for arch, (make, _) in MAKERS.items():
        root = tmp_path_factory.mktemp(arch)
        model = make(root / "per-expert")
        fused_copy(model, root / "per-expert", root / "fused")
        case = {"model": model}
        for layout in ("per_expert", "fused"):
            folder = root / layout.replace("_", "-")
            for type_ in ("f32",) + TYPED.get(arch, ()):
                ours = root / f"{layout}-{type_}.gguf"
                r = subprocess.run([CLI, "convert", str(folder), str(ours), "--type", type_], capture_output=True, text=True)
                assert r.returncode == 0, r.stderr
                case[layout if type_ == "f32" else f"{layout}-{type_}"] = (folder, ours)
        out[arch] = case
    return out


@pytest.fixture(scope="module")
def reference(moe, tmp_path_factory):
    """arch -> layout -> the GGUF llama.cpp's converter writes from the same folder."""
    need_llama_cpp()
    root = tmp_path_factory.mktemp("reference")
    jobs = []
    for arch, case in moe.items():
        for layout in REFERENCE_LAYOUTS.get(arch, ("per_expert", "fused")):
            for type_ in ("f32",) + TYPED.get(arch, ()):
                key = layout if type_ == "f32" else f"{layout}-{type_}"
                jobs.append((arch, key, str(case[layout][0]), str(root / f"{arch}-{key}.gguf"), type_))
    assert len({MAKERS[arch][1] for arch in moe}) == 1  # one run answers one pre-tokenizer name
    env = dict(os.environ, PYTHONPATH=os.path.join(LLAMA_CPP, "gguf-py"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    r = subprocess.run([sys.executable, "-c", REFERENCE_RUNNER, LLAMA_CPP, MAKERS[next(iter(moe))][1], json.dumps([j[2:] for j in jobs])],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    out = {arch: {} for arch in moe}
    for arch, key, _, path, _ in jobs:
        out[arch][key] = Path(path)
    for files in out.values():
        for key in list(files):
            files.setdefault(key.replace("per_expert", "fused"), files[key])
    return out


def tensors_of(path):
    reader = gguf.GGUFReader(str(path))
    return {t.name: (int(t.tensor_type), [int(d) for d in t.shape], bytes(t.data.tobytes())) for t in reader.tensors}


def keys_of(path):
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


COMPARED = [(arch, layout) for arch in MAKERS for layout in ("per_expert", "fused")] + \
    [(arch, f"{layout}-{t}") for arch, types in TYPED.items() for t in types for layout in ("per_expert", "fused")]


@pytest.mark.parametrize("arch,layout", COMPARED)
def test_tensors_and_keys_equal_llama_cpp_converter(moe, reference, arch, layout):
    ours, theirs = moe[arch][layout][1], reference[arch][layout]
    a, b, ka, kb = same_gguf(ours, theirs)
    assert a["blk.0.ffn_gate_inp.weight"][0] == int(gguf.GGMLQuantizationType.F32)  # routers F32 at any type
    experts = gguf.GGMLQuantizationType.Q8_0 if layout.endswith("q8_0") else gguf.GGMLQuantizationType.F32
    assert a["blk.0.ffn_gate_exps.weight"][0] == int(experts)


@pytest.mark.parametrize("layout", ["per_expert", "fused"])
@pytest.mark.parametrize("arch", sorted(MAKERS))
def test_llama_cpp_logits_match_transformers(moe, arch, layout):
    model, (_, ours) = moe[arch]["model"], moe[arch][layout]
    want = transformers_logits(model, IDS)
    got = llama_cpp_logits(ours, IDS)
    assert np.abs(got - want).max() <= F32_TOLERANCE * np.abs(want).max()
    assert (got.argmax(-1) == want.argmax(-1)).all()


@pytest.mark.parametrize("arch", sorted(MAKERS))
def test_llama_cpp_tokenizes_as_the_source(moe, arch):
    folder, ours = moe[arch]["per_expert"]
    text = " Hello  world 12345 café 東京 привет 🙂\n  spaces\tand tabs don't"
    want = transformers.AutoTokenizer.from_pretrained(str(folder))(text, add_special_tokens=False)["input_ids"]
    llm = llama_cpp.Llama(model_path=str(ours), n_ctx=64, vocab_only=True, verbose=False)
    assert llm.tokenize(text.encode(), add_bos=False, special=False) == want


# Keys transformers reads that would make llama.cpp's qwen3moe compute something else.
REFUSED = [
    ("norm_topk_prob", False, "`norm_topk_prob` is false: llama.cpp's qwen3moe architecture renormalizes"),
    ("decoder_sparse_step", 2, "`decoder_sparse_step` is 2"),
    ("mlp_only_layers", [1], "`mlp_only_layers` lists dense layers"),
]


@pytest.mark.parametrize("key,value,text", REFUSED)
def test_qwen3moe_keys_refused_by_name(moe, tmp_path, key, value, text):
    source = moe["qwen3moe"]["per_expert"][0]
    folder = tmp_path / "folder"
    folder.mkdir()
    for f in source.iterdir():
        (folder / f.name).symlink_to(f)
    (folder / "config.json").unlink()
    cfg = json.loads((source / "config.json").read_text())
    cfg[key] = value
    (folder / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out.gguf"
    r = subprocess.run([CLI, "convert", str(folder), str(out), "--type", "f32"], capture_output=True, text=True)
    assert r.returncode != 0 and "config.json" in r.stderr and text in r.stderr, r.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == [folder]
