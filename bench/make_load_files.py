#!/usr/bin/env python3
"""Writes the safetensors files the loading benchmarks use (bench/gpu_loading.sh, docs/PERFORMANCE.md).

  big:   N GiB of BF16 tensors of 4096 x 4096 (32 MiB each), as in shared/reference/gpu-loading.md
  small: 20,000 BF16 tensors of 256 x 128 (64 KiB each, 1.3 GB)

The bytes are pseudo-random (a random 32 MiB block, each tensor a different rotation of it), so that
compression or deduplication anywhere on the path cannot flatter a figure. Written with the reference
layout (header padded to 8 bytes, tensors in name order), without numpy's help for the header.
"""
import argparse
import json
import os
import struct

import numpy as np


def write(path, names, shape, itemsize):
    nbytes = itemsize
    for d in shape:
        nbytes *= d
    header, offset = {}, 0
    for name in names:
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    block = np.random.default_rng(0).integers(0, 256, size=32 << 20, dtype=np.uint8).tobytes()
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        view = memoryview(block + block)  # any window of len(block) bytes is a rotation
        for i in range(len(names)):
            shift = (i * 4099) % len(block)
            left = nbytes
            while left:
                n = min(left, len(block))
                f.write(view[shift:shift + n])
                left -= n
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["big", "small"])
    ap.add_argument("path")
    ap.add_argument("--gib", type=int, default=8, help="size of the big file")
    a = ap.parse_args()
    if a.kind == "big":
        count = a.gib * 32
        write(a.path, [f"layers.{i:04d}.weight" for i in range(count)], (4096, 4096), 2)
    else:
        write(a.path, [f"t.{i:05d}" for i in range(20000)], (256, 128), 2)


if __name__ == "__main__":
    main()
