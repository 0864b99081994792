"""hf:// names against a local stand-in of the Hub (hub_server.py: resolve endpoints, the 302 to a storage
host, error codes, gated repositories), over HTTPS: the same answers as the local files, the token sent to
the Hub and never to the storage host, and each refusal named by the Hub's own error code."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_cli
import hub_server
from hub_server import Hub

TOKEN = "hf_localtesttoken"


def big_sharded(folder):
    """A sharded index of 4 MiB in two shards: reading headers only must be a small part of it."""
    from safeweights.numpy import save_file

    save_file({f"layer.{i}.weight": np.full((512, 512), i, np.float32) for i in range(4)}, str(folder / "whole.safetensors"))
    (folder / "sharded").mkdir()
    run_cli("convert", str(folder / "whole.safetensors"), str(folder / "sharded" / "model.safetensors.index.json"), "--split-max-tensors", "2")
    return folder / "sharded"


@pytest.fixture(scope="module")
def hub(tmp_path_factory, local_files):
    h = Hub(tmp_path_factory.mktemp("hub"))
    files = {"model.safetensors": local_files["safetensors"].read_bytes(), "config.json": b'{"model_type": "llama"}'}
    for f in big_sharded(tmp_path_factory.mktemp("big")).iterdir():
        files["sharded/" + f.name] = f.read_bytes()
    h.add("org/tiny", files)
    h.add("org/tiny", {"model.safetensors": local_files["dduf"].read_bytes()}, revision="refs/pr/1")
    h.add("org/data", {"sub dir/model.safetensors": files["model.safetensors"]}, repo_type="dataset")
    h.add("org/gated", {"model.safetensors": files["model.safetensors"]})
    h.gated[("model", "org/gated")] = TOKEN
    yield h
    h.stop()


def hub_env(hub, **extra):
    return hub_server.hub_env(hub, TOKEN, **extra)


def test_files_read_as_the_local_ones_and_the_token_stays_with_the_hub(hub, local_files):
    before = len(hub.auth_seen["storage"])
    url = "hf://org/tiny/model.safetensors"
    local = str(local_files["safetensors"])
    remote_info = json.loads(run_cli("inspect", "--json", url, env=hub_env(hub)).stdout)
    assert remote_info == json.loads(run_cli("inspect", "--json", local).stdout)
    for t in remote_info["tensors"]:
        assert run_cli("cat", url, t["name"], env=hub_env(hub)).stdout == run_cli("cat", local, t["name"]).stdout
    assert f"Bearer {TOKEN}" in hub.auth_seen["hub"]
    storage = hub.auth_seen["storage"][before:]
    assert storage and all(a is None for a in storage), storage


def test_sharded_index_reads_headers_only(hub, tmp_path):
    url = "hf://org/tiny/sharded/model.safetensors.index.json"
    proc = run_cli("inspect", "--json", "--stats", url, env=hub_env(hub))
    local = big_sharded(tmp_path) / "model.safetensors.index.json"
    expected = json.loads(run_cli("inspect", "--json", str(local)).stdout)
    text = json.dumps(json.loads(proc.stdout)).replace("hf://org/tiny/sharded/", "")
    assert text == json.dumps(expected).replace(str(local.parent) + "/", "")
    stats = proc.stderr.decode()
    requests = int(stats.split("stats: ")[1].split(" requests")[0])
    transferred = int(stats.split(" requests, ")[1].split(" bytes")[0])
    shards = sum(f.stat().st_size for f in local.parent.glob("*.safetensors"))
    # The index and each shard's header block (64 KiB read-ahead): a few percent of the 4 MiB.
    assert transferred <= 4 * 65536 < shards / 10, stats
    assert requests <= 2 * 3, stats  # the index, then per shard the Hub's 302 and the storage's 206


def test_revisions_datasets_and_python(hub, local_files, monkeypatch):
    # refs/pr/1 holds another file under the same name.
    info = json.loads(run_cli("inspect", "--json", "hf://org/tiny@refs%2Fpr%2F1/model.safetensors", env=hub_env(hub)).stdout)
    assert info["format"] == "dduf"
    proc = run_cli("validate", "hf://datasets/org/data/sub dir/model.safetensors", env=hub_env(hub))
    assert proc.returncode == 0
    from safeweights import safe_open

    for k, v in hub_env(hub).items():
        monkeypatch.setenv(k, v)
    with safe_open("hf://org/tiny/model.safetensors", "np") as r, safe_open(str(local_files["safetensors"]), "np") as l:
        for name in l.keys():
            np.testing.assert_array_equal(r.get_tensor(name), l.get_tensor(name))


@pytest.mark.parametrize("url, code, kind", [
    ("hf://org/missing/model.safetensors", "RepoNotFound", "FileNotFound"),
    ("hf://org/tiny/missing.safetensors", "EntryNotFound", "FileNotFound"),
    ("hf://org/tiny@v9/model.safetensors", "RevisionNotFound", "FileNotFound"),
])
def test_refusals_carry_the_hub_error_code(hub, url, code, kind):
    proc = run_cli("inspect", url, env=hub_env(hub), check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 1
    assert f"{url}: {kind}" in err and code in err, err


def test_gated_repositories_open_with_the_token_from_env_or_file(hub, tmp_path):
    url = "hf://org/gated/model.safetensors"
    proc = run_cli("validate", url, env=hub_env(hub, HF_TOKEN=None), check=False)
    assert proc.returncode == 3 and "HTTP 401" in proc.stderr.decode() and "GatedRepo" in proc.stderr.decode(), proc.stderr
    assert TOKEN not in proc.stderr.decode()
    run_cli("validate", url, env=hub_env(hub))
    (tmp_path / "token").write_text(TOKEN + "\n")
    run_cli("validate", url, env=hub_env(hub, HF_TOKEN=None, HF_TOKEN_PATH=str(tmp_path / "token")))
    (tmp_path / "home" / "token").parent.mkdir()
    (tmp_path / "home" / "token").write_text(TOKEN)
    run_cli("validate", url, env=hub_env(hub, HF_TOKEN=None, HF_HOME=str(tmp_path / "home")))


def test_malformed_hf_names_are_usage_errors(hub):
    for url in ("hf://org", "hf://org/tiny/../other/x", "hf://org/tiny@/x", "hf://org/tiny"):
        proc = run_cli("inspect", url, env=hub_env(hub), check=False)
        assert proc.returncode == 2 and "InvalidArgument" in proc.stderr.decode(), (url, proc.stderr)
