"""DeepSeek-V3 folders made by transformers 5 -> `safeweights convert FOLDER OUT.gguf` -> llama.cpp.

Tiny random DeepseekV3ForCausalLM models made here by transformers 5.24 (nothing downloaded): multi-head
latent attention (low-rank queries with DeepSeek's YaRN, and the q_proj of q_lora_rank null), a dense first layer
(first_k_dense_replace) then experts chosen by sigmoid scores plus e_score_correction_bias within
groups (n_group, topk_group), scaled (routed_scaling_factor), renormalized, beside a shared expert; both
expert layouts (one tensor per expert as transformers saves it, and its modules' fused experts), and the
multi-token-prediction layer past num_hidden_layers that the Hub's checkpoints carry (dropped). Each is
converted by our CLI and judged:

(a) against the pinned llama.cpp's own converter (convert_hf_to_gguf.py of SAFEWEIGHTS_LLAMA_CPP, run
    offline with the clients' torch and its own gguf-py) on the same folder: the same tensors (name, type,
    shape, bytes: kv_b_proj split into attn_k_b, transposed, and attn_v_b) and the same keys, but for
    DELIBERATE_DIFFERENCES; its converter reads the per-expert layout only, so our file from the fused
    one is judged against its file from the per-expert one (the same weights);
(b) llama.cpp (llama-cpp-python) gives transformers' logits (f32, within F32_TOLERANCE of the largest
    logit) and the same top tokens;
(c) config keys llama.cpp would compute otherwise are refused by name, and no file is written.
"""

import json
import os
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp")
from safetensors.torch import load_file, save_file  # noqa: E402

from gguf_helpers import (IDS, assert_close_logits, both_layouts, converted_ok, edited, keys_of, llama_cpp_logits,  # noqa: E402
                          need_llama_cpp, refused, run_reference, same_gguf, transformers_logits, bpe_tokenizer)


# Besides test_hf_gguf_moe's (general.name and the size label; safetensors.* metadata): none here, as
# config.json says scoring_func "sigmoid" as the Hub's DeepSeek-V3 does. Without the key we still write
# deepseek2.expert_gating_func sigmoid (what DeepseekV3ForCausalLM computes), which llama.cpp's converter
# leaves out, and its loader then scores by softmax (docs/GGUF.md).
HUB_KEYS = {"scoring_func": "sigmoid", "topk_method": "noaux_tc"}

COMMON = dict(vocab_size=400, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_attention_heads=4,
              num_key_value_heads=4, n_routed_experts=8, num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1,
              first_k_dense_replace=1, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=12, v_head_dim=10,
              max_position_embeddings=256, routed_scaling_factor=2.5, norm_topk_prob=True, rms_norm_eps=1e-6,
              tie_word_embeddings=False, bos_token_id=0, eos_token_id=1, pad_token_id=None)


def save(model, folder, mtp_layer=True):
    """`model` saved by transformers with a Qwen2-style BPE tokenizer and the Hub's keys; with `mtp_layer`,
    the multi-token-prediction tensors of layer num_hidden_layers added as the Hub's files have them."""
    with torch.no_grad():  # norms away from 1, routers and correction biases that choose clearly
        for name, p in model.named_parameters():
            if name.endswith(("norm.weight", "layernorm.weight")) and p.dim() == 1:
                p.copy_(1 + 0.3 * torch.randn_like(p))
            if name.endswith("mlp.gate.weight"):
                p.copy_(0.5 * torch.randn_like(p))
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.3 * torch.randn_like(b))
    model.save_pretrained(str(folder))
    bpe_tokenizer("qwen2").save_pretrained(str(folder))
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, **HUB_KEYS}, indent=2))
    if mtp_layer:
        state = load_file(str(folder / "model.safetensors"))
        n, d = model.config.num_hidden_layers, model.config.hidden_size
        state[f"model.layers.{n}.eh_proj.weight"] = torch.randn(d, 2 * d)
        state[f"model.layers.{n}.enorm.weight"] = torch.ones(d)
        state[f"model.layers.{n}.hnorm.weight"] = torch.ones(d)
        save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return model


# DeepSeek-V3's YaRN (its checkpoints: factor 40 over 4096 positions, mscale = mscale_all_dim = 1), scaled down.
YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64, "beta_fast": 32.0,
        "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}


def deepseek3(folder):
    """Low-rank queries (q_lora_rank 24), YaRN, three layers: one dense, two of experts."""
    cfg = transformers.DeepseekV3Config(num_hidden_layers=3, q_lora_rank=24, rope_parameters=YARN, **COMMON)
    torch.manual_seed(11)
    return save(transformers.DeepseekV3ForCausalLM(cfg).eval(), folder)


def deepseek3_q_proj(folder):
    """q_lora_rank null (q_proj). llama.cpp's loader reads no q_lora_rank only for its "lite" layer counts
    (26, 27): 26 tiny layers."""
    cfg = transformers.DeepseekV3Config(num_hidden_layers=26, q_lora_rank=None, **COMMON)
    torch.manual_seed(12)
    return save(transformers.DeepseekV3ForCausalLM(cfg).eval(), folder, mtp_layer=False)


MAKERS = {"deepseek3": deepseek3, "deepseek3_q_proj": deepseek3_q_proj}
# Stored types judged against the reference too: k_b's rows (12) are no Q8_0 block, as llama.cpp's policy
# falls back.
TYPED = {"deepseek3": ("q8_0",)}


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory):
    """name -> {"model", "per_expert", "fused", ...} (each: (folder, our gguf))."""
    return {name: both_layouts(make, tmp_path_factory.mktemp(name), ("f32",) + TYPED.get(name, ())) for name, make in MAKERS.items()}


@pytest.fixture(scope="module")
def reference(deepseek, tmp_path_factory):
    """name -> layout -> the GGUF llama.cpp's converter writes from the per-expert folder."""
    need_llama_cpp()
    root = tmp_path_factory.mktemp("reference")
    jobs = []
    for name, case in deepseek.items():
        for type_ in ("f32",) + TYPED.get(name, ()):
            key = "per_expert" if type_ == "f32" else f"per_expert-{type_}"
            jobs.append((name, key, str(case["per_expert"][0]), str(root / f"{name}-{key}.gguf"), type_))
    run_reference("qwen2", [j[2:] for j in jobs])
    out = {name: {} for name in deepseek}
    for name, key, _, path, _ in jobs:
        out[name][key] = Path(path)
        out[name][key.replace("per_expert", "fused")] = Path(path)
    return out


COMPARED = [(name, layout) for name in MAKERS for layout in ("per_expert", "fused")] + \
    [(name, f"{layout}-{t}") for name, types in TYPED.items() for t in types for layout in ("per_expert", "fused")]


@pytest.mark.parametrize("name,layout", COMPARED)
def test_tensors_and_keys_equal_llama_cpp_converter(deepseek, reference, name, layout):
    ours, theirs = deepseek[name][layout][1], reference[name][layout]
    a, b, ka, kb = same_gguf(ours, theirs)
    assert ka["deepseek2.attention.head_count_kv"][1] == 1  # MLA: one compressed key/value head
    assert "blk.1.attn_k_b.weight" in a and "blk.1.exp_probs_b.bias" in a and "blk.0.ffn_gate.weight" in a


@pytest.mark.parametrize("layout", ["per_expert", "fused"])
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_llama_cpp_logits_match_transformers(deepseek, name, layout):
    model, (_, ours) = deepseek[name]["model"], deepseek[name][layout]
    want = transformers_logits(model, IDS)
    got = llama_cpp_logits(ours, IDS)
    assert_close_logits(got, want)


def test_without_scoring_func_the_gating_is_still_sigmoid(deepseek, tmp_path):
    source = deepseek["deepseek3"]["per_expert"][0]
    folder = edited(source, tmp_path, {"scoring_func": None, "topk_method": None})
    out = tmp_path / "out.gguf"
    converted_ok(folder, out)
    assert keys_of(out)["deepseek2.expert_gating_func"][1] == int(gguf.ExpertGatingFuncType.SIGMOID)


FP8 = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
# Keys that would make llama.cpp's deepseek2 compute something else than transformers' DeepseekV3.
REFUSED = [
    ({"quantization_config": FP8}, "key `quantization_config` is set: quantized (FP8 block-scaled"),
    ({"rope_interleave": False}, "key `rope_interleave` is false"),
    ({"num_key_value_heads": 2}, "key `num_key_value_heads` differs from num_attention_heads"),
    ({"attention_bias": True}, "key `attention_bias` is true"),
    ({"scoring_func": "softmax"}, "key `scoring_func` is `softmax`"),
    ({"rope_parameters": {**YARN, "mscale": 0.707}}, "key `mscale` must be given and equal mscale_all_dim"),
    ({"rope_parameters": {k: v for k, v in YARN.items() if k != "mscale_all_dim"}}, "key `mscale` must be given and equal mscale_all_dim"),
    ({"rope_parameters": {**YARN, "attention_factor": 1.1}}, "key `attention_factor`"),
    ({"rope_parameters": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}}, "rope type `linear` is not converted for DeepSeek-V3"),
    ({"hidden_act": "gelu"}, "key `hidden_act` is `gelu`"),
]


@pytest.mark.parametrize("changes,text", REFUSED)
def test_keys_refused_by_name(deepseek, tmp_path, changes, text):
    folder = edited(deepseek["deepseek3"]["per_expert"][0], tmp_path, changes)
    err = refused(folder, tmp_path / "out.gguf")
    assert "config.json" in err and text in err, err
