"""Dense architectures of issue 35 made by transformers 5 -> `safeweights convert FOLDER OUT.gguf` -> llama.cpp:
SmolLM3 (NoPE layers), OLMo 2 (post-norms, q/k norms over the whole projection), Granite (its four
multipliers), Gemma 1 (norms + 1, tied output, SentencePiece without a space prefix, eot 107) and Phi-4
(Phi-3's class with a GPT-2 BPE tokenizer.json).

Each is a tiny random model made here by transformers 5.24 (nothing downloaded), converted by our CLI to an
F32 GGUF and judged twice:

(a) against the pinned llama.cpp's own converter (`convert_hf_to_gguf.py` of SAFEWEIGHTS_LLAMA_CPP, run
    offline with the clients' torch and its own gguf-py) on the same folder: the same tensors (name,
    type, shape, bytes) and the same keys with the same values, but for test_hf_gguf_moe's
    DELIBERATE_DIFFERENCES (the model's name, the safetensors metadata);
(b) llama.cpp (llama-cpp-python) gives the logits transformers gives (f32, within F32_TOLERANCE of the
    largest logit).

Config keys llama.cpp would compute otherwise are refused by name, and no file is written.
"""

import json
import math
import os

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp")

from gguf_helpers import (IDS, assert_close_logits, bpe_tokenizer, convert, converted_ok, edited, fused_copy,  # noqa: E402
                          keys_of, llama_cpp_logits, need_llama_cpp, refused, run_reference, same_gguf, tensors_of, transformers_logits)
from tiny_models import sentencepiece_model  # noqa: E402

# The pre-tokenizer both converters name for bpe_tokenizer("gpt-2") (llama.cpp's converter knows no hash
# of a tokenizer trained here: REFERENCE_RUNNER tells it this name).
PRE = "gpt-2"

COMMON = dict(vocab_size=400, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=256, rms_norm_eps=1e-5, bos_token_id=0, eos_token_id=1, pad_token_id=None)


def randomized(model):
    """Norms away from 1, so that a norm left out or taken as another would show."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") and p.dim() == 1:
                p.copy_(1 + 0.3 * torch.randn_like(p))
    return model.eval()


def made(config_class, model_class, seed, **fields):
    cfg = getattr(transformers, config_class)(**{**COMMON, **fields})
    torch.manual_seed(seed)
    return randomized(getattr(transformers, model_class)(cfg))


def with_bpe(model, folder):
    model.save_pretrained(str(folder))
    bpe_tokenizer(PRE).save_pretrained(str(folder))
    return model


def smollm3(folder):
    """Eight layers: layers 3 and 7 have no rope (transformers' no_rope_layers, llama.cpp's fixed step 4)."""
    return with_bpe(made("SmolLM3Config", "SmolLM3ForCausalLM", 21, num_hidden_layers=8, tie_word_embeddings=True,
                         rope_parameters={"rope_type": "default", "rope_theta": 100000.0}), folder)


def olmo2(folder):
    return with_bpe(made("Olmo2Config", "Olmo2ForCausalLM", 22, tie_word_embeddings=False), folder)


def granite(folder):
    """Multipliers away from 1 (and from each other), so that each one taken wrong would show."""
    return with_bpe(made("GraniteConfig", "GraniteForCausalLM", 23, tie_word_embeddings=False, embedding_multiplier=3.0,
                         residual_multiplier=0.5, attention_multiplier=0.2, logits_scaling=4.0), folder)


def gemma(folder):
    """With its SentencePiece tokenizer.model (llama.cpp's GemmaModel reads only that) and head_dim 16."""
    model = made("GemmaConfig", "GemmaForCausalLM", 24, head_dim=16, tie_word_embeddings=True, hidden_act="gelu_pytorch_tanh")
    model.save_pretrained(str(folder))
    sentencepiece_model(folder / "tokenizer.model")
    return model


def phi4(folder):
    """Phi-3's class with Phi-4's tokenizer: a GPT-2 byte-level BPE (tokenizer_config.json's tokenizer_class
    GPT2Tokenizer, no tokenizer.model), no sliding window."""
    model = with_bpe(made("Phi3Config", "Phi3ForCausalLM", 25, tie_word_embeddings=False, sliding_window=None,
                          rope_parameters={"rope_type": "default", "rope_theta": 250000.0}), folder)
    path = folder / "tokenizer_config.json"
    cfg = json.loads(path.read_text())
    cfg["tokenizer_class"] = "GPT2Tokenizer"
    path.write_text(json.dumps(cfg))
    return model


# Ministral 3's YaRN as its releases have it (mscale 1, mscale_all_dim 1, beta 32 / 1), over an original
# context of 4: Llama 4's attention temperature 1 + beta ln(1 + floor(position / 4)) changes every four
# of IDS's twelve positions.
MINISTRAL3_ROPE = {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 16.0, "original_max_position_embeddings": 4,
                   "max_position_embeddings": 256, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                   "llama_4_scaling_beta": 0.1}


def ministral3(folder):
    return with_bpe(made("Ministral3Config", "Ministral3ForCausalLM", 26, head_dim=16, tie_word_embeddings=False,
                         rope_parameters=dict(MINISTRAL3_ROPE)), folder)


def ministral3_vision(folder):
    """Ministral 3 as released: Mistral3ForConditionalGeneration, its text model in text_config beside a
    (tiny) Pixtral vision tower, saved by transformers 5.24 under language_model.model.* and
    language_model.lm_head.weight."""
    text = {**COMMON, "model_type": "ministral3", "head_dim": 16, "tie_word_embeddings": False, "rope_parameters": dict(MINISTRAL3_ROPE)}
    vision = dict(model_type="pixtral", hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                  patch_size=14, head_dim=16)
    cfg = transformers.Mistral3Config(text_config=text, vision_config=vision, tie_word_embeddings=False)
    torch.manual_seed(27)
    return with_bpe(randomized(transformers.Mistral3ForConditionalGeneration(cfg)), folder)


def mistral_small_vision(folder):
    """Mistral Small 3.1's layout: the same class over a Mistral text model (model_type mistral: Llama's
    computation, no attention temperature), rope theta 1e9 as released."""
    text = {**COMMON, "model_type": "mistral", "head_dim": 16, "tie_word_embeddings": False, "sliding_window": None,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000000.0}}
    vision = dict(model_type="pixtral", hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                  patch_size=14, head_dim=16)
    cfg = transformers.Mistral3Config(text_config=text, vision_config=vision, tie_word_embeddings=False)
    torch.manual_seed(28)
    return with_bpe(randomized(transformers.Mistral3ForConditionalGeneration(cfg)), folder)


MAKERS = {"smollm3": smollm3, "olmo2": olmo2, "granite": granite, "gemma": gemma, "phi4": phi4, "ministral3": ministral3,
          "ministral3-vision": ministral3_vision, "mistral-small-vision": mistral_small_vision}
# What we write otherwise than llama.cpp's converter, per architecture, beyond DELIBERATE_DIFFERENCES:
# nothing (docs/GGUF.md lists the cases where a config goes beyond what these models use).
ARCH_DIFFERENCES = {}


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    """arch -> (model, folder, our gguf)."""
    out = {}
    for arch, make in MAKERS.items():
        root = tmp_path_factory.mktemp(arch)
        folder = root / "model"
        model = make(folder)
        ours = root / "ours.gguf"
        r = convert(folder, ours)
        assert r.returncode == 0, r.stderr
        out[arch] = (model, folder, ours)
        if arch == "ministral3-vision":
            assert "note: Mistral3ForConditionalGeneration: the text model was converted; the vision tower was left out" in r.stderr
            # fused_copy: the weights as the modules name them (model.language_model.*,
            # lm_head.weight), one file.
            modules = fused_copy(model, folder, root / "modules")
            converted_ok(modules, root / "modules.gguf")
            out["ministral3-vision-modules"] = (model, modules, root / "modules.gguf")
    return out


@pytest.fixture(scope="module")
def reference(dense, tmp_path_factory):
    """arch -> the GGUF llama.cpp's converter writes from the same folder."""
    need_llama_cpp()
    root = tmp_path_factory.mktemp("reference")
    jobs = [(str(folder), str(root / f"{arch}.gguf"), "f32") for arch, (_, folder, _) in dense.items() if arch in MAKERS]
    run_reference(PRE, jobs)
    # The modules' layout is judged against llama.cpp's file from the saved one (the same weights).
    return {arch: root / f"{arch.removesuffix('-modules')}.gguf" for arch in dense}


ALL = list(MAKERS) + ["ministral3-vision-modules"]


@pytest.mark.parametrize("arch", ALL)
def test_tensors_and_keys_equal_llama_cpp_converter(dense, reference, arch):
    ours, theirs = dense[arch][2], reference[arch]
    skip = ARCH_DIFFERENCES.get(arch, set())
    a, b, ka, kb = same_gguf(ours, theirs, skip)


@pytest.mark.parametrize("arch", ALL)
def test_llama_cpp_logits_match_transformers(dense, arch):
    model, _, ours = dense[arch]
    want = transformers_logits(model, IDS)
    got = llama_cpp_logits(ours, IDS)
    assert_close_logits(got, want)


def test_phi4_tokenizes_as_the_source(dense):
    _, folder, ours = dense["phi4"]
    text = " Hello  world 12345 café 東京 привет 🙂\n  spaces\tand tabs don't"
    want = transformers.AutoTokenizer.from_pretrained(str(folder))(text, add_special_tokens=False)["input_ids"]
    llm = llama_cpp.Llama(model_path=str(ours), n_ctx=64, vocab_only=True, verbose=False)
    assert llm.tokenize(text.encode(), add_bos=False, special=False) == want


def converted_with(dense, tmp_path, arch, change):
    """`arch`'s folder with config.json changed by `change(cfg)`, converted; returns (folder, gguf path)."""
    folder = edited(dense[arch][1], tmp_path, change)
    return folder, converted_ok(folder, tmp_path / "out.gguf")


# Keys transformers reads that llama.cpp's architecture would compute otherwise: (arch, key, value, text).
REFUSED = [
    ("smollm3", "no_rope_layers", [1, 1, 0, 1, 1, 1, 0, 1], "`no_rope_layers` does not follow llama.cpp's smollm3 pattern (layer 2 must use rope"),
    ("smollm3", "no_rope_layer_interval", 3, None),  # with no_rope_layers removed: transformers' pattern from the interval
    ("smollm3", "use_sliding_window", True, "`use_sliding_window` is true"),
    ("smollm3", "attention_bias", True, "`attention_bias` is true"),
    ("olmo2", "sliding_window", 4, "`sliding_window` is set"),
    ("olmo2", "attention_bias", True, "`attention_bias` is true"),
    ("olmo2", "head_dim", 32, "`head_dim` times num_attention_heads is not hidden_size"),
    ("granite", "head_dim", 32, "`head_dim` is not hidden_size / num_attention_heads"),
    ("granite", "mlp_bias", True, "`mlp_bias` is true"),
    ("gemma", "use_bidirectional_attention", True, "`use_bidirectional_attention` is true"),
    ("gemma", "rope_parameters", {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}, "has rope type `linear`"),
    ("gemma", "hidden_act", "gelu_new", "`hidden_act` is `gelu_new`"),
    ("ministral3", "rope_parameters", {**MINISTRAL3_ROPE, "mscale": 0.5}, "`rope_parameters.mscale` is not 1"),
    # transformers' YaRN default without mscale (which the generic YaRN rule accepts): llama.cpp's mistral3 takes 1.
    ("ministral3", "rope_parameters", {**MINISTRAL3_ROPE, "attention_factor": 0.1 * math.log(16.0) + 1},
     "`rope_parameters.attention_factor` is set"),
    ("ministral3", "rope_parameters", {k: v for k, v in MINISTRAL3_ROPE.items() if k != "llama_4_scaling_beta"},
     "`rope_parameters.llama_4_scaling_beta` is missing"),
    ("ministral3", "rope_parameters", {"rope_type": "default", "rope_theta": 1000000.0}, "llama.cpp's converter converts Ministral 3 with YaRN only"),
    ("ministral3", "rope_parameters", {**MINISTRAL3_ROPE, "mscale_foo": 1.0}, "key `mscale_foo` is not understood for rope type `yarn`"),
]


@pytest.mark.parametrize("arch,key,value,text", REFUSED)
def test_keys_refused_by_name(dense, tmp_path, arch, key, value, text):
    def change(cfg):
        cfg[key] = value
        if key == "no_rope_layer_interval":
            del cfg["no_rope_layers"]
    folder = edited(dense[arch][1], tmp_path, change)
    if key == "no_rope_layer_interval":
        text = "`no_rope_layer_interval` is not 4"
    err = refused(folder, tmp_path / "out.gguf")
    assert "config.json" in err and text in err, err


def test_gemma_legacy_gelu_is_the_tanh_gelu(dense, tmp_path):
    """Gemma 1's first configs say hidden_act "gelu"; transformers computes the tanh approximation for it,
    as llama.cpp does: converted, to the same tensors."""
    folder, out = converted_with(dense, tmp_path, "gemma", lambda cfg: cfg.update(hidden_act="gelu"))
    assert transformers.AutoConfig.from_pretrained(str(folder)).hidden_act == "gelu_pytorch_tanh"
    assert tensors_of(out) == tensors_of(dense["gemma"][2])


def test_granite_absent_multipliers_are_transformers_defaults(dense, tmp_path):
    """transformers takes an absent multiplier as 1; llama.cpp's loader would take an absent attention scale
    as 1/sqrt(head size) and refuse a file without logit_scale: each is written as 1."""
    def drop(cfg):
        for key in ("attention_multiplier", "embedding_multiplier", "residual_multiplier", "logits_scaling"):
            del cfg[key]
    _, out = converted_with(dense, tmp_path, "granite", drop)
    keys = keys_of(out)
    for key in ("granite.attention.scale", "granite.embedding_scale", "granite.residual_scale", "granite.logit_scale"):
        assert keys[key] == ((int(gguf.GGUFValueType.FLOAT32),), 1.0), key


def test_gemma_other_rope_base_is_written(dense, tmp_path):
    """llama.cpp's converter writes no rope base for Gemma (its loader computes with 10000): another base is
    written, and llama.cpp then computes what transformers computes."""
    def base(cfg):
        cfg["rope_parameters"]["rope_theta"] = 500.0
    folder, out = converted_with(dense, tmp_path, "gemma", base)
    assert keys_of(out)["gemma.rope.freq_base"] == ((int(gguf.GGUFValueType.FLOAT32),), 500.0)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    want = transformers_logits(model, IDS)
    assert np.abs(want - transformers_logits(dense["gemma"][0], IDS)).max() > 1e-3  # the base matters here
    assert_close_logits(llama_cpp_logits(out, IDS), want)
