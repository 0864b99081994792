"""Model downloads that are not transformers folders, read over s3:// and hf:// (issues 34 and 35):
Mistral's native layout (params.json, consolidated.safetensors, tokenizer.model.v3, the transformers
shards beside it), Meta's original download (consolidated.NN.pth in two model-parallel shards, written by
Debian's torch where there is one), and a transformers Qwen3-MoE folder. Each converts from the bucket
(and from the Hub stand-in) to the same bytes as from the local folder: the GGUF, and for the originals
the transformers folder, file for file. The weights are written here with numpy (no torch in this
environment); the folders keep one name everywhere, since the GGUF's general.name is the folder's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import BUCKET, run_cli, torch_python
import hub_server
from hub_server import Hub

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from spm_model import spm_model, spm_pieces  # noqa: E402

HIDDEN, HEADS, KV_HEADS, LAYERS, FF, HEAD_DIM = 64, 4, 2, 2, 96, 16
EXPERTS, EXPERT_FF = 4, 32
TOKEN = "hf_originaltoken"


def meta_weights(vocab: int, seed: int) -> dict[str, np.ndarray]:
    """A Llama's weights in Meta's (and Mistral's native) names, float32."""
    rng = np.random.default_rng(seed)

    def mat(rows, cols):
        return rng.standard_normal((rows, cols)).astype(np.float32)

    w = {"tok_embeddings.weight": mat(vocab, HIDDEN), "norm.weight": np.ones(HIDDEN, np.float32), "output.weight": mat(vocab, HIDDEN)}
    for i in range(LAYERS):
        p = f"layers.{i}."
        w.update({p + "attention_norm.weight": np.ones(HIDDEN, np.float32), p + "ffn_norm.weight": np.ones(HIDDEN, np.float32),
                  p + "attention.wq.weight": mat(HEADS * HEAD_DIM, HIDDEN), p + "attention.wk.weight": mat(KV_HEADS * HEAD_DIM, HIDDEN),
                  p + "attention.wv.weight": mat(KV_HEADS * HEAD_DIM, HIDDEN), p + "attention.wo.weight": mat(HIDDEN, HEADS * HEAD_DIM),
                  p + "feed_forward.w1.weight": mat(FF, HIDDEN), p + "feed_forward.w3.weight": mat(FF, HIDDEN),
                  p + "feed_forward.w2.weight": mat(HIDDEN, FF)})
    return w


def make_mistral_native(folder: Path) -> Path:
    from safeweights.numpy import save_file

    pieces = spm_pieces()
    folder.mkdir(parents=True)
    save_file(meta_weights(len(pieces), 11), str(folder / "consolidated.safetensors"))
    params = {"dim": HIDDEN, "n_layers": LAYERS, "head_dim": HEAD_DIM, "hidden_dim": FF, "n_heads": HEADS, "n_kv_heads": KV_HEADS,
              "norm_eps": 1e-05, "vocab_size": len(pieces), "rope_theta": 1000000.0}
    (folder / "params.json").write_text(json.dumps(params))
    (folder / "tokenizer.model.v3").write_bytes(spm_model(pieces))
    save_file({"junk": np.zeros(3, np.float32)}, str(folder / "model.safetensors"))  # the transformers shard beside: ignored
    return folder


# Meta's two model-parallel shards as fairscale cuts them (rows: wq wk wv w1 w3 output; columns: wo w2
# and Llama 2's embeddings; norms replicated), bf16, written by torch.save.
META_SHARDS = r"""
import json, sys, numpy as np, torch
folder, npz = sys.argv[1], np.load(sys.argv[2])
cols = ("attention.wo.weight", "feed_forward.w2.weight", "tok_embeddings.weight")
rows = ("attention.wq.weight", "attention.wk.weight", "attention.wv.weight", "feed_forward.w1.weight", "feed_forward.w3.weight", "output.weight")
for s in range(2):
    part = {}
    for name in npz.files:
        t = torch.from_numpy(npz[name]).bfloat16()
        d = 1 if name.endswith(cols) else 0 if name.endswith(rows) else None
        part[name] = t.clone() if d is None else t.chunk(2, dim=d)[s].clone()
    torch.save(part, f"{folder}/consolidated.{s:02d}.pth")
"""


def make_meta_original(folder: Path) -> Path | None:
    torch_py = torch_python()
    if torch_py is None:
        return None
    pieces = spm_pieces()
    folder.mkdir(parents=True)
    np.savez(folder.parent / "meta.npz", **meta_weights(len(pieces), 12))
    subprocess.run([torch_py, "-c", META_SHARDS, str(folder), str(folder.parent / "meta.npz")], check=True)
    # Llama 2's params.json: vocab_size -1 (the tokenizer's), no rope_theta; the MLP width from multiple_of.
    params = {"dim": HIDDEN, "multiple_of": FF, "ffn_dim_multiplier": (FF - 0.5) / (8 * HIDDEN // 3), "n_heads": HEADS, "n_kv_heads": KV_HEADS,
              "n_layers": LAYERS, "norm_eps": 1e-05, "vocab_size": -1}
    (folder / "params.json").write_text(json.dumps(params))
    (folder / "tokenizer.model").write_bytes(spm_model(pieces))
    return folder


def make_qwen3_moe(folder: Path) -> Path:
    """A transformers Qwen3-MoE folder (per-expert tensors, q/k norms), its tokenizer a SentencePiece model."""
    from safeweights.numpy import save_file

    pieces = spm_pieces()
    vocab = len(pieces)
    folder.mkdir(parents=True)
    config = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": vocab, "hidden_size": HIDDEN,
              "intermediate_size": FF, "moe_intermediate_size": EXPERT_FF, "num_experts": EXPERTS, "num_experts_per_tok": 2,
              "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [], "num_hidden_layers": LAYERS,
              "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "max_position_embeddings": 256,
              "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer.model").write_bytes(spm_model(pieces))
    (folder / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": True, "bos_token": "<s>", "eos_token": "</s>"}))
    rng = np.random.default_rng(13)

    def mat(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    w = {"model.embed_tokens.weight": mat(vocab, HIDDEN), "model.norm.weight": np.ones(HIDDEN, np.float32), "lm_head.weight": mat(vocab, HIDDEN)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        w.update({p + "input_layernorm.weight": np.ones(HIDDEN, np.float32), p + "post_attention_layernorm.weight": np.ones(HIDDEN, np.float32),
                  p + "self_attn.q_proj.weight": mat(HEADS * HEAD_DIM, HIDDEN), p + "self_attn.k_proj.weight": mat(KV_HEADS * HEAD_DIM, HIDDEN),
                  p + "self_attn.v_proj.weight": mat(KV_HEADS * HEAD_DIM, HIDDEN), p + "self_attn.o_proj.weight": mat(HIDDEN, HEADS * HEAD_DIM),
                  p + "self_attn.q_norm.weight": np.ones(HEAD_DIM, np.float32), p + "self_attn.k_norm.weight": np.ones(HEAD_DIM, np.float32),
                  p + "mlp.gate.weight": mat(EXPERTS, HIDDEN)})
        for e in range(EXPERTS):
            x = f"{p}mlp.experts.{e}."
            w.update({x + "gate_proj.weight": mat(EXPERT_FF, HIDDEN), x + "up_proj.weight": mat(EXPERT_FF, HIDDEN),
                      x + "down_proj.weight": mat(HIDDEN, EXPERT_FF)})
    save_file(w, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("originals")
    return {"mistral": make_mistral_native(base / "mistral-native"), "meta": make_meta_original(base / "meta" / "llama-original"),
            "moe": make_qwen3_moe(base / "qwen3 moe")}


def upload_folder(s3, folder: Path, prefix: str) -> str:
    for f in sorted(folder.iterdir()):
        s3.upload(f, prefix + f.name)
    return f"s3://{BUCKET}/{prefix}"


def converted(tmp_path, source, name, env=None, *extra):
    out = tmp_path / name
    run_cli("convert", source, str(out), *extra, env=env)
    return out


def assert_same_folder(a: Path, b: Path):
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    assert "config.json" in names and "model.safetensors" in names
    for n in names:
        assert (a / n).read_bytes() == (b / n).read_bytes(), n


def assert_converts_alike(tmp_path, local: Path, remote: str, env, *extra):
    """`remote` converts as `local` does: the same GGUF bytes, and the same transformers folder."""
    assert converted(tmp_path, remote, "remote.gguf", env, *extra).read_bytes() == converted(tmp_path, str(local), "local.gguf", None,
                                                                                              *extra).read_bytes()
    assert_same_folder(converted(tmp_path, remote, "remote-hf", env, *extra), converted(tmp_path, str(local), "local-hf", None, *extra))


def test_s3_mistral_native_converts_as_the_local_folder(s3, folders, tmp_path):
    url = upload_folder(s3, folders["mistral"], "originals/mistral-native/")
    assert_converts_alike(tmp_path, folders["mistral"], url, s3.env())


def test_s3_meta_original_converts_as_the_local_folder(s3, folders, tmp_path):
    if folders["meta"] is None:
        pytest.skip("no Python with torch to write Meta's consolidated.NN.pth shards")
    url = upload_folder(s3, folders["meta"], "originals/llama-original/")
    assert_converts_alike(tmp_path, folders["meta"], url, s3.env(), "--llama-version", "2")


def test_s3_moe_folder_converts_to_the_local_gguf(s3, folders, tmp_path):
    """Issue 35: a transformers MoE folder (per-expert tensors stacked into llama.cpp's) read from the bucket."""
    url = upload_folder(s3, folders["moe"], "moe/qwen3 moe/")
    for t in ("q8_0", "bf16"):
        local = converted(tmp_path, str(folders["moe"]), f"local-{t}.gguf", None, "--type", t)
        assert converted(tmp_path, url, f"remote-{t}.gguf", s3.env(), "--type", t).read_bytes() == local.read_bytes(), t


@pytest.fixture(scope="module")
def hub(tmp_path_factory, folders):
    h = Hub(tmp_path_factory.mktemp("hub"))
    h.add("org/mistral-native", {f.name: f.read_bytes() for f in folders["mistral"].iterdir()})
    if folders["meta"] is not None:
        h.add("org/llama-original", {f.name: f.read_bytes() for f in folders["meta"].iterdir()})
    h.page_size = 2  # every listing takes several pages
    yield h
    h.stop()


def test_hub_originals_convert_as_the_local_folders(hub, folders, tmp_path):
    env = hub_server.hub_env(hub, TOKEN)
    (tmp_path / "mistral").mkdir()
    assert_converts_alike(tmp_path / "mistral", folders["mistral"], "hf://org/mistral-native", env)
    if folders["meta"] is None:
        pytest.skip("no Python with torch to write Meta's consolidated.NN.pth shards")
    (tmp_path / "meta").mkdir()
    assert_converts_alike(tmp_path / "meta", folders["meta"], "hf://org/llama-original", env, "--llama-version", "2")
