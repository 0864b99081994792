#!/usr/bin/env python3
"""Converting a large PyTorch checkpoint to safetensors: `safeweights convert` against `cp` of the same
bytes and against torch.load + safetensors.torch.save_file (when safetensors is importable), same run,
with each command's peak RSS (from wait4's ru_maxrss).

    bench/pytorch_convert.py --cli build/safeweights [--gib 2] [--dir /tmp] [--runs 3]

Needs torch (to write the checkpoint). Every command runs with a warm page cache (the input is read
once before timing), so the figures compare the work each does, not the disk.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time


def timed(cmd):
    """Seconds and peak RSS (MiB) of a child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if status != 0:
        sys.exit(f"{cmd} failed with status {status}")
    return elapsed, usage.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    work = tempfile.mkdtemp(dir=args.dir)
    ckpt = os.path.join(work, "model.pt")
    n = int(args.gib * (1 << 30) / (64 << 20))  # 64 MiB tensors, as in a large model's layers
    # Written by a child, so this process stays small: a child's peak RSS counts what it inherits at fork.
    subprocess.run([sys.executable, "-c", "import sys, torch; torch.save({f'layers.{i}.weight': torch.empty(4096, 4096)"
                    ".uniform_() for i in range(int(sys.argv[2]))}, sys.argv[1])", ckpt, str(n)], check=True)
    size = os.path.getsize(ckpt)
    with open(ckpt, "rb") as f:
        while f.read(64 << 20):
            pass
    out = os.path.join(work, "out.safetensors")
    copy = os.path.join(work, "copy.pt")
    has_st = subprocess.run([sys.executable, "-c", "import safetensors"], capture_output=True).returncode == 0
    commands = {
        "cp": ["cp", ckpt, copy],
        "safeweights convert": [args.cli, "convert", ckpt, out],
        "safeweights convert mmap": [args.cli, "convert", "--backend", "mmap", ckpt, out],
    }
    if has_st:
        commands["torch.load + save_file"] = [sys.executable, "-c",
            "import sys, torch; from safetensors.torch import save_file; "
            "save_file(torch.load(sys.argv[1], map_location='cpu', weights_only=True), sys.argv[2])", ckpt, out + ".ref"]
    else:
        commands["torch.load only"] = [sys.executable, "-c", "import sys, torch; torch.load(sys.argv[1], map_location='cpu')", ckpt]
    print(f"checkpoint: {size / (1 << 30):.2f} GiB, {n} tensors; best of {args.runs}")
    best = {}
    for name, cmd in commands.items():
        results = []
        for _ in range(args.runs):
            results.append(timed(cmd))
            for path in (copy, out, out + ".ref"):
                if os.path.exists(path):
                    os.remove(path)
        t, rss = min(results)
        best[name] = t
        print(f"{name:26s} {t:7.3f} s  {size / t / (1 << 30):6.2f} GiB/s  peak RSS {rss:8.1f} MiB")
    print(f"convert / cp speed: {best['cp'] / best['safeweights convert']:.2f}x")
    for path in os.listdir(work):
        os.remove(os.path.join(work, path))
    os.rmdir(work)


if __name__ == "__main__":
    main()
