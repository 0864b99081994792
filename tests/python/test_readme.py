"""README.md says what works because this test runs it: its command-line block and its Python block run
in one empty folder, in the order written (`safeweights` on PATH as users type it); its C++ block is one
of the programs the install test builds and runs; the quick start names the scripts CI runs; the pages it
points to exist; and it stays short (issue 38: under 150 lines, details in docs/)."""
import re

import pytest

import doc_blocks
from conftest import REPO

README = REPO / "README.md"


def examples():
    """The command-line examples: every sh block but the quick start's (which installs and builds)."""
    return [b for b in doc_blocks.blocks(README, "sh") if not b.not_run]


def test_readme_is_short():
    assert len(README.read_text().splitlines()) < 150


def test_quick_start_names_the_scripts_ci_runs():
    quick = [b.code for b in doc_blocks.blocks(README, "sh") if b.not_run]
    assert len(quick) == 1, quick
    commands = [line for line in quick[0].splitlines() if line and not line.startswith("#")]
    assert commands == ["bash scripts/quickstart.sh", "bash scripts/test.sh"], commands
    for script in ("scripts/quickstart.sh", "scripts/test.sh"):
        assert (REPO / script).is_file()
    assert "scripts/test.sh" in (REPO / ".ci" / "run").read_text()


def test_every_command_example_runs(tmp_path):
    assert examples(), "README.md has no command-line example"
    for block in examples():
        doc_blocks.run(block, tmp_path)
    # What the block promises it wrote.
    assert (tmp_path / "rows.bin").stat().st_size == 2 * 4 * 4  # rows 1:3 of [16, 8] F32, every other column
    assert sorted(p.name for p in (tmp_path / "shards").iterdir())[-1] == "model.safetensors.index.json"


def test_the_python_example_runs(tmp_path):
    pytest.importorskip("torch")  # the numpy-2 venv has no torch: the block is run by the Debian suite
    for block in examples():
        doc_blocks.run(block, tmp_path)
    (python,) = doc_blocks.blocks(README, "python")
    assert "model.embed_tokens.weight" in doc_blocks.run(python, tmp_path)


def test_the_cpp_example_is_a_program_the_install_test_runs():
    (cpp,) = doc_blocks.blocks(README, "cpp")
    assert cpp.code in doc_blocks.install_examples(), "README.md's C++ block is none of tests/install/examples/*.cpp, word for word"


def test_every_page_it_names_exists():
    named = set(re.findall(r"\b((?:docs/)?[A-Z][A-Z_]+\.md)\b", README.read_text()))
    assert "docs/CLI.md" in named
    for page in named:
        assert (REPO / page).is_file() or (REPO / "docs" / page).is_file(), page
