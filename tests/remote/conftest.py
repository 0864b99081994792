"""Fixtures of the remote-sources suite: a real S3-compatible server on loopback, seeded by real clients.

The server is moto in server mode with IAM authentication switched on (INITIAL_NO_AUTH_ACTION_COUNT):
the first three requests create a user, its policy and its access key; every later request must carry a
valid AWS Signature V4 of that key, so a wrong secret is refused as AWS refuses it. Files are uploaded
with boto3 (upload_file) and the AWS CLI (`aws s3 cp`), as users put them there.

Environment: SAFEWEIGHTS_CLI (the CLI), PYTHONPATH (the built package); nothing from the network.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

CLI = os.environ.get("SAFEWEIGHTS_CLI", "safeweights")
BIN = Path(sys.executable).parent
REGION = "us-east-1"
BUCKET = "models"
OTHER_REGION_BUCKET = "models-eu"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, what: str) -> None:
    # A TCP connect, not a request: moto counts requests against the unauthenticated allowance.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on port {port} within 60 s")


class S3Server:
    """A running moto server, an access key it knows, and clients bound to it."""

    def __init__(self, tmp: Path):
        import boto3

        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3", MOTO_PORT=str(self.port))
        self.log = open(tmp / "moto.log", "wb")
        self.proc = subprocess.Popen([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(self.port)], stdout=self.log, stderr=subprocess.STDOUT, env=env)
        wait_for_port(self.port, self.proc, "moto_server")
        setup = dict(endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id="setup", aws_secret_access_key="setup")
        iam = boto3.client("iam", **setup)
        iam.create_user(UserName="loader")
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="loader", PolicyName="all", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="loader")["AccessKey"]
        self.access_key_id = key["AccessKeyId"]
        self.secret_access_key = key["SecretAccessKey"]
        self.client = self.boto_client()
        self.client.create_bucket(Bucket=BUCKET)
        self.client.create_bucket(Bucket=OTHER_REGION_BUCKET, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})

    def boto_client(self, region: str = REGION):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=region, aws_access_key_id=self.access_key_id,
                            aws_secret_access_key=self.secret_access_key)

    def env(self, **extra: str) -> dict:
        """The environment of a client of this server: credentials and endpoint the standard way, and a
        HOME without ~/.aws files, so nothing of the machine's own configuration leaks in."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ACCESS_KEY_ID=self.access_key_id, AWS_SECRET_ACCESS_KEY=self.secret_access_key, AWS_ENDPOINT_URL=self.endpoint,
                   AWS_REGION=REGION, HOME=str(Path(self.log.name).parent / "home"))
        env.update(extra)
        return {k: v for k, v in env.items() if v is not None}

    def upload(self, local: Path, key: str, bucket: str = BUCKET) -> str:
        self.client.upload_file(str(local), bucket, key)
        return f"s3://{bucket}/{key}"

    def upload_with_aws_cli(self, local: Path, key: str) -> str:
        url = f"s3://{BUCKET}/{key}"
        subprocess.run([str(BIN / "aws"), "s3", "cp", "--only-show-errors", str(local), url], check=True, env=self.env())
        return url

    def stop(self) -> None:
        stop_server(self.proc, self.log)


def stop_server(proc: subprocess.Popen, log) -> None:
    """Ends a server this suite started, and closes its log."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    server = S3Server(tmp_path_factory.mktemp("s3"))
    (Path(server.log.name).parent / "home").mkdir()
    yield server
    server.stop()


def run_cli(*args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([CLI, *args], capture_output=True, env=env, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"safeweights {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}")
    return proc


def converts_from_s3_as_local(s3: "S3Server", folder: Path, prefix: str, tmp_path: Path, types: tuple[str, ...],
                              local_options: tuple[tuple[str, ...], ...] = ((),)) -> None:
    """Uploads every file of `folder` under PREFIX/FOLDER-NAME/, then converts the folder to each --type
    locally (once per entry of `local_options`: extra CLI arguments) and from its s3:// name: every
    output must hold the same bytes."""
    for f in sorted(folder.iterdir()):
        s3.upload(f, f"{prefix}/{folder.name}/{f.name}")
    for type_ in types:
        local = []
        for k, extra in enumerate(local_options):
            local.append(tmp_path / f"local{k}-{type_}.gguf")
            run_cli("convert", str(folder), str(local[-1]), "--type", type_, *extra)
        remote = tmp_path / f"remote-{type_}.gguf"
        run_cli("convert", f"s3://{BUCKET}/{prefix}/{folder.name}/", str(remote), "--type", type_, env=s3.env())
        expected = local[0].read_bytes()
        for out in (*local[1:], remote):
            assert out.read_bytes() == expected, (type_, out.name)


def torch_python() -> str | None:
    """A Python with torch, to write a PyTorch checkpoint (Debian's python3-torch on CI machines)."""
    for candidate in ("/usr/bin/python3", sys.executable):
        if subprocess.run([candidate, "-c", "import torch"], capture_output=True).returncode == 0:
            return candidate
    return None


@pytest.fixture(scope="session")
def local_files(tmp_path_factory):
    """One file of every kind the readers take, made here: {kind: path}. The split GGUF and the sharded
    index are several files; their first file (or index) is the one named."""
    from safeweights.numpy import save_file

    d = tmp_path_factory.mktemp("local")
    rng = np.random.default_rng(7)
    tensors = {
        "model.embed.weight": rng.standard_normal((64, 32)).astype(np.float32),
        "model.layers.0.attn.weight": rng.standard_normal((32, 32)).astype(np.float16),
        "model.layers.0.norm.weight": np.ones(32, np.float32),
        "model.layers.1.mlp.weight": rng.standard_normal((96, 32)).astype(np.float32),
    }
    files = {}
    files["safetensors"] = d / "model.safetensors"
    save_file(tensors, str(files["safetensors"]), metadata={"format": "pt"})
    (d / "sharded").mkdir()
    run_cli("convert", str(files["safetensors"]), str(d / "sharded" / "model.safetensors.index.json"), "--split-max-tensors", "2")
    files["index"] = d / "sharded" / "model.safetensors.index.json"
    (d / "split").mkdir()
    run_cli("convert", str(files["safetensors"]), str(d / "split" / "model.gguf"), "--split-max-tensors", "2")
    files["gguf"] = sorted((d / "split").glob("model-00001-of-*.gguf"))[0]
    pipe = d / "pipe"
    (pipe / "unet").mkdir(parents=True)
    (pipe / "model_index.json").write_text(json.dumps({"_class_name": "Tiny", "unet": ["diffusers", "UNet2DModel"]}))
    (pipe / "unet" / "config.json").write_text("{}")
    save_file({"w": tensors["model.embed.weight"]}, str(pipe / "unet" / "diffusion_pytorch_model.safetensors"))
    files["dduf"] = d / "tiny.dduf"
    run_cli("pack", str(pipe), str(files["dduf"]))
    torch_py = torch_python()
    if torch_py is not None:
        files["pytorch"] = d / "model.pt"
        script = ("import torch, numpy as np, sys\n"
                  "g = torch.Generator().manual_seed(3)\n"
                  "sd = {'a': torch.randn(16, 8, generator=g), 'b': torch.arange(10, dtype=torch.int64), 'c': torch.randn(4, 4, generator=g).half()}\n"
                  "sd['view'] = sd['a'][2:6]\n"
                  "torch.save({'state_dict': sd}, sys.argv[1])\n")
        subprocess.run([torch_py, "-c", script, str(files["pytorch"])], check=True)
    return files


@pytest.fixture(scope="session")
def remote_files(s3, local_files):
    """The same files in the bucket under keys with spaces and non-ASCII characters: {kind: s3 URL}."""
    out = {}
    prefix = "team a/ünïcode+plus=eq/"
    for kind, path in local_files.items():
        siblings = [path]
        if kind == "index":
            siblings = sorted(path.parent.iterdir())
        elif kind == "gguf":
            siblings = sorted(path.parent.glob("model-*.gguf"))
        for f in siblings:
            key = prefix + kind + "/" + f.name
            url = s3.upload_with_aws_cli(f, key) if kind == "safetensors" else s3.upload(f, key)
            if f == path:
                out[kind] = url
    return out

