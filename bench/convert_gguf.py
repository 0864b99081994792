#!/usr/bin/env python3
"""Conversion to GGUF (docs/PERFORMANCE.md, "Conversion"): a large safetensors file converted to GGUF
without a type change against `cp` of the same bytes, same run; the peak RSS of each command (from
wait4's ru_maxrss); and quantization to Q8_0 with one thread and with every core.

    bench/convert_gguf.py --cli build/safeweights [--gib 2] [--dir /tmp] [--runs 3] [--quant-gib 0.5]

Needs numpy (to write the input, in a child). Every command runs with a warm page cache (the input is read once
before timing), so the figures compare the work each does, not the disk.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time


def timed(cmd):
    """Seconds and peak RSS (MiB) of a child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{cmd} failed with status {status}")
    return elapsed, usage.ru_maxrss / 1024


def write_input(path, gib):
    """F32 tensors of 4096 x 4096 (64 MiB, a large model's layer), normal values, written piece by piece."""
    n = max(1, int(gib * (1 << 30) / (64 << 20)))
    header = {f"layers.{i}.weight": {"dtype": "F32", "shape": [4096, 4096], "data_offsets": [i << 26, (i + 1) << 26]}
              for i in range(n)}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    import numpy as np  # in the writing child only: the measuring parent stays small (children inherit its RSS at fork)
    rng = np.random.default_rng(0)
    block = rng.standard_normal(4096 * 4096, dtype=np.float32).tobytes()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for i in range(n):
            f.write(block[i * 4:] + block[:i * 4])  # distinct tensors without generating each


def make_input(path, gib):
    subprocess.run([sys.executable, __file__, "--write", path, str(gib)], check=True)


def warm(path):
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass


def best_of(cmd, runs, cleanup):
    results = []
    for _ in range(runs):
        results.append(timed(cmd))
        for p in cleanup:
            if os.path.exists(p):
                os.remove(p)
    return min(results)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--write":
        return write_input(sys.argv[2], float(sys.argv[3]))
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--quant-gib", type=float, default=0.5)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    work = tempfile.mkdtemp(dir=args.dir)
    try:
        run(args, work)
    finally:
        shutil.rmtree(work)


def run(args, work):
    src = os.path.join(work, "model.safetensors")
    make_input(src, args.gib)
    size = os.path.getsize(src)
    out, copy = os.path.join(work, "out.gguf"), os.path.join(work, "copy.safetensors")
    warm(src)
    print(f"input: {size / (1 << 30):.2f} GiB, F32 tensors of 4096 x 4096; best of {args.runs}; {os.cpu_count()} cores")
    best = {}
    for name, cmd in {
        "cp": ["cp", src, copy],
        "convert -> .gguf": [args.cli, "convert", src, out],
        "convert -> .gguf (mmap)": [args.cli, "convert", "--backend", "mmap", src, out],
    }.items():
        t, rss = best_of(cmd, args.runs, (copy, out))
        best[name] = t
        print(f"{name:28s} {t:7.3f} s  {size / t / (1 << 30):6.2f} GiB/s  peak RSS {rss:8.1f} MiB")
    print(f"convert / cp speed: {best['cp'] / best['convert -> .gguf']:.2f}x")

    qsrc = os.path.join(work, "q.safetensors")
    make_input(qsrc, args.quant_gib)
    qsize = os.path.getsize(qsrc)
    warm(qsrc)
    for threads in ("1", "0"):
        t, rss = best_of([args.cli, "convert", "--type", "q8_0", "--threads", threads, qsrc, out], args.runs, (out,))
        label = "every core" if threads == "0" else "1 thread"
        print(f"--type q8_0, {label:10s} {t:7.3f} s  {qsize / t / (1 << 20):8.1f} MiB/s of F32 in  peak RSS {rss:8.1f} MiB")


if __name__ == "__main__":
    main()
