"""safeweights.dduf: huggingface_hub's DDUF tests re-expressed, plus zipfile cross-checks and the corpus."""

import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from safeweights.dduf import (
    DDUFCorruptedFileError,
    DDUFEntry,
    DDUFError,
    DDUFExportError,
    DDUFInvalidEntryNameError,
    _validate_dduf_entry_name,
    _validate_dduf_structure,
    export_entries_as_dduf,
    export_folder_as_dduf,
    load_safetensors,
    open_safetensors,
    read_dduf_file,
    verify_dduf_file,
)

from conftest import DDUF_CORPUS, build_file, corpus_files

ST_A = np.arange(6, dtype="<f4").reshape(2, 3)
ST_B = np.array([7, -8, 9], dtype="<i8")
SAFETENSORS = build_file([("weight", "F32", [2, 3], ST_A.tobytes()), ("bias", "I64", [3], ST_B.tobytes())])


def _data_offset(zf, info):
    """Where an entry's data starts, read from its local header (the hub's _get_data_offset)."""
    with open(zf.filename, "rb") as f:
        f.seek(info.header_offset)
        lfh = f.read(30)
    return info.header_offset + 30 + int.from_bytes(lfh[26:28], "little") + int.from_bytes(lfh[28:30], "little")


# ---- TestDDUFEntry ----

@pytest.fixture
def dummy_entry(tmp_path):
    p = tmp_path / "dummy.dduf"
    p.write_bytes(b"somethingCONTENTsomething")
    return DDUFEntry(filename="dummy.json", length=7, offset=9, dduf_path=p)


def test_entry_dataclass(dummy_entry):
    assert dummy_entry.filename == "dummy.json"
    assert dummy_entry.length == 7
    assert dummy_entry.offset == 9
    assert str(dummy_entry.dduf_path).endswith("dummy.dduf")
    assert isinstance(dummy_entry.dduf_path, Path)
    assert "dduf_path" not in repr(dummy_entry)


def test_entry_read_text(dummy_entry):
    assert dummy_entry.read_text() == "CONTENT"


def test_entry_as_mmap(dummy_entry):
    # The hub's as_mmap yields a slice of an mmap.mmap: bytes (what the reference safetensors' load takes).
    with dummy_entry.as_mmap() as m:
        assert type(m) is bytes and m == b"CONTENT"


def test_entry_as_memoryview(dummy_entry):
    with dummy_entry.as_memoryview() as m:
        assert m == b"CONTENT"
        assert isinstance(m, memoryview)
        assert m.readonly
        assert bytes(m) == b"CONTENT"


def test_entry_past_end_of_file(tmp_path):
    p = tmp_path / "short.dduf"
    p.write_bytes(b"abc")
    e = DDUFEntry(filename="x.json", length=10, offset=1, dduf_path=p)
    with pytest.raises(DDUFCorruptedFileError):
        e.read_text()


# ---- TestUtils ----

@pytest.mark.parametrize("name", ["dummy.txt", "dummy.json", "dummy.safetensors", "dummy.model", "vae/config.json"])
def test_entry_name_valid(name):
    assert _validate_dduf_entry_name(name) == name


@pytest.mark.parametrize("name", ["dummy", "dummy.bin", "dummy.dduf", "dummy.gguf", "config.JSON"])
def test_entry_name_invalid_extension(name):
    with pytest.raises(DDUFInvalidEntryNameError, match="File type not allowed"):
        _validate_dduf_entry_name(name)


@pytest.mark.parametrize("name", ["encoder\\dummy.json", "C:\\dummy.json"])
def test_entry_name_no_windows_path(name):
    with pytest.raises(DDUFInvalidEntryNameError, match="UNIX separators"):
        _validate_dduf_entry_name(name)


def test_entry_name_stripped():
    assert _validate_dduf_entry_name("/dummy.json") == "dummy.json"


def test_entry_name_no_nested_directory():
    assert _validate_dduf_entry_name("bar/dummy.json") == "bar/dummy.json"
    with pytest.raises(DDUFInvalidEntryNameError, match="1 level of directory"):
        _validate_dduf_entry_name("foo/bar/dummy.json")


def test_invalid_entry_name_is_export_error():
    assert issubclass(DDUFInvalidEntryNameError, DDUFExportError)
    assert issubclass(DDUFExportError, DDUFError) and issubclass(DDUFCorruptedFileError, DDUFError)


def test_validate_dduf_structure_valid():
    _validate_dduf_structure(
        {"_some_key": "value", "encoder": {"config.json": {}, "model.safetensors": {}}},
        {"model_index.json", "something.txt", "encoder/config.json", "encoder/model.safetensors"},
    )


def test_validate_dduf_structure_not_a_dict():
    with pytest.raises(DDUFCorruptedFileError, match="Must be a dictionary."):
        _validate_dduf_structure(["not a dict"], {})


def test_validate_dduf_structure_missing_folder():
    with pytest.raises(DDUFCorruptedFileError, match="Missing required entry 'encoder' in 'model_index.json'."):
        _validate_dduf_structure({}, {"encoder/config.json", "encoder/model.safetensors"})


def test_validate_dduf_structure_missing_config_file():
    with pytest.raises(DDUFCorruptedFileError, match="Missing required file in folder 'encoder'."):
        _validate_dduf_structure({"encoder": {}}, {"encoder/not_a_config.json", "encoder/model.safetensors"})


# ---- TestExportFolder ----

@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "folder"
    (d / "encoder" / "subdir").mkdir(parents=True)
    (d / "model_index.json").write_text(json.dumps({"encoder": ["x", "y"]}))
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(SAFETENSORS)
    (d / "model.bin").write_bytes(b"bin")
    (d / "encoder" / "config.json").write_text('{"a": 1}')
    (d / "encoder" / "model.safetensors").write_bytes(SAFETENSORS)
    (d / "encoder" / "model.bin").write_bytes(b"bin")
    (d / "encoder" / "subdir" / "config.json").write_text("{}")
    return d


def test_export_folder(tmp_path, folder):
    out = tmp_path / "dummy.dduf"
    export_folder_as_dduf(out, folder_path=folder)
    with zipfile.ZipFile(out) as zf:
        assert zf.testzip() is None
        names = zf.namelist()
        assert sorted(names) == ["config.json", "encoder/config.json", "encoder/model.safetensors",
                                 "model.safetensors", "model_index.json"]
        for name in names:
            assert zf.getinfo(name).compress_type == zipfile.ZIP_STORED
            assert zf.read(name) == (folder / name).read_bytes()
    entries = read_dduf_file(out)
    assert sorted(entries) == sorted(names)
    verify_dduf_file(out)
    export_folder_as_dduf(str(tmp_path / "again.dduf"), str(folder))
    assert (tmp_path / "again.dduf").read_bytes() == out.read_bytes()  # deterministic


# ---- TestExportEntries ----

@pytest.fixture
def export_inputs(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "model_index.json").write_text(json.dumps({"foo": "bar"}))
    (src / "model_on_disk.safetensors").write_bytes(SAFETENSORS)
    return [
        ("model_index.json", str(src / "model_index.json")),
        ("model.safetensors", src / "model_on_disk.safetensors"),
        ("hello.txt", b"hello world"),
    ]


@pytest.mark.parametrize("layout", [{}, {"reference_layout": True}, {"alignment": 64}])
def test_export_entries(tmp_path, export_inputs, layout):
    out = tmp_path / "dummy.dduf"
    export_entries_as_dduf(out, export_inputs, **layout)
    with zipfile.ZipFile(out, "r") as zf:
        assert zf.testzip() is None
        assert zf.namelist() == ["model_index.json", "model.safetensors", "hello.txt"]
        for info in zf.infolist():
            assert info.compress_type == zipfile.ZIP_STORED
        assert zf.read("model_index.json") == b'{"foo": "bar"}'
        assert zf.read("model.safetensors") == SAFETENSORS
        assert zf.read("hello.txt") == b"hello world"
        st = zf.getinfo("model.safetensors")
        if "alignment" in layout or not layout:
            assert _data_offset(zf, st) % layout.get("alignment", 4096) == 0
    entries = read_dduf_file(out)
    assert list(entries) == ["model_index.json", "model.safetensors", "hello.txt"]
    with zipfile.ZipFile(out) as zf:
        for name, entry in entries.items():
            info = zf.getinfo(name)
            assert entry.offset == _data_offset(zf, info) and entry.length == info.file_size
    verify_dduf_file(out)


def test_export_entries_invalid_name(tmp_path):
    out = tmp_path / "dummy.dduf"
    with pytest.raises(DDUFExportError, match="Invalid entry name") as e:
        export_entries_as_dduf(out, [("config", "model_index.json")])
    assert isinstance(e.value.__cause__, DDUFInvalidEntryNameError)
    assert not out.exists()


def test_export_entries_no_duplicate(tmp_path):
    out = tmp_path / "dummy.dduf"
    with pytest.raises(DDUFExportError, match="Can't add duplicate entry"):
        export_entries_as_dduf(out, [("model_index.json", b'{"a": 1}'), ("model_index.json", b'{"a": 1}')])
    assert not out.exists()


def test_export_entries_model_index_required(tmp_path):
    out = tmp_path / "dummy.dduf"
    with pytest.raises(DDUFExportError, match="Missing required 'model_index.json' entry"):
        export_entries_as_dduf(out, [("model.safetensors", b"content")])
    assert not out.exists()


@pytest.mark.parametrize(
    "entries",
    [
        [("model_index.json", b'{"a": 1}'), ("x.bin", b"1")],
        [("model_index.json", b"not json")],
        [("model_index.json", b'{"a": 1}'), ("vae/model.safetensors", b"1")],  # vae not in index
        [("model_index.json", b'{"vae": 1}'), ("vae/model.safetensors", b"1")],  # vae has no config
        [("model_index.json", b'{"a": 1}'), ("t.txt", 123)],
        [("model_index.json", b'{"a": 1}'), ("t.txt", "/no/such/file.txt")],
    ],
    ids=["bad-extension", "bad-index-json", "folder-not-in-index", "folder-without-config", "bad-content-type",
         "missing-content-file"],
)
def test_export_error_leaves_no_file_and_keeps_existing_target(tmp_path, entries):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    fresh = out_dir / "fresh.dduf"
    with pytest.raises((DDUFExportError, OSError)):
        export_entries_as_dduf(fresh, entries)
    assert not fresh.exists()
    existing = out_dir / "existing.dduf"
    existing.write_bytes(b"precious")
    with pytest.raises((DDUFExportError, OSError)):
        export_entries_as_dduf(existing, entries)
    assert existing.read_bytes() == b"precious"
    assert sorted(os.listdir(out_dir)) == ["existing.dduf"]  # no temporary files left behind


def test_export_consumes_generator_one_entry_at_a_time(tmp_path, monkeypatch):
    # The output is nameless until committed (O_TMPFILE); the named fallback makes its growth visible.
    monkeypatch.setenv("SAFEWEIGHTS_NAMED_TEMPFILES", "1")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    chunk = 2 * 1024 * 1024
    observed = []

    def dir_bytes():
        return sum(p.stat().st_size for p in out_dir.iterdir())

    def gen():
        yield "model_index.json", b'{"x": 1}'
        for i in range(4):
            observed.append(dir_bytes())
            yield f"part{i}.safetensors", bytes([i]) * chunk
        observed.append(dir_bytes())

    export_entries_as_dduf(out_dir / "gen.dduf", gen())
    # before each entry is requested, the previous one is already on disk
    for before, after in zip(observed, observed[1:]):
        assert after >= before + chunk
    with zipfile.ZipFile(out_dir / "gen.dduf") as zf:
        assert zf.namelist() == ["model_index.json"] + [f"part{i}.safetensors" for i in range(4)]
        assert zf.read("part3.safetensors") == bytes([3]) * chunk


def test_export_exception_inside_generator(tmp_path):
    def gen():
        yield "model_index.json", b"{}"
        raise KeyError("boom")

    out = tmp_path / "g.dduf"
    with pytest.raises(KeyError):
        export_entries_as_dduf(out, gen())
    assert list(tmp_path.iterdir()) == []


# ---- TestReadDDUFFile, with files written by Python's zipfile ----

def _write_with_zipfile(path, force_zip64):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, data in (("model_index.json", b'{"foo": "bar"}'), ("model.safetensors", SAFETENSORS),
                           ("hello.txt", b"hello world")):
            if force_zip64:  # what huggingface_hub's exporter does
                with zf.open(name, "w", force_zip64=True) as f:
                    f.write(data)
            else:
                zf.writestr(name, data)


@pytest.mark.parametrize("force_zip64", [False, True], ids=["writestr", "force_zip64"])
def test_read_dduf_file_written_by_zipfile(tmp_path, force_zip64):
    p = tmp_path / "dummy.dduf"
    _write_with_zipfile(p, force_zip64)
    entries = read_dduf_file(p)
    assert len(entries) == 3
    with zipfile.ZipFile(p) as zf:
        for name in ("model_index.json", "model.safetensors", "hello.txt"):
            e = entries[name]
            assert e.filename == name and e.dduf_path == p
            assert e.length == zf.getinfo(name).file_size
            with open(p, "rb") as f:
                f.seek(e.offset)
                assert f.read(e.length) == zf.read(name)
            with e.as_memoryview() as m:
                assert isinstance(m, memoryview) and m.readonly and bytes(m) == zf.read(name)
            with e.as_mmap() as m:
                assert type(m) is bytes and m == zf.read(name)
    assert entries["model_index.json"].read_text() == '{"foo": "bar"}'
    assert entries["hello.txt"].read_text() == "hello world"
    verify_dduf_file(p)
    for framework in ("np", "pt"):
        if framework == "pt":
            torch = pytest.importorskip("torch")
        tensors = load_safetensors(entries["model.safetensors"], framework)
        assert list(tensors) == ["weight", "bias"]
        w, b = tensors["weight"], tensors["bias"]
        if framework == "pt":
            assert isinstance(w, torch.Tensor)
            w, b = w.numpy(), b.numpy()
        np.testing.assert_array_equal(w, ST_A)
        np.testing.assert_array_equal(b, ST_B)


def test_open_safetensors_entry(tmp_path, export_inputs):
    out = tmp_path / "x.dduf"
    export_entries_as_dduf(out, export_inputs)
    entries = read_dduf_file(out)
    with open_safetensors(entries["model.safetensors"]) as f:
        assert f.keys() == ["bias", "weight"]
        np.testing.assert_array_equal(f.get_slice("weight")[:, 1], ST_A[:, 1])
    # an entry made by hand (not from read_dduf_file) also works
    e = entries["model.safetensors"]
    manual = DDUFEntry(filename=e.filename, length=e.length, offset=e.offset, dduf_path=str(out))
    np.testing.assert_array_equal(load_safetensors(manual)["bias"], ST_B)
    with manual.as_mmap() as m:
        assert bytes(m) == SAFETENSORS


def test_open_safetensors_entry_checks_the_device(tmp_path, export_inputs):
    from safeweights import SafetensorError

    out = tmp_path / "x.dduf"
    export_entries_as_dduf(out, export_inputs)
    entry = read_dduf_file(out)["model.safetensors"]
    with pytest.raises(SafetensorError, match="^Device cuda is not supported for framework numpy$"):
        open_safetensors(entry, "np", device="cuda")
    with pytest.raises(SafetensorError, match="^device foo is invalid$"):
        load_safetensors(entry, "pt", device="foo")


def test_model_index_required(tmp_path):
    p = tmp_path / "x.dduf"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("model.safetensors", SAFETENSORS)
    with pytest.raises(DDUFCorruptedFileError, match="Missing required 'model_index.json' entry"):
        read_dduf_file(p)


def test_compressed_entry_rejected(tmp_path):
    p = tmp_path / "x.dduf"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model_index.json", b'{"foo": "bar"}' * 10)
    with pytest.raises(DDUFCorruptedFileError):
        read_dduf_file(p)


def test_not_a_zip(tmp_path):
    p = tmp_path / "x.dduf"
    p.write_bytes(b"this is not a zip file at all" * 10)
    with pytest.raises(DDUFCorruptedFileError) as e:
        read_dduf_file(p)
    assert isinstance(e.value, zipfile.BadZipFile)
    with pytest.raises(zipfile.BadZipFile):
        read_dduf_file(p)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_dduf_file(tmp_path / "nope.dduf")


def test_verify_catches_flipped_data_byte(tmp_path, export_inputs):
    p = tmp_path / "x.dduf"
    export_entries_as_dduf(p, export_inputs)
    with zipfile.ZipFile(p) as zf:
        pos = _data_offset(zf, zf.getinfo("hello.txt")) + 3
    data = bytearray(p.read_bytes())
    data[pos] ^= 0x01
    p.write_bytes(bytes(data))
    with zipfile.ZipFile(p) as zf:  # zipfile agrees that the archive is now bad
        assert zf.testzip() == "hello.txt"
    entries = read_dduf_file(p)  # the fast open does not read entry data
    assert entries["hello.txt"].read_text() == "helmo world"
    with pytest.raises(DDUFCorruptedFileError) as e:
        verify_dduf_file(p)
    assert e.value.kind == "CrcMismatch"
    verify_dduf_file(p, crc=False)


# ---- the checked-in corpus (tests/dduf/make_corpus.py) ----

CORPUS = corpus_files(DDUF_CORPUS, ".dduf")


def test_corpus_is_present():
    assert len(CORPUS) > 50


def _verify_only(kind, path):
    return kind == "CrcMismatch" or path.name.split("--", 1)[1].startswith("verify-")


@pytest.mark.parametrize("kind,path", CORPUS)
def test_corpus(kind, path):
    if kind == "valid":
        entries = read_dduf_file(path)
        verify_dduf_file(path)
        assert "model_index.json" in entries
        json.loads(entries["model_index.json"].read_text())
        try:
            zf = zipfile.ZipFile(path)
        except zipfile.BadZipFile:
            return
        with zf:
            for name, entry in entries.items():
                with entry.as_mmap() as m:
                    assert bytes(m) == zf.read(name)
        return
    if _verify_only(kind, path):
        read_dduf_file(path)
        with pytest.raises(DDUFError) as e:
            verify_dduf_file(path)
        assert e.value.kind == kind
        return
    with pytest.raises(DDUFError) as e:
        read_dduf_file(path)
    err = e.value
    assert err.kind == kind, str(err)
    assert isinstance(err, DDUFCorruptedFileError)
    if kind in ("BadZipFile", "ZipUnsupported"):
        assert isinstance(err, zipfile.BadZipFile)
    if kind == "DDUFInvalidEntryName":
        assert isinstance(err.__cause__, DDUFInvalidEntryNameError)
