"""The command-line tool's human output cannot drive a terminal: tensor names, metadata, entry names,
paths and error messages from a hostile file are shown with their control characters escaped, while
``--json`` keeps the exact text (JSON's own escaping).

Files are built with json/struct/zipfile; the tool is the one ctest names in SAFEWEIGHTS_CLI.
"""

import json
import os
import re
import subprocess
import zipfile

import pytest

from conftest import build_file, header_bytes

CLI = os.environ.get("SAFEWEIGHTS_CLI")
pytestmark = pytest.mark.skipif(not CLI, reason="SAFEWEIGHTS_CLI (the command-line tool) not given")

# ESC [ 31m (red), BEL, CR (return to column 0 and overwrite), and a C1 CSI (U+009B, ESC [ in 8 bits).
HOSTILE = "x\x1b[31mred\x07bell\rcr\u009b2J"
# C0 but the line feed, DEL, C1 (as UTF-8: C2 80..C2 9F).
RAW_CONTROL = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")


def run(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, timeout=60)


def assert_no_control(out):
    assert not RAW_CONTROL.search(out.stdout), out.stdout
    assert not RAW_CONTROL.search(out.stderr), out.stderr


def test_inspect_escapes_names_and_metadata_and_json_keeps_them(tmp_path):
    path = tmp_path / "m.safetensors"
    path.write_bytes(build_file([(HOSTILE, "U8", [2], b"ab")], metadata={HOSTILE: HOSTILE + "v"}))
    human = run("inspect", path)
    assert human.returncode == 0, human.stderr
    assert_no_control(human)
    assert b"x\\x1b[31mred\\x07bell\\x0dcr\\u{9b}2J" in human.stdout
    js = run("inspect", "--json", path)
    info = json.loads(js.stdout)
    assert [t["name"] for t in info["tensors"]] == [HOSTILE]
    assert info["metadata"] == {HOSTILE: HOSTILE + "v"}
    assert b"\x1b" not in js.stdout and b"\x07" not in js.stdout and b"\r" not in js.stdout  # JSON escapes C0


def test_errors_and_paths_are_escaped_on_stderr_and_exact_in_json(tmp_path):
    header = {HOSTILE: {"dtype": "U8", "shape": [4], "data_offsets": [0, 2]}}  # shape and length disagree
    path = tmp_path / "bad\x1b]0;title\x07.safetensors"
    path.write_bytes(header_bytes(header) + b"ab")
    for command in ("inspect", "validate"):
        out = run(command, path)
        assert out.returncode == 1
        assert_no_control(out)
        assert b"\\x1b" in out.stderr
    js = run("validate", "--json", path)
    record = json.loads(js.stdout)
    assert record["file"] == str(path)
    assert HOSTILE in record["error"]["message"] or record["error"].get("tensor") == HOSTILE


def test_dduf_entry_names_are_escaped(tmp_path):
    archive = tmp_path / "evil.dduf"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        z.writestr("model_index.json", json.dumps({"unet": ["diffusers", "U"]}))
        z.writestr("unet/" + HOSTILE + ".json", "{}")
    for args in (("inspect", archive), ("validate", archive)):
        out = run(*args)
        assert out.returncode == 1  # a control character in an entry name is refused, and reported escaped
        assert_no_control(out)
        assert b"\\x1b[31m" in out.stderr
    record = json.loads(run("validate", "--json", archive).stdout)
    assert record["error"]["entry"] == "unet/" + HOSTILE + ".json"


def test_valid_c1_entry_name_is_escaped_in_the_listing(tmp_path):
    archive = tmp_path / "c1.dduf"
    name = "unet/\u009b2Jx.json"  # valid UTF-8, no C0 control: the archive is valid
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        z.writestr("model_index.json", json.dumps({"unet": ["diffusers", "U"]}))
        z.writestr("unet/config.json", "{}")
        z.writestr(name, "{}")
    out = run("inspect", archive)
    assert out.returncode == 0, out.stderr
    assert_no_control(out)
    assert b"unet/\\u{9b}2Jx.json" in out.stdout
    assert [e["name"] for e in json.loads(run("inspect", "--json", archive).stdout)["entries"]][-1] == name


def test_pack_unpack_and_parse_errors_escape_what_they_quote(tmp_path):
    src = tmp_path / "pipe"
    (src / "vae").mkdir(parents=True)
    (src / "model_index.json").write_text(json.dumps({"vae": ["diffusers", "AutoencoderKL"]}))
    (src / "vae" / "config.json").write_text("{}")
    archive = tmp_path / (HOSTILE + ".dduf")
    packed = run("pack", src, archive)
    assert packed.returncode == 0, packed.stderr
    assert_no_control(packed)
    unpacked = run("unpack", archive, tmp_path / HOSTILE)
    assert unpacked.returncode == 0, unpacked.stderr
    assert_no_control(unpacked)
    assert b"\\x1b[31m" in packed.stdout and b"\\x1b[31m" in unpacked.stdout
    # CLI11 quotes the argument it did not expect: escaped as well.
    parse = run("validate", archive, "--bogus" + HOSTILE)
    assert parse.returncode == 2
    assert_no_control(parse)
    assert b"--bogusx\\x1b[31m" in parse.stderr
