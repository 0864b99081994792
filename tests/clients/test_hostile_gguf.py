"""ggml, gguf-py and our readers on the same hostile and odd GGUF files (issue 28, items 5 and 8).

ggml is read as llama.cpp reads it: llama-cpp-python's own libggml-base (the ggml it runs models with),
gguf_init_from_file through ctypes, in a subprocess (a hostile file that made ggml abort would end that
process, not the suite). gguf-py is its GGUFReader. Ours are the CLI (`inspect --json`, `cat`) and the
Python package (formats.validate / inspect, torch.load_tensors). The files: every file of the GGUF corpus
(tests/gguf/corpus, each breaking one rule) and more made here: empty tensors whose other dimensions are
huge, in every order; NUL bytes in tensor names and keys; names and keys that are not UTF-8; odd and
malformed alignments; overlapping, misplaced and end-of-file offsets; split sets whose names collide at
a NUL.

What must hold:
- wherever ggml and we both read a file, we read what ggml reads: the same names, dimensions, types,
  alignment, keys, and for each tensor the same bytes (ggml's are at its data offset plus the tensor's
  offset, its size long; ours what `cat` prints); the same against gguf-py wherever it reads the file
  (gguf-py keeps a name's bytes after a NUL, which ggml and we end it at);
- we never read a file ggml refuses;
- where we refuse a file ggml reads, the file is one of the cases listed in STRICTER, each a difference
  docs/GGUF.md ("Where ggml is lax") states, and every listed case is such a file;
- the CLI and the Python package give one verdict: the same document, or the same error; the Python
  readers raise SafetensorError only (its kind and rule the CLI's), never a UnicodeDecodeError or
  torch's RuntimeError.
"""

import importlib.util
import itertools
import json
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
llama_spec = importlib.util.find_spec("llama_cpp")
if llama_spec is None:
    pytest.skip("llama_cpp is not importable: ggml's reader is not here", allow_module_level=True)

from conftest import CLI, REPO  # noqa: E402

CORPUS = REPO / "tests" / "gguf" / "corpus"
DOCS = (REPO / "docs" / "GGUF.md").read_text()
LIBGGML = Path(llama_spec.origin).parent / "lib" / "libggml-base.so"

sys.path.insert(0, str(REPO / "tests" / "gguf"))
import make_corpus as mc  # noqa: E402 (the corpus generator's layout: the files ggml's and gguf-py's writers make)

import safeweights.formats  # noqa: E402
import safeweights.torch  # noqa: E402
from safeweights import SafetensorError  # noqa: E402

# ggml's reader, in a subprocess: one JSON line per file, null where gguf_init_from_file refuses it.
GGML_READER = r"""
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
class Params(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]
def fn(name, res, *args):
    f = getattr(lib, name)
    f.restype, f.argtypes = res, [ctypes.c_void_p, *args]
    return f
init = lib.gguf_init_from_file
init.restype, init.argtypes = ctypes.c_void_p, [ctypes.c_char_p, Params]
I64, SIZE = ctypes.c_int64, ctypes.c_size_t
free = fn("gguf_free", None)
n_kv, key = fn("gguf_get_n_kv", I64), fn("gguf_get_key", ctypes.c_char_p, I64)
n_tensors, name = fn("gguf_get_n_tensors", I64), fn("gguf_get_tensor_name", ctypes.c_char_p, I64)
ne, ttype = fn("gguf_get_tensor_ne", ctypes.POINTER(I64), I64), fn("gguf_get_tensor_type", ctypes.c_int, I64)
offset, size = fn("gguf_get_tensor_offset", SIZE, I64), fn("gguf_get_tensor_size", SIZE, I64)
alignment, data_offset = fn("gguf_get_alignment", SIZE), fn("gguf_get_data_offset", SIZE)
for path in sys.argv[2:]:
    ctx = init(path.encode(), Params(True, None))  # metadata only, as llama.cpp's loader opens a file
    if not ctx:
        print("null", flush=True)
        continue
    print(json.dumps({
        "alignment": alignment(ctx), "data_offset": data_offset(ctx),
        "keys": [key(ctx, i).hex() for i in range(n_kv(ctx))],
        "tensors": [{"name": name(ctx, i).hex(), "ne": ne(ctx, i)[:4], "type": ttype(ctx, i),
                     "offset": offset(ctx, i), "size": size(ctx, i)} for i in range(n_tensors(ctx))]}), flush=True)
    free(ctx)
"""

# Where we refuse what ggml reads: the phrase of docs/GGUF.md's "Where ggml is lax" that states it, by a
# part of the file's name (first match). Files of a split set are refused by a rule of the set (or a
# sibling's) that ggml, reading one file, does not know of.
STRICTER = [
    ("-split-", "llama.cpp's loader, not ggml's reader, reads the split keys"),
    ("--bool-not-0-or-1", "a BOOL value other than 0 or 1"),
    ("--key-over-65535-bytes", "a key over 65,535 bytes"),
    ("--duplicate-key-after-nul", "keys that are one key up to a NUL"),
    ("--key-nul-twice", "keys that are one key up to a NUL"),
    ("--key-nul-after-plain", "keys that are one key up to a NUL"),
    ("--empty-key-after-nul", "a key that is empty up to a NUL"),
    ("--key-nul-first", "a key that is empty up to a NUL"),
    ("--duplicate-tensor-name-", "tensor names that are one name up to a NUL"),
    ("--name-nul-twice", "tensor names that are one name up to a NUL"),
    ("--name-nul-after-plain", "tensor names that are one name up to a NUL"),
    ("-not-utf8", "a tensor name or a key that is not UTF-8"),
    ("--tensor-data-past-end", "tensor bytes past the end of the file"),
    ("--offset-past-end", "tensor bytes past the end of the file"),
]

F32, Q8_0 = mc.F32, mc.Q8_0


def hostile_files(out: Path):
    """The cases made here (name -> bytes), beside the corpus."""
    files = {}
    base, build, kvs = mc.base, mc.build, mc.BASE_KVS

    # Empty tensors of huge dimensions, in every order: ggml multiplies ne from ne[0] and refuses an
    # overflow before a 0, not after one.
    sets = [(0, 2**62, 2**62), (0, 2**62, 2**62, 2**62), (0, 2**32, 2**32, 2**32), (0, 2, 2**62),
            (0, 3, 3074457345618258602), (0, 3, 3074457345618258603), (0, 2**31, 2**31, 2**31), (0, 1, 2**63 - 1)]
    for dims in sets:
        for ne in sorted(set(itertools.permutations(dims))):
            files["zero--" + "-".join(map(str, ne))] = base(tensors=[("w", list(ne), F32), ("after", [2], F32)])
    files["zero-q8_0--0-2^62-2^62"] = base(tensors=[("w", [2**62, 0, 2**62], Q8_0), ("after", [32], Q8_0)])
    files["zero-q8_0--16-0"] = base(tensors=[("w", [16, 0], Q8_0)])
    files["zero--scalar"] = base(tensors=[("s", [], F32)])
    files["zero--ones"] = base(tensors=[("s", [1, 1, 1, 1], F32)])

    # NUL in names and keys
    files["nul--name"] = base(tensors=[(b"a\0b", [4], F32), ("c", [2], F32)])
    files["nul--name-nul-twice"] = base(tensors=[(b"a\0b", [4], F32), (b"a\0c", [2], F32)])
    files["nul--name-nul-after-plain"] = base(tensors=[("a", [4], F32), (b"a\0c", [2], F32)])
    files["nul--name-empty-to-ggml"] = base(tensors=[(b"\0x", [4], F32)])
    files["nul--name-nul-only"] = base(tensors=[(b"\0", [4], F32)])
    files["nul--key-alignment-64"] = base(kvs=[(b"general.alignment\0x", mc.UINT32, 64)] + kvs,
                                           tensors=[("a", [4], F32), ("b", [4], F32)], alignment=64)
    files["nul--key-nul-twice"] = base(kvs=kvs + [(b"a.k\0x", mc.UINT8, 1), (b"a.k\0y", mc.UINT8, 2)])
    files["nul--key-nul-after-plain"] = base(kvs=kvs + [("a.k", mc.UINT8, 1), (b"a.k\0y", mc.UINT8, 2)])
    files["nul--key-nul-first"] = base(kvs=kvs + [(b"\0a.k", mc.UINT8, 1)])
    files["nul--key-single"] = base(kvs=kvs + [(b"a.k\0x", mc.STRING, "v")])
    files["nul--string-value"] = base(kvs=kvs + [("a.k", mc.STRING, b"v\0w")])

    # UTF-8
    files["utf8--name-not-utf8"] = base(tensors=[(b"w\xff", [4], F32)])
    files["utf8--name-overlong-nul-not-utf8"] = base(tensors=[(b"w\xc0\x80", [4], F32)])
    files["utf8--key-not-utf8"] = base(kvs=kvs + [(b"a.\xff", mc.UINT8, 1)])
    files["utf8--value-invalid-bytes"] = base(kvs=kvs + [("a.k", mc.STRING, b"\xff\xfe")])
    files["utf8--name-multibyte"] = base(tensors=[("w\u00e9\u6771", [4], F32)])

    # alignments, good and bad
    for a in (1, 2, 4, 8, 16, 64, 128, 4096):
        files[f"align--{a}"] = base(kvs=[("general.alignment", mc.UINT32, a)] + kvs, alignment=a)
    # laid out for 32: a 2^31 alignment puts the data 2 GiB in, past the end
    files["align--alignment-2^31"] = base(kvs=[("general.alignment", mc.UINT32, 2**31)] + kvs)
    for a in (0, 3, 48, 2**32 - 1):
        files[f"align--bad-{a}"] = base(kvs=[("general.alignment", mc.UINT32, a)] + kvs)
    for vtype in (mc.UINT64, mc.INT32, mc.UINT16):
        files[f"align--type-{vtype}"] = base(kvs=[("general.alignment", vtype, 32)] + kvs)
    files["align--no-tensors-4096"] = build(kvs=[("general.alignment", mc.UINT32, 4096)] + kvs)

    # offsets: overlapping, misplaced, at the end
    s0 = 48  # token_embd.weight, [4, 3] F32
    files["offsets--overlap-same"] = base(offsets=[0, 0])
    files["offsets--overlap-inside"] = base(offsets=[0, 32])
    files["offsets--swapped"] = base(offsets=[64, 0])
    files["offsets--unpadded"] = base(offsets=[0, s0])
    files["offsets--empty-at-the-end"] = base(tensors=mc.BASE_TENSORS + [("end", [0], F32)], final_pad=False)
    files["offsets--empty-last-no-data"] = build(kvs=kvs, tensors=[("end", [0, 4], F32)])
    whole = base()
    files["offsets--offset-past-end"] = whole[:len(whole) - 68 - 28]  # the second tensor's bytes cut off
    files["offsets--data-to-the-last-byte"] = base(final_pad=False)

    # split sets: names that collide at a NUL across files, for ggml one name in each file
    for i, tensors in enumerate([[(b"w\0a", [4], F32)], [(b"w\0b", [4], F32)]]):
        keys = (kvs if i == 0 else []) + mc.split_keys(i, 2, 2)
        files[f"hostile-split-name-nul-across-files-{i + 1:05d}-of-00002"] = build(kvs=keys, tensors=tensors)
    for i, tensors in enumerate([[(b"a\0x", [4], F32)], [(b"b\0x", [4], F32)]]):
        keys = (kvs if i == 0 else []) + mc.split_keys(i, 2, 2)
        files[f"hostile-split-ok-names-with-nul-{i + 1:05d}-of-00002"] = build(kvs=keys, tensors=tensors)

    paths = []
    for name, blob in files.items():
        p = out / (name + ".gguf")
        p.write_bytes(blob)
        paths.append(p)
    return paths


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    out = tmp_path_factory.mktemp("hostile_gguf")
    made = hostile_files(out)
    assert len(made) == 88  # as docs/GGUF.md says
    return sorted(CORPUS.glob("*.gguf")) + made


def ggml_read(files):
    """ggml's reading of each file (None where it refuses it)."""
    r = subprocess.run([sys.executable, "-c", GGML_READER, str(LIBGGML), *map(str, files)], capture_output=True, text=True)
    assert r.returncode == 0, f"ggml's reader ended with {r.returncode}:\n{r.stderr[-4000:]}"
    lines = r.stdout.splitlines()
    assert len(lines) == len(files), r.stderr[-4000:]
    return {f: json.loads(line) for f, line in zip(files, lines)}


@pytest.fixture(scope="module")
def ggml(files):
    return ggml_read(files)


def ours_cli(path):
    """(inspect --json as a dict, None) or (None, the error line)."""
    r = subprocess.run([CLI, "inspect", "--json", str(path)], capture_output=True)
    if r.returncode == 0:
        return json.loads(r.stdout), None
    assert r.returncode == 1, (path, r.returncode, r.stderr)
    return None, r.stderr.decode().splitlines()[0]


def ours_cat(path, name):
    r = subprocess.run([CLI, "cat", str(path), name], capture_output=True)
    assert r.returncode == 0, (path, name, r.stderr)
    return r.stdout


def ggufpy(path):
    """gguf-py's reading: {"keys", "tensors": [(name, ne, type id, bytes)]}, or the exception."""
    try:
        r = gguf.GGUFReader(str(path))
        return {"keys": list(r.fields), "tensors": [(t.name, [int(d) for d in t.shape], int(t.tensor_type), t.data.tobytes())
                                                    for t in r.tensors]}
    except Exception as e:  # noqa: BLE001 (any refusal is a refusal)
        return e


def stricter_reason(path):
    """The phrase of docs/GGUF.md that says why we refuse this file where ggml reads it, or None."""
    if path.name.startswith("valid--") or "-split-ok-" in path.name:
        return None
    for part, phrase in STRICTER:
        if part in path.name:
            return phrase
    return None


def our_tensors_of(doc, path):
    """The tensors of `doc` that lie in `path` (one file of a split model), with that file's data offset."""
    splits = doc.get("splits")
    if not splits:
        return doc["tensors"], doc["data_offset"]
    k = next(i for i, s in enumerate(splits) if Path(s["file"]).resolve() == path.resolve())
    return [t for t in doc["tensors"] if t["split"] == k], splits[k]["data_offset"]


def test_we_read_what_ggml_reads_and_refuse_only_what_the_docs_say(files, ggml):
    both = stricter = 0
    undocumented = set()
    for path in files:
        g = ggml[path]
        doc, error = ours_cli(path)
        if g is None:
            assert doc is None, f"{path.name}: we read a file ggml refuses"
            continue
        if doc is None:
            stricter += 1
            reason = stricter_reason(path)
            assert reason is not None, f"{path.name}: ggml reads it, we refuse it, and STRICTER does not say why: {error}"
            if reason not in DOCS:
                undocumented.add(reason)
            continue
        assert stricter_reason(path) is None, f"{path.name}: listed in STRICTER, but we read it"
        both += 1
        blob = path.read_bytes()
        tensors, data_offset = our_tensors_of(doc, path)
        assert doc["alignment"] == g["alignment"], path.name
        if not doc.get("splits") or doc["splits"][0]["file"] == str(path):  # a split model's keys are its first file's
            assert [k["key"].encode() for k in doc["kv"]] == [bytes.fromhex(k) for k in g["keys"]], path.name
        assert [t["name"].encode() for t in tensors] == [bytes.fromhex(t["name"]) for t in g["tensors"]], path.name
        for ours, theirs in zip(tensors, g["tensors"]):
            assert ours["ne"] + [1] * (4 - len(ours["ne"])) == theirs["ne"], (path.name, ours, theirs)
            assert ours["type"] == gguf.GGMLQuantizationType(theirs["type"]).name, (path.name, ours, theirs)
            assert ours["nbytes"] == theirs["size"], (path.name, ours, theirs)
            assert data_offset + ours["offset"] == g["data_offset"] + theirs["offset"], (path.name, ours, theirs)
            start = g["data_offset"] + theirs["offset"]
            assert ours_cat(path, ours["name"]) == blob[start:start + theirs["size"]], (path.name, ours["name"])
    for part, _ in STRICTER:  # every listed case is a file ggml reads and we refuse
        listed = [p for p in files if part in p.name and stricter_reason(p) is not None]
        assert listed, f"STRICTER names {part}, which no file has"
        for p in listed:
            assert ggml[p] is not None and ours_cli(p)[0] is None, f"{p.name}: listed in STRICTER, but ggml refuses it or we read it"
    assert not undocumented, f"docs/GGUF.md does not state: {sorted(undocumented)}"
    assert both >= 60 and stricter >= 30, (both, stricter)


def test_where_gguf_py_reads_a_file_we_read_the_same(files):
    both = 0
    for path in files:
        doc, _ = ours_cli(path)
        if doc is None or doc.get("splits"):
            continue
        theirs = ggufpy(path)
        if isinstance(theirs, Exception):
            continue
        both += 1
        blob_of = {t["name"]: t for t in doc["tensors"]}
        # gguf-py keeps a name's bytes after a NUL; ggml and we end the name there
        assert [n.split("\0")[0] for n, *_ in theirs["tensors"]] == [t["name"] for t in doc["tensors"]], path.name
        assert [k.split("\0")[0] for k in theirs["keys"] if not k.startswith("GGUF.")] == [k["key"] for k in doc["kv"]], path.name
        for name, ne, type_id, data in theirs["tensors"]:
            ours = blob_of[name.split("\0")[0]]
            assert ours["ne"] == ne and ours["type"] == gguf.GGMLQuantizationType(type_id).name, (path.name, name)
            assert ours_cat(path, ours["name"]) == data, (path.name, name)
    assert both >= 30, both


def test_gguf_py_refuses_names_and_keys_that_are_not_utf8_as_we_do(files):
    for path in files:
        if "not-utf8" in path.name and "split" not in path.name:
            assert isinstance(ggufpy(path), UnicodeDecodeError), path.name
            assert ours_cli(path)[0] is None, path.name


def test_the_python_package_gives_the_clis_verdict_and_only_safetensor_errors(files):
    for path in files:
        doc, error = ours_cli(path)
        if doc is not None:
            assert safeweights.formats.inspect(str(path)) == doc, path.name
            safeweights.formats.validate(str(path))
            try:
                loaded = safeweights.torch.load_tensors(str(path))
            except SafetensorError as e:  # quantized: no torch dtype; or a shape torch cannot stride
                assert e.kind is None or e.kind == "NotSupported", (path.name, e)
                assert "no torch dtype" in str(e) or "torch cannot hold shape" in str(e), (path.name, e)
                continue
            tensors = {t["name"]: t for t in doc["tensors"]}
            assert list(loaded) == list(tensors), path.name
            for name, t in loaded.items():
                assert list(t.shape) == tensors[name]["shape"], (path.name, name)
                if t.numel():
                    assert t.reshape(-1).view(torch.uint8).numpy().tobytes() == ours_cat(path, name), (path.name, name)
            continue
        for read in (safeweights.formats.validate, safeweights.torch.load_tensors, safeweights.formats.inspect):
            with pytest.raises(Exception) as info:
                read(str(path))
            e = info.value
            if isinstance(e, FileNotFoundError):  # a missing split file: the builtin, as for any missing file
                assert "FileNotFound" in error, (path.name, error)
                continue
            assert type(e) is SafetensorError, (path.name, read.__name__, type(e), e)
            assert error == "safeweights: " + str(e), (path.name, read.__name__)
            assert f": {e.kind}: " in error, (path.name, e.kind)


def test_a_name_that_is_not_utf8_is_refused_naming_file_index_and_rule(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(mc.base(tensors=[mc.BASE_TENSORS[0], (b"blk.0.attn_q.weight\xff", [32, 2], Q8_0)]))
    for read in (safeweights.formats.validate, safeweights.torch.load_tensors):
        with pytest.raises(SafetensorError) as info:
            read(str(path))
        e = info.value
        assert (e.kind, e.rule, e.file) == ("InvalidGguf", "gguf.tensor-name", str(path))
        assert "tensor 1: the name `blk.0.attn_q.weight\\xff` is not valid UTF-8 (GGUF strings are UTF-8)" in str(e)


def test_element_count_as_ggml_counts_it_on_every_order(tmp_path):
    """Dimensions around the int64 edges, in every order up to three and 2,000 random 4-dim ones: we
    read exactly the shapes ggml reads (I8: one byte an element, so only the count decides)."""
    values = [0, 1, 2, 3, 2**31, 2**32, 2**32 + 1, 2**62, 2**62 - 1, 2**63 - 1, 3074457345618258602, 3037000500]
    shapes = [list(ne) for r in (1, 2, 3) for ne in itertools.product(values, repeat=r)]
    rng = random.Random(28)
    shapes += [[rng.choice(values) for _ in range(4)] for _ in range(2000)]
    assert len(shapes) == 3884  # as docs/GGUF.md says
    paths = []
    for i, ne in enumerate(shapes):
        head = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + mc.gstr("w") + struct.pack("<I", len(ne))
        head += b"".join(struct.pack("<Q", d) for d in ne) + struct.pack("<IQ", 24, 0)  # I8, offset 0
        p = tmp_path / f"{i}.gguf"
        p.write_bytes(head + bytes(-len(head) % 32))
        paths.append(p)
    theirs = ggml_read(paths)
    differ = []
    for p, ne in zip(paths, shapes):
        try:
            safeweights.formats.validate(str(p))
            ours = True
        except SafetensorError as e:
            # what we refuse for its bytes, not its count (ggml reads only the metadata): a tensor past the
            # end of this file, or over 2^64 bits; an empty tensor has no bytes to refuse
            ours = 0 not in ne and (e.rule == "gguf.tensor-offset" or (e.kind == "ValidationOverflow" and "element count" not in str(e)))
        if ours != (theirs[p] is not None):
            differ.append((ne, ours))
    assert not differ, f"{len(differ)} of {len(shapes)} shapes read differently from ggml, e.g. {differ[:5]}"


def test_an_empty_tensor_torch_cannot_stride_is_a_safetensor_error(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(mc.base(tensors=[("w", [0, 2**62, 2**62], F32), ("after", [2], F32)]))
    assert safeweights.formats.inspect(str(path))["tensors"][0]["shape"] == [2**62, 2**62, 0]
    with pytest.raises(SafetensorError) as info:
        safeweights.torch.load_tensors(str(path))
    assert (info.value.kind, info.value.tensor) == ("NotSupported", "w")
    assert "torch cannot hold shape [4611686018427387904, 4611686018427387904, 0]" in str(info.value)
