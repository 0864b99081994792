"""Hostile arguments: every path argument is converted as open() converts it (a NUL raises instead of
cutting the path short), every name / key / metadata string must have a UTF-8 form, and writers report
the operating system's own error for a target they cannot write.

Expected behaviour comes from the standard library (open(), os.fsencode) and from what is on disk.
"""

import os
import pathlib

import numpy as np
import pytest

import safeweights
import safeweights.numpy
from safeweights import dduf

from conftest import build_file


def _file(tmp_path):
    path = tmp_path / "m.safetensors"
    path.write_bytes(build_file([("w", "U8", [3], b"abc")]))
    return path


def _archive(tmp_path):
    path = tmp_path / "a.dduf"
    dduf.export_entries_as_dduf(path, [("model_index.json", b"{}")])
    return path


class _PathLike:
    def __init__(self, path):
        self.path = path

    def __fspath__(self):
        return self.path


# (name, call with a path) for every function that takes a path; the path given ends in "\0x" after a
# real, existing (or creatable) prefix, so a truncating implementation would succeed on the prefix.
def _calls(tmp_path):
    st = str(_file(tmp_path))
    archive = str(_archive(tmp_path))
    folder = tmp_path / "folder"
    folder.mkdir(exist_ok=True)
    (folder / "model_index.json").write_text("{}")
    arr = {"w": np.arange(3, dtype=np.uint8)}
    calls = [
        ("safe_open", st, lambda p: safeweights.safe_open(p, "np")),
        ("numpy.load_file", st, lambda p: safeweights.numpy.load_file(p)),
        ("numpy.save_file", str(tmp_path / "out.safetensors"), lambda p: safeweights.numpy.save_file(arr, p)),
        ("serialize_file", str(tmp_path / "low.safetensors"),
         lambda p: safeweights.serialize_file({}, p)),
        ("detect_format", st, safeweights.detect_format),
        ("validate", st, safeweights.validate),
        ("inspect", st, safeweights.inspect),
        ("read_dduf_file", archive, dduf.read_dduf_file),
        ("verify_dduf_file", archive, dduf.verify_dduf_file),
        ("export_entries_as_dduf", str(tmp_path / "out.dduf"),
         lambda p: dduf.export_entries_as_dduf(p, [("model_index.json", b"{}")])),
        ("export_entries_as_dduf content", st,
         lambda p: dduf.export_entries_as_dduf(tmp_path / "c.dduf", [("model_index.json", b"{}"), ("u/m.safetensors", p)])),
        ("export_folder_as_dduf target", str(tmp_path / "f.dduf"), lambda p: dduf.export_folder_as_dduf(p, folder)),
        ("export_folder_as_dduf folder", str(folder), lambda p: dduf.export_folder_as_dduf(tmp_path / "g.dduf", p)),
    ]
    try:
        import torch  # noqa: PLC0415
        import safeweights.torch as swt  # noqa: PLC0415

        calls += [
            ("torch.save_file", str(tmp_path / "t.safetensors"), lambda p: swt.save_file({"w": torch.zeros(2)}, p)),
            ("torch.load_file", st, lambda p: swt.load_file(p)),
        ]
    except ImportError:
        pass
    return calls


@pytest.mark.parametrize("form", ["str", "bytes", "pathlike"])
def test_nul_in_any_path_raises_like_open(tmp_path, form):
    with pytest.raises(ValueError, match="embedded null byte"):
        open(str(tmp_path / "x") + "\0y", "rb")  # what open() does: the behaviour we match
    before = set(os.listdir(tmp_path))
    for name, path, call in _calls(tmp_path):
        before = set(os.listdir(tmp_path))
        if form == "bytes" and name == "export_entries_as_dduf content":
            continue  # bytes content is the entry's data, not a path
        bad = path + "\0.x"
        arg = {"str": bad, "bytes": os.fsencode(bad), "pathlike": _PathLike(bad)}[form]
        with pytest.raises(ValueError, match="embedded null byte"):
            call(arg)
            pytest.fail(f"{name}: accepted a path with a NUL")
        assert set(os.listdir(tmp_path)) == before, f"{name} wrote something"


def test_bytes_and_undecodable_paths_name_the_file_the_os_sees(tmp_path):
    arr = {"w": np.arange(4, dtype=np.int16)}
    raw = os.fsencode(str(tmp_path)) + b"/\xff-bytes.safetensors"
    safeweights.numpy.save_file(arr, raw)  # bytes: used as the OS name, not as the text "b'...'"
    safeweights.serialize_file({}, raw + b".low")
    surrogate = str(tmp_path / os.fsdecode(b"\xfe-str.safetensors"))  # str with surrogateescape
    safeweights.numpy.save_file(arr, surrogate)
    assert sorted(os.listdir(os.fsencode(str(tmp_path)))) == [b"\xfe-str.safetensors", b"\xff-bytes.safetensors",
                                                              b"\xff-bytes.safetensors.low"]
    for p in (raw, surrogate, pathlib.Path(surrogate)):
        np.testing.assert_array_equal(safeweights.numpy.load_file(p)["w"], arr["w"])
        with safeweights.safe_open(p, "np") as f:
            assert f.keys() == ["w"]
        assert safeweights.detect_format(p) == "safetensors"


LONE = "bad\udc80name"  # a lone surrogate: no UTF-8 form


def _utf8_error(what):
    return pytest.raises(ValueError, match=f"{what} .*valid UTF-8")


def test_lone_surrogates_in_names_and_metadata_say_so(tmp_path):
    arr = np.zeros(2, dtype=np.float32)
    with _utf8_error("tensor name"):
        safeweights.numpy.save({LONE: arr})
    with _utf8_error("tensor name"):
        safeweights.numpy.save_file({LONE: arr}, tmp_path / "x.safetensors")
    with _utf8_error("metadata key"):
        safeweights.numpy.save({"a": arr}, metadata={LONE: "v"})
    with _utf8_error("metadata value"):
        safeweights.numpy.save({"a": arr}, metadata={"k": LONE})
    spec = safeweights.TensorSpec(dtype="uint8", shape=[0], data_ptr=0, data_len=0)
    with _utf8_error("tensor name"):
        safeweights.serialize({LONE: spec})
    with _utf8_error("entry name"):
        dduf.export_entries_as_dduf(tmp_path / "y.dduf", [("model_index.json", b"{}"), (LONE + ".json", b"{}")])
    assert sorted(os.listdir(tmp_path)) == []
    with safeweights.safe_open(_file(tmp_path), "np") as f:
        for lookup in (f.get_tensor, f.get_slice, f.get_raw):
            with _utf8_error("tensor name"):
                lookup(LONE)
        assert LONE not in f
    entries = dduf.read_dduf_file(_archive(tmp_path))
    entry = next(iter(entries.values()))
    with _utf8_error("entry name"):
        entry._archive.native.open_safetensors(LONE)
    with _utf8_error("entry name"):
        safeweights.inspect(_archive(tmp_path), entry=LONE)


def test_lone_surrogate_error_has_the_codec_error_as_cause():
    with pytest.raises(ValueError) as info:
        safeweights.numpy.save({LONE: np.zeros(1)})
    assert isinstance(info.value.__cause__, UnicodeEncodeError)
    with pytest.raises(ValueError) as info:
        safeweights.numpy.save({"a": np.zeros(1)}, metadata={"k": LONE * 100_000})
    assert len(str(info.value)) < 300  # the value is shown shortened, not repeated whole
    for n in range(38, 44):  # wherever the cut falls, between characters (é is two bytes in UTF-8)
        with pytest.raises(ValueError, match="valid UTF-8"):
            safeweights.numpy.save({"a": np.zeros(1)}, metadata={"é" * n + LONE: "v"})


@pytest.mark.parametrize("case", ["directory", "missing folder"])
def test_writers_report_the_os_error_for_an_unwritable_target(tmp_path, case):
    target = tmp_path if case == "directory" else tmp_path / "no" / "such" / "m.safetensors"
    # The library's errors carry no errno: a directory is an OSError that says so, not IsADirectoryError.
    want, says = (OSError, "is a directory") if case == "directory" else (FileNotFoundError, "No such file")
    writers = [lambda p: safeweights.numpy.save_file({"w": np.zeros(2)}, p)]
    try:
        import torch  # noqa: PLC0415
        import safeweights.torch as swt  # noqa: PLC0415

        writers.append(lambda p: swt.save_file({"w": torch.zeros(2)}, p))
    except ImportError:
        pass
    for write in writers:
        with pytest.raises(want) as info:
            write(target)
        assert str(target) in str(info.value) and says in str(info.value)
    assert sorted(os.listdir(tmp_path)) == []
