#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ (standard library only, deterministic).

Run from anywhere: python3 fuzz/make_seeds.py. Existing seeds of the same names are overwritten;
the files are small and checked in, so rerunning it must give no diff.
"""
import json
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

# Index of each dtype in safeweights::Dtype (include/safeweights/dtype.h), for fuzz_slice's first byte.
DTYPE_INDEX = {"BOOL": 0, "F4": 1, "F6_E2M3": 2, "U8": 4, "I16": 11, "F16": 13, "BF16": 14,
               "F32": 17, "C64": 18, "F64": 19}


def st_file(entries, data=b"", pad=True, raw_header=None):
    """A safetensors file: u64 little-endian length, JSON header (space-padded to 8), data."""
    header = raw_header if raw_header is not None else json.dumps(entries, separators=(",", ":")).encode()
    if pad:
        header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + data


def tensor(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def header_seeds():
    s = {}
    s["valid_f32_2x2"] = st_file({"w": tensor("F32", [2, 2], 0, 16)}, bytes(range(16)))
    s["valid_multi"] = st_file(
        {
            "__metadata__": {"format": "pt", "note": "q\"uo\\te\u00e9"},
            "a.weight": tensor("BF16", [2, 3], 0, 12),
            "b": tensor("I8", [4], 12, 16),
            "scalar": tensor("F64", [], 16, 24),
            "mask": tensor("BOOL", [3], 24, 27),
            "empty": tensor("U8", [0, 5], 27, 27),
        },
        bytes((i * 37) & 0xFF for i in range(27)),
    )
    s["valid_f4"] = st_file({"q": tensor("F4", [2, 4], 0, 4)}, b"\x12\x34\x56\x78")
    s["valid_3d_f16"] = st_file({"x": tensor("F16", [2, 2, 3], 0, 24)}, bytes(range(24)))
    s["valid_empty"] = st_file({})
    s["valid_metadata_only"] = st_file({"__metadata__": {"format": "pt"}})
    s["valid_unknown_field"] = st_file({"w": dict(tensor("U8", [2], 0, 2), extra=1)}, b"\x01\x02")
    s["valid_unpadded"] = st_file({"w": tensor("U8", [3], 0, 3)}, b"abc", pad=False)
    # Invalid inputs, one rule each.
    s["bad_too_small"] = b"\x08\x00\x00\x00"
    s["bad_header_too_large"] = struct.pack("<Q", 200_000_000) + b"{}"
    s["bad_length_past_end"] = struct.pack("<Q", 64) + b"{}      "
    s["bad_json"] = st_file(None, raw_header=b'{"w":{"dtype":"F32",')
    s["bad_utf8"] = st_file(None, raw_header=b'{"\xff\xfe":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}') + b"\x00"
    s["bad_hole"] = st_file({"a": tensor("U8", [2], 0, 2), "b": tensor("U8", [2], 3, 5)}, bytes(5))
    s["bad_overlap"] = st_file({"a": tensor("U8", [2], 0, 2), "b": tensor("U8", [2], 1, 3)}, bytes(3))
    s["bad_size_mismatch"] = st_file({"a": tensor("F32", [2], 0, 4)}, bytes(4))
    s["bad_trailing_bytes"] = st_file({"a": tensor("U8", [2], 0, 2)}, bytes(3))
    s["bad_dtype"] = st_file({"a": tensor("F128", [1], 0, 16)}, bytes(16))
    s["bad_duplicate_key"] = st_file(
        None, raw_header=b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                         b'"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}') + b"\x00"
    s["bad_array_entry"] = st_file(None, raw_header=b'{"a":["U8",[1],[0,1]]}') + b"\x00"
    s["bad_metadata_value"] = st_file(None, raw_header=b'{"__metadata__":{"n":1}}')
    s["bad_overflow"] = st_file({"a": tensor("F64", [2**40, 2**40], 0, 8)}, bytes(8))
    s["bad_deep"] = st_file(None, raw_header=b'{"__metadata__":' + b"[" * 200 + b"]" * 200 + b"}")
    s["bad_reversed"] = st_file({"a": tensor("U8", [0], 2, 0)}, bytes(2))
    return s


def slice_seed(dtype, shape, text, base=0):
    return bytes([DTYPE_INDEX[dtype], len(shape) | (base << 3)] + list(shape)) + text.encode()


def slice_seeds():
    specs = [
        ("F32", [3, 4], "0:2, ::-1"), ("F32", [3, 4], ""), ("F32", [3, 4], "1"), ("F32", [3, 4], "-1, 1:3"),
        ("BF16", [2, 3, 4], "..., 0"), ("BF16", [2, 3, 4], "None, :, ::2"), ("U8", [12], "::-3"),
        ("U8", [12], "-100:100:5"), ("F64", [], "..."), ("F64", [], "None"), ("I16", [4, 4], "::0"),
        ("I16", [4, 4], "..., ..."), ("I16", [4, 4], "0, 0, 0"), ("F16", [5, 2], "7"),
        ("F4", [4, 4], "1:3, :"), ("F4", [4, 3], ":, 1"), ("F6_E2M3", [4, 4], "::2"),
        ("BOOL", [6], "9223372036854775807:-9223372036854775808:-1"), ("C64", [2, 2], "newaxis, ..., 1:"),
        ("U8", [0, 3], ":, ::-1"), ("F32", [2, 2, 2, 2], "1, ..., -1"), ("U8", [8], "1:3:4:5"),
        ("U8", [8], "99999999999999999999999:"),
    ]
    out = {}
    for i, (dtype, shape, text) in enumerate(specs):
        out[f"spec_{i:02d}"] = slice_seed(dtype, shape, text, base=i % 32)
    return out


def roundtrip_seeds():
    rng = random.Random(20261122)
    out = {}
    for i, n in enumerate([0, 8, 32, 64, 128, 256, 512, 1024]):
        out[f"random_{i:02d}"] = bytes(rng.getrandbits(8) for _ in range(n))
    return out


def legacy_view_seeds():
    """fuzz_legacy_view reads its input through a FuzzedDataProvider: random bytes of a few lengths."""
    rng = random.Random(20261125)
    return {f"random_{i:02d}": bytes(rng.getrandbits(8) for _ in range(n)) for i, n in enumerate([16, 32, 48, 64, 96, 128, 192, 256, 384, 512])}


def write(target, seeds):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    for name, data in sorted(seeds.items()):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    print(f"{folder}: {len(seeds)} seeds")


def main():
    write("fuzz_safetensors_header", header_seeds())
    write("fuzz_slice", slice_seeds())
    write("fuzz_roundtrip", roundtrip_seeds())
    write("fuzz_legacy_view", legacy_view_seeds())


if __name__ == "__main__":
    main()
