#!/usr/bin/env python3
"""PyTorch checkpoints through the CLI: files written by real torch (every dtype, views, tied weights,
state_dict() with _metadata, keep_vars, nested training checkpoints, the legacy format) read, cat and
converted byte for byte against what that torch's own `torch.load` gives for the same file
(`.contiguous()` bytes); hand-built hostile pickles refused by name with no side effect (a canary file
is never created); the malformed corpus (pickles.py) reported with the expected error kind and rule code.

    test_checkpoints.py --cli PATH/safeweights [--require-torch]

The torch is whichever the interpreter imports: Debian's 1.13 under ctest, a current one from the
registry under scripts/test.sh (the clients' venv, tests/clients/requirements.txt); the
dtypes that torch has beyond the classic ones (float8, uint16/32/64) are tested when present.
Exits 77 (skipped) when torch cannot be imported, or 1 with --require-torch; the hostile and malformed
parts need no torch and run first, so a failure there is reported either way.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pickles  # noqa: E402

FAILURES = []


def check(condition, message):
    if not condition:
        FAILURES.append(message)
        print("FAIL:", message)


def run(cli, *args):
    return subprocess.run([cli, *args], capture_output=True)


def validate(cli, path):
    out = run(cli, "validate", "--json", path)
    return json.loads(out.stdout)


def read_safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    tensors = {k: (v["dtype"], v["shape"], data[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
               for k, v in header.items() if k != "__metadata__"}
    return tensors, header.get("__metadata__", {})


# --- no torch needed ----------------------------------------------------------------------------------

def test_malformed_corpus(cli, tmp):
    corpus = os.path.join(tmp, "corpus")
    pickles.main(["", "--corpus", corpus])
    texts = {name: entry[3] for name, entry in pickles.malformed_corpus().items() if len(entry) > 3}
    for line in open(os.path.join(corpus, "expected")):
        name, kind, rule = line.split()
        result = validate(cli, os.path.join(corpus, name))
        got = (result.get("error") or {}).get("kind")
        check(result["format"] == "pytorch" and got == kind, f"corpus {name}: expected {kind}, got {got} ({result})")
        got_rule = (result.get("error") or {}).get("rule")
        check(got_rule == rule, f"corpus {name}: expected rule {rule}, got {got_rule} ({result})")
        check(texts.get(name, "") in (result.get("error") or {}).get("message", ""), f"corpus {name}: message must say {texts.get(name)!r}: {result}")
        check(not os.path.exists(os.path.join(corpus, name + ".safetensors")), name)
        out = os.path.join(tmp, name + ".safetensors")
        conv = run(cli, "convert", os.path.join(corpus, name), out)
        check(conv.returncode == 1 and not os.path.exists(out), f"corpus {name}: convert must fail and leave no output")
    # Containers are recognised by content, not by name: the tar checkpoint and the TorchScript archive
    # under names no checkpoint has.
    for name, renamed in (("tar_format.pt", "checkpoint.tar"), ("torchscript_compressed.pt", "scripted.zip")):
        path = os.path.join(tmp, renamed)
        os.replace(os.path.join(corpus, name), path)
        result = validate(cli, path)
        check(result["format"] == "pytorch" and (result.get("error") or {}).get("kind") == "NotSupported", f"{renamed}: {result}")


def test_hostile_pickles(cli, tmp):
    canary = os.path.join(tmp, "canary")
    payloads = pickles.hostile_payloads(canary)
    files = {}
    for name, (data, names) in payloads.items():
        path = os.path.join(tmp, f"hostile_{name}.pt")
        with open(path, "wb") as f:
            f.write(pickles.torch_zip(data))
        files[path] = names
    legacy = os.path.join(tmp, "hostile_legacy.pt")
    with open(legacy, "wb") as f:
        f.write(pickles.hostile_legacy(canary))
    files[legacy] = "os.system"
    for path, names in files.items():
        result = validate(cli, path)
        err = result.get("error") or {}
        check(not result["valid"] and err.get("kind") == "UnsafePickle" and names in err.get("message", ""),
              f"{os.path.basename(path)}: expected UnsafePickle naming {names}, got {result}")
        for args in (["inspect", "--json", path], ["cat", path, "w"], ["convert", path, path + ".safetensors"],
                     ["convert", "--allow-unknown", path, path + ".safetensors"]):
            out = run(cli, *args)
            check(out.returncode != 0 or "unknown_module" in path, f"{args}: must fail")
        if "unknown_module" not in path:
            check(not os.path.exists(path + ".safetensors"), f"{path}: refused file left output")
    check(not os.path.exists(canary), "a payload created the canary file")

    # A refused input leaves an existing output as it was.
    existing = os.path.join(tmp, "existing.safetensors")
    with open(existing, "wb") as f:
        f.write(b"before")
    check(run(cli, "convert", list(files)[0], existing).returncode == 1 and open(existing, "rb").read() == b"before",
          "a refused conversion changed an existing output")

    # An unknown (not hostile) module used as a value: refused by default, a placeholder with
    # --allow-unknown, and the tensors still come out; hostile modules stay refused.
    unknown = [p for p in files if "unknown_module" in p][0]
    out = unknown + ".safetensors"
    conv = run(cli, "convert", "--allow-unknown", unknown, out)
    check(conv.returncode == 0, f"--allow-unknown: {conv.stderr}")
    if conv.returncode == 0:
        tensors, _ = read_safetensors(out)
        check(list(tensors) == ["w"] and tensors["w"][2] == struct.pack("<4f", 1, 2, 3, 4), f"--allow-unknown tensors {tensors}")
    for hostile in [p for p in files if "os_system" in p or "stack_global" in p]:
        check(run(cli, "convert", "--allow-unknown", hostile, hostile + ".x").returncode == 1, f"{hostile} with --allow-unknown")
    # The same option on the reading commands: invalid without it, valid (and listed, and readable) with it.
    check(run(cli, "validate", unknown).returncode == 1, "validate accepted an unknown global without --allow-unknown")
    check(run(cli, "validate", "--allow-unknown", unknown).returncode == 0, "validate --allow-unknown refused the file")
    listed = run(cli, "inspect", "--json", "--allow-unknown", unknown)
    check(listed.returncode == 0 and [t["name"] for t in json.loads(listed.stdout)["tensors"]] == ["w"],
          f"inspect --allow-unknown: {listed.stdout} {listed.stderr}")
    cat = subprocess.run([cli, "cat", "--allow-unknown", unknown, "w"], capture_output=True)
    check(cat.returncode == 0 and cat.stdout == struct.pack("<4f", 1, 2, 3, 4), f"cat --allow-unknown: {cat.stderr}")


def documented_refused():
    """The always-refused modules and dotted paths, as docs/PYTORCH.md lists them."""
    doc = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "PYTORCH.md")).read()

    def block(name):
        text = doc[doc.index(f"<!-- {name} -->"):doc.index(f"<!-- /{name} -->")]
        return text.split("`")[1::2]
    return block("refused-modules"), block("refused-paths")


def test_refused_modules(cli, tmp):
    """Every always-refused name of docs/PYTORCH.md, referenced from a real state dict, is refused by
    validate --allow-unknown (and by convert, which leaves nothing), the message naming the entry."""
    P = pickles
    modules, paths = documented_refused()
    check(len(modules) > 100 and len(paths) > 10, f"documented lists: {len(modules)} modules, {len(paths)} paths")
    refs = [(m, m, "anything") for m in modules] + [(m, m + ".sub", "anything") for m in modules]
    refs += [(p, p.rsplit(".", 1)[0], p.rsplit(".", 1)[1]) for p in paths]
    for entry, module, name in refs:
        path = os.path.join(tmp, "refused.pt")
        with open(path, "wb") as f:
            f.write(P.torch_zip(P.pickle(P.state_dict((P.s("w"), P.tensor(P.storage_pid())), (P.s("x"), P.glob(module, name))))))
        result = json.loads(run(cli, "validate", "--json", "--allow-unknown", path).stdout)
        err = result.get("error") or {}
        check(err.get("kind") == "UnsafePickle" and f"`{entry}` is never read, even with --allow-unknown" in err.get("message", ""),
              f"{module}.{name} with --allow-unknown: {result}")
    out = os.path.join(tmp, "refused.safetensors")
    conv = run(cli, "convert", "--allow-unknown", path, out)
    check(conv.returncode == 1 and not os.path.exists(out), f"convert --allow-unknown of a refused name: {conv.stderr}")


def test_hand_built(cli, tmp):
    """Forms torch 1.13 does not write: big-endian storages, _rebuild_tensor_v3 over an UntypedStorage,
    _rebuild_from_type_v2, protocol-4 opcodes."""
    P = pickles
    be = struct.pack(">4f", 1, 2, 3, 4)
    cases = {
        # byteorder "big": elements swapped, also through a transposed view, and complex64 per half.
        "big_endian": (P.torch_zip(P.pickle(P.state_dict(
            (P.s("w"), P.tensor(P.storage_pid(), size=(2, 2), stride=(2, 1))),
            (P.s("t"), P.tensor(P.storage_pid(), size=(2, 2), stride=(1, 2))),
            (P.s("c"), P.tensor(P.storage_pid("ComplexFloatStorage", key="1", numel=2), size=(2,), stride=(1,))),
        )), {"0": be, "1": be}, byteorder=b"big"),
            {"w": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)), "t": ("F32", [2, 2], struct.pack("<4f", 1, 3, 2, 4)),
             "c": ("C64", [2], struct.pack("<4f", 1, 2, 3, 4))}),
        "v3_float8": (P.torch_zip(P.pickle(P.state_dict((P.s("f8"), P.glob("torch._utils", "_rebuild_tensor_v3") + P.tup(
            P.storage_pid("UntypedStorage", numel=4), P.i(1), P.tup(P.i(3)), P.tup(P.i(1)), b"\x89",
            P.glob("collections", "OrderedDict") + b")R", P.glob("torch", "float8_e4m3fn")) + b"R"))),
            {"0": bytes([1, 2, 3, 4])}), {"f8": ("F8_E4M3", [3], bytes([2, 3, 4]))}),
        # torch 2.x names the untyped storage class by its defining module.
        "v3_storage_module": (P.torch_zip(P.pickle(P.state_dict((P.s("u16"), P.glob("torch._utils", "_rebuild_tensor_v3") + P.tup(
            P.tup(P.s("storage"), P.glob("torch.storage", "UntypedStorage"), P.s("0"), P.s("cpu"), P.i(4)) + b"Q",
            P.i(0), P.tup(P.i(2)), P.tup(P.i(1)), b"\x89",
            P.glob("collections", "OrderedDict") + b")R", P.glob("torch", "uint16")) + b"R"))),
            {"0": bytes([1, 2, 3, 4])}), {"u16": ("U16", [2], bytes([1, 2, 3, 4]))}),
        "from_type_v2_parameter": (P.torch_zip(P.pickle(P.state_dict((P.s("p"), P.glob("torch._tensor", "_rebuild_from_type_v2") + P.tup(
            P.glob("torch._utils", "_rebuild_parameter"), P.glob("torch.nn.parameter", "Parameter"),
            P.tup(P.tensor(P.storage_pid()), b"\x88", P.glob("collections", "OrderedDict") + b")R"), b"}") + b"R")))),
            {"p": ("F32", [4], struct.pack("<4f", 1, 2, 3, 4))}),
        "protocol4_ops": (P.torch_zip(b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01w\x94" +
                                      P.tensor(P.storage_pid()) + b"u."),
                          {"w": ("F32", [4], struct.pack("<4f", 1, 2, 3, 4))}),
    }
    # A list of 200k ints referenced 200k times: 4e10 item scans if each reference were scanned (a
    # tenth of that took 9 s before the walk remembered each container's tensor holders); linear now
    # (0.1 s). The bound only tells linear from quadratic, with room for a loaded machine.
    cases["shared_int_list"] = (P.torch_zip(P.shared_list_pickle(200_000, 200_000)), {"w": ("F32", [4], struct.pack("<4f", 1, 2, 3, 4))})
    # torch 2.x's torch.save adds <root>/.data/serialization_id: a checkpoint, not TorchScript.
    cases["torch2_serialization_id"] = (P.torch_zip(P.one_tensor(), extra={"archive/.data/serialization_id": b"0123456789"}),
                                        {"w": ("F32", [4], struct.pack("<4f", 1, 2, 3, 4))})
    for name, (data, want) in cases.items():
        path = os.path.join(tmp, f"hand_{name}.pt")
        with open(path, "wb") as f:
            f.write(data)
        started = time.monotonic()
        result = validate(cli, path)
        elapsed = time.monotonic() - started
        check(result["valid"], f"{name}: {result}")
        check(elapsed < 30, f"{name}: validate took {elapsed:.1f} s")
        out = path + ".safetensors"
        conv = run(cli, "convert", path, out)
        check(conv.returncode == 0, f"{name}: convert {conv.stderr}")
        if conv.returncode == 0:
            tensors, _ = read_safetensors(out)
            got = {k: (d, sh, b) for k, (d, sh, b) in tensors.items()}
            check(got == want, f"{name}: {got} != {want}")


def test_top_level_key(cli, tmp):
    """convert says which top-level key it read the tensors under; --key naming a value that holds no
    tensors is an InvalidArgument error, not an empty output."""
    P = pickles
    path = os.path.join(tmp, "keyed.pt")
    with open(path, "wb") as f:
        f.write(P.torch_zip(P.pickle(P.state_dict((P.s("epoch"), P.i(3)), (P.s("model"), P.state_dict((P.s("w"), P.tensor(P.storage_pid()))))))))
    out = path + ".safetensors"
    conv = run(cli, "convert", path, out)
    check(conv.returncode == 0 and b"reading the tensors under top-level key `model` (use --key to choose another)" in conv.stderr,
          f"convert must name the key it chose: {conv.stderr}")
    check(os.path.exists(out) and list(read_safetensors(out)[0]) == ["w"], "keyed convert")
    os.remove(out)
    conv = run(cli, "convert", "--key", "model", path, out)
    check(conv.returncode == 0 and b"top-level key" not in conv.stderr, f"--key model: {conv.stderr}")
    os.remove(out)
    # A usage error (InvalidArgument, exit 2) from every command: validate exited 1 before issue 38.
    for args in (["convert", "--key", "epoch", path, out], ["validate", "--key", "epoch", path]):
        conv = run(cli, *args)
        check(conv.returncode == 2 and b"InvalidArgument" in conv.stderr + conv.stdout and b"`epoch` holds an int" in conv.stderr + conv.stdout,
              f"{args}: {conv.stdout} {conv.stderr}")
    check(not os.path.exists(out), "--key epoch left an output")


def test_dedup_through_the_pipeline(cli, tmp):
    """A checkpoint is a TensorFile like any other, so --dedup composes with every output format and
    --type: tied names become aliases in the metadata (safetensors' __metadata__, GGUF's safetensors.*
    STRING pairs), a view of another shape keeps its own bytes, and a .bin folder converts to one file."""
    P = pickles
    path = os.path.join(tmp, "tied.pt")
    storage = struct.pack("<16f", *range(16))
    with open(path, "wb") as f:
        f.write(P.torch_zip(P.pickle(P.state_dict(
            (P.s("b"), P.tensor(P.storage_pid(numel=16), size=(4, 4), stride=(4, 1))),
            (P.s("a"), P.tensor(P.storage_pid(numel=16), size=(4, 4), stride=(4, 1))),
            (P.s("row"), P.tensor(P.storage_pid(numel=16), size=(4,), stride=(1,))))), {"0": storage}))
    out = path + ".safetensors"
    conv = run(cli, "convert", "--dedup", path, out)
    check(conv.returncode == 0 and b"wrote" in conv.stdout, f"--dedup: {conv.stdout} {conv.stderr}")
    if conv.returncode == 0:
        tensors, meta = read_safetensors(out)
        check(sorted(tensors) == ["a", "row"] and meta == {"format": "pt", "b": "a"}, f"--dedup kept {sorted(tensors)} {meta}")
        check(tensors["a"][2] == storage and tensors["row"][2] == storage[:16], "--dedup bytes")
    gguf_out = path + ".gguf"
    conv = run(cli, "convert", "--dedup", "--type", "f16", path, gguf_out)
    check(conv.returncode == 0, f"--dedup --type f16 into GGUF: {conv.stderr}")
    if conv.returncode == 0:
        blob = open(gguf_out, "rb").read()
        check(blob[:4] == b"GGUF" and b"safetensors.b" in blob and b"safetensors.format" in blob, "GGUF --dedup metadata")
        # read back through the registry: two tensors, the matrix as F16
        listed = json.loads(run(cli, "inspect", "--json", gguf_out).stdout)
        check(sorted((t["name"], t["type"]) for t in listed["tensors"]) == [("a", "F16"), ("row", "F32")], f"GGUF --dedup tensors {listed}")
    # A model folder of .bin weights (it has a config.json) converted to one file (not a folder): read as
    # one model.
    folder = os.path.join(tmp, "binfolder")
    os.makedirs(folder)
    os.replace(path, os.path.join(folder, "pytorch_model.bin"))
    with open(os.path.join(folder, "config.json"), "w") as f:
        f.write("{}")
    conv = run(cli, "convert", folder, os.path.join(tmp, "one.safetensors"))
    check(conv.returncode == 0 and sorted(read_safetensors(os.path.join(tmp, "one.safetensors"))[0]) == ["a", "b", "row"],
          f"bin folder -> one file: {conv.stderr}")


# --- real torch ---------------------------------------------------------------------------------------

def test_index_and_detection_edges(cli, tmp):
    """Hand-built, no torch needed: an index's shard names may not hold a NUL or name another index; a
    refused folder conversion leaves no folder, also through `..`; a safetensors file with "ustar" at
    byte 257 stays safetensors (tar is told by its header checksum, not the magic alone)."""
    P = pickles
    folder = os.path.join(tmp, "edge_index")
    os.makedirs(folder)
    shard = "pytorch_model-00001-of-00001.bin"
    with open(os.path.join(folder, shard), "wb") as f:
        f.write(P.torch_zip(P.one_tensor()))
    index_path = os.path.join(folder, "pytorch_model.bin.index.json")
    with open(os.path.join(folder, "inner.bin.index.json"), "w") as f:
        json.dump({"weight_map": {"w": shard}}, f)
    with open(os.path.join(folder, "config.json"), "w") as f:  # a model folder: its index is what is refused
        f.write("{}")
    for label, named in (("a NUL in a shard name", shard + "\0"), ("an index as a shard", "inner.bin.index.json")):
        with open(index_path, "w") as f:
            json.dump({"weight_map": {"w": named}}, f)
        for out in (os.path.join(tmp, "edge_out"), os.path.join(tmp, "edge_new", "..", "edge_other")):
            conv = run(cli, "convert", folder, out)
            check(conv.returncode != 0, f"{label}: convert accepted it")
            check(not os.path.exists(out) and not os.path.exists(os.path.join(tmp, "edge_new")),
                  f"{label}: a refused conversion left a folder ({out})")
        result = validate(cli, index_path)
        check(not result["valid"], f"{label}: validate {result}")
    check(sorted(os.listdir(folder)) == sorted([shard, "config.json", "inner.bin.index.json", "pytorch_model.bin.index.json"]),
          f"the input folder changed: {os.listdir(folder)}")

    name = "a" * 247 + "ustar" + "b" * 8  # the name starts at file offset 10, so "ustar" lands at 257
    header = json.dumps({name: {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, separators=(",", ":")).encode()
    path = os.path.join(tmp, "ustar_name.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + struct.pack("<f", 1.0))
    with open(path, "rb") as f:
        check(f.read()[257:262] == b"ustar", "the test file must hold ustar at 257")
    result = validate(cli, path)
    check(result["format"] == "safetensors" and result["valid"], f"ustar in a tensor name: {result}")


def run_on_terminal(*argv):
    """Runs argv with stderr on a pseudo-terminal: (exit status, stdout, what reached the terminal)."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child's side closed
            break
        if not chunk:
            break
        seen += chunk
    stdout = proc.stdout.read()
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, stdout, seen


def test_progress(cli, tmp):
    """convert shows its progress when stderr is a terminal, and writes none to a pipe or file: the
    PyTorch converter, then the general one (that .safetensors to GGUF)."""
    P = pickles
    path = os.path.join(tmp, "progress.pt")
    with open(path, "wb") as f:
        f.write(P.torch_zip(P.one_tensor()))
    for source, out in ((path, path + ".safetensors"), (path + ".safetensors", path + ".gguf")):
        status, _, terminal = run_on_terminal(cli, "convert", source, out)
        check(status == 0 and b"converted 1 tensors" in terminal, f"progress on a terminal: {status} {terminal!r}")
        os.remove(out)
        piped = run(cli, "convert", source, out)
        check(piped.returncode == 0 and b"converted" not in piped.stderr, f"no progress into a pipe: {piped.stderr!r}")


def torch_bytes(torch, t):
    t = t.detach().contiguous()
    if t.dtype in (torch.float64, torch.float32, torch.float16, torch.int64, torch.int32, torch.int16,
                   torch.int8, torch.uint8, torch.bool, torch.complex64):
        return t.numpy().tobytes()
    # bf16, float8, uint16/32/64: numpy has no such type (or older torch cannot convert it); the bytes.
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()


# dtypes newer torch versions add (name in torch, safetensors code), tested when the torch has them.
NEWER_DTYPES = (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2"), ("float8_e4m3fnuz", "F8_E4M3FNUZ"),
                ("float8_e5m2fnuz", "F8_E5M2FNUZ"), ("float8_e8m0fnu", "F8_E8M0"), ("uint16", "U16"),
                ("uint32", "U32"), ("uint64", "U64"))


def dtype_codes(torch):
    codes = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
             torch.bool: "BOOL", torch.complex64: "C64"}
    for name, code in NEWER_DTYPES:
        if hasattr(torch, name):
            codes[getattr(torch, name)] = code
    return codes


def loaded_tensors(torch, path, key):
    """What torch.load gives for the file, by dotted name. Not weights-only: the files are this test's
    own, and torch 1.13's weights-only unpickler refuses floats (BINFLOAT) in a training checkpoint."""
    obj = torch.load(path, map_location="cpu", weights_only=False)
    return dict(flat(obj[key] if key else obj))


def flat(obj, prefix=None):
    """Dotted names of every tensor in nested dicts/lists, as the reader names them: each key as it is
    (an empty key is an empty part), `tensor` for a checkpoint that is one tensor."""
    import torch
    if isinstance(obj, torch.Tensor):
        yield "tensor" if prefix is None else prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from flat(v, str(k) if prefix is None else f"{prefix}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from flat(v, str(i) if prefix is None else f"{prefix}.{i}")


def expect_file(cli, torch, path, expected, key=None, shared=()):
    """expected: {name: tensor} as saved; checks that torch.load gives them back, then validate, inspect,
    cat of every tensor and convert against what torch.load gave."""
    base = os.path.basename(path)
    reference = loaded_tensors(torch, path, key)
    check(set(reference) == set(expected), f"{base}: torch.load names {sorted(reference)} != {sorted(expected)}")
    for name, t in expected.items():
        check(name in reference and torch_bytes(torch, reference[name]) == torch_bytes(torch, t),
              f"{base}: torch.load gives {name} back changed")
    expected = {n: reference[n] for n in expected if n in reference}
    result = validate(cli, path)
    check(result["valid"], f"{base}: {result}")
    if not result["valid"]:
        return
    info = json.loads(run(cli, "inspect", "--json", path).stdout)
    codes = dtype_codes(torch)
    got = {t["name"]: (t["dtype"], t["shape"]) for t in info["tensors"]}
    want = {n: (codes[t.dtype], list(t.shape)) for n, t in expected.items()}
    check(got == want, f"{base}: inspect {got} != {want}")
    check(info["key"] == key, f"{base}: key {info['key']} != {key}")
    for group in shared:
        check(any(set(group) <= set(g) for g in info["shared"]), f"{base}: {group} not shared in {info['shared']}")
    for name, t in expected.items():
        out = run(cli, "cat", path, name)
        check(out.returncode == 0 and out.stdout == torch_bytes(torch, t), f"{base}: cat {name} differs")
    out = path + ".safetensors"
    conv = run(cli, "convert", path, out)
    check(conv.returncode == 0, f"{base}: convert: {conv.returncode} {conv.stderr}")
    if conv.returncode == 0:
        tensors, meta = read_safetensors(out)
        check(meta.get("format") == "pt", f"{base}: metadata {meta}")
        for name, t in expected.items():
            check(name in tensors and tensors[name][2] == torch_bytes(torch, t), f"{base}: converted {name} differs")


def test_torch(cli, tmp, torch):
    torch.manual_seed(0)
    every = {}
    newer = {}  # torch cannot write these in the legacy format (no storage class): ZIP only
    for name, _ in NEWER_DTYPES:
        if hasattr(torch, name):
            dtype = getattr(torch, name)
            newer[name] = (torch.randn(3, 5) if dtype.is_floating_point else torch.arange(15).reshape(3, 5)).to(dtype)
    for dtype in dtype_codes(torch):
        if str(dtype).split(".")[1] in newer:
            continue
        if dtype.is_floating_point or dtype.is_complex:
            every[str(dtype).split(".")[1]] = torch.randn(3, 5).to(dtype)
        elif dtype == torch.bool:
            every["bool"] = torch.rand(3, 5) > 0.5
        else:
            every[str(dtype).split(".")[1]] = torch.randint(-100 if dtype != torch.uint8 else 0, 100, (3, 5), dtype=dtype)
    base = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    views = {
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        "base": base,
        "tied": base,
        "transposed": base.t(),
        "offset": base[2:, 3:],
        "strided": base[::2, ::3],
        "expanded": torch.ones(3, 1).expand(3, 4),
        "big_endian_free": torch.arange(10, dtype=torch.int64)[3:7],
    }
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2))
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(5, 4)).sum().backward()
    opt.step()
    training = {"epoch": 7, "step": 12345678901, "lr": 0.001, "name": "run-1", "tags": ["a", "b"],
                "model": model.state_dict(), "optimizer": opt.state_dict()}
    cases = [
        ("every_dtype", every, every, None, ()),
        ("newer_dtypes", newer, newer, None, ()),
        ("views", views, views, None, [["base", "tied", "transposed", "offset", "strided"]]),
        ("state_dict", model.state_dict(), dict(flat(model.state_dict())), None, ()),
        ("keep_vars", model.state_dict(keep_vars=True), dict(flat(model.state_dict(keep_vars=True))), None, ()),
        ("training", training, dict(flat(training["model"])), "model", ()),
    ]
    print(f"torch {torch.__version__}: newer dtypes tested: {sorted(newer) or 'none'}")
    for name, obj, expected, key, shared in cases:
        for legacy in (False, True) if name != "newer_dtypes" else (False,):
            if not obj:
                continue
            path = os.path.join(tmp, f"{name}{'_legacy' if legacy else ''}.pt")
            torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
            expect_file(cli, torch, path, expected, key, shared)

    # Empty keys are names of their own, as torch.load keys them: `''` beside `tensor`, `.b` beside `b`.
    empty = {"": torch.ones(2), "tensor": torch.zeros(3), "n": {"": torch.arange(4), "b": torch.ones(1)}, "b": torch.zeros(1)}
    path = os.path.join(tmp, "empty_keys.pt")
    torch.save(empty, path)
    expect_file(cli, torch, path, dict(flat(empty)))
    check(sorted(dict(flat(empty))) == ["", "b", "n.", "n.b", "tensor"], f"empty-key names {sorted(dict(flat(empty)))}")

    # A checkpoint that is one tensor: named `tensor`.
    path = os.path.join(tmp, "one_tensor.pt")
    torch.save(base.t(), path)
    expect_file(cli, torch, path, {"tensor": base.t()})

    # --key picks another top-level entry: the optimizer's state, with integer keys.
    path = os.path.join(tmp, "training.pt")
    out = os.path.join(tmp, "optimizer.safetensors")
    conv = run(cli, "convert", "--key", "optimizer", path, out)
    check(conv.returncode == 0, f"--key optimizer: {conv.stderr}")
    if conv.returncode == 0:
        tensors, _ = read_safetensors(out)
        want = dict(flat(training["optimizer"]))
        check(set(tensors) == set(want), f"--key optimizer names {sorted(tensors)} != {sorted(want)}")
        for n, t in want.items():
            check(n in tensors and tensors[n][2] == torch_bytes(torch, t), f"--key optimizer: {n} differs")
    # --key on the reading commands: inspect lists the optimizer's tensors, cat reads one of them.
    listed = run(cli, "inspect", "--json", "--key", "optimizer", path)
    check(listed.returncode == 0, f"inspect --key optimizer: {listed.stderr}")
    if listed.returncode == 0:
        want = dict(flat(training["optimizer"]))
        names = [t["name"] for t in json.loads(listed.stdout)["tensors"]]
        check(sorted(names) == sorted(want), f"inspect --key optimizer names {sorted(names)} != {sorted(want)}")
        first = sorted(want)[0]
        cat = subprocess.run([cli, "cat", "--key", "optimizer", path, first], capture_output=True)
        check(cat.returncode == 0 and cat.stdout == torch_bytes(torch, want[first]), f"cat --key optimizer {first}: {cat.stderr}")

    # --dedup: tied names become aliases of one kept copy; views of other shapes keep their own bytes.
    path = os.path.join(tmp, "views.pt")
    out = os.path.join(tmp, "views_dedup.safetensors")
    conv = run(cli, "convert", "--dedup", path, out)
    check(conv.returncode == 0, f"--dedup: {conv.stderr}")
    if conv.returncode == 0:
        tensors, meta = read_safetensors(out)
        check("tied" not in tensors and meta.get("tied") == "base", f"--dedup metadata {meta}")
        check(tensors["transposed"][2] == torch_bytes(torch, views["transposed"]), "--dedup transposed differs")

    # Hugging Face folders: one pytorch_model.bin, and shards with their index (as transformers writes).
    sd = model.state_dict()
    names = list(sd)
    single = os.path.join(tmp, "hf_single")
    os.makedirs(single)
    torch.save(sd, os.path.join(single, "pytorch_model.bin"))
    sharded = os.path.join(tmp, "hf_sharded")
    os.makedirs(sharded)
    halves = [names[: len(names) // 2], names[len(names) // 2:]]
    weight_map = {}
    for k, part in enumerate(halves):
        shard = f"pytorch_model-{k + 1:05d}-of-00002.bin"
        torch.save({n: sd[n] for n in part}, os.path.join(sharded, shard))
        weight_map.update({n: shard for n in part})
    with open(os.path.join(sharded, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 1, "step": 7, "format": "pt"}, "weight_map": weight_map}, f)
    for folder in (single, sharded):  # a model folder has its config.json (copied beside the weights)
        with open(os.path.join(folder, "config.json"), "w") as f:
            f.write("{}")
    for folder, files in ((single, ["config.json", "model.safetensors"]),
                          (sharded, ["config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                     "model.safetensors.index.json"])):
        out = folder + "_out"
        conv = run(cli, "convert", folder, out)
        check(conv.returncode == 0, f"{folder}: {conv.stderr}")
        check(sorted(os.listdir(out)) == sorted(files) if os.path.isdir(out) else False, f"{folder}: wrote {os.listdir(out) if os.path.isdir(out) else None}")
        got = {}
        for f in files:
            if f.endswith(".safetensors") and os.path.exists(os.path.join(out, f)):
                tensors, _ = read_safetensors(os.path.join(out, f))
                got.update({n: (f, t[2]) for n, t in tensors.items()})
        check(set(got) == set(names), f"{folder}: names {sorted(got)}")
        for n in names:
            check(n in got and got[n][1] == torch_bytes(torch, sd[n]), f"{folder}: {n} differs")
        if folder == sharded and os.path.exists(os.path.join(out, "model.safetensors.index.json")):
            index = json.load(open(os.path.join(out, "model.safetensors.index.json")))
            check(index["weight_map"] == {n: got[n][0] for n in names}, f"index {index}")
            check(index["metadata"]["total_size"] == sum(len(got[n][1]) for n in names), f"total_size {index['metadata']}")
            # The input's other metadata kept with its JSON types, and the text as transformers writes it.
            check(index["metadata"]["step"] == 7 and index["metadata"]["format"] == "pt", f"metadata {index['metadata']}")
            text = open(os.path.join(out, "model.safetensors.index.json")).read()
            check(text == json.dumps(index, indent=2, sort_keys=True) + "\n", f"index text {text!r}")
    # The index read as one checkpoint by validate, inspect and cat (not sent to the safetensors reader).
    index_path = os.path.join(sharded, "pytorch_model.bin.index.json")
    result = validate(cli, index_path)
    check(result["format"] == "pytorch" and result["valid"], f"validate index: {result}")
    listed = run(cli, "inspect", "--json", index_path)
    inspected = json.loads(listed.stdout) if listed.returncode == 0 else {}
    check(inspected.get("container") == "index" and sorted(t["name"] for t in inspected.get("tensors", [])) == sorted(names),
          f"inspect index: {listed.stdout} {listed.stderr}")
    for n in names:
        cat = run(cli, "cat", index_path, n)
        check(cat.returncode == 0 and cat.stdout == torch_bytes(torch, sd[n]), f"cat index {n}: {cat.stderr}")
    conv = run(cli, "convert", index_path, os.path.join(tmp, "from_index.safetensors"))
    check(conv.returncode == 0, f"convert index: {conv.stderr}")
    if conv.returncode == 0:
        tensors, _ = read_safetensors(os.path.join(tmp, "from_index.safetensors"))
        check({n: t[2] for n, t in tensors.items()} == {n: torch_bytes(torch, sd[n]) for n in names}, "convert index: tensors differ")
    # A shard holding a tensor its index does not list: refused, and nothing is left behind.
    with open(os.path.join(sharded, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": {n: weight_map[n] for n in names[1:]}}, f)
    out = sharded + "_bad"
    conv = run(cli, "convert", sharded, out)
    check(conv.returncode == 1 and b"InvalidIndex" in conv.stderr, f"bad index: {conv.stderr}")
    result = validate(cli, index_path)
    check(result["format"] == "pytorch" and (result.get("error") or {}).get("kind") == "InvalidIndex", f"validate bad index: {result}")
    check(not os.path.exists(out), f"bad index left {out}")
    # An output folder that holds files is refused (a model is never merged into another), and kept.
    os.makedirs(out)
    with open(os.path.join(out, "keep"), "w") as f:
        f.write("x")
    refused = run(cli, "convert", sharded, out)
    check(refused.returncode == 2 and b"not empty" in refused.stderr and os.listdir(out) == ["keep"], f"existing folder: {os.listdir(out)}")
    nested = os.path.join(tmp, "new_parent", "out")
    check(run(cli, "convert", sharded, nested).returncode == 1 and not os.path.exists(os.path.dirname(nested)),
          "a refused conversion left the folders it created")

    # A __reduce__ hidden in a real state dict: torch.save writes the payload; we refuse it by name.
    canary = os.path.join(tmp, "canary_reduce")

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {canary}",))

    path = os.path.join(tmp, "reduce_in_state_dict.pt")
    torch.save({"w": torch.ones(2), "evil": Payload()}, path)
    result = validate(cli, path)
    err = result.get("error") or {}
    check(err.get("kind") == "UnsafePickle" and "posix.system" in err.get("message", ""), f"hidden __reduce__: {result}")
    check(not os.path.exists(canary), "the hidden __reduce__ created its canary")

    # A TorchScript archive (torch.jit.save: storages first, compressed code/ members) is ours to
    # detect, not DDUF's, and refused by name by every command, leaving no output.
    path = os.path.join(tmp, "scripted.pt")
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), path)
    result = validate(cli, path)
    err = result.get("error") or {}
    check(result["format"] == "pytorch" and err.get("kind") == "NotSupported" and "TorchScript" in err.get("message", ""),
          f"TorchScript: {result}")
    for args in (["inspect", path], ["cat", path, "weight"]):
        out = run(cli, *args)
        check(out.returncode == 1 and b"NotSupported" in out.stderr and b"TorchScript" in out.stderr, f"{args}: {out.stderr}")
    for out in (path + ".safetensors", path + ".gguf"):
        conv = run(cli, "convert", path, out)
        check(conv.returncode == 1 and b"TorchScript" in conv.stderr and not os.path.exists(out), f"convert TorchScript: {conv.stderr}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--require-torch", action="store_true", help="fail (not skip) when torch cannot be imported")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        test_malformed_corpus(args.cli, tmp)
        test_hostile_pickles(args.cli, tmp)
        test_refused_modules(args.cli, tmp)
        test_hand_built(args.cli, tmp)
        test_top_level_key(args.cli, tmp)
        test_progress(args.cli, tmp)
        test_dedup_through_the_pipeline(args.cli, tmp)
        test_index_and_detection_edges(args.cli, tmp)
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            test_torch(args.cli, tmp, torch)
    if FAILURES:
        print(f"{len(FAILURES)} failures")
        return 1
    if torch is None:
        print("torch not importable: real-checkpoint checks skipped")
        return 1 if args.require_torch else 77
    print("all PyTorch checkpoint checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
