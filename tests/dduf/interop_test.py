#!/usr/bin/env python3
"""DDUF interoperability checks of the safeweights CLI against CPython's zipfile, Info-ZIP and numpy.

  (a) archives written by CPython's zipfile (the hub exporter's force_zip64 layout, plain writestr, a
      comment) validate, and `inspect --json` gives the offsets and lengths that huggingface_hub's
      reader computes (header offset + 30 + name length + extra length, read from the local header);
  (b) archives written by `safeweights pack` (aligned by default, --align 64, --reference-layout) pass
      zipfile.testzip() and `unzip -t`, list model_index.json first and then sorted names, hold the
      files' bytes, and the reference layout is byte-identical to CPython's force_zip64 output;
  (c) Info-ZIP archives: `zip -0 -D -r` (and -fz) validate, `zip -0 -r` (directory entries) does not;
  (d) `unpack` reproduces the folder;
  (e) `cat FILE.dduf ENTRY` and `cat FILE.dduf ENTRY TENSOR --slice SPEC` match the bytes and numpy.

With --corpus DIR it instead runs `validate --json` over the corpus of make_corpus.py and checks that
every file reports the kind in its name.

Exit status: 0 all passed, 1 a check failed, 77 (skipped) when zip, unzip or numpy is missing and
everything that could run passed.
"""

import argparse
import filecmp
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

try:
    import numpy as np
except ImportError:  # pragma: no cover - depends on the machine
    np = None

FAILURES = []
SKIPPED = []


def check(condition, message):
    if not condition:
        FAILURES.append(message)
        print("FAIL: " + message, file=sys.stderr)
    return condition


def skip(message):
    SKIPPED.append(message)
    print("SKIP: " + message)


class Cli:
    def __init__(self, path):
        self.path = path

    def run(self, *args, check_rc=None):
        proc = subprocess.run([self.path] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if check_rc is not None and proc.returncode != check_rc:
            check(False, "safeweights %s: exit %d, expected %d; stderr: %s" % (
                " ".join(map(str, args)), proc.returncode, check_rc, proc.stderr.decode(errors="replace").strip()))
        return proc

    def validate(self, path, *flags):
        proc = self.run("validate", "--json", *flags, path)
        try:
            text = proc.stdout.decode("utf-8")
        except UnicodeDecodeError as e:
            check(False, "validate --json %s: output is not UTF-8, so not JSON (%s): %r" % (path, e, proc.stdout))
            text = proc.stdout.decode("utf-8", errors="replace")
        lines = text.strip().splitlines()
        if not check(len(lines) == 1, "validate --json %s printed %r" % (path, proc.stdout)):
            return {"valid": False, "error": {"kind": "?"}}
        result = json.loads(lines[0])
        check((proc.returncode == 0) == result["valid"],
              "validate %s: exit %d but valid=%s" % (path, proc.returncode, result["valid"]))
        return result

    def inspect(self, path):
        proc = self.run("inspect", "--json", path, check_rc=0)
        return json.loads(proc.stdout.decode()) if proc.returncode == 0 else None


# --------------------------------------------------------------------------------------------------
# Inputs


def write_safetensors(path, tensors):
    """A safetensors file written here (not by the library): [(name, dtype code, numpy array)]."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, code, array in tensors:
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": code, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def make_tensors():
    rng = np.random.default_rng(1234)
    return {
        "vae/diffusion_pytorch_model.safetensors": [
            ("decoder.weight", "F32", rng.standard_normal((4, 5, 6)).astype("<f4")),
            ("decoder.bias", "F16", rng.standard_normal((7,)).astype("<f2")),
            ("encoder.odd", "U8", rng.integers(0, 255, (3, 5), dtype=np.uint8)),
            ("encoder.steps", "I64", np.arange(-6, 6, dtype="<i8").reshape(3, 4)),
        ],
        "text_encoder/model.safetensors": [
            # BF16 stored as raw 16-bit words; numpy slices them as uint16.
            ("embeddings.weight", "BF16", rng.integers(0, 65535, (10, 8), dtype=np.uint16).astype("<u2")),
        ],
    }


def make_folder(folder, extras=False):
    """A small diffusers folder. With extras, also files that packing must skip. Returns {entry: bytes}."""
    files = {
        "model_index.json": json.dumps({
            "_class_name": "StableDiffusionPipeline", "_diffusers_version": "0.33.0",
            "scheduler": ["diffusers", "DDIMScheduler"], "text_encoder": ["transformers", "CLIPTextModel"],
            "tokenizer": ["transformers", "CLIPTokenizer"], "vae": ["diffusers", "AutoencoderKL"]}, indent=2).encode(),
        "vae/config.json": b'{"_class_name": "AutoencoderKL", "latent_channels": 4}',
        "text_encoder/config.json": b'{"hidden_size": 8}',
        "tokenizer/tokenizer_config.json": b'{"model_max_length": 77}',
        "tokenizer/vocab.json": b'{"a": 0, "b": 1}',
        "tokenizer/merges.txt": b"#version: 0.2\na b\n",
        "tokenizer/spiece.model": bytes(range(256)),
        "scheduler/scheduler_config.json": b'{"num_train_timesteps": 1000}',
    }
    for name, data in files.items():
        path = os.path.join(folder, *name.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    for name, tensors in make_tensors().items():
        path = os.path.join(folder, *name.split("/"))
        write_safetensors(path, tensors)
        with open(path, "rb") as f:
            files[name] = f.read()
    if extras:
        for name, data in {"README.md": b"# skipped", "vae/model.bin": b"\x80\x02", "vae/sub/config.json": b"{}"}.items():
            path = os.path.join(folder, *name.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
    return files


def hub_order(files):
    return ["model_index.json"] + sorted(n for n in files if n != "model_index.json")


def cpython_force_zip64(items):
    """What huggingface_hub's export_entries_as_dduf writes for these (name, bytes) pairs."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, data in items:
            with zf.open(name, "w", force_zip64=True) as f:
                f.write(data)
    return buf.getvalue()


def as_fixed_cpython(data):
    """CPython before 3.11.4 (gh-103861) wrote force_zip64 local headers with real 32-bit sizes and
    version 2.0; later versions write 0xFFFFFFFF and 4.5 (the layout dduf.md §2.7 documents). Returns
    the archive as a fixed CPython writes it, so one expectation serves every CPython."""
    out = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = zf.infolist()
        start_dir = zf.start_dir
    for info in infos:
        h = info.header_offset
        if struct.unpack_from("<H", out, h + 4)[0] == 45:
            return data  # already the fixed layout
        name_len, extra_len = struct.unpack_from("<HH", out, h + 26)
        extra = bytes(out[h + 30 + name_len: h + 30 + name_len + extra_len])
        if extra[:4] == struct.pack("<HH", 1, 16):
            struct.pack_into("<H", out, h + 4, 45)
            struct.pack_into("<II", out, h + 18, 0xFFFFFFFF, 0xFFFFFFFF)
    pos = start_dir
    for _ in infos:
        assert struct.unpack_from("<I", out, pos)[0] == 0x02014B50
        made, _needed = struct.unpack_from("<HH", out, pos + 4)
        struct.pack_into("<HH", out, pos + 4, (made & 0xFF00) | 45, 45)
        n, m, k = struct.unpack_from("<HHH", out, pos + 28)
        pos += 46 + n + m + k
    return bytes(out)


def hub_offsets(path):
    """huggingface_hub's read_dduf_file offsets: {name: (offset, length)} via zipfile + the local header."""
    out = {}
    with zipfile.ZipFile(path) as zf, open(path, "rb") as f:
        for info in zf.infolist():
            f.seek(info.header_offset)
            header = f.read(30)
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            out[info.filename] = (info.header_offset + 30 + name_len + extra_len, info.file_size)
    return out


def check_offsets(cli, path, files, label):
    info = cli.inspect(path)
    if info is None:
        return
    expected = hub_offsets(path)
    got = {e["name"]: (e["offset"], e["length"]) for e in info["entries"]}
    check(got == expected, "%s: inspect offsets %s != hub reader offsets %s" % (label, got, expected))
    with open(path, "rb") as f:
        raw = f.read()
    for name, (offset, length) in got.items():
        check(raw[offset:offset + length] == files[name], "%s: bytes at %s's offset differ" % (label, name))


# --------------------------------------------------------------------------------------------------
# (a) CPython-written archives


def test_cpython_archives(cli, tmp, files):
    items = [(n, files[n]) for n in hub_order(files)]
    hub = os.path.join(tmp, "cpython_hub.dduf")
    with open(hub, "wb") as f:
        f.write(cpython_force_zip64(items))
    plain = os.path.join(tmp, "cpython_plain.dduf")
    with zipfile.ZipFile(plain, "w", zipfile.ZIP_STORED) as zf:
        for name, data in reversed(items):  # any order is fine for a reader
            zf.writestr(name, data)
    commented = os.path.join(tmp, "cpython_comment.dduf")
    with zipfile.ZipFile(commented, "w", zipfile.ZIP_STORED) as zf:
        for name, data in items:
            zf.writestr(name, data)
        zf.comment = b"written by CPython with a comment"
    for label, path in (("force_zip64", hub), ("writestr", plain), ("comment", commented)):
        result = cli.validate(path)
        check(result["valid"], "(a) CPython %s archive is not valid: %s" % (label, result["error"]))
        check_offsets(cli, path, files, "(a) CPython " + label)

    # Compressed entries: the reference rejects them ("Data must not be compressed in DDUF file.").
    deflated = os.path.join(tmp, "cpython_deflated.dduf")
    with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in items:
            zf.writestr(name, data)
    result = cli.validate(deflated)
    check(not result["valid"] and result["error"]["kind"] == "DDUFCorruptedFile",
          "(a) deflated archive: %s" % result["error"])

    # A non-seekable stream: CPython sets bit 3 and writes data descriptors; strict mode rejects it.
    class Unseekable(io.RawIOBase):
        def __init__(self):
            self.buf = bytearray()

        def writable(self):
            return True

        def write(self, b):
            self.buf += b
            return len(b)

    stream = Unseekable()
    with zipfile.ZipFile(stream, "w", zipfile.ZIP_STORED) as zf:
        for name, data in items:
            zf.writestr(name, data)
    streamed = os.path.join(tmp, "cpython_stream.dduf")
    with open(streamed, "wb") as f:
        f.write(bytes(stream.buf))
    result = cli.validate(streamed)
    check(not result["valid"] and result["error"]["kind"] == "ZipUnsupported",
          "(a) data-descriptor archive: %s" % result["error"])


# --------------------------------------------------------------------------------------------------
# (b) archives written by `safeweights pack`


def test_pack(cli, tmp, src, files, have_unzip):
    order = hub_order(files)
    outputs = {}
    for label, flags, align in (("default", [], 4096), ("align64", ["--align", "64"], 64),
                                ("reference", ["--reference-layout"], None)):
        out = os.path.join(tmp, "packed_%s.dduf" % label)
        if cli.run("pack", src, out, *flags, check_rc=0).returncode != 0:
            continue
        outputs[label] = out
        with zipfile.ZipFile(out) as zf:
            check(zf.testzip() is None, "(b) %s: zipfile.testzip() found a bad CRC" % label)
            check(zf.namelist() == order, "(b) %s: namelist %s != %s" % (label, zf.namelist(), order))
            for info in zf.infolist():
                check(info.compress_type == zipfile.ZIP_STORED, "(b) %s: %s is compressed" % (label, info.filename))
                check(zf.read(info) == files[info.filename], "(b) %s: %s differs" % (label, info.filename))
        offsets = hub_offsets(out)
        for name, (offset, _) in offsets.items():
            if not name.endswith(".safetensors"):
                continue
            if align is not None:
                check(offset % align == 0, "(b) %s: %s data at %d, not a multiple of %d" % (label, name, offset, align))
        check_offsets(cli, out, files, "(b) " + label)
        result = cli.validate(out)
        check(result["valid"], "(b) %s: validate says %s" % (label, result["error"]))
        if have_unzip:
            proc = subprocess.run(["unzip", "-tq", out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            check(proc.returncode == 0, "(b) %s: unzip -t exit %d: %s" % (label, proc.returncode, proc.stdout.decode(errors="replace")))
    if "reference" in outputs:
        with open(outputs["reference"], "rb") as f:
            ours = f.read()
        expected = as_fixed_cpython(cpython_force_zip64([(n, files[n]) for n in order]))
        check(ours == expected, "(b) --reference-layout is not byte-identical to CPython's force_zip64 output")
        offsets = hub_offsets(outputs["reference"])
        check(any(o % 4096 for n, (o, _) in offsets.items() if n.endswith(".safetensors")),
              "(b) --reference-layout: every safetensors entry happens to be aligned; the test proves nothing")
    # Deterministic.
    again = os.path.join(tmp, "packed_again.dduf")
    if cli.run("pack", src, again, check_rc=0).returncode == 0 and "default" in outputs:
        check(filecmp.cmp(again, outputs["default"], shallow=False), "(b) packing twice gave different bytes")
    return outputs


# --------------------------------------------------------------------------------------------------
# (c) Info-ZIP


def test_info_zip(cli, tmp, clean, files):
    env = dict(os.environ, TZ="UTC")
    for label, flags in (("-0 -D -r", ["-0", "-D", "-r"]), ("-0 -D -r -fz", ["-0", "-D", "-r", "-fz"])):
        out = os.path.join(tmp, "infozip%s.dduf" % "".join(flags).replace("-", "_"))
        subprocess.run(["zip", "-q"] + flags + [out, "."], cwd=clean, env=env, check=True)
        result = cli.validate(out)
        check(result["valid"], "(c) zip %s: %s" % (label, result["error"]))
        if result["valid"]:
            check_offsets(cli, out, files, "(c) zip " + label)
    out = os.path.join(tmp, "infozip_dirs.dduf")
    subprocess.run(["zip", "-q", "-0", "-r", out, "."], cwd=clean, env=env, check=True)
    result = cli.validate(out)
    check(not result["valid"] and result["error"]["kind"] == "DDUFInvalidEntryName",
          "(c) zip -0 -r (directory entries): %s" % result["error"])
    # Deflated by Info-ZIP (default level: deflated entries have flag bits 1-2 clear).
    out = os.path.join(tmp, "infozip_deflate.dduf")
    subprocess.run(["zip", "-q", "-D", "-r", out, "."], cwd=clean, env=env, check=True)
    result = cli.validate(out)
    check(not result["valid"] and result["error"]["kind"] == "DDUFCorruptedFile", "(c) zip -D -r: %s" % result["error"])
    # `zip -9` also sets deflate-option bit 1 on the entries it stores; the ZIP layer may reject those
    # first (dduf.md §7.3: bits 1-2 must be 0 for stored entries). Either way the archive is invalid.
    out = os.path.join(tmp, "infozip_deflate9.dduf")
    subprocess.run(["zip", "-q", "-9", "-D", "-r", out, "."], cwd=clean, env=env, check=True)
    result = cli.validate(out)
    check(not result["valid"] and result["error"]["kind"] in ("DDUFCorruptedFile", "ZipUnsupported"),
          "(c) zip -9: %s" % result["error"])


# --------------------------------------------------------------------------------------------------
# (d) unpack, (e) cat


def dirs_equal(a, b):
    def listing(root):
        out = set()
        for d, _, names in os.walk(root):
            for n in names:
                out.add(os.path.relpath(os.path.join(d, n), root))
        return out
    la, lb = listing(a), listing(b)
    if la != lb:
        return "file lists differ: only in %s: %s; only in %s: %s" % (a, sorted(la - lb), b, sorted(lb - la))
    for n in sorted(la):
        if not filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False):
            return "%s differs" % n
    return None


def test_unpack(cli, tmp, archive, clean):
    dst = os.path.join(tmp, "unpacked")
    if cli.run("unpack", archive, dst, check_rc=0).returncode == 0:
        diff = dirs_equal(clean, dst)
        check(diff is None, "(d) unpack: %s" % diff)


SLICES = ["1:3, ::-2, 0", "..., -1", "None, :", "::2", "-1", "1", ":, 1:, ::3", "2:0", "..., None", "::-1, ::-1",
          "0, 0"]


def test_cat(cli, tmp, archive, files):
    for name, data in files.items():
        proc = cli.run("cat", archive, name, check_rc=0)
        check(proc.stdout == data, "(e) cat %s: %d bytes, expected %d" % (name, len(proc.stdout), len(data)))
    out = os.path.join(tmp, "cat_out.bin")
    cli.run("cat", archive, "tokenizer/spiece.model", "-o", out, check_rc=0)
    with open(out, "rb") as f:
        check(f.read() == files["tokenizer/spiece.model"], "(e) cat -o wrote other bytes")
    for entry, tensors in make_tensors().items():
        for tname, _code, array in tensors:
            proc = cli.run("cat", archive, entry, tname, check_rc=0)
            check(proc.stdout == np.ascontiguousarray(array).tobytes(), "(e) cat %s %s: whole tensor differs" % (entry, tname))
            for spec in SLICES:
                try:
                    expected = np.ascontiguousarray(eval("array[%s]" % spec, {"array": array, "None": None})).tobytes()
                except IndexError:
                    expected = None
                proc = cli.run("cat", archive, entry, tname, "--slice", spec)
                if expected is None:
                    check(proc.returncode != 0, "(e) %s[%s]: numpy raises IndexError, cat exited 0" % (tname, spec))
                else:
                    check(proc.returncode == 0 and proc.stdout == expected,
                          "(e) %s[%s]: cat gave %d bytes (exit %d), numpy %d bytes; stderr: %s" % (
                              tname, spec, len(proc.stdout), proc.returncode, len(expected), proc.stderr.decode(errors="replace").strip()))
    for entry, tensors in make_tensors().items():
        proc = cli.run("inspect", "--json", archive, entry, check_rc=0)
        if proc.returncode == 0:
            info = json.loads(proc.stdout.decode())
            got = {t["name"]: (t["dtype"], t["shape"]) for t in info["tensors"]}
            want = {name: (code, list(array.shape)) for name, code, array in tensors}
            check(got == want, "(e) inspect %s: %s != %s" % (entry, got, want))
    proc = cli.run("cat", archive, "vae/diffusion_pytorch_model.safetensors", "no.such.tensor")
    check(proc.returncode != 0 and b"TensorNotFound" in proc.stderr, "(e) missing tensor: exit %d, %r" % (proc.returncode, proc.stderr))
    proc = cli.run("cat", archive, "no/such.json")
    check(proc.returncode != 0, "(e) missing entry: exit 0")


# --------------------------------------------------------------------------------------------------
# The corpus through the CLI


def run_corpus(cli, corpus):
    names = sorted(f for f in os.listdir(corpus) if f.endswith(".dduf"))
    check(len(names) > 0, "no corpus files in " + corpus)
    for name in names:
        expected = name.split("--", 1)[0]
        path = os.path.join(corpus, name)
        result = cli.validate(path)
        if expected == "valid":
            check(result["valid"], "%s: %s" % (name, result["error"]))
            continue
        got = None if result["valid"] else result["error"]["kind"]
        check(got == expected, "%s: validate reports %s" % (name, got))
        check(result["format"] == "dduf", "%s: detected as format %s" % (name, result["format"]))
        if expected == "CrcMismatch":
            quick = cli.validate(path, "--quick")
            check(quick["valid"], "%s: validate --quick (no CRCs) should pass: %s" % (name, quick["error"]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--corpus")
    args = parser.parse_args()
    cli = Cli(args.cli)
    if args.corpus:
        run_corpus(cli, args.corpus)
    else:
        if np is None:
            print("SKIP: numpy is not installed")
            return 77
        have_zip, have_unzip = shutil.which("zip") is not None, shutil.which("unzip") is not None
        with tempfile.TemporaryDirectory(prefix="dduf_interop.") as tmp:
            clean = os.path.join(tmp, "clean")
            files = make_folder(clean)
            src = os.path.join(tmp, "src")
            make_folder(src, extras=True)
            test_cpython_archives(cli, tmp, files)
            outputs = test_pack(cli, tmp, src, files, have_unzip)
            if not have_unzip:
                skip("unzip is not installed: unzip -t not run")
            if have_zip:
                test_info_zip(cli, tmp, clean, files)
            else:
                skip("zip is not installed: Info-ZIP checks not run")
            if "default" in outputs:
                test_unpack(cli, tmp, outputs["default"], clean)
                test_cat(cli, tmp, outputs["default"], files)
            if "reference" in outputs:
                test_cat(cli, tmp, outputs["reference"], files)
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES), file=sys.stderr)
        return 1
    if SKIPPED:
        return 77
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
