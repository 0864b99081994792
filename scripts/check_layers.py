#!/usr/bin/env python3
"""Checks the code against the drawing in docs/ARCHITECTURE.md (ctest `layering`).

The drawing is the one statement of the layers: in its first code block, a line that starts (at most two
spaces in) with `folder/` tokens names the folders of a layer, top first. A line indented by two spaces
joins the layer above it: the folders under a heading (a line with no such token: "formats", "plans and
conversion") share one layer, so none of them may include another; any other such line starts a new
layer. A token `folder/file.cpp` places that one file in the layer, apart from its folder (the
registry, which includes every format). Checked:

- every folder of src/ is in the drawing, and every public header is named in the page;
- an internal include (`#include "folder/..."`) in src/ goes to the file's own folder or to a layer
  drawn above the file's own;
- a public header is of the layer that implements it, as the page's table of public headers says (a row
  `| a.h, b.h | folder/ | what |`; `all` for a header every layer may include): every public header is
  in the table, and an include of one (`#include "safeweights/a.h"`), in src/ or in another public
  header, goes to the includer's own layer or to one drawn above it.

    check_layers.py [REPO_ROOT]
"""
import os
import re
import sys

TOKEN = re.compile(r"([a-z_]+)/([a-z_]+\.(?:cpp|h))?")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)
PUBLIC_INCLUDE = re.compile(r'^\s*#\s*include\s+"safeweights/([^"]+)"', re.M)
HEADER_ROW = re.compile(r"^\| ([a-z0-9_]+\.h(?:, [a-z0-9_]+\.h)*) \| ([a-z_]+)/? \|", re.M)


def read_header_layers(page):
    """The folder (or `all`) of each public header, from the page's table of public headers."""
    return {h: m.group(2) for m in HEADER_ROW.finditer(page) for h in m.group(1).split(", ")}


def read_layers(page, src_folders):
    """(rank of each folder, rank of each file placed apart), from the page's first code block."""
    block = page.split("```")[1].split("\n", 1)[1]  # the drawing, without its fence's language
    folders, files = {}, {}
    rank = -1
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if indent > 2 or not line.strip():
            continue
        words = line.split()
        names = []
        for word in words:
            m = TOKEN.fullmatch(word)
            if not m:
                break
            names.append(m)
        if not names:
            if indent == 0:
                rank += 1  # a heading such as "formats": its indented lines share one layer
            continue
        if indent == 0 or rank < 0:
            rank += 1
        for m in names:
            if m.group(2):
                files[f"{m.group(1)}/{m.group(2)}"] = rank
            elif m.group(1) in src_folders:
                folders[m.group(1)] = rank
    return folders, files


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    src = os.path.join(root, "src")
    page = open(os.path.join(root, "docs", "ARCHITECTURE.md"), encoding="utf-8").read()
    src_folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    folders, files = read_layers(page, src_folders)
    problems = []
    for d in src_folders:
        if d not in folders:
            problems.append(f"src/{d}/ is not in the drawing of docs/ARCHITECTURE.md")
    for h in sorted(os.listdir(os.path.join(root, "include", "safeweights"))):
        if h.endswith(".h") and h not in page:
            problems.append(f"include/safeweights/{h} is not named in docs/ARCHITECTURE.md")
    header_folder = read_header_layers(page)
    public = os.path.join(root, "include", "safeweights")
    for h in sorted(os.listdir(public)):
        if h.endswith(".h") and h not in header_folder:
            problems.append(f"include/safeweights/{h} is not in the table of public headers of docs/ARCHITECTURE.md")

    def public_includes(text, folder, rank, where):
        """An include of a public header goes to the includer's folder or to a layer drawn above it."""
        for m in PUBLIC_INCLUDE.finditer(text):
            target = header_folder.get(m.group(1))
            if target is None or target == "all" or target == folder or target not in folders:
                continue
            if folders[target] >= rank:
                problems.append(f"{where} includes safeweights/{m.group(1)} (of {target}/), which is not drawn above it")

    for h in sorted(os.listdir(public)):
        folder = header_folder.get(h)
        if folder in folders:
            text = open(os.path.join(public, h), encoding="utf-8").read()
            public_includes(text, folder, folders[folder], f"include/safeweights/{h}")
    for d in src_folders:
        for name in sorted(os.listdir(os.path.join(src, d))):
            path = f"{d}/{name}"
            rank = files.get(path, folders.get(d))
            if rank is None:
                continue
            text = open(os.path.join(src, d, name), encoding="utf-8").read()
            for m in INCLUDE.finditer(text):
                target = m.group(1)
                if target == d or target not in folders:
                    continue  # its own folder
                if folders[target] >= rank:
                    problems.append(f"src/{path} includes {target}/{m.group(2)}, which is not drawn above it")
            public_includes(text, d, rank, f"src/{path}")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"layering: {len(src_folders)} folders and {len(header_folder)} public headers, every include goes up the drawing")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
