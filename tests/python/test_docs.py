"""docs/*.md say what works because this test runs them (issue 38): every block of every page says what it
is, and every runnable one runs (tests/python/doc_blocks.py has the rules), in a folder holding the
files the pages' examples name, made here; blocks that cannot run here say why in the page. docs/CLIENTS.md
is run by tests/clients/test_docs_page.py, in the venv of the clients it uses. The lists of public
headers and the drawing of the code in the pages are checked against the tree."""
import re
import struct
import subprocess

import pytest

import doc_blocks
from conftest import REPO, build_file, header_bytes

DOCS = sorted((REPO / "docs").glob("*.md"))
RUN_ELSEWHERE = {"CLIENTS.md": "tests/clients/test_docs_page.py"}
HEADERS = sorted(p.name for p in (REPO / "include" / "safeweights").glob("*.h"))


def example_files(folder):
    """The files the pages' examples read: a model to try things on (`safeweights sample`), a valid file
    and one whose second tensor starts past the end of the first."""
    subprocess.run([doc_blocks.CLI, "sample", str(folder / "model.safetensors")], check=True, capture_output=True)
    (folder / "good.safetensors").write_bytes(build_file([("a", "F32", [2], struct.pack("<2f", 1, 2))]))
    gap = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}}
    (folder / "bad.safetensors").write_bytes(header_bytes(gap) + bytes(32))


@pytest.mark.parametrize("page", DOCS + [REPO / "README.md"], ids=lambda p: p.name)
def test_every_block_says_what_it_is(page):
    assert doc_blocks.problems_of(page) == []


@pytest.mark.parametrize("page", [p for p in DOCS if p.name not in RUN_ELSEWHERE], ids=lambda p: p.name)
def test_every_runnable_block_runs(page, tmp_path):
    example_files(tmp_path)
    doc_blocks.run_page(page, tmp_path)


def test_pages_run_elsewhere_are_run_there():
    for page, test in RUN_ELSEWHERE.items():
        assert "doc_blocks" in (REPO / test).read_text() and page in (REPO / test).read_text(), test


def test_the_pages_have_runnable_blocks():
    ran = [b for page in DOCS for b in doc_blocks.blocks(page) if b.lang in doc_blocks.RUNNABLE and not b.not_run]
    assert {b.lang for b in ran} >= {"console", "cpp"}, ran


def test_the_api_page_lists_every_public_header():
    """docs/API.md's table of headers names each public header once, and only those."""
    page = (REPO / "docs" / "API.md").read_text()
    table = page[page.index("## The headers") :]
    named = re.findall(r"`([a-z_0-9]+\.h)`", table)
    assert sorted(named) == HEADERS, (sorted(set(HEADERS) - set(named)), sorted(set(named) - set(HEADERS)))


def drawing():
    page = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    return re.search(r"^```text\n(.*?)^```$", page, re.S | re.M).group(1)


def test_the_drawing_names_files_that_exist():
    """Every file the drawing of docs/ARCHITECTURE.md names (`io/remote_listing.h`, `model/registry.cpp`,
    `python/src/dtype_names.h`) is in the tree, and every folder at its left edge too."""
    text = drawing()
    named = set(re.findall(r"\b((?:[a-z_]+/)+[a-z_0-9]+\.(?:h|cpp|py|txt|json))\b", text))
    assert named, "the drawing names no file"
    missing = [n for n in sorted(named) if not any((root / n).exists() for root in (REPO, REPO / "src", REPO / "include" / "safeweights"))]
    assert missing == []
    folders = {f for line in text.splitlines() for f in re.findall(r"^([a-z_]+(?:/[a-z_]+)*/)", line)}
    assert [f for f in sorted(folders) if not ((REPO / f).is_dir() or (REPO / "src" / f).is_dir())] == []


def test_the_drawing_names_every_folder_of_the_repository():
    """A folder added at the top of the repository, or under src/, is drawn (check_layers.py, ctest
    `layering`, checks src/ too, and which way its includes go)."""
    text = drawing()
    top = [p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".") and not p.name.startswith("build")]
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    top = [d for d in top if any(t.startswith(d + "/") for t in tracked)]
    assert [d for d in sorted(top) if not re.search(rf"(^|\s){d}/", text, re.M)] == []


def test_blocks_not_run_name_scripts_that_exist():
    """A block that is not run still names real things: every script, benchmark and test file it runs
    (`scripts/bench.sh`, `bench/group_load.py`, `build/bench/bench_io`: bench/bench_io.cpp) is in the tree."""
    missing = []
    for page in DOCS + [REPO / "README.md"]:
        for b in doc_blocks.blocks(page):
            if not b.not_run:
                continue
            for path in re.findall(r"\b((?:scripts|bench|tests)/[\w/.-]+\.(?:sh|py|cpp|txt))\b", b.code):
                if not (REPO / path).is_file():
                    missing.append(f"{b.where()}: {path}")
            for program in re.findall(r"\bbuild/bench/(\w+)", b.code):
                if not (REPO / "bench" / f"{program}.cpp").is_file():
                    missing.append(f"{b.where()}: build/bench/{program}")
    assert missing == []


def test_the_drawing_names_every_folder_of_the_tests():
    """The drawing's tests/ paragraph names each folder of tests/ (a suite added is drawn)."""
    text = drawing()
    paragraph = text[text.index("\ntests/") : text.index("\nbench/")]
    folders = sorted(p.name for p in (REPO / "tests").iterdir() if p.is_dir() and p.name != "__pycache__")
    assert [f for f in folders if not re.search(rf"\b{f}\b", paragraph)] == []


def test_blocks_not_run_are_valid_shell():
    """A shell block that is not run still parses (`bash -n`): what a reader copies is a command."""
    bad = []
    for page in DOCS + [REPO / "README.md"]:
        for b in doc_blocks.blocks(page):
            if not b.not_run or b.lang not in ("sh", "console"):
                continue
            code = b.code if b.lang == "sh" else "\n".join(c for c, _ in doc_blocks.console_commands(b))
            r = subprocess.run(["bash", "-n"], input=code, capture_output=True, text=True)
            if r.returncode != 0:
                bad.append(f"{b.where()}: {r.stderr.strip()}")
    assert bad == []
