"""Qwen3.5, Qwen3.5-MoE and Qwen3-Next folders made by transformers 5 -> `safeweights convert FOLDER OUT.gguf` -> llama.cpp.

Hybrid models: Gated DeltaNet linear-attention layers (`linear_attn.*`) beside gated full-attention layers
(`self_attn.*`, q_proj twice as wide), as config.json's layer_types says. Each is a tiny random
Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM / Qwen3NextForCausalLM made here by transformers 5.24 (nothing
downloaded), with twice as many value heads as key heads so that Qwen3.5's value-head reorder and Qwen3-Next's
regrouping of its fused in_proj_qkvz show; the MoE ones in both expert layouts (per expert, as transformers
5.24 saves them, and fused, as their modules hold them). Qwen3.5 and Qwen3.5-MoE also as released: a
Qwen3_5(Moe)ForConditionalGeneration with a tiny vision tower (left out, with a note) and the Hub's
mrope_section. Judged as
test_hf_gguf_moe.py judges its architectures:

(a) against the pinned llama.cpp's own converter on the same folder: the same tensors (name, type, shape,
    bytes) and keys, but for DELIBERATE_DIFFERENCES. Its converter is run with --no-mtp: these folders have
    no multi-token-prediction layers (transformers saves none), and without the flag it stops on an
    assertion (folders holding them: test_hf_gguf_mtp.py);
(b) llama.cpp (llama-cpp-python) gives the logits transformers gives (f32, within F32_TOLERANCE of the
    largest logit) and the same argmax.

Config keys llama.cpp would compute otherwise are refused by name, and no file is written.
"""

import json
import os
from pathlib import Path

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp")

from gguf_helpers import (IDS, REFERENCE_RUNNER, assert_close_logits, bpe_tokenizer, convert, edited, fused_copy, keys_of,  # noqa: E402
                          llama_cpp_logits, need_llama_cpp, refused, run_reference, same_gguf, tensors_of, transformers_logits,
                          with_weights)

# llama.cpp's converter without the MTP layers these folders do not have (see above).
NO_MTP_RUNNER = REFERENCE_RUNNER.replace('"--outtype", outtype]', '"--outtype", outtype, "--no-mtp"]')
assert NO_MTP_RUNNER != REFERENCE_RUNNER

# 4 layers (3 linear, 1 full: transformers' default interval), 2 key heads of 16 and 4 value heads of 16
# (llama.cpp's loader takes value heads as wide as key heads), partial rope on a quarter of each head: 64 of
# 256, the least llama.cpp runs with the rope sections its converter always writes ([11, 11, 10]: 64 dims).
COMMON = dict(vocab_size=400, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=256,
              max_position_embeddings=256, tie_word_embeddings=False, bos_token_id=0, eos_token_id=1, pad_token_id=None,
              linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
              linear_num_value_heads=4, rms_norm_eps=1e-6)


def save(model, folder):
    """`model` saved by transformers with a Qwen2-style byte-level BPE tokenizer; returns the model."""
    with torch.no_grad():  # norms (1 + weight: zero at init) away from 1, routers that choose clearly
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") and p.dim() == 1:
                p.copy_(0.3 * torch.randn_like(p))
            if name.endswith(("mlp.gate.weight", "shared_expert_gate.weight")):
                p.copy_(0.5 * torch.randn_like(p))
    model.save_pretrained(str(folder))
    bpe_tokenizer("qwen2").save_pretrained(str(folder))
    # transformers maps Qwen3.5-MoE folders to Qwen3_5Tokenizer, which adds an unknown and padding token
    # <|endoftext|> past this vocabulary (llama.cpp's converter then stops on its vocabulary-size assertion):
    # name the tokenizer's own instead, so that both converters read the same 400 tokens.
    path = folder / "tokenizer_config.json"
    cfg = json.loads(path.read_text())
    cfg.update(unk_token=None, pad_token="</s>")
    path.write_text(json.dumps(cfg))
    return model


def qwen35(folder, **config):
    torch.manual_seed(11)
    return save(transformers.Qwen3_5ForCausalLM(transformers.Qwen3_5TextConfig(intermediate_size=96, **{**COMMON, **config})).eval(), folder)


def qwen35moe(folder):
    """4 experts of width 32 (2 used), a shared expert of width 48 with its sigmoid gate; no intermediate_size."""
    cfg = transformers.Qwen3_5MoeTextConfig(moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts=4, num_experts_per_tok=2,
                                            **COMMON)
    torch.manual_seed(12)
    return save(transformers.Qwen3_5MoeForCausalLM(cfg).eval(), folder)


def qwen3next(folder):
    """Qwen3-Next: fused in_proj_qkvz / in_proj_ba, experts as Qwen3.5-MoE's but renormalized by norm_topk_prob."""
    cfg = transformers.Qwen3NextConfig(intermediate_size=96, moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts=4,
                                       num_experts_per_tok=2, norm_topk_prob=True, **COMMON)
    torch.manual_seed(13)
    return save(transformers.Qwen3NextForCausalLM(cfg).eval(), folder)


# Qwen3.5 as released: a vision checkpoint (...ForConditionalGeneration) holding the text model under
# model.language_model.*, its vision tower under model.visual.*, config.json's text_config nested, and the
# rope object's interleaved multimodal sections (mrope_section, as the Hub's configs give them). A tiny
# vision tower: left out by both converters.
VISION = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, num_position_embeddings=16, patch_size=4)
RELEASED_ROPE = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10],
                 "mrope_interleaved": True}


def qwen35_vl(folder):
    cfg = transformers.Qwen3_5Config(text_config={**COMMON, "intermediate_size": 96, "rope_parameters": RELEASED_ROPE}, vision_config=VISION,
                                     tie_word_embeddings=False)
    torch.manual_seed(14)
    return save(transformers.Qwen3_5ForConditionalGeneration(cfg).eval(), folder)


def qwen35moe_vl(folder):
    text = dict(COMMON, moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts=4, num_experts_per_tok=2,
                rope_parameters=RELEASED_ROPE)
    cfg = transformers.Qwen3_5MoeConfig(text_config=text, vision_config=VISION, tie_word_embeddings=False)
    torch.manual_seed(15)
    return save(transformers.Qwen3_5MoeForConditionalGeneration(cfg).eval(), folder)


# case -> (maker, the folder's layouts); each converted to F32, the ones in TYPED to those types too.
MAKERS = {
    "qwen35": (qwen35, ("per_expert",)),
    "qwen35-tied": (lambda folder: qwen35(folder, tie_word_embeddings=True), ("per_expert",)),
    "qwen35moe": (qwen35moe, ("per_expert", "fused")),
    "qwen3next": (qwen3next, ("per_expert", "fused")),
    "qwen35-vl": (qwen35_vl, ("per_expert",)),
    "qwen35moe-vl": (qwen35moe_vl, ("per_expert", "fused")),
}
# (case, key) -> the CLI's stderr (its notes).
STDERR = {}
TYPED = {"qwen35": ("q8_0",), "qwen35moe": ("q8_0",), "qwen3next": ("q8_0",)}


def convert_cases(tmp_path_factory, makers, typed, stderr, prepare=lambda case, folder: None):
    """case -> {"model", layout or f"{layout}-{type}": (folder, our gguf)} for makers' rows (maker, layouts, ...),
    each folder first given to `prepare`; the CLI's stderr into `stderr`."""
    out = {}
    for case, (make, layouts, *_) in makers.items():
        root = tmp_path_factory.mktemp(case)
        model = make(root / "per-expert")
        if "fused" in layouts:
            fused_copy(model, root / "per-expert", root / "fused")
        entry = {"model": model}
        for layout in layouts:
            folder = root / layout.replace("_", "-")
            prepare(case, folder)
            for type_ in ("f32",) + typed.get(case, ()):
                ours = root / f"{layout}-{type_}.gguf"
                r = convert(folder, ours, type_=type_)
                assert r.returncode == 0, r.stderr
                entry[layout if type_ == "f32" else f"{layout}-{type_}"] = (folder, ours)
                stderr[(case, layout if type_ == "f32" else f"{layout}-{type_}")] = r.stderr
        out[case] = entry
    return out


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """case -> {"model", layout or f"{layout}-{type}": (folder, our gguf)}."""
    return convert_cases(tmp_path_factory, MAKERS, TYPED, STDERR)


def reference_files(models, tmp_path_factory, runner_of=lambda case: NO_MTP_RUNNER):
    """case -> key -> the GGUF llama.cpp's converter writes from the same folder, run by `runner_of(case)`
    (one process per runner)."""
    need_llama_cpp()
    root = tmp_path_factory.mktemp("reference")
    jobs = [(case, key, str(folder), str(root / f"{case}-{key}.gguf"), key.rpartition("-")[2] if "-" in key else "f32")
            for case, entry in models.items() for key, value in entry.items() if key != "model" for folder in [value[0]]]
    for runner in dict.fromkeys(runner_of(case) for case in models):
        run_reference("qwen2", [j[2:] for j in jobs if runner_of(j[0]) == runner], runner=runner)
    out = {case: {} for case in models}
    for case, key, _, path, _ in jobs:
        out[case][key] = Path(path)
    return out


@pytest.fixture(scope="module")
def reference(models, tmp_path_factory):
    """case -> key -> the GGUF llama.cpp's converter (--no-mtp) writes from the same folder."""
    return reference_files(models, tmp_path_factory)


# ssm_a is -exp(A_log): we write the float nearest the exact value; llama.cpp's converter (as transformers)
# calls torch's vectorized float exp, which is within 1 ulp of it. Compared within 1 ulp.
WITHIN_ONE_ULP = ("ssm_a",)


def same_bytes(name, ours, theirs):
    if not name.endswith(WITHIN_ONE_ULP):
        return ours == theirs
    a, b = np.frombuffer(ours, dtype=np.int32).astype(np.int64), np.frombuffer(theirs, dtype=np.int32).astype(np.int64)
    return a.shape == b.shape and np.abs(a - b).max() <= 1


COMPARED = [(case, key) for case, (_, layouts) in MAKERS.items() for layout in layouts
            for key in [layout] + [f"{layout}-{t}" for t in TYPED.get(case, ())]]


@pytest.mark.parametrize("case,key", COMPARED)
def test_tensors_and_keys_equal_llama_cpp_converter(models, reference, case, key):
    ours, theirs = models[case][key][1], reference[case][key]
    a, b, ka, kb = same_gguf(ours, theirs, same_bytes=same_bytes)
    arch = case.partition("-")[0]
    assert ka["general.architecture"][1] == arch
    assert ka[f"{arch}.attention.recurrent_layers"][1] == [True, True, True, False]
    assert a["blk.0.ssm_conv1d.weight"][:2] == (int(gguf.GGMLQuantizationType.F32), [4, 64 + 64])  # squeezed, F32 at any type


@pytest.mark.parametrize("case,layout", [(case, layout) for case, (_, layouts) in MAKERS.items() for layout in layouts])
def test_llama_cpp_logits_match_transformers(models, case, layout):
    model, (_, ours) = models[case]["model"], models[case][layout]
    want = transformers_logits(model, IDS)
    got = llama_cpp_logits(ours, IDS)
    assert_close_logits(got, want)


def set_key(key, value):
    def edit(cfg):
        cfg[key] = value
    return edit


def set_rope(key, value):
    def edit(cfg):
        cfg["rope_parameters"][key] = value
    return edit


# Keys transformers reads that llama.cpp's qwen35 would compute otherwise, and malformed hybrid keys.
REFUSED = [
    ("qwen35", set_key("attention_bias", True), "`attention_bias` is true: llama.cpp's qwen35 architecture has no attention biases"),
    ("qwen35moe", set_key("linear_value_head_dim", 8), "`linear_value_head_dim` differs from linear_key_head_dim"),
    ("qwen35", set_key("linear_num_value_heads", 3), "`linear_num_value_heads` must be a multiple of linear_num_key_heads (2)"),
    ("qwen35", set_key("layer_types", ["linear_attention"] * 3 + ["sliding_attention"]), "`layer_types` holds `sliding_attention`"),
    ("qwen35", set_key("layer_types", ["linear_attention"] * 3), "`layer_types` must be a list of num_hidden_layers (4) layer types"),
    ("qwen35", set_rope("partial_rotary_factor", 0.1), "`partial_rotary_factor` gives 25 rotary dimensions"),
    ("qwen35", set_rope("mrope_section", [16, 8, 8]),
     "`rope_parameters.mrope_section` leaves rotary pairs to llama.cpp's fourth rope section, which text positions do not rotate"),
    ("qwen35", set_rope("mrope_section", [11, 11, 10, 0, 1]), "`rope_parameters.mrope_section` must be a list of at most 4 section sizes"),
    ("qwen35", set_rope("mrope_section", [300, 0, 0]), "`rope_parameters.mrope_section` must sum to between 1 and head_dim (256)"),
    ("qwen3next", set_rope("mrope_section", [11, 11, 10]), "key `mrope_section` is not understood"),
    ("qwen3next", set_key("norm_topk_prob", False), "`norm_topk_prob` is false: llama.cpp's qwen3next architecture renormalizes"),
    ("qwen3next", set_key("mlp_only_layers", [1]), "`mlp_only_layers` lists dense layers"),
    ("qwen35", set_key("hidden_act", "gelu"), "`hidden_act` is `gelu`; llama.cpp's qwen35 architecture computes silu"),
]


@pytest.mark.parametrize("case,edit,text", REFUSED)
def test_keys_refused_by_name(models, tmp_path, case, edit, text):
    err = refused(edited(models[case]["per_expert"][0], tmp_path, edit), tmp_path / "out.gguf")
    assert "config.json" in err and text in err, err


def test_mtp_layers_refused_by_name(models, tmp_path):
    """An MTP block without its layer (mtp.fc alone; whole blocks: test_hf_gguf_mtp.py) is refused by name."""
    folder = with_weights(models["qwen35"]["per_expert"][0], tmp_path, lambda state: state.update({"mtp.fc.weight": torch.zeros(64, 128)}))
    err = refused(folder, tmp_path / "out.gguf")
    assert "mtp.fc.weight" in err and "no name in llama.cpp's qwen35 architecture" in err, err


@pytest.mark.parametrize("case,hf_class", [("qwen35-vl", "Qwen3_5ForConditionalGeneration"),
                                           ("qwen35moe-vl", "Qwen3_5MoeForConditionalGeneration")])
def test_released_vision_checkpoint_says_its_vision_tower_is_left_out(models, case, hf_class):
    """The text model is converted (judged above against llama.cpp's converter and transformers' logits); a
    note says the vision tower was not, and no tensor of it is in the file."""
    assert f"note: {hf_class}: the text model was converted; the vision tower was left out" in STDERR[(case, "per_expert")]
    names = tensors_of(models[case]["per_expert"][1])
    assert not [n for n in names if "visual" in n or "merger" in n or "patch" in n]
    assert keys_of(models[case]["per_expert"][1])[f"{case.partition('-')[0]}.rope.dimension_sections"][1] == [11, 11, 10, 0]
