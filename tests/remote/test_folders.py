"""Folders as input: s3://BUCKET/PREFIX/ (listed with ListObjectsV2, signed and checked by moto) and
hf://ORG/REPO[/DIR] (listed through the Hub's tree API, paged with Link headers, on the Hub stand-in)
convert to the same bytes as the local folders, every file read through the same readers; refusals are
named as the services name them, and a next page on another host is not followed.

The model folders are made here: a tiny Llama with a SentencePiece tokenizer.model (tests/python's
spm_model.py), its weights in two safetensors shards with an index, and a folder of PyTorch .bin weights
(written by Debian's torch, where there is one)."""

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

HIDDEN, HEADS, KV_HEADS, LAYERS, FF = 64, 4, 2, 2, 96
TOKEN = "hf_foldertoken"
LLAMA = "tiny llama \u00fc"  # the folder's name becomes general.name: the same locally and remotely


def make_llama_folder(folder: Path) -> Path:
    from safeweights.numpy import save_file

    pieces = spm_pieces()
    vocab = len(pieces) + 3
    folder.mkdir(parents=True)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab, "hidden_size": HIDDEN,
              "intermediate_size": FF, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
              "max_position_embeddings": 128, "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
              "bos_token_id": 1, "eos_token_id": 2}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer.model").write_bytes(spm_model(pieces))
    (folder / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": True, "bos_token": "<s>", "eos_token": "</s>"}))
    rng = np.random.default_rng(5)

    def mat(rows, cols):
        return rng.standard_normal((rows, cols)).astype(np.float32)

    w = {"model.embed_tokens.weight": mat(vocab, HIDDEN), "model.norm.weight": np.ones(HIDDEN, np.float32), "lm_head.weight": mat(vocab, HIDDEN)}
    head = HIDDEN // HEADS
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        w.update({p + "input_layernorm.weight": np.ones(HIDDEN, np.float32), p + "post_attention_layernorm.weight": np.ones(HIDDEN, np.float32),
                  p + "self_attn.q_proj.weight": mat(HIDDEN, HIDDEN), p + "self_attn.k_proj.weight": mat(KV_HEADS * head, HIDDEN),
                  p + "self_attn.v_proj.weight": mat(KV_HEADS * head, HIDDEN), p + "self_attn.o_proj.weight": mat(HIDDEN, HIDDEN),
                  p + "mlp.gate_proj.weight": mat(FF, HIDDEN), p + "mlp.up_proj.weight": mat(FF, HIDDEN), p + "mlp.down_proj.weight": mat(HIDDEN, FF)})
    names = sorted(w)
    halves = {"model-00001-of-00002.safetensors": names[: len(names) // 2], "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    weight_map = {}
    for shard, part in halves.items():
        save_file({n: w[n] for n in part}, str(folder / shard), metadata={"format": "pt"})
        weight_map.update({n: shard for n in part})
    index = {"metadata": {"total_size": sum(a.nbytes for a in w.values())}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


def make_bin_folder(folder: Path) -> Path | None:
    """A transformers folder of .bin shards (written by torch) with its config and tokenizer files."""
    torch_py = torch_python()
    if torch_py is None:
        return None
    folder.mkdir(parents=True)
    script = ("import torch, json, sys\n"
              "g = torch.Generator().manual_seed(4)\n"
              "d = sys.argv[1]\n"
              "torch.save({'a.weight': torch.randn(8, 4, generator=g)}, d + '/pytorch_model-00001-of-00002.bin')\n"
              "torch.save({'b.weight': torch.randn(3, generator=g).half()}, d + '/pytorch_model-00002-of-00002.bin')\n"
              "json.dump({'metadata': {'total_size': 134}, 'weight_map': {'a.weight': 'pytorch_model-00001-of-00002.bin',"
              " 'b.weight': 'pytorch_model-00002-of-00002.bin'}}, open(d + '/pytorch_model.bin.index.json', 'w'))\n")
    subprocess.run([torch_py, "-c", script, str(folder)], check=True)
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "tokenizer.json").write_text('{"version": "1.0"}')
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("folders")
    return {"llama": make_llama_folder(base / LLAMA), "bin": make_bin_folder(base / "bin model")}


def upload_folder(s3, folder: Path, prefix: str) -> str:
    for f in sorted(folder.iterdir()):
        s3.upload(f, prefix + f.name)
    return f"s3://{BUCKET}/{prefix}"


def converted(tmp_path, source, name, env=None, *extra):
    out = tmp_path / name
    run_cli("convert", source, str(out), *extra, env=env)
    return out


def failure(args, env, code=1):
    """The stderr of a command that fails with exit status `code` (1: the input; 3: the environment)."""
    proc = run_cli(*args, env=env, check=False)
    assert proc.returncode == code, proc.stderr
    return proc.stderr.decode()


# ---- S3 ---------------------------------------------------------------------------------------------


def test_s3_prefix_converts_as_the_local_folder(s3, folders, tmp_path):
    url = upload_folder(s3, folders["llama"], f"team a/{LLAMA}/")
    local = converted(tmp_path, str(folders["llama"]), "local.gguf")
    remote = converted(tmp_path, url, "remote.gguf", s3.env())
    assert remote.read_bytes() == local.read_bytes()
    # The folder without its trailing '/' names an object, which is not there.
    assert "NoSuchKey" in failure(["convert", url.rstrip("/"), str(tmp_path / "x.gguf")], s3.env())
    # diff reads a folder's weights as one file.
    assert run_cli("diff", url, str(folders["llama"]), env=s3.env()).returncode == 0


def test_s3_folder_of_bin_shards_converts_to_a_local_folder(s3, folders, tmp_path):
    if folders["bin"] is None:
        pytest.skip("no Python with torch to write .bin shards")
    url = upload_folder(s3, folders["bin"], "bin model/")
    local = converted(tmp_path, str(folders["bin"]), "local-out")
    remote = converted(tmp_path, url, "remote-out", s3.env())
    names = sorted(p.name for p in local.iterdir())
    assert names == sorted(p.name for p in remote.iterdir())
    assert "config.json" in names and "model.safetensors.index.json" in names
    for n in names:
        assert (remote / n).read_bytes() == (local / n).read_bytes(), n


def test_s3_folder_refusals(s3, folders, tmp_path):
    message = failure(["convert", f"s3://{BUCKET}/no such folder/", str(tmp_path / "x.gguf")], s3.env())
    assert "FileNotFound" in message and f"s3://{BUCKET}/no such folder/" in message
    message = failure(["convert", f"s3://{BUCKET}/team a/{LLAMA}/", str(tmp_path / "x.gguf")], s3.env(AWS_SECRET_ACCESS_KEY="wrong"), 3)
    assert "SignatureDoesNotMatch" in message and "wrong" not in message
    message = failure(["convert", "s3://no-such-bucket/llama/", str(tmp_path / "x.gguf")], s3.env())
    assert "NoSuchBucket" in message


def test_s3_folder_without_config_json_is_refused_naming_its_index(s3, folders, tmp_path):
    """As a local folder (docs/CLI.md, "Model folders"): no plain dump; the index converts as plain tensors."""
    for f in sorted(folders["llama"].iterdir()):
        if f.name != "config.json":
            s3.upload(f, "no config/" + f.name)
    url = f"s3://{BUCKET}/no config/"
    for out in ("x.gguf", "x.safetensors"):
        assert failure(["convert", url, str(tmp_path / out)], s3.env()) == (
            f"safeweights: s3://{BUCKET}/no config: InvalidModelFolder: has weights but no config.json: give the index file itself "
            f"(s3://{BUCKET}/no config/model.safetensors.index.json) to convert its tensors as plain tensors\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert converted(tmp_path, url + "model.safetensors.index.json", "plain.safetensors", s3.env()).stat().st_size > 0


# ---- the Hub ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hub(tmp_path_factory, folders):
    h = Hub(tmp_path_factory.mktemp("hub"))
    files = {f.name: f.read_bytes() for f in folders["llama"].iterdir()}
    h.add("org/tiny-llama", files)
    h.add("org/pipelines", {f"text model/{LLAMA}/{n}": b for n, b in files.items()} | {"model_index.json": b"{}"}, repo_type="dataset")
    h.add("org/gated-llama", files)
    # Mistral's native layout with the Hugging Face shards beside it, and no config.json.
    native = {n: b for n, b in files.items() if n != "config.json"} | {"params.json": b"{}", "consolidated.safetensors": b"not read"}
    h.add("org/mistral-native", native)
    h.gated[("model", "org/gated-llama")] = TOKEN
    h.page_size = 2  # every listing takes several pages
    yield h
    h.stop()


def hub_env(hub, **extra):
    return hub_server.hub_env(hub, TOKEN, **extra)


def test_hub_repository_converts_as_the_local_folder(hub, folders, tmp_path):
    local_folder = tmp_path / "tiny-llama"
    local_folder.symlink_to(folders["llama"], target_is_directory=True)
    local = converted(tmp_path, str(local_folder), "local.gguf")
    before = len(hub.auth_seen["storage"])
    remote = converted(tmp_path, "hf://org/tiny-llama", "remote.gguf", hub_env(hub))
    assert remote.read_bytes() == local.read_bytes()
    assert f"Bearer {TOKEN}" in hub.auth_seen["hub"]
    assert hub.auth_seen["storage"][before:] and not any(hub.auth_seen["storage"][before:])
    # A folder inside a dataset repository, its name with spaces and non-ASCII letters.
    inner = converted(tmp_path, f"hf://datasets/org/pipelines/text model/{LLAMA}/", "inner.gguf", hub_env(hub))
    assert inner.read_bytes() == converted(tmp_path, str(folders["llama"]), "local2.gguf").read_bytes()


def test_hub_folder_refusals(hub, tmp_path):
    out = str(tmp_path / "x.gguf")
    assert "RepoNotFound" in failure(["convert", "hf://org/nothing", out], hub_env(hub))
    assert "RevisionNotFound" in failure(["convert", "hf://org/gated-llama@v9", out], hub_env(hub))
    # Mistral's native layout is recognised over hf:// by its files and planned from its params.json,
    # read from the Hub before any weight: this stand-in's is empty, refused naming the file and the key.
    assert failure(["convert", "hf://org/mistral-native", out], hub_env(hub)) == (
        "safeweights: hf://org/mistral-native/params.json: InvalidModelFolder: key `dim` is missing\n")
    assert "GatedRepo" in failure(["convert", "hf://org/gated-llama", out], hub_env(hub, HF_TOKEN="hf_other"), 3)
    assert converted(tmp_path, "hf://org/gated-llama", "gated.gguf", hub_env(hub)).stat().st_size > 0
    # A next page on another host is not followed: the token would go there.
    hub.next_page_origin = hub.storage_origin
    try:
        message = failure(["convert", "hf://org/tiny-llama", out], hub_env(hub), 3)
    finally:
        hub.next_page_origin = None
    assert "another host" in message
