#!/usr/bin/env python3
"""Python loads to a CUDA device, ours against the reference safetensors, on the same files in the same
run (bench/gpu_loading.sh runs it on the GPU machine). Prints one JSON object per file:
{"label","path","bytes","reference_gbps","load_gbps","speedup","verified"}.

Warm page cache (the files are read once first). Each of ours is the median of 3 loads; the reference's
single load takes seconds. Every load is timed to torch.cuda.synchronize(); verified = every tensor of
ours equals the reference's (torch.equal on the device)."""
import json
import os
import statistics
import sys
import time

import safetensors.torch as reference
import torch

import safeweights.torch as ours


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def bench(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass
    ref_t, ref = timed(lambda: reference.load_file(path, device="cuda:0"))
    times = []
    for _ in range(4):  # the first pays for the staging buffers
        t, got = timed(lambda: ours.load_file(path, device="cuda:0"))
        times.append(t)
        del got
    t, got = timed(lambda: ours.load_file(path, device="cuda:0"))
    times.append(t)
    # Bitwise: random bytes hold NaNs, which torch.equal counts as different.
    verified = list(got) == list(ref) and all(torch.equal(got[k].view(torch.uint8), ref[k].view(torch.uint8)) for k in ref)
    med = statistics.median(times[1:])
    del got
    return {"label": f"python {os.path.basename(path)}", "path": path, "bytes": size,
            "reference_gbps": size / ref_t / 1e9, "load_gbps": size / med / 1e9, "speedup": ref_t / med,
            "verified": verified, "breakdown_ms": breakdown(path)}


def breakdown(path):
    """Where the time of one load goes: open, plan, allocation, the loader, the views."""
    from safeweights import _load  # noqa: PLC0415

    marks = {}
    torch.cuda.synchronize()
    t = time.perf_counter()
    with ours.safe_open(path, "pt", device="cuda:0") as f:
        marks["open"] = time.perf_counter() - t
        plan = f._handle.plan_load(None, None)
        marks["plan"] = time.perf_counter() - t
        buf = torch.empty((plan.size + 63) // 64 * 64, dtype=torch.uint8, device="cuda:0")
        torch.cuda.current_stream().synchronize()
        marks["allocate"] = time.perf_counter() - t
        plan.load_device(buf.data_ptr(), plan.size, 0)
        marks["load_device"] = time.perf_counter() - t
        _load._views(torch, buf, plan.tensors())
        marks["views"] = time.perf_counter() - t
    return {k: round(v * 1e3, 2) for k, v in marks.items()}


def main():
    for path in sys.argv[1:]:
        print(json.dumps(bench(path)), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
