"""Gemma 4 text models (issue 35) made by transformers 5 -> `safeweights convert FOLDER OUT.gguf` -> llama.cpp.

Each variant is a tiny random model made here by transformers 5.24 (nothing downloaded), saved with
transformers' GemmaTokenizer (a byte_fallback BPE in tokenizer.json), converted by our CLI to an F32
GGUF and judged:

(a) against the pinned llama.cpp's own converter (`convert_hf_to_gguf.py`, Gemma4Model) on the same
    folder: the same tensors (name, type, shape, bytes) and the same keys with the same values, but for
    test_hf_gguf_moe's deliberate differences (general.name and the like);
(b) llama.cpp (llama-cpp-python) gives the logits transformers gives (GELU against transformers with
    ggml's float16 GELU table, as test_hf_gguf_dense2 does for Gemma);
(c) config keys llama.cpp would compute otherwise are refused by name, and no file is written.

The variants: the E2B-like layout (per-layer embeddings, layers that reuse keys and values, full-attention
layers with a larger head, final logit soft-capping); keys as values (attention_k_eq_v) with fewer KV
heads on the full layers; the double-wide MLP of the shared layers; and Gemma4ForConditionalGeneration,
whose text model is converted (its vision tower left out, with a note).
"""

import io
import json
import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp")
spm = pytest.importorskip("sentencepiece")

from gguf_helpers import (CORPUS, assert_close_logits, convert, edited, ggml_gelu, llama_cpp_logits, need_llama_cpp,  # noqa: E402
                          refused, run_reference, same_gguf, transformers_logits)

# ggml's GELU rounds its input to float16: where llama.cpp's input and transformers' differ by float32
# rounding, one float16 step (2^-11 of the value) can fall between them. Gemma 4 has two GELUs a layer
# (the MLP and the per-layer input gate) over four layers: measured 4.5e-5 to 5.2e-4 of the largest logit.
GEMMA4_GELU_TOLERANCE = 1e-3
IDS = [2, 5, 77, 123, 250, 399, 42, 8, 300, 17, 200, 64]
# Gemma 4's chat-format tokens llama.cpp's converter types USER_DEFINED; two of them in the vocabulary.
VISIBLE = ["<|channel>", "<channel|>"]

TEXT = dict(vocab_size=400, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            max_position_embeddings=256, sliding_window=4, rms_norm_eps=1e-6, bos_token_id=2, eos_token_id=1, pad_token_id=0,
            vocab_size_per_layer_input=400)
# A sliding window of 4 over the 12 tokens of IDS; every other layer a full-attention one.
FOUR_LAYERS = ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]


def gemma_tokenizer(where):
    """transformers' GemmaTokenizer from a SentencePiece BPE with Gemma's special pieces (no dummy prefix),
    saved as tokenizer.json (a BPE with byte_fallback) and tokenizer_config.json."""
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS), model_writer=buf, vocab_size=400, model_type="bpe", byte_fallback=True,
        character_coverage=1.0, pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>",
        unk_piece="<unk>", user_defined_symbols=["<mask>"] + VISIBLE, split_digits=True, minloglevel=3,
        normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=False)
    src = where / "spm"
    src.mkdir()
    (src / "tokenizer.model").write_bytes(buf.getvalue())
    (src / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "GemmaTokenizer"}))
    return transformers.AutoTokenizer.from_pretrained(str(src))


def save(model, folder):
    """`model` with its norms and per-layer scales away from 1 (so a wrong one would show), saved with
    Gemma's tokenizer; returns the model."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.3 * torch.randn_like(p))
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                b.copy_(0.5 + torch.rand_like(b))
    model.save_pretrained(str(folder))
    tok = gemma_tokenizer(folder.parent)
    assert len(tok) == 400, len(tok)
    tok.save_pretrained(str(folder))
    return model


def causal(folder, seed=41, **extra):
    """Gemma 4 E2B's layout: per-layer embeddings, the last two layers reusing keys and values, the full
    layers' heads twice the size (per_layer_config), final logit soft-capping."""
    args = dict(TEXT, num_hidden_layers=4, layer_types=FOUR_LAYERS, global_head_dim=32, hidden_size_per_layer_input=8,
                num_kv_shared_layers=2, final_logit_softcapping=30.0, attn_implementation="eager")
    args.update(extra)
    torch.manual_seed(seed)
    return save(transformers.Gemma4ForCausalLM(transformers.Gemma4TextConfig(**args)).eval(), folder)


def k_eq_v(folder):
    """Gemma 4 31B's attention: the full layers' keys are their values (no v_proj) with one KV head;
    no per-layer embeddings, no shared layers."""
    return causal(folder, seed=42, attention_k_eq_v=True, num_global_key_value_heads=1, hidden_size_per_layer_input=0,
                  num_kv_shared_layers=0, final_logit_softcapping=None)


def double_wide(folder):
    """The shared layers' MLP twice as wide (use_double_wide_mlp): a feed-forward width per layer."""
    return causal(folder, seed=43, use_double_wide_mlp=True)


def multimodal(folder):
    """Gemma4ForConditionalGeneration with a one-layer vision tower: its text model is converted."""
    text = dict(TEXT, num_hidden_layers=4, layer_types=FOUR_LAYERS, global_head_dim=32, hidden_size_per_layer_input=8,
                num_kv_shared_layers=2)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, head_dim=16)
    cfg = transformers.Gemma4Config(text_config=text, vision_config=vision, audio_config=None)
    cfg.text_config._attn_implementation = "eager"
    torch.manual_seed(44)
    return save(transformers.Gemma4ForConditionalGeneration(cfg).eval(), folder)


MAKERS = {"causal": causal, "k-eq-v": k_eq_v, "double-wide": double_wide, "multimodal": multimodal}


@pytest.fixture(scope="module")
def gemma4(tmp_path_factory):
    """variant -> (model, folder, our gguf, the CLI's stderr)."""
    out = {}
    for name, make in MAKERS.items():
        root = tmp_path_factory.mktemp(name)
        folder = root / "model"
        model = make(folder)
        ours = root / "ours.gguf"
        r = convert(folder, ours)
        assert r.returncode == 0, r.stderr
        out[name] = (model, folder, ours, r.stderr)
    return out


@pytest.fixture(scope="module")
def reference(gemma4, tmp_path_factory):
    """variant -> the GGUF llama.cpp's converter writes from the same folder."""
    need_llama_cpp()
    root = tmp_path_factory.mktemp("reference")
    jobs = [(str(folder), str(root / f"{name}.gguf"), "f32") for name, (_, folder, _, _) in gemma4.items()]
    run_reference("default", jobs)
    return {name: root / f"{name}.gguf" for name in gemma4}


@pytest.mark.parametrize("name", list(MAKERS))
def test_tensors_and_keys_equal_llama_cpp_converter(gemma4, reference, name):
    ours, theirs = gemma4[name][2], reference[name]
    a, b, ka, kb = same_gguf(ours, theirs)


def test_variants_write_what_they_change(gemma4):
    """Each variant's own keys, read back (so that a variant which changed nothing would show)."""
    def field(name, key):
        return gguf.GGUFReader(str(gemma4[name][2])).fields[key].contents()
    assert field("causal", "gemma4.attention.shared_kv_layers") == 2
    assert field("causal", "gemma4.embedding_length_per_layer_input") == 8
    assert field("causal", "gemma4.attention.sliding_window_pattern") == [True, False, True, False]
    assert field("causal", "gemma4.final_logit_softcapping") == pytest.approx(30.0)
    assert field("k-eq-v", "gemma4.attention.head_count_kv") == [2, 1, 2, 1]
    assert field("double-wide", "gemma4.feed_forward_length") == [128, 128, 256, 256]
    types = field("causal", "tokenizer.ggml.token_type")
    tokens = field("causal", "tokenizer.ggml.tokens")
    assert [types[tokens.index(t)] for t in VISIBLE] == [gguf.TokenType.USER_DEFINED] * 2
    assert types[tokens.index("<bos>")] == gguf.TokenType.CONTROL


def test_multimodal_notes_the_towers_left_out(gemma4):
    assert "note: Gemma4ForConditionalGeneration: the text model was converted" in gemma4["multimodal"][3]


def gelus(model):
    """The model's modules with a GELU: each layer's MLP, its experts where the model has them, and the
    layer itself (its per-layer input gate)."""
    layers = model.model.language_model.layers if hasattr(model.model, "language_model") else model.model.layers
    return [m for layer in layers for m in (layer.mlp, getattr(layer, "experts", None), layer) if hasattr(m, "act_fn")]


def logits_match(model, ours, name):
    """Judge (b): llama.cpp's logits from the GGUF `ours` against `model`'s with ggml's GELU, and the same argmax."""
    got = llama_cpp_logits(ours, IDS)
    with ggml_gelu(gelus(model)):
        want = transformers_logits(model, IDS)
    assert_close_logits(got, want, GEMMA4_GELU_TOLERANCE, label=name)


@pytest.mark.parametrize("name", list(MAKERS))
def test_llama_cpp_logits_match_transformers(gemma4, name):
    model, _, ours, _ = gemma4[name]
    logits_match(model, ours, name)


ROPE = {"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}

# Keys transformers reads that would make llama.cpp compute something else: (variant, key, value, message);
# value None removes the key.
REFUSED = [
    ("causal", "enable_moe_block", True, "`num_experts` is missing"),  # experts: test_hf_gguf_gemma4_moe.py
    ("causal", "num_experts", 4, "`num_experts` is set without enable_moe_block: transformers builds no experts"),
    ("causal", "attention_bias", True, "`attention_bias` is true: llama.cpp's gemma4 architecture has no such computation"),
    ("causal", "use_bidirectional_attention", "all", "`use_bidirectional_attention` is `all`"),
    ("causal", "attn_logit_softcapping", 50.0, "`attn_logit_softcapping` is set: llama.cpp's gemma4 architecture does not cap"),
    ("causal", "layer_types", FOUR_LAYERS[::-1], "`layer_types` ends with a sliding layer"),
    ("causal", "per_layer_config", {"1": {"head_dim": 32}, "3": {"head_dim": 64}}, "differs between full-attention layers"),
    ("causal", "per_layer_config", {"0": {"head_dim": 32}, "1": {"head_dim": 32}, "3": {"head_dim": 32}}, "changes sliding layer 0"),
    ("causal", "per_layer_config", {"1": {"head_dim": 32, "sliding_window": 8}, "3": {"head_dim": 32}},
     "`per_layer_config.1.sliding_window` is not converted"),
    ("causal", "hidden_size_per_layer_input", None, "`hidden_size_per_layer_input` is missing"),
    ("causal", "vocab_size_per_layer_input", 300, "`vocab_size_per_layer_input` is not vocab_size"),
    ("causal", "global_head_dim", 64, "`global_head_dim` differs from per_layer_config"),
    ("causal", "tie_word_embeddings", False, "`tie_word_embeddings` is false"),
    ("causal", "hidden_activation", "silu", "`hidden_activation` is `silu`"),
    ("causal", "rope_parameters", dict(ROPE, full_attention={"rope_type": "default", "rope_theta": 1000000.0}),
     "is not a `proportional` rope"),
    ("causal", "rope_parameters", dict(ROPE, full_attention=dict(ROPE["full_attention"], factor=8.0)),
     "key `factor` is not understood for rope type `proportional`"),
    ("causal", "rope_parameters", dict(ROPE, sliding_attention={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}),
     "is not the default rope: llama.cpp scales no sliding-window rope"),
    ("causal", "rope_parameters", dict(ROPE, sliding_attention=dict(ROPE["sliding_attention"], partial_rotary_factor=0.5)),
     "partial_rotary_factor` is not 1: transformers' default rope rotates whole heads"),
    ("k-eq-v", "attention_k_eq_v", False, "self_attn.v_proj.weight is missing (llama.cpp needs blk.1.attn_v.weight)"),
]


@pytest.mark.parametrize("name,key,value,text", REFUSED)
def test_keys_refused_by_name(gemma4, tmp_path, name, key, value, text):
    err = refused(edited(gemma4[name][1], tmp_path, {key: value}), tmp_path / "out.gguf")
    assert text in err, err


@pytest.mark.parametrize("hf_class", ["Gemma4UnifiedForConditionalGeneration", "Gemma4AssistantForCausalLM"])
def test_other_gemma4_classes_refused_by_name(gemma4, tmp_path, hf_class):
    """Gemma 4's unified and assistant (draft) models are other llama.cpp architectures: refused by name."""
    err = refused(edited(gemma4["causal"][1], tmp_path, {"architectures": [hf_class]}), tmp_path / "out.gguf")
    assert f"architecture `{hf_class}` is not converted" in err, err
