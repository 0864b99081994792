"""safeweights.convert() with llama-quantize's file types (docs/GGUF.md, "Quantization mixes"): the
keywords reach the same pipeline as the CLI's options (same bytes), names spelled like a tensor type
stay tensor types unless a knob is given, and misuse raises before a file is written. The types
themselves are judged against llama-quantize in tests/clients/test_quantize_mixes.py."""
import os
import struct
import subprocess
from pathlib import Path

import pytest

import safeweights

REPO = Path(__file__).resolve().parents[2]
CLI = os.path.abspath(os.environ.get("SAFEWEIGHTS_CLI") or str(REPO / "build" / "safeweights"))


def gguf_string(text):
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def tiny_llama(path, layers=2):
    """A GGUF v3 of F32 tensors: llama metadata, per layer attn_v [256, 256] and a norm [256]."""
    kv = [(b"general.architecture", 8, gguf_string("llama")), (b"llama.block_count", 4, struct.pack("<I", layers)),
          (b"general.file_type", 4, struct.pack("<I", 0))]
    tensors = []
    for i in range(layers):
        tensors.append((f"blk.{i}.attn_v.weight", (256, 256)))
        tensors.append((f"blk.{i}.attn_norm.weight", (256,)))
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for key, kind, value in kv:
        head += struct.pack("<Q", len(key)) + key + struct.pack("<I", kind) + value
    data, offset = b"", 0
    for n, (name, shape) in enumerate(tensors):
        head += gguf_string(name) + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *reversed(shape))
        head += struct.pack("<IQ", 0, offset)
        count = 1
        for d in shape:
            count *= d
        values = struct.pack(f"<{count}f", *[((k * 7 + n) % 23) / 5.0 - 2.0 for k in range(count)])
        data += values
        offset += len(values)
    head += b"\0" * (-len(head) % 32)
    path.write_bytes(head + data)
    return path


def test_file_type_report_and_bytes_match_the_cli(tmp_path):
    src = tiny_llama(tmp_path / "m.gguf")
    report = safeweights.convert(src, tmp_path / "a.gguf", type="q4_k_s", threads=2)
    by_name = {t["name"]: t for t in report["tensors"]}
    # Q4_K_S: the first four attn_v tensors Q5_K; the norms keep their type.
    assert [by_name[f"blk.{i}.attn_v.weight"]["to"] for i in range(2)] == ["Q5_K", "Q5_K"]
    assert "Q4_K_S" in by_name["blk.0.attn_v.weight"]["note"]
    assert (by_name["blk.0.attn_norm.weight"]["to"], by_name["blk.0.attn_norm.weight"]["note"]) == ("F32", "")
    kv = {e["key"]: e["value"] for e in safeweights.inspect(tmp_path / "a.gguf")["kv"]}
    assert kv["general.file_type"] == 14 and kv["general.quantization_version"] == 2
    if not Path(CLI).exists():
        pytest.skip("the CLI is not built")
    r = subprocess.run([CLI, "convert", src, tmp_path / "b.gguf", "--type", "Q4_K_S"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "blk.0.attn_v.weight: F32 -> Q5_K (Q4_K_S's rule for this tensor)" in r.stdout
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "b.gguf").read_bytes()


def test_a_knob_makes_a_tensor_type_name_the_file_type(tmp_path):
    src = tiny_llama(tmp_path / "m.gguf")
    plain = safeweights.convert(src, tmp_path / "plain.gguf", type="q4_k")
    assert {t["to"] for t in plain["tensors"] if "attn_v" in t["name"]} == {"Q4_K"}
    # Q4_K_M raises the last of two layers' attn_v to Q6_K; a pattern takes a tensor out of the rules,
    # and out of their count too (as in llama.cpp): blk.1's attn_v is then the first of two, Q4_K.
    mixed = safeweights.convert(src, tmp_path / "mixed.gguf", type="q4_k", tensor_types={"blk\\.0\\.": "q8_0"})
    assert {t["name"]: t["to"] for t in mixed["tensors"] if "attn_v" in t["name"]} == {"blk.0.attn_v.weight": "Q8_0", "blk.1.attn_v.weight": "Q4_K"}
    rules = safeweights.convert(src, tmp_path / "rules.gguf", type="q4_k", output_tensor_type="q8_0")
    assert {t["name"]: t["to"] for t in rules["tensors"] if "attn_v" in t["name"]} == {"blk.0.attn_v.weight": "Q4_K", "blk.1.attn_v.weight": "Q6_K"}
    kv = {e["key"]: e["value"] for e in safeweights.inspect(tmp_path / "mixed.gguf")["kv"]}
    assert kv["general.file_type"] == 15  # Q4_K is llama-quantize's alias of Q4_K_M
    pure = safeweights.convert(src, tmp_path / "pure.gguf", type="15", pure=True)
    assert {t["to"] for t in pure["tensors"] if "attn_v" in t["name"]} == {"Q4_K"}


def test_misuse_raises_and_writes_nothing(tmp_path):
    src = tiny_llama(tmp_path / "m.gguf")
    out = tmp_path / "out.gguf"
    with pytest.raises(ValueError, match="unknown tensor type .q4_k_x., and not a llama-quantize file type"):
        safeweights.convert(src, out, type="q4_k_x")
    with pytest.raises(ValueError, match="need a file type"):
        safeweights.convert(src, out, pure=True)
    with pytest.raises(safeweights.SafetensorError, match="importance matrix"):
        safeweights.convert(src, out, type="Q4_K_M", tensor_types=[("attn_v", "iq2_xxs")])
    with pytest.raises(safeweights.SafetensorError, match="InvalidArgument|importance matrix"):
        (tmp_path / "bad.dat").write_bytes(struct.pack("<i", -1))
        safeweights.convert(src, out, type="Q4_K_M", imatrix=tmp_path / "bad.dat")
    with pytest.raises(safeweights.SafetensorError, match="no quantization mixes"):
        safeweights.convert(src, tmp_path / "out.safetensors", type="Q4_K_M")
    assert not out.exists() and not (tmp_path / "out.safetensors").exists()


@pytest.mark.parametrize("args, message", [
    (["--pure"], "llama-quantize's options need --type with one of its file types"),
    (["--type", "q4_k_x"], "or a llama-quantize file type"),
    (["--type", "Q4_K_M", "--tensor-type", "attn_q"], "--tensor-type attn_q: expected PATTERN=TYPE"),
    (["--type", "Q4_K_M", "--output-tensor-type", "q9"], "--output-tensor-type q9: not a ggml type name"),
    (["--type", "Q4_K_M", "--imatrix", "missing.dat"], "missing.dat"),
])
def test_cli_usage_errors(tmp_path, args, message):
    if not Path(CLI).exists():
        pytest.skip("the CLI is not built")
    src = tiny_llama(tmp_path / "m.gguf")
    r = subprocess.run([CLI, "convert", src, tmp_path / "out.gguf", *args], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode != 0 and message in r.stderr, r.stderr
    assert not (tmp_path / "out.gguf").exists()
