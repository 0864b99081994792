"""docs/CLIENTS.md: every command of the page, run in the order written, in one folder holding the tiny
models the page names. A command that fails, or a page whose commands name something the folder does
not hold, fails the test: the page says what works because this test ran it."""
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import CLI, REPO
from tiny_models import bin_folder, ddpm_folder, llama_folder

PAGE = REPO / "docs" / "CLIENTS.md"


def blocks():
    """The page's ```sh and ```python blocks, in order: (language, code)."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(sh|python)\n(.*?)^```$", PAGE.read_text(), re.S | re.M)]


def test_the_page_has_commands_of_both_kinds():
    kinds = [lang for lang, _ in blocks()]
    assert "sh" in kinds and "python" in kinds, kinds


def test_every_command_of_the_page_runs(tmp_path, cli):
    llama_folder(tmp_path / "tiny-llama")
    bin_folder(tmp_path / "tiny-llama", tmp_path / "tiny-llama-bin")
    ddpm_folder(tmp_path / "pipeline")
    env = dict(os.environ)
    env["PATH"] = str(Path(CLI).resolve().parent) + os.pathsep + env["PATH"]  # `safeweights` as users type it
    for lang, code in blocks():
        argv = ["bash", "-euo", "pipefail", "-c", code] if lang == "sh" else [sys.executable, "-c", code]
        r = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert r.returncode == 0, f"docs/CLIENTS.md block failed ({lang}):\n{code}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
