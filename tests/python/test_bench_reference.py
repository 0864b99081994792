"""bench/convert_original.py fetches its reference (transformers' convert_llama_weights_to_hf.py, no longer
shipped in a wheel) at a pinned commit, checks its SHA-256 and caches it: served here from loopback (the
bench's --reference-url), with a stand-in for the script's bytes and the pinned digest set to theirs."""
import hashlib
import http.server
import importlib.util
import os
import threading
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "convert_original.py"
SCRIPT = b"# a stand-in for the pinned script\nprint('converted')\n"


@pytest.fixture()
def bench(monkeypatch):
    spec = importlib.util.spec_from_file_location("convert_original", BENCH)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.syspath_prepend(str(BENCH.parent))
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "REFERENCE_SHA256", hashlib.sha256(SCRIPT).hexdigest())
    return module


@pytest.fixture()
def server(bench):
    """Serves SCRIPT (or what `served` holds) at /COMMIT/PATH; counts the requests."""
    state = {"served": SCRIPT, "requests": []}
    wanted = f"/{bench.REFERENCE_COMMIT}/{bench.REFERENCE_PATH}"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            state["requests"].append(self.path)
            body = state["served"] if self.path == wanted else b"not found"
            self.send_response(200 if self.path == wanted else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state["url"] = f"http://127.0.0.1:{httpd.server_address[1]}/"
    yield state
    httpd.shutdown()
    httpd.server_close()


def test_fetched_once_checked_and_cached(bench, server, tmp_path):
    path = bench.reference_script(str(tmp_path / "cache"), server["url"])
    assert Path(path).read_bytes() == SCRIPT
    assert server["requests"] == [f"/{bench.REFERENCE_COMMIT}/{bench.REFERENCE_PATH}"]
    assert bench.REFERENCE_COMMIT[:12] in os.path.basename(path)
    # The second run reads the cache: no request.
    assert bench.reference_script(str(tmp_path / "cache"), server["url"]) == path
    assert len(server["requests"]) == 1


def test_a_different_script_is_refused_and_nothing_is_cached(bench, server, tmp_path):
    server["served"] = SCRIPT + b"# changed\n"
    with pytest.raises(SystemExit, match=r"SHA-256 [0-9a-f]{64}, not the pinned script's"):
        bench.reference_script(str(tmp_path / "cache"), server["url"])
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_a_tampered_cache_is_refused(bench, server, tmp_path):
    path = Path(bench.reference_script(str(tmp_path / "cache"), server["url"]))
    path.write_bytes(b"print('something else')\n")
    with pytest.raises(SystemExit, match=str(path)):
        bench.reference_script(str(tmp_path / "cache"), server["url"])


def test_a_local_copy_is_checked_the_same_way(bench, tmp_path):
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_bytes(SCRIPT)
    bad.write_bytes(b"print('other')\n")
    assert bench.reference_script(str(tmp_path / "cache"), "http://127.0.0.1:9/", local=str(good)) == str(good)
    with pytest.raises(SystemExit, match="bad.py: SHA-256"):
        bench.reference_script(str(tmp_path / "cache"), "http://127.0.0.1:9/", local=str(bad))
