#!/usr/bin/env python3
"""Generates tests/corpus/safetensors/: one small file per reader rule.

Each file is named `<ExpectedKind>--<short-rule>.safetensors`, where ExpectedKind is the
safeweights::ErrorKind name that Header::parse must report (default ReadOptions), or `valid` for
files that must parse. `UnknownField--*` files and `valid--unknown-*` files parse by default and fail
with UnknownField under ReadOptions{.reject_unknown_fields = true}.

Usage:
  make_corpus.py [OUT_DIR]        write the files (default: the folder next to this script)
  make_corpus.py --check [DIR]    exit 1 unless DIR holds exactly what this script would write

Only the Python standard library is used. The expected kinds follow the reference rules in
/work/shared/reference/safetensors.md §1.2-§1.6 (plus our stricter rules).
"""

import json
import os
import struct
import sys

DEFAULT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "safetensors")


def le64(n):
    return struct.pack("<Q", n)


def st(header, data=b"", n=None):
    """8-byte N + header bytes + data. `header` is str (UTF-8 encoded) or bytes."""
    if isinstance(header, str):
        header = header.encode("utf-8")
    return le64(len(header) if n is None else n) + header + data


def ent(dtype, shape, begin, end):
    return '{"dtype":"%s","shape":[%s],"data_offsets":[%s,%s]}' % (dtype, shape, begin, end)


def obj(*pairs):
    return "{" + ",".join('"%s":%s' % (k, v) for k, v in pairs) + "}"


VALID_ONE = obj(("t", ent("F32", "2", 0, 8)))
ZEROS8 = bytes(8)

# Reference writer order (dtype descending), with the element bits of each dtype.
DTYPES = [("U64", 64), ("I64", 64), ("F64", 64), ("C64", 64), ("F32", 32), ("U32", 32), ("I32", 32),
          ("BF16", 16), ("F16", 16), ("U16", 16), ("I16", 16), ("F8_E5M2FNUZ", 8), ("F8_E4M3FNUZ", 8),
          ("F8_E8M0", 8), ("F8_E4M3", 8), ("F8_E5M2", 8), ("I8", 8), ("U8", 8), ("F6_E3M2", 6),
          ("F6_E2M3", 6), ("F4", 4), ("BOOL", 8)]


def writer_style(tensors, metadata=None):
    """A file laid out the way the reference writer lays it out: space padding to a multiple of 8."""
    parts = []
    if metadata is not None:
        parts.append('"__metadata__":' + json.dumps(metadata, separators=(",", ":"), sort_keys=True,
                                                     ensure_ascii=False))
    data = b""
    for name, dtype, shape, payload in tensors:
        parts.append('%s:{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}' % (
            json.dumps(name, ensure_ascii=False), dtype, json.dumps(shape, separators=(",", ":")), len(data),
            len(data) + len(payload)))
        data += payload
    header = ("{" + ",".join(parts) + "}").encode("utf-8")
    header += b" " * ((8 - len(header) % 8) % 8)
    return st(header, data)


def corpus():
    files = {}

    def add(kind, rule, content):
        name = "%s--%s.safetensors" % (kind, rule)
        assert name not in files, name
        files[name] = content

    # §1.2 steps 1-4: length prefix.
    add("HeaderTooSmall", "empty-file", b"")
    add("HeaderTooSmall", "7-bytes", b"\x08\x00\x00\x00\x00\x00\x00")
    add("HeaderTooLarge", "reference-vector", b"<\x00\x00\x00\x00\xff\xff\xff")
    add("HeaderTooLarge", "cap-plus-one-short-file", st("{}", n=100_000_001))
    add("HeaderTooLarge", "u64-max", st("{}", n=2**64 - 1))
    add("InvalidHeaderLength", "n-past-eof", st(VALID_ONE, ZEROS8, n=1000))
    add("InvalidHeaderLength", "n-equals-cap", st("{}", n=100_000_000))
    add("InvalidHeaderLength", "n-one-past-eof", st("{}", n=3))

    # §1.2 step 5: UTF-8.
    add("InvalidHeader", "non-utf8-ff", st(b"\xff"))
    add("InvalidHeader", "encoded-surrogate-in-name", st(b'{"\xed\xa0\x80":' + ent("F32", "2", 0, 8).encode() + b"}", ZEROS8))
    add("InvalidHeader", "overlong-encoding", st(b'{"\xc0\xaf":' + ent("F32", "2", 0, 8).encode() + b"}", ZEROS8))
    add("InvalidHeader", "invalid-utf8-in-padding", st(b"{}  \xfe "))

    # §1.2 step 6 / §1.3: JSON and schema.
    ihd = "InvalidHeaderDeserialization"
    add(ihd, "n-zero", st(b""))
    add(ihd, "open-brace", st("{"))
    add(ihd, "utf8-bom", st(b"\xef\xbb\xbf{}"))
    add(ihd, "trailing-nul", st(b"{}\x00"))
    add(ihd, "nul-padding", st(b"{}\x00\x00\x00\x00\x00\x00"))
    add(ihd, "top-level-array", st("[]"))
    add(ihd, "trailing-comma", st('{"t":' + ent("F32", "2", 0, 8) + ",}", ZEROS8))
    add(ihd, "comment", st("{/* c */}"))
    add(ihd, "metadata-number-value", st('{"__metadata__":{"epoch":3}}'))
    add(ihd, "metadata-nested-object", st('{"__metadata__":{"a":{"b":"c"}}}'))
    add(ihd, "metadata-duplicate", st('{"__metadata__":{},"__metadata__":{}}'))
    add(ihd, "tensor-named-metadata", st(obj(("__metadata__", ent("F32", "1", 0, 4))), bytes(4)))
    add(ihd, "entry-duplicate-field", st(obj(("t", '{"dtype":"F32","shape":[2],"shape":[2],"data_offsets":[0,8]}')), ZEROS8))
    add(ihd, "missing-dtype", st(obj(("t", '{"shape":[2],"data_offsets":[0,8]}')), ZEROS8))
    add(ihd, "missing-shape", st(obj(("t", '{"dtype":"F32","data_offsets":[0,8]}')), ZEROS8))
    add(ihd, "missing-data-offsets", st(obj(("t", '{"dtype":"F32","shape":[2]}')), ZEROS8))
    add(ihd, "unknown-dtype", st(obj(("t", ent("F128", "2", 0, 8))), ZEROS8))
    add(ihd, "lowercase-dtype", st(obj(("t", ent("f32", "2", 0, 8))), ZEROS8))
    add(ihd, "negative-dim", st(obj(("t", ent("F32", "-1", 0, 8))), ZEROS8))
    add(ihd, "minus-zero-offset", st(obj(("t", ent("F32", "2", "-0", 8))), ZEROS8))
    add(ihd, "float-dim", st(obj(("t", ent("F32", "2.0", 0, 8))), ZEROS8))
    add(ihd, "exponent-offset", st(obj(("t", ent("F32", "2", 0, "8e0"))), ZEROS8))
    add(ihd, "leading-zero", st(obj(("t", ent("F32", "02", 0, 8))), ZEROS8))
    add(ihd, "u64-overflow", st(obj(("t", ent("F32", "18446744073709551616", 0, 8))), ZEROS8))
    add(ihd, "offsets-length-1", st(obj(("t", '{"dtype":"F32","shape":[2],"data_offsets":[8]}')), ZEROS8))
    add(ihd, "offsets-length-3", st(obj(("t", '{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}')), ZEROS8))
    add(ihd, "raw-control-char", st(b'{"a\x01b":' + ent("F32", "2", 0, 8).encode() + b"}", ZEROS8))
    add(ihd, "lone-surrogate", st(obj(("\\ud800", ent("F32", "2", 0, 8))), ZEROS8))
    add(ihd, "deep-nesting-unknown-field",
        st(obj(("t", '{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":%s%s}' % ("[" * 200, "]" * 200))), ZEROS8))
    add(ihd, "depth-128", st(obj(("t", '{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":%s%s}' % ("[" * 126, "]" * 126))), ZEROS8))
    add(ihd, "array-entry-too-short", st(obj(("t", '["F32",[2]]')), ZEROS8))

    # §1.5: per-tensor validation.
    add("InvalidOffset", "json-attack", st("{" + ",".join('"w%d":%s' % (i, ent("F32", "2,2", 0, 16)) for i in range(10)) + "}", bytes(16)))
    add("InvalidOffset", "hole", st(obj(("a", ent("F32", "1", 0, 4)), ("b", ent("F32", "1", 8, 12))), bytes(12)))
    add("InvalidOffset", "overlap", st(obj(("a", ent("F32", "2", 0, 8)), ("b", ent("F32", "2", 4, 12))), bytes(12)))
    add("InvalidOffset", "not-starting-at-zero", st(obj(("a", ent("F32", "1", 4, 8))), ZEROS8))
    add("InvalidOffset", "end-before-begin", st(obj(("a", ent("F32", "1", 0, 4)), ("b", ent("F32", "1", 4, 2))), bytes(4)))
    add("InvalidOffset", "duplicate-name-last-wins-hole", st(obj(("a", ent("F32", "1", 0, 4)), ("a", ent("F32", "1", 4, 8))), ZEROS8))
    add("TensorInvalidInfo", "i32-2x2-4-bytes", st(obj(("t", ent("I32", "2,2", 0, 4))), bytes(4)))
    add("TensorInvalidInfo", "rank0-wrong-size", st(obj(("t", ent("F64", "", 0, 4))), bytes(4)))
    add("TensorInvalidInfo", "zero-sized-with-bytes", st(obj(("t", ent("F32", "2,0", 0, 4))), bytes(4)))
    add("ValidationOverflow", "2-x-2pow64m2", st(obj(("t", ent("F32", "2,18446744073709551614", 0, 8))), ZEROS8))
    add("ValidationOverflow", "2-x-2pow63m1", st(obj(("t", ent("F32", "2,9223372036854775807", 0, 8))), ZEROS8))
    add("MisalignedSlice", "f4-1x3", st(obj(("t", ent("F4", "1,3", 0, 2))), bytes(2)))
    add("MisalignedSlice", "f6-2-elements", st(obj(("t", ent("F6_E2M3", "2", 0, 2))), bytes(2)))

    # §1.2 step 9.
    add("MetadataIncompleteBuffer", "trailing-byte", st(VALID_ONE, bytes(9)))
    add("MetadataIncompleteBuffer", "missing-2-bytes", st(VALID_ONE, bytes(6)))
    add("MetadataIncompleteBuffer", "polyglot-zip-trailer", st(VALID_ONE, ZEROS8 + b"PK\x05\x06" + bytes(18)))

    # Our stricter rules.
    add("DuplicateKey", "tensor-name", st(obj(("a", ent("F32", "1", 0, 4)), ("a", ent("F32", "1", 0, 4))), bytes(4)))
    add("DuplicateKey", "tensor-name-by-escape", st(obj(("a", ent("F32", "1", 0, 4)), ("\\u0061", ent("F32", "1", 0, 4))), bytes(4)))
    add("DuplicateKey", "metadata-key", st('{"__metadata__":{"k":"1","k":"2"}}'))
    add("NonCanonicalEntry", "array-entry", st(obj(("t", '["F32",[2],[0,8]]')), ZEROS8))
    add("NonCanonicalEntry", "object-dtype", st(obj(("t", '{"dtype":{"F32":null},"shape":[2],"data_offsets":[0,8]}')), ZEROS8))
    add("UnknownField", "extra-field", st(obj(("t", '{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":"x"}')), ZEROS8))

    # Valid files.
    add("valid", "empty-reference-writer", st(b"{}      "))
    add("valid", "whitespace-padded-both-sides", st(b"\x09\x0a{}\x0d\x20"))
    add("valid", "metadata-null", st('{"__metadata__":null}'))
    add("valid", "metadata-empty", st('{"__metadata__":{}}'))
    add("valid", "metadata-only", writer_style([], {"framework": "pt"}))
    add("valid", "reference-i32-2x2", st(b'{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}    ', bytes(16)))
    add("valid", "zero-sized", st(obj(("t", ent("F32", "2,0", 0, 0)))))
    add("valid", "multiple-zero-sized", st(obj(("a", ent("F32", "0", 0, 0)), ("b", ent("I8", "3,0", 0, 0)), ("c", ent("U8", "2", 0, 2)), ("d", ent("F16", "0", 2, 2))), bytes(2)))
    add("valid", "rank0-scalar", st(obj(("t", ent("I32", "", 0, 4))), b"\x2a\x00\x00\x00"))
    add("valid", "f4-3x2", st(obj(("t", ent("F4", "3,2", 0, 3))), b"\x12\x34\x56"))
    add("valid", "f6-4-elements", st(obj(("t", ent("F6_E3M2", "4", 0, 3))), b"\xff\x00\xff"))
    add("valid", "unpadded-odd-header", st(obj(("t", ent("U8", "3", 0, 3))), b"abc"))
    add("valid", "unicode-and-escaped-names", st('{"\u00e9\u4e2d":%s,"\\ud83d\\ude00":%s,"q\\"\\\\":%s,"":%s}' % (
        ent("U8", "1", 0, 1), ent("U8", "1", 1, 2), ent("U8", "1", 2, 3), ent("U8", "1", 3, 4)), b"\x01\x02\x03\x04"))
    add("valid", "json-order-differs-from-offsets", st(obj(("b", ent("F32", "1", 4, 8)), ("a", ent("F32", "1", 0, 4))), ZEROS8))
    add("valid", "all-dtypes-writer-order", writer_style(
        [("t_" + d, d, [8], bytes(8 * bits // 8)) for d, bits in DTYPES], {"format": "pt"}))
    add("valid", "unknown-field-nested-125", st(obj(("t", '{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":%s%s}' % ("[" * 125, "]" * 125))), ZEROS8))
    add("valid", "zero-dim-before-huge-dim", st(obj(("t", ent("F64", "0,18446744073709551615", 0, 0)))))
    return files


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    out = args[0] if args else DEFAULT_DIR
    files = corpus()
    if check:
        present = sorted(f for f in os.listdir(out) if f.endswith(".safetensors"))
        problems = []
        if present != sorted(files):
            problems.append("file set differs: missing %s, extra %s" % (
                sorted(set(files) - set(present)), sorted(set(present) - set(files))))
        for name, content in files.items():
            path = os.path.join(out, name)
            if os.path.exists(path):
                with open(path, "rb") as f:
                    if f.read() != content:
                        problems.append("content differs: " + name)
        for p in problems:
            print(p)
        if problems:
            print("corpus is out of date; rerun tests/corpus/make_corpus.py")
            return 1
        print("corpus up to date (%d files)" % len(files))
        return 0
    os.makedirs(out, exist_ok=True)
    for old in os.listdir(out):
        if old.endswith(".safetensors") and old not in files:
            os.remove(os.path.join(out, old))
    for name, content in sorted(files.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(content)
    print("wrote %d files to %s" % (len(files), out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
