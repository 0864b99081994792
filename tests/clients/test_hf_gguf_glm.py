"""GLM-4.5-MoE folders made by transformers 5 -> `safeweights convert FOLDER OUT.gguf` -> llama.cpp, and the
next-token-prediction (NextN) layers past num_hidden_layers kept as llama.cpp's converter keeps them.

Tiny random Glm4MoeForCausalLM models made here by transformers 5.24 (nothing downloaded): partial NEOX rope,
q/k/v biases and per-head q/k norms where configured, a dense first layer (first_k_dense_replace) then experts
chosen by sigmoid scores plus e_score_correction_bias, scaled and renormalized, beside a shared expert; both
expert layouts (one tensor per expert as transformers saves it, and its modules' fused experts); tied and untied
output; a NextN layer past num_hidden_layers as the Hub's checkpoints carry it (transformers' modules have
none: its tensors are added to the saved file with the Hub's names and shapes), none (num_nextn_predict_layers
0), and the count without the tensors (as transformers saves every GLM-4.5 folder). GLM's tokenizer: a
byte-level BPE split as Llama 3's with GLM's added tokens ([gMASK], <|user|>, <|endoftext|>, <|observation|>).
Each is converted by our CLI and judged:

(a) against the pinned llama.cpp's own converter (convert_hf_to_gguf.py of SAFEWEIGHTS_LLAMA_CPP, run offline
    with the clients' torch and its own gguf-py, by default: NextN layers kept) on the same folder: the same
    tensors (name, type, shape, bytes) and keys, but for test_hf_gguf_moe's DELIBERATE_DIFFERENCES; its
    converter reads the per-expert layout only (Glm4MoeModel stacks numbered experts), so our file from the
    fused one is judged against its file from the per-expert one (the same weights);
(b) llama.cpp (llama-cpp-python) gives transformers' logits (f32, within F32_TOLERANCE of the largest logit)
    and the same top tokens: its graph runs num_hidden_layers layers, the NextN layer only for drafting;
(c) config keys llama.cpp would compute otherwise are refused by name, and no file is written.
"""

import os
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp")
from safetensors.torch import load_file, save_file  # noqa: E402

from gguf_helpers import (IDS, assert_close_logits, bpe_tokenizer, convert, converted_ok, edited, fused_copy, keys_of,  # noqa: E402
                          llama_cpp_logits, need_llama_cpp, refused, run_reference, same_gguf, tensors_of, transformers_logits,
                          with_weights)


# The tokens llama.cpp's converter makes GLM-4.5's bos, eot, unk and eom (conversion/base.py _set_vocab_glm).
GLM_TOKENS = ["[gMASK]", "<|user|>", "<|endoftext|>", "<|observation|>"]

# vocab_size above the tokenizer's 400 + 4 added tokens: the rest are llama.cpp's [PAD] tokens.
COMMON = dict(vocab_size=416, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
              first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True, n_group=1, topk_group=1,
              max_position_embeddings=256, rms_norm_eps=1e-5, bos_token_id=None, eos_token_id=None, pad_token_id=None)


def glm_tokenizer():
    """Llama 3's split with GLM's added tokens, and GLM-4.5's tokenizer_config.json: no bos token (llama.cpp's
    converter makes [gMASK] the bos), eos and pad <|endoftext|>."""
    tok = bpe_tokenizer("llama-bpe")
    tok.add_tokens(GLM_TOKENS, special_tokens=True)
    tok.bos_token = None
    tok.eos_token = tok.pad_token = "<|endoftext|>"
    return tok


def randomize(model):
    """Norms away from 1, routers and correction biases that choose clearly, so a wrong one would show."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") and p.dim() == 1:
                p.copy_(1 + 0.3 * torch.randn_like(p))
            if name.endswith("mlp.gate.weight"):
                p.copy_(0.5 * torch.randn_like(p))
            if name.endswith(".bias"):
                p.copy_(0.2 * torch.randn_like(p))
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.3 * torch.randn_like(b))


def nextn_layer(state, n, d, vocab):
    """Layer `n` as the Hub's GLM-4.5 files hold it: a copy of the last layer's attention and experts (in the
    layout of `state`, so that both layouts hold the same weights) and the NextN tensors of their shapes."""
    g = torch.Generator().manual_seed(n)
    last = f"model.layers.{n - 1}."
    out = {f"model.layers.{n}." + k[len(last):]: v.clone() for k, v in state.items() if k.startswith(last)}
    out.update({
        f"model.layers.{n}.eh_proj.weight": 0.1 * torch.randn(d, 2 * d, generator=g),
        f"model.layers.{n}.enorm.weight": 1 + 0.3 * torch.randn(d, generator=g),
        f"model.layers.{n}.hnorm.weight": 1 + 0.3 * torch.randn(d, generator=g),
        f"model.layers.{n}.embed_tokens.weight": torch.randn(vocab, d, generator=g),
        f"model.layers.{n}.shared_head.head.weight": torch.randn(vocab, d, generator=g),
        f"model.layers.{n}.shared_head.norm.weight": 1 + 0.3 * torch.randn(d, generator=g),
    })
    return out


def make(root, seed, with_nextn, **config):
    """(model, per-expert folder, fused folder); with `with_nextn`, layer num_hidden_layers added to both."""
    cfg = transformers.Glm4MoeConfig(**{**COMMON, **config})
    torch.manual_seed(seed)
    model = transformers.Glm4MoeForCausalLM(cfg).eval()
    randomize(model)
    per_expert, fused = root / "per-expert", root / "fused"
    model.save_pretrained(str(per_expert))
    glm_tokenizer().save_pretrained(str(per_expert))
    fused_copy(model, per_expert, fused)
    if with_nextn:
        n, d = cfg.num_hidden_layers, cfg.hidden_size
        for folder in (per_expert, fused):
            state = load_file(str(folder / "model.safetensors"))
            state.update(nextn_layer(state, n, d, cfg.vocab_size))
            save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return model, per_expert, fused


# name -> (seed, NextN tensors saved, config): each a different set of the switches GLM-4.5's configs have.
MAKERS = {
    # GLM-4.5's 355B shape: biases, q/k norms, untied, one NextN layer.
    "nextn": (1, True, dict(num_hidden_layers=3, attention_bias=True, use_qk_norm=True, tie_word_embeddings=False,
                            num_nextn_predict_layers=1)),
    # GLM-4.5-Air's: biases without q/k norms; tied output, no NextN layer, a quarter of each head rotated.
    "tied": (2, False, dict(num_hidden_layers=2, attention_bias=True, use_qk_norm=False, tie_word_embeddings=True,
                            num_nextn_predict_layers=0, norm_topk_prob=False,
                            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25})),
    # As transformers saves it: num_nextn_predict_layers 1 and no layer for it.
    "saved": (3, False, dict(num_hidden_layers=2, tie_word_embeddings=False)),
}
LAYOUTS = ("per_expert", "fused")


@pytest.fixture(scope="module")
def glm(tmp_path_factory):
    """name -> {"model", "per_expert", "fused"} (each layout: (folder, our gguf, stderr))."""
    out = {}
    for name, (seed, with_nextn, config) in MAKERS.items():
        root = tmp_path_factory.mktemp(name)
        model, per_expert, fused = make(root, seed, with_nextn, **config)
        case = {"model": model}
        for layout, folder in zip(LAYOUTS, (per_expert, fused)):
            ours = root / f"{layout}.gguf"
            r = convert(folder, ours)
            assert r.returncode == 0, r.stderr
            case[layout] = (folder, ours, r.stderr)
        out[name] = case
    return out


@pytest.fixture(scope="module")
def reference(glm, tmp_path_factory):
    """name -> the GGUF llama.cpp's converter writes from the per-expert folder."""
    need_llama_cpp()
    root = tmp_path_factory.mktemp("reference")
    jobs = [(name, str(case["per_expert"][0]), str(root / f"{name}.gguf"), "f32") for name, case in glm.items()]
    run_reference("glm4", [j[1:] for j in jobs])
    return {name: Path(path) for name, _, path, _ in jobs}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_tensors_and_keys_equal_llama_cpp_converter(glm, reference, name, layout):
    ours, theirs = glm[name][layout][1], reference[name]
    a, b, ka, kb = same_gguf(ours, theirs)
    assert "blk.1.exp_probs_b.bias" in a and "blk.0.ffn_gate.weight" in a and "blk.1.ffn_gate_shexp.weight" in a


def test_nextn_layer_kept_as_llama_cpp_keeps_it(glm):
    a, keys = tensors_of(glm["nextn"]["per_expert"][1]), keys_of(glm["nextn"]["per_expert"][1])
    assert keys["glm4moe.block_count"][1] == 4 and keys["glm4moe.nextn_predict_layers"][1] == 1
    for t in ("eh_proj", "enorm", "hnorm", "embed_tokens", "shared_head_head", "shared_head_norm"):
        assert f"blk.3.nextn.{t}.weight" in a, t
    assert "blk.3.ffn_gate_exps.weight" in a and "blk.3.attn_q.bias" in a
    assert a["blk.3.nextn.eh_proj.weight"][1] == [128, 64]  # gguf order: [2 hidden, hidden]


def test_nextn_count_without_its_layer_is_said(glm):
    keys = keys_of(glm["saved"]["per_expert"][1])
    assert keys["glm4moe.block_count"][1] == 3 and keys["glm4moe.nextn_predict_layers"][1] == 1
    assert not any(t.startswith("blk.2.") for t in tensors_of(glm["saved"]["per_expert"][1]))
    stderr = glm["saved"]["per_expert"][2]
    assert "note: num_nextn_predict_layers counts 1 next-token-prediction layer(s) the weights do not hold" in stderr, stderr
    assert "note:" not in glm["nextn"]["per_expert"][2]


def test_glm_special_tokens(glm):
    keys = keys_of(glm["nextn"]["per_expert"][1])
    tokens = keys["tokenizer.ggml.tokens"][1]
    for kind, text in (("bos", "[gMASK]"), ("eos", "<|endoftext|>"), ("eot", "<|user|>"), ("unknown", "<|endoftext|>"),
                       ("eom", "<|observation|>")):
        assert tokens[keys[f"tokenizer.ggml.{kind}_token_id"][1]] == text, kind
    assert keys["tokenizer.ggml.pre"][1] == "glm4"


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_llama_cpp_logits_match_transformers(glm, name, layout):
    model, ours = glm[name]["model"], glm[name][layout][1]
    want = transformers_logits(model, IDS)
    got = llama_cpp_logits(ours, IDS)[:, : want.shape[1]]
    assert_close_logits(got, want)


ROPE = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
# Keys that would make llama.cpp's glm4moe compute something else than transformers' Glm4Moe.
REFUSED = [
    ({"n_group": 2, "topk_group": 1}, "key `topk_group` is below n_group: llama.cpp's glm4moe architecture chooses experts among all groups"),
    ({"rope_parameters": {**ROPE, "rope_type": "linear", "factor": 2.0}}, "rope type `linear`: llama.cpp's converter writes no rope scaling for glm4moe"),
    ({"quantization_config": {"quant_method": "fp8"}}, "key `quantization_config` is set"),
    ({"n_shared_experts": None}, "key `n_shared_experts` is absent or 0"),
    ({"hidden_act": "gelu"}, "key `hidden_act` is `gelu`"),
    ({"rope_parameters": {**ROPE, "partial_rotary_factor": 0.3125}}, "key `partial_rotary_factor` rotates an odd number"),
    ({"num_nextn_predict_layers": 600}, "key `num_nextn_predict_layers` is 600, outside [0, 509]"),
]


@pytest.mark.parametrize("changes,text", REFUSED)
def test_keys_refused_by_name(glm, tmp_path, changes, text):
    folder = edited(glm["nextn"]["per_expert"][0], tmp_path, changes)
    err = refused(folder, tmp_path / "out.gguf")
    assert "config.json" in err and text in err, err


def test_nextn_layer_missing_a_tensor_is_refused_by_name(glm, tmp_path):
    folder = with_weights(glm["nextn"]["per_expert"][0], tmp_path, lambda state: state.pop("model.layers.3.eh_proj.weight"))
    err = refused(folder, tmp_path / "out.gguf")
    assert "tensor model.layers.3.eh_proj.weight is missing (llama.cpp needs blk.3.nextn.eh_proj.weight)" in err, err


def test_without_norm_topk_prob_the_weights_are_renormalized(glm, tmp_path):
    """Glm4MoeConfig's default is true; llama.cpp's converter writes no key then, and its loader would not renormalize."""
    folder = edited(glm["nextn"]["per_expert"][0], tmp_path, {"norm_topk_prob": None})
    out = converted_ok(folder, tmp_path / "out.gguf")
    assert keys_of(out)["glm4moe.expert_weights_norm"][1] is True
