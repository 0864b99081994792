"""gpt-oss folders made by transformers 5 -> `safeweights convert FOLDER OUT.gguf` -> llama.cpp.

A tiny random GptOssForCausalLM (2 layers, sliding then full attention, 4 experts of which 2 are used,
attention sinks, biases everywhere, yarn rope) with a harmony-style tokenizer (o200k's split, gpt-oss's
special tokens), in the two layouts users have:

- "plain": the model's own state dict as transformers 5.24 saves it: experts.gate_up_proj [E, D, 2F]
  (gate and up interleaved in the last dimension) and experts.down_proj [E, F, D], transposed to
  llama.cpp's [E, F, D] / [E, D, F];
- "mxfp4": as the Hub's checkpoints hold them, `experts.*_blocks` [E, rows, K, 16] and `*_scales`
  [E, rows, K] (quantized here from the same experts, which are made exactly representable first, so both
  folders are one model), with quantization_config quant_method mxfp4; repacked to ggml's MXFP4 bit for bit.

Judged (a) against the pinned llama.cpp's own converter on the same folder (tensors: name, type, shape,
bytes; keys and values, but for the deliberate differences of test_hf_gguf_moe.py); (b) llama.cpp's
logits against transformers' (f32 within 1e-4 of the largest logit; the MXFP4 file within Q8_0's bound,
as ggml multiplies MXFP4 weights by activations rounded to Q8_0) and the same argmax; (c) config keys
llama.cpp's gpt-oss would compute otherwise are refused by name, and nothing is written.
"""

import json
import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp")
from safetensors.torch import save_file  # noqa: E402

from gguf_helpers import (F32_TOLERANCE, IDS, assert_close_logits, convert, converted_ok, deliberate, edited, keys_of,  # noqa: E402
                          llama_cpp_logits, need_llama_cpp, refused, run_reference, tensors_of, transformers_logits, with_weights)
from test_pretokenizers import make_folder  # noqa: E402

MXFP4_TOLERANCE = 5e-2  # Q8_0's bound (test_hf_gguf_llamacpp.py's TYPE_TOLERANCE)
LAYOUTS = ("plain", "mxfp4")
# Each layout converted at these types, each judged against llama.cpp's converter at the same type: Q8_0
# quantizes the matrices but keeps what llama.cpp keeps F32 (routers, the experts' 2-D biases: every
# tensor not named .weight) and the MXFP4 experts as they are.
TYPES = ("f32", "q8_0")
CASES = [(layout, type_) for layout in LAYOUTS for type_ in TYPES]

# E2M1's magnitudes by code (OCP microscaling; the code's bit 3 is the sign).
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def mxfp4_quantize(w):
    """w [..., K * 32] -> (codes [..., K, 16] U8, low nibble first; scales [..., K] U8, E8M0) and the
    values they decode to. Each block's exponent puts its largest magnitude at or below 6."""
    blocks = w.reshape(*w.shape[:-1], -1, 32)
    amax = blocks.abs().amax(-1).clamp(min=2.0 ** -100)
    exponent = torch.ceil(torch.log2(amax / 6.0))
    scaled = blocks / torch.exp2(exponent)[..., None]
    code = (scaled.abs()[..., None] - E2M1).abs().argmin(-1)  # nearest magnitude
    code = code + 8 * (scaled < 0) * (code > 0)
    values = torch.where(code >= 8, -E2M1[code % 8], E2M1[code % 8]) * torch.exp2(exponent)[..., None]
    packed = (code[..., 0::2] | (code[..., 1::2] << 4)).to(torch.uint8)
    return packed, (exponent + 127).to(torch.uint8), values.reshape(w.shape)


def make_model(vocab):
    cfg = transformers.GptOssConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=256, sliding_window=4, rms_norm_eps=1e-5,
        tie_word_embeddings=False, bos_token_id=0, eos_token_id=1, pad_token_id=None,
        rope_parameters=dict(rope_type="yarn", rope_theta=150000.0, factor=4.0, original_max_position_embeddings=64, beta_fast=32.0,
                             beta_slow=1.0, truncate=True))
    torch.manual_seed(11)
    model = transformers.GptOssForCausalLM(cfg).eval()
    with torch.no_grad():  # every weight drawn (no zero bias), norms away from 1, routers that choose clearly
        for name, p in model.named_parameters():
            p.copy_(0.2 * torch.randn_like(p))
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.3 * torch.randn_like(p))
            if name.endswith("router.weight"):
                p.copy_(0.5 * torch.randn_like(p))
        for layer in model.model.layers:  # experts MXFP4-exact: the two layouts are one model
            experts = layer.mlp.experts
            for p in (experts.gate_up_proj, experts.down_proj):
                p.copy_(mxfp4_quantize(p.transpose(1, 2))[2].transpose(1, 2))
    return model


def mxfp4_copy(model, source, folder):
    """`source` with its experts as the Hub holds gpt-oss's: MXFP4 blocks and scales of [E, out, in]."""
    folder.mkdir()
    for f in source.iterdir():
        if f.is_file() and not f.name.startswith("model.safetensors"):
            (folder / f.name).write_bytes(f.read_bytes())
    state = {}
    for k, v in model.state_dict().items():
        if k.endswith(("experts.gate_up_proj", "experts.down_proj")):
            packed, scales, _ = mxfp4_quantize(v.transpose(1, 2))
            state[k + "_blocks"], state[k + "_scales"] = packed.contiguous(), scales.contiguous()
        else:
            state[k] = v.contiguous()
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((folder / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    return folder


@pytest.fixture(scope="module")
def gptoss(tmp_path_factory):
    """{"model", "plain": folder, "mxfp4": folder, (layout, type): our gguf}."""
    root = tmp_path_factory.mktemp("gptoss")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(make_folder(root / "harmony", "gpt-4o", "harmony")))
    model = make_model(len(tokenizer) + 3)
    plain = root / "plain"
    model.save_pretrained(str(plain))
    tokenizer.save_pretrained(str(plain))
    out = {"model": model, "plain": plain, "mxfp4": mxfp4_copy(model, plain, root / "mxfp4")}
    for layout, type_ in CASES:
        ours = root / f"{layout}-{type_}.gguf"
        out[layout, type_] = converted_ok(out[layout], ours, type_=type_)
    return out


@pytest.fixture(scope="module")
def reference(gptoss, tmp_path_factory):
    """(layout, type) -> the GGUF llama.cpp's converter writes from the same folder."""
    need_llama_cpp()
    root = tmp_path_factory.mktemp("reference")
    jobs = [(str(gptoss[layout]), str(root / f"{layout}-{type_}.gguf"), type_) for layout, type_ in CASES]
    run_reference("gpt-4o", jobs)
    return {(layout, type_): root / f"{layout}-{type_}.gguf" for layout, type_ in CASES}


def compared(path):
    """A GGUF's tensors (type, shape, bytes) and its keys but the deliberate differences, by name."""
    return tensors_of(path), {k: v for k, v in keys_of(path).items() if not deliberate(k)}


@pytest.mark.parametrize("layout,type_", CASES)
def test_tensors_and_keys_equal_llama_cpp_converter(gptoss, reference, layout, type_):
    (a, ka), (b, kb) = compared(gptoss[layout, type_]), compared(reference[layout, type_])
    assert sorted(a) == sorted(b)
    for name in b:
        assert a[name] == b[name], name
    assert ka == kb
    experts = "MXFP4" if layout == "mxfp4" else type_.upper()
    assert a["blk.0.ffn_gate_exps.weight"][0] == int(gguf.GGMLQuantizationType[experts])
    assert a["blk.0.ffn_gate_exps.bias"][0] == a["blk.0.ffn_gate_inp.weight"][0] == int(gguf.GGMLQuantizationType.F32)
    assert a["blk.1.attn_sinks.weight"][1] == [4]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_llama_cpp_logits_match_transformers(gptoss, layout):
    want = transformers_logits(gptoss["model"], IDS)
    got = llama_cpp_logits(gptoss[layout, "f32"], IDS)
    tolerance = F32_TOLERANCE if layout == "plain" else MXFP4_TOLERANCE
    assert_close_logits(got, want, tolerance)


def test_mxfp4_experts_kept_at_a_quantized_type(gptoss):
    """--type q8_0 quantizes the rest; the MXFP4 experts pass through as they are (not through F32)."""
    a, b = tensors_of(gptoss["mxfp4", "q8_0"]), tensors_of(gptoss["mxfp4", "f32"])
    assert a["blk.0.attn_q.weight"][0] == int(gguf.GGMLQuantizationType.Q8_0)
    for name in ("blk.0.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight", "blk.1.ffn_down_exps.weight"):
        assert a[name] == b[name], name


def test_mxfp4_folder_without_a_type(gptoss, tmp_path):
    """Without --type the matrices keep their float type (not the U8 of the MXFP4 blocks), the experts
    stay MXFP4 and the file type is MOSTLY_MXFP4_MOE, as llama.cpp's converter writes it over a float one."""
    out = converted_ok(gptoss["mxfp4"], tmp_path / "auto.gguf", type_=None)
    a = tensors_of(out)
    assert a["blk.0.attn_q.weight"][0] == int(gguf.GGMLQuantizationType.F32)
    assert a["blk.0.ffn_down_exps.weight"][0] == int(gguf.GGMLQuantizationType.MXFP4)
    assert keys_of(out)["general.file_type"][1] == int(gguf.LlamaFileType.MOSTLY_MXFP4_MOE)


# Keys transformers reads that would make llama.cpp's gpt-oss compute something else.
REFUSED = [
    ("swiglu_limit", 8.0, "`swiglu_limit` is not 7.0"),
    ("swiglu_alpha", 1.5, "`swiglu_alpha` is not 1.702"),
    ("layer_types", ["full_attention", "sliding_attention"], "`layer_types` gives layer 0 `full_attention`"),
    ("attention_bias", False, "`attention_bias` is false"),
    ("tie_word_embeddings", True, "`tie_word_embeddings` is true"),
    ("quantization_config", {"quant_method": "fp8"}, "`quantization_config` has quant_method `fp8`"),
]


@pytest.mark.parametrize("key,value,text", REFUSED)
def test_keys_refused_by_name(gptoss, tmp_path, key, value, text):
    """The plain folder with one key of config.json changed (the weights linked): refused, nothing written."""
    folder = edited(gptoss["plain"], tmp_path, {key: value})
    err = refused(folder, tmp_path / "out.gguf", code=1)
    assert f"{folder}/config.json: NotSupported: " in err and text in err, err


def test_hub_yarn_untruncated_converts_with_a_note(gptoss, tmp_path):
    """gpt-oss's own config.json says YaRN `truncate` false. No GGUF key says it and llama.cpp's converter writes
    the same file either way (llama.cpp always truncates): converted, the truncate-true file's tensors and keys, and
    the user told on stderr."""
    folder = edited(gptoss["plain"], tmp_path, lambda config: config["rope_parameters"].update(truncate=False))
    out = tmp_path / "out.gguf"
    r = convert(folder, out)
    assert r.returncode == 0, r.stderr
    assert "note: " in r.stderr and "rope_parameters.truncate is false, which no GGUF key says: llama.cpp truncates" in r.stderr, r.stderr
    assert compared(out) == compared(gptoss["plain", "f32"])  # general.name is the folder's


def test_mxfp4_pair_missing_its_scales_is_refused_by_name(gptoss, tmp_path):
    """Blocks without their scales cannot be repacked: the tensor is named, with what llama.cpp needs it for."""
    folder = with_weights(gptoss["mxfp4"], tmp_path, lambda state: state.pop("model.layers.1.mlp.experts.down_proj_scales"))
    err = refused(folder, tmp_path / "out.gguf")
    assert ("TensorNotFound: tensor model.layers.1.mlp.experts.down_proj_scales is missing "
            "(llama.cpp needs blk.1.ffn_down_exps.weight)") in err, err
