"""The format registry from Python: detect_format, validate and inspect on any supported file.

Expected values come from what the test built with json/struct/zipfile (and torch.save), never from
safeweights itself.
"""

import json
import struct
import zipfile

import pytest

import safeweights
from safeweights import DDUFCorruptedFileError, SafetensorError

from conftest import build_file


def _safetensors(tmp_path, name="m.safetensors"):
    blob = build_file([("w", "F32", [2, 2], bytes(16)), ("b", "U8", [3], b"xyz")], metadata={"format": "pt"})
    path = tmp_path / name
    path.write_bytes(blob)
    return path, blob


def test_safetensors_detected_by_content_and_inspected_as_written(tmp_path):
    path, blob = _safetensors(tmp_path, "weights.pt")  # a checkpoint's name does not fool detection
    assert safeweights.detect_format(path) == "safetensors"
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    info = safeweights.inspect(path)
    assert info["format"] == "safetensors"
    assert info["header_size"] == n
    assert info["metadata"] == header["__metadata__"]
    got = {t["name"]: (t["dtype"], t["shape"], t["data_offsets"]) for t in info["tensors"]}
    want = {k: (v["dtype"], v["shape"], v["data_offsets"]) for k, v in header.items() if k != "__metadata__"}
    assert got == want
    # The name claims a PyTorch checkpoint: validating by content alone is asked for.
    assert safeweights.validate(path, detect=True) == "2 tensors, 19 B of data"


def test_validate_refuses_a_name_claiming_another_format_unless_detect(tmp_path):
    """As `safeweights validate` and `validate --detect`: a reader that trusts the name refuses the file."""
    path, _ = _safetensors(tmp_path, "x.dduf")
    with pytest.raises(DDUFCorruptedFileError) as e:
        safeweights.validate(path)
    message = str(e.value)
    assert "the name says dduf but the content is safetensors" in message
    assert "detect=True" in message
    assert e.value.kind == "UnknownFormat"
    assert e.value.file == str(path)
    with pytest.raises(zipfile.BadZipFile):  # a reader that trusts the name (zipfile, as the hub's) refuses it
        zipfile.ZipFile(path)
    assert safeweights.validate(path, detect=True) == "2 tensors, 19 B of data"
    # Names that claim nothing, or the right format, are validated as before.
    plain, _ = _safetensors(tmp_path, "weights.bin")
    assert safeweights.validate(plain) == "2 tensors, 19 B of data"


def test_dduf_detected_and_inspected_like_zipfile_sees_it(tmp_path):
    st_path, st_blob = _safetensors(tmp_path)
    archive = tmp_path / "pipe.dduf"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        z.writestr("model_index.json", json.dumps({"unet": ["diffusers", "U"]}))
        z.writestr("unet/config.json", "{}")
        z.writestr("unet/m.safetensors", st_blob)
    assert safeweights.detect_format(archive) == "dduf"
    info = safeweights.inspect(archive)
    with zipfile.ZipFile(archive) as z:
        assert [(e["name"], e["length"]) for e in info["entries"]] == [(i.filename, i.file_size) for i in z.infolist()]
    assert info["components"] == {"unet": ["diffusers", "U"]}
    member = safeweights.inspect(archive, entry="unet/m.safetensors")
    assert member == safeweights.inspect(st_path)
    assert "CRCs checked" in safeweights.validate(archive)
    assert "CRCs not checked" in safeweights.validate(archive, crc=False)


def test_errors_are_the_formats_own_classes_with_kinds(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x05")
    with pytest.raises(SafetensorError) as e:
        safeweights.validate(bad)
    assert e.value.kind == "HeaderTooSmall"

    archive = tmp_path / "flipped.dduf"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        z.writestr("model_index.json", json.dumps({"unet": ["diffusers", "U"]}))
        z.writestr("unet/config.json", "{}")
        z.writestr("unet/notes.txt", "hello")
    raw = bytearray(archive.read_bytes())
    at = raw.find(b"hello")
    raw[at] = ord("j")
    archive.write_bytes(bytes(raw))
    with pytest.raises(DDUFCorruptedFileError) as e:
        safeweights.validate(archive)
    assert e.value.kind == "CrcMismatch"

    with pytest.raises(FileNotFoundError):
        safeweights.detect_format(tmp_path / "absent")


def test_errors_of_a_kind_with_many_rules_name_the_rule(tmp_path):
    # A GGUF header that declares more tensors than its bytes can hold: InvalidGguf, rule gguf.count.
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1 << 40, 0))
    with pytest.raises(SafetensorError) as e:
        safeweights.validate(bad)
    assert (e.value.kind, e.value.rule) == ("InvalidGguf", "gguf.count"), str(e.value)
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(b"GGUF" + struct.pack("<I", 3))
    with pytest.raises(SafetensorError) as e:
        safeweights.validate(truncated)
    assert (e.value.kind, e.value.rule) == ("InvalidGguf", "gguf.truncated"), str(e.value)
    # ZIP rules too, in a DDUF as in a PyTorch archive: bytes before the first entry.
    archive = tmp_path / "prepended.dduf"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        z.writestr("model_index.json", json.dumps({"unet": ["diffusers", "U"]}))
        z.writestr("unet/config.json", "{}")
    archive.write_bytes(b"#!/bin/sh\n" + archive.read_bytes())
    with pytest.raises(DDUFCorruptedFileError) as e:
        safeweights.validate(archive)
    assert (e.value.kind, e.value.rule) == ("BadZipFile", "zip.layout"), str(e.value)
    # Kinds that are one rule each carry none.
    other = tmp_path / "bad.safetensors"
    other.write_bytes(b"\x05")
    with pytest.raises(SafetensorError) as e:
        safeweights.validate(other)
    assert e.value.rule is None


def test_torch_save_is_recognised_and_read(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "ckpt.bin"
    torch.save({"w": torch.ones(2, 3)}, path)
    assert safeweights.detect_format(path) == "pytorch"
    safeweights.validate(path)
    legacy = tmp_path / "legacy.pt"
    torch.save({"w": torch.ones(2)}, legacy, _use_new_zipfile_serialization=False)
    assert safeweights.detect_format(legacy) == "pytorch"
    safeweights.validate(legacy)
