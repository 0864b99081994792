"""Shared helpers for the safeweights pytest suite.

Expected values are never produced by safeweights itself: they come from numpy/torch, from the
standard library (struct, json, zipfile) or from the reference vectors in the format documents.
"""

import json
import os
import struct
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SAFETENSORS_CORPUS = REPO / "tests" / "corpus" / "safetensors"
DDUF_CORPUS = REPO / "tests" / "dduf" / "corpus"

# safetensors dtype code -> little-endian numpy dtype string (numpy-native types only).
NP_CODES = {
    "BOOL": "?", "U8": "u1", "I8": "i1", "U16": "<u2", "I16": "<i2", "F16": "<f2", "U32": "<u4",
    "I32": "<i4", "F32": "<f4", "U64": "<u8", "I64": "<i8", "F64": "<f8", "C64": "<c8",
}


def header_bytes(header_obj):
    """The reference writer's header: compact JSON, space-padded to a multiple of 8, u64 length prefix."""
    text = json.dumps(header_obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def build_file(tensors, metadata=None):
    """A safetensors file built with json+struct only: tensors is a list of (name, code, shape, bytes)
    in the order their data is laid out."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, code, shape, raw in tensors:
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return header_bytes(header) + data


def parse_file(blob):
    """(header dict, data bytes) of a safetensors file, parsed with json+struct only."""
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8 : 8 + n]), blob[8 + n :]


def corpus_files(directory, suffix):
    """(expected kind, path) for every file of a corpus directory, named `<Kind>--<rule><suffix>`."""
    out = []
    for p in sorted(Path(directory).glob("*" + suffix)):
        kind = p.name.split("--", 1)[0]
        out.append(pytest.param(kind, p, id=p.name))
    return out


@pytest.fixture
def rng():
    import numpy as np

    return np.random.default_rng(20240611)
