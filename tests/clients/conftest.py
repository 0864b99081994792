"""The real clients' suite (issue 24): what users run — transformers, diffusers, accelerate, gguf-py and
llama.cpp (through llama-cpp-python, built from source) — against what safeweights reads and writes.

Runs in the clients' venv (tests/clients/requirements.txt, made by scripts/test.sh with
`scripts/python-env.sh --cached venv-clients ...`), offline: every model is made at test time, tiny and
random, and nothing is downloaded (HF_HUB_OFFLINE=1). Our package comes from PYTHONPATH (build/python),
the CLI from SAFEWEIGHTS_CLI (build/safeweights)."""
import os
import subprocess
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

REPO = Path(__file__).resolve().parents[2]
CLI = os.environ.get("SAFEWEIGHTS_CLI") or str(REPO / "build" / "safeweights")


@pytest.fixture(scope="session")
def cli():
    """The safeweights CLI; the suite needs it built."""
    if not Path(CLI).exists():
        pytest.fail(f"the CLI is not built: {CLI} (set SAFEWEIGHTS_CLI)")
    return CLI


def run_cli(*args, check=True):
    """Runs `safeweights ARGS...`; returns the CompletedProcess (text). With check, a non-zero exit fails
    the test with the command's stderr."""
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        pytest.fail(f"safeweights {' '.join(map(str, args))} exited {r.returncode}:\n{r.stderr}")
    return r
