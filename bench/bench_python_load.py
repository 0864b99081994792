#!/usr/bin/env python3
"""load_file through safeweights vs numpy.fromfile and vs torch.load, touching every byte.

Writes a safetensors file of --gib GiB (float32 tensors of mixed sizes, as in a model) and the same
tensors with torch.save, then times, pass after pass in rotating order (so drift in a shared VM does
not land on one contender):

  fromfile      numpy.fromfile(path, uint8): one read() of the whole file into fresh memory (the
                physical reference: it moves every byte once)
  sw.numpy      safeweights.numpy.load_file(path)          (zero-copy views of the mapping)
  sw.torch      safeweights.torch.load_file(path)          (zero-copy, copy-on-write views)
  sw.numpy.pread  safeweights.numpy.load_file(path, backend="pread")   (owned copies)
  torch.load    torch.load(path_of_torch_save)             (torch's own format, 1.13: copies)

each followed by touching every byte of the result (a sum over 64-bit words, the same work for all),
so lazily mapped data pays for its page faults inside the timing. Files are in the page cache (read
once before timing): this measures the CPU-side cost of loading, not the disk. Prints the median per
contender and the ratios fromfile/x (>1: x is faster) and torch.load/x, and the best pass of each
(loaders that allocate fresh memory vary most: on a VM whose freed memory goes back to the host, every
new page costs a fault on the host too; the best pass is the one that found memory ready).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time

import numpy as np


def touch(arrays) -> int:
    """Reads every byte: sums each array's bytes as 64-bit words (sizes are multiples of 8 here)."""
    total = 0
    for a in arrays:
        total += int(np.add.reduce(a.reshape(-1).view(np.uint64), dtype=np.uint64))
    return total


def make_files(folder: str, gib: float):
    import torch

    import safeweights.numpy as swn

    rng = np.random.default_rng(0)
    # A model-like mix: many small tensors, some mid-sized, a few large ones.
    sizes = [4096] * 200 + [1 << 20] * 40 + [8 << 20] * 20
    target = int(gib * (1 << 30))
    tensors, total, i = {}, 0, 0
    while total < target:
        n = min(sizes[i % len(sizes)], (target - total) // 4)
        if n <= 0:
            break
        tensors[f"layer.{i}.weight"] = rng.standard_normal(n, dtype=np.float32)
        total += n * 4
        i += 1
    st = os.path.join(folder, "bench_python.safetensors")
    pt = os.path.join(folder, "bench_python.pt")
    swn.save_file(tensors, st)
    torch.save({k: torch.from_numpy(v) for k, v in tensors.items()}, pt)
    return st, pt, len(tensors), total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--passes", type=int, default=7)
    args = ap.parse_args()

    import torch

    import safeweights
    import safeweights.numpy as swn
    import safeweights.torch as swt

    st, pt, count, total = make_files(args.dir, args.gib)
    print(f"safeweights {safeweights.__version__}, numpy {np.__version__}, torch {torch.__version__}, "
          f"python {platform.python_version()}")
    print(f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, {platform.release()}")
    print(f"file: {st} ({os.path.getsize(st) / (1 << 30):.2f} GiB, {count} float32 tensors); torch.save copy {pt}")

    def run_fromfile():
        a = np.fromfile(st, dtype=np.uint8)
        n = a.size - a.size % 8
        return touch([a[:n]])

    def run_sw_numpy():
        return touch(swn.load_file(st).values())

    def run_sw_numpy_pread():
        return touch(swn.load_file(st, backend="pread").values())

    def run_sw_torch():
        return touch(t.numpy() for t in swt.load_file(st).values())

    def run_torch_load():
        return touch(t.numpy() for t in torch.load(pt).values())

    contenders = {
        "fromfile": run_fromfile,
        "sw.numpy": run_sw_numpy,
        "sw.torch": run_sw_torch,
        "sw.numpy.pread": run_sw_numpy_pread,
        "torch.load": run_torch_load,
    }
    # Warm the page cache and check every contender reads the same tensor bytes.
    sums = {name: fn() for name, fn in contenders.items()}
    ref = sums["sw.numpy"]
    for name in ("sw.torch", "sw.numpy.pread", "torch.load"):
        if sums[name] != ref:
            print(f"error: {name} read different bytes", file=sys.stderr)
            return 1

    times = {name: [] for name in contenders}
    names = list(contenders)
    for p in range(args.passes):
        order = names[p % len(names):] + names[: p % len(names)]
        for name in order:
            gc.collect()
            t0 = time.perf_counter()
            contenders[name]()
            times[name].append(time.perf_counter() - t0)

    med = {name: statistics.median(v) for name, v in times.items()}
    gib = total / (1 << 30)
    best = {name: min(v) for name, v in times.items()}
    print(f"\n{'contender':<16} {'median s':>9} {'GiB/s':>7} {'fromfile/x':>11} {'torch.load/x':>13} "
          f"{'best s':>8} {'best fromfile/x':>16}   all passes (s)")
    for name in names:
        m = med[name]
        print(f"{name:<16} {m:9.3f} {gib / m:7.2f} {med['fromfile'] / m:11.2f} {med['torch.load'] / m:13.2f} "
              f"{best[name]:8.3f} {best['fromfile'] / best[name]:16.2f}   " + " ".join(f"{t:.3f}" for t in times[name]))
    os.unlink(st)
    os.unlink(pt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
