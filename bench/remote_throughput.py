#!/usr/bin/env python3
"""Remote loads as users measure them: safeweights against boto3's transfer manager, the AWS CLI and one
curl connection, on the same object, in the same run, through servers that cap every connection.

  bench/remote_throughput.py [--mib 1024] [--cap-mbps 10] [--passes 3] [--connections 8,16] [--part-mib 8,2,32]
                             [--sources s3,http]

Sets up on loopback: nginx serving the file over http with `limit_rate` per connection, and a moto S3
server (the object uploaded by boto3) behind an nginx reverse proxy with the same per-connection cap.
Then, per source, the median over --passes of:
  - safeweights bench URL (--connections N for each N): the load of every tensor into host memory, and
    the same load through one connection (its reference, in the same process);
  - s3: boto3 download_file (TransferConfig defaults: 10 threads, 8 MiB parts) and `aws s3 cp` (the AWS
    CLI's defaults: 10 requests, 8 MiB parts), both to /dev/shm;
  - http: curl, one connection.
The table says GB/s (1e9 bytes) and the fraction of connections x cap reached. Run it with the Python of
the remote-sources venv (scripts/python-env.sh --cached venv-remote tests/remote/requirements.txt), from
the repository root after a build (build/safeweights, build/python). Needs nginx and curl (install-deps.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = os.environ.get("SAFEWEIGHTS_CLI", str(ROOT / "build" / "safeweights"))
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int) -> None:
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def make_model(path: Path, mib: int) -> None:
    """A safetensors file of `mib` MiB of F32 tensors (64 MiB each), written without numpy."""
    import struct

    per = 64 << 20
    count = max(1, mib * (1 << 20) // per)
    header, offset = {}, 0
    for i in range(count):
        header[f"layer.{i}.weight"] = {"dtype": "F32", "shape": [per // 4 // 4096, 4096], "data_offsets": [offset, offset + per]}
        offset += per
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    block = bytes(range(256)) * 4096  # 1 MiB
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _ in range(offset // len(block)):
            f.write(block)


def timed(cmd: list[str], env: dict | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--cap-mbps", type=float, default=10.0, help="per-connection cap, MB/s (1e6 bytes)")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--connections", default="8,16")
    ap.add_argument("--part-mib", default="8", help="request sizes to try, MiB (comma-separated): the first goes with every "
                    "connection count, the others with the first count")
    ap.add_argument("--sources", default="s3,http", help="which servers to measure (s3, http)")
    args = ap.parse_args()
    import boto3
    from boto3.s3.transfer import TransferConfig

    work = Path(tempfile.mkdtemp(prefix="sw-remote-bench-"))
    shm = Path(tempfile.mkdtemp(prefix="sw-remote-bench-", dir="/dev/shm"))
    procs = []
    try:
        model = work / "www" / "model.safetensors"
        model.parent.mkdir()
        make_model(model, args.mib)
        for p in (work, model.parent):  # nginx's workers run as another user
            p.chmod(0o755)
        model.chmod(0o644)
        size = model.stat().st_size
        cap = int(args.cap_mbps * 1e6)

        moto_port, http_port, s3_port = free_port(), free_port(), free_port()
        env = dict(os.environ)
        procs.append(subprocess.Popen([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(moto_port)], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, env=env))
        wait_port(moto_port)
        conf = work / "nginx.conf"
        conf.write_text(f"""
worker_processes 2;
pid {work}/nginx.pid;
error_log {work}/error.log;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {work}/body; proxy_temp_path {work}/proxy; fastcgi_temp_path {work}/fcgi;
  uwsgi_temp_path {work}/uwsgi; scgi_temp_path {work}/scgi;
  server {{ listen 127.0.0.1:{http_port}; root {work}/www; limit_rate {cap}; }}
  server {{
    listen 127.0.0.1:{s3_port};
    client_max_body_size 0;
    location / {{
      proxy_pass http://127.0.0.1:{moto_port};
      proxy_set_header Host $http_host;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_request_buffering off;
      proxy_limit_rate {cap};
      limit_rate {cap};
    }}
  }}
}}
""")
        procs.append(subprocess.Popen(["nginx", "-c", str(conf), "-g", "daemon off;"], stderr=subprocess.DEVNULL))
        wait_port(http_port)
        wait_port(s3_port)

        creds = dict(aws_access_key_id="bench", aws_secret_access_key="bench-secret", region_name="us-east-1")
        s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{moto_port}", **creds)
        s3.create_bucket(Bucket="models")
        s3.upload_file(str(model), "models", "model.safetensors")
        capped = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{s3_port}", **creds)

        client_env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench-secret", AWS_REGION="us-east-1",
                          AWS_ENDPOINT_URL=f"http://127.0.0.1:{s3_port}", HOME=str(work))
        sources = {"s3": "s3://models/model.safetensors", "http": f"http://127.0.0.1:{http_port}/model.safetensors"}
        sources = {k: v for k, v in sources.items() if k in args.sources.split(",")}
        counts = [int(c) for c in args.connections.split(",")]
        parts = [int(p) for p in args.part_mib.split(",")]
        runs = [(n, parts[0]) for n in counts] + [(counts[0], p) for p in parts[1:]]
        rows = []
        for source, url in sources.items():
            for n, part in runs:
                proc = subprocess.run([CLI, "bench", "--json", "--passes", str(args.passes), "--connections", str(n), "--part-mib", str(part),
                                       url], capture_output=True, env=client_env)
                if proc.returncode != 0:
                    raise RuntimeError(f"safeweights bench {url}: {proc.stderr.decode()}")
                r = json.loads(proc.stdout)
                rows.append((source, f"safeweights, {n} connections, {part} MiB parts", r["load_gbps"], n))
                if (n, part) == runs[0]:
                    rows.append((source, "safeweights, 1 connection (its reference)", r["one_connection_gbps"], 1))
            if source == "s3":
                times = []
                for _ in range(args.passes):
                    t0 = time.perf_counter()
                    capped.download_file("models", "model.safetensors", str(shm / "boto3.bin"), Config=TransferConfig())
                    times.append(time.perf_counter() - t0)
                    (shm / "boto3.bin").unlink()
                rows.append((source, "boto3 download_file (10 threads, 8 MiB)", size / statistics.median(times) / 1e9, 10))
                times = [timed([str(BIN / "aws"), "s3", "cp", "--only-show-errors", url, str(shm / "cli.bin")], client_env) for _ in range(args.passes)]
                rows.append((source, "aws s3 cp (10 requests, 8 MiB)", size / statistics.median(times) / 1e9, 10))
                (shm / "cli.bin").unlink()
            else:
                times = [timed(["curl", "-sS", "-o", str(shm / "curl.bin"), url]) for _ in range(args.passes)]
                rows.append((source, "curl (1 connection)", size / statistics.median(times) / 1e9, 1))
                (shm / "curl.bin").unlink()

        print(f"{size / 2**30:.2f} GiB, per-connection cap {args.cap_mbps:g} MB/s, median of {args.passes} passes, "
              f"{os.cpu_count()} CPUs, loopback")
        print(f"| source | client | GB/s | of connections x cap |")
        print(f"|---|---|---:|---:|")
        for source, client, gbps, conns in rows:
            print(f"| {source} | {client} | {gbps:.3f} | {gbps * 1e9 / (conns * cap):.2f} |")
        return 0
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
