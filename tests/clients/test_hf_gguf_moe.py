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

import os
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp")
from gguf_helpers import (IDS, assert_close_logits, both_layouts, bpe_tokenizer, edited, llama_cpp_logits, need_llama_cpp,  # noqa: E402
                          refused, run_reference, same_gguf, transformers_logits)
# Other test files import these from here: they are gguf_helpers' now (re-exported).
from gguf_helpers import (CLI, DELIBERATE_DIFFERENCES, F32_TOLERANCE, LLAMA_CPP, REFERENCE_RUNNER, deliberate, fused_copy, keys_of,  # noqa: E402,F401
                          tensors_of)


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
    return {arch: both_layouts(make, tmp_path_factory.mktemp(arch), ("f32",) + TYPED.get(arch, ())) for arch, (make, _) in MAKERS.items()}


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
    run_reference(MAKERS[next(iter(moe))][1], [j[2:] for j in jobs])
    out = {arch: {} for arch in moe}
    for arch, key, _, path, _ in jobs:
        out[arch][key] = Path(path)
    for files in out.values():
        for key in list(files):
            files.setdefault(key.replace("per_expert", "fused"), files[key])
    return out


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
    assert_close_logits(got, want)


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
    folder = edited(moe["qwen3moe"]["per_expert"][0], tmp_path, {key: value})
    err = refused(folder, tmp_path / "out.gguf")
    assert "config.json" in err and text in err, err
