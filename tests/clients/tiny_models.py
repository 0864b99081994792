"""Tiny random models made at test time, as the real libraries save them (no downloads): a transformers 5
Llama folder with a SentencePiece-derived tokenizer, the same weights as a transformers-4-style
`pytorch_model.bin` folder, and a diffusers DDPM pipeline folder."""
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


def ddpm_folder(folder: Path, seed: int = 0) -> Path:
    """A diffusers DDPMPipeline (a tiny UNet2DModel and its scheduler) saved as diffusers saves it."""
    import torch
    from diffusers import DDPMPipeline, DDPMScheduler, UNet2DModel

    torch.manual_seed(seed)
    unet = UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(8, 16), norm_num_groups=4,
                       down_block_types=("DownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "UpBlock2D"))
    DDPMPipeline(unet=unet, scheduler=DDPMScheduler(num_train_timesteps=10)).save_pretrained(folder)
    return Path(folder)
