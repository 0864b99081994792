#!/usr/bin/env python3
"""Group loads against a source capped per process: N processes (gloo on the CPU) load one safetensors
file over HTTP, each either reading the whole file (the loader without a group) or its 1/N in a group
load (safeweights.torch.load_file(..., process_group=...)), the rest arriving through the group.

  bench/group_load.py [--mib 1024] [--cap-mibps 32] [--ranks 1,2,4]

The server is on loopback, in this script: HTTP/1.1 Range requests on the file, every process's
requests (told apart by the URL's `?client=RANK`) sharing one token bucket of --cap-mibps MiB/s, however
many connections the process opens: a bucket or a disk shared by a node's processes would cap per node
instead, where a group load gains the same. Per N, the wall time of the slowest rank from a barrier
before the load to a barrier after it (the load itself, not the processes' start), for the group load
the slowest rank's time until its reads ended and until its last broadcast ended (both from the start
of the exchange, after the first status round), and the bytes each rank read. Run from the repository root after a build (build/python), with a Python that has torch
(Debian's /usr/bin/python3).
"""

from __future__ import annotations

import argparse
import http.server
import json
import mmap
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_model(path: Path, mib: int) -> None:
    """A safetensors file of `mib` MiB of F32 tensors (64 MiB each, the last one smaller), written
    without numpy: the bytes are a repeating pattern (the server's work, not their values, matters)."""
    total, per = mib << 20, 64 << 20
    sizes, left = [], total
    while left > 0:
        sizes.append(min(per, left))
        left -= sizes[-1]
    header, offset = {}, 0
    for i, n in enumerate(sizes):
        header[f"layer{i}.weight"] = {"dtype": "F32", "shape": [n // 4], "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    block = bytes(range(256)) * 4096  # 1 MiB
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for n in sizes:
            for _ in range(n >> 20):
                f.write(block)


class CappedServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, path: Path, cap: float):
        self.data_file = open(path, "rb")
        self.data = mmap.mmap(self.data_file.fileno(), 0, prot=mmap.PROT_READ)
        self.cap = cap
        self.lock = threading.Lock()
        self.next_free: dict[str, float] = {}
        self.sent: dict[str, int] = {}
        super().__init__(("127.0.0.1", 0), Handler)

    def take(self, client: str, n: int) -> None:
        """Waits until the client's bucket allows n more bytes."""
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next_free.get(client, now))
            self.next_free[client] = start + n / self.cap
            self.sent[client] = self.sent.get(client, 0) + n
        if start > now:
            time.sleep(start - now)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    PIECE = 256 << 10

    def log_message(self, *args):  # quiet
        pass

    def _range(self, size):
        spec = self.headers.get("Range")
        if not spec or not spec.startswith("bytes="):
            return 0, size - 1, False
        first, _, last = spec[6:].partition("-")
        a = int(first)
        b = min(int(last), size - 1) if last else size - 1
        return a, b, True

    def do_HEAD(self):
        self._reply(body=False)

    def do_GET(self):
        self._reply(body=True)

    def _reply(self, body):
        srv: CappedServer = self.server  # type: ignore[assignment]
        client = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query).get("client", ["?"])[0]
        size = len(srv.data)
        a, b, partial = self._range(size)
        self.send_response(206 if partial else 200)
        self.send_header("Content-Length", str(b - a + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", '"bench"')
        self.send_header("Last-Modified", "Thu, 01 Jan 2026 00:00:00 GMT")
        if partial:
            self.send_header("Content-Range", f"bytes {a}-{b}/{size}")
        self.end_headers()
        if not body:
            return
        at = a
        try:
            while at <= b:
                n = min(self.PIECE, b + 1 - at)
                srv.take(client, n)
                self.wfile.write(srv.data[at : at + n])
                at += n
        except (BrokenPipeError, ConnectionResetError):
            pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(url: str, group: bool) -> None:
    """One rank: a barrier, the load, a barrier; prints its seconds and bytes read as JSON."""
    import torch.distributed as dist

    import safeweights.torch as swt
    from safeweights import _load

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = f"{url}?client={rank}"
    dist.barrier()
    t0 = time.perf_counter()
    if group:
        tensors, stats = swt._group_load_file(mine, "cpu", "mmap", None, dist.group.WORLD, 3600)
        read = stats["read_bytes"]
        phases = {"read_seconds": stats["read_seconds"], "exchange_seconds": stats["exchange_seconds"]}
    else:
        with swt.safe_open(mine, "pt") as f:
            plan = f._handle.plan_load(None, None)
        tensors = _load.load_plan(plan, "cpu")
        read = plan.read_bytes
        phases = {}
    dist.barrier()
    seconds = time.perf_counter() - t0
    print(json.dumps({"rank": rank, "seconds": seconds, "read": read, "tensors": len(tensors), **phases}), flush=True)
    dist.destroy_process_group()


def run(url: str, n: int, group: bool) -> list[dict]:
    port = str(free_port())
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "build" / "python"), os.environ.get("PYTHONPATH")])))
    procs = [
        subprocess.Popen([sys.executable, __file__, "--worker", url] + (["--group"] if group else []),
                         env=dict(env, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                                  MASTER_PORT=port),
                         stdout=subprocess.PIPE, text=True)
        for r in range(n)
    ]
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=3600)
        if p.returncode != 0:
            raise RuntimeError(f"a rank failed ({p.returncode}): {stdout}")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return sorted(out, key=lambda r: r["rank"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--cap-mibps", type=float, default=32)
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--worker")
    ap.add_argument("--group", action="store_true")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.group)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.safetensors"
        make_model(path, args.mib)
        srv = CappedServer(path, args.cap_mibps * (1 << 20))
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{srv.server_address[1]}/model.safetensors"
        size = path.stat().st_size
        print(f"file {size / 2**20:.0f} MiB, cap {args.cap_mibps:g} MiB/s per process, load {os.getloadavg()[0]:.2f}", flush=True)
        print("| processes | each reads the whole file: s (MiB/s per process) | group load: s | group / each | group: reading ends, s | group: exchange ends, s | MiB read per rank (group) |")
        print("|---|---|---|---|---|---|---|")
        for n in [int(x) for x in args.ranks.split(",")]:
            alone = run(url, n, False)
            grouped = run(url, n, True) if n > 1 else alone
            t_alone = max(r["seconds"] for r in alone)
            t_group = max(r["seconds"] for r in grouped)
            reads = ", ".join(f"{r['read'] / 2**20:.0f}" for r in grouped)
            rate = size / 2**20 / t_alone
            phases = " | ".join(f"{max(r.get(k, 0) for r in grouped):.1f}" if n > 1 else "-" for k in ("read_seconds", "exchange_seconds"))
            print(f"| {n} | {t_alone:.1f} ({rate:.1f}) | {t_group:.1f} | {t_group / t_alone:.2f} | {phases} | {reads} |", flush=True)
        srv.shutdown()


if __name__ == "__main__":
    main()
