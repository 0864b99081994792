"""s3:// names read by a real S3-compatible server with signature checks (moto), seeded by boto3 and the
AWS CLI: every command and the Python readers give byte-identical answers to the local files, and every
refusal is named as S3 names it, without a secret in sight."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import BUCKET, CLI, OTHER_REGION_BUCKET, run_cli

KINDS = ["safetensors", "index", "gguf", "dduf", "pytorch"]


def need(local_files, kind):
    if kind not in local_files:
        pytest.skip(f"no {kind} file: no Python with torch here to write a PyTorch checkpoint")


def tensor_names(path: str, env: dict | None = None) -> list[str]:
    info = json.loads(run_cli("inspect", "--json", path, env=env).stdout)
    if info["format"] == "dduf":
        return [e["name"] for e in info["entries"]]
    return [t["name"] for t in info["tensors"]]


@pytest.mark.parametrize("kind", KINDS)
def test_validate_and_inspect_match_the_local_file(s3, local_files, remote_files, kind):
    need(local_files, kind)
    local, remote = str(local_files[kind]), remote_files[kind]
    assert run_cli("validate", remote, env=s3.env()).returncode == 0
    a = json.loads(run_cli("inspect", "--json", local).stdout)
    b = json.loads(run_cli("inspect", "--json", remote, env=s3.env()).stdout)
    # Split GGUF and sharded indexes name their files: the same names, under another folder.
    text = lambda info: json.dumps(info, ensure_ascii=False)
    assert text(a).replace(str(Path(local).parent) + "/", "") == text(b).replace(remote.rsplit("/", 1)[0] + "/", "")


@pytest.mark.parametrize("kind", KINDS)
def test_cat_gives_the_same_bytes(s3, local_files, remote_files, kind):
    need(local_files, kind)
    local, remote = str(local_files[kind]), remote_files[kind]
    names = tensor_names(local)
    assert names
    for name in names:
        args = [name] if kind != "dduf" or not name.endswith(".safetensors") else [name]
        assert run_cli("cat", remote, *args, env=s3.env()).stdout == run_cli("cat", local, *args).stdout, name
    if kind != "dduf":
        sliced = ["--slice", "1:3"]
        assert run_cli("cat", *sliced, remote, names[0], env=s3.env()).stdout == run_cli("cat", *sliced, local, names[0]).stdout


@pytest.mark.parametrize("kind", ["safetensors", "index", "gguf", "pytorch"])
def test_convert_and_diff_read_the_bucket_as_the_disk(s3, local_files, remote_files, kind, tmp_path):
    need(local_files, kind)
    local, remote = str(local_files[kind]), remote_files[kind]
    for out_name in ("out.safetensors", "out.gguf"):
        run_cli("convert", local, str(tmp_path / ("local-" + out_name)))
        run_cli("convert", remote, str(tmp_path / ("remote-" + out_name)), env=s3.env())
        assert (tmp_path / ("local-" + out_name)).read_bytes() == (tmp_path / ("remote-" + out_name)).read_bytes()
    same = run_cli("diff", remote, local, env=s3.env(), check=False)
    assert same.returncode == 0, same.stderr


def test_python_readers_read_the_bucket_as_the_disk(s3, local_files, remote_files, monkeypatch):
    from safeweights import safe_open
    from safeweights.dduf import read_dduf_file
    from safeweights.numpy import load_file

    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)
    for kind in ("safetensors", "index"):
        local, remote = str(local_files[kind]), remote_files[kind]
        if kind == "safetensors":
            with safe_open(remote, "np") as r, safe_open(local, "np") as l:
                assert r.keys() == l.keys()
                assert r.metadata() == l.metadata()
                for name in l.keys():
                    np.testing.assert_array_equal(r.get_tensor(name), l.get_tensor(name))
                    np.testing.assert_array_equal(r.get_slice(name)[1:3], l.get_slice(name)[1:3])
            a, b = load_file(remote), load_file(local)
            assert a.keys() == b.keys()
            for name in a:
                np.testing.assert_array_equal(a[name], b[name])
    entries_r = read_dduf_file(remote_files["dduf"])
    entries_l = read_dduf_file(str(local_files["dduf"]))
    assert sorted(entries_r) == sorted(entries_l)
    for name in entries_l:
        with entries_r[name].as_mmap() as r, entries_l[name].as_mmap() as l:
            assert r == l, name


def test_python_format_functions_read_the_bucket_as_the_disk(s3, local_files, remote_files, monkeypatch):
    from safeweights import formats

    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)
    for kind in KINDS:
        if kind not in local_files:
            continue
        assert formats.detect_format(remote_files[kind]) == formats.detect_format(str(local_files[kind])), kind
        assert formats.validate(remote_files[kind]) == formats.validate(str(local_files[kind])), kind


def test_wrong_secret_is_refused_by_s3_and_never_printed(s3, remote_files):
    proc = run_cli("inspect", remote_files["safetensors"], env=s3.env(AWS_SECRET_ACCESS_KEY="wrong-secret-value"), check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 3  # HttpError: the environment (docs/CLI.md, "Exit status")
    assert "HttpError: HTTP 403" in err and "SignatureDoesNotMatch" in err, err
    assert "wrong-secret-value" not in err and s3.secret_access_key not in err


def test_unknown_access_key_is_named_by_s3(s3, remote_files):
    proc = run_cli("inspect", remote_files["safetensors"], env=s3.env(AWS_ACCESS_KEY_ID="AKIAUNKNOWNKEY000000"), check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 3
    assert "HTTP 403" in err and "InvalidAccessKeyId" in err, err


def test_missing_credentials_say_where_they_were_looked_for(s3, remote_files):
    env = s3.env(AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None)
    proc = run_cli("inspect", remote_files["safetensors"], env=env, check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 3, err  # EnvironmentFault: the environment's fault, not the input's
    assert "EnvironmentFault: no AWS credentials" in err, err
    assert "AWS_ACCESS_KEY_ID" in err and ".aws/credentials" in err and "--s3-anonymous" in err, err


def test_anonymous_requests_are_unsigned(s3, remote_files):
    # The bucket is private: S3 refuses an unsigned request, which shows none of the credentials in
    # the environment were sent.
    proc = run_cli("inspect", "--s3-anonymous", remote_files["safetensors"], env=s3.env(), check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 3
    assert "HTTP 403" in err, err


def test_missing_key_and_bucket_are_file_not_found(s3):
    proc = run_cli("inspect", f"s3://{BUCKET}/no such key.safetensors", env=s3.env(), check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 1
    assert f"s3://{BUCKET}/no such key.safetensors: FileNotFound" in err and "NoSuchKey" in err, err
    proc = run_cli("inspect", "s3://no-such-bucket/k.safetensors", env=s3.env(), check=False)
    err = proc.stderr.decode()
    assert "FileNotFound" in err and "NoSuchBucket" in err, err


def test_profiles_from_the_shared_files(s3, remote_files, tmp_path):
    (tmp_path / "credentials").write_text(f"[team]\naws_access_key_id = {s3.access_key_id}\naws_secret_access_key = {s3.secret_access_key}\n")
    (tmp_path / "config").write_text(f"[profile team]\nregion = us-east-1\nendpoint_url = {s3.endpoint}\n")
    env = s3.env(AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None, AWS_ENDPOINT_URL=None, AWS_REGION=None,
                 AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "credentials"), AWS_CONFIG_FILE=str(tmp_path / "config"))
    run_cli("validate", "--s3-profile", "team", remote_files["safetensors"], env=env)
    env["AWS_PROFILE"] = "team"
    run_cli("validate", remote_files["safetensors"], env=env)


def test_session_token_is_sent_signed(s3, local_files, tmp_path):
    # moto's IAM check knows no temporary keys, so a recording server shows what a request carries:
    # the token in x-amz-security-token, and that header among the SigV4 SignedHeaders.
    import http.server
    import threading

    seen = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the http.server API)
            seen.append(dict(self.headers))
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = s3.env(AWS_SESSION_TOKEN="the-session-token", AWS_ENDPOINT_URL=f"http://127.0.0.1:{server.server_address[1]}")
        proc = run_cli("inspect", "s3://bucket/k.safetensors", env=env, check=False)
    finally:
        server.shutdown()
    assert proc.returncode == 3 and b"HTTP 403" in proc.stderr
    assert "the-session-token" not in proc.stderr.decode()
    headers = {k.lower(): v for k, v in seen[0].items()}
    assert headers["x-amz-security-token"] == "the-session-token"
    auth = headers["authorization"]
    assert auth.startswith(f"AWS4-HMAC-SHA256 Credential={s3.access_key_id}/") and "/us-east-1/s3/aws4_request" in auth, auth
    signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"} <= set(signed), signed
    assert s3.secret_access_key not in str(seen)


def test_bucket_in_another_region_as_aws_answers_it(s3):
    # AWS answers a request for a bucket of another region with 301 PermanentRedirect and no Location
    # (or 400 AuthorizationHeaderMalformed naming the region); moto does not, so a server answers here as
    # AWS documents it, and the message must name the region to use.
    import http.server
    import threading

    class Aws(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>PermanentRedirect</Code><Message>The bucket you are '
                    b'attempting to access must be addressed using the specified endpoint.</Message><Bucket>models-eu</Bucket>'
                    b'<Endpoint>models-eu.s3.eu-west-1.amazonaws.com</Endpoint></Error>')
            self.send_response(301)
            self.send_header("x-amz-bucket-region", "eu-west-1")
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Aws)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = s3.env(AWS_ENDPOINT_URL=f"http://127.0.0.1:{server.server_address[1]}")
        proc = run_cli("inspect", "s3://models-eu/k.safetensors", env=env, check=False)
    finally:
        server.shutdown()
    err = proc.stderr.decode()
    assert proc.returncode == 3
    assert "PermanentRedirect" in err and "the bucket is in region eu-west-1: set AWS_REGION=eu-west-1" in err, err


def test_bucket_in_another_region(s3, local_files):
    url = s3.upload(local_files["safetensors"], "m.safetensors", bucket=OTHER_REGION_BUCKET)
    ok = run_cli("validate", "--s3-region", "eu-west-1", url, env=s3.env(), check=False)
    assert ok.returncode == 0, ok.stderr.decode()


def test_keys_with_every_kind_of_character(s3, local_files):
    for key in ("a b/c d.safetensors", "ü/ñ/模型.safetensors", "odd/!$&'()*+,;=:@~.safetensors", "q/what?#hash.safetensors", "%41/%zz.safetensors"):
        url = s3.upload(local_files["safetensors"], key)
        assert run_cli("cat", url, "model.layers.0.norm.weight", env=s3.env()).stdout == np.ones(32, np.float32).tobytes(), key


def test_bucket_or_folder_names_are_not_objects(s3):
    for url in (f"s3://{BUCKET}", f"s3://{BUCKET}/", f"s3://{BUCKET}/team a/"):
        proc = run_cli("inspect", url, env=s3.env(), check=False)
        assert proc.returncode == 2 and "not an object" in proc.stderr.decode(), (url, proc.stderr)


def test_bench_times_the_remote_load_and_its_one_connection_reference(s3, local_files, remote_files):
    tensors = json.loads(run_cli("inspect", "--json", str(local_files["safetensors"])).stdout)["tensors"]
    want = sum(t["data_offsets"][1] - t["data_offsets"][0] for t in tensors)
    proc = run_cli("bench", "--json", "--passes", "1", "--connections", "3", "--part-mib", "1", remote_files["safetensors"], env=s3.env())
    r = json.loads(proc.stdout)
    # The load keeps the file's layout from the first tensor, its start rounded down to 4 KiB.
    assert want <= r["tensor_bytes"] < want + 4096 and r["tensors"] == len(tensors)
    assert r["connections"] == 3 and r["part_bytes"] == 1 << 20
    assert r["load_gbps"] > 0 and r["one_connection_gbps"] > 0
    refused = run_cli("bench", "--device", "cuda", remote_files["safetensors"], env=s3.env(), check=False)
    assert refused.returncode == 2 and b"not benchmarked yet" in refused.stderr
