#!/usr/bin/env python3
"""Converting a large PyTorch checkpoint to safetensors: `safeweights convert` against `cp` of the same
bytes and against torch.load + safetensors.torch.save_file (when safetensors is importable), same run,
with each command's peak RSS (from wait4's ru_maxrss).

    build/bench-torch-venv/bin/python bench/pytorch_convert.py --cli build/safeweights [--gib 2] [--dir /tmp] [--runs 5]

Needs torch (to write the checkpoint) and, for the reference, the safetensors package next to it: a
venv of Debian's python with its torch plus the reference safetensors pinned in
tests/python/requirements.txt:

    /usr/bin/python3 -m venv --system-site-packages build/bench-torch-venv
    build/bench-torch-venv/bin/pip install safetensors==0.8.0

Every command runs with a warm page cache (the input is read just before it) and after a sync (no
dirty pages of the command before it left to write back), so the figures compare the work each does,
not the disk. The commands take turns, round after round, so a change in
the machine's load falls on all of them; each is reported as its best and median run.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from convert_gguf import timed  # seconds and peak RSS (MiB, from GNU time: a small parent) of a command


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    work = tempfile.mkdtemp(dir=args.dir)
    ckpt = os.path.join(work, "model.pt")
    n = int(args.gib * (1 << 30) / (64 << 20))  # 64 MiB tensors, as in a large model's layers
    # Written by a child, so this process stays small: a child's peak RSS counts what it inherits at fork.
    subprocess.run([sys.executable, "-c", "import sys, torch; torch.save({f'layers.{i}.weight': torch.empty(4096, 4096)"
                    ".uniform_() for i in range(int(sys.argv[2]))}, sys.argv[1])", ckpt, str(n)], check=True)
    size = os.path.getsize(ckpt)
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
    print(f"checkpoint: {size / (1 << 30):.2f} GiB, {n} tensors; {args.runs} rounds; "
          f"load average at start {os.getloadavg()[0]:.2f}")
    results = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            # Every command starts with no dirty pages left by the one before (writeback would
            # otherwise slow whichever runs next) and with the input just read (page cache warm).
            os.sync()
            with open(ckpt, "rb") as f:
                while f.read(64 << 20):
                    pass
            results[name].append(timed(cmd))
            for path in (copy, out, out + ".ref"):
                if os.path.exists(path):
                    os.remove(path)
    best, median = {}, {}
    print(f"{'command':26s} {'best s':>8s} {'median s':>9s} {'GiB/s (best)':>13s} {'peak RSS':>12s}")
    for name, runs in results.items():
        best[name] = min(t for t, _ in runs)
        median[name] = statistics.median(t for t, _ in runs)
        rss = max(r for _, r in runs)
        print(f"{name:26s} {best[name]:8.3f} {median[name]:9.3f} {size / best[name] / (1 << 30):13.2f} {rss:8.1f} MiB")
    print(f"convert / cp speed: {best['cp'] / best['safeweights convert']:.2f}x best, "
          f"{median['cp'] / median['safeweights convert']:.2f}x median")
    for name in ("torch.load + save_file", "torch.load only"):
        if name in best:
            print(f"convert / {name} speed: {best[name] / best['safeweights convert']:.2f}x best, "
                  f"{median[name] / median['safeweights convert']:.2f}x median")
    for path in os.listdir(work):
        os.remove(os.path.join(work, path))
    os.rmdir(work)


if __name__ == "__main__":
    main()
