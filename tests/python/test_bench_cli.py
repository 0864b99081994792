"""`safeweights bench` (README): the JSON fields it promises, for host loads and for the device pipeline
(`--device host`, and `--device cuda:0`: a DeviceError without a GPU runtime, verified with one)."""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import build_file

CLI = os.environ.get("SAFEWEIGHTS_CLI")
pytestmark = pytest.mark.skipif(not CLI, reason="SAFEWEIGHTS_CLI is not set")


def bench(*args):
    r = subprocess.run([CLI, "bench", "--json", "--passes", "1", *map(str, args)], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


@pytest.fixture()
def model(tmp_path):
    rng = np.random.default_rng(3)
    tensors = [(f"t{i}", "F32", [64, 256], rng.standard_normal((64, 256)).astype("<f4").tobytes()) for i in range(12)]
    path = tmp_path / "m.safetensors"
    path.write_bytes(build_file(tensors))
    return path


# The JSON prints ratios and rates with three decimals, each rounded: the printed ratio must lie within
# what the printed rates allow once their rounding (half a unit in the third decimal) is undone. A slow
# reference on a loaded machine (0.042 GB/s) makes that interval wide, as it should.
def close(printed, num, den):
    h = 0.0005
    low = (num - h) / (den + h)
    high = (num + h) / (den - h) if den > h else float("inf")
    return low - h <= printed <= high + h


def test_host_bench_reports_both_physical_references(model):
    code, out, err = bench(model)
    assert code == 0, err
    r = json.loads(out)
    for key in ("file", "bytes", "open_ms", "load_gbps", "pread_gbps", "read_gbps", "ratio", "ratio_pread"):
        assert key in r, key
    assert r["bytes"] == os.path.getsize(model)
    assert close(r["ratio"], r["load_gbps"], r["read_gbps"]), r
    assert close(r["ratio_pread"], r["load_gbps"], r["pread_gbps"]), r


@pytest.mark.parametrize("strategy", ["staging", "register", "hybrid", "auto"])
def test_device_bench_on_the_host_device_is_verified(model, strategy):
    code, out, err = bench("--device", "host", "--strategy", strategy, model)
    assert code == 0, err
    r = json.loads(out)
    for key in ("file", "bytes", "device", "load_gbps", "h2d_pinned_gbps", "ratio", "verified"):
        assert key in r, key
    assert r["device"] == "host" and r["verified"] is True
    assert close(r["ratio"], r["load_gbps"], r["h2d_pinned_gbps"]), r


def test_device_bench_on_cuda(model):
    code, out, err = bench("--device", "cuda:0", model)
    if code != 0:
        assert code == 3 and "DeviceError" in err, err  # no GPU or no CUDA runtime here: said so, by kind, an environment fault
        return
    r = json.loads(out)
    assert r["device"] == "cuda:0" and r["verified"] is True


def test_gpudirect_on_a_device_that_cannot_read_files_says_so(model):
    # The host device reads no files itself (only tests stand pread in for cuFile): a clear refusal.
    code, out, err = bench("--device", "host", "--strategy", "gpudirect", model)
    assert code == 1 and out == "" and "NotSupported" in err and "cannot read files" in err, err


def test_a_bad_device_name_is_refused(model):
    code, _, err = bench("--device", "gpu0", model)
    assert code == 2 and "InvalidArgument" in err


def test_the_gpu_loading_script_parses():
    """bench/gpu_loading.sh runs only on the GPU machine; here at least bash must accept it."""
    script = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "gpu_loading.sh")
    r = subprocess.run(["bash", "-n", script], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def test_rates_of_nothing_are_null_never_nan(tmp_path):
    # A file without tensors loads 0 bytes in 0 s: its rates and ratio have no value. The JSON says null
    # (it used to print `-nan`, which no JSON reader accepts).
    empty = tmp_path / "empty.safetensors"
    empty.write_bytes(build_file([], metadata={"a": "b"}))
    code, out, err = bench("--device", "host", empty)
    assert code == 0, err
    r = json.loads(out)
    assert r["bytes"] == 0 and r["ratio"] is None and r["verified"] is True, out
