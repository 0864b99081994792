"""A transformers folder of PyTorch weights (`pytorch_model*.bin`) through `safeweights convert`, checked by
the real clients (issue 24, item 3):

- `convert BIN_FOLDER OUTFOLDER` writes a folder transformers 5 loads as it is: same logits, same tokenizer,
  the index's metadata with its JSON types (total_parameters stays an integer);
- `convert BIN_FOLDER OUT.gguf` writes a GGUF file (never a folder of that name) that gguf-py reads, and
  that llama.cpp (llama-cpp-python, when installed) runs with transformers' logits;
- `convert BIN_FOLDER OUT.safetensors.index.json` writes transformers' shards that the reference reads;
- the routing refusals (a name that is neither a format nor a folder, a folder named like a file, a
  non-empty output, a symlink beside the weights) leave nothing behind;
- `validate` fails a file whose name claims another format than its content (a safetensors file named
  .dduf, which huggingface_hub's DDUF reader refuses), and `--detect` validates it by content.

transformers 5 no longer writes .bin weights (`save_pretrained(safe_serialization=False)` writes safetensors),
so the .bin folders are written as transformers 4 wrote them: torch.save of each shard's state dict, named
pytorch_model-0000K-of-0000N.bin, and pytorch_model.bin.index.json with the metadata transformers 5 gives
its own index (total_size and total_parameters, integers). Tiny random models, made at test time, offline.

Run with the clients' python: PYTHONPATH=$W/build/python SAFEWEIGHTS_CLI=$W/build/safeweights
    "$(bash scripts/python-env.sh --cached venv-clients tests/clients/requirements.txt)" -m pytest -q -p no:cacheprovider tests/clients/test_bin_folder_clients.py
"""
import json
import os
import shutil
import subprocess

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

CLI = os.environ.get("SAFEWEIGHTS_CLI")
if not CLI or not os.path.exists(CLI):
    pytest.skip("SAFEWEIGHTS_CLI is not set to the built safeweights binary", allow_module_level=True)


def run(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)


def tiny_tokenizer(folder):
    """A byte-level BPE tokenizer built with `tokenizers` and saved by transformers: tokenizer.json,
    tokenizer_config.json (and whatever else transformers 5 writes)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["hello world, the quick brown fox jumps over the lazy dog 0123456789"] * 20, trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(folder)
    return fast


def convert_to_gguf(src, out):
    conv = run("convert", src, out)
    assert conv.returncode == 0, conv.stderr


def llama(vocab):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64, bos_token_id=0, eos_token_id=1)
    return transformers.LlamaForCausalLM(cfg).eval()


def bin_folder(tmp_path, name, shard_size):
    """A Llama folder with .bin weights as transformers 4 saved them (see the module's docstring)."""
    folder = tmp_path / name
    tok = tiny_tokenizer(folder)
    model = llama(len(tok))
    model.save_pretrained(folder, max_shard_size=shard_size or "5GB")
    model.generation_config.save_pretrained(folder)
    index_path = folder / "model.safetensors.index.json"
    if index_path.exists():
        index = json.loads(index_path.read_text())
        renamed = {}
        for shard in sorted(set(index["weight_map"].values())):
            binary = shard.replace("model", "pytorch_model", 1).replace(".safetensors", ".bin")
            torch.save(safetensors_torch.load_file(folder / shard), folder / binary)
            (folder / shard).unlink()
            renamed[shard] = binary
        index["weight_map"] = {k: renamed[v] for k, v in index["weight_map"].items()}
        (folder / "pytorch_model.bin.index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
        index_path.unlink()
    else:
        torch.save(safetensors_torch.load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
    assert not [f for f in os.listdir(folder) if f.endswith(".safetensors")]
    return folder


def logits(folder):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = torch.tensor([[0, 5, 17, 42, 99, 3, 1]])
    with torch.no_grad():
        return model(ids).logits


@pytest.mark.parametrize("shard_size", [None, "20KB"], ids=["single", "sharded"])
def test_bin_folder_to_folder_loads_in_transformers(tmp_path, shard_size):
    src = bin_folder(tmp_path, "src", shard_size)
    out = tmp_path / "out"
    conv = run("convert", src, out)
    assert conv.returncode == 0, conv.stderr
    listed = sorted(os.listdir(out))
    assert not [f for f in listed if f.endswith(".bin") or f.startswith(".")], listed
    for kept in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        assert kept in listed and (out / kept).read_bytes() == (src / kept).read_bytes(), kept
    # Nothing is left beside the output (the staging folder was renamed into place).
    assert sorted(os.listdir(tmp_path)) == ["out", "src"]

    assert torch.equal(logits(out), logits(src))
    text = "hello world 42, the lazy fox"
    assert transformers.AutoTokenizer.from_pretrained(out)(text)["input_ids"] == transformers.AutoTokenizer.from_pretrained(src)(text)["input_ids"]

    if shard_size:
        assert "model.safetensors.index.json" in listed and "model.safetensors" not in listed
        before = json.loads((src / "pytorch_model.bin.index.json").read_text())
        after = json.loads((out / "model.safetensors.index.json").read_text())
        # Same metadata, same JSON types: transformers 5 writes total_parameters as an integer.
        assert after["metadata"] == before["metadata"]
        assert isinstance(after["metadata"]["total_parameters"], int) and isinstance(after["metadata"]["total_size"], int)
        assert set(after["weight_map"]) == set(before["weight_map"])
    else:
        assert "model.safetensors" in listed


def test_bin_folder_to_gguf_is_a_file(tmp_path):
    gguf = pytest.importorskip("gguf")
    src = bin_folder(tmp_path, "src", "20KB")
    out = tmp_path / "out.gguf"
    convert_to_gguf(src, out)
    assert out.is_file(), "convert made something other than a file named .gguf"
    reader = gguf.GGUFReader(str(out))
    arch = reader.fields["general.architecture"]
    assert bytes(arch.parts[arch.data[0]]).decode() == "llama"
    names = {t.name for t in reader.tensors}
    assert "token_embd.weight" in names and "blk.0.attn_q.weight" in names, sorted(names)


def test_bin_folder_gguf_in_llama_cpp(tmp_path):
    """llama.cpp runs the GGUF made from a .bin folder: its f32 logits are transformers' (float32 sums in
    another order: within 1e-3 of the largest logit)."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed in this python")
    np = pytest.importorskip("numpy")
    src = bin_folder(tmp_path, "src", "20KB")
    out = tmp_path / "out.gguf"
    convert_to_gguf(src, out)
    model = llama_cpp.Llama(model_path=str(out), logits_all=True, n_ctx=64, verbose=False)
    ids = [0, 5, 17, 42, 99, 3, 1]
    model.eval(ids)
    got = np.array(model.scores[: len(ids)])
    want = logits(src)[0].numpy()
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-3 * np.abs(want).max()


def test_bin_folder_to_safetensors_shards(tmp_path):
    src = bin_folder(tmp_path, "src", "20KB")
    target = tmp_path / "shards" / "model.safetensors.index.json"
    target.parent.mkdir()
    conv = run("convert", "--split-max-size", "30K", src, target)
    assert conv.returncode == 0, conv.stderr
    index = json.loads(target.read_text())
    files = sorted(set(index["weight_map"].values()))
    assert len(files) > 1 and sorted(os.listdir(target.parent)) == sorted(files + ["model.safetensors.index.json"])
    state = {}
    for f in files:
        state.update(safetensors_torch.load_file(target.parent / f))
    expected = transformers.AutoModelForCausalLM.from_pretrained(src).state_dict()
    assert set(state) == set(index["weight_map"])
    for name, tensor in state.items():
        assert torch.equal(tensor, expected[name]), name
    # With the config beside them, transformers loads the shards as the model.
    shutil.copy(src / "config.json", target.parent / "config.json")
    assert torch.equal(logits(target.parent), logits(src))


def test_what_is_copied_beside_the_weights(tmp_path):
    """Every top-level file but weights and pickles; not hidden files, not folders. The Python API's convert
    routes the same way (one convert_path)."""
    safeweights = pytest.importorskip("safeweights")
    src = bin_folder(tmp_path, "src", None)
    (src / "README.md").write_text("# tiny\n")
    (src / "merges.txt").write_text("#version: 0.2\n")
    (src / ".gitattributes").write_text("*.bin filter=lfs\n")
    torch.save({"lr": 1}, src / "training_args.bin")
    torch.save({"w": torch.ones(1)}, src / "optimizer.pt")
    (src / "sub").mkdir()
    (src / "sub" / "config.json").write_text("{}")
    out = tmp_path / "out"
    report = safeweights.convert(str(src), str(out))
    expected = sorted(f for f in os.listdir(src) if f not in (".gitattributes", "training_args.bin", "optimizer.pt", "sub", "pytorch_model.bin"))
    assert sorted(os.listdir(out)) == sorted(expected + ["model.safetensors"])
    assert sorted(os.path.basename(f) for f in report["files"]) == sorted(os.listdir(out)), report["files"]
    for f in expected:
        assert (out / f).read_bytes() == (src / f).read_bytes(), f
    # A file no config or tokenizer is as large as (sparse here) is refused by name, and no output appears.
    with open(src / "huge.txt", "wb") as f:
        f.truncate(300 << 20)
    conv = run("convert", src, tmp_path / "out2")
    assert conv.returncode == 1 and "ResourceLimit" in conv.stderr and "huge.txt" in conv.stderr, conv.stderr
    assert sorted(os.listdir(tmp_path)) == ["out", "src"]


def test_routing_refusals_leave_nothing(tmp_path):
    src = bin_folder(tmp_path, "src", None)
    before = sorted(os.listdir(tmp_path))
    for name, says in (("out.bin", "name a new folder"), ("model-v1.5", "name a new folder")):
        conv = run("convert", src, tmp_path / name)
        assert conv.returncode == 2 and "InvalidArgument" in conv.stderr and says in conv.stderr, conv.stderr
        assert sorted(os.listdir(tmp_path)) == before
    # An existing folder named like a file (what the old convert made of OUT.gguf) is not written into.
    (tmp_path / "old.gguf").mkdir()
    conv = run("convert", src, tmp_path / "old.gguf")
    assert conv.returncode == 2 and "named like a gguf file" in conv.stderr, conv.stderr
    assert os.listdir(tmp_path / "old.gguf") == []
    # A non-empty output folder is not merged into.
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep").write_text("x")
    conv = run("convert", src, tmp_path / "full")
    assert conv.returncode == 2 and "not empty" in conv.stderr and os.listdir(tmp_path / "full") == ["keep"], conv.stderr
    # A name with a dot becomes a folder when it ends with / or exists (empty).
    conv = run("convert", src, str(tmp_path / "model-v1.5") + "/")
    assert conv.returncode == 0, conv.stderr
    assert "model.safetensors" in os.listdir(tmp_path / "model-v1.5")
    (tmp_path / "empty.d").mkdir()
    assert run("convert", src, tmp_path / "empty.d").returncode == 0 and "config.json" in os.listdir(tmp_path / "empty.d")
    # Shards cut anew are an index output, not a folder conversion: the refusal says what to write.
    conv = run("convert", "--split-max-size", "10K", src, tmp_path / "resharded")
    assert conv.returncode == 2 and "model.safetensors.index.json" in conv.stderr and not (tmp_path / "resharded").exists(), conv.stderr
    # A symbolic link beside the weights is refused by name, and no output appears.
    os.symlink(src / "config.json", src / "linked.json")
    conv = run("convert", src, tmp_path / "linked_out")
    assert conv.returncode == 1 and "UnsafePath" in conv.stderr and "linked.json" in conv.stderr, conv.stderr
    assert not (tmp_path / "linked_out").exists()
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".")]


def test_unsafe_pickle_says_when_allow_unknown_helps(tmp_path):
    """A training checkpoint that pickles a class: the refusal offers --allow-unknown, which then reads it.
    A hostile global is refused with no such offer, with the flag too."""
    import argparse

    path = tmp_path / "train.pt"
    torch.save({"state_dict": {"w": torch.ones(2)}, "args": argparse.Namespace(lr=1)}, path)
    out = run("validate", path)
    assert out.returncode == 1 and "UnsafePickle" in out.stderr and "--allow-unknown" in out.stderr, out.stderr
    assert run("validate", "--allow-unknown", path).returncode == 0
    assert run("convert", "--allow-unknown", path, tmp_path / "w.safetensors").returncode == 0

    class Payload:
        def __reduce__(self):
            return (os.system, ("true",))

    hostile = tmp_path / "hostile.pt"
    torch.save({"w": torch.ones(2), "x": Payload()}, hostile)
    for flags in ([], ["--allow-unknown"]):
        out = run("validate", *flags, hostile)
        # The message says the flag would not help; it never offers it ("(--allow-unknown, ... reads it").
        assert out.returncode == 1 and "UnsafePickle" in out.stderr and "never read, even with --allow-unknown" in out.stderr, out.stderr
        assert "(--allow-unknown" not in out.stderr, out.stderr


def test_validate_name_and_content_must_agree(tmp_path):
    """A safetensors file named .dduf: huggingface_hub's DDUF reader refuses it, so validate must not pass it."""
    hub = pytest.importorskip("huggingface_hub")
    path = tmp_path / "x.dduf"
    safetensors_torch.save_file({"w": torch.ones(2)}, path)
    with pytest.raises(Exception):
        hub.read_dduf_file(path)
    out = run("validate", path)
    assert out.returncode == 1 and "UnknownFormat" in out.stderr and "name says dduf" in out.stderr and "--detect" in out.stderr, out
    line = json.loads(run("validate", "--json", path).stdout)
    assert line["valid"] is False and line["format"] == "safetensors" and line["error"]["kind"] == "UnknownFormat"
    out = run("validate", "--detect", path)
    assert out.returncode == 0 and "OK (safetensors" in out.stdout, out
    assert "--detect" in run("validate", "--help").stdout
    # A GGUF named .safetensors, and a safetensors file named .gguf, the same.
    gguf_path = tmp_path / "y.safetensors"
    src = tmp_path / "w.safetensors"
    safetensors_torch.save_file({"w": torch.ones(2)}, src)
    assert run("convert", src, tmp_path / "w.gguf").returncode == 0
    shutil.copy(tmp_path / "w.gguf", gguf_path)
    assert run("validate", gguf_path).returncode == 1 and run("validate", "--detect", gguf_path).returncode == 0
    assert run("validate", src, tmp_path / "w.gguf").returncode == 0
