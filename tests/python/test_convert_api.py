"""safeweights.convert(): the library's pipeline from Python. Its outputs are the bytes the CLI's
`convert` writes for the same arguments (two front ends over one convert_path()), read back here with
json+struct only; its report says what each tensor became; refusals raise and leave no file."""
import json
import math
import os
import struct
import subprocess
from pathlib import Path

import pytest

import safeweights
from conftest import build_file, parse_file

REPO = Path(__file__).resolve().parents[2]
CLI = os.environ.get("SAFEWEIGHTS_CLI") or str(REPO / "build" / "safeweights")


def floats(n, start=0.0):
    return struct.pack(f"<{n}f", *[start + 0.25 * i for i in range(n)])


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "m.safetensors"
    path.write_bytes(build_file([("w", "F32", (2, 64), floats(128)), ("norm", "F32", (64,), floats(64, 1.0))], {"format": "pt"}))
    return path


def cli_convert(*args):
    r = subprocess.run([CLI, "convert", *map(str, args)], capture_output=True)
    assert r.returncode == 0, r.stderr
    return r


def test_report_and_gguf_bytes_match_the_cli(tmp_path, model):
    report = safeweights.convert(model, tmp_path / "a.gguf", type="Q8_0")
    assert report["files"] == [str(tmp_path / "a.gguf")]
    by_name = {t["name"]: t for t in report["tensors"]}
    assert (by_name["w"]["from"], by_name["w"]["to"], by_name["w"]["note"]) == ("F32", "Q8_0", "")
    assert (by_name["norm"]["to"], by_name["norm"]["note"]) == ("F32", "1-D")
    # Q8_0: 34 bytes per 32 elements; the 1-D tensor stays F32.
    assert report["bytes_written"] == 128 // 32 * 34 + 64 * 4
    if not Path(CLI).exists():
        pytest.skip("the CLI is not built")
    cli_convert(model, tmp_path / "b.gguf", "--type", "q8_0")
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "b.gguf").read_bytes()


def test_round_trip_through_gguf_keeps_bytes_and_metadata(tmp_path, model):
    safeweights.convert(model, tmp_path / "m.gguf")
    safeweights.convert(tmp_path / "m.gguf", tmp_path / "back.safetensors")
    header, data = parse_file((tmp_path / "back.safetensors").read_bytes())
    original, original_data = parse_file(model.read_bytes())
    assert header["__metadata__"] == {"format": "pt"}
    for name in ("w", "norm"):
        a, b = header[name]["data_offsets"], original[name]["data_offsets"]
        assert data[a[0] : a[1]] == original_data[b[0] : b[1]]


def test_a_sharded_checkpoint_is_an_output_like_any_other(tmp_path, model):
    # w (512 bytes) fills the first shard, norm (256) the second; the index names both, as transformers writes it.
    out = tmp_path / "out"
    out.mkdir()
    report = safeweights.convert(model, out / "model.safetensors.index.json", split_max_bytes=600)
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert report["files"] == [str(out / f) for f in shards] + [str(out / "model.safetensors.index.json")]
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert index == {"metadata": {"total_size": 768}, "weight_map": {"norm": shards[1], "w": shards[0]}}
    assert (out / "model.safetensors.index.json").read_text() == json.dumps(index, indent=2, sort_keys=True) + "\n"
    original, original_data = parse_file(model.read_bytes())
    for name, shard in index["weight_map"].items():
        header, data = parse_file((out / shard).read_bytes())
        assert header["__metadata__"] == {"format": "pt"}
        assert list(k for k in header if k != "__metadata__") == [name]
        a, b = header[name]["data_offsets"], original[name]["data_offsets"]
        assert data[a[0] : a[1]] == original_data[b[0] : b[1]]
    # Read back as one checkpoint and converted to one file, it is the original again.
    safeweights.convert(out / "model.safetensors.index.json", tmp_path / "back.safetensors", carry_metadata=False)
    header, data = parse_file((tmp_path / "back.safetensors").read_bytes())
    assert sorted(k for k in header if k != "__metadata__") == ["norm", "w"]
    for name in ("w", "norm"):
        a, b = header[name]["data_offsets"], original[name]["data_offsets"]
        assert (header[name]["shape"], data[a[0] : a[1]]) == (original[name]["shape"], original_data[b[0] : b[1]])
    if not Path(CLI).exists():
        pytest.skip("the CLI is not built")
    (tmp_path / "cli").mkdir()
    cli_convert(model, tmp_path / "cli" / "model.safetensors.index.json", "--split-max-size", "600")
    for name in shards + ["model.safetensors.index.json"]:
        assert (tmp_path / "cli" / name).read_bytes() == (out / name).read_bytes()


def test_to_names_the_format_whatever_the_extension(tmp_path, model):
    safeweights.convert(model, tmp_path / "out.bin", to="gguf")
    assert (tmp_path / "out.bin").read_bytes()[:4] == b"GGUF"


def test_split_files_are_listed_in_order(tmp_path, model):
    report = safeweights.convert(model, tmp_path / "s.gguf", split_max_tensors=1)
    assert report["files"] == [str(tmp_path / f"s-0000{k}-of-00002.gguf") for k in (1, 2)]
    assert not (tmp_path / "s.gguf").exists()


def test_refusals_raise_and_leave_nothing(tmp_path, model):
    with pytest.raises(ValueError, match="unknown tensor type"):
        safeweights.convert(model, tmp_path / "x.gguf", type="q9_9")
    with pytest.raises(safeweights.SafetensorError, match="extension"):
        safeweights.convert(model, tmp_path / "x.bin")
    with pytest.raises(safeweights.SafetensorError, match="a .safetensors file is one file"):
        safeweights.convert(model, tmp_path / "x.safetensors", split_max_tensors=1)
    with pytest.raises(safeweights.SafetensorError, match="cannot hold Q8_0"):
        safeweights.convert(model, tmp_path / "x.safetensors", type="q8_0")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]


def folder_of(tmp_path, name, files):
    folder = tmp_path / name
    folder.mkdir()
    for file, data in files.items():
        (folder / file).write_bytes(data)
    return folder


def varint(v):
    out = b""
    while True:
        out += bytes([(v & 0x7F) | (0x80 if v > 0x7F else 0)])
        v >>= 7
        if not v:
            return out


def field(number, body):
    return varint(number << 3 | 2) + varint(len(body)) + body


def sentencepiece(pieces):
    """A SentencePiece ModelProto of (text, type) pieces."""
    return b"".join(field(1, field(1, text.encode()) + varint(3 << 3) + varint(kind)) for text, kind in pieces)


def mistral_native(tmp_path, dim=8, heads=2, kv_heads=1, hidden=16):
    """Mistral's native layout, tiny: consolidated.safetensors under Meta's names, params.json,
    tokenizer.model.v3 (SentencePiece, with the 256 byte pieces llama.cpp needs)."""
    pieces = [("<unk>", 2), ("<s>", 3), ("</s>", 3), ("a", 1), ("b", 1)] + [(f"<0x{b:02X}>", 6) for b in range(256)]
    vocab = len(pieces)
    head_dim = dim // heads
    shapes = {"tok_embeddings.weight": (vocab, dim), "norm.weight": (dim,), "output.weight": (vocab, dim),
              "layers.0.attention.wq.weight": (heads * head_dim, dim), "layers.0.attention.wk.weight": (kv_heads * head_dim, dim),
              "layers.0.attention.wv.weight": (kv_heads * head_dim, dim), "layers.0.attention.wo.weight": (dim, heads * head_dim),
              "layers.0.feed_forward.w1.weight": (hidden, dim), "layers.0.feed_forward.w3.weight": (hidden, dim),
              "layers.0.feed_forward.w2.weight": (dim, hidden), "layers.0.attention_norm.weight": (dim,), "layers.0.ffn_norm.weight": (dim,)}
    tensors = [(name, "F32", shape, floats(math.prod(shape))) for name, shape in shapes.items()]
    params = {"dim": dim, "n_layers": 1, "head_dim": head_dim, "hidden_dim": hidden, "n_heads": heads, "n_kv_heads": kv_heads,
              "norm_eps": 1e-5, "vocab_size": vocab}
    spm = sentencepiece(pieces)
    return folder_of(tmp_path, "mistral", {"consolidated.safetensors": build_file(tensors), "params.json": json.dumps(params).encode(),
                                           "tokenizer.model.v3": spm})


def test_an_original_download_converts_with_the_clis_options(tmp_path):
    """Meta's and Mistral's layouts (issue 34): the CLI's --max-position-embeddings and --llama-version as
    keywords, and what was inferred in the report's notes."""
    src = mistral_native(tmp_path)
    report = safeweights.convert(src, tmp_path / "hf/")
    assert report["notes"] == ["params.json gives no max_seq_len: context 32768 (transformers' converter's default); "
                               "--max-position-embeddings says otherwise"]
    assert sorted(Path(f).name for f in report["files"]) == ["config.json", "generation_config.json", "model.safetensors",
                                                            "special_tokens_map.json", "tokenizer.model", "tokenizer_config.json"]
    report = safeweights.convert(src, tmp_path / "hf2/", max_position_embeddings=1024)
    assert report["notes"] == []
    assert json.loads((tmp_path / "hf2" / "config.json").read_text())["max_position_embeddings"] == 1024
    assert safeweights.convert(src, tmp_path / "m.gguf")["files"] == [str(tmp_path / "m.gguf")]
    with pytest.raises(Exception, match="--llama-version is for Meta's Llama downloads; this folder is Mistral's"):
        safeweights.convert(src, tmp_path / "hf3/", llama_version="2")
    assert not (tmp_path / "hf3").exists()


def test_a_folder_without_config_json_is_refused_naming_the_file_to_give(tmp_path, model):
    """A folder that is no model is never written as a plain dump (issue 34): the file itself converts."""
    weights = model.read_bytes()
    bare = folder_of(tmp_path, "bare", {"model.safetensors": weights})
    native = folder_of(tmp_path, "native", {"params.json": b"{}", "consolidated.safetensors": weights, "model.safetensors": weights})
    for out in ("x.gguf", "x.safetensors", "x.safetensors.index.json"):
        with pytest.raises(safeweights.SafetensorError) as e:
            safeweights.convert(bare, tmp_path / out)
        assert e.value.kind == "InvalidModelFolder"
        assert str(e.value) == (f"{bare}: InvalidModelFolder: has weights but no config.json: give the weights file itself "
                                f"({bare}/model.safetensors) to convert its tensors as plain tensors")
        with pytest.raises(safeweights.SafetensorError) as e:
            safeweights.convert(native, tmp_path / out)
        if out == "x.gguf":  # Mistral's native layout goes to its planner, which reads params.json
            assert str(e.value) == f"{native}/params.json: InvalidModelFolder: key `dim` is missing"
        else:
            assert e.value.kind == "NotSupported"
            assert "an original download converts to a transformers folder (OUT/) or to GGUF (OUT.gguf)" in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bare", "m.safetensors", "native"]
    safeweights.convert(bare / "model.safetensors", tmp_path / "x.gguf")  # the file itself: plain tensors
