#!/usr/bin/env python3
"""Conversion through the CLI (`convert`, `diff`) and the library's convert() with a tensor list
(convert_tool), checked against numpy, torch and gguf-py (expected values come from them and from the
test's own data, never from safeweights):

- safetensors -> GGUF -> safetensors is byte for byte the file safetensors -> safetensors writes, and
  GGUF -> safetensors -> GGUF keeps every tensor's bytes; gguf-py's GGUFReader reads every GGUF written
  here with the same names, types, shapes and values;
- --type f16/bf16 give numpy's (and ggml's) rounding; --type q8_0 stays within Q8_0's error bound, and
  its bytes dequantize as gguf-py dequantizes them;
- the type policy: 1-D tensors stay F32, integers are kept, rows that are not whole blocks fall back
  (Q8_0 -> F16, Q4_K -> Q5_0, Q6_K -> Q8_0), each named in the summary;
- `diff --json` agrees with numpy on max abs difference, RMSE and cosine similarity; its exit codes;
- a PyTorch checkpoint converts to the same tensors as .gguf as it does as .safetensors;
- permute_heads reorders rows exactly as llama.cpp's permute() (written here in numpy);
- every --type stays within a cosine bound of the original, and its bytes dequantize as gguf-py does;
- refused conversions leave no output, and an existing output untouched.

    test_convert.py --cli PATH/safeweights --tool PATH/convert_tool [--require-gguf]

Exits 77 (skipped) when numpy cannot be imported (or, with --require-gguf, gguf).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    sys.exit(77)

FAILURES = []
DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
          "U8": "u1", "BOOL": "?"}


def check(condition, message):
    if not condition:
        FAILURES.append(message)
        print("FAIL:", message)


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True)


def write_safetensors(path, tensors, metadata=None):
    """tensors: [(name, dtype code, shape, bytes)] in this order."""
    header, offset, blobs = {}, 0, []
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def bf16_bytes(x):
    """ggml's (and gguf-py's) float32 -> bfloat16: round to nearest even, NaN kept quiet."""
    bits = x.astype("<f4").view("<u4").astype(np.uint64)
    out = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(x)
    out[nan] = (bits[nan] >> 16) | 0x40
    return out.astype("<u2").tobytes()


def bf16_to_f32(b):
    return (np.frombuffer(b, "<u2").astype("<u4") << 16).view("<f4")


class Cli:
    def __init__(self, cli, tool, tmp):
        self.cli, self.tool, self.tmp = cli, tool, tmp

    def path(self, name):
        return os.path.join(self.tmp, name)

    def convert(self, src, dst, *args, ok=True):
        r = run(self.cli, "convert", src, dst, *args)
        if ok:
            check(r.returncode == 0, f"convert {os.path.basename(src)} {os.path.basename(dst)} {args}: {r.stderr.decode()}")
        return r

    def inspect(self, path):
        r = run(self.cli, "inspect", "--json", path)
        check(r.returncode == 0, f"inspect {path}: {r.stderr.decode()}")
        return json.loads(r.stdout)

    def types(self, path):
        """name -> (type, shape) through inspect, for either format."""
        info = self.inspect(path)
        if info["format"] == "gguf":
            return {t["name"]: (t["type"], t["shape"]) for t in info["tensors"]}
        return {t["name"]: (t["dtype"], t["shape"]) for t in info["tensors"]}

    def cat(self, path, name):
        r = run(self.cli, "cat", path, name)
        check(r.returncode == 0, f"cat {path} {name}: {r.stderr.decode()}")
        return r.stdout

    def diff(self, a, b):
        r = run(self.cli, "diff", "--json", a, b)
        return r.returncode, (json.loads(r.stdout) if r.stdout else None)


def sample_tensors(rng):
    f32 = rng.standard_normal((4, 64)).astype("<f4")
    return [
        ("w.f32", "F32", [4, 64], f32.tobytes()),
        ("w.f16", "F16", [2, 3, 32], rng.standard_normal((2, 3, 32)).astype("<f2").tobytes()),
        ("w.bf16", "BF16", [8, 32], bf16_bytes(rng.standard_normal((8, 32)).astype("<f4"))),
        ("norm", "F32", [64], rng.standard_normal(64).astype("<f4").tobytes()),
        ("scalar", "F32", [], np.array(2.5, "<f4").tobytes()),
        ("empty", "F16", [0, 32], b""),
        ("ids.i8", "I8", [5], np.arange(-2, 3, dtype="i1").tobytes()),
        ("ids.i16", "I16", [3], np.array([-1, 0, 1], "<i2").tobytes()),
        ("ids.i32", "I32", [2, 2], np.array([1, -2, 3, -4], "<i4").tobytes()),
        ("ids.i64", "I64", [2], np.array([2**62, -2**63], "<i8").tobytes()),
        ("d.f64", "F64", [3], np.array([1e-300, -0.5, 3.0], "<f8").tobytes()),
    ]


def test_round_trips(c, rng):
    tensors = sample_tensors(rng)
    for metadata in ({"format": "pt", "note": "h\u00e9llo"}, None):
        tag = "meta" if metadata else "nometa"
        src = c.path(f"rt_{tag}.safetensors")
        write_safetensors(src, tensors, metadata)
        st = c.path(f"rt_{tag}.st.safetensors")
        g = c.path(f"rt_{tag}.gguf")
        back = c.path(f"rt_{tag}.back.safetensors")
        c.convert(src, st)
        c.convert(src, g)
        c.convert(g, back)
        check(open(st, "rb").read() == open(back, "rb").read(), f"{tag}: safetensors -> GGUF -> safetensors is not byte-identical")
        types = c.types(g)
        for name, dtype, shape, data in tensors:
            check(types.get(name) == (dtype, shape), f"{tag}: {name} in the GGUF is {types.get(name)}, expected {(dtype, shape)}")
            check(c.cat(g, name) == data, f"{tag}: {name}'s bytes in the GGUF")
        code, d = c.diff(src, g)
        check(code == 0 and d["same"], f"{tag}: diff of a file and its GGUF conversion: {code} {d}")
        # GGUF -> safetensors -> GGUF: the same tensors and bytes (the order is safetensors').
        g2 = c.path(f"rt_{tag}.2.gguf")
        c.convert(back, g2)
        check(c.types(g2) == types, f"{tag}: GGUF -> safetensors -> GGUF changed types or shapes")
        for name, *_ in tensors:
            check(c.cat(g2, name) == c.cat(g, name), f"{tag}: {name} changed through GGUF -> safetensors -> GGUF")
        if metadata:
            kv = {e["key"]: e["value"] for e in c.inspect(g)["kv"]}
            check(kv.get("safetensors.format") == "pt" and kv.get("safetensors.note") == "h\u00e9llo", f"metadata in the GGUF: {kv}")
    # GGUF -> GGUF keeps the key/value pairs.
    g3 = c.path("rt_meta.3.gguf")
    c.convert(c.path("rt_meta.gguf"), g3)
    check(open(g3, "rb").read() == open(c.path("rt_meta.gguf"), "rb").read(), "GGUF -> GGUF is not byte-identical")


def test_float_types(c, rng):
    x = (rng.standard_normal((6, 64)) * 10).astype("<f4")
    x[0, :4] = [np.inf, -np.inf, 70000.0, 1e-8]
    src = c.path("ft.safetensors")
    write_safetensors(src, [("x", "F32", [6, 64], x.tobytes()), ("b", "F32", [64], x[1].tobytes())])
    for t, expected in (("f16", x.astype("<f2").tobytes()), ("bf16", bf16_bytes(x))):
        for ext in ("safetensors", "gguf"):
            out = c.path(f"ft.{t}.{ext}")
            r = c.convert(src, out, "--type", t)
            check(c.cat(out, "x") == expected, f"--type {t} to .{ext}: bytes differ from numpy's rounding")
            check(c.cat(out, "b") == x[1].tobytes(), f"--type {t}: the 1-D tensor must stay F32")
            check(b"b: F32 -> F32 (1-D)" in r.stdout, f"--type {t}: summary does not name the 1-D decision: {r.stdout}")
    # back up to F32 exactly (F16 and BF16 widen exactly)
    out = c.path("ft.f16.f32.safetensors")
    c.convert(c.path("ft.f16.gguf"), out, "--type", "f32")
    check(c.cat(out, "x") == x.astype("<f2").astype("<f4").tobytes(), "F16 -> F32")
    out = c.path("ft.bf16.f32.safetensors")
    c.convert(c.path("ft.bf16.gguf"), out, "--type", "f32")
    check(c.cat(out, "x") == bf16_to_f32(bf16_bytes(x)).tobytes(), "BF16 -> F32")


def q8_0_dequantize(blob, n):
    """Q8_0 per ggml's dequantize_row_q8_0: blocks of [f16 d][32 x int8], x = q * d."""
    b = np.frombuffer(blob, np.uint8).reshape(-1, 34)
    d = b[:, :2].copy().view("<f2").astype(np.float32)
    q = b[:, 2:].copy().view(np.int8).astype(np.float32)
    return (q * d).reshape(-1)[:n]


def test_quantized(c, rng, gguf):
    x = rng.standard_normal((8, 128)).astype("<f4")
    src = c.path("q.safetensors")
    write_safetensors(src, [("x", "F32", [8, 128], x.tobytes()), ("n", "F16", [128], x[0].astype("<f2").tobytes())])
    g = c.path("q.q8_0.gguf")
    c.convert(src, g, "--type", "q8_0")
    check(c.types(g) == {"x": ("Q8_0", [8, 128]), "n": ("F32", [128])}, f"Q8_0 types: {c.types(g)}")
    blob = c.cat(g, "x")
    deq = q8_0_dequantize(blob, x.size).reshape(x.shape)
    # Q8_0's bound: each value within half a step (amax / 127) of its block, plus the step's fp16 rounding.
    amax = np.abs(x.reshape(-1, 32)).max(axis=1, keepdims=True)
    err = np.abs(deq.reshape(-1, 32) - x.reshape(-1, 32))
    check(bool((err <= amax / 127 * (0.5 + 127 / 2048) + 1e-7).all()), f"Q8_0 error beyond its bound: {float(err.max())}")
    # GGUF -> safetensors dequantizes (as ggml computes it) to F32, and says so.
    back = c.path("q.back.safetensors")
    r = c.convert(g, back)
    check(c.cat(back, "x") == deq.astype("<f4").tobytes(), "Q8_0 -> safetensors is not ggml's dequantization")
    check(b"x: Q8_0 -> F32 (safetensors has no Q8_0: dequantized)" in r.stdout, f"summary: {r.stdout}")
    code, d = c.diff(src, g)
    t = {e["name"]: e for e in d["tensors"]} if d else {}
    check(code == 1 and "x" in t and not t["x"]["same"], f"diff of a quantized conversion must report a difference: {code}")
    if t.get("x"):
        diff = deq.astype(np.float64) - x.astype(np.float64)
        check(abs(t["x"]["max_abs_diff"] - np.abs(diff).max()) <= 1e-12, "diff max abs vs numpy (Q8_0)")
        check(abs(t["x"]["rmse"] - np.sqrt(np.mean(diff ** 2))) <= 1e-12, "diff rmse vs numpy (Q8_0)")
    if gguf is not None:
        from gguf import quants
        ours = np.frombuffer(blob, np.uint8).reshape(8, -1)
        check(np.array_equal(quants.quantize(x, gguf.GGMLQuantizationType.Q8_0), ours), "Q8_0 bytes differ from gguf-py's quantizer")
        check(np.array_equal(quants.dequantize(ours, gguf.GGMLQuantizationType.Q8_0), deq), "Q8_0 dequantization differs from gguf-py's")


# Lowest cosine similarity to the F32 original each type must reach on normal data (measured about
# 0.956 Q2_K, 0.989 Q3_K, 0.996 Q4, 0.999 Q5, 0.9998 Q6_K).
QUANT_BOUNDS = {"q4_0": 0.99, "q4_1": 0.99, "q5_0": 0.997, "q5_1": 0.997, "q2_k": 0.9, "q3_k": 0.96,
                "q4_k": 0.99, "q5_k": 0.997, "q6_k": 0.999}


def test_quantized_types(c, rng, gguf):
    """Every --type: the round trip through GGUF stays within its bound (by our diff), and the bytes
    dequantize as gguf-py dequantizes them (and quantize as it does, where it has the quantizer)."""
    x = rng.standard_normal((8, 512)).astype("<f4")
    src = c.path("qt.safetensors")
    write_safetensors(src, [("x", "F32", [8, 512], x.tobytes())])
    for t, bound in QUANT_BOUNDS.items():
        g, back = c.path(f"qt.{t}.gguf"), c.path(f"qt.{t}.safetensors")
        c.convert(src, g, "--type", t)
        c.convert(g, back)
        code, d = c.diff(src, g)
        e = d["tensors"][0] if d else {}
        check(code == 1 and e.get("type_b") == t.upper() and e.get("cosine", 0) >= bound,
              f"--type {t}: cosine {e.get('cosine')} below {bound}")
        y = np.frombuffer(c.cat(back, "x"), "<f4").astype(np.float64)
        check(abs(e.get("rmse", -1) - float(np.sqrt(np.mean((y - x.reshape(-1)) ** 2)))) <= 1e-9, f"--type {t}: diff rmse vs numpy")
        if gguf is None:
            continue
        from gguf import quants
        qt = gguf.GGMLQuantizationType[t.upper()]
        blob = np.frombuffer(c.cat(g, "x"), np.uint8).reshape(8, -1)
        check(np.array_equal(quants.dequantize(blob, qt).reshape(-1), y.astype(np.float32)),
              f"--type {t}: our dequantization differs from gguf-py's")
        try:
            theirs = quants.quantize(x, qt)
        except NotImplementedError:
            continue
        check(np.array_equal(theirs, blob), f"--type {t}: bytes differ from gguf-py's quantizer")


def test_fallbacks(c, rng):
    src = c.path("fb.safetensors")
    tensors = [
        ("r48", "F32", [2, 48], rng.standard_normal(96).astype("<f4").tobytes()),
        ("r96", "F32", [2, 96], rng.standard_normal(192).astype("<f4").tobytes()),
        ("r32", "F32", [2, 32], rng.standard_normal(64).astype("<f4").tobytes()),
        ("r256", "F32", [1, 256], rng.standard_normal(256).astype("<f4").tobytes()),
        ("v", "F32", [32], rng.standard_normal(32).astype("<f4").tobytes()),
        ("i", "I32", [2, 32], np.arange(64, dtype="<i4").tobytes()),
    ]
    write_safetensors(src, tensors)
    cases = {
        "q8_0": {"r48": ("F16", "rows of 48 are not a multiple of 32"), "r96": ("Q8_0", None), "r32": ("Q8_0", None), "r256": ("Q8_0", None)},
        "q4_k": {"r48": ("F16", "rows of 48 are not a multiple of 256"), "r96": ("Q5_0", "rows of 96 are not a multiple of 256"),
                 "r32": ("Q5_0", "rows of 32 are not a multiple of 256"), "r256": ("Q4_K", None)},
        "q6_k": {"r96": ("Q8_0", "rows of 96 are not a multiple of 256"), "r256": ("Q6_K", None)},
        "q5_k": {"r32": ("Q5_1", "rows of 32 are not a multiple of 256")},
    }
    for t, want in cases.items():
        out = c.path(f"fb.{t}.gguf")
        r = c.convert(src, out, "--type", t)
        if r.returncode != 0:
            continue
        types = c.types(out)
        check(types["v"] == ("F32", [32]) and types["i"] == ("I32", [2, 32]), f"--type {t}: 1-D and integer tensors: {types}")
        check(b"i: I32 -> I32 (I32 is kept)" in r.stdout, f"--type {t}: summary must say the integer tensor is kept")
        for name, (ty, note) in want.items():
            check(types[name][0] == ty, f"--type {t}: {name} is {types[name][0]}, expected {ty}")
            if note:
                line = f"{name}: F32 -> {ty} ({note})".encode()
                check(line in r.stdout, f"--type {t}: summary lacks {line}: {r.stdout}")


def test_diff(c, rng):
    a = rng.standard_normal((16, 33)).astype("<f4")
    b = a + rng.standard_normal(a.shape).astype("<f4") * 1e-3
    pa, pb = c.path("da.safetensors"), c.path("db.safetensors")
    write_safetensors(pa, [("t", "F32", [16, 33], a.tobytes()), ("same", "I32", [2], b"\1\0\0\0\2\0\0\0"),
                           ("onlya", "F32", [1], b"\0\0\0\0"), ("shape", "F32", [2], bytes(8))])
    write_safetensors(pb, [("t", "F32", [16, 33], b.tobytes()), ("same", "I32", [2], b"\1\0\0\0\2\0\0\0"),
                           ("onlyb", "F32", [1], b"\0\0\0\0"), ("shape", "F32", [1, 2], bytes(8))])
    code, d = c.diff(pa, pb)
    check(code == 1 and d is not None, f"diff of different files: exit {code}")
    if d is None:
        return
    check(d["only_in_a"] == ["onlya"] and d["only_in_b"] == ["onlyb"] and d["same"] is False, f"diff names: {d}")
    t = {e["name"]: e for e in d["tensors"]}
    x, y = a.astype(np.float64), b.astype(np.float64)
    cos = float((x * y).sum() / (np.sqrt((x * x).sum()) * np.sqrt((y * y).sum())))
    for key, want in (("max_abs_diff", float(np.abs(x - y).max())), ("rmse", float(np.sqrt(np.mean((x - y) ** 2)))), ("cosine", cos)):
        check(abs(t["t"][key] - want) <= 1e-12 * max(1.0, abs(want)), f"diff {key}: {t['t'][key]} vs numpy {want}")
    check(t["same"]["same"] and t["same"]["identical"] and t["same"]["max_abs_diff"] == 0, f"identical tensor: {t['same']}")
    check(t["shape"]["shape_a"] == [2] and t["shape"]["shape_b"] == [1, 2] and t["shape"]["rmse"] is None, f"shape difference: {t['shape']}")
    check(run(c.cli, "diff", pa, pa).returncode == 0, "diff of a file with itself must exit 0")
    text = run(c.cli, "diff", pa, pb)
    check(text.returncode == 1 and b"only in A: onlya" in text.stdout and b"shapes differ" in text.stdout, f"text diff: {text.stdout}")
    check(run(c.cli, "diff", pa, c.path("missing.safetensors")).returncode == 1, "diff with a missing file must exit 1 (FileNotFound: the input)")


def test_inputs(c, rng):
    """A Hugging Face index of shards, and a DDUF entry."""
    x = rng.standard_normal((2, 32)).astype("<f4")
    folder = c.path("hf")
    os.makedirs(folder, exist_ok=True)
    write_safetensors(os.path.join(folder, "model-00001-of-00002.safetensors"), [("a", "F32", [2, 32], x.tobytes())])
    write_safetensors(os.path.join(folder, "model-00002-of-00002.safetensors"), [("b", "F32", [32], x[0].tobytes())])
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 384}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                                    "b": "model-00002-of-00002.safetensors"}}, f)
    out = c.path("hf.gguf")
    # A folder without config.json is no model (refused); its index converts as plain tensors.
    c.convert(os.path.join(folder, "model.safetensors.index.json"), out)
    check(c.cat(out, "a") == x.tobytes() and c.cat(out, "b") == x[0].tobytes(), "HF shards' index -> GGUF")
    comp = c.path("dd")
    os.makedirs(os.path.join(comp, "unet"), exist_ok=True)
    write_safetensors(os.path.join(comp, "unet", "model.safetensors"), [("w", "F32", [2, 32], x.tobytes())])
    with open(os.path.join(comp, "unet", "config.json"), "w") as f:
        json.dump({}, f)
    with open(os.path.join(comp, "model_index.json"), "w") as f:
        json.dump({"_class_name": "X", "unet": ["diffusers", "UNet2DConditionModel"]}, f)
    dduf = c.path("m.dduf")
    r = run(c.cli, "pack", comp, dduf)
    check(r.returncode == 0, f"pack: {r.stderr}")
    out = c.path("dd.gguf")
    c.convert(dduf, out, "--entry", "unet/model.safetensors")
    check(c.cat(out, "w") == x.tobytes(), "DDUF entry -> GGUF")


def test_pytorch(c, rng):
    try:
        import torch
    except ImportError:
        print("skipped: .pt -> .gguf (no torch)")
        return
    pt = c.path("m.pt")
    w = torch.randn(4, 32)
    torch.save({"w": w, "wt": w.t(), "h": torch.randn(3, 32).half(), "ids": torch.arange(6, dtype=torch.int64)}, pt)
    st, g = c.path("m.pt.safetensors"), c.path("m.pt.gguf")
    c.convert(pt, st)
    c.convert(pt, g)
    code, d = c.diff(st, g)
    check(code == 0, f".pt -> .gguf differs from .pt -> .safetensors: {d}")
    for name in ("w", "wt", "h", "ids"):
        check(c.cat(st, name) == c.cat(g, name), f".pt -> .gguf: {name}")


def numpy_permute(w, n_head):
    """llama.cpp's permute (convert_hf_to_gguf.py), in numpy."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def test_permute(c, rng):
    q = rng.standard_normal((32, 16)).astype("<f4")
    k = rng.standard_normal((16, 16)).astype("<f4")
    bias = rng.standard_normal(32).astype("<f4")
    src = c.path("perm.safetensors")
    write_safetensors(src, [("q_proj", "F32", [32, 16], q.tobytes()), ("k_proj", "F32", [16, 16], k.tobytes()),
                            ("q_bias", "F32", [32], bias.tobytes())])
    out = c.path("perm.gguf")
    r = run(c.tool, src, out, "q_proj=attn_q.weight:4", "k_proj=attn_k.weight:2", "q_bias=attn_q.bias:4")
    check(r.returncode == 0, f"convert_tool: {r.stderr}")
    check(c.cat(out, "attn_q.weight") == numpy_permute(q, 4).tobytes(), "permute_heads=4 on Q differs from numpy")
    check(c.cat(out, "attn_k.weight") == numpy_permute(k, 2).tobytes(), "permute_heads=2 on K (GQA) differs from numpy")
    check(c.cat(out, "attn_q.bias") == numpy_permute(bias, 4).tobytes(), "permute_heads on a bias differs from numpy")
    bad = run(c.tool, src, c.path("perm.bad.gguf"), "q_proj=q:3")
    check(bad.returncode == 1 and not os.path.exists(c.path("perm.bad.gguf")), "rows not divisible by 2 x heads must be refused")


def test_refused(c, rng):
    src = c.path("ref.safetensors")
    write_safetensors(src, [("x", "F32", [2, 32], rng.standard_normal(64).astype("<f4").tobytes()), ("u", "U8", [3], b"\1\2\3")])
    for out, args in ((c.path("ref.gguf"), []), (c.path("ref.safetensors.out.safetensors"), ["--type", "q8_0"]),
                      (c.path("ref.bin"), []), (c.path("ref2.gguf"), ["--type", "q9"])):
        r = c.convert(src, out, *args, ok=False)
        check(r.returncode != 0 and not os.path.exists(out), f"convert {args} to {os.path.basename(out)} must fail and leave no file")
    # An existing output is left as it was.
    existing = c.path("exists.gguf")
    with open(existing, "wb") as f:
        f.write(b"keep")
    r = c.convert(src, existing, ok=False)
    check(r.returncode == 1 and open(existing, "rb").read() == b"keep", "a failed convert changed an existing output")
    check(not [n for n in os.listdir(c.tmp) if ".tmp" in n or n.startswith(".")], f"debris left: {os.listdir(c.tmp)}")
    broken = c.path("broken.safetensors")
    with open(broken, "wb") as f:
        f.write(b"\x10\0\0\0\0\0\0\0{\"x\":1}")
    r = c.convert(broken, c.path("broken.gguf"), ok=False)
    check(r.returncode == 1 and not os.path.exists(c.path("broken.gguf")), "an invalid input must leave no output")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--require-gguf", action="store_true")
    args = ap.parse_args()
    try:
        import gguf
    except ImportError:
        if args.require_gguf:
            sys.exit(77)
        gguf = None
    np.seterr(over="ignore")  # the inputs hold values beyond F16 on purpose
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        c = Cli(args.cli, args.tool, tmp)
        for test in (test_round_trips, test_float_types, test_fallbacks, test_diff, test_inputs, test_pytorch, test_permute, test_refused):
            test(c, rng)
        test_split(c, rng, gguf)
        test_quantized(c, rng, gguf)
        test_quantized_types(c, rng, gguf)
        if gguf is not None:
            test_gguf_py_reads(c, gguf)
    print(f"{len(FAILURES)} failures")
    sys.exit(1 if FAILURES else 0)


def test_split(c, rng, gguf):
    """--split-max-size / --split-max-tensors: llama.cpp's split files, read back as one model; gguf-py
    reads each file with the split keys llama.cpp writes (UINT16, UINT16, INT32)."""
    src = c.path("split_src.safetensors")
    write_safetensors(src, sample_tensors(rng), {"format": "pt"})
    c.convert(src, c.path("whole.gguf"))
    whole = c.inspect(c.path("whole.gguf"))
    for i, (args, count) in enumerate(((("--split-max-tensors", "4"), 3), (("--split-max-size", "1K"), None))):
        r = c.convert(src, c.path(f"parts{i}.gguf"), *args)
        files = sorted(f for f in os.listdir(c.tmp) if f.startswith(f"parts{i}-"))
        n = len(files)
        check(n > 1 and (count is None or n == count), f"{args}: {files}")
        check(files == [f"parts{i}-{k:05d}-of-{n:05d}.gguf" for k in range(1, n + 1)], f"{args}: names {files}")
        check(not os.path.exists(c.path(f"parts{i}.gguf")), "a split output writes no OUT.gguf")
        check(all(c.path(f) in r.stdout.decode() for f in files), f"the summary lists the files: {r.stdout.decode()}")
        last = c.path(files[-1])
        info = c.inspect(last)
        check([t["name"] for t in info["tensors"]] == [t["name"] for t in whole["tensors"]], f"{args}: the model from its last file")
        check([sp["file"] for sp in info["splits"]] == [c.path(f) for f in files], f"{args}: splits {info['splits']}")
        check(c.diff(c.path("whole.gguf"), last)[0] == 0, f"{args}: diff whole vs split")
        check(c.cat(last, "ids.i64") == c.cat(c.path("whole.gguf"), "ids.i64"), f"{args}: cat")
        # back into one file: the unsplit bytes
        c.convert(last, c.path("rejoined.gguf"))
        with open(c.path("rejoined.gguf"), "rb") as a, open(c.path("whole.gguf"), "rb") as b:
            check(a.read() == b.read(), f"{args}: split -> one file gives the unsplit file")
        if gguf is not None:
            for k, f in enumerate(files):
                reader = gguf.GGUFReader(c.path(f))
                fields = {name: field for name, field in reader.fields.items() if name.startswith("split.")}
                types = {name: field.types[0].name for name, field in fields.items()}
                values = {name: int(field.parts[field.data[0]][0]) for name, field in fields.items()}
                check(types == {"split.no": "UINT16", "split.count": "UINT16", "split.tensors.count": "INT32"}, f"{f}: {types}")
                check(values == {"split.no": k, "split.count": n, "split.tensors.count": len(whole["tensors"])}, f"{f}: {values}")
                keys = [name for name in reader.fields if not name.startswith("GGUF.")]
                check(k == 0 or keys == ["split.no", "split.tensors.count", "split.count"], f"{f}: keys {keys}")
    r = c.convert(src, c.path("parts.safetensors"), "--split-max-tensors", "2", ok=False)
    check(r.returncode != 0 and not os.path.exists(c.path("parts.safetensors")), "a split .safetensors output is refused")
    r = c.convert(src, c.path("parts.gguf"), "--split-max-size", "1.5G", ok=False)
    check(r.returncode != 0 and "split size" in r.stderr.decode(), f"a bad size is refused: {r.stderr.decode()}")


def test_gguf_py_reads(c, gguf):
    """GGUFReader reads every GGUF this test wrote, with the tensors our reader reports."""
    count = 0
    for name in sorted(os.listdir(c.tmp)):
        if not name.endswith(".gguf") or name.startswith("exists"):
            continue
        path = c.path(name)
        reader = gguf.GGUFReader(path)
        info = c.inspect(path)
        ours = info["tensors"]
        if "splits" in info:  # a file of a split model: gguf-py reads that file's tensors alone
            k = [sp["file"] for sp in info["splits"]].index(path)
            ours = [t for t in ours if t["split"] == k]
        theirs = [(t.name, t.tensor_type.name, [int(v) for v in t.shape]) for t in reader.tensors]
        check(theirs == [(t["name"], t["type"], t["ne"]) for t in ours], f"gguf-py reads {name} differently: {theirs}")
        for t in reader.tensors:
            check(bytes(t.data.tobytes()) == c.cat(path, t.name), f"gguf-py: {name}:{t.name} bytes")
        count += 1
    check(count >= 10, f"gguf-py read only {count} files")


if __name__ == "__main__":
    main()
