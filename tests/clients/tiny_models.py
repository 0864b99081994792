"""Tiny random models made at test time, as the real libraries save them (no downloads): a transformers 5
Llama folder with a SentencePiece-derived tokenizer, the same weights as a transformers-4-style
`pytorch_model.bin` folder, as Meta's original download (consolidated.NN.pth, params.json), and a
diffusers DDPM pipeline folder."""
import io
import json
import shutil
from pathlib import Path

# Text the tokenizer is trained on, and that tests tokenize: Unicode, digits, leading spaces.
TEXT = "\n".join(["The quick brown fox jumps over the lazy dog. 0123456789 Ünïcödé ✓ naïve café  two  spaces"] * 40 + ["hello world " * 5])


def sentencepiece_model(path: Path, vocab_size: int = 400) -> Path:
    """Trains a small SentencePiece BPE model with byte fallback (what Llama 2 and Mistral ship) at `path`."""
    import sentencepiece as spm

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TEXT.splitlines()), model_writer=out, vocab_size=vocab_size, model_type="bpe", byte_fallback=True,
        character_coverage=1.0, bos_id=1, eos_id=2, unk_id=0, pad_id=-1, minloglevel=2,
    )
    path.write_bytes(out.getvalue())
    return path


def llama_folder(folder: Path, seed: int = 0, **config) -> Path:
    """A LlamaForCausalLM saved by transformers with its tokenizer (tokenizer.json and tokenizer_config.json,
    as transformers 5 saves a SentencePiece tokenizer). `config` overrides LlamaConfig fields."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    folder = Path(folder)
    spm_dir = folder.with_name(folder.name + "-spm")
    spm_dir.mkdir(parents=True, exist_ok=True)
    sentencepiece_model(spm_dir / "tokenizer.model")
    (spm_dir / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (spm_dir / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "LlamaTokenizer", "add_bos_token": True}))
    tokenizer = AutoTokenizer.from_pretrained(spm_dir)
    fields = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, bos_token_id=1, eos_token_id=2)
    fields.update(config)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**fields)).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    shutil.rmtree(spm_dir)
    return folder


def bin_folder(source: Path, folder: Path) -> Path:
    """`source`'s weights as transformers 4 saved them without safe_serialization: pytorch_model.bin
    (torch.save of the state dict), with the config, tokenizer and generation files beside it."""
    import torch
    from safetensors.torch import load_file

    folder = Path(folder)
    folder.mkdir(parents=True)
    for f in Path(source).iterdir():
        if f.is_file() and not f.name.endswith(".safetensors") and not f.name.endswith(".safetensors.index.json"):
            shutil.copy(f, folder / f.name)
    torch.save(load_file(Path(source) / "model.safetensors"), folder / "pytorch_model.bin")
    return folder


# Meta's names for transformers' (per layer, then the rest), and how fairscale splits each.
LAYER_NAMES = {
    "self_attn.q_proj": ("attention.wq", 0), "self_attn.k_proj": ("attention.wk", 0), "self_attn.v_proj": ("attention.wv", 0),
    "self_attn.o_proj": ("attention.wo", 1), "mlp.gate_proj": ("feed_forward.w1", 0), "mlp.up_proj": ("feed_forward.w3", 0),
    "mlp.down_proj": ("feed_forward.w2", 1), "input_layernorm": ("attention_norm", None), "post_attention_layernorm": ("ffn_norm", None),
}


def to_meta_order(w, heads):
    """transformers' rotary order back to Meta's interleaved pairs (the inverse of transformers' permute)."""
    rows, cols = w.shape
    return w.view(heads, 2, rows // heads // 2, cols).transpose(1, 2).reshape(rows, cols)


def meta_state(model):
    """The model's weights under Meta's names (whole, bf16), q/k in Meta's order."""
    sd = {k: v.detach().bfloat16() for k, v in model.state_dict().items()}
    out = {"tok_embeddings.weight": sd["model.embed_tokens.weight"], "norm.weight": sd["model.norm.weight"]}
    if "lm_head.weight" in sd and not model.config.tie_word_embeddings:
        out["output.weight"] = sd["lm_head.weight"]
    for n in range(model.config.num_hidden_layers):
        for hf, (meta, _) in LAYER_NAMES.items():
            w = sd[f"model.layers.{n}.{hf}.weight"]
            if hf == "self_attn.q_proj":
                w = to_meta_order(w, model.config.num_attention_heads)
            elif hf == "self_attn.k_proj":
                w = to_meta_order(w, model.config.num_key_value_heads)
            out[f"layers.{n}.{meta}.weight"] = w
    return out


def split_dim(name, llama3):
    if name == "tok_embeddings.weight":
        return 0 if llama3 else 1
    if name == "output.weight":
        return 0
    if name == "norm.weight" or name.endswith("_norm.weight"):
        return None
    meta = name.split(".", 2)[2].rsplit(".", 1)[0]
    return next(d for m, d in LAYER_NAMES.values() if m == meta)


def write_shards(state, folder, shards, llama3=False):
    """Meta's model-parallel shards consolidated.NN.pth: each tensor cut as fairscale cuts it."""
    import torch

    for s in range(shards):
        part = {}
        for name, w in state.items():
            d = split_dim(name, llama3)
            part[name] = w.clone() if d is None else w.chunk(shards, dim=d)[s].clone()
        torch.save(part, folder / f"consolidated.{s:02d}.pth")


def meta_original_folder(folder, model, shards=1, extra_params=None, tokenizer=None):
    """`model` (a transformers Llama) as Meta's download: consolidated.NN.pth (bf16, `shards`
    model-parallel shards), params.json, and `tokenizer` copied as tokenizer.model: a tiktoken rank file
    makes it Llama 3's (embeddings split by rows, vocab_size and rope_theta in params.json); none, Llama
    2's (a SentencePiece tokenizer.model, vocab_size -1)."""
    folder = Path(folder)
    folder.mkdir(parents=True)
    write_shards(meta_state(model), folder, shards, llama3=tokenizer is not None)
    c = model.config
    # Meta's MLP width is int(ffn_dim_multiplier * int(8 * dim / 3)) rounded up to multiple_of: the
    # model's, with a multiplier a little short of it.
    params = {"dim": c.hidden_size, "ffn_dim_multiplier": (c.intermediate_size - 0.5) / (8 * c.hidden_size // 3),
              "multiple_of": c.intermediate_size, "n_heads": c.num_attention_heads, "n_kv_heads": c.num_key_value_heads,
              "n_layers": c.num_hidden_layers, "norm_eps": c.rms_norm_eps, "vocab_size": -1}
    if tokenizer is not None:
        params.update(vocab_size=c.vocab_size, rope_theta=c.rope_theta if hasattr(c, "rope_theta") else c.rope_parameters["rope_theta"])
    params.update(extra_params or {})
    (folder / "params.json").write_text(json.dumps(params))
    if tokenizer is None:
        sentencepiece_model(folder / "tokenizer.model")
    else:
        shutil.copy(tokenizer, folder / "tokenizer.model")
    return folder


def ddpm_folder(folder: Path, seed: int = 0) -> Path:
    """A diffusers DDPMPipeline (a tiny UNet2DModel and its scheduler) saved as diffusers saves it."""
    import torch
    from diffusers import DDPMPipeline, DDPMScheduler, UNet2DModel

    torch.manual_seed(seed)
    unet = UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(8, 16), norm_num_groups=4,
                       down_block_types=("DownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "UpBlock2D"))
    DDPMPipeline(unet=unet, scheduler=DDPMScheduler(num_train_timesteps=10)).save_pretrained(folder)
    return Path(folder)
