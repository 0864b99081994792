"""Dense architectures of issue 35 (StarCoder2, StableLM, Cohere) made by transformers 5 ->
`safeweights convert FOLDER OUT.gguf` -> llama.cpp.

Each architecture is a tiny random model made here by transformers 5.24 (nothing downloaded), converted
by our CLI to an F32 GGUF and judged twice:

(a) against the pinned llama.cpp's own converter (`convert_hf_to_gguf.py` of SAFEWEIGHTS_LLAMA_CPP, run
    offline with the clients' torch and its own gguf-py) on the same folder: the same tensors (name,
    type, shape, bytes) and the same keys with the same values, but for the deliberate differences
    (test_hf_gguf_moe's, and DELIBERATE_BY_ARCH's);
(b) llama.cpp (llama-cpp-python) gives the logits transformers gives (f32; GELU models against
    transformers with ggml's float16 GELU table, as test_hf_gguf_llamacpp does for Gemma).

Config keys llama.cpp would compute otherwise are refused by name, and no file is written.
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

from gguf_helpers import (F32_TOLERANCE, GELU_FP16_TOLERANCE, IDS, REFERENCE_RUNNER, assert_close_logits, bpe_tokenizer,  # noqa: E402
                          convert, edited, ggml_gelu, keys_of, llama_cpp_logits, need_llama_cpp, refused, run_reference, same_gguf,
                          transformers_logits, with_weights)

PRE = "qwen2"  # the pre-tokenizer both converters name (one reference run answers one name)

WINDOW = 8  # starcoder2-window's sliding window, below IDS' 12 tokens
COMMON = dict(vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, bos_token_id=0, eos_token_id=1, pad_token_id=None)


def save(model, folder):
    """`model` with its norms and biases away from their initial 1 and 0 (so a wrong one would show),
    saved by transformers with a Qwen2-style byte-level BPE tokenizer; returns the model."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or ("layernorm" in name and name.endswith(".weight")):
                p.copy_(1 + 0.3 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.3 * torch.randn_like(p))
    model.save_pretrained(str(folder))
    bpe_tokenizer(PRE).save_pretrained(str(folder))
    return model


def starcoder2(folder):
    """Biases everywhere (use_bias), LayerNorm, GELU MLP; tied embeddings (StarCoder2's default)."""
    cfg = transformers.Starcoder2Config(norm_epsilon=1e-5, use_bias=True, sliding_window=None, tie_word_embeddings=True,
                                        rope_parameters={"rope_type": "default", "rope_theta": 100000.0}, **COMMON)
    torch.manual_seed(21)
    return save(transformers.Starcoder2ForCausalLM(cfg).eval(), folder)


def starcoder2_window(folder):
    """StarCoder2 as released: a sliding window (here 8 of 256; 4096 of 16384 released) that transformers
    applies and llama.cpp's starcoder2 does not: converted with the window as the context and a note."""
    cfg = transformers.Starcoder2Config(norm_epsilon=1e-5, use_bias=True, sliding_window=WINDOW, tie_word_embeddings=True,
                                        rope_parameters={"rope_type": "default", "rope_theta": 100000.0}, **COMMON)
    torch.manual_seed(28)
    return save(transformers.Starcoder2ForCausalLM(cfg).eval(), folder)


def stablelm(folder):
    """StableLM 2 1.6B's shape: sequential residual, q/k/v biases, a quarter of each head rotated."""
    cfg = transformers.StableLmConfig(layer_norm_eps=1e-5, use_qkv_bias=True, qk_layernorm=False, use_parallel_residual=False,
                                      tie_word_embeddings=False, hidden_act="silu",
                                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
                                      **COMMON)
    torch.manual_seed(22)
    return save(transformers.StableLmForCausalLM(cfg).eval(), folder)


def stablelm_parallel(folder, qk_layernorm=False, seed=23):
    """StableLM 2 12B's shape: parallel residual, half of each head rotated, another rope base (which
    llama.cpp's converter does not write: a deliberate difference); with its per-head q/k LayerNorms
    when `qk_layernorm`."""
    cfg = transformers.StableLmConfig(layer_norm_eps=1e-5, use_qkv_bias=False, qk_layernorm=qk_layernorm, use_parallel_residual=True,
                                      tie_word_embeddings=False, hidden_act="silu",
                                      rope_parameters={"rope_type": "default", "rope_theta": 50000.0, "partial_rotary_factor": 0.5},
                                      **COMMON)
    torch.manual_seed(seed)
    return save(transformers.StableLmForCausalLM(cfg).eval(), folder)


def stablelm_qk_norm(folder):
    return stablelm_parallel(folder, qk_layernorm=True, seed=25)


def cohere(folder):
    """Command-R: parallel block, bias-free LayerNorm, interleaved rope, logit_scale, tied output."""
    cfg = transformers.CohereConfig(layer_norm_eps=1e-5, logit_scale=0.25, use_qk_norm=False, attention_bias=False, tie_word_embeddings=True,
                                    rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **COMMON)
    torch.manual_seed(24)
    return save(transformers.CohereForCausalLM(cfg).eval(), folder)


def cohere_qk_norm(folder):
    """Command R+'s shape: per-head q/k LayerNorms, which llama.cpp reads from 64 layers on (tiny layers)."""
    cfg = transformers.CohereConfig(**dict(COMMON, num_hidden_layers=64), layer_norm_eps=1e-5, logit_scale=0.25, use_qk_norm=True,
                                    attention_bias=False, tie_word_embeddings=True,
                                    rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    torch.manual_seed(27)
    return save(transformers.CohereForCausalLM(cfg).eval(), folder)


def cohere2(folder, attention_bias=False, seed=26):
    """Command R7B: Cohere's layer, a sliding window of 4 over the 12 tokens of IDS on three layers of
    four (rope on those only). llama.cpp's converter reads `rotary_pct`, which transformers 5 neither
    writes nor reads: the folder gets 1.0, what transformers computes. With `attention_bias`, the
    projections' biases all zero (so they compute nothing), which llama.cpp's converter leaves out."""
    cfg = transformers.Cohere2Config(**dict(COMMON, num_hidden_layers=4), layer_norm_eps=1e-5, logit_scale=0.25, head_dim=16,
                                     sliding_window=4, attention_bias=attention_bias, tie_word_embeddings=True,
                                     rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, attn_implementation="eager")
    torch.manual_seed(seed)
    model = save(transformers.Cohere2ForCausalLM(cfg).eval(), folder)
    if attention_bias:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("_proj.bias"):
                    p.zero_()
        model.save_pretrained(str(folder))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(config, rotary_pct=1.0), indent=2))
    return model


# arch -> (maker, whether its MLP is GELU); the order of the task.
MAKERS = {"starcoder2": (starcoder2, True), "stablelm": (stablelm, False), "stablelm-parallel": (stablelm_parallel, False),
          "stablelm-qk-norm": (stablelm_qk_norm, False), "cohere": (cohere, False),
          "cohere-qk-norm": (cohere_qk_norm, False), "cohere2": (cohere2, False), "starcoder2-window": (starcoder2_window, True),
          "cohere2-bias": (lambda folder: cohere2(folder, attention_bias=True, seed=29), False)}
# (arch) -> the CLI's stderr (its notes).
STDERR = {}
# Keys llama.cpp's converter writes otherwise, on purpose (docs/GGUF.md's list of differences), with our
# value: its StableLM converter writes no rope base, so its loader takes 10000 whatever the model's.
# StarCoder2 with a sliding window below its context: llama.cpp's converter writes the context as if there
# were none; we write the window, within which llama.cpp (full attention) computes what transformers does.
DELIBERATE_BY_ARCH = {"stablelm": {"stablelm.rope.freq_base": 10000.0}, "stablelm-parallel": {"stablelm.rope.freq_base": 50000.0},
                      "starcoder2-window": {"starcoder2.context_length": WINDOW}}
# Folders the pinned converter fails on: its StableLMModel.modify_tensors returns the generator that
# stacks the per-head q/k norms from inside a generator, so the stacking never runs ("Unprocessed
# norms"). Our file is judged by llama.cpp's logits alone (its loader and graph read attn_q_norm).
NO_REFERENCE = {"stablelm-qk-norm"}
COMPARED = [arch for arch in MAKERS if arch not in NO_REFERENCE]
# Folders the pinned converter reads only with --no-lazy: its Cohere2 check that the attention biases are
# zero (torch.any(bias != 0)) cannot evaluate a lazy tensor and stops ("len() of a 0-d tensor").
EAGER = {"cohere2-bias"}
EAGER_RUNNER = REFERENCE_RUNNER.replace('"--outtype", outtype]', '"--outtype", outtype, "--no-lazy"]')
assert EAGER_RUNNER != REFERENCE_RUNNER


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    """arch -> (model, folder, our gguf)."""
    out = {}
    for arch, (make, _) in MAKERS.items():
        root = tmp_path_factory.mktemp(arch)
        folder = root / "model"
        model = make(folder)
        ours = root / "ours.gguf"
        r = convert(folder, ours)
        assert r.returncode == 0, r.stderr
        out[arch] = (model, folder, ours)
        STDERR[arch] = r.stderr
    return out


@pytest.fixture(scope="module")
def reference(dense, tmp_path_factory):
    """arch -> the GGUF llama.cpp's converter writes from the same folder."""
    need_llama_cpp()
    root = tmp_path_factory.mktemp("reference")
    for runner, eager in ((REFERENCE_RUNNER, False), (EAGER_RUNNER, True)):
        jobs = [(str(folder), str(root / f"{arch}.gguf"), "f32") for arch, (_, folder, _) in dense.items()
                if arch in COMPARED and (arch in EAGER) == eager]
        run_reference(PRE, jobs, runner=runner)
    return {arch: root / f"{arch}.gguf" for arch in COMPARED}


@pytest.mark.parametrize("arch", COMPARED)
def test_tensors_and_keys_equal_llama_cpp_converter(dense, reference, arch):
    ours, theirs = dense[arch][2], reference[arch]
    skip = DELIBERATE_BY_ARCH.get(arch, {})
    a, b, ka, kb = same_gguf(ours, theirs, skip)
    for key, value in skip.items():  # each deliberate difference: what we write, and what llama.cpp's converter does not
        assert ka[key][1] == pytest.approx(value) and (key not in kb or kb[key][1] != pytest.approx(value)), key


def both_logits(dense, arch):
    """(llama.cpp's logits of our file, transformers') over IDS; transformers' with ggml's float16-table GELU
    for the GELU architectures."""
    model, _, ours = dense[arch]
    got = llama_cpp_logits(ours, IDS)
    mlps = [layer.mlp for layer in model.model.layers] if MAKERS[arch][1] else []
    with ggml_gelu(mlps, "act" if mlps and hasattr(mlps[0], "act") else "act_fn"):
        want = transformers_logits(model, IDS)
    return got, want


@pytest.mark.parametrize("arch", [arch for arch in MAKERS if arch != "starcoder2-window"])
def test_llama_cpp_logits_match_transformers(dense, arch):
    got, want = both_logits(dense, arch)
    assert_close_logits(got, want, GELU_FP16_TOLERANCE if MAKERS[arch][1] else F32_TOLERANCE, label=arch)


def test_starcoder2_window_is_the_context(dense):
    """llama.cpp's starcoder2 has no sliding window: within the window (the context we write) its logits are
    transformers'; past it transformers attends to the window only and llama.cpp to everything, so they
    differ (which is why the context is the window), and a note says so."""
    got, want = both_logits(dense, "starcoder2-window")
    scale = np.abs(want).max()
    assert np.abs(got[:WINDOW] - want[:WINDOW]).max() <= GELU_FP16_TOLERANCE * scale
    assert np.abs(got[WINDOW:] - want[WINDOW:]).max() > 10 * GELU_FP16_TOLERANCE * scale
    assert keys_of(dense["starcoder2-window"][2])["starcoder2.context_length"][1] == WINDOW
    assert (f"note: sliding_window ({WINDOW}) is below max_position_embeddings (256): llama.cpp's starcoder2 attends to the whole "
            "context, so starcoder2.context_length is the window") in STDERR["starcoder2-window"]


# Keys transformers reads that would make llama.cpp compute something else: (arch, key, value, message).
REFUSED = [
    ("starcoder2", "use_bias", False, "`use_bias` is false: llama.cpp's starcoder2 architecture requires the projections' biases"),
    ("starcoder2", "hidden_act", "gelu", "`hidden_act` is `gelu`; llama.cpp's starcoder2 architecture computes gelu_pytorch_tanh"),
    ("stablelm", "tie_word_embeddings", True, "`tie_word_embeddings` is true: llama.cpp's stablelm architecture requires its own output"),
    ("stablelm", "rope_parameters", {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
     "`rope_parameters` rope type `linear`: llama.cpp's converter writes no rope scaling for stablelm"),
    ("stablelm", "hidden_act", "gelu", "`hidden_act` is `gelu`; llama.cpp's stablelm architecture computes silu"),
    ("cohere", "use_qk_norm", True, "`use_qk_norm` is true with 2 layers: llama.cpp's command-r reads q/k norms only from 64 layers on"),
    ("cohere-qk-norm", "use_qk_norm", False, "`num_hidden_layers` is 64: llama.cpp's command-r requires q/k norms from 64 layers on"),
    ("cohere", "attention_bias", True, "`attention_bias` is true: llama.cpp's command-r architecture has no attention biases"),
    ("cohere", "rope_parameters", {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0},
     "`rope_parameters` rope type `linear`: llama.cpp's converter writes no rope scaling for command-r"),
    ("cohere2", "rotary_pct", 0.5, "`rotary_pct` is not 1: transformers' Cohere2 rotates whole heads"),
    ("cohere2", "layer_types", ["full_attention"] * 4, "`layer_types` does not follow llama.cpp's cohere2 pattern (layer 0 must be sliding_attention)"),
    ("cohere", "tie_word_embeddings", False, "`tie_word_embeddings` is false: llama.cpp's command-r architecture computes the output with"),
]


@pytest.mark.parametrize("arch,key,value,text", REFUSED)
def test_keys_refused_by_name(dense, tmp_path, arch, key, value, text):
    err = refused(edited(dense[arch][1], tmp_path, {key: value}), tmp_path / "out.gguf")
    assert "config.json" in err and text in err, err


def test_cohere2_nonzero_attention_bias_refused_by_name(dense, tmp_path):
    """llama.cpp's cohere2 has no attention biases: zero ones are left out (cohere2-bias, judged above), any
    other refused naming the tensor, as llama.cpp's converter refuses it."""
    def nonzero(state):
        state["model.layers.0.self_attn.q_proj.bias"] = torch.full_like(state["model.layers.0.self_attn.q_proj.bias"], 0.5)
    err = refused(with_weights(dense["cohere2-bias"][1], tmp_path, nonzero), tmp_path / "out.gguf")
    assert "model.layers.0.self_attn.q_proj.bias" in err, err
    assert "attention bias is not zero: llama.cpp's cohere2 architecture has no attention biases" in err, err


# StableLM's switches decide which tensors a layer has: a folder whose tensors say otherwise is refused,
# naming the tensor (transformers would ignore it, or start it from random weights).
SWITCHES = [
    ("stablelm-qk-norm", "qk_layernorm", False, "_layernorm.norms.",
     "tensor has no name in llama.cpp's stablelm architecture"),
    ("stablelm-parallel", "use_qkv_bias", True, "tensor model.layers.0.self_attn.q_proj.bias is missing (llama.cpp needs blk.0.attn_q.bias)", ""),
    ("stablelm", "use_parallel_residual", True, "model.layers.0.post_attention_layernorm", "tensor has no name in llama.cpp's stablelm"),
]


@pytest.mark.parametrize("arch,key,value,tensor,text", SWITCHES)
def test_stablelm_switches_agree_with_the_tensors(dense, tmp_path, arch, key, value, tensor, text):
    err = refused(edited(dense[arch][1], tmp_path, {key: value}), tmp_path / "out.gguf")
    assert tensor in err and text in err, err
