#!/usr/bin/env python3
"""Generates the DDUF conformance corpus: small archives, each breaking exactly one rule.

Every file is named `<ExpectedKind>--<rule>.dduf`, where ExpectedKind is the safeweights ErrorKind the
reader must report, or `valid` for archives that must open and verify. Rules whose name starts with
`verify-` (and every CrcMismatch file) open fine and fail only in Reader::verify(); all others fail in
Reader::open().

Each broken archive starts from the same small, valid, hub-layout DDUF (what huggingface_hub's exporter,
i.e. CPython zipfile with force_zip64=True, writes: the builder below is checked byte for byte against
CPython) and changes one thing. Valid archives come from CPython's zipfile, Info-ZIP and the builder.

Usage:
    make_corpus.py OUT_DIR            write the corpus (stale *.dduf files in OUT_DIR are removed)
    make_corpus.py --check OUT_DIR    regenerate in memory and compare with OUT_DIR (exit 77 when a
                                      file could not be regenerated for lack of `zip`)

Standard library only; `zip` (Info-ZIP) is needed for one valid file and is skipped by --check when it is
not installed.
"""

import io
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib

LOCAL_SIG = 0x04034B50
CENTRAL_SIG = 0x02014B50
EOCD_SIG = 0x06054B50
ZIP64_EOCD_SIG = 0x06064B50
ZIP64_LOCATOR_SIG = 0x07064B50
DOS_DATE_1980 = 0x0021

# --------------------------------------------------------------------------------------------------
# Entry contents


def safetensors_bytes(header_len_delta=0):
    """A tiny F32 safetensors file (one 2x3 tensor); header_len_delta corrupts the u64 length prefix."""
    header = b'{"weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}'
    header += b" " * (-len(header) % 8)
    data = struct.pack("<6f", 0.5, -1.0, 2.0, 3.25, -4.5, 8.0)
    return struct.pack("<Q", len(header) + header_len_delta) + header + data


MODEL_INDEX = (b'{"_class_name": "TinyPipeline", "_diffusers_version": "0.33.0", '
               b'"scheduler": ["diffusers", "DDIMScheduler"], "vae": ["diffusers", "AutoencoderKL"]}')
SCHEDULER = b'{"_class_name": "DDIMScheduler", "num_train_timesteps": 1000}'
VAE_CONFIG = b'{"_class_name": "AutoencoderKL", "latent_channels": 4, "block_out_channels": [64, 64, 64, 64]}'


def base_files():
    """The valid archive's entries, in archive order."""
    return [
        ("model_index.json", MODEL_INDEX),
        ("scheduler/scheduler_config.json", SCHEDULER),
        ("vae/config.json", VAE_CONFIG),
        ("vae/diffusion_pytorch_model.safetensors", safetensors_bytes()),
    ]


# --------------------------------------------------------------------------------------------------
# A ZIP builder whose every field can be overridden. Defaults give CPython's force_zip64 layout.


class Entry:
    def __init__(self, name, data, **kw):
        self.name = name.encode("utf-8") if isinstance(name, str) else name
        self.data = data                     # the stored bytes (compressed ones when method != 0)
        self.usize = kw.pop("usize", len(data))
        self.csize = kw.pop("csize", len(data))
        self.crc = kw.pop("crc", zlib.crc32(data) if kw.get("method", 0) == 0 else None)
        self.method = kw.pop("method", 0)
        self.flags = kw.pop("flags", 0)
        self.version_needed = kw.pop("version_needed", 45)
        self.version_made = kw.pop("version_made", 0x032D)
        self.external_attr = kw.pop("external_attr", 0o600 << 16)
        self.disk_start = kw.pop("disk_start", 0)
        # Local-header-only overrides.
        self.local_sig = kw.pop("local_sig", LOCAL_SIG)
        self.local_name = kw.pop("local_name", None)
        self.local_flags = kw.pop("local_flags", None)
        self.local_method = kw.pop("local_method", None)
        self.local_crc = kw.pop("local_crc", None)
        self.local_version = kw.pop("local_version", None)
        self.local_extra = kw.pop("local_extra", None)   # bytes: replaces the ZIP64 block
        self.local_zip64 = kw.pop("local_zip64", True)   # False: plain 32-bit sizes, no extra
        # With the ZIP64 block: 0xFFFFFFFF in the 32-bit size fields (CPython >= 3.11.4, 3.12), or the
        # real sizes (older CPython's force_zip64, bpo gh-103861).
        self.local_saturate = kw.pop("local_saturate", True)
        # Central-only overrides.
        self.central_extra = kw.pop("central_extra", b"")
        self.central_csize = kw.pop("central_csize", None)
        self.header_offset = kw.pop("header_offset", None)  # forced CD offset (set by the builder otherwise)
        self.write_local = kw.pop("write_local", True)      # False: only a CD record (pointing elsewhere)
        self.gap_after = kw.pop("gap_after", b"")           # bytes after this entry's data (offsets follow)
        if kw:
            raise TypeError("unknown entry fields: %s" % sorted(kw))

    def local_block(self):
        name = self.local_name if self.local_name is not None else self.name
        if self.local_extra is not None:
            extra = self.local_extra
        elif self.local_zip64:
            extra = struct.pack("<HHQQ", 1, 16, self.usize, self.csize)
        else:
            extra = b""
        saturate = self.local_saturate and (self.local_zip64 or self.local_extra is not None)
        sizes = (0xFFFFFFFF, 0xFFFFFFFF) if saturate else (self.csize, self.usize)
        crc = self.local_crc if self.local_crc is not None else self.crc
        header = struct.pack(
            "<IHHHHHIIIHH", self.local_sig,
            self.local_version if self.local_version is not None else self.version_needed,
            self.local_flags if self.local_flags is not None else self.flags,
            self.local_method if self.local_method is not None else self.method,
            0, DOS_DATE_1980, crc, sizes[0], sizes[1], len(name), len(extra))
        return header + name + extra + self.data

    def central_record(self, offset):
        csize = self.central_csize if self.central_csize is not None else self.csize
        return struct.pack(
            "<IHHHHHHIIIHHHHHII", CENTRAL_SIG, self.version_made, self.version_needed, self.flags,
            self.method, 0, DOS_DATE_1980, self.crc, csize, self.usize, len(self.name),
            len(self.central_extra), 0, self.disk_start, 0, self.external_attr, offset,
        ) + self.name + self.central_extra


def build(entries, prefix=b"", prefix_shifts_offsets=False, gap_before_cd=b"", gap_after_cd=b"",
          comment=b"", trailing=b"", eocd=None, zip64=None, cd_order=None):
    """Assembles an archive.

    prefix: bytes before the first local header; offsets count from the file start only when
    prefix_shifts_offsets (Info-ZIP `zip -A` style), else they ignore it (`cat sfx a.zip` style).
    eocd: overrides of the classic end record fields (disk, cd_disk, count_disk, count, cd_size,
    cd_offset). zip64: None for no ZIP64 end records, else a dict of overrides (count_disk, count,
    cd_size, cd_offset, locator_offset, saturate=True to put 0xFFFF/0xFFFFFFFF in the classic record).
    cd_order: indices giving the central-directory order (default: archive order).
    """
    out = bytearray(prefix)
    shift = 0 if prefix_shifts_offsets else len(prefix)  # offsets are positions minus this
    offsets = []
    data_offsets = []
    for e in entries:
        if not e.write_local:
            offsets.append(None)
            data_offsets.append(None)
            continue
        offsets.append(len(out) - shift)
        block = e.local_block()
        data_offsets.append(len(out) - shift + len(block) - len(e.data))
        out += block + e.gap_after
    out += gap_before_cd
    cd_offset = len(out) - shift
    cd = bytearray()
    order = cd_order if cd_order is not None else range(len(entries))
    for i in order:
        e = entries[i]
        off = e.header_offset
        if callable(off):
            off = off(offsets, data_offsets)
        if off is None:
            off = offsets[i]
        cd += e.central_record(off)
    out += cd
    out += gap_after_cd
    count = len(order)
    fields = dict(disk=0, cd_disk=0, count_disk=count, count=count, cd_size=len(cd), cd_offset=cd_offset)
    if zip64 is not None:
        z = dict(fields)
        z.update({k: v for k, v in zip64.items() if k in fields})
        z_pos = len(out) - shift
        out += struct.pack("<IQHHIIQQQQ", ZIP64_EOCD_SIG, 44, 45, 45, z["disk"], z["cd_disk"],
                           z["count_disk"], z["count"], z["cd_size"], z["cd_offset"])
        out += struct.pack("<IIQI", ZIP64_LOCATOR_SIG, 0, zip64.get("locator_offset", z_pos), 1)
        if zip64.get("saturate"):
            fields.update(count_disk=0xFFFF, count=0xFFFF, cd_size=0xFFFFFFFF, cd_offset=0xFFFFFFFF)
    if eocd:
        fields.update(eocd)
    out += struct.pack("<IHHHHIIH", EOCD_SIG, fields["disk"], fields["cd_disk"], fields["count_disk"],
                       fields["count"], fields["cd_size"], fields["cd_offset"], len(comment))
    out += comment + trailing
    return bytes(out)


def hub(files):
    """The hub exporter's archive of (name, bytes) pairs, in that order."""
    return build([Entry(name, data) for name, data in files])


def base_entries():
    return [Entry(name, data) for name, data in base_files()]


def legacy_cpython_entries(files):
    """force_zip64 as CPython before 3.11.4 writes it: ZIP64 block, but real 32-bit sizes, version 2.0."""
    return [Entry(name, data, local_saturate=False, version_needed=20, version_made=0x0314) for name, data in files]


def with_entry(index, **changes):
    """The base archive's entries with entry `index` rebuilt with `changes`."""
    entries = base_entries()
    name, data = base_files()[index]
    name = changes.pop("name", name)
    data = changes.pop("data", data)
    entries[index] = Entry(name, data, **changes)
    return entries


MI, SCHED, VAE_CFG, VAE_W = range(4)

# --------------------------------------------------------------------------------------------------
# Reference writers


def cpython_hub_layout(files, comment=b""):
    """What huggingface_hub's export_entries_as_dduf writes: zf.open(name, "w", force_zip64=True)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, data in files:
            with zf.open(name, "w", force_zip64=True) as f:
                f.write(data)
        if comment:
            zf.comment = comment
    return buf.getvalue()


def cpython_writestr(files):
    """A plain (non-ZIP64) archive, like huggingface_hub's read-test fixture (fixed timestamps)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(2024, 12, 16, 10, 30, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return buf.getvalue()


def info_zip(files):
    """Info-ZIP `zip -0 -D -X` (stored, no directory entries, no extra attributes) with fixed mtimes."""
    if shutil.which("zip") is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        for name, data in files:
            path = os.path.join(src, *name.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
            os.chmod(path, 0o644)
            os.utime(path, (1734345000, 1734345000))
        out = os.path.join(tmp, "out.zip")
        env = dict(os.environ, TZ="UTC")
        subprocess.run(["zip", "-q", "-0", "-D", "-X", out] + [name for name, _ in files], cwd=src, env=env,
                       check=True)
        with open(out, "rb") as f:
            return f.read()


# --------------------------------------------------------------------------------------------------
# The corpus


def deflated(data):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def corpus():
    """Yields (file name, bytes); bytes None means "cannot be generated here" (missing tool)."""
    files = base_files()
    base = build(base_entries())
    legacy = build(legacy_cpython_entries(files))
    # The builder's defaults are CPython's force_zip64 layout (checked against whichever CPython runs this).
    if cpython_hub_layout(files) not in (base, legacy):
        raise SystemExit("make_corpus: the builder's base archive is not CPython's force_zip64 layout")

    # ---- valid archives ------------------------------------------------------------------------
    yield "valid--hub-layout.dduf", base
    yield "valid--hub-layout-cpython-before-3.11.4.dduf", legacy
    yield "valid--cpython-writestr-plain.dduf", cpython_writestr(files)
    yield "valid--info-zip-stored-no-dirs.dduf", info_zip(files)
    yield "valid--archive-comment.dduf", build(base_entries(), comment=b"packed for the safeweights tests")
    yield "valid--zip64-end-records.dduf", build(base_entries(), zip64={})
    yield "valid--zip64-end-records-saturated.dduf", build(base_entries(), zip64={"saturate": True})
    # Data of the safetensors entry padded onto a 4096-byte boundary with a local-only 0xD935 block.
    entries = base_entries()
    pre = sum(len(e.local_block()) for e in entries[:VAE_W])
    w = entries[VAE_W]
    start = pre + 30 + len(w.name) + 20 + 6
    pad = -start % 4096
    w.local_extra = struct.pack("<HHQQ", 1, 16, w.usize, w.csize) + struct.pack("<HHH", 0xD935, 2 + pad, 4096) + b"\0" * pad
    yield "valid--aligned-padding-extra.dduf", build(entries)
    yield "valid--bare-json-name.dduf", hub(files + [("json", b"{}")])
    yield "valid--model-extension-tokenizer.dduf", hub(
        [("model_index.json", MODEL_INDEX[:-1] + b', "tokenizer": ["transformers", "T5TokenizerFast"]}')] + files[1:] +
        [("tokenizer/spiece.model", b"\x0a\x0bsentencepiece"), ("tokenizer/tokenizer_config.json", b"{}")])
    yield "valid--utf8-name.dduf", build(base_entries() + [Entry("vae/caf\u00e9.txt", b"accent", flags=0x800)])
    yield "valid--root-files-and-empty-entry.dduf", hub(
        files + [("README.txt", b"A tiny pipeline.\n"), ("weights.safetensors", safetensors_bytes()), ("empty.txt", b"")])
    yield "valid--component-without-folder.dduf", hub(
        [("model_index.json", MODEL_INDEX[:-1] + b', "text_encoder": ["transformers", "CLIPTextModel"]}')] + files[1:])

    # ---- DDUF rules: Reader::open ---------------------------------------------------------------
    yield "DDUFCorruptedFile--compressed-entry.dduf", build(with_entry(
        VAE_CFG, data=deflated(VAE_CONFIG), usize=len(VAE_CONFIG), crc=zlib.crc32(VAE_CONFIG), method=8))
    yield "DDUFInvalidEntryName--directory-entry.dduf", build(base_entries()[:VAE_CFG] + [Entry("vae/", b"")] + base_entries()[VAE_CFG:])
    yield "DDUFInvalidEntryName--gguf-extension.dduf", build(base_entries() + [Entry("vae/model.gguf", b"GGUF")])
    yield "DDUFInvalidEntryName--bin-extension.dduf", build(base_entries() + [Entry("vae/model.bin", b"\x80\x02")])
    yield "DDUFInvalidEntryName--uppercase-extension.dduf", build(base_entries() + [Entry("vae/extra.JSON", b"{}")])
    yield "DDUFInvalidEntryName--backslash.dduf", build(base_entries() + [Entry("vae\\extra.json", b"{}")])
    yield "DDUFInvalidEntryName--two-level-nesting.dduf", build(base_entries() + [Entry("vae/sub/config.json", b"{}")])
    yield "DDUFInvalidEntryName--empty-path-part.dduf", build(base_entries() + [Entry("vae//extra.json", b"{}")])
    # Passes the reference (it strips the '/', and the folder '' is an index key with a config file);
    # rejected by our stricter rule.
    yield "DDUFInvalidEntryName--leading-slash.dduf", build(
        with_entry(MI, data=MODEL_INDEX[:-1] + b', "": ["diffusers", "X"]}') + [Entry("/config.json", b"{}")])
    # `..` passes every reference rule when model_index.json has a ".." key; our stricter rule rejects it.
    yield "DDUFInvalidEntryName--dotdot-path-part.dduf", build(
        with_entry(MI, data=MODEL_INDEX[:-1] + b', "..": ["diffusers", "X"]}') + [Entry("../config.json", b"{}")])
    yield "DDUFInvalidEntryName--dot-path-part.dduf", build(
        with_entry(MI, data=MODEL_INDEX[:-1] + b', ".": ["diffusers", "X"]}') + [Entry("./config.json", b"{}")])
    yield "DDUFCorruptedFile--missing-model-index.dduf", build(base_entries()[1:])
    yield "DDUFCorruptedFile--empty-archive.dduf", build([])
    yield "DDUFCorruptedFile--model-index-list.dduf", build(with_entry(MI, data=b'["scheduler", "vae"]'))
    yield "DDUFCorruptedFile--model-index-invalid-json.dduf", build(with_entry(MI, data=MODEL_INDEX[:-1]))
    yield "DDUFCorruptedFile--model-index-invalid-utf8.dduf", build(with_entry(MI, data=MODEL_INDEX[:-1] + b', "\xff": 1}'))
    yield "DDUFCorruptedFile--folder-not-in-index.dduf", build(base_entries() + [Entry("unet/config.json", b"{}")])
    yield "DDUFCorruptedFile--folder-without-config.dduf", build(with_entry(VAE_CFG, name="vae/settings.json"))
    # Pass the reference, which keys entries by name, but cannot be unpacked: a folder cannot hold a file
    # and a folder of one name, nor a name part longer than NAME_MAX (255 bytes).
    yield "DDUFCorruptedFile--root-file-and-folder-same-name.dduf", build(
        with_entry(MI, data=MODEL_INDEX[:-1] + b', "x.json": ["diffusers", "X"]}')
        + [Entry("x.json", b"{}"), Entry("x.json/config.json", b"{}")])
    yield "DDUFCorruptedFile--component-named-model-index.dduf", build(
        with_entry(MI, data=MODEL_INDEX[:-1] + b', "model_index.json": ["diffusers", "X"]}')
        + [Entry("model_index.json/config.json", b"{}")])
    yield "DDUFInvalidEntryName--name-part-too-long.dduf", build(base_entries() + [Entry("vae/" + "a" * 295 + ".json", b"{}")])
    yield "DuplicateKey--model-index-duplicate-key.dduf", build(
        with_entry(MI, data=MODEL_INDEX[:-1] + b', "vae": ["diffusers", "AutoencoderTiny"]}'))

    # ---- ZIP structure: Reader::open (zip::Archive::open) ---------------------------------------
    yield "BadZipFile--empty-file.dduf", b""
    yield "BadZipFile--not-a-zip.dduf", b"This is not a ZIP archive, just some text that is long enough.\n"
    yield "BadZipFile--truncated.dduf", base[: len(base) // 2]
    yield "BadZipFile--duplicate-names.dduf", build(base_entries() + [Entry("vae/config.json", b'{"latent_channels": 8}')])
    yield "BadZipFile--prepended-junk.dduf", build(base_entries(), prefix=b"#!/bin/sh\nexit 0\n" * 4)
    yield "BadZipFile--prepended-junk-offsets-adjusted.dduf", build(
        base_entries(), prefix=b"#!/bin/sh\nexit 0\n" * 4, prefix_shifts_offsets=True)
    yield "BadZipFile--trailing-garbage.dduf", base + b"trailing bytes after the end record"
    yield "BadZipFile--gap-between-entries.dduf", build(with_entry(SCHED, data=SCHEDULER, gap_after=b"\0" * 64))
    yield "BadZipFile--gap-before-central-directory.dduf", build(base_entries(), gap_before_cd=b"\0" * 16)
    yield "BadZipFile--gap-after-central-directory.dduf", build(base_entries(), gap_after_cd=b"\0" * 16)
    # Two central records, one local header: the second name's local header says the first name.
    entries = base_entries() + [Entry("vae/config2.json", VAE_CONFIG, write_local=False,
                                      header_offset=lambda offs, data_offs: offs[VAE_CFG])]
    yield "BadZipFile--overlapping-entries-same-header.dduf", build(entries)
    # A complete entry (local header and data) hidden inside another entry's data.
    inner = Entry("vae/config2.json", b"{}")
    entries = base_entries() + [Entry("notes.txt", inner.local_block()),
                                Entry("vae/config2.json", b"{}", write_local=False,
                                      header_offset=lambda offs, data_offs: data_offs[4])]
    yield "BadZipFile--overlapping-entries-nested.dduf", build(entries)
    yield "BadZipFile--local-name-differs.dduf", build(with_entry(VAE_CFG, local_name=b"vae/config.jsoN"))
    yield "BadZipFile--local-signature-destroyed.dduf", build(with_entry(VAE_CFG, local_sig=0x04034B00))
    yield "BadZipFile--local-crc-differs.dduf", build(with_entry(VAE_CFG, local_crc=zlib.crc32(VAE_CONFIG) ^ 1))
    yield "BadZipFile--local-flags-differ.dduf", build(with_entry(VAE_CFG, local_flags=0x800))
    yield "BadZipFile--local-method-differs.dduf", build(with_entry(VAE_CFG, local_method=8))
    yield "BadZipFile--size-into-central-directory.dduf", build(with_entry(
        VAE_W, data=safetensors_bytes(), usize=len(safetensors_bytes()) + 10, csize=len(safetensors_bytes()) + 10))
    yield "BadZipFile--size-past-eof.dduf", build(with_entry(SCHED, usize=0x7FFF0000, csize=0x7FFF0000))
    yield "BadZipFile--stored-sizes-differ.dduf", build(with_entry(SCHED, central_csize=len(SCHEDULER) + 1))
    yield "BadZipFile--eocd-count-too-small.dduf", build(base_entries(), eocd={"count_disk": 1, "count": 1})
    yield "BadZipFile--eocd-count-too-large.dduf", build(base_entries(), eocd={"count_disk": 5, "count": 5})
    yield "BadZipFile--eocd-disk-count-differs.dduf", build(base_entries(), eocd={"count_disk": 3})
    yield "BadZipFile--comment-with-eocd-signature.dduf", build(
        base_entries(), comment=b"comment PK\x05\x06 that looks like another end record, padded out to 60 bytes")
    # CPython's zipfile and Info-ZIP ignore a local-header signature in the comment; a reader that scans
    # for local headers (recovery, streaming from an offset) would find a fake entry there.
    yield "BadZipFile--comment-with-local-header-signature.dduf", build(
        base_entries(), comment=b"comment PK\x03\x04 that looks like the start of another entry")
    # The end record claims a 10-byte comment that is not there.
    yield "BadZipFile--eocd-comment-length-past-eof.dduf", base[:-2] + struct.pack("<H", 10)
    yield "BadZipFile--nul-in-name.dduf", build(base_entries() + [Entry(b"vae/extra.json\x00evil.bin", b"{}")])
    yield "BadZipFile--non-ascii-name-without-utf8-flag.dduf", build(base_entries() + [Entry("vae/caf\u00e9.txt", b"x")])
    yield "BadZipFile--invalid-utf8-name.dduf", build(base_entries() + [Entry(b"vae/caf\xe9.txt", b"x", flags=0x800)])
    yield "BadZipFile--zip64-extra-size-central.dduf", build(with_entry(SCHED, central_extra=struct.pack("<HHQ", 1, 8, 0)))
    yield "BadZipFile--zip64-extra-size-local.dduf", build(with_entry(
        SCHED, local_extra=struct.pack("<HHQQ", 1, 24, len(SCHEDULER), len(SCHEDULER))))
    yield "BadZipFile--local-saturated-sizes-without-zip64.dduf", build(with_entry(
        SCHED, local_zip64=False, local_extra=b""))
    yield "BadZipFile--zip64-eocd-disagrees.dduf", build(base_entries(), zip64={"count_disk": 5, "count": 5})
    yield "BadZipFile--zip64-locator-offset-wrong.dduf", build(base_entries(), zip64={"locator_offset": 0})
    yield "ZipUnsupported--encryption-bit.dduf", build(with_entry(VAE_CFG, flags=0x1))
    yield "ZipUnsupported--data-descriptor-bit.dduf", build(with_entry(VAE_CFG, flags=0x8))
    yield "ZipUnsupported--multi-disk-eocd.dduf", build(base_entries(), eocd={"disk": 1, "cd_disk": 1})
    yield "ZipUnsupported--multi-disk-entry.dduf", build(with_entry(SCHED, disk_start=1))
    yield "ZipUnsupported--version-needed-64.dduf", build(with_entry(VAE_CFG, version_needed=64))
    yield "ZipUnsupported--unicode-path-extra.dduf", build(with_entry(
        VAE_CFG, central_extra=struct.pack("<HHB", 0x7075, 5 + len("vae/other.json"), 1)
        + struct.pack("<I", zlib.crc32(b"vae/config.json")) + b"vae/other.json"))

    # ---- deep checks: Reader::verify ------------------------------------------------------------
    yield "CrcMismatch--wrong-crc.dduf", build(with_entry(VAE_CFG, crc=zlib.crc32(VAE_CONFIG) ^ 0xDEADBEEF))
    yield "InvalidHeaderLength--verify-safetensors-header-length.dduf", build(
        with_entry(VAE_W, data=safetensors_bytes(header_len_delta=1000)))
    yield "DDUFCorruptedFile--verify-invalid-json-entry.dduf", build(with_entry(VAE_CFG, data=VAE_CONFIG[:-1]))


def generate():
    made = {}
    for name, data in corpus():
        if name in made:
            raise SystemExit("make_corpus: two cases named " + name)
        made[name] = data
    return made


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = args[0]
    made = generate()
    if check:
        problems = []
        skipped = 0
        present = {f for f in os.listdir(out_dir) if f.endswith(".dduf")} if os.path.isdir(out_dir) else set()
        for name, data in made.items():
            if data is None:
                print("skipped (tool missing): %s" % name)
                skipped += 1
                continue
            path = os.path.join(out_dir, name)
            if name not in present:
                problems.append("missing: " + name)
            else:
                with open(path, "rb") as f:
                    if f.read() != data:
                        problems.append("differs: " + name)
        for name in sorted(present - set(made)):
            problems.append("not generated by make_corpus.py: " + name)
        for p in problems:
            print(p, file=sys.stderr)
        if problems:
            print("corpus out of date: run tests/dduf/make_corpus.py tests/dduf/corpus", file=sys.stderr)
            return 1
        print("corpus up to date: %d files" % (len(made) - skipped))
        return 77 if skipped else 0
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):
        if f.endswith(".dduf") and f not in made:
            os.remove(os.path.join(out_dir, f))
    for name, data in made.items():
        if data is None:
            print("not written (tool missing): %s" % name, file=sys.stderr)
            continue
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
    print("wrote %d files to %s" % (sum(d is not None for d in made.values()), out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
