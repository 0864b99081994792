"""The code blocks of the project's pages (README.md, docs/*.md): one reader and one runner for every test
that runs a page (tests/python/test_readme.py, tests/python/test_docs.py, tests/clients/test_docs_page.py).

A fenced block's language says what it is, and so how it is checked:

- `sh`: a script, run with `bash -euo pipefail`; it must exit 0.
- `console`: commands after `$ `, each followed by what it prints on stdout, exactly (nothing shown:
  nothing printed); a command exits 0 unless its comment names another status (`# exit 1`).
- `python`: a script, run by the test's interpreter; it must exit 0.
- `cpp`: a program, one of tests/install/examples/*.cpp word for word, which the install test builds
  against the installed package and runs.
- `text`, `json`, `cmake`: not run (outputs, schemas, drawings, fragments of a build file).

A block with no language, or another one, is refused: every block says what it is. A runnable block that
cannot run on a fresh machine without network (it needs a GPU, credentials, the Hub, an installed tree,
or minutes of benchmarking) says so in the page, on the line just before it:
`<!-- not run: needs S3 credentials and the Hub -->` (tests/python/test_docs.py still checks that its
shell parses and that the scripts it names exist). A page's runnable blocks run in the order written,
in one folder, with the CLI on PATH (as `safeweights`, and as `build/safeweights`, the name the pages use
for a build of the repository)."""
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]
CLI = os.environ.get("SAFEWEIGHTS_CLI") or str(REPO / "build" / "safeweights")
RUNNABLE = ("sh", "console", "python", "cpp")
NOT_CODE = ("text", "json", "cmake")
INSTALL_EXAMPLES = REPO / "tests" / "install" / "examples"

FENCE = re.compile(r"^```(\S*)\s*$")
NOT_RUN = re.compile(r"^<!-- not run: (.+?) -->$")


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, counted from 1
    lang: str
    code: str
    not_run: Optional[str]  # the reason given in the page, or None

    def where(self):
        return f"{self.page.relative_to(REPO)}:{self.line} ({self.lang or 'no language'})"


def blocks(page, lang=None):
    """The fenced blocks of a page, in order (those of one language when given). A block's marker is the
    last non-blank line before its fence."""
    found, lines = [], Path(page).read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j] == "```"), None)
        assert end is not None, f"{page}:{i + 1}: a fence that is never closed"
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = NOT_RUN.match(before)
        code = "".join(line + "\n" for line in lines[i + 1 : end])
        found.append(Block(Path(page), i + 1, m.group(1), code, marker.group(1) if marker else None))
        i = end + 1
    return [b for b in found if lang is None or b.lang == lang]


def problems_of(page):
    """What a page's blocks get wrong: a block that does not say what it is, and a `not run` marker on a
    block that is not code to run (or one that marks nothing)."""
    problems = []
    for b in blocks(page):
        if b.lang not in RUNNABLE + NOT_CODE:
            problems.append(f"{b.where()}: give the block one of the languages {', '.join(RUNNABLE + NOT_CODE)}")
        elif b.not_run and b.lang not in RUNNABLE:
            problems.append(f"{b.where()}: a `not run` marker on a block that is not code to run")
        elif b.lang == "cpp" and not b.not_run and b.code not in install_examples():
            problems.append(f"{b.where()}: a C++ block that is none of tests/install/examples/*.cpp, word for word")
    text = Path(page).read_text().splitlines()
    marked = {b.line for b in blocks(page) if b.not_run}
    for n, line in enumerate(text, 1):
        if NOT_RUN.match(line):
            following = next((k for k in range(n, len(text)) if text[k].strip()), None)
            if following is None or following + 1 not in marked:
                problems.append(f"{Path(page).relative_to(REPO)}:{n}: a `not run` marker with no block after it")
    return problems


def install_examples():
    """The text of each program the install test builds and runs."""
    return [p.read_text() for p in sorted(INSTALL_EXAMPLES.glob("*.cpp"))]


def environment(folder):
    """The environment a page's commands run in: the CLI on PATH, and as build/safeweights in `folder`."""
    (Path(folder) / "build").mkdir(exist_ok=True)
    link = Path(folder) / "build" / "safeweights"
    if not link.exists():
        link.symlink_to(Path(CLI).resolve())
    env = dict(os.environ)
    env["PATH"] = str(Path(CLI).resolve().parent) + os.pathsep + env["PATH"]
    return env


def run(block, folder):
    """Runs one block in `folder` as its language says; fails (AssertionError) with what went wrong.
    Returns what it printed (the last command's, for a console block)."""
    assert block.lang in RUNNABLE and not block.not_run, block.where()
    if block.lang == "cpp":  # built and run by the install test
        assert block.code in install_examples(), f"{block.where()}: none of tests/install/examples/*.cpp"
        return ""
    env = environment(folder)
    if block.lang == "console":
        out = ""
        for command, expected in console_commands(block):
            out = run_command(block, ["bash", "-o", "pipefail", "-c", command], folder, env, expected_status(command))
            assert out.rstrip("\n").splitlines() == expected, (
                f"{block.where()}: `{command}` printed\n{out}\nbut the page shows\n" + "\n".join(expected))
        return out
    argv = ["bash", "-euo", "pipefail", "-c", block.code] if block.lang == "sh" else [sys.executable, "-c", block.code]
    return run_command(block, argv, folder, env, 0)


def run_command(block, argv, folder, env, status):
    r = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == status, (f"{block.where()} exited {r.returncode}, not {status}:\n{argv[-1]}\n"
                                    f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r.stdout


def console_commands(block):
    """(command, the lines it prints) of each `$ ` line of a console block."""
    pairs = []
    for line in block.code.rstrip("\n").splitlines():
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        else:
            assert pairs, f"{block.where()}: output before the first `$ ` command"
            pairs[-1][1].append(line)
    for _, expected in pairs:
        while expected and not expected[-1].strip():
            expected.pop()
    return pairs


def expected_status(command):
    m = re.search(r"#.*\bexit (\d+)", command)
    return int(m.group(1)) if m else 0


def run_page(page, folder):
    """Runs every runnable block of a page that is not marked, in the order written, in `folder`.
    Returns the blocks run."""
    ran = [b for b in blocks(page) if b.lang in RUNNABLE and not b.not_run]
    for b in ran:
        run(b, folder)
    return ran
