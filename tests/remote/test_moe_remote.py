"""A Qwen3-MoE folder from s3:// converts to the same bytes as the local folder read mapped (the default)
and by pread, in both expert layouts users have (one tensor per expert; transformers 5's fused
gate_up_proj/down_proj). Locally, `convert` cuts a stacked or sliced expert tensor into pieces at the
experts and reads each in place from the mapping; from S3 the same pieces are gathered through the HTTP
source (scattered reads, no mapping): the bytes must not depend on which. The folder is two shards (an
index), so a layer's experts are read from both. Made here with numpy; whether the bytes are llama.cpp's
is tests/clients/test_hf_gguf_moe.py's question."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import converts_from_s3_as_local
from test_gptoss_remote import byte_level_tokenizer

E, D, F, HEADS, KV_HEADS, HEAD, LAYERS, VOCAB = 4, 64, 32, 4, 2, 16, 2, 257


def make_qwen3moe_folder(folder: Path, fused: bool) -> Path:
    from safeweights.numpy import save_file

    folder.mkdir(parents=True)
    config = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": VOCAB, "hidden_size": D,
              "intermediate_size": 2 * F, "moe_intermediate_size": F, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
              "num_key_value_heads": KV_HEADS, "head_dim": HEAD, "num_experts": E, "num_experts_per_tok": 2, "norm_topk_prob": True,
              "decoder_sparse_step": 1, "mlp_only_layers": [], "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
              "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "tie_word_embeddings": False,
              "hidden_act": "silu", "eos_token_id": 256}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer.json").write_text(json.dumps(byte_level_tokenizer()))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>"}))
    rng = np.random.default_rng(11)

    def mat(*shape, dtype=np.float16):
        return (rng.standard_normal(shape) * 0.5).astype(dtype)

    shards = [{"model.embed_tokens.weight": mat(VOCAB, D), "model.norm.weight": mat(D, dtype=np.float32)}, {"lm_head.weight": mat(VOCAB, D)}]
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        shards[0].update({p + "input_layernorm.weight": mat(D, dtype=np.float32), p + "post_attention_layernorm.weight": mat(D, dtype=np.float32),
                          p + "self_attn.q_proj.weight": mat(HEADS * HEAD, D), p + "self_attn.k_proj.weight": mat(KV_HEADS * HEAD, D),
                          p + "self_attn.v_proj.weight": mat(KV_HEADS * HEAD, D), p + "self_attn.o_proj.weight": mat(D, HEADS * HEAD),
                          p + "self_attn.q_norm.weight": mat(HEAD, dtype=np.float32), p + "self_attn.k_norm.weight": mat(HEAD, dtype=np.float32),
                          p + "mlp.gate.weight": mat(E, D, dtype=np.float32)})
        x = p + "mlp.experts."
        if fused:
            shards[0][x + "gate_up_proj"] = mat(E, 2 * F, D)
            shards[1][x + "down_proj"] = mat(E, D, F)
        else:  # the first half of a layer's experts in one shard, the rest in the other
            for e in range(E):
                shard = shards[e * 2 // E]
                shard[f"{x}{e}.gate_proj.weight"], shard[f"{x}{e}.up_proj.weight"] = mat(F, D), mat(F, D)
                shard[f"{x}{e}.down_proj.weight"] = mat(D, F)
    weight_map = {}
    for k, tensors in enumerate(shards):
        name = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(tensors, str(folder / name))
        weight_map.update({t: name for t in tensors})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


@pytest.mark.parametrize("layout", ["per-expert", "fused"])
def test_s3_qwen3moe_folder_converts_as_the_local_folder(s3, tmp_path, layout):
    folder = make_qwen3moe_folder(tmp_path / f"qwen3moe {layout}", layout == "fused")
    converts_from_s3_as_local(s3, folder, "qwen3moe", tmp_path, ("f32", "q8_0", "q4_k"),
                              local_options=((), ("--backend", "pread", "--threads", "3")))
