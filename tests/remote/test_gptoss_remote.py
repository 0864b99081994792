"""gpt-oss folders from s3:// convert to the same bytes as the local folders: its experts are computed on
read (transposed from transformers' layout; MXFP4 blocks and scales repacked into ggml's blocks), and
here every read of theirs goes through the HTTP source (scattered reads, no mapping) instead of a mapped
file. The folders are made here with numpy: a tiny GptOssForCausalLM (2 layers, 4 experts) in both layouts
users have, with a byte-level BPE tokenizer.json of the 256 byte tokens and one special token. Whether
the bytes are llama.cpp's is tests/clients/test_hf_gguf_gptoss.py's question."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import converts_from_s3_as_local

E, D, F, HEADS, KV_HEADS, HEAD, LAYERS = 4, 64, 32, 4, 2, 16, 2


def byte_level_tokenizer() -> dict:
    """GPT-2's byte-to-character map as vocabulary, no merges, one special token."""
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    vocab = {chars[b]: b for b in range(256)}
    return {"version": "1.0", "added_tokens": [{"id": 256, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                                                "rstrip": False, "normalized": False, "special": True}],
            "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "post_processor": None, "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": False, "vocab": vocab, "merges": []}}


def make_gptoss_folder(folder: Path, mxfp4: bool) -> Path:
    from safeweights.numpy import save_file

    vocab = 257
    folder.mkdir(parents=True)
    config = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": vocab, "hidden_size": D, "intermediate_size": F,
              "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD,
              "num_local_experts": E, "num_experts_per_tok": 2, "max_position_embeddings": 256, "sliding_window": 4, "rms_norm_eps": 1e-5,
              "tie_word_embeddings": False, "eos_token_id": 256, "rope_parameters": {"rope_type": "default", "rope_theta": 150000.0}}
    if mxfp4:
        config["quantization_config"] = {"quant_method": "mxfp4"}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer.json").write_text(json.dumps(byte_level_tokenizer()))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>"}))
    rng = np.random.default_rng(7)

    def mat(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    w = {"model.embed_tokens.weight": mat(vocab, D), "model.norm.weight": mat(D), "lm_head.weight": mat(vocab, D)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        w.update({p + "input_layernorm.weight": mat(D), p + "post_attention_layernorm.weight": mat(D), p + "self_attn.sinks": mat(HEADS),
                  p + "self_attn.q_proj.weight": mat(HEADS * HEAD, D), p + "self_attn.q_proj.bias": mat(HEADS * HEAD),
                  p + "self_attn.k_proj.weight": mat(KV_HEADS * HEAD, D), p + "self_attn.k_proj.bias": mat(KV_HEADS * HEAD),
                  p + "self_attn.v_proj.weight": mat(KV_HEADS * HEAD, D), p + "self_attn.v_proj.bias": mat(KV_HEADS * HEAD),
                  p + "self_attn.o_proj.weight": mat(D, HEADS * HEAD), p + "self_attn.o_proj.bias": mat(D),
                  p + "mlp.router.weight": mat(E, D), p + "mlp.router.bias": mat(E),
                  p + "mlp.experts.gate_up_proj_bias": mat(E, 2 * F), p + "mlp.experts.down_proj_bias": mat(E, D)})
        x = p + "mlp.experts."
        if mxfp4:  # random codes and exponents near 1: any bytes are valid MXFP4
            for name, rows, cols in (("gate_up_proj", 2 * F, D), ("down_proj", D, F)):
                w[x + name + "_blocks"] = rng.integers(0, 256, (E, rows, cols // 32, 16), dtype=np.uint8)
                w[x + name + "_scales"] = rng.integers(120, 130, (E, rows, cols // 32), dtype=np.uint8)
        else:
            w[x + "gate_up_proj"], w[x + "down_proj"] = mat(E, D, 2 * F), mat(E, F, D)
    save_file(w, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize("layout", ["plain", "mxfp4"])
def test_s3_gptoss_folder_converts_as_the_local_folder(s3, tmp_path, layout):
    folder = make_gptoss_folder(tmp_path / f"gpt-oss {layout}", layout == "mxfp4")
    converts_from_s3_as_local(s3, folder, "gptoss", tmp_path, ("f32", "q8_0"))
