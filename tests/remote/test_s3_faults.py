"""s3:// reads through a fault-injecting proxy in front of the S3 server (fault_proxy.py): throttling and
cut bodies are retried, a stalled server meets the deadline, an object replaced mid-read is an error and
never a mix of two versions, and a redirect to another host gets no credentials."""

from __future__ import annotations

import http.server
import threading

import numpy as np
import pytest

from conftest import BUCKET, run_cli
from fault_proxy import Proxy


@pytest.fixture(scope="module")
def proxy(s3):
    p = Proxy(s3.port)
    yield p
    p.stop()


@pytest.fixture(scope="module")
def big(s3, tmp_path_factory):
    """A 6 MiB tensor: several requests at a 1 MiB chunk size."""
    from safeweights.numpy import save_file

    path = tmp_path_factory.mktemp("big") / "big.safetensors"
    save_file({"w": np.arange(6 << 18, dtype=np.float32)}, str(path))
    url = s3.upload(path, "faults/big.safetensors")
    return path, url


def cat_args(url, *extra):
    return ["cat", "--stats", "--timeout", "20", *extra, url, "w"]


def stats_of(proc):
    line = [l for l in proc.stderr.decode().splitlines() if l.startswith("stats:")][-1]
    return int(line.split("(")[1].split(" retries")[0])


def test_slowdown_is_retried_with_backoff(s3, proxy, big):
    path, url = big
    proxy.set(("slowdown", 2))
    proc = run_cli(*cat_args(url), env=s3.env(AWS_ENDPOINT_URL=proxy.endpoint))
    assert proc.stdout == np.arange(6 << 18, dtype=np.float32).tobytes()
    assert stats_of(proc) == 2


def test_cut_bodies_resume(s3, proxy, big):
    path, url = big
    proxy.set(("truncate", 3))
    proc = run_cli(*cat_args(url), env=s3.env(AWS_ENDPOINT_URL=proxy.endpoint))
    assert proc.stdout == np.arange(6 << 18, dtype=np.float32).tobytes()
    assert stats_of(proc) >= 3


def test_a_stalled_server_meets_the_deadline(s3, proxy, big):
    path, url = big
    proxy.set(("drip", 0.5))
    proc = run_cli("inspect", "--timeout", "2", url, env=s3.env(AWS_ENDPOINT_URL=proxy.endpoint), check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 3 and "Timeout" in err and "missed its deadline of 2 s" in err, err


def test_an_object_replaced_mid_read_is_an_error(s3, proxy, big, tmp_path):
    path, url = big
    from safeweights.numpy import save_file

    other = tmp_path / "other.safetensors"
    save_file({"w": -np.arange(6 << 18, dtype=np.float32)}, str(other))
    assert other.stat().st_size == path.stat().st_size
    proxy.set(("after_first", lambda: s3.upload(other, "faults/replaced.safetensors")))
    s3.upload(path, "faults/replaced.safetensors")
    proc = run_cli(*cat_args(f"s3://{BUCKET}/faults/replaced.safetensors"), env=s3.env(AWS_ENDPOINT_URL=proxy.endpoint), check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 3 and "RemoteChanged" in err and "ETag" in err, err
    assert proc.stdout == b""


def test_a_redirect_to_another_host_gets_no_credentials(s3, proxy, big):
    path, url = big
    seen = []

    class Foreign(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append({k.lower(): v for k, v in self.headers.items()})
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    foreign = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Foreign)
    threading.Thread(target=foreign.serve_forever, daemon=True).start()
    try:
        proxy.set(("redirect", f"http://127.0.0.1:{foreign.server_address[1]}"))
        proc = run_cli("inspect", url, env=s3.env(AWS_ENDPOINT_URL=proxy.endpoint, AWS_SESSION_TOKEN="session-token"), check=False)
    finally:
        foreign.shutdown()
        proxy.set(None)
    assert proc.returncode == 1
    assert seen, "the redirect was not followed"
    for headers in seen:
        assert not any(k in headers for k in ("authorization", "x-amz-security-token", "x-amz-content-sha256", "x-amz-date")), headers
