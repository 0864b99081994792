#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ (standard library only, deterministic).

Run from anywhere: python3 fuzz/make_seeds.py. Existing seeds of the same names are overwritten;
the files are small and checked in, so rerunning it must give no diff.
"""
import base64
import json
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

# Index of each dtype in safeweights::Dtype (include/safeweights/dtype.h), for fuzz_slice's first byte.
DTYPE_INDEX = {"BOOL": 0, "F4": 1, "F6_E2M3": 2, "U8": 4, "I16": 11, "F16": 13, "BF16": 14,
               "F32": 17, "C64": 18, "F64": 19}


def st_file(entries, data=b"", pad=True, raw_header=None):
    """A safetensors file: u64 little-endian length, JSON header (space-padded to 8), data."""
    header = raw_header if raw_header is not None else json.dumps(entries, separators=(",", ":")).encode()
    if pad:
        header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + data


def tensor(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def header_seeds():
    s = {}
    s["valid_f32_2x2"] = st_file({"w": tensor("F32", [2, 2], 0, 16)}, bytes(range(16)))
    s["valid_multi"] = st_file(
        {
            "__metadata__": {"format": "pt", "note": "q\"uo\\te\u00e9"},
            "a.weight": tensor("BF16", [2, 3], 0, 12),
            "b": tensor("I8", [4], 12, 16),
            "scalar": tensor("F64", [], 16, 24),
            "mask": tensor("BOOL", [3], 24, 27),
            "empty": tensor("U8", [0, 5], 27, 27),
        },
        bytes((i * 37) & 0xFF for i in range(27)),
    )
    s["valid_f4"] = st_file({"q": tensor("F4", [2, 4], 0, 4)}, b"\x12\x34\x56\x78")
    s["valid_3d_f16"] = st_file({"x": tensor("F16", [2, 2, 3], 0, 24)}, bytes(range(24)))
    s["valid_empty"] = st_file({})
    s["valid_metadata_only"] = st_file({"__metadata__": {"format": "pt"}})
    s["valid_unknown_field"] = st_file({"w": dict(tensor("U8", [2], 0, 2), extra=1)}, b"\x01\x02")
    s["valid_unpadded"] = st_file({"w": tensor("U8", [3], 0, 3)}, b"abc", pad=False)
    # Invalid inputs, one rule each.
    s["bad_too_small"] = b"\x08\x00\x00\x00"
    s["bad_header_too_large"] = struct.pack("<Q", 200_000_000) + b"{}"
    s["bad_length_past_end"] = struct.pack("<Q", 64) + b"{}      "
    s["bad_json"] = st_file(None, raw_header=b'{"w":{"dtype":"F32",')
    s["bad_utf8"] = st_file(None, raw_header=b'{"\xff\xfe":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}') + b"\x00"
    s["bad_hole"] = st_file({"a": tensor("U8", [2], 0, 2), "b": tensor("U8", [2], 3, 5)}, bytes(5))
    s["bad_overlap"] = st_file({"a": tensor("U8", [2], 0, 2), "b": tensor("U8", [2], 1, 3)}, bytes(3))
    s["bad_size_mismatch"] = st_file({"a": tensor("F32", [2], 0, 4)}, bytes(4))
    s["bad_trailing_bytes"] = st_file({"a": tensor("U8", [2], 0, 2)}, bytes(3))
    s["bad_dtype"] = st_file({"a": tensor("F128", [1], 0, 16)}, bytes(16))
    s["bad_duplicate_key"] = st_file(
        None, raw_header=b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                         b'"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}') + b"\x00"
    s["bad_array_entry"] = st_file(None, raw_header=b'{"a":["U8",[1],[0,1]]}') + b"\x00"
    s["bad_metadata_value"] = st_file(None, raw_header=b'{"__metadata__":{"n":1}}')
    s["bad_overflow"] = st_file({"a": tensor("F64", [2**40, 2**40], 0, 8)}, bytes(8))
    s["bad_deep"] = st_file(None, raw_header=b'{"__metadata__":' + b"[" * 200 + b"]" * 200 + b"}")
    s["bad_reversed"] = st_file({"a": tensor("U8", [0], 2, 0)}, bytes(2))
    return s


def slice_seed(dtype, shape, text, base=0):
    return bytes([DTYPE_INDEX[dtype], len(shape) | (base << 3)] + list(shape)) + text.encode()


def slice_seeds():
    specs = [
        ("F32", [3, 4], "0:2, ::-1"), ("F32", [3, 4], ""), ("F32", [3, 4], "1"), ("F32", [3, 4], "-1, 1:3"),
        ("BF16", [2, 3, 4], "..., 0"), ("BF16", [2, 3, 4], "None, :, ::2"), ("U8", [12], "::-3"),
        ("U8", [12], "-100:100:5"), ("F64", [], "..."), ("F64", [], "None"), ("I16", [4, 4], "::0"),
        ("I16", [4, 4], "..., ..."), ("I16", [4, 4], "0, 0, 0"), ("F16", [5, 2], "7"),
        ("F4", [4, 4], "1:3, :"), ("F4", [4, 3], ":, 1"), ("F6_E2M3", [4, 4], "::2"),
        ("BOOL", [6], "9223372036854775807:-9223372036854775808:-1"), ("C64", [2, 2], "newaxis, ..., 1:"),
        ("U8", [0, 3], ":, ::-1"), ("F32", [2, 2, 2, 2], "1, ..., -1"), ("U8", [8], "1:3:4:5"),
        ("U8", [8], "99999999999999999999999:"),
    ]
    out = {}
    for i, (dtype, shape, text) in enumerate(specs):
        out[f"spec_{i:02d}"] = slice_seed(dtype, shape, text, base=i % 32)
    return out


def roundtrip_seeds():
    rng = random.Random(20261122)
    out = {}
    for i, n in enumerate([0, 8, 32, 64, 128, 256, 512, 1024]):
        out[f"random_{i:02d}"] = bytes(rng.getrandbits(8) for _ in range(n))
    return out


def legacy_view_seeds():
    """fuzz_legacy_view reads its input through a FuzzedDataProvider: random bytes of a few lengths."""
    rng = random.Random(20261125)
    return {f"random_{i:02d}": bytes(rng.getrandbits(8) for _ in range(n)) for i, n in enumerate([16, 32, 48, 64, 96, 128, 192, 256, 384, 512])}


# fuzz_hf_folder: byte 0 says which files exist (bit 0 config.json, 1 tokenizer.json, 2
# tokenizer_config.json, 3 tokenizer.model), then their contents in that order, separated.
HF_SEPARATOR = b"\n@@file@@\n"
HF_LLAMA = {"architectures": ["LlamaForCausalLM"], "vocab_size": 6, "hidden_size": 8, "intermediate_size": 8,
            "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
            "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "bos_token_id": 4, "eos_token_id": 5}
HF_BPE = {"added_tokens": [{"id": 4, "content": "<|bos|>", "special": True}, {"id": 5, "content": "<|eos|>", "special": True}],
          "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
          "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3}, "merges": ["a b"]}}
HF_SPM_BPE = {"added_tokens": [], "normalizer": {"type": "Sequence", "normalizers": [
                  {"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
              "pre_tokenizer": None,
              "model": {"type": "BPE", "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x41>": 3, "\u2581a": 4, "a": 5},
                        "merges": [], "byte_fallback": True, "unk_token": "<unk>"}}
HF_TOKENIZER_CONFIG = {"bos_token": "<|bos|>", "eos_token": "<|eos|>", "add_bos_token": True, "add_eos_token": False,
                       "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}",
                       "added_tokens_decoder": {"4": {"content": "<|bos|>", "special": True}}}


def varint(v):
    out = b""
    while True:
        out += bytes([(v & 0x7F) | (0x80 if v > 0x7F else 0)])
        v >>= 7
        if not v:
            return out


def spm_model(pieces):
    """A SentencePiece ModelProto with only its pieces (field 1: piece 1, score 2, type 3)."""
    out = b""
    for text, score, kind in pieces:
        body = b"\x0a" + varint(len(text.encode())) + text.encode() + b"\x15" + struct.pack("<f", score) + b"\x18" + varint(kind)
        out += b"\x0a" + varint(len(body)) + body
    return out


def hf_seed(config=None, tokenizer=None, tokenizer_config=None, model=None):
    mask, parts = 0, []
    for bit, part in enumerate((config, tokenizer, tokenizer_config, model)):
        if part is None:
            continue
        mask |= 1 << bit
        parts.append(part if isinstance(part, bytes) else json.dumps(part).encode())
    return bytes([mask]) + HF_SEPARATOR.join(parts)


def hf_folder_seeds():
    s = {}
    spm = spm_model([("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3), ("\u2581a", -1.0, 1), ("<0x41>", 0.0, 6), ("a", -2.0, 1)])
    s["llama_bpe"] = hf_seed(HF_LLAMA, HF_BPE, HF_TOKENIZER_CONFIG)
    s["llama_config_only"] = hf_seed(HF_LLAMA)
    s["llama_sentencepiece"] = hf_seed(HF_LLAMA, None, {"add_bos_token": True}, spm)
    s["llama_spm_style_bpe"] = hf_seed(HF_LLAMA, HF_SPM_BPE, {"bos_token": "<s>"})
    s["llama3_rope"] = hf_seed(dict(HF_LLAMA, rope_theta=500000.0, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16}), HF_BPE)
    s["qwen2"] = hf_seed(dict(HF_LLAMA, architectures=["Qwen2ForCausalLM"], rope_parameters={"rope_type": "yarn", "factor": 4.0,
                                                                                           "original_max_position_embeddings": 16}), HF_BPE)
    s["qwen3"] = hf_seed(dict(HF_LLAMA, architectures=["Qwen3ForCausalLM"], head_dim=4), HF_BPE)
    s["gemma2"] = hf_seed(dict(HF_LLAMA, architectures=["Gemma2ForCausalLM"], head_dim=4, query_pre_attn_scalar=4, sliding_window=16,
                               hidden_activation="gelu_pytorch_tanh", attn_logit_softcapping=50.0, final_logit_softcapping=30.0), None, None, spm)
    s["gemma3"] = hf_seed(dict(HF_LLAMA, architectures=["Gemma3ForCausalLM"], head_dim=4, query_pre_attn_scalar=4, sliding_window=16,
                               hidden_activation="gelu_pytorch_tanh"), None, None, spm)
    s["phi3_longrope"] = hf_seed(dict(HF_LLAMA, architectures=["Phi3ForCausalLM"], original_max_position_embeddings=16, rope_parameters={
        "rope_type": "longrope", "short_factor": [1.0, 2.0], "long_factor": [3.0, 4.0], "partial_rotary_factor": 1.0}), HF_BPE)
    moe = dict(num_experts_per_tok=2, num_local_experts=4)
    s["qwen3moe"] = hf_seed(dict(HF_LLAMA, architectures=["Qwen3MoeForCausalLM"], head_dim=4, moe_intermediate_size=2, norm_topk_prob=True,
                                 decoder_sparse_step=1, mlp_only_layers=[], **moe), HF_BPE)
    s["mixtral"] = hf_seed(dict(HF_LLAMA, architectures=["MixtralForCausalLM"], **moe), HF_BPE)
    s["qwen2moe"] = hf_seed(dict(HF_LLAMA, architectures=["Qwen2MoeForCausalLM"], num_experts=4, num_experts_per_tok=2, moe_intermediate_size=2,
                                 shared_expert_intermediate_size=6, norm_topk_prob=False), HF_BPE)
    s["olmoe"] = hf_seed(dict(HF_LLAMA, architectures=["OlmoeForCausalLM"], num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                              clip_qkv=None), HF_BPE)
    s["gptoss_mxfp4"] = hf_seed(dict(HF_LLAMA, architectures=["GptOssForCausalLM"], head_dim=4, sliding_window=4, swiglu_limit=7.0,
                                     layer_types=["sliding_attention"], quantization_config={"quant_method": "mxfp4"}, rope_parameters={
                                         "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "beta_fast": 32.0}, **moe), HF_BPE)
    s["deepseek3"] = hf_seed(dict(HF_LLAMA, architectures=["DeepseekV3ForCausalLM"], num_key_value_heads=2, n_routed_experts=4,
                                  num_experts_per_tok=2, moe_intermediate_size=2, n_shared_experts=1, first_k_dense_replace=1, n_group=2,
                                  topk_group=1, routed_scaling_factor=2.5, norm_topk_prob=True, q_lora_rank=None, kv_lora_rank=4,
                                  qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=2, head_dim=2, scoring_func="sigmoid"), HF_BPE)
    s["glm4moe"] = hf_seed(dict(HF_LLAMA, architectures=["Glm4MoeForCausalLM"], num_key_value_heads=2, n_routed_experts=4,
                                num_experts_per_tok=2, moe_intermediate_size=2, n_shared_experts=1, first_k_dense_replace=1, n_group=1,
                                topk_group=1, routed_scaling_factor=2.5, norm_topk_prob=True, attention_bias=True, use_qk_norm=True,
                                num_nextn_predict_layers=1, rope_parameters={"rope_type": "default", "partial_rotary_factor": 0.5}), HF_BPE)
    layer_norm = {k: v for k, v in HF_LLAMA.items() if k != "rms_norm_eps"}
    s["starcoder2"] = hf_seed(dict(layer_norm, architectures=["Starcoder2ForCausalLM"], norm_epsilon=1e-5, use_bias=True,
                                   hidden_act="gelu_pytorch_tanh"), HF_BPE)
    s["stablelm"] = hf_seed(dict(layer_norm, architectures=["StableLmForCausalLM"], layer_norm_eps=1e-5, use_parallel_residual=True,
                                 qk_layernorm=True, use_qkv_bias=True, tie_word_embeddings=False,
                                 rope_parameters={"rope_type": "default", "partial_rotary_factor": 0.5}), HF_BPE)
    s["cohere2"] = hf_seed(dict(layer_norm, architectures=["Cohere2ForCausalLM"], layer_norm_eps=1e-5, logit_scale=0.25, sliding_window=16,
                                layer_types=["sliding_attention"], model_max_length=64), HF_BPE)
    linear = dict(head_dim=16, linear_num_key_heads=1, linear_num_value_heads=2, linear_key_head_dim=2, linear_value_head_dim=2,
                  linear_conv_kernel_dim=4, num_hidden_layers=2, layer_types=["linear_attention", "full_attention"],
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25})
    s["qwen35"] = hf_seed(dict(HF_LLAMA, architectures=["Qwen3_5ForCausalLM"], **linear), HF_BPE)
    s["qwen35moe"] = hf_seed(dict({k: v for k, v in HF_LLAMA.items() if k != "intermediate_size"}, architectures=["Qwen3_5MoeForCausalLM"],
                                  num_experts=4, num_experts_per_tok=2, moe_intermediate_size=2, shared_expert_intermediate_size=6, **linear), HF_BPE)
    s["qwen3next"] = hf_seed(dict(HF_LLAMA, architectures=["Qwen3NextForCausalLM"], num_experts=4, num_experts_per_tok=2, moe_intermediate_size=2,
                                  shared_expert_intermediate_size=6, norm_topk_prob=True, **linear), HF_BPE)
    s["smollm3"] = hf_seed(dict(HF_LLAMA, architectures=["SmolLM3ForCausalLM"], num_hidden_layers=4, no_rope_layers=[1, 1, 1, 0],
                                no_rope_layer_interval=4, use_sliding_window=False), HF_BPE)
    s["olmo2"] = hf_seed(dict(HF_LLAMA, architectures=["Olmo2ForCausalLM"]), HF_BPE)
    s["granite"] = hf_seed(dict(HF_LLAMA, architectures=["GraniteForCausalLM"], attention_multiplier=0.5, embedding_multiplier=12.0,
                                residual_multiplier=0.2, logits_scaling=8.0), HF_BPE)
    s["gemma"] = hf_seed(dict(HF_LLAMA, architectures=["GemmaForCausalLM"], head_dim=4, hidden_act="gelu"), None, None, spm)
    s["ministral3"] = hf_seed(dict(HF_LLAMA, architectures=["Ministral3ForCausalLM"], rope_parameters={
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8, "mscale": 1.0, "mscale_all_dim": 1.0,
        "llama_4_scaling_beta": 0.1}), HF_BPE)
    s["mistral3_vision"] = hf_seed({"architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3", "text_config": dict(
        {k: v for k, v in HF_LLAMA.items() if k != "architectures"}, model_type="ministral3", rope_parameters={
            "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8, "mscale": 1.0, "mscale_all_dim": 1.0,
            "llama_4_scaling_beta": 0.1})}, HF_BPE)
    gemma4_tokenizer = dict(HF_SPM_BPE, normalizer={"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
                            decoder={"type": "Sequence", "decoders": [{"type": "ByteFallback"}]})
    s["gemma4"] = hf_seed(dict(HF_LLAMA, architectures=["Gemma4ForCausalLM"], head_dim=4, sliding_window=16, hidden_activation="gelu_pytorch_tanh",
                               num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"], num_kv_shared_layers=1,
                               hidden_size_per_layer_input=2, vocab_size_per_layer_input=6, per_layer_config={"1": {"head_dim": 8}},
                               rope_parameters={"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25},
                                                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
                          gemma4_tokenizer, {"bos_token": "<s>", "extra_special_tokens": ["</s>"]})
    s["qwen35_vision"] = hf_seed({"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "text_config": dict(
        {k: v for k, v in HF_LLAMA.items() if k != "architectures"}, **dict(linear, rope_parameters={
            "rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25, "mrope_section": [1, 1, 0],
            "mrope_interleaved": True}))}, HF_BPE)
    s["gemma4_moe"] = hf_seed(dict(HF_LLAMA, architectures=["Gemma4ForCausalLM"], head_dim=4, global_head_dim=4, sliding_window=16,
                                   hidden_activation="gelu_pytorch_tanh", layer_types=["full_attention"], num_kv_shared_layers=0,
                                   hidden_size_per_layer_input=0, enable_moe_block=True, num_experts=4, top_k_experts=2,
                                   moe_intermediate_size=2, rope_parameters={"full_attention": {"rope_type": "proportional",
                                   "partial_rotary_factor": 0.5}, "sliding_attention": {"rope_type": "default"}}),
                              gemma4_tokenizer, {"bos_token": "<s>", "extra_special_tokens": ["</s>"]})
    s["glm4v_vision"] = hf_seed({"architectures": ["Glm4vMoeForConditionalGeneration"], "model_type": "glm4v_moe", "text_config": dict(
        {k: v for k, v in HF_LLAMA.items() if k != "architectures"}, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=2,
        n_shared_experts=1, first_k_dense_replace=0, rope_parameters={"rope_type": "default", "partial_rotary_factor": 0.5,
                                                                     "mrope_section": [1, 0, 0]})}, HF_BPE)
    s["config_duplicate_key"] = hf_seed(b'{"architectures":["LlamaForCausalLM"],"vocab_size":6,"vocab_size":7}')
    s["config_infinity"] = hf_seed(b'{"architectures":["LlamaForCausalLM"],"rms_norm_eps":Infinity}')
    s["config_huge_number"] = hf_seed(b'{"architectures":["LlamaForCausalLM"],"vocab_size":100000000000000000000000}')
    s["diffusers_component"] = hf_seed({"_class_name": "UNet2DConditionModel"})
    return s


# fuzz_tokenizer: byte 0 says which files exist (bit 0 tokenizer.json, 1 tokenizer.model, 2
# tokenizer_config.json), byte 1 sets vocab_size (256 + 4 * byte 1), then the files, separated.
BYTE_PIECES = [f"<0x{b:02X}>" for b in range(256)]
TOK_SPM_BPE = {"added_tokens": [{"id": 3, "content": "<s>", "special": True}], "normalizer": None,
               "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
               "model": {"type": "BPE", "byte_fallback": True, "unk_token": "<unk>",
                         "vocab": dict({"<unk>": 0, "\u2581a": 1, "a": 2, "<s>": 3}, **{p: 4 + i for i, p in enumerate(BYTE_PIECES)}),
                         "merges": [["\u2581", "a"]]}}


# Pre-tokenizer steps the matcher (src/hf/pretokenizer.cpp) compares: Llama 3's Split, then ByteLevel.
TOK_SPLITS = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\r\n]*|"
                                                  "\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
     "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}


def tokenizer_seed(vocab_byte, tokenizer=None, model=None, tokenizer_config=None):
    mask, parts = 0, []
    for bit, part in enumerate((tokenizer, model, tokenizer_config)):
        if part is None:
            continue
        mask |= 1 << bit
        parts.append(part if isinstance(part, bytes) else json.dumps(part).encode())
    return bytes([mask, vocab_byte]) + HF_SEPARATOR.join(parts)


def tokenizer_seeds():
    lower = json.loads(json.dumps(TOK_SPM_BPE))
    lower["model"]["vocab"] = {k.lower() if k.startswith("<0x") else k: v for k, v in lower["model"]["vocab"].items()}
    missing = json.loads(json.dumps(TOK_SPM_BPE))
    del missing["model"]["vocab"]["<0x80>"]
    spm = spm_model([("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("\u2581a", -1.0, 1)] + [(p, 0.0, 6) for p in BYTE_PIECES])
    return {
        "byte_level_bpe": tokenizer_seed(0, HF_BPE, None, HF_TOKENIZER_CONFIG),
        "spm_style_bpe": tokenizer_seed(1, TOK_SPM_BPE, None, {"bos_token": "<s>", "add_bos_token": True}),
        "spm_style_bpe_lower_case_bytes": tokenizer_seed(1, lower),
        "spm_style_bpe_missing_byte": tokenizer_seed(1, missing),
        "spm_model": tokenizer_seed(1, None, spm, {"added_tokens_decoder": {"3": {"content": "<s>", "special": True}}}),
        "spm_model_without_bytes": tokenizer_seed(0, None, spm_model([("<unk>", 0.0, 2), ("a", 0.0, 1)])),
        "repeated_key_deep": tokenizer_seed(0, None, None, b'{"bos_token":{"content":"a","content":"b"}}'),
        "split_sequence_llama3": tokenizer_seed(0, dict(HF_BPE, pre_tokenizer=TOK_SPLITS, model=dict(HF_BPE["model"], ignore_merges=True))),
        "template_post_processor": tokenizer_seed(0, dict(HF_BPE, post_processor={"type": "Sequence", "processors": [
            {"type": "ByteLevel", "trim_offsets": False},
            {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|bos|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                                      {"SpecialToken": {"id": "<|eos|>", "type_id": 0}}]}]}),
                                                   None, HF_TOKENIZER_CONFIG),
        "nested_sequence_nfc": tokenizer_seed(0, dict(HF_BPE, normalizer={"type": "NFC"}, pre_tokenizer={
            "type": "Sequence", "pretokenizers": [TOK_SPLITS, {"type": "Digits", "individual_digits": True},
                                                  {"type": "Punctuation", "behavior": "Contiguous"}]})),
    }


# fuzz_listing: byte 0 picks the reader (bit 1 set: a Cloud Storage objects list page and object
# metadata; else bit 0 set: a Hub tree page, else an S3 ListObjectsV2 page), then the folder asked for,
# '\n', then the page's body.
S3_HEAD = b'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'


def listing_seed(hub, folder, body, gs=False):
    return bytes([2 if gs else 1 if hub else 0]) + folder + b"\n" + body


def listing_seeds():
    s = {}
    s["s3_page"] = listing_seed(False, b"llama/", S3_HEAD + (
        b"<Name>models</Name><Prefix>llama/</Prefix><KeyCount>3</KeyCount><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter>"
        b"<EncodingType>url</EncodingType><IsTruncated>true</IsTruncated><NextContinuationToken>1x+tok==</NextContinuationToken>"
        b"<Contents><Key>llama/</Key><Size>0</Size></Contents>"
        b"<Contents><Key>llama/config.json</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified><Size>412</Size></Contents>"
        b"<Contents><Key>llama/model+%C3%BC.safetensors</Key><Size>1048576</Size></Contents>"
        b"<CommonPrefixes><Prefix>llama/tokenizer/</Prefix></CommonPrefixes></ListBucketResult>"))
    s["s3_raw_entities"] = listing_seed(False, b"", S3_HEAD + (
        b"<IsTruncated>false</IsTruncated><Contents><Key>a&amp;b&#233;&#x1F600;</Key><Size>7</Size></Contents></ListBucketResult>"))
    s["s3_hostile"] = listing_seed(False, b"d/", S3_HEAD + (
        b"<EncodingType>url</EncodingType><Contents><Key>d/..</Key><Size>1</Size></Contents>"
        b"<Contents><Key>d/%00</Key><Size>99999999999999999999</Size></Contents><IsTruncated>maybe</IsTruncated></ListBucketResult>"))
    s["s3_error"] = listing_seed(False, b"", b'<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>token '
                                 b"hf_FuzzToken0123456789 key AKIAFUZZKEY000000001</Message></Error>")
    s["hub_page"] = listing_seed(True, b"unet", json.dumps([
        {"type": "file", "oid": "a" * 40, "size": 12, "path": "unet/config.json"},
        {"type": "file", "oid": "b" * 40, "size": 3 << 30, "path": "unet/diffusion_pytorch_model.safetensors",
         "lfs": {"oid": "c" * 64, "size": 3 << 30, "pointerSize": 134}},
        {"type": "directory", "oid": "d" * 40, "size": 0, "path": "unet/sub"}]).encode())
    s["hub_root"] = listing_seed(True, b"", b'[{"type":"file","path":"model.safetensors","size":8},{"type":"directory","path":"x"}]')
    s["hub_hostile"] = listing_seed(True, b"d", b'[{"type":"file","path":"d/../x","size":-1},{"type":"symlink","path":"d/y"},{"path":1}]')
    s["link_header"] = listing_seed(True, b"", b'<https://huggingface.co/api/models/o/r/tree/main?cursor=abc>; rel="next", '
                                    b'<https://x/?X-Amz-Signature=00ff&token=hf_FuzzToken0123456789>; rel="prev"')
    s["gs_page"] = listing_seed(False, b"llama/", json.dumps({
        "kind": "storage#objects", "nextPageToken": "CgtsbGFtYS9tb2RlbA==", "prefixes": ["llama/tokenizer/"],
        "items": [{"name": "llama/", "size": "0"}, {"name": "llama/config.json", "size": "412", "generation": "1700000000000001"},
                  {"name": "llama/model \u00fc.safetensors", "size": "1048576", "generation": "1700000000000002"}]}).encode(), gs=True)
    s["gs_object"] = listing_seed(False, b"", b'{"kind":"storage#object","name":"m.safetensors","size":"400168","generation":"1795761114527760283"}',
                                  gs=True)
    s["gs_hostile"] = listing_seed(False, b"d/", b'{"items":[{"name":"d/..","size":"-1"},{"name":"d/a\\u0000b","size":"1"}],"prefixes":["d/b"]}',
                                   gs=True)
    return s


# fuzz_tiktoken: byte 0 picks the reader (odd: tekken.json; even: a rank file, bit 1 Llama 3.1's special
# tokens, bit 2 instruct), then the file.
def rank_lines(tokens, eol=b"\n"):
    return b"".join(base64.b64encode(t) + b" " + str(r).encode() + eol for r, t in enumerate(tokens))


def tekken_doc(tokens, specials, **config):
    return json.dumps({"config": {"pattern": r"\p{L}+|\p{N}|\s+|.", **config},
                       "vocab": [{"rank": r, "token_bytes": base64.b64encode(t).decode(), "token_str": None} for r, t in enumerate(tokens)],
                       "special_tokens": [{"rank": r, "token_str": t, "is_control": True} for r, t in enumerate(specials)]}).encode()


def tiktoken_seeds():
    tokens = [bytes([b]) for b in range(256)] + [b"ab", b"abc", b" a", b" ab", b"\n\n", b"aa", b"aaa", b"aaaa"]
    specials = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "<pad>"]
    return {
        "rank_llama3": b"\x00" + rank_lines(tokens),
        "rank_llama31_instruct_crlf": b"\x06" + rank_lines(tokens, b"\r\n"),
        "rank_gap": b"\x00" + rank_lines(tokens[:10]) + b"YWJj 12\n",
        "rank_repeated_bytes": b"\x00" + rank_lines(tokens[:10] + [b"a"]),
        "tekken": b"\x01" + tekken_doc(tokens, specials, default_vocab_size=266, default_num_special_tokens=8),
        "tekken_no_config_sizes": b"\x01" + tekken_doc(tokens, specials),
        "tekken_old_layout": b"\x01" + b'{"config": {"pattern": "x"}, "vocab": []}',
    }


# fuzz_imatrix: llama-imatrix's two formats (src/gguf/imatrix.h).
def gguf_str(text):
    return struct.pack("<Q", len(text)) + text


def imatrix_seeds():
    values = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    legacy = struct.pack("<i", 2)
    for name, ncall in ((b"blk.0.attn_v.weight", 2), (b"blk.0.ffn_up_exps.weight", 0)):
        legacy += struct.pack("<i", len(name)) + name + struct.pack("<ii", ncall, 4) + values
    legacy += struct.pack("<ii", 7, 4) + b"wiki"
    kv = (gguf_str(b"imatrix.datasets") + struct.pack("<IIQ", 9, 8, 1) + gguf_str(b"wiki")
          + gguf_str(b"imatrix.chunk_count") + struct.pack("<II", 4, 7) + gguf_str(b"imatrix.chunk_size") + struct.pack("<II", 4, 512))
    infos = (gguf_str(b"blk.0.ffn_up_exps.weight.in_sum2") + struct.pack("<IQQIQ", 2, 2, 2, 0, 0)
             + gguf_str(b"blk.0.ffn_up_exps.weight.counts") + struct.pack("<IQQIQ", 2, 1, 2, 0, 32))
    head = b"GGUF" + struct.pack("<IQQ", 3, 2, 3) + kv + infos
    head += b"\0" * (-len(head) % 32)
    gguf = head + values + b"\0" * 16 + struct.pack("<2f", 3.0, 0.0)
    return {"legacy": legacy, "legacy_truncated": legacy[:30], "gguf": gguf}


def write(target, seeds):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    for name, data in sorted(seeds.items()):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    print(f"{folder}: {len(seeds)} seeds")


def main():
    write("fuzz_safetensors_header", header_seeds())
    write("fuzz_slice", slice_seeds())
    write("fuzz_roundtrip", roundtrip_seeds())
    write("fuzz_legacy_view", legacy_view_seeds())
    write("fuzz_hf_folder", hf_folder_seeds())
    write("fuzz_tokenizer", tokenizer_seeds())
    write("fuzz_listing", listing_seeds())
    write("fuzz_tiktoken", tiktoken_seeds())
    write("fuzz_imatrix", imatrix_seeds())


if __name__ == "__main__":
    main()
