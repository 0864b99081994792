"""Hugging Face folders made by transformers 5 -> `safeweights convert FOLDER OUT.gguf` -> llama.cpp.

Each case makes a tiny random model with transformers itself (LlamaConfig + save_pretrained, a
tokenizer trained here with sentencepiece or tokenizers: nothing is downloaded), converts it with our
CLI to an F32 GGUF, and checks it against the real clients:

- gguf-py (llama.cpp's reader) reads the file: llama.cpp's rope keys with the value types its loader
  wants, and for llama3 scaling the rope_freqs tensor, compared with the factors transformers' own rope
  initialisation implies (default inverse frequencies over llama3 ones);
- llama.cpp (llama-cpp-python) gives the logits transformers gives for the same tokens, f32 within
  F32_TOLERANCE of the largest logit, and tokenizes text with Unicode, digits, leading spaces and
  special tokens as the source tokenizer does;
- transformers' own GGUF loader (from_pretrained(..., gguf_file=...)) gives back the source's weights
  (llama.cpp's q/k permutation reversed) and, where its config reader takes every key the
  architecture needs, the source's logits; its tokenizer gives the ids of the source tokenizer.json;
- what llama.cpp cannot compute as transformers does (dynamic NTK, unknown rope types or keys, another
  activation) is refused with a message naming the file and the key, and no file is written.

Both config layouts are covered: transformers 5 writes rope_parameters; the transformers 4 layout
(rope_theta and rope_scaling at the top) is the same config.json rewritten, which transformers 5 still
reads to the same model. Run with the clients' python (SAFEWEIGHTS_CLIENTS_PYTHON); the llama.cpp checks
skip, saying why, only when llama_cpp is not importable.
"""

import copy
import io
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")
spm = pytest.importorskip("sentencepiece")
tokenizers = pytest.importorskip("tokenizers")

try:
    import llama_cpp
except ImportError as e:  # the only skip the brief allows
    llama_cpp = None
    LLAMA_CPP_MISSING = f"llama_cpp is not importable ({e}): llama.cpp logits and tokenizer checks skipped"
    print(LLAMA_CPP_MISSING)

from gguf_helpers import (CORPUS, F32_TOLERANCE, GELU_FP16_TOLERANCE, IDS, bpe_tokenizer, convert, converted_ok, ggml_gelu,  # noqa: E402
                          llama_cpp_logits, llama_cpp_model, transformers_logits)
# Other test files import these from here: they are gguf_helpers' now (re-exported).
from gguf_helpers import CLI, Float16TableGelu  # noqa: E402,F401
PLAIN = " Hello  world 12345 café 東京 привет 🙂\n  spaces\tand tabs"
# llama.cpp's SentencePiece tokenizer adds its space prefix after every special token too (SentencePiece's
# legacy behaviour), transformers 5's Metaspace only at the start: SentencePiece texts end with one. And
# Metaspace adds no prefix to a text that starts with a space, where llama.cpp (like SentencePiece's
# add_dummy_prefix) always adds one: the tokenizer.json-only case starts with a letter.
TEXTS = {"spm": PLAIN + "</s>", "spm-json": PLAIN.lstrip() + "</s>", "bpe": PLAIN + "</s> done<s>x",
         "bpe-llama-bpe": PLAIN + " 1234567 don't</s> done<s>x", "bpe-qwen2": PLAIN + " 1234567 don't</s> done<s>x"}

ROPES = {
    "default": {"rope_type": "default", "rope_theta": 10000.0},
    "theta500k": {"rope_type": "default", "rope_theta": 500000.0},
    "linear": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0},
    # original 64 with head size 16: some pairs keep their frequency, some are smoothed, some scaled.
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64, "rope_theta": 500000.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "rope_theta": 10000.0},
}


@pytest.fixture(scope="session")
def spm_model(tmp_path_factory):
    """A Llama-2 style SentencePiece model: BPE with byte fallback, digits split."""
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS), model_writer=buf, vocab_size=400, model_type="bpe", byte_fallback=True,
        character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, split_digits=True, minloglevel=3,
        normalization_rule_name="identity", remove_extra_whitespaces=False)  # as Llama 2's
    path = tmp_path_factory.mktemp("spm") / "tokenizer.model"
    path.write_bytes(buf.getvalue())
    return path


def spm_tokenizer(spm_model, where):
    """transformers 5's LlamaTokenizer made from the SentencePiece file (its tokenizer.json has a BPE with
    byte_fallback); tokenizer.model is copied beside it, the Llama-2 / Mistral layout."""
    src = where / "spm-src"
    src.mkdir()
    shutil.copy(spm_model, src / "tokenizer.model")
    (src / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "LlamaTokenizer"}))
    return transformers.AutoTokenizer.from_pretrained(str(src))


def to_transformers4(folder):
    """The same config.json in transformers 4's layout: rope_theta and rope_scaling at the top."""
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    rope = dict(cfg.pop("rope_parameters"))
    cfg["rope_theta"] = rope.pop("rope_theta")
    cfg["rope_scaling"] = None if rope.get("rope_type") == "default" else rope
    path.write_text(json.dumps(cfg, indent=2))


def make_llama(folder, rope, tokenizer, layout="v5", hidden_size=64, intermediate_size=128):
    """A random LlamaForCausalLM (GQA, untied head) saved with its tokenizer; returns the model."""
    cfg = transformers.LlamaConfig(
        vocab_size=400, hidden_size=hidden_size, intermediate_size=intermediate_size, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2, rope_parameters=dict(rope))
    torch.manual_seed(1234)
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # norms away from 1, so a wrong norm would show
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.3 * torch.randn_like(p))
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    if layout == "v4":
        to_transformers4(folder)
    return model


def field(reader, key):
    f = reader.get_field(key)
    return None if f is None else f.contents()


@pytest.fixture(scope="session")
def converted(tmp_path_factory, spm_model):
    """(rope, layout, tokenizer) -> (model, folder, gguf path), converted once per session."""
    cache = {}

    def get(rope, layout="v5", tok="bpe"):
        key = (rope, layout, tok)
        if key not in cache:
            where = tmp_path_factory.mktemp(f"{rope}-{layout}-{tok}")
            tokenizer = spm_tokenizer(spm_model, where) if tok.startswith("spm") else bpe_tokenizer(tok.removeprefix("bpe-") if tok != "bpe" else "gpt-2")
            folder = where / "model"
            model = make_llama(folder, ROPES[rope], tokenizer, layout)
            if tok == "spm":
                shutil.copy(spm_model, folder / "tokenizer.model")
            cache[key] = (model, folder, converted_ok(folder, where / "model.gguf"))
        return cache[key]

    return get


CASES = [(rope, layout) for rope in ROPES for layout in ("v5", "v4")]


@pytest.mark.parametrize("rope,layout", CASES)
def test_rope_keys_as_llama_cpp_writes_them(converted, rope, layout):
    _, _, out = converted(rope, layout)
    reader = gguf.GGUFReader(str(out))
    params = ROPES[rope]
    assert field(reader, "general.architecture") == "llama"
    base = reader.get_field("llama.rope.freq_base")
    assert base.types == [gguf.GGUFValueType.FLOAT32]
    assert field(reader, "llama.rope.freq_base") == pytest.approx(params["rope_theta"])
    names = [t.name for t in reader.tensors]
    if params["rope_type"] in ("linear", "yarn"):
        assert field(reader, "llama.rope.scaling.type") == params["rope_type"]
        assert reader.get_field("llama.rope.scaling.factor").types == [gguf.GGUFValueType.FLOAT32]
        assert field(reader, "llama.rope.scaling.factor") == pytest.approx(params["factor"])
    else:
        assert field(reader, "llama.rope.scaling.type") is None
    if params["rope_type"] == "yarn":
        assert reader.get_field("llama.rope.scaling.original_context_length").types == [gguf.GGUFValueType.UINT32]
        assert field(reader, "llama.rope.scaling.original_context_length") == params["original_max_position_embeddings"]
    if params["rope_type"] == "llama3":
        assert names[0] == "rope_freqs.weight"
    else:
        assert "rope_freqs.weight" not in names


@pytest.mark.parametrize("layout", ["v5", "v4"])
def test_llama3_rope_freqs_are_transformers_factors(converted, layout):
    model, _, out = converted("llama3", layout)
    reader = gguf.GGUFReader(str(out))
    t = next(t for t in reader.tensors if t.name == "rope_freqs.weight")
    assert t.tensor_type == gguf.GGMLQuantizationType.F32
    got = np.asarray(t.data, dtype=np.float32)
    init = transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS["llama3"]
    scaled, _ = init(model.config, "cpu")
    head_dim = model.config.head_dim
    theta = ROPES["llama3"]["rope_theta"]
    plain = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    want = (plain / scaled).numpy()
    # llama.cpp divides each pair's frequency by its factor: the factors are the ratio transformers implies.
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert got.min() == pytest.approx(1.0) and got.max() == pytest.approx(ROPES["llama3"]["factor"])
    assert ((got > 1.0) & (got < ROPES["llama3"]["factor"])).any(), "no smoothed pair: the case tests too little"


@pytest.mark.parametrize("rope,layout", CASES)
def test_llama_cpp_logits_match_transformers(converted, rope, layout):
    if llama_cpp is None:
        pytest.skip(LLAMA_CPP_MISSING)
    model, _, out = converted(rope, layout)
    want = transformers_logits(model, IDS)
    got = llama_cpp_logits(out, IDS)
    err = np.abs(got - want).max() / np.abs(want).max()
    print(f"{rope}/{layout}: max |llama.cpp - transformers| / max |transformers| = {err:.3g}")
    assert err < F32_TOLERANCE


# Stored types other than F32: the weights' rounding plus llama.cpp's own rounding of the activations
# for those products, relative to the largest logit (the bounds docs/GGUF.md states).
TYPE_TOLERANCE = {"f16": 5e-3, "bf16": 2e-2, "q8_0": 5e-2}


@pytest.mark.parametrize("type_", sorted(TYPE_TOLERANCE))
def test_llama_cpp_logits_typed(converted, tmp_path, type_):
    if llama_cpp is None:
        pytest.skip(LLAMA_CPP_MISSING)
    model, folder, _ = converted("llama3", "v5")
    out = tmp_path / f"model-{type_}.gguf"
    r = subprocess.run([CLI, "convert", str(folder), str(out), "--type", type_], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    reader = gguf.GGUFReader(str(out))
    rope_freqs = next(t for t in reader.tensors if t.name == "rope_freqs.weight")
    assert rope_freqs.tensor_type == gguf.GGMLQuantizationType.F32  # 1-D tensors stay F32
    want = transformers_logits(model, IDS)
    got = llama_cpp_logits(out, IDS)
    err = np.abs(got - want).max() / np.abs(want).max()
    print(f"llama3 rope, {type_}: max |llama.cpp - transformers| / max |transformers| = {err:.3g}")
    assert err < TYPE_TOLERANCE[type_]


# K-quants quantize rows in super-blocks of 256 elements (rows of other lengths fall back to a 32-element
# type, as llama.cpp's): the K-quant case uses hidden 256 and intermediate 512, so that every matrix is
# K-quantized. Two bounds, relative to the largest logit:
# - against the source model, the weights' rounding: measured 0.163 for Q4_K and 0.061 for Q6_K (Q8_0
#   above: 0.016). Each bit fewer doubles the step, and these random Gaussian weights have no structure
#   that quantization keeps: 4 bits is about 16 times Q8_0's step, 6 bits about 4 times. The bounds are
#   twice the measured values; a wrong scale, minimum or code order gives errors of order 1.
# - against transformers on the same quantized weights (its GGUF loader dequantizes our bytes with
#   gguf-py): measured 0.015 for both, what llama.cpp's 8-bit rounding of the activations (Q8_K) for
#   these products costs, as for Q8_0 (Q8_0's own bound above, 5e-2, applies).
KQUANT_TOLERANCE = {"q4_k": 0.3, "q6_k": 0.12}
KQUANT_ON_OWN_WEIGHTS = {"q4_k": 5e-2, "q6_k": 5e-2}


@pytest.fixture(scope="session")
def kquant_source(tmp_path_factory):
    where = tmp_path_factory.mktemp("kquant")
    model = make_llama(where / "model", ROPES["llama3"], bpe_tokenizer(), hidden_size=256, intermediate_size=512)
    return model, where / "model"


@pytest.mark.parametrize("type_", sorted(KQUANT_TOLERANCE))
def test_llama_cpp_logits_kquant(kquant_source, tmp_path, type_):
    model, folder = kquant_source
    out = tmp_path / f"model-{type_}.gguf"
    r = subprocess.run([CLI, "convert", str(folder), str(out), "--type", type_], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    want_type = getattr(gguf.GGMLQuantizationType, type_.upper())
    types = {t.name: t.tensor_type for t in gguf.GGUFReader(str(out)).tensors}
    matrices = {n for n, t in types.items() if n not in ("rope_freqs.weight",) and not n.endswith("norm.weight")}
    assert {types[n] for n in matrices} == {want_type}, types
    assert {types[n] for n in set(types) - matrices} == {gguf.GGMLQuantizationType.F32}
    if llama_cpp is None:
        pytest.skip(LLAMA_CPP_MISSING)
    got = llama_cpp_logits(out, IDS)
    err = relative_error(got, transformers_logits(model, IDS))
    # transformers on the same quantized weights (its GGUF loader dequantizes with gguf-py): what is left
    # is llama.cpp's own rounding of the activations (Q8_K) for the K-quant products.
    own = transformers_from_gguf(out, config=copy.deepcopy(model.config))
    err_own = relative_error(got, transformers_logits(own, IDS))
    print(f"llama3 rope, {type_}: against the source {err:.3g}, against transformers on the {type_} weights {err_own:.3g}")
    assert err < KQUANT_TOLERANCE[type_]
    assert err_own < KQUANT_ON_OWN_WEIGHTS[type_]


@pytest.mark.parametrize("tok", ["spm", "spm-json", "bpe", "bpe-llama-bpe", "bpe-qwen2"])
def test_llama_cpp_tokenizes_as_the_source(converted, spm_model, tok):
    """The source: sentencepiece for tokenizer.model, transformers 5's tokenizer for tokenizer.json."""
    if llama_cpp is None:
        pytest.skip(LLAMA_CPP_MISSING)
    _, folder, out = converted("default", "v5", tok)
    text = TEXTS[tok]
    if tok.startswith("bpe"):
        want_pre = {"bpe": "gpt-2", "bpe-llama-bpe": "llama-bpe", "bpe-qwen2": "qwen2"}[tok]
        assert field(gguf.GGUFReader(str(out)), "tokenizer.ggml.pre") == want_pre
    got = llama_cpp_model(out).tokenize(text.encode("utf-8"), add_bos=False, special=True)
    if tok == "spm":
        sp = spm.SentencePieceProcessor(model_file=str(spm_model))
        want = sp.encode(text[: -len("</s>")]) + [sp.eos_id()]
    else:
        want = transformers.AutoTokenizer.from_pretrained(str(folder))(text, add_special_tokens=False)["input_ids"]
    assert got == want


def test_sentencepiece_bpe_in_tokenizer_json(converted):
    """Without tokenizer.model, transformers 5's SentencePiece-style tokenizer.json (BPE with
    byte_fallback, Metaspace) becomes llama.cpp's SentencePiece vocabulary."""
    _, folder, out = converted("default", "v5", "spm-json")
    assert not (folder / "tokenizer.model").exists()
    reader = gguf.GGUFReader(str(out))
    assert field(reader, "tokenizer.ggml.model") == "llama"
    assert field(reader, "tokenizer.ggml.add_space_prefix") is True
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    vocab = tok.get_vocab()
    tokens = field(reader, "tokenizer.ggml.tokens")
    assert all(tokens[i] == t for t, i in vocab.items())
    types = field(reader, "tokenizer.ggml.token_type")
    assert types[vocab["<0x41>"]] == gguf.TokenType.BYTE
    # Special added tokens are CONTROL, <unk> included, as llama.cpp's LlamaHfVocab types them.
    assert [types[vocab[t]] for t in ("<unk>", "<s>", "</s>")] == [gguf.TokenType.CONTROL] * 3
    assert field(reader, "tokenizer.ggml.unknown_token_id") == vocab["<unk>"]


def test_llama2_layout_uses_tokenizer_model(converted, spm_model):
    """transformers 5 saves a SentencePiece tokenizer as tokenizer.json with a byte_fallback BPE; beside
    tokenizer.model (the Llama-2 / Mistral layout) llama.cpp's converter takes tokenizer.model first."""
    _, folder, out = converted("default", "v5", "spm")
    tj = json.loads((folder / "tokenizer.json").read_text())
    assert tj["model"]["type"] == "BPE" and tj["model"]["byte_fallback"] is True
    tc = json.loads((folder / "tokenizer_config.json").read_text())
    assert tc["model_max_length"] > 2**64  # the number that used to stop the read
    reader = gguf.GGUFReader(str(out))
    sp = spm.SentencePieceProcessor(model_file=str(spm_model))
    assert field(reader, "tokenizer.ggml.model") == "llama"
    tokens = field(reader, "tokenizer.ggml.tokens")
    assert tokens == [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    scores = field(reader, "tokenizer.ggml.scores")
    np.testing.assert_allclose(scores, [sp.get_score(i) for i in range(sp.get_piece_size())])
    assert field(reader, "tokenizer.ggml.bos_token_id") == sp.bos_id()
    assert field(reader, "tokenizer.ggml.eos_token_id") == sp.eos_id()


# Architectures: the transformers classes, llama.cpp's architecture, and config beyond the common one.
ARCHES = {
    "mistral": ("MistralConfig", "MistralForCausalLM", gguf.MODEL_ARCH.LLAMA, {"sliding_window": 4096}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", gguf.MODEL_ARCH.QWEN2, {"tie_word_embeddings": True}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", gguf.MODEL_ARCH.QWEN3, {"head_dim": 32}),
    # A sliding window of 4 over the 12 tokens of IDS: llama.cpp must mask as transformers does.
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", gguf.MODEL_ARCH.GEMMA2,
               {"head_dim": 16, "query_pre_attn_scalar": 16, "sliding_window": 4, "tie_word_embeddings": True,
                "attn_implementation": "eager"}),
    # Six layers, so that one is a full-attention layer (with linear scaling) and five slide (their own base).
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", gguf.MODEL_ARCH.GEMMA3,
               {"head_dim": 16, "query_pre_attn_scalar": 16, "sliding_window": 4, "tie_word_embeddings": True,
                "num_hidden_layers": 6, "attn_implementation": "eager",
                "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                                    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}}),
    # YaRN through llama.cpp's generic rope keys, on NEOX-rope architectures too.
    "qwen2-yarn": ("Qwen2Config", "Qwen2ForCausalLM", gguf.MODEL_ARCH.QWEN2,
                   {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                                        "rope_theta": 1000000.0}}),
    # Fused qkv and gate/up; longrope. llama.cpp takes the long factors when its context (padded to 256)
    # exceeds original_max_position_embeddings, transformers when the sequence does: with an original
    # of 512 both take the short ones (which differ from the long, so a mix-up shows).
    "phi3": ("Phi3Config", "Phi3ForCausalLM", gguf.MODEL_ARCH.PHI3,
             {"pad_token_id": 0, "max_position_embeddings": 4096, "original_max_position_embeddings": 512,
              "rope_parameters": {"rope_type": "longrope", "rope_theta": 1000000.0,
                                  "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.1, 3.8],
                                  "long_factor": [1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0, 32.0]}}),
}


@pytest.fixture(scope="session")
def arch_converted(tmp_path_factory):
    cache = {}

    def get(arch):
        if arch not in cache:
            config_class, model_class, _, extra = ARCHES[arch]
            where = tmp_path_factory.mktemp(arch)
            folder = where / "model"
            args = dict(vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=False,
                        bos_token_id=0, eos_token_id=1, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
            args.update(extra)
            cfg = getattr(transformers, config_class)(**args)
            torch.manual_seed(99)
            model = getattr(transformers, model_class)(cfg).eval()
            with torch.no_grad():  # biases and norms away from their initial 0 and 1
                for name, p in model.named_parameters():
                    if name.endswith("norm.weight") or name.endswith(".bias"):
                        p.copy_((1 if name.endswith("norm.weight") else 0) + 0.3 * torch.randn_like(p))
            model.save_pretrained(str(folder))
            bpe_tokenizer().save_pretrained(str(folder))
            cache[arch] = (model, folder, converted_ok(folder, where / "model.gguf"))
        return cache[arch]

    return get


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_architecture_names_as_llama_cpp(arch_converted, arch):
    """gguf-py's own tensor-name map for the architecture names every tensor."""
    model, _, out = arch_converted(arch)
    _, _, gguf_arch, _ = ARCHES[arch]
    reader = gguf.GGUFReader(str(out))
    assert field(reader, "general.architecture") == gguf.MODEL_ARCH_NAMES[gguf_arch]
    prefix = gguf.MODEL_ARCH_NAMES[gguf_arch]
    layers = model.config.num_hidden_layers
    assert field(reader, f"{prefix}.block_count") == layers
    assert field(reader, f"{prefix}.attention.head_count_kv") == 2
    assert field(reader, f"{prefix}.rope.freq_base") == pytest.approx(1000000.0)
    names = gguf.get_tensor_name_map(gguf_arch, layers)
    want = {names.get_name(k, try_suffixes=(".weight", ".bias")) for k in model.state_dict()
            if not (k == "lm_head.weight" and model.config.tie_word_embeddings)}
    if model.config.rope_parameters.get("rope_type") == "longrope":
        want |= {"rope_factors_long.weight", "rope_factors_short.weight"}
    assert None not in want
    assert {t.name for t in reader.tensors} == want
    if arch.startswith("gemma"):
        # llama.cpp's converter writes Gemma's norms as weight + 1 (transformers scales by 1 + weight).
        state = model.state_dict()
        t = next(t for t in reader.tensors if t.name == "output_norm.weight")
        np.testing.assert_allclose(np.asarray(t.data), state["model.norm.weight"].numpy() + 1, rtol=1e-6)
        assert field(reader, f"{prefix}.attention.sliding_window") == 4
    if arch == "gemma2":
        assert field(reader, "gemma2.attn_logit_softcapping") == pytest.approx(50.0)
        assert field(reader, "gemma2.final_logit_softcapping") == pytest.approx(30.0)
    if arch == "phi3":
        # transformers' own longrope initialisation: the attention factor, and the short factors as the
        # ratio of default to longrope inverse frequencies.
        inv_freq, attention = transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS["longrope"](model.config, "cpu")
        assert field(reader, "phi3.rope.scaling.attn_factor") == pytest.approx(attention, rel=1e-6)
        assert field(reader, "phi3.rope.scaling.original_context_length") == 512
        short = next(t for t in reader.tensors if t.name == "rope_factors_short.weight")
        dim = model.config.hidden_size // model.config.num_attention_heads
        plain = 1.0 / (1000000.0 ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        np.testing.assert_allclose(np.asarray(short.data), (plain / inv_freq).numpy(), rtol=1e-5)
        assert [t.name for t in reader.tensors][:2] == ["rope_factors_long.weight", "rope_factors_short.weight"]
    if arch == "gemma3":
        assert field(reader, "gemma3.rope.scaling.type") == "linear"
        assert field(reader, "gemma3.rope.freq_base_swa") == pytest.approx(10000.0)


# Each dimension config.json states, broken one at a time in a folder transformers saved: the plan's one
# shape check refuses it for every architecture's table, naming config.json, and writes nothing (issue 28
# item 3: intermediate_size 97 beside 96-row MLP tensors). A token id past vocab_size names no token.
# Invalid input, so exit 1 with InvalidModelFolder (issue 28 items 2 and 8; it was InvalidArgument, exit 2).
def broken(config, key):
    heads, hidden = config["num_attention_heads"], config["hidden_size"]
    head_dim = config.get("head_dim") or hidden // heads
    return {"intermediate_size": config["intermediate_size"] + 1, "hidden_size": hidden * 2, "num_attention_heads": heads * 2,
            "num_key_value_heads": config["num_key_value_heads"] // 2, "head_dim": head_dim * 2, "vocab_size": config["vocab_size"] + 1,
            "bos_token_id": config["vocab_size"]}[key]


@pytest.mark.parametrize("key", ["intermediate_size", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                                 "vocab_size", "bos_token_id"])
@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_every_dimension_config_states_must_agree_with_the_tensors(arch_converted, tmp_path, arch, key):
    _, source, _ = arch_converted(arch)
    folder = tmp_path / "model"
    shutil.copytree(source, folder)
    config = json.loads((folder / "config.json").read_text())
    config[key] = broken(config, key)
    if key == "head_dim" and config.get("query_pre_attn_scalar") is not None:
        # Gemma scales queries by query_pre_attn_scalar, which llama.cpp takes to be head_dim: keep the two
        # equal, so that the shape check is what refuses the folder (not NotSupported for the scale).
        config["query_pre_attn_scalar"] = config["head_dim"]
    (folder / "config.json").write_text(json.dumps(config))
    out = tmp_path / "out.gguf"
    r = convert(folder, out)
    # The folder's content is at fault, not the command line: exit 1 (docs/CLI.md), kind InvalidModelFolder.
    assert r.returncode == 1 and not out.exists(), (key, r.returncode, r.stdout, r.stderr)
    assert ": InvalidModelFolder: " in r.stderr and "config.json" in r.stderr, r.stderr
    if key == "intermediate_size":  # the MLP's rows (Phi-3: gate and up fused, twice as many)
        rows = 2 if arch == "phi3" else 1
        assert f"shape [{rows * 128}, 64], config.json implies [{rows * 129}, 64]" in r.stderr, r.stderr
        assert "model.safetensors" in r.stderr and "mlp." in r.stderr, r.stderr
    if key == "vocab_size":
        assert "model.safetensors" in r.stderr and "embed_tokens" in r.stderr and "config.json implies [401, 64]" in r.stderr, r.stderr
    if key == "bos_token_id":
        assert "key `bos_token_id` is 400, not below vocab_size 400 (no such token)" in r.stderr, r.stderr


# llama.cpp's CPU GELU (Gemma's activation) reads a table of float16 values at the float16-rounded input
# (ggml's GGML_GELU_FP16): against transformers' float32 GELU the logits then differ by ~1e-3 of the
# largest (with ggml's GELU in transformers too: GELU_FP16_TOLERANCE, gguf_helpers.py).
GELU_TOLERANCE = 3e-3


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_architecture_logits_match_transformers(arch_converted, arch):
    if llama_cpp is None:
        pytest.skip(LLAMA_CPP_MISSING)
    model, _, out = arch_converted(arch)
    want = transformers_logits(model, IDS)
    got = llama_cpp_logits(out, IDS)
    err = np.abs(got - want).max() / np.abs(want).max()
    print(f"{arch}: max |llama.cpp - transformers| / max |transformers| = {err:.3g}")
    if not arch.startswith("gemma"):
        assert err < F32_TOLERANCE
        return
    assert err < GELU_TOLERANCE
    with ggml_gelu([layer.mlp for layer in model.model.layers]):
        want16 = transformers_logits(model, IDS)
    err16 = np.abs(got - want16).max() / np.abs(want16).max()
    print(f"{arch}: with ggml's float16 GELU in transformers: {err16:.3g}")
    assert err16 < GELU_FP16_TOLERANCE


def test_unsupported_architecture_refused_by_name(tmp_path):
    cfg = transformers.GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=400)
    folder = tmp_path / "gpt2"
    transformers.GPT2LMHeadModel(cfg).save_pretrained(str(folder))
    out = tmp_path / "out.gguf"
    r = convert(folder, out)
    assert r.returncode != 0
    assert "config.json" in r.stderr and "architecture `GPT2LMHeadModel` is not converted" in r.stderr, r.stderr
    assert not out.exists()


REFUSED = [
    ({"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}, "NotSupported", "rope type `dynamic`"),
    ({"rope_type": "spiral", "rope_theta": 10000.0}, "NotSupported", "rope type `spiral` is not one llama.cpp's converter maps"),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "beta_fast": 16.0, "rope_theta": 10000.0},
     "NotSupported", "key `beta_fast` is not 32"),
    ({"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.0] * 8, "long_factor": [1.0] * 8,
      "original_max_position_embeddings": 64}, "NotSupported",
     "llama.cpp's llama architecture has no longrope"),
    ({"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0, "beta_fast": 32.0}, "NotSupported",
     "key `beta_fast` is not understood for rope type `linear`"),
]


@pytest.mark.parametrize("rope,kind,text", REFUSED)
def test_refused_by_name(converted, tmp_path, rope, kind, text):
    _, folder, _ = converted("default", "v5")
    mine = tmp_path / "model"
    shutil.copytree(folder, mine)
    cfg = json.loads((mine / "config.json").read_text())
    cfg["rope_parameters"] = rope
    (mine / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out.gguf"
    r = convert(mine, out)
    assert r.returncode != 0
    assert "config.json" in r.stderr and kind in r.stderr and text in r.stderr, r.stderr
    assert not out.exists()


def test_gemma_sentencepiece_adds_no_space_prefix(arch_converted, tmp_path):
    """Gemma's SentencePiece model adds no dummy prefix; llama.cpp's converter writes
    add_space_prefix false for Gemma, and llama.cpp then tokenizes as sentencepiece does."""
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS), model_writer=buf, vocab_size=400, model_type="bpe", byte_fallback=True,
        character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, split_digits=True, minloglevel=3,
        normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=False)
    _, folder, _ = arch_converted("gemma2")
    mine = tmp_path / "model"
    shutil.copytree(folder, mine)
    (mine / "tokenizer.json").unlink()
    (mine / "tokenizer.model").write_bytes(buf.getvalue())
    out = converted_ok(mine, tmp_path / "out.gguf")
    assert field(gguf.GGUFReader(str(out)), "tokenizer.ggml.add_space_prefix") is False
    if llama_cpp is None:
        pytest.skip(LLAMA_CPP_MISSING)
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    assert llama_cpp_model(out).tokenize(PLAIN.encode("utf-8"), add_bos=False, special=False) == sp.encode(PLAIN)


def test_phi3_sliding_window_refused(arch_converted, tmp_path):
    """llama.cpp's phi3 does not slide as transformers does (0.6 of the largest logit apart with a window
    of 4 over 12 tokens): a window that binds is refused."""
    _, folder, _ = arch_converted("phi3")
    mine = tmp_path / "model"
    shutil.copytree(folder, mine)
    cfg = json.loads((mine / "config.json").read_text())
    cfg["sliding_window"] = 4
    (mine / "config.json").write_text(json.dumps(cfg))
    r = convert(mine, tmp_path / "out.gguf")
    assert r.returncode != 0 and "`sliding_window` (4) is below max_position_embeddings" in r.stderr, r.stderr


def test_other_activation_refused(converted, tmp_path):
    _, folder, _ = converted("default", "v5")
    mine = tmp_path / "model"
    shutil.copytree(folder, mine)
    cfg = json.loads((mine / "config.json").read_text())
    cfg["hidden_act"] = "gelu"
    (mine / "config.json").write_text(json.dumps(cfg))
    r = convert(mine, tmp_path / "out.gguf")
    assert r.returncode != 0 and "`hidden_act` is `gelu`" in r.stderr, r.stderr



# transformers' own GGUF loader (from_pretrained(folder, gguf_file=...)): it dequantizes, reverses
# llama.cpp's q/k permutation and rebuilds the config and tokenizer from the file's keys. Float32 on
# both sides with the same weights: only the order of float32 operations may differ.
TRANSFORMERS_GGUF_TOLERANCE = 1e-5
# What transformers' GGUF config reader (integrations/ggml.py) does not take from a file that has it
# as llama.cpp writes it (measured: logits 5.5e-3 to 1.3 of the largest apart, or qwen3's shapes
# refused); for these the config it builds is not the source's, so only the weights are compared.
TRANSFORMERS_GGUF_CONFIG_GAPS = {
    "gemma2": "query_pre_attn_scalar (llama.cpp has no key for it; transformers takes its default 256)",
    "gemma3": "query_pre_attn_scalar and the full-attention layers' linear rope scaling",
    "phi3": "longrope (transformers builds a default rope)",
    "qwen2-yarn": "yarn rope scaling (transformers builds a default rope)",
    "qwen3": "attention.key_length (head_dim 32, not hidden_size / heads)",
}


def config_gap(arch, built, source):
    """Whether the config transformers builds from the file still lacks what TRANSFORMERS_GGUF_CONFIG_GAPS says."""
    if arch.startswith("gemma") and built.query_pre_attn_scalar == source.query_pre_attn_scalar:
        return False
    if arch == "gemma3":
        full = "full_attention"
        return built.rope_parameters[full]["rope_type"] != source.rope_parameters[full]["rope_type"]
    if arch in ("phi3", "qwen2-yarn"):
        return built.rope_parameters["rope_type"] != source.rope_parameters["rope_type"]
    if arch == "qwen3":
        return built.head_dim != source.head_dim
    return arch == "gemma2"


def transformers_from_gguf(out, **kwargs):
    return transformers.AutoModelForCausalLM.from_pretrained(str(out.parent), gguf_file=out.name, dtype=torch.float32, **kwargs).eval()


def relative_error(got, want):
    return np.abs(got - want).max() / np.abs(want).max()


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_transformers_gguf_loader_weights_round_trip(arch_converted, arch):
    """transformers' GGUF loader gives back the source's weights (q and k permuted back, Gemma's norms
    back from weight + 1); with the source's config, also its logits."""
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING
    model, _, out = arch_converted(arch)
    gguf_arch = field(gguf.GGUFReader(str(out)), "general.architecture")
    if gguf_arch not in GGUF_CONFIG_MAPPING:
        pytest.skip(f"transformers {transformers.__version__} cannot load {gguf_arch} GGUF")
    # transformers maps the file's tensors by the config's model_type: the source's config only where
    # that is the file's architecture (not Mistral, written as llama; not Gemma 3's gemma3_text).
    same = gguf_arch == model.config.model_type
    loaded = transformers_from_gguf(out, **({"config": copy.deepcopy(model.config)} if same else {}))
    source = model.state_dict()
    got = loaded.state_dict()
    assert set(got) == set(source)
    for name, value in got.items():
        # Float32 weight + 1 - 1 for Gemma's norms: one rounding.
        np.testing.assert_allclose(value.numpy(), source[name].numpy(), rtol=0, atol=2e-7, err_msg=name)
    if same:
        err = relative_error(transformers_logits(loaded, IDS), transformers_logits(model, IDS))
        print(f"{arch}: transformers(GGUF, source config) against the source: {err:.3g}")
        assert err < TRANSFORMERS_GGUF_TOLERANCE


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_transformers_gguf_loader_matches_source(arch_converted, arch):
    """The config and tokenizer transformers builds from our file alone give the source's logits and ids."""
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING
    model, folder, out = arch_converted(arch)
    gguf_arch = field(gguf.GGUFReader(str(out)), "general.architecture")
    if gguf_arch not in GGUF_CONFIG_MAPPING:
        pytest.skip(f"transformers {transformers.__version__} cannot load {gguf_arch} GGUF")
    # The source: the tokenizer.json the fixture saved, as the tokenizers library reads it. (transformers
    # 5's AutoTokenizer on a qwen2 folder builds Qwen2Tokenizer, which replaces the file's GPT-2 split
    # with Qwen2's: not what the file says, nor what llama.cpp's converter reads.)
    source = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok = transformers.AutoTokenizer.from_pretrained(str(out.parent), gguf_file=out.name)
    text = TEXTS["bpe"]
    assert tok(text, add_special_tokens=False)["input_ids"] == source.encode(text, add_special_tokens=False).ids
    if arch in TRANSFORMERS_GGUF_CONFIG_GAPS:
        # The gap is checked, so that the skip goes when transformers reads the key.
        built = transformers.AutoConfig.from_pretrained(str(out.parent), gguf_file=out.name)
        gap = config_gap(arch, built, model.config)
        assert gap, f"transformers now reads {TRANSFORMERS_GGUF_CONFIG_GAPS[arch]}: drop the skip"
        pytest.skip(f"transformers {transformers.__version__} cannot load {arch} GGUF as the source model: "
                    f"its GGUF config reader drops {TRANSFORMERS_GGUF_CONFIG_GAPS[arch]}")
    err = relative_error(transformers_logits(transformers_from_gguf(out), IDS), transformers_logits(model, IDS))
    print(f"{arch}: max |transformers(GGUF) - transformers| / max |transformers| = {err:.3g}")
    assert err < TRANSFORMERS_GGUF_TOLERANCE
