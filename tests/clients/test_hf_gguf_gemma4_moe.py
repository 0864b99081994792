"""Gemma 4's mixture of experts (gemma-4-26B-A4B, issue 35) and GLM-4.5V's text model (at the end) made by
transformers 5 -> `safeweights convert` -> llama.cpp.

Gemma 4's experts sit beside the dense MLP of every layer (enable_moe_block): a router with an input scale
of its own (`router.scale`) and a per-expert scale of the chosen experts' weights (`router.per_expert_scale`),
experts saved fused as transformers 5 holds them (`experts.gate_up_proj` [E, 2F, D], `experts.down_proj`
[E, D, F]: Gemma 4 was released with transformers 5, so no per-expert layout exists), and three norms of
the MoE half. Each variant is a tiny random model made here by transformers 5.24 (nothing downloaded),
saved with Gemma's tokenizer (test_hf_gguf_gemma4), converted by our CLI and judged:

(a) against the pinned llama.cpp's own converter (`convert_hf_to_gguf.py`, Gemma4Model) on the same folder:
    the same tensors (name, type, shape, bytes) and keys, but for test_hf_gguf_moe's deliberate differences;
    F32, and Q8_0 (experts quantized, routers and scales F32);
(b) llama.cpp (llama-cpp-python) gives the logits transformers gives (GELU swapped for ggml's float16 GELU
    table in transformers, as test_hf_gguf_gemma4 does), and the same argmax tokens;
(c) expert keys transformers and llama.cpp's converter would read differently are refused by name, and no
    file is written.

The variants: Gemma4ForCausalLM laid out as 26B-A4B is (keys as values on the full layers with one KV
head, final logit soft-capping, no per-layer embeddings), and Gemma4ForConditionalGeneration (the folder
26B-A4B ships as) with experts and per-layer embeddings, whose text model is converted.
"""

import json
import os

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp")
pytest.importorskip("sentencepiece")

from gguf_helpers import convert, edited, refused, run_reference  # noqa: E402
from test_hf_gguf_gemma4 import FOUR_LAYERS, TEXT, logits_match, save  # noqa: E402
from test_hf_gguf_glm import glm_tokenizer, randomize  # noqa: E402
from test_hf_gguf_llamacpp import llama_cpp_logits, transformers_logits  # noqa: E402
from test_hf_gguf_moe import F32_TOLERANCE, IDS, fused_copy, need_llama_cpp, same_gguf  # noqa: E402

# 4 experts of width 32, 2 chosen a token, beside the dense MLP (intermediate_size 128).
EXPERTS = dict(enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=32)


def route_clearly(model):
    """Routers that choose clearly (transformers' init gives logits near 0, where float32 rounding could pick
    another expert in llama.cpp) and router scales away from 1, so that a wrong one would show."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("router.proj.weight"):
                p.copy_(3 * torch.randn_like(p))
            elif name.endswith("router.scale"):
                p.copy_(1 + 0.3 * torch.randn_like(p))
            elif name.endswith("router.per_expert_scale"):
                p.copy_(0.5 + torch.rand_like(p))
    return model


def moe_causal(folder):
    """26B-A4B's layout: experts in every layer, the full layers' keys as values with one KV head."""
    args = dict(TEXT, **EXPERTS, num_hidden_layers=4, layer_types=FOUR_LAYERS, global_head_dim=32, attention_k_eq_v=True,
                num_global_key_value_heads=1, hidden_size_per_layer_input=0, num_kv_shared_layers=0, final_logit_softcapping=30.0,
                attn_implementation="eager")
    torch.manual_seed(51)
    return save(route_clearly(transformers.Gemma4ForCausalLM(transformers.Gemma4TextConfig(**args)).eval()), folder)


def moe_multimodal(folder):
    """Gemma4ForConditionalGeneration with experts, per-layer embeddings and a one-layer vision tower."""
    text = dict(TEXT, **EXPERTS, num_hidden_layers=4, layer_types=FOUR_LAYERS, global_head_dim=32, hidden_size_per_layer_input=8,
                num_kv_shared_layers=0)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, head_dim=16)
    cfg = transformers.Gemma4Config(text_config=text, vision_config=vision, audio_config=None)
    cfg.text_config._attn_implementation = "eager"
    torch.manual_seed(52)
    return save(route_clearly(transformers.Gemma4ForConditionalGeneration(cfg).eval()), folder)


MAKERS = {"moe": moe_causal, "moe-multimodal": moe_multimodal}
# (variant, --type) pairs converted by both converters.
CASES = [("moe", "f32"), ("moe", "q8_0"), ("moe-multimodal", "f32")]


@pytest.fixture(scope="module")
def gemma4_moe(tmp_path_factory):
    """variant -> (model, folder, {type: our gguf}, the f32 conversion's stderr)."""
    out = {}
    for name, make in MAKERS.items():
        root = tmp_path_factory.mktemp(name)
        folder = root / "model"
        model = make(folder)
        files, stderr = {}, ""
        for variant, type_ in CASES:
            if variant != name:
                continue
            files[type_] = root / f"ours-{type_}.gguf"
            r = convert(folder, files[type_], type_=type_)
            assert r.returncode == 0, r.stderr
            stderr = stderr or r.stderr
        out[name] = (model, folder, files, stderr)
    return out


@pytest.fixture(scope="module")
def reference(gemma4_moe, tmp_path_factory):
    """(variant, type) -> the GGUF llama.cpp's converter writes from the same folder."""
    need_llama_cpp()
    root = tmp_path_factory.mktemp("reference")
    jobs = [(str(gemma4_moe[name][1]), str(root / f"{name}-{type_}.gguf"), type_) for name, type_ in CASES]
    run_reference("default", jobs)
    return {(name, type_): root / f"{name}-{type_}.gguf" for name, type_ in CASES}


@pytest.mark.parametrize("name,type_", CASES)
def test_tensors_and_keys_equal_llama_cpp_converter(gemma4_moe, reference, name, type_):
    a, _, ka, _ = same_gguf(gemma4_moe[name][2][type_], reference[(name, type_)])
    f32 = int(gguf.GGMLQuantizationType.F32)
    experts = int(gguf.GGMLQuantizationType.Q8_0 if type_ == "q8_0" else gguf.GGMLQuantizationType.F32)
    for layer in range(4):  # every layer has its experts, fused as llama.cpp's gemma4 reads them
        blk = f"blk.{layer}."
        assert a[blk + "ffn_gate_up_exps.weight"][:2] == (experts, [64, 64, 4])
        assert a[blk + "ffn_down_exps.weight"][:2] == (experts, [32, 64, 4])
        assert a[blk + "ffn_gate_inp.weight"][:2] == (f32, [64, 4])  # the router F32 at any type
        assert a[blk + "ffn_gate_inp.scale"][:2] == (f32, [64])
        assert a[blk + "ffn_down_exps.scale"][:2] == (f32, [4])
        assert blk + "ffn_gate.weight" in a  # the dense MLP beside them
    assert ka["gemma4.expert_count"][1] == 4
    assert ka["gemma4.expert_used_count"][1] == 2
    assert ka["gemma4.expert_feed_forward_length"][1] == 32
    assert ka["general.size_label"][1].startswith("4x")


def test_multimodal_notes_the_towers_left_out(gemma4_moe):
    assert "note: Gemma4ForConditionalGeneration: the text model was converted" in gemma4_moe["moe-multimodal"][3]


@pytest.mark.parametrize("name", list(MAKERS))
def test_llama_cpp_logits_match_transformers(gemma4_moe, name):
    model, _, ours, _ = gemma4_moe[name]
    logits_match(model, ours["f32"], name)  # GELU with ggml's table in the experts too


READ_FIRST = "differs from transformers' key: llama.cpp's converter reads it first"
# Expert keys transformers and llama.cpp's converter would read differently: (key, value, message); value
# None removes the key.
REFUSED = [
    ("enable_moe_block", False, "`num_experts` is set without enable_moe_block: transformers builds no experts"),
    ("top_k_experts", 5, "`top_k_experts` is above num_experts"),
    ("moe_intermediate_size", None, "`moe_intermediate_size` is missing"),
    ("expert_intermediate_size", 16, f"`expert_intermediate_size` {READ_FIRST}"),
    ("num_experts_per_tok", 1, f"`num_experts_per_tok` {READ_FIRST}"),
    ("num_local_experts", 4, "counts its experts with another key (the one transformers reads); llama.cpp's converter would take this one as gemma4.expert_count"),
    ("quantization_config", {"quant_method": "modelopt"}, "`quantization_config` is set: quantized checkpoints are not converted"),
]


@pytest.mark.parametrize("key,value,text", REFUSED)
def test_expert_keys_refused_by_name(gemma4_moe, tmp_path, key, value, text):
    err = refused(edited(gemma4_moe["moe"][1], tmp_path, {key: value}), tmp_path / "out.gguf")
    assert text in err, err


# ---- GLM-4.5V's text model (Glm4vMoeForConditionalGeneration) ----------------------------------------------
# llama.cpp's converter reads it with Glm4MoeModel (llama.cpp's glm4moe), its sectioned multimodal rope
# (mrope_section) as rope.dimension_sections; the vision tower (model.visual.*) is left out with a `note:`.
# GLM-4.5's tests (test_hf_gguf_glm) judge the experts themselves: here a tiny GLM-4.5V made by transformers
# 5.24 (a dense layer, then 8 experts, 2 used, a shared expert; q/k/v biases; heads of 32, half rotated, in
# sections [2, 3, 3]; a one-layer vision tower) in both expert layouts, judged by (a) against the pinned
# converter's file from the per-expert folder (which is all it reads), (b) at F32 (1e-4 of the largest
# logit), and (c) its rope sections' refusals.

GLM4V_ROPE = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5, "mrope_section": [2, 3, 3]}
GLM4V_TEXT = dict(vocab_size=416, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=1, n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
                  first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True, n_group=1, topk_group=1,
                  max_position_embeddings=256, rms_norm_eps=1e-5, rope_parameters=GLM4V_ROPE)
GLM4V_VISION = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=2,
                    spatial_merge_size=1, temporal_patch_size=1)
GLM4V_LAYOUTS = ("per_expert", "fused")


@pytest.fixture(scope="module")
def glm4v(tmp_path_factory):
    """{"model", "per_expert", "fused"} (each layout: (folder, our gguf, stderr))."""
    root = tmp_path_factory.mktemp("glm4v")
    cfg = transformers.Glm4vMoeConfig(text_config=GLM4V_TEXT, vision_config=GLM4V_VISION)
    torch.manual_seed(53)
    model = transformers.Glm4vMoeForConditionalGeneration(cfg).eval()
    randomize(model)
    per_expert = root / "per_expert"
    model.save_pretrained(str(per_expert))
    glm_tokenizer().save_pretrained(str(per_expert))
    out = {"model": model}
    for layout, folder in zip(GLM4V_LAYOUTS, (per_expert, fused_copy(model, per_expert, root / "fused"))):
        ours = root / f"{layout}.gguf"
        r = convert(folder, ours)
        assert r.returncode == 0, r.stderr
        out[layout] = (folder, ours, r.stderr)
    return out


@pytest.fixture(scope="module")
def glm4v_reference(glm4v, tmp_path_factory):
    need_llama_cpp()
    out = tmp_path_factory.mktemp("glm4v-reference") / "reference.gguf"
    run_reference("glm4", [(glm4v["per_expert"][0], out, "f32")])
    return out


@pytest.mark.parametrize("layout", GLM4V_LAYOUTS)
def test_glm4v_tensors_and_keys_equal_llama_cpp_converter(glm4v, glm4v_reference, layout):
    a, _, ka, _ = same_gguf(glm4v[layout][1], glm4v_reference)
    assert ka["glm4moe.rope.dimension_sections"][1] == [2, 3, 3, 0]
    assert "blk.1.ffn_gate_exps.weight" in a and "blk.0.ffn_gate.weight" in a and "blk.0.attn_q.bias" in a
    assert not any("visual" in name or name.startswith("v.") for name in a)


def test_glm4v_notes_the_vision_tower_left_out(glm4v):
    stderr = glm4v["per_expert"][2]
    assert "note: Glm4vMoeForConditionalGeneration: the text model was converted; the vision tower was left out" in stderr, stderr


@pytest.mark.parametrize("layout", GLM4V_LAYOUTS)
def test_glm4v_llama_cpp_logits_match_transformers(glm4v, layout):
    want = transformers_logits(glm4v["model"], IDS)
    got = llama_cpp_logits(glm4v[layout][1], IDS)[:, : want.shape[1]]
    assert np.abs(got - want).max() <= F32_TOLERANCE * np.abs(want).max()
    assert (got.argmax(-1) == want.argmax(-1)).all()


# text_config.rope_parameters.mrope_section values llama.cpp would rotate otherwise, or that transformers cannot split.
GLM4V_REFUSED = [
    ([2, 3, 2, 1], "`rope_parameters.mrope_section` has a fourth section, which text positions do not rotate in llama.cpp"),
    ([2, 3, 2], "`rope_parameters.mrope_section` must sum to the rotary pairs of a head (8)"),
]


@pytest.mark.parametrize("sections,text", GLM4V_REFUSED)
def test_glm4v_rope_sections_refused_by_name(glm4v, tmp_path, sections, text):
    source = glm4v["per_expert"][0]
    text_config = json.loads((source / "config.json").read_text())["text_config"]
    text_config["rope_parameters"]["mrope_section"] = sections
    folder = edited(source, tmp_path, {"text_config": text_config})
    err = refused(folder, tmp_path / "out.gguf")
    assert text in err, err
