"""safe_open and read_dduf_file on http:// URLs, against a real nginx on a loopback port.

The fixture starts Debian's nginx with a throwaway config in a temporary folder (pid, logs and temp
paths inside it) and stops it afterwards. Without nginx the tests skip, except under CI=true, where
scripts/install-deps.sh must have installed it. Expected values come from the local file read with
numpy/json/zipfile, and request counts from nginx's own access log.
"""

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

import numpy as np
import pytest

import safeweights
import safeweights.dduf
import safeweights.numpy

NGINX = "/usr/sbin/nginx"
REPO_ROOT = Path(__file__).resolve().parent.parent.parent


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    def __init__(self, folder):
        self.www = folder / "www"
        self.www.mkdir()
        self.dir = folder
        self.access_log = folder / "access.log"
        self.proc = None
        self.port = None

    def start(self):
        for _ in range(5):  # another process may take the port between probe and bind
            self.port = _free_port()
            d = self.dir
            conf = d / "nginx.conf"
            temps = " ".join(f"{k}_temp_path {d / k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
            conf.write_text(
                f"daemon off; master_process off; worker_processes 1; pid {d / 'nginx.pid'};\n"
                f"error_log {d / 'error.log'} warn;\nevents {{ worker_connections 64; }}\n"
                f"http {{ access_log {self.access_log}; {temps}\n"
                f"  server {{ listen 127.0.0.1:{self.port}; root {self.www}; }} }}\n"
            )
            self.proc = subprocess.Popen([NGINX, "-p", str(d), "-c", str(conf), "-e", str(d / "error.log")])
            for _ in range(500):
                if self.proc.poll() is not None:
                    break
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                    return
                except OSError:
                    time.sleep(0.01)
            self.stop()
        raise RuntimeError("nginx did not start: " + (self.dir / "error.log").read_text(errors="replace"))

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def url(self, name):
        return f"http://127.0.0.1:{self.port}/{name}"

    def requests_for(self, name):
        if not self.access_log.exists():
            return 0
        return sum(1 for line in self.access_log.read_text().splitlines() if f"GET /{name} " in line)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not os.access(NGINX, os.X_OK):
        if os.environ.get("CI") == "true":
            pytest.fail("nginx is not installed; scripts/install-deps.sh installs it")
        pytest.skip("nginx is not installed (scripts/install-deps.sh installs it)")
    srv = Nginx(tmp_path_factory.mktemp("nginx"))
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def model(server):
    rng = np.random.default_rng(7)
    tensors = {
        "embed": rng.standard_normal((64, 32)).astype(np.float32),
        "bias": np.arange(10, dtype=np.int64),
        "mask": rng.integers(0, 2, (5, 7)).astype(bool),
    }
    path = server.www / "model.safetensors"
    safeweights.numpy.save_file(tensors, path, metadata={"format": "np"})
    return tensors, path


def test_safe_open_url_numpy_and_torch(server, model):
    tensors, _ = model
    url = server.url("model.safetensors")
    with safeweights.safe_open(url, framework="np") as f:
        assert f.keys() == sorted(tensors)
        assert f.metadata() == {"format": "np"}
        for name, expected in tensors.items():
            got = f.get_tensor(name)
            assert got.dtype == expected.dtype and np.array_equal(got, expected)
        np.testing.assert_array_equal(f.get_slice("embed")[3:9:2, ::-3], tensors["embed"][3:9:2, ::-3])
    torch = pytest.importorskip("torch")
    with safeweights.safe_open(url, framework="pt") as f:
        t = f.get_tensor("embed")
        assert torch.equal(t, torch.from_numpy(tensors["embed"]))
        t[0, 0] = 1.0  # tensors from a URL are owned memory: writable


def test_load_file_url_equals_local(server, model):
    tensors, path = model
    remote = safeweights.numpy.load_file(server.url("model.safetensors"))
    assert list(remote) == list(safeweights.numpy.load_file(path))
    for name in tensors:
        assert np.array_equal(remote[name], tensors[name])


def test_opening_fetches_only_the_header(server, tmp_path):
    # A 64 MiB tensor: opening and listing must not download it.
    big = {"w": np.zeros((4096, 4096), dtype=np.float32)}
    safeweights.numpy.save_file(big, server.www / "big.safetensors")
    before = server.requests_for("big.safetensors")
    with safeweights.safe_open(server.url("big.safetensors"), framework="np") as f:
        assert f.get_slice("w").get_shape() == [4096, 4096]
        assert f.get_slice("w")[7, :4].tolist() == [0.0] * 4
    after = server.requests_for("big.safetensors")
    assert 1 <= after - before <= 3


def test_missing_url_is_file_not_found(server):
    with pytest.raises(FileNotFoundError):
        safeweights.safe_open(server.url("absent.safetensors"), framework="np")
    with pytest.raises(FileNotFoundError):
        safeweights.dduf.read_dduf_file(server.url("absent.dduf"))


def test_read_dduf_file_url(server, model, tmp_path):
    tensors, path = model
    folder = tmp_path / "pipe"
    (folder / "vae").mkdir(parents=True)
    (folder / "model_index.json").write_text(json.dumps({"vae": ["diffusers", "AutoencoderKL"]}))
    (folder / "vae" / "config.json").write_text('{"latent_channels": 4}')
    (folder / "vae" / "diffusion_pytorch_model.safetensors").write_bytes(path.read_bytes())
    safeweights.dduf.export_folder_as_dduf(server.www / "pipe.dduf", folder)

    entries = safeweights.dduf.read_dduf_file(server.url("pipe.dduf"))
    with zipfile.ZipFile(server.www / "pipe.dduf") as zf:
        assert list(entries) == zf.namelist()
        for name, entry in entries.items():
            with entry.as_mmap() as mm:
                assert bytes(mm) == zf.read(name)
    assert json.loads(entries["model_index.json"].read_text()) == {"vae": ["diffusers", "AutoencoderKL"]}
    remote = safeweights.dduf.load_safetensors(entries["vae/diffusion_pytorch_model.safetensors"], "np")
    for name in tensors:
        assert np.array_equal(remote[name], tensors[name])


# ---- misbehaving servers: tests/http/fault_server.py (standard library only) ----------------------

FAULT_SERVER = REPO_ROOT / "tests" / "http" / "fault_server.py"


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    """The fault server on a loopback port, serving model.safetensors from its own folder."""
    root = tmp_path_factory.mktemp("faults")
    safeweights.numpy.save_file({"w": np.arange(30000, dtype=np.float32)}, root / "model.safetensors")
    proc = subprocess.Popen([sys.executable, str(FAULT_SERVER), "--root", str(root)], stdout=subprocess.PIPE)
    try:
        port = int(proc.stdout.readline())

        class Faults:
            folder = root

            def url(self, query, name="model.safetensors"):
                return f"http://127.0.0.1:{port}/{name}?{query}"

            def requests_for(self, query):
                path = urllib.parse.quote(f"/model.safetensors?{query}", safe="")
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/count?path={path}", timeout=10) as r:
                    return int(r.read())

        yield Faults()
    finally:
        proc.kill()
        proc.wait()


def test_http_errors_name_what_the_server_did(faults):
    url = faults.url("gzip=1&tag=py-gzip")
    with pytest.raises(safeweights.SafetensorError) as info:
        safeweights.safe_open(url, framework="np")
    message = str(info.value)
    assert not message.startswith("Error while deserializing"), message
    assert url in message and "HttpError" in message and "Content-Encoding: gzip" in message, message
    assert info.value.kind == "HttpError" and info.value.file == url


def test_server_without_validators_warns(faults):
    with pytest.warns(UserWarning, match="no ETag nor Last-Modified"):
        with safeweights.safe_open(faults.url("novalidator=1&tag=py-nv"), framework="np") as f:
            assert f.get_tensor("w")[-1] == 29999


def test_environment_deadline_bounds_safe_open(faults, monkeypatch):
    monkeypatch.setenv("SAFEWEIGHTS_HTTP_TIMEOUT", "1")
    start = time.monotonic()
    with pytest.raises(safeweights.SafetensorError) as info:
        safeweights.safe_open(faults.url("trickle=1&tag=py-deadline"), framework="np")
    assert time.monotonic() - start < 10
    assert info.value.kind == "Timeout", str(info.value)
    assert "deadline of 1 s" in str(info.value)


def _as_at_a_terminal():
    """The child's SIGINT as a terminal's Ctrl-C finds it (default, so Python raises KeyboardInterrupt):
    a suite started in the background by a shell without job control inherits SIGINT ignored, and
    Python then leaves it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_when(proc, ready, limit=10):
    """Sends SIGINT once ready() is true, then waits (at most `limit` s) for the process to end."""
    deadline = time.monotonic() + limit
    while not ready() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"still running {limit} s after SIGINT")
    return out.decode(), err.decode()


def test_ctrl_c_interrupts_a_remote_read(faults):
    # The server sends one header line every 0.5 s for 10 minutes: only Ctrl-C ends the call early.
    query = "slowheaders=1&tag=py-sigint"
    script = (
        "import sys, safeweights\n"
        "try:\n"
        f"    safeweights.safe_open({faults.url(query)!r}, framework='np')\n"
        "except KeyboardInterrupt:\n"
        "    print('KeyboardInterrupt'); sys.exit(3)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_as_at_a_terminal)
    out, err = _interrupt_when(proc, lambda: faults.requests_for(query) >= 1)
    assert proc.returncode == 3 and "KeyboardInterrupt" in out, (proc.returncode, out, err)


def test_ctrl_c_during_save_file_leaves_the_target_untouched(tmp_path):
    target = tmp_path / "out.safetensors"
    target.write_bytes(b"old")
    # The SIGINT comes from inside the child, 20 ms into a 1 GiB save (which takes far longer: it
    # writes the bytes), so it lands while the library works with the GIL released; from the parent
    # it could land before the save started.
    script = (
        "import os, signal, sys, threading, numpy as np, safeweights.numpy\n"
        "big = {'w': np.ones((1024, 1 << 20), dtype=np.uint8)}\n"
        "try:\n"
        "    threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
        f"    safeweights.numpy.save_file(big, {str(target)!r})\n"
        "    print('saved')\n"
        "except KeyboardInterrupt:\n"
        "    print('KeyboardInterrupt'); sys.exit(3)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, preexec_fn=_as_at_a_terminal)
    assert proc.returncode == 3 and "KeyboardInterrupt" in proc.stdout, (proc.returncode, proc.stdout, proc.stderr)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.safetensors"]


def test_a_server_claiming_a_petabyte_tensor_is_streamed_not_allocated(faults):
    """A header declaring a 1 PiB tensor, and a server whose Content-Range says the file is that long:
    `cat --slice` streams what it reads (it used to allocate the whole slice and abort on bad_alloc)."""
    cli = os.environ.get("SAFEWEIGHTS_CLI")
    if not cli:
        pytest.skip("SAFEWEIGHTS_CLI names the tool (ctest sets it)")
    pib = 1 << 50
    header = json.dumps({"t": {"dtype": "U8", "shape": [pib], "data_offsets": [0, pib]}}).encode()
    header += b" " * (-len(header) % 8)
    (faults.folder / "huge.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    url = faults.url(f"pad_to={8 + len(header) + pib}&tag=py-pib", name="huge.safetensors")
    proc = subprocess.Popen([cli, "cat", "--slice", "::1", url, "t"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        got = proc.stdout.read(1 << 20)
    finally:
        proc.stdout.close()  # the tool's next write fails (EPIPE / SIGPIPE): it stops there
        _, err = proc.communicate(timeout=60)
    assert got == b"\0" * (1 << 20), (len(got), err)
    assert proc.returncode not in (-signal.SIGABRT, 134), err  # no uncaught bad_alloc


def test_the_cli_never_echoes_a_presigned_urls_signature(server, model):
    """validate and bench print the name they were given: a presigned URL's signature query values are
    redacted there as in every error (they used to be echoed in `validate`'s lines and --json "file")."""
    cli = os.environ.get("SAFEWEIGHTS_CLI")
    if not cli:
        pytest.skip("SAFEWEIGHTS_CLI names the tool (ctest sets it)")
    secret = "0123456789abcdef0123456789abcdef"
    url = server.url("model.safetensors") + f"?X-Amz-Credential=AKIA{secret[:16]}&X-Amz-Signature={secret}"
    for args in (["validate", url], ["validate", "--json", url], ["bench", "--json", "--passes", "1", url]):
        proc = subprocess.run([cli, *args], capture_output=True, text=True, timeout=60)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        assert secret not in out and secret[:16] not in out, out
        assert "X-Amz-Signature=<redacted>" in out, out
    renamed = server.url("model.safetensors").replace("model.safetensors", "model.dduf")
    (server.www / "model.dduf").write_bytes((server.www / "model.safetensors").read_bytes())
    proc = subprocess.run([cli, "validate", f"{renamed}?X-Amz-Signature={secret}"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "the name says dduf" in proc.stderr, proc.stderr
    assert secret not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
