#!/usr/bin/env python3
"""Generates the GGUF conformance corpus: small files, each breaking exactly one reader rule.

Every file is named `<ExpectedKind>--<rule>.gguf`, where ExpectedKind is the safeweights ErrorKind the
reader must report, or `valid` for files that must open. Each broken file starts from the same small
valid file (what ggml's and gguf-py's writers lay out: version 3, tensors in order, each padded to the
alignment) and changes one thing. docs/GGUF.md lists the rules.

Usage:
    make_corpus.py OUT_DIR            write the corpus (stale *.gguf files in OUT_DIR are removed)
    make_corpus.py --check OUT_DIR    regenerate in memory and compare with OUT_DIR

Standard library only.
"""

import os
import struct
import sys

UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
SCALAR = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i", FLOAT32: "<f",
          BOOL: "<B", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}
F32, F16, Q8_0, Q4_K = 0, 1, 8, 12
TYPE_SIZE = {F32: (1, 4), F16: (1, 2), Q8_0: (32, 34), Q4_K: (256, 144)}  # (block elements, block bytes)


def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == STRING:
        return gstr(v)
    if vtype == ARRAY:
        elem, items = v
        return struct.pack("<IQ", elem, len(items)) + b"".join(value(elem, x) for x in items)
    return struct.pack(SCALAR[vtype], v)


def kv(key, vtype, v):
    return gstr(key) + struct.pack("<I", vtype) + value(vtype, v)


def nbytes(ttype, ne):
    block, size = TYPE_SIZE[ttype]
    n = 1
    for d in ne:
        n *= d
    return n // block * size


def pad(n, a):
    return -n % a


def build(kvs=None, tensors=None, version=3, alignment=32, offsets=None, magic=b"GGUF", counts=None,
          final_pad=True, raw_kvs=None, raw_infos=None):
    """kvs: (key, type, value); tensors: (name, ne, type); the data is a deterministic byte pattern."""
    kvs = [] if kvs is None else kvs
    tensors = [] if tensors is None else tensors
    sizes = [nbytes(t, ne) if t in TYPE_SIZE else 4 for _, ne, t in tensors]
    running, auto = 0, []
    for s in sizes:
        auto.append(running)
        running += s + pad(s, alignment)
    offsets = auto if offsets is None else offsets
    kv_bytes = b"".join(kv(*e) for e in kvs) if raw_kvs is None else raw_kvs
    infos = b""
    for (name, ne, ttype), off in zip(tensors, offsets):
        infos += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        infos += struct.pack("<IQ", ttype, off)
    if raw_infos is not None:
        infos = raw_infos
    n_tensors, n_kv = counts if counts is not None else (len(tensors), len(kvs))
    head = magic + struct.pack("<IQQ", version, n_tensors, n_kv) + kv_bytes + infos
    out = head + b"\0" * pad(len(head), alignment)
    if sum(sizes) > 2**20:  # a declared size no file here holds: the reader refuses it before the data
        return out
    for i, s in enumerate(sizes):
        out += bytes((7 * i + j) % 251 for j in range(s))
        if final_pad or i + 1 < len(sizes):
            out += b"\0" * pad(s, alignment)
    return out


BASE_KVS = [("general.architecture", STRING, "llama"), ("general.name", STRING, "tiny"),
            ("llama.block_count", UINT32, 2)]
BASE_TENSORS = [("token_embd.weight", [4, 3], F32), ("blk.0.attn_q.weight", [32, 2], Q8_0)]


def base(**kw):
    kw.setdefault("kvs", BASE_KVS)
    kw.setdefault("tensors", BASE_TENSORS)
    return build(**kw)


ALL_TYPES = [
    ("t.u8", UINT8, 255), ("t.i8", INT8, -128), ("t.u16", UINT16, 65535), ("t.i16", INT16, -32768),
    ("t.u32", UINT32, 4294967295), ("t.i32", INT32, -2147483648), ("t.f32", FLOAT32, 0.1),
    ("t.bool", BOOL, 1), ("t.str", STRING, "h\u00e9llo\n\x1b[31m"), ("t.u64", UINT64, 2**64 - 1),
    ("t.i64", INT64, -2**63), ("t.f64", FLOAT64, 1e-300),
    ("t.arr_str", ARRAY, (STRING, ["a", "", "\u00fc", "tok"])), ("t.arr_i32", ARRAY, (INT32, [1, -2, 3])),
    ("t.arr_empty", ARRAY, (FLOAT32, [])),
]


def corpus():
    files = {}

    def add(name, blob):
        assert name not in files
        files[name + ".gguf"] = blob

    # ---- valid files
    add("valid--v3", base())
    add("valid--v2", base(version=2))
    add("valid--no-tensors", build(kvs=BASE_KVS, tensors=[]))
    add("valid--no-tensors-no-padding", build(kvs=BASE_KVS, tensors=[])[:len(b"GGUF") + 20 + len(b"".join(kv(*e) for e in BASE_KVS))])
    add("valid--alignment-64", base(kvs=[("general.alignment", UINT32, 64)] + BASE_KVS, alignment=64))
    add("valid--alignment-1", base(kvs=[("general.alignment", UINT32, 1)] + BASE_KVS, alignment=1))
    add("valid--all-value-types", base(kvs=ALL_TYPES))
    add("valid--q4_k", base(tensors=[("blk.0.ffn_down.weight", [256, 2], Q4_K), ("norm", [8], F16)]))
    add("valid--scalar-tensor", base(tensors=[("scalar", [], F32)]))
    add("valid--empty-tensor", base(tensors=[("empty", [0, 3], F32), ("after", [2], F32)]))
    add("valid--no-final-padding", base(final_pad=False))

    # ---- header
    add("InvalidGguf--bad-magic", base(magic=b"GGUG"))
    add("NotSupported--big-endian-magic", base(magic=b"FUGG"))
    add("NotSupported--big-endian-version", base(version=3 << 24))
    add("InvalidGguf--version-0", base(version=0))
    add("NotSupported--version-1", base(version=1))
    add("NotSupported--version-4", base(version=4))
    add("InvalidGguf--truncated-counts", base()[:12])
    add("InvalidGguf--kv-count-past-end", base(counts=(2, 2**40)))
    add("InvalidGguf--tensor-count-past-end", base(counts=(2**40, 3)))

    # ---- key/value pairs
    add("InvalidGguf--empty-key", base(kvs=[("", UINT8, 1)] + BASE_KVS))
    add("InvalidGguf--key-over-65535-bytes", base(kvs=[("k" * 65536, UINT8, 1)]))
    add("InvalidGguf--duplicate-key", base(kvs=BASE_KVS + [("general.name", STRING, "again")]))
    add("InvalidGguf--unknown-value-type", base(raw_kvs=gstr("a.b") + struct.pack("<IB", 13, 0)))
    add("InvalidGguf--nested-array",
        base(raw_kvs=gstr("a.b") + struct.pack("<IIQ", ARRAY, ARRAY, 1) + struct.pack("<IQ", UINT8, 1) + b"\1"))
    add("InvalidGguf--unknown-array-element-type", base(raw_kvs=gstr("a.b") + struct.pack("<IIQ", ARRAY, 13, 0)))
    add("InvalidGguf--array-past-end", base(raw_kvs=gstr("a.b") + struct.pack("<IIQ", ARRAY, UINT32, 2**20)))
    add("InvalidGguf--string-array-past-end", base(raw_kvs=gstr("a.b") + struct.pack("<IIQ", ARRAY, STRING, 2**20)))
    add("InvalidGguf--array-over-1Gi-elements", base(raw_kvs=gstr("a.b") + struct.pack("<IIQ", ARRAY, UINT8, 2**30 + 1)))
    add("InvalidGguf--string-past-end", base(raw_kvs=gstr("a.b") + struct.pack("<IQ", STRING, 2**20) + b"abc"))
    add("InvalidGguf--string-over-1-GiB", base(raw_kvs=gstr("a.b") + struct.pack("<IQ", STRING, 2**30 + 1)))
    add("InvalidGguf--key-past-end", base(raw_kvs=struct.pack("<Q", 2**20) + b"general"))
    add("InvalidGguf--bool-not-0-or-1", base(kvs=BASE_KVS + [("a.flag", BOOL, 2)]))
    add("InvalidGguf--alignment-not-uint32", base(kvs=[("general.alignment", UINT64, 32)] + BASE_KVS))
    add("InvalidGguf--alignment-not-power-of-two", base(kvs=[("general.alignment", UINT32, 48)] + BASE_KVS))
    add("InvalidGguf--alignment-zero", base(kvs=[("general.alignment", UINT32, 0)] + BASE_KVS))

    # ---- tensor infos
    add("InvalidGguf--tensor-name-over-63-bytes", base(tensors=[("n" * 64, [4], F32)]))
    add("InvalidGguf--duplicate-tensor-name", base(tensors=[("w", [4], F32), ("w", [4], F32)]))
    add("InvalidGguf--more-than-4-dimensions", base(tensors=[("w", [1, 1, 1, 1, 2], F32)]))
    add("InvalidGguf--negative-dimension", base(tensors=[("w", [2**63, 1], F32)]))
    add("InvalidGguf--unknown-type-id", base(tensors=[("w", [4], 43)]))
    add("InvalidGguf--removed-type-q4_2", base(tensors=[("w", [32], 4)]))
    add("InvalidGguf--removed-type-q4_0_4_4", base(tensors=[("w", [32], 31)]))
    add("InvalidBlockShape--q8_0-innermost-not-multiple-of-32", base(tensors=[("w", [16, 2], Q8_0)]))
    add("ValidationOverflow--element-count-wraps", base(tensors=[("w", [2**32, 2**32, 4], F32)], offsets=[0]))
    add("InvalidGguf--truncated-tensor-info", base()[:len(base(tensors=[])) - 16])

    # ---- ggml's element count: ne multiplied from ne[0] (innermost), refused where it passes 2^63 - 1,
    # even when a later dimension is 0; a 0 before the huge dimensions makes the tensor empty
    add("valid--empty-tensor-zero-then-huge-dims", base(tensors=[("w", [0, 2**62, 2**62], F32), ("after", [2], F32)]))
    add("valid--empty-tensor-zero-between-huge-dims", base(tensors=[("w", [2**62, 0, 2**62, 2**62], F32)]))
    add("InvalidBlockShape--empty-q8_0-innermost-not-multiple-of-32", base(tensors=[("w", [16, 0], Q8_0)]))
    add("valid--empty-q8_0-huge-innermost", base(tensors=[("w", [2**62, 0, 2**62], Q8_0)]))
    add("valid--count-just-below-int64-max", base(tensors=[("w", [3, 3074457345618258602, 0], F32)]))
    add("ValidationOverflow--empty-tensor-huge-dims-before-the-zero", base(tensors=[("w", [2**62, 2**62, 0], F32)]))
    add("ValidationOverflow--empty-tensor-overflow-at-ne2", base(tensors=[("w", [2**21, 2**21, 2**21, 0], F32)]))
    add("ValidationOverflow--count-just-above-int64-max", base(tensors=[("w", [2, 2**62, 0], F32)]))

    # ---- NUL and UTF-8 in names: ggml ends a tensor name and a key at the first NUL, gguf-py refuses
    # names and keys that are not UTF-8
    add("valid--tensor-name-with-nul", base(tensors=[(b"token_embd.weight\0junk", [4, 3], F32), BASE_TENSORS[1]]))
    add("InvalidGguf--duplicate-tensor-name-after-nul", base(tensors=[(b"w\0a", [4], F32), (b"w\0b", [4], F32)]))
    add("InvalidGguf--duplicate-tensor-name-nul-and-plain", base(tensors=[("w", [4], F32), (b"w\0b", [4], F32)]))
    add("valid--alignment-key-with-nul",
        base(kvs=[(b"general.alignment\0x", UINT32, 64)] + BASE_KVS, tensors=[("a", [4], F32), ("b", [4], F32)], alignment=64))
    add("InvalidGguf--alignment-key-with-nul-not-power-of-two", base(kvs=[(b"general.alignment\0x", UINT32, 48)] + BASE_KVS))
    add("InvalidGguf--duplicate-key-after-nul", base(kvs=BASE_KVS + [(b"a.k\0x", UINT8, 1), (b"a.k\0y", UINT8, 2)]))
    add("InvalidGguf--empty-key-after-nul", base(kvs=BASE_KVS + [(b"\0a.k", UINT8, 1)]))
    add("InvalidGguf--tensor-name-not-utf8", base(tensors=[BASE_TENSORS[0], (b"blk.0.attn_q.weight\xff", [32, 2], Q8_0)]))
    add("InvalidGguf--tensor-name-not-utf8-after-nul", base(tensors=[(b"w\0\xc3", [4], F32)]))
    add("InvalidGguf--key-not-utf8", base(kvs=BASE_KVS + [(b"a.\xed\xa0\x80", UINT8, 1)]))

    # ---- offsets and data
    s0 = nbytes(F32, [4, 3])
    add("InvalidGguf--offset-misaligned", base(offsets=[1, 64]))
    add("InvalidGguf--offset-gap", base(offsets=[0, 96]))
    add("InvalidGguf--offset-overlap", base(offsets=[0, 0]))
    add("InvalidGguf--offsets-reordered", base(offsets=[64, 0]))
    add("InvalidGguf--offset-past-padding", base(offsets=[0, s0]))
    add("InvalidGguf--tensor-data-past-end", base()[:-40])

    split_corpus(add)
    return files


def split_keys(no, count, tensors, types=(UINT16, UINT16, INT32)):
    # in llama.cpp's gguf-split order
    return [("split.no", types[0], no), ("split.tensors.count", types[2], tensors), ("split.count", types[1], count)]


def split_set(add, name, parts, count=None, total=None, kvs=None, types=None):
    """parts: per file, its tensors (and the keys after the split keys); llama.cpp's gguf-split layout:
    file 1 holds the model's keys then the split keys, the others the split keys only."""
    count = len(parts) if count is None else count
    total = sum(len(p) for p in parts) if total is None else total
    for i, tensors in enumerate(parts):
        keys = (BASE_KVS if i == 0 else []) + split_keys(i, count, total, *([types] if types else []))
        if kvs and i in kvs:
            keys = kvs[i](keys)
        add(f"{name}-{i + 1:05d}-of-{len(parts):05d}" if name else None, build(kvs=keys, tensors=tensors))


def split_corpus(add):
    """Split models (llama.cpp's gguf-split): one set of files per rule, named PREFIX-0000K-of-0000N.gguf
    with the expected kind in PREFIX; every file of a set must give that kind (or open, for valid)."""
    t1, t2 = [BASE_TENSORS[0]], [BASE_TENSORS[1]]
    split_set(add, "valid--split", [t1, t2])
    split_set(add, "valid--split-three-files", [t1, t2, [("output.weight", [8], F32)]])
    add("valid--split-merged-count-0", base(kvs=BASE_KVS + [("split.no", UINT16, 0), ("split.tensors.count", INT32, 2),
                                                              ("split.count", UINT16, 0)]))
    replace = lambda key, vtype, v: lambda keys: [(k, vtype, v) if k == key else (k, t, x) for k, t, x in keys]
    drop = lambda key: lambda keys: [e for e in keys if e[0] != key]
    split_set(add, "InvalidGguf--split-count-not-uint16", [t1, t2], kvs={0: replace("split.count", UINT32, 2)})
    split_set(add, "InvalidGguf--split-no-not-uint16", [t1, t2], kvs={1: replace("split.no", INT32, 1)})
    split_set(add, "InvalidGguf--split-tensors-count-not-int32", [t1, t2], kvs={0: replace("split.tensors.count", UINT32, 2)})
    split_set(add, "InvalidGguf--split-no-missing", [t1, t2], kvs={0: drop("split.no")})
    split_set(add, "InvalidGguf--split-tensors-count-missing", [t1, t2], kvs={1: drop("split.tensors.count")})
    split_set(add, "InvalidGguf--split-no-not-its-name", [t1, t2], kvs={1: replace("split.no", UINT16, 0)})
    split_set(add, "InvalidGguf--split-count-differs", [t1, t2], kvs={1: replace("split.count", UINT16, 3)})
    split_set(add, "InvalidGguf--split-tensors-count-differs", [t1, t2], kvs={1: replace("split.tensors.count", INT32, 3)})
    split_set(add, "InvalidGguf--split-tensors-count-not-the-sum", [t1, t2], total=3)
    split_set(add, "InvalidGguf--split-duplicate-tensor-across-files", [t1, t1])
    split_set(add, "InvalidGguf--split-metadata-in-other-file", [t1, t2],
              kvs={1: lambda keys: keys + [("general.name", STRING, "again")]})
    # file 3 of 3 is missing: opening file 1 or 2 names it
    split_set(lambda name, blob: add(name.replace("-of-00002", "-of-00003"), blob) if name else None,
              "FileNotFound--split-file-missing", [t1, t2], count=3)
    # a file that is not named as part K of N: its siblings cannot be found
    add("InvalidGguf--split-not-named-as-a-split", build(kvs=BASE_KVS + split_keys(0, 2, 2), tensors=t1))
    # a sibling that breaks a single-file rule: opening file 1 reports file 2's error
    bad2 = build(kvs=split_keys(1, 2, 2), tensors=t2)
    add("InvalidGguf--split-other-file-truncated-00001-of-00002", build(kvs=BASE_KVS + split_keys(0, 2, 2), tensors=t1))
    add("InvalidGguf--split-other-file-truncated-00002-of-00002", bad2[:-40])


def main(argv):
    check = argv[1:2] == ["--check"]
    out_dir = argv[2] if check else argv[1]
    files = corpus()
    if check:
        present = {f for f in os.listdir(out_dir) if f.endswith(".gguf")}
        stale = sorted(present - set(files))
        missing = sorted(set(files) - present)
        differ = sorted(f for f in set(files) & present if open(os.path.join(out_dir, f), "rb").read() != files[f])
        for label, names in (("stale", stale), ("missing", missing), ("differs", differ)):
            for n in names:
                print(f"{label}: {n}")
        return 1 if stale or missing or differ else 0
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):
        if f.endswith(".gguf") and f not in files:
            os.remove(os.path.join(out_dir, f))
    for name, blob in files.items():
        with open(os.path.join(out_dir, name), "wb") as fh:
            fh.write(blob)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
