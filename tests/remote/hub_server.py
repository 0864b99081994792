"""A local stand-in for the Hugging Face Hub's file endpoints, over HTTPS, as the Hub documents them.

- ``GET /[datasets/|spaces/]ORG/REPO/resolve/REVISION/PATH`` (REVISION percent-encoded): a small
  (non-LFS) file is answered here, 200/206 with ``ETag`` and ``X-Repo-Commit``; a large (LFS) file is a
  ``302`` to a storage host (another origin: another port) with ``X-Linked-Etag`` and ``X-Linked-Size``,
  and the storage host serves the bytes with Range.
- ``GET /api/{models,datasets,spaces}/ORG/REPO/tree/REVISION[/PATH]``: a folder's direct children (files
  with path, size, oid; directories), ``page_size`` a page, the next page in a ``Link: <URL>; rel="next"``
  header.
- Unknown repositories get 404 with ``X-Error-Code: RepoNotFound``, unknown files ``EntryNotFound``, a
  repository marked gated 401 with ``X-Error-Code: GatedRepo`` unless the right token is sent.

Every request's Authorization header is recorded per host, so tests can check that the token reaches the
Hub and never the storage host.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import ssl
import subprocess
import threading
import urllib.parse
from pathlib import Path

LFS_THRESHOLD = 1024  # files larger than this are "LFS" files, served from the storage host


def make_certificate(folder: Path) -> tuple[Path, Path]:
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True)
    return key, cert


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


def hub_env(hub: "Hub", token: str, **extra: str | None) -> dict:
    """The environment of a client of `hub`: its endpoint, `token`, its CA, and no HF_/AWS_ settings or
    token file of the machine's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "AWS_"))}
    env.update(HF_ENDPOINT=hub.endpoint, HF_TOKEN=token, CURL_CA_BUNDLE=str(hub.cert), HOME="/nonexistent")
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def url_path(path: str) -> str:
    return urllib.parse.urlsplit(path).path


def _serve_bytes(handler, data: bytes, headers: dict) -> None:
    """200 or 206 for a Range of `data`, with the given headers."""
    rng = handler.headers.get("Range")
    status, body = 200, data
    if rng and rng.startswith("bytes="):
        first, _, last = rng[6:].partition("-")
        a = int(first)
        b = min(int(last) if last else len(data) - 1, len(data) - 1)
        if a >= len(data):
            handler.send_response(416)
            handler.send_header("Content-Range", f"bytes */{len(data)}")
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        status, body = 206, data[a:b + 1]
        headers = dict(headers, **{"Content-Range": f"bytes {a}-{b}/{len(data)}"})
    handler.send_response(status)
    for k, v in headers.items():
        handler.send_header(k, v)
    handler.send_header("Accept-Ranges", "bytes")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)


class Hub:
    """The Hub (one origin) and its storage host (another origin), both HTTPS on loopback."""

    def __init__(self, folder: Path):
        self.key, self.cert = make_certificate(folder)
        self.repos: dict[tuple[str, str], dict[str, dict[str, bytes]]] = {}  # (type, id) -> revision -> path -> bytes
        self.gated: dict[tuple[str, str], str] = {}  # (type, id) -> the token that opens it
        self.auth_seen: dict[str, list[str | None]] = {"hub": [], "storage": []}
        self.requests: dict[str, int] = {"hub": 0, "storage": 0}
        self.blobs: dict[str, bytes] = {}
        self.page_size = 1000  # tree entries per page
        self.next_page_origin: str | None = None  # where Link sends the next tree page (None: the Hub itself)
        self._lock = threading.Lock()
        self.hub = self._start(self._hub_handler())
        self.storage = self._start(self._storage_handler())
        self.endpoint = f"https://127.0.0.1:{self.hub.server_address[1]}"
        self.storage_origin = f"https://127.0.0.1:{self.storage.server_address[1]}"

    def add(self, repo_id: str, files: dict[str, bytes], revision: str = "main", repo_type: str = "model") -> None:
        self.repos.setdefault((repo_type, repo_id), {})[revision] = dict(files)

    def _start(self, handler) -> _Server:
        server = _Server(("127.0.0.1", 0), handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(self.cert), str(self.key))
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def _record(self, host: str, handler) -> None:
        with self._lock:
            self.requests[host] += 1
            self.auth_seen[host].append(handler.headers.get("Authorization"))

    def _hub_handler(self):
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def error(self, status: int, code: str, message: str) -> None:
                body = json.dumps({"error": message}).encode()
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", message)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_HEAD(self):  # noqa: N802
                self.do_GET()

            def do_GET(self):  # noqa: N802
                hub._record("hub", self)
                url = urllib.parse.urlsplit(self.path)
                parts = url.path.lstrip("/").split("/")
                if parts[0] == "api" and len(parts) > 1 and parts[1] in ("models", "datasets", "spaces"):
                    return self.tree(parts, url.query)
                repo_type = "model"
                if parts and parts[0] in ("datasets", "spaces"):
                    repo_type = parts.pop(0)[:-1]
                if len(parts) < 5 or parts[2] != "resolve":
                    return self.error(404, "EntryNotFound", "not a resolve URL")
                repo = (repo_type, parts[0] + "/" + parts[1])
                revision = urllib.parse.unquote(parts[3])
                path = urllib.parse.unquote("/".join(parts[4:]))
                if repo not in hub.repos:
                    return self.error(404, "RepoNotFound", "Repository not found")
                if repo in hub.gated and self.headers.get("Authorization") != f"Bearer {hub.gated[repo]}":
                    return self.error(401, "GatedRepo", "Access to this model is restricted")
                if revision not in hub.repos[repo]:
                    return self.error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                files = hub.repos[repo][revision]
                if path not in files:
                    return self.error(404, "EntryNotFound", f"{path} does not exist on {revision}")
                data = files[path]
                commit = hashlib.sha1(repr(sorted(files)).encode()).hexdigest()
                if len(data) <= LFS_THRESHOLD:
                    etag = '"' + hashlib.sha1(data).hexdigest() + '"'
                    return _serve_bytes(self, data, {"ETag": etag, "X-Repo-Commit": commit})
                sha = hashlib.sha256(data).hexdigest()
                hub.blobs[sha] = data
                self.send_response(302)
                self.send_header("Location", f"{hub.storage_origin}/repos/{sha}?X-Amz-Signature=abc&response-content-disposition=attachment")
                self.send_header("X-Linked-Etag", f'"{sha}"')
                self.send_header("X-Linked-Size", str(len(data)))
                self.send_header("X-Repo-Commit", commit)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def tree(self, parts, query):
                # /api/{models,datasets,spaces}/ORG/REPO/tree/REVISION[/PATH][?cursor=N]: the folder's
                # direct children, files and directories, hub.page_size a page, the next page named by
                # a Link header (rel="next"), as the Hub pages its tree.
                if len(parts) < 6 or parts[4] != "tree":
                    return self.error(404, "EntryNotFound", "not a tree URL")
                repo = ({"models": "model", "datasets": "dataset", "spaces": "space"}[parts[1]], parts[2] + "/" + parts[3])
                revision = urllib.parse.unquote(parts[5])
                folder = urllib.parse.unquote("/".join(parts[6:]))
                if repo not in hub.repos:
                    return self.error(404, "RepoNotFound", "Repository not found")
                if repo in hub.gated and self.headers.get("Authorization") != f"Bearer {hub.gated[repo]}":
                    return self.error(401, "GatedRepo", "Access to this model is restricted")
                if revision not in hub.repos[repo]:
                    return self.error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                prefix = folder + "/" if folder else ""
                children = {}
                for p, d in hub.repos[repo][revision].items():
                    if not p.startswith(prefix):
                        continue
                    rest = p[len(prefix):]
                    name, sep, _ = rest.partition("/")
                    if sep:
                        children[prefix + name] = {"type": "directory", "oid": "0" * 40, "size": 0, "path": prefix + name}
                    else:
                        children[p] = {"type": "file", "oid": hashlib.sha1(d).hexdigest(), "size": len(d), "path": p}
                if not children:
                    return self.error(404, "EntryNotFound", f"{folder} does not exist on {revision}")
                listing = [children[k] for k in sorted(children)]
                start = int(urllib.parse.parse_qs(query).get("cursor", ["0"])[0])
                page = listing[start:start + hub.page_size]
                body = json.dumps(page).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if start + hub.page_size < len(listing):
                    base = hub.next_page_origin or hub.endpoint
                    self.send_header("Link", f'<{base}{url_path(self.path)}?cursor={start + hub.page_size}>; rel="next"')
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def _storage_handler(self):
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                hub._record("storage", self)
                sha = urllib.parse.urlsplit(self.path).path.rsplit("/", 1)[-1]
                if sha not in hub.blobs:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                _serve_bytes(self, hub.blobs[sha], {"ETag": f'"{sha}"'})

        return Handler

    def stop(self) -> None:
        self.hub.shutdown()
        self.storage.shutdown()
