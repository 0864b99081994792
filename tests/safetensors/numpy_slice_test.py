#!/usr/bin/env python3
"""Cross-checks the safeweights CLI against numpy.

numpy makes random arrays; this script writes them to a safetensors file itself (stdlib json + struct,
following the format), then checks:
  * `safeweights cat FILE TENSOR --slice SPEC -o OUT` against np.ascontiguousarray(a[spec]).tobytes()
    for random basic-indexing specs (ints, negative ints, steps incl. negative, clamping, Ellipsis,
    None), and that the CLI fails where numpy raises IndexError;
  * `safeweights inspect --json FILE` (format, header_size, metadata, tensors in file order);
  * `safeweights validate --json FILE...` (one JSON object per line; exit 0 valid / 1 invalid /
    2 usage), including the malformed corpus whose file names carry the expected error kind.

Exit status: 0 pass, 1 fail, 77 skipped (numpy missing).
"""

import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except Exception:  # pragma: no cover - depends on the machine
    print("numpy is not importable; skipping")
    sys.exit(77)

FAILURES = []

DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?", "C64": "<c8",
}
# Reference writer order (dtype descending in the reference enum), for the subset used here.
ORDER = ["U64", "I64", "F64", "C64", "F32", "U32", "I32", "F16", "U16", "I16", "I8", "U8", "BOOL"]


def fail(msg):
    FAILURES.append(msg)
    print("FAIL:", msg)


def random_array(rng, nrng, code):
    rank = rng.randint(0, 4)
    shape = tuple(0 if rng.random() < 0.08 else rng.randint(1, 6) for _ in range(rank))
    dt = np.dtype(DTYPES[code])
    n = int(np.prod(shape)) if shape else 1
    if code == "BOOL":
        a = nrng.integers(0, 2, size=n).astype(bool)
    elif code in ("F64", "F32", "F16"):
        a = nrng.standard_normal(n).astype(dt)
    elif code == "C64":
        a = (nrng.standard_normal(n) + 1j * nrng.standard_normal(n)).astype(dt)
    else:
        info = np.iinfo(dt)
        a = nrng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
    return a.reshape(shape)


def write_safetensors(path, tensors, metadata=None):
    """tensors: dict name -> numpy array. Writes in the reference writer's order, space padded."""
    items = sorted(tensors.items(), key=lambda kv: (ORDER.index(kv[1][0]), kv[0].encode("utf-8")))
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, (code, arr) in items:
        raw = np.ascontiguousarray(arr).astype(np.dtype(DTYPES[code]), copy=False).tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    hb = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + data)
    return len(hb), [(name, code, list(arr.shape)) for name, (code, arr) in items]


def rand_bound(rng):
    r = rng.random()
    if r < 0.3:
        return None
    if r < 0.36:
        return rng.choice([10**6, -(10**6), 2**63 - 1, -(2**63)])
    return rng.randint(-9, 9)


def random_spec(rng, shape):
    """Returns (python index tuple, spec text, expect_error)."""
    rank = len(shape)
    k = rng.randint(0, rank)
    use_ellipsis = rng.random() < 0.3
    ell_pos = rng.randint(0, k) if use_ellipsis else k
    expect_error = False
    consuming = []
    for j in range(k):
        dim = j if j < ell_pos else rank - (k - j)
        n = shape[dim]
        if rng.random() < 0.3:
            if n == 0 or rng.random() < 0.07:
                idx = rng.choice([n, -n - 1, n + 3])
                expect_error = True
            else:
                idx = rng.randint(-n, n - 1)
            consuming.append(("int", idx))
        else:
            step = None
            r = rng.random()
            if r < 0.55:
                step = rng.choice([-3, -2, -1, 1, 2, 3])
            elif r < 0.6:
                step = rng.choice([2**63 - 1, -(2**63) + 1])
            consuming.append(("slice", (rand_bound(rng), rand_bound(rng), step)))
    items = []
    for j in range(k + 1):
        if use_ellipsis and j == ell_pos:
            items.append(("ellipsis", None))
        if rng.random() < 0.12:
            items.append(("none", None))
        if j < k:
            items.append(consuming[j])
    py = []
    text = []
    for kind, v in items:
        if kind == "int":
            py.append(v)
            text.append(str(v))
        elif kind == "ellipsis":
            py.append(Ellipsis)
            text.append("...")
        elif kind == "none":
            py.append(None)
            text.append("None")
        else:
            a, b, c = v
            py.append(slice(a, b, c))
            s = ("" if a is None else str(a)) + ":" + ("" if b is None else str(b))
            if c is not None:
                s += ":" + str(c)
            elif rng.random() < 0.3:
                s += ":"
            text.append(s)
    sep = rng.choice([",", ", ", " , "])
    return tuple(py), sep.join(text), expect_error


def run(cli, args):
    return subprocess.run([cli] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)


def check_cat(cli, tmp, path, tensors, rng, count):
    names = sorted(tensors)
    out = os.path.join(tmp, "out.bin")
    done = errors = 0
    for i in range(count):
        name = rng.choice(names)
        code, arr = tensors[name]
        idx, text, expect_error = random_spec(rng, arr.shape)
        try:
            expected = np.ascontiguousarray(arr[idx]).tobytes()
            np_error = False
        except IndexError:
            np_error = True
        if np_error != expect_error:
            fail("test generator disagrees with numpy for %r on shape %s" % (text, arr.shape))
            continue
        if os.path.exists(out):
            os.remove(out)
        # Two argv elements: `--slice=` with an empty value is refused by CLI11.
        p = run(cli, ["cat", path, name, "--slice", text, "-o", out])
        what = "cat %s[%s] (%s, shape %s)" % (name, text, code, list(arr.shape))
        if np_error:
            errors += 1
            if p.returncode == 0:
                fail(what + ": numpy raises IndexError but the CLI succeeded")
            continue
        if p.returncode != 0:
            fail(what + ": exit %d: %s" % (p.returncode, p.stderr.decode(errors="replace").strip()))
            continue
        with open(out, "rb") as f:
            got = f.read()
        if got != expected:
            fail(what + ": %d bytes differ from numpy's %d bytes" % (len(got), len(expected)))
        done += 1
    print("cat: %d slices matched numpy, %d errors matched IndexError" % (done, errors))
    if done < count // 2:
        fail("too few successful slices (%d)" % done)

    # Whole tensor without --slice; and failures.
    name = names[0]
    p = run(cli, ["cat", path, name, "-o", out])
    if p.returncode != 0:
        fail("cat without --slice: exit %d: %s" % (p.returncode, p.stderr.decode(errors="replace")))
    else:
        with open(out, "rb") as f:
            if f.read() != np.ascontiguousarray(tensors[name][1]).tobytes():
                fail("cat without --slice: bytes differ")
    # The `--slice=SPEC` form works too.
    p = run(cli, ["cat", path, "caf\u00e9 \"q\"", "--slice=-1, ::-2", "-o", out])
    if p.returncode != 0:
        fail("cat --slice=SPEC: exit %d: %s" % (p.returncode, p.stderr.decode(errors="replace")))
    else:
        with open(out, "rb") as f:
            arr = tensors["caf\u00e9 \"q\""][1]
            if f.read() != np.ascontiguousarray(arr[-1, ::-2]).tobytes():
                fail("cat --slice=SPEC: bytes differ")
    for args in (["cat", path, "no-such-tensor", "-o", out],
                 ["cat", path, name, "--slice", "1:2:3:4", "-o", out],
                 ["cat", path, name, "--slice", "::0", "-o", out],
                 ["cat", os.path.join(tmp, "missing.safetensors"), name, "-o", out]):
        p = run(cli, args)
        if p.returncode == 0:
            fail("expected failure: %s" % " ".join(args[:1] + args[2:]))


def check_inspect(cli, path, n, order, metadata):
    p = run(cli, ["inspect", "--json", path])
    if p.returncode != 0:
        fail("inspect --json: exit %d: %s" % (p.returncode, p.stderr.decode(errors="replace")))
        return
    try:
        doc = json.loads(p.stdout.decode("utf-8"))
    except ValueError as e:
        fail("inspect --json: not JSON (%s): %r" % (e, p.stdout[:200]))
        return
    if doc.get("format") != "safetensors":
        fail("inspect: format %r" % doc.get("format"))
    if doc.get("header_size") != n:
        fail("inspect: header_size %r, expected %d" % (doc.get("header_size"), n))
    if doc.get("metadata") != metadata:
        fail("inspect: metadata %r, expected %r" % (doc.get("metadata"), metadata))
    tensors = doc.get("tensors")
    if not isinstance(tensors, list):
        fail("inspect: tensors is not a list")
        return
    got = [(t.get("name"), t.get("dtype"), t.get("shape")) for t in tensors]
    if got != order:
        fail("inspect: tensors %r, expected %r" % (got, order))
    off = 0
    for t in tensors:
        begin, end = t.get("data_offsets", [None, None])
        if begin != off:
            fail("inspect: %s data_offsets %r do not follow %d" % (t.get("name"), t.get("data_offsets"), off))
        off = end if isinstance(end, int) else off


def check_validate(cli, path, corpus):
    p = run(cli, ["validate", "--json", path])
    lines = p.stdout.decode("utf-8", errors="replace").splitlines()
    if p.returncode != 0:
        fail("validate valid file: exit %d: %s %s" % (p.returncode, lines, p.stderr.decode(errors="replace")))
    if len(lines) != 1:
        fail("validate: expected one JSON line, got %r" % lines)
    else:
        doc = json.loads(lines[0])
        if doc.get("file") != path or doc.get("format") != "safetensors" or doc.get("valid") is not True:
            fail("validate valid file: %r" % doc)

    if corpus and os.path.isdir(corpus):
        files = sorted(f for f in os.listdir(corpus) if f.endswith(".safetensors"))
        paths = [os.path.join(corpus, f) for f in files]
        p = run(cli, ["validate", "--json"] + paths)
        lines = [l for l in p.stdout.decode("utf-8", errors="replace").splitlines() if l.strip()]
        any_invalid = any(not f.startswith("valid--") and not f.startswith("UnknownField--") for f in files)
        if p.returncode != (1 if any_invalid else 0):
            fail("validate corpus: exit %d" % p.returncode)
        if len(lines) != len(files):
            fail("validate corpus: %d lines for %d files" % (len(lines), len(files)))
        docs = {}
        for line in lines:
            try:
                d = json.loads(line)
                docs[d.get("file")] = d
            except ValueError:
                fail("validate corpus: not JSON: %r" % line[:200])
        for f, path_ in zip(files, paths):
            d = docs.get(path_)
            if d is None:
                fail("validate corpus: no line for %s" % f)
                continue
            kind = f.split("--")[0]
            if kind in ("valid", "UnknownField"):
                if d.get("valid") is not True:
                    fail("validate %s: %r" % (f, d))
            else:
                err = d.get("error") or {}
                if d.get("valid") is not False or err.get("kind") != kind or not isinstance(err.get("message"), str):
                    fail("validate %s: expected kind %s, got %r" % (f, kind, d))
        # Each invalid file alone exits 1.
        bad = [p_ for f, p_ in zip(files, paths) if f.startswith("InvalidOffset--")][:1]
        for b in bad:
            p = run(cli, ["validate", "--json", b])
            if p.returncode != 1:
                fail("validate single invalid file: exit %d" % p.returncode)
        # --strict rejects unknown fields.
        uf = [p_ for f, p_ in zip(files, paths) if f.startswith("UnknownField--")]
        for u in uf:
            p = run(cli, ["validate", "--json", "--strict", u])
            lines = p.stdout.decode("utf-8", errors="replace").splitlines()
            if p.returncode != 1 or not lines or (json.loads(lines[0]).get("error") or {}).get("kind") != "UnknownField":
                fail("validate --strict %s: exit %d, %r" % (os.path.basename(u), p.returncode, lines))

    # Usage errors exit 2.
    for args in (["validate", "--json"], ["validate", "--no-such-flag", path], ["no-such-command"]):
        p = run(cli, args)
        if p.returncode != 2:
            fail("usage error %r: exit %d (expected 2)" % (args, p.returncode))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--corpus", default="")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("SAFEWEIGHTS_TEST_SEED", "20240611")))
    ap.add_argument("--count", type=int, default=160)
    args = ap.parse_args()
    print("seed:", args.seed, "(set SAFEWEIGHTS_TEST_SEED to replay)")
    rng = random.Random(args.seed)
    nrng = np.random.default_rng(args.seed)
    if not os.access(args.cli, os.X_OK):
        print("CLI not executable:", args.cli)
        return 1

    with tempfile.TemporaryDirectory(prefix="safeweights-np-") as tmp:
        tensors = {}
        for i, code in enumerate(list(DTYPES) * 2):
            tensors["t%02d.%s" % (i, code.lower())] = (code, random_array(rng, nrng, code))
        tensors["scalar"] = ("F32", np.array(3.5, dtype="<f4"))
        tensors["empty"] = ("I32", np.zeros((3, 0, 2), dtype="<i4"))
        tensors["caf\u00e9 \"q\""] = ("U8", np.arange(24, dtype="u1").reshape(2, 3, 4))
        metadata = {"format": "pt", "note": "numpy cross-check"}
        path = os.path.join(tmp, "model.safetensors")
        n, order = write_safetensors(path, tensors, metadata)

        check_cat(args.cli, tmp, path, tensors, rng, args.count)
        check_inspect(args.cli, path, n, order, metadata)
        check_validate(args.cli, path, args.corpus)

        # A file without metadata: inspect reports no metadata entries.
        path2 = os.path.join(tmp, "nometa.safetensors")
        n2, order2 = write_safetensors(path2, {"x": ("F16", np.ones((2, 2), dtype="<f2"))})
        p = run(args.cli, ["inspect", "--json", path2])
        if p.returncode != 0:
            fail("inspect without metadata: exit %d" % p.returncode)
        else:
            doc = json.loads(p.stdout.decode("utf-8"))
            if doc.get("metadata") not in (None, {}):
                fail("inspect without metadata: metadata %r" % doc.get("metadata"))
            if doc.get("header_size") != n2:
                fail("inspect without metadata: header_size %r" % doc.get("header_size"))

    if FAILURES:
        print("%d failure(s)" % len(FAILURES))
        return 1
    print("all numpy cross-checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
