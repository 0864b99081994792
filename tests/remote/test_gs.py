"""gs:// names (Google Cloud Storage's JSON API) against two servers on loopback.

gcp-storage-emulator (from the Python registry, pinned in requirements.txt) holds the files, uploaded
through its JSON API as a client uploads them: every command and the Python readers give the local
files' answers byte for byte, folders included. What the emulator does not do (it ignores
`generation`, sends one listing page, checks no credentials) is checked against a small stand-in of
the same API written here (FakeGcs): a folder listed in several pages, an object replaced while it is
read (the pinned generation is gone: RemoteChanged), a private bucket that wants a bearer token, and a
token that is never printed, even when the server quotes it back. FakeGcs is also the OAuth token
endpoint and the metadata server that application-default credentials are traded at.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from conftest import BIN, free_port, run_cli, stop_server, wait_for_port
from test_folders import LLAMA, make_llama_folder

BUCKET = "models"
TOKEN = "ya29.test-token-for-the-private-bucket"
CLIENT_SECRET = "client-secret-0123456789"
REFRESH_TOKEN = "1//refresh-token-secret-0123"


def clean_env(home: Path, **extra: str | None) -> dict:
    """An environment with none of the machine's Google settings, a HOME without gcloud files."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "CLOUDSDK_", "STORAGE_EMULATOR_HOST"))}
    env["HOME"] = str(home)
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


class Emulator:
    """gcp-storage-emulator on loopback, in memory, with the bucket `models`."""

    def __init__(self, tmp: Path):
        self.port = free_port()
        self.host = f"http://127.0.0.1:{self.port}"
        self.home = tmp / "home"
        self.home.mkdir()
        self.log = open(tmp / "emulator.log", "wb")
        cmd = [str(BIN / "gcp-storage-emulator"), "start", "--host", "127.0.0.1", "--port", str(self.port), "--in-memory", "--default-bucket",
               BUCKET]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        wait_for_port(self.port, self.proc, "gcp-storage-emulator")

    def env(self, **extra: str | None) -> dict:
        # host:port, the form the emulator's docs give (FakeGcs's env gives a URL)
        return clean_env(self.home, STORAGE_EMULATOR_HOST=self.host.removeprefix("http://"), **extra)

    def upload(self, local: Path, name: str) -> str:
        url = f"{self.host}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name={urllib.parse.quote(name, safe='')}"
        request = urllib.request.Request(url, data=local.read_bytes(), method="POST", headers={"Content-Type": "application/octet-stream"})
        with urllib.request.urlopen(request) as response:
            assert response.status == 200
        return f"gs://{BUCKET}/{name}"

    def stop(self) -> None:
        stop_server(self.proc, self.log)


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    server = Emulator(tmp_path_factory.mktemp("gcs"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gs_files(gcs, local_files):
    """The local files in the emulator's bucket, with their siblings: {kind: gs:// name}."""
    out = {}
    for kind in ("safetensors", "index", "gguf", "dduf"):
        path = local_files[kind]
        siblings = sorted(path.parent.iterdir()) if kind in ("index", "gguf") else [path]
        for f in siblings:
            name = gcs.upload(f, f"team a/{kind}/{f.name}")
            if f == path:
                out[kind] = name
    return out


def folder_of(name: str) -> str:
    return name.rsplit("/", 1)[0] + "/"


@pytest.mark.parametrize("kind", ["safetensors", "index", "gguf", "dduf"])
def test_validate_inspect_and_cat_match_the_local_file(gcs, local_files, gs_files, kind):
    local, remote = str(local_files[kind]), gs_files[kind]
    proc = run_cli("validate", remote, env=gcs.env())
    # The generation pins the version read: no warning that the server sends no ETag.
    assert proc.returncode == 0 and b"warning" not in proc.stderr, proc.stderr
    a = json.loads(run_cli("inspect", "--json", local).stdout)
    b = json.loads(run_cli("inspect", "--json", remote, env=gcs.env()).stdout)
    text = lambda info: json.dumps(info, ensure_ascii=False)
    assert text(a).replace(str(Path(local).parent) + "/", "") == text(b).replace(folder_of(remote), "")
    if kind != "dduf":
        for t in a["tensors"]:
            assert run_cli("cat", remote, t["name"], env=gcs.env()).stdout == run_cli("cat", local, t["name"]).stdout, t["name"]


@pytest.mark.parametrize("kind", ["safetensors", "index", "gguf"])
def test_convert_reads_the_bucket_as_the_disk(gcs, local_files, gs_files, kind, tmp_path):
    for out in ("out.safetensors", "out.gguf"):
        run_cli("convert", str(local_files[kind]), str(tmp_path / ("local-" + out)))
        run_cli("convert", gs_files[kind], str(tmp_path / ("remote-" + out)), env=gcs.env())
        assert (tmp_path / ("local-" + out)).read_bytes() == (tmp_path / ("remote-" + out)).read_bytes()


def test_python_reads_the_bucket_as_the_disk(gcs, local_files, gs_files, monkeypatch):
    from safeweights import safe_open
    from safeweights.dduf import read_dduf_file

    for k, v in gcs.env().items():
        monkeypatch.setenv(k, v)
    with safe_open(gs_files["safetensors"], "np") as r, safe_open(str(local_files["safetensors"]), "np") as l:
        assert r.keys() == l.keys() and r.metadata() == l.metadata()
        for key in l.keys():
            np.testing.assert_array_equal(r.get_tensor(key), l.get_tensor(key))
            np.testing.assert_array_equal(r.get_slice(key)[1:3], l.get_slice(key)[1:3])
    # The DDUF reader asks the library which names are remote (it used to test the prefixes itself).
    remote, local = read_dduf_file(gs_files["dduf"]), read_dduf_file(str(local_files["dduf"]))
    assert sorted(remote) == sorted(local)
    assert all(e.dduf_path == gs_files["dduf"] for e in remote.values())  # a URL stays a str, its "//" unfolded
    for name in local:
        with remote[name].as_mmap() as r, local[name].as_mmap() as l:
            assert r == l, name


def test_a_folder_converts_as_the_local_folder(gcs, tmp_path):
    folder = make_llama_folder(tmp_path / LLAMA)
    for f in sorted(folder.iterdir()):
        gcs.upload(f, f"team a/{LLAMA}/{f.name}")
    run_cli("convert", str(folder), str(tmp_path / "local.gguf"))
    run_cli("convert", f"gs://{BUCKET}/team a/{LLAMA}/", str(tmp_path / "remote.gguf"), env=gcs.env())
    assert (tmp_path / "remote.gguf").read_bytes() == (tmp_path / "local.gguf").read_bytes()


def test_names_that_are_not_objects(gcs, gs_files, tmp_path):
    def failure(*args):
        proc = run_cli(*args, env=gcs.env(), check=False)
        assert proc.returncode != 0
        return proc.stderr.decode()

    assert "names a bucket or a folder, not an object" in failure("inspect", f"gs://{BUCKET}/team a/")
    err = failure("inspect", "gs://UPPER/x.safetensors")
    assert "InvalidArgument" in err and "bucket name" in err, err
    err = failure("inspect", f"gs://{BUCKET}/team a/nothing.safetensors")
    assert "FileNotFound" in err and "HTTP 404: no such remote file" in err, err
    err = failure("convert", f"gs://{BUCKET}/no such folder/", str(tmp_path / "x.gguf"))
    assert "FileNotFound" in err and f"gs://{BUCKET}/no such folder/" in err, err


# ---- what the emulator does not do: a stand-in of the JSON API ---------------------------------------


class FakeGcs:
    """Cloud Storage's JSON API, the parts gs:// uses: object metadata, media downloads with Range that
    honour `generation` (a replaced object's old generation is gone), listings of PAGE entries a page
    with pageToken, and a bucket `private` that wants `Authorization: Bearer TOKEN` (or a token issued
    here) and quotes the header it got in its refusal (as a careless service might). Tokens are issued
    at POST /token (a refresh token traded, RFC 6749 6; `refuse` answers invalid_grant, quoting the
    form; `token_faults` answer the next requests with those statuses) and at the metadata server's GET /computeMetadata/v1/instance/service-accounts/default/token
    (with Metadata-Flavor: Google); each lives `expires_in` seconds."""

    PAGE = 2

    def __init__(self, home: Path):
        self.objects: dict[tuple[str, str], tuple[bytes, int]] = {}
        self.requests: list[tuple[str, str]] = []  # (path and query, Authorization header)
        self.token_requests: list[tuple[str, str, dict]] = []  # (method, Content-Type or Metadata-Flavor, form)
        self.issued: list[str] = []
        self.expires_in = 3600
        self.refuse = False
        self.token_faults: list[int] = []  # statuses the next token requests get instead (503, 307; 0: a reply after 3 s)
        self.token_headers: list[set[str]] = []  # the names of each token request's headers, lower-case
        self.home = home
        self.generation = 1000
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status, body=b"", headers=()):
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def issue(self):
                fake.issued.append(f"ya29.issued-{len(fake.issued)}-0123456789")
                doc = {"access_token": fake.issued[-1], "expires_in": fake.expires_in, "token_type": "Bearer"}
                self.reply(200, json.dumps(doc).encode(), [("Content-Type", "application/json")])

            def do_POST(self):
                form = urllib.parse.parse_qs(self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode(), strict_parsing=True)
                fake.token_requests.append(("POST", self.headers.get("Content-Type", ""), form))
                fake.token_headers.append({k.lower() for k in self.headers.keys()})
                if self.path != "/token":
                    return self.reply(404)
                if fake.token_faults and fake.token_faults[0] == 0:
                    fake.token_faults.pop(0)
                    time.sleep(3)
                elif fake.token_faults:
                    return self.reply(fake.token_faults.pop(0), b"", [("Location", "/token")])
                if fake.refuse:
                    body = {"error": "invalid_grant", "error_description": f"Token has been expired or revoked: {form}"}
                    return self.reply(400, json.dumps(body).encode(), [("Content-Type", "application/json")])
                self.issue()

            def do_GET(self):
                fake.requests.append((self.path, self.headers.get("Authorization", "")))
                if self.path.startswith("/computeMetadata/"):
                    fake.token_requests.append(("GET", self.headers.get("Metadata-Flavor", ""), {}))
                    fake.token_headers.append({k.lower() for k in self.headers.keys()})
                    if self.path != "/computeMetadata/v1/instance/service-accounts/default/token":
                        return self.reply(404)
                    return self.issue() if self.headers.get("Metadata-Flavor") == "Google" else self.reply(403)
                url = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(url.query)
                parts = url.path.split("/")  # "", storage, v1, b, BUCKET, o[, OBJECT]
                if parts[1:4] != ["storage", "v1", "b"] or len(parts) < 6 or parts[5] != "o":
                    return self.reply(400)
                bucket = parts[4]
                auth = self.headers.get("Authorization", "")
                if bucket == "private" and auth not in [f"Bearer {t}" for t in [TOKEN, *fake.issued]]:
                    body = json.dumps({"error": {"code": 401, "message": f"Invalid Credentials: {auth}"}}).encode()
                    return self.reply(401, body, [("Content-Type", "application/json")])
                if len(parts) == 6:
                    return self.listing(bucket, query)
                return self.object(bucket, urllib.parse.unquote(parts[6]), query)

            def listing(self, bucket, query):
                prefix = query.get("prefix", [""])[0]
                names = sorted(n for (b, n) in fake.objects if b == bucket and n.startswith(prefix))
                entries = sorted({prefix + n[len(prefix):].split("/", 1)[0] + ("/" if "/" in n[len(prefix):] else "") for n in names})
                start = int(query.get("pageToken", ["0"])[0])
                page = entries[start:start + FakeGcs.PAGE]
                doc = {"kind": "storage#objects",
                       "items": [{"name": e, "size": str(len(fake.objects[(bucket, e)][0]))} for e in page if not e.endswith("/")],
                       "prefixes": [e for e in page if e.endswith("/")]}
                if start + FakeGcs.PAGE < len(entries):
                    doc["nextPageToken"] = str(start + FakeGcs.PAGE)
                self.reply(200, json.dumps(doc).encode(), [("Content-Type", "application/json")])

            def object(self, bucket, name, query):
                if (bucket, name) not in fake.objects:
                    return self.reply(404, b'{"error": {"code": 404, "message": "No such object"}}')
                data, generation = fake.objects[(bucket, name)]
                if query.get("alt") != ["media"]:
                    doc = {"name": name, "bucket": bucket, "size": str(len(data)), "generation": str(generation)}
                    return self.reply(200, json.dumps(doc).encode(), [("Content-Type", "application/json")])
                if query.get("generation", [str(generation)])[0] != str(generation):
                    return self.reply(404, b'{"error": {"code": 404, "message": "No such object generation"}}')
                first, last = self.headers["Range"].split("=")[1].split("-")
                first, last = int(first), min(int(last), len(data) - 1)
                self.reply(206, data[first:last + 1], [("Content-Range", f"bytes {first}-{last}/{len(data)}"), ("ETag", f'"{generation}"')])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def put(self, bucket: str, name: str, data: bytes) -> str:
        self.generation += 1
        self.objects[(bucket, name)] = (data, self.generation)
        return f"gs://{bucket}/{name}"

    def env(self, **extra: str | None) -> dict:
        return clean_env(self.home, STORAGE_EMULATOR_HOST=self.host, **extra)


@pytest.fixture
def fake(tmp_path):
    (tmp_path / "home").mkdir()
    server = FakeGcs(tmp_path / "home")
    yield server
    server.server.shutdown()


def test_a_folder_of_several_pages_is_listed_whole(fake, tmp_path):
    folder = make_llama_folder(tmp_path / LLAMA)
    for f in sorted(folder.iterdir()):
        fake.put(BUCKET, f"{LLAMA}/{f.name}", f.read_bytes())
    fake.put(BUCKET, f"{LLAMA}/sub/extra.json", b"{}")  # a folder among the entries: a prefix
    run_cli("convert", str(folder), str(tmp_path / "local.gguf"))
    run_cli("convert", f"gs://{BUCKET}/{LLAMA}/", str(tmp_path / "remote.gguf"), env=fake.env())
    assert (tmp_path / "remote.gguf").read_bytes() == (tmp_path / "local.gguf").read_bytes()
    pages = [path for path, _ in fake.requests if path.startswith(f"/storage/v1/b/{BUCKET}/o?")]
    assert len(pages) == 4 and sum("pageToken=" in p for p in pages) == 3, pages  # 7 entries, 2 a page


def test_an_object_replaced_while_read_is_remote_changed(fake, tmp_path, monkeypatch):
    from safeweights import safe_open
    from safeweights.numpy import save_file

    path = tmp_path / "big.safetensors"
    save_file({"a": np.arange(1 << 18, dtype=np.float32), "z": np.ones(4, np.float32)}, str(path))
    name = fake.put(BUCKET, "big.safetensors", path.read_bytes())
    for k, v in fake.env().items():
        monkeypatch.setenv(k, v)
    with safe_open(name, "np") as r:
        fake.put(BUCKET, "big.safetensors", path.read_bytes())  # a new generation, the same bytes
        with pytest.raises(Exception) as raised:
            r.get_tensor("a")  # 1 MiB: past the block read when the file was opened
    assert getattr(raised.value, "kind", None) == "RemoteChanged", raised.value
    assert any("generation=1001" in p and "alt=media" in p for p, _ in fake.requests)


def test_a_private_bucket_wants_a_token_that_is_never_printed(fake, tmp_path, local_files):
    name = fake.put("private", "model.safetensors", local_files["safetensors"].read_bytes())
    proc = run_cli("inspect", name, env=fake.env(), check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 3 and "HTTP 401 for the file's metadata" in err and "no credentials were sent" in err, err
    assert "GOOGLE_OAUTH_ACCESS_TOKEN" in err, err

    assert run_cli("inspect", name, env=fake.env(GOOGLE_OAUTH_ACCESS_TOKEN=TOKEN)).returncode == 0
    assert fake.requests[-1][1] == f"Bearer {TOKEN}"
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    assert run_cli("inspect", name, env=fake.env(CLOUDSDK_AUTH_ACCESS_TOKEN_FILE=str(token_file))).returncode == 0

    # The caller's own Authorization header replaces the token of the environment.
    assert run_cli("inspect", "--header", f"Authorization: Bearer {TOKEN}", name, env=fake.env(GOOGLE_OAUTH_ACCESS_TOKEN="ya29.unused-token-000")).returncode == 0

    # The server quotes the wrong token back; the message does not.
    wrong = "ya29.a-wrong-token-0123456789"
    proc = run_cli("inspect", "--json", name, env=fake.env(GOOGLE_OAUTH_ACCESS_TOKEN=wrong), check=False)
    out = proc.stdout.decode() + proc.stderr.decode()
    assert proc.returncode == 3 and "HTTP 401" in out and "was sent" in out, out
    assert wrong not in out, out


@pytest.mark.parametrize("kind, how", [("service_account", "--impersonate-service-account="), ("external_account", "Google's STS")])
def test_keys_and_workload_identity_are_refused_by_name(tmp_path, kind, how):
    """A service account's key needs a signed JWT, workload identity an STS exchange: refused before any
    request, naming the file and saying how to get a token instead."""
    adc = tmp_path / "adc.json"
    adc.write_text(json.dumps({"type": kind, "private_key": "-----BEGIN PRIVATE KEY-----secret-key-0123", "client_email": "a@b.iam"}))
    (tmp_path / "home").mkdir()
    for env in (clean_env(tmp_path / "home", GOOGLE_APPLICATION_CREDENTIALS=str(adc)), clean_env(tmp_path / "home", CLOUDSDK_CONFIG=str(tmp_path))):
        if "CLOUDSDK_CONFIG" in env:  # gcloud's own file, found without being named
            adc = adc.rename(tmp_path / "application_default_credentials.json")
        proc = run_cli("inspect", "gs://models/model.safetensors", env=env, check=False)
        err = proc.stderr.decode()
        assert proc.returncode == 3 and "EnvironmentFault" in err and str(adc) in err and f'of type "{kind}" are not supported' in err, err
        assert "GOOGLE_OAUTH_ACCESS_TOKEN" in err and how in err and "secret-key" not in err, err


def write_adc(path: Path, **fields: str) -> Path:
    doc = {"type": "authorized_user", "client_id": "client-id.apps.example", "client_secret": CLIENT_SECRET, "refresh_token": REFRESH_TOKEN}
    doc.update(fields)
    path.write_text(json.dumps(doc))
    return path


def put_private_index(fake: FakeGcs, local_files) -> tuple[str, int]:
    """The sharded index and its shards in the private bucket: its name, and the number of files."""
    index = local_files["index"]
    files = sorted(index.parent.iterdir())
    for f in files:
        fake.put("private", f"sharded/{f.name}", f.read_bytes())
    return f"gs://private/sharded/{index.name}", len(files)


def metadata_requests(fake: FakeGcs) -> list[str]:
    return [p for p, _ in fake.requests if p.startswith("/storage/v1/b/private/o/") and "alt=media" not in p]


def test_a_refresh_token_is_traded_once_and_its_token_sent(fake, tmp_path, local_files):
    name, files = put_private_index(fake, local_files)
    adc = write_adc(tmp_path / "adc.json", token_uri=f"{fake.host}/token")
    proc = run_cli("inspect", "--json", "--header", "X-Meant-For: the-bucket", name, env=fake.env(GOOGLE_APPLICATION_CREDENTIALS=str(adc)))
    assert len(metadata_requests(fake)) == files > 1
    assert "x-meant-for" not in fake.token_headers[0]  # the caller's headers go to the bucket only
    # One exchange for the process, the form of RFC 6749 6, the token it gave on every request after it.
    assert fake.token_requests == [("POST", "application/x-www-form-urlencoded",
                                    {"grant_type": ["refresh_token"], "client_id": ["client-id.apps.example"],
                                     "client_secret": [CLIENT_SECRET], "refresh_token": [REFRESH_TOKEN]})]
    assert {auth for _, auth in fake.requests} == {f"Bearer {fake.issued[0]}"}
    out = proc.stdout.decode() + proc.stderr.decode()
    assert all(s not in out for s in (CLIENT_SECRET, REFRESH_TOKEN, fake.issued[0])), out


def test_a_token_about_to_expire_is_traded_again(fake, tmp_path, local_files):
    name, files = put_private_index(fake, local_files)
    fake.expires_in = 30  # under the minute of margin: every use trades again
    adc = write_adc(tmp_path / "adc.json", token_uri=f"{fake.host}/token")
    run_cli("inspect", name, env=fake.env(GOOGLE_APPLICATION_CREDENTIALS=str(adc)))
    assert len(fake.token_requests) == len(metadata_requests(fake)) == files
    assert [auth for p, auth in fake.requests if p in metadata_requests(fake)] == [f"Bearer {t}" for t in fake.issued]


def test_a_refused_refresh_is_an_environment_fault_naming_the_file(fake, tmp_path, local_files):
    name = fake.put("private", "model.safetensors", local_files["safetensors"].read_bytes())
    fake.refuse = True
    adc = write_adc(tmp_path / "adc.json", token_uri=f"{fake.host}/token")
    for json_flag in ((), ("--json",)):
        proc = run_cli("inspect", *json_flag, name, env=fake.env(GOOGLE_APPLICATION_CREDENTIALS=str(adc)), check=False)
        out = proc.stdout.decode() + proc.stderr.decode()
        assert proc.returncode == 3 and "EnvironmentFault" in out and str(adc) in out, out
        assert "HTTP 400 for the token request" in out and "gcloud auth application-default login" in out, out
        assert CLIENT_SECRET not in out and REFRESH_TOKEN not in out, out
    assert not metadata_requests(fake)  # nothing asked of the bucket without a token


def test_a_token_request_is_retried_but_not_redirected(fake, tmp_path, local_files):
    name = fake.put("private", "model.safetensors", local_files["safetensors"].read_bytes())
    env = fake.env(GOOGLE_APPLICATION_CREDENTIALS=str(write_adc(tmp_path / "adc.json", token_uri=f"{fake.host}/token")))
    fake.token_faults = [503]
    assert run_cli("inspect", name, env=env).returncode == 0
    assert len(fake.token_requests) == 2 and fake.token_requests[0] == fake.token_requests[1]  # the form sent again, whole
    # A POST's body is not sent on to where a redirect points.
    fake.token_faults = [307]
    proc = run_cli("inspect", name, env=env, check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 3 and "HttpError" in err and "HTTP 307 redirect for a POST: not followed" in err and str(tmp_path / "adc.json") in err, err
    assert len(fake.token_requests) == 3
    # The deadline of every request bounds the exchange too.
    fake.token_faults = [0]
    proc = run_cli("inspect", "--timeout", "1", name, env=env, check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 3 and "Timeout" in err and "the token request missed its deadline of 1 s" in err, err


def test_unusable_authorized_user_files_are_refused_before_any_request(fake, tmp_path):
    for fields, words in [({"refresh_token": ""}, 'without a string "client_id", "client_secret" and "refresh_token"'),
                          ({"token_uri": "http://example.com/token"}, 'a "token_uri" that is not an https URL')]:
        adc = write_adc(tmp_path / "adc.json", **fields)
        proc = run_cli("inspect", "gs://private/model.safetensors", env=fake.env(GOOGLE_APPLICATION_CREDENTIALS=str(adc)), check=False)
        err = proc.stderr.decode()
        assert proc.returncode == 3 and "EnvironmentFault" in err and str(adc) in err and words in err, err
        assert CLIENT_SECRET not in err, err
    assert not fake.requests and not fake.token_requests


def test_the_order_of_the_credentials(fake, tmp_path, local_files):
    name = fake.put("private", "model.safetensors", local_files["safetensors"].read_bytes())
    fake.refuse = True  # a refresh would fail: each source before the file must keep it from being asked
    adc = write_adc(tmp_path / "adc.json", token_uri=f"{fake.host}/token")
    metadata = fake.host.removeprefix("http://")
    env = fake.env(GOOGLE_APPLICATION_CREDENTIALS=str(adc), GCE_METADATA_HOST=metadata)
    assert run_cli("inspect", "--header", f"Authorization: Bearer {TOKEN}", name, env=env).returncode == 0
    assert run_cli("inspect", name, env={**env, "GOOGLE_OAUTH_ACCESS_TOKEN": TOKEN}).returncode == 0
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    assert run_cli("inspect", name, env={**env, "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token_file)}).returncode == 0
    assert fake.token_requests == []
    # The file before the metadata server.
    assert run_cli("inspect", name, env=env, check=False).returncode == 3
    assert [method for method, _, _ in fake.token_requests] == ["POST"]
    # gcloud's own file is not looked for under an emulator: anonymous, and refused by the bucket.
    (tmp_path / "gcloud").mkdir()
    write_adc(tmp_path / "gcloud" / "application_default_credentials.json", token_uri=f"{fake.host}/token")
    proc = run_cli("inspect", name, env=fake.env(CLOUDSDK_CONFIG=str(tmp_path / "gcloud")), check=False)
    assert proc.returncode == 3 and "no credentials were sent" in proc.stderr.decode(), proc.stderr
    assert len(fake.token_requests) == 1


def test_the_metadata_server_when_named(fake, tmp_path, local_files):
    name, files = put_private_index(fake, local_files)
    # Not named: no request to any metadata server, anonymous.
    assert run_cli("inspect", name, env=fake.env(), check=False).returncode == 3 and not fake.token_requests
    proc = run_cli("inspect", "--json", name, env=fake.env(GCE_METADATA_HOST=fake.host.removeprefix("http://")))
    assert fake.token_requests == [("GET", "Google", {})]  # one token for every file
    assert fake.requests[-1][1] == f"Bearer {fake.issued[0]}"
    assert fake.issued[0] not in proc.stdout.decode() + proc.stderr.decode()
