"""llama-quantize's file types (issue 37): `safeweights convert --type Q4_K_M ...` against the pinned
llama.cpp's own `llama-quantize` (SAFEWEIGHTS_LLAMA_TOOLS, scripts/llama-cpp.sh --tools) on tiny and
mid-sized random models: the same tensor types, the same tensor bytes and the same general.file_type, for every file
type whose tensor types this build quantizes (the others skip, naming the type), with the knobs, with
importance matrices made by `llama-imatrix` (GGUF and legacy .dat), and from an HF folder in one pass.
The type choice is also checked against llama.cpp's own snapshots of real models
(SAFEWEIGHTS_LLAMA_CPP/tests/snapshots), through tests/gguf/mix_types."""
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")

from conftest import CLI, REPO
from tiny_models import TEXT, llama_folder

TOOLS = os.environ.get("SAFEWEIGHTS_LLAMA_TOOLS")
SOURCE = os.environ.get("SAFEWEIGHTS_LLAMA_CPP")

# llama-quantize's list (tools/quantize QUANT_OPTIONS, less COPY).
FILE_TYPES = ["Q1_0", "Q2_0", "Q4_0", "Q4_1", "MXFP4_MOE", "Q5_0", "Q5_1", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M",
              "TQ1_0", "TQ2_0", "Q2_K", "Q2_K_S", "IQ3_XXS", "IQ3_S", "IQ3_M", "Q3_K", "IQ3_XS", "Q3_K_S", "Q3_K_M", "Q3_K_L", "IQ4_NL",
              "IQ4_XS", "Q4_K", "Q4_K_S", "Q4_K_M", "Q5_K", "Q5_K_S", "Q5_K_M", "Q6_K", "Q8_0", "F16", "BF16", "F32"]
# The keys that may differ: none; llama-quantize names no tool in what it writes.
TOOL_KEYS = set()


def tools():
    if not TOOLS:
        if os.environ.get("CI") == "true":
            pytest.fail("SAFEWEIGHTS_LLAMA_TOOLS is not set under CI=true (scripts/test.sh exports it)")
        pytest.skip("SAFEWEIGHTS_LLAMA_TOOLS is not set: no llama-quantize to compare with (bash scripts/llama-cpp.sh --tools)")
    return Path(TOOLS)


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


def llama_quantize(src, out, ftype, *knobs):
    r = run(tools() / "llama-quantize", *knobs, src, out, ftype, 2)
    return r


# The file types spelled like a tensor type that --type takes alone ("q4_k": every tensor Q4_K) are
# asked for by their llama-quantize number, which always names the file type.
AS_TENSOR_TYPE = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10, "Q3_K": 12, "Q4_K": 15,
                  "Q5_K": 17, "Q6_K": 18, "BF16": 32}


def ours(src, out, ftype, *knobs):
    ftype = AS_TENSOR_TYPE.get(ftype, ftype) if not knobs else ftype
    return run(CLI, "convert", src, out, "--type", ftype, "--threads", 2, *knobs)


def skip_if_missing_kernel(r, what):
    """Our convert refused a type whose quantizer this build lacks (the IQ and weighted kernels come
    from other branches): skip, naming it."""
    m = re.search(r"NotSupported: (converting to \S+ is not supported|importance-weighted quantizing to \S+[^\n]*)", r.stderr)
    if r.returncode != 0 and m:
        pytest.skip(f"{what}: {m.group(1)} in this build")


def summary(reader):
    """A GGUF's tensors (name -> [type name, sha256 of the bytes]) and keys (name -> value, arrays as
    sha256), as JSON values."""
    import hashlib
    import json

    import numpy as np

    def digest(a):
        return hashlib.sha256(np.asarray(a).tobytes()).hexdigest()

    tensors = {t.name: [t.tensor_type.name, digest(t.data)] for t in reader.tensors}
    fields = {}
    for name, f in reader.fields.items():
        if not name.startswith("GGUF."):
            value = f.contents()
            fields[name] = digest(value) if isinstance(value, np.ndarray) else value
    return json.loads(json.dumps([tensors, fields]))


def contents(path):
    """summary() of the file, read by the clients' gguf-py, or by the pinned tree's in a child where the
    file holds a type the former does not know (Q2_0 is newer than gguf 0.19)."""
    import inspect
    import json

    try:
        return summary(gguf.GGUFReader(str(path)))
    except ValueError:
        if not SOURCE:
            raise
    code = inspect.getsource(summary) + "import gguf, json, sys\nprint(json.dumps(summary(gguf.GGUFReader(sys.argv[1]))))\n"
    env = dict(os.environ, PYTHONPATH=f"{SOURCE}/gguf-py", NO_LOCAL_GGUF="")
    r = subprocess.run([os.sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def assert_same(ref, got):
    want, want_kv = contents(ref)
    have, have_kv = contents(got)
    assert sorted(have) == sorted(want)
    types = {n: (want[n][0], have[n][0]) for n in want if want[n][0] != have[n][0]}
    assert not types, f"tensor types differ (llama-quantize, ours): {types}"
    data = [n for n in want if want[n][1] != have[n][1]]
    assert not data, f"tensor bytes differ: {data}"
    differing = {k for k in set(want_kv) | set(have_kv) if want_kv.get(k) != have_kv.get(k)}
    assert differing <= TOOL_KEYS, {k: (want_kv.get(k), have_kv.get(k)) for k in differing}
    assert have_kv["general.file_type"] == want_kv["general.file_type"]


def f16_models(where, configs):
    """Llamas as F16 GGUF files written by our converter: name -> (HF folder, F16 GGUF)."""
    out = {}
    for seed, (name, config) in enumerate(configs.items()):
        folder = llama_folder(where / name, seed=seed, **config)
        f16 = where / f"{name}-f16.gguf"
        r = run(CLI, "convert", folder, f16, "--type", "f16")
        assert r.returncode == 0, r.stderr
        out[name] = (folder, f16)
    return out


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """Tiny Llamas: dense with GQA 4 and an output tensor (8 layers, so that llama.cpp's per-layer rules
    vary), and tied embeddings without GQA."""
    return f16_models(tmp_path_factory.mktemp("mixes"), {
        "gqa": dict(hidden_size=256, intermediate_size=512, num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=1),
        "tied": dict(hidden_size=256, intermediate_size=768, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=2,
                     tie_word_embeddings=True),
    })


def moe_from(src, dst, experts=4):
    """`src` (a dense llama GGUF) rewritten by gguf-py as a mixture of experts: each FFN matrix stacked
    into `experts` scaled copies (blk.N.ffn_*_exps.weight, [E, rows, cols]), a router and the expert
    counts. llama-quantize reads only the metadata and the tensors' names and shapes."""
    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(str(dst), reader.fields["general.architecture"].contents())
    for name, f in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        sub = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, f.contents(), f.types[0], sub_type=sub)
    writer.add_expert_count(experts)
    writer.add_expert_used_count(2)
    rng = np.random.default_rng(3)
    for t in reader.tensors:
        data = np.array(t.data)
        if re.search(r"\.ffn_(gate|up|down)\.weight$", t.name):
            stacked = np.stack([data * np.float16(1 + 0.125 * e) for e in range(experts)])
            writer.add_tensor(t.name.replace(".weight", "_exps.weight"), stacked)
            if ".ffn_gate." in t.name:
                router = rng.standard_normal((experts, data.shape[1])).astype(np.float32)
                writer.add_tensor(t.name.replace("ffn_gate", "ffn_gate_inp"), router)
        else:
            writer.add_tensor(t.name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst


@pytest.fixture(scope="session")
def moe(models, tmp_path_factory):
    return moe_from(models["gqa"][1], tmp_path_factory.mktemp("moe") / "moe-f16.gguf")


@pytest.mark.parametrize("ftype", ["Q4_K_M", "Q3_K_M", "Q2_K", "IQ3_M", "MXFP4_MOE"])
def test_moe_file_type_as_llama_quantize(moe, tmp_path, ftype):
    got = ours(moe, tmp_path / "ours.gguf", ftype)
    skip_if_missing_kernel(got, ftype)
    ref = llama_quantize(moe, tmp_path / "ref.gguf", ftype)
    assert ref.returncode == 0, ref.stderr[-2000:]
    assert got.returncode == 0, got.stderr
    assert_same(tmp_path / "ref.gguf", tmp_path / "ours.gguf")


def imatrix_files(model, where):
    """llama-imatrix's output for `model` (an F16 GGUF) on a short text, in both formats."""
    text = where / "text.txt"
    text.write_text(TEXT)
    made = {}
    for fmt in ("gguf", "dat"):
        out = where / f"imatrix.{fmt}"
        r = run(tools() / "llama-imatrix", "-m", model, "-f", text, "-o", out, "--output-format", fmt, "-c", 128, "--chunks", 2, "-t", 2,
                "--no-ppl")
        assert r.returncode == 0 and out.exists(), r.stderr[-3000:]
        made[fmt] = out
    return made


@pytest.fixture(scope="session")
def imatrices(models, tmp_path_factory):
    return imatrix_files(models["gqa"][1], tmp_path_factory.mktemp("imatrix"))


# The tied model (no output tensor, GQA 1) for the file types whose rules read those (CI time).
TIED_FILE_TYPES = ["Q4_0", "Q2_K", "Q3_K_M", "Q4_K_M", "Q6_K", "IQ2_XXS"]


@pytest.mark.parametrize("model, ftype", [("gqa", f) for f in FILE_TYPES] + [("tied", f) for f in TIED_FILE_TYPES])
def test_file_type_as_llama_quantize(models, tmp_path, model, ftype):
    src = models[model][1]
    got = ours(src, tmp_path / "ours.gguf", ftype)
    skip_if_missing_kernel(got, ftype)  # before llama-quantize's own run (its IQ3 search takes seconds)
    ref = llama_quantize(src, tmp_path / "ref.gguf", ftype)
    if ref.returncode != 0:
        # llama-quantize refuses it (the types that need an importance matrix): so must we, saying why.
        assert "requires an imatrix" in ref.stderr or "importance matrix" in ref.stderr, ref.stderr[-2000:]
        assert got.returncode != 0 and "importance matrix" in got.stderr, got.stderr
        return
    assert got.returncode == 0, got.stderr
    assert_same(tmp_path / "ref.gguf", tmp_path / "ours.gguf")


KNOBS = {
    "pure": ["--pure"],
    "output-type": ["--output-tensor-type", "q8_0"],
    "embedding-type": ["--token-embedding-type", "q5_0"],
    "tensor-type": ["--tensor-type", "attn_q=q8_0", "--tensor-type", "FFN_UP=q5_1"],
    "leave-output": ["--leave-output-tensor"],
    # NVFP4 has no file type of llama-quantize's: a mix reaches it through these (ggml's type name).
    "nvfp4": ["--tensor-type", "ffn_(up|gate)=nvfp4", "--output-tensor-type", "nvfp4", "--token-embedding-type", "NVFP4"],
    # blocks left out, the others renumbered, block_count rewritten; the rules still read 8 layers
    "prune-layers": ["--prune-layers", "5,1,3,1"],
}


@pytest.mark.parametrize("knob", sorted(KNOBS))
@pytest.mark.parametrize("ftype", ["Q4_K_M", "Q5_0"])
def test_knobs_as_llama_quantize(models, tmp_path, knob, ftype):
    src = models["gqa"][1]
    got = ours(src, tmp_path / "ours.gguf", ftype, *KNOBS[knob])
    skip_if_missing_kernel(got, ftype)
    ref = llama_quantize(src, tmp_path / "ref.gguf", ftype, *KNOBS[knob])
    assert ref.returncode == 0, ref.stderr[-2000:]
    assert got.returncode == 0, got.stderr
    assert_same(tmp_path / "ref.gguf", tmp_path / "ours.gguf")


def test_tensor_type_file_as_llama_quantize(models, tmp_path):
    """--tensor-type-file: PATTERN=TYPE entries separated by any white space, tried where the option
    stands among the --tensor-type options (the first pattern found in a name wins)."""
    src = models["gqa"][1]
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text("attn_q=q8_0\n\n  FFN_UP=q5_1\tblk\\.1\\.attn_v=q6_k\n")
    second.write_text("attn_k=q4_1 ffn_down=q5_0\n")
    knobs = ["--tensor-type", "attn_k=q5_0", "--tensor-type-file", first, "--tensor-type", "attn=q4_0", "--tensor-type-file", second]
    got = ours(src, tmp_path / "ours.gguf", "Q4_K_M", *knobs)
    ref = llama_quantize(src, tmp_path / "ref.gguf", "Q4_K_M", *knobs)
    assert ref.returncode == 0, ref.stderr[-2000:]
    assert got.returncode == 0, got.stderr
    assert_same(tmp_path / "ref.gguf", tmp_path / "ours.gguf")
    types = {n: t for n, (t, _) in contents(tmp_path / "ours.gguf")[0].items()}
    assert types["blk.0.attn_k.weight"] == "Q5_0" and types["blk.0.attn_q.weight"] == "Q8_0" and types["blk.1.attn_v.weight"] == "Q6_K"
    assert types["blk.0.attn_output.weight"] == "Q4_0" and types["blk.0.ffn_up.weight"] == "Q5_1"


def dry_run_types(stderr):
    """Each tensor's type from llama-quantize --dry-run's log: `[ i/ n] NAME - [shape], type = CUR, size =
    X MiB -> Y MiB (NEW)`, or `size = X MiB` for a tensor it keeps."""
    lines = re.findall(r"^\[\s*\d+/\s*\d+\]\s+(\S+)\s+- \[[^\]]*\], type =\s*(\S+), size =[^(\n]*(?:\((\w+)\))?$", stderr, re.M)
    return {name: (new or cur).upper() for name, cur, new in lines}


@pytest.mark.parametrize("ftype, knobs", [("Q4_K_M", []), ("Q3_K_S", ["--tensor-type", "attn_q=nvfp4", "--leave-output-tensor"])])
def test_dry_run_as_llama_quantize(models, tmp_path, ftype, knobs):
    """--dry-run prints each tensor's type, llama-quantize's for the same run, and the size a real run
    writes, and writes nothing."""
    src = models["gqa"][1]
    ref = llama_quantize(src, tmp_path / "ref.gguf", ftype, "--dry-run", *knobs)
    assert ref.returncode == 0, ref.stderr[-2000:]
    want = dry_run_types(ref.stderr)
    assert len(want) == len(contents(src)[0]), ref.stderr[-3000:]
    got = ours(src, tmp_path / "ours.gguf", ftype, "--dry-run", *knobs)
    assert got.returncode == 0, got.stderr
    assert list(tmp_path.iterdir()) == [], "a dry run writes nothing"
    have = dict(re.findall(r"^(\S+): \S+ -> (\S+)", got.stdout, re.M))
    assert have == want
    real = ours(src, tmp_path / "real.gguf", ftype, *knobs)
    assert real.returncode == 0, real.stderr
    assert got.stdout.splitlines()[-1].replace("dry run, nothing written; would write", "wrote").replace("ours.gguf", "real.gguf") == \
        real.stdout.splitlines()[-1]


def test_dry_run_refuses_what_a_run_refuses(models, tmp_path):
    """Without an importance matrix IQ2_XXS is refused by our dry run as by a real one; llama-quantize's
    dry run only warns."""
    src = models["gqa"][1]
    assert llama_quantize(src, tmp_path / "ref.gguf", "IQ2_XXS", "--dry-run").returncode == 0
    got = ours(src, tmp_path / "ours.gguf", "IQ2_XXS", "--dry-run")
    assert got.returncode != 0 and "importance matrix" in got.stderr, got.stderr
    assert list(tmp_path.iterdir()) == []


def test_keep_split_as_llama_quantize(models, tmp_path):
    """--keep-split: a split F16 input (75 tensors, 30 a file) quantized into files cut where the
    input's are, each file equal to llama-quantize's; with split limits it is refused, and an input in
    one file gives one file (llama-quantize would name it q-00001-of-00001.gguf)."""
    r = run(CLI, "convert", models["gqa"][1], tmp_path / "in.gguf", "--split-max-tensors", 30)
    assert r.returncode == 0, r.stderr
    first = tmp_path / "in-00001-of-00003.gguf"
    ref_dir, our_dir = tmp_path / "ref", tmp_path / "ours"
    ref_dir.mkdir()
    our_dir.mkdir()
    ref = llama_quantize(first, ref_dir / "q.gguf", "Q4_K_M", "--keep-split")
    assert ref.returncode == 0, ref.stderr[-2000:]
    got = ours(first, our_dir / "q.gguf", "Q4_K_M", "--keep-split")
    assert got.returncode == 0, got.stderr
    names = sorted(p.name for p in ref_dir.iterdir())
    assert names == [f"q-0000{k}-of-00003.gguf" for k in (1, 2, 3)]
    assert sorted(p.name for p in our_dir.iterdir()) == names
    for name in names:
        assert contents(our_dir / name) == contents(ref_dir / name), name
    got = ours(first, tmp_path / "limits.gguf", "Q4_K_M", "--keep-split", "--split-max-tensors", 10)
    assert got.returncode != 0 and "keep_split keeps the input's files" in got.stderr, got.stderr
    (tmp_path / "one").mkdir()
    got = ours(models["gqa"][1], tmp_path / "one" / "q.gguf", "Q4_K_M", "--keep-split")
    assert got.returncode == 0, got.stderr
    assert [p.name for p in (tmp_path / "one").iterdir()] == ["q.gguf"]


def split_with_last_block_alone(src, dst):
    """`src` (a GGUF) rewritten by gguf-py as 3 split files, the last holding the last block's tensors alone
    (the others before them in `src`'s order, half a file each): its first file."""
    reader = gguf.GGUFReader(str(src))
    last = f"blk.{reader.fields['llama.block_count'].contents() - 1}."
    tensors = [t for t in reader.tensors if not t.name.startswith(last)] + [t for t in reader.tensors if t.name.startswith(last)]
    rest = len(tensors) - sum(t.name.startswith(last) for t in reader.tensors)
    assert rest % 2 == 0 and rest // 2 >= len(tensors) - rest
    writer = gguf.GGUFWriter(str(dst), reader.fields["general.architecture"].contents(), split_max_tensors=rest // 2)
    for name, f in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        sub = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, f.contents(), f.types[0], sub_type=sub)
    for t in tensors:
        writer.add_tensor(t.name, np.array(t.data))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst.with_name(dst.stem + "-00001-of-00003.gguf")


def test_keep_split_with_pruned_layers_as_llama_quantize(models, tmp_path):
    """--keep-split with --prune-layers: a file whose every tensor is pruned is left out. The last one, as
    llama-quantize leaves it out (it counts files up to the last it keeps a tensor from): the files equal
    its files. One in the middle, where the pinned llama-quantize crashes (it counts the file and never
    creates it): the files after it renumbered, together the tensors and keys of the output in one file."""
    first = split_with_last_block_alone(models["gqa"][1], tmp_path / "in.gguf")
    ref_dir, our_dir = tmp_path / "ref", tmp_path / "ours"
    ref_dir.mkdir()
    our_dir.mkdir()
    ref = llama_quantize(first, ref_dir / "q.gguf", "Q4_K_M", "--keep-split", "--prune-layers", "7")
    assert ref.returncode == 0, ref.stderr[-2000:]
    got = ours(first, our_dir / "q.gguf", "Q4_K_M", "--keep-split", "--prune-layers", "7")
    assert got.returncode == 0, got.stderr
    names = ["q-00001-of-00002.gguf", "q-00002-of-00002.gguf"]
    assert sorted(p.name for p in ref_dir.iterdir()) == sorted(p.name for p in our_dir.iterdir()) == names
    for name in names:
        assert contents(our_dir / name) == contents(ref_dir / name), name

    r = run(CLI, "convert", models["gqa"][1], tmp_path / "in30.gguf", "--split-max-tensors", 30)
    assert r.returncode == 0, r.stderr
    middle = tmp_path / "middle"
    middle.mkdir()
    got = ours(tmp_path / "in30-00001-of-00003.gguf", middle / "q.gguf", "Q4_K_M", "--keep-split", "--prune-layers", "3,4,5,6")
    assert got.returncode == 0, got.stderr
    assert sorted(p.name for p in middle.iterdir()) == names
    whole = ours(models["gqa"][1], tmp_path / "whole.gguf", "Q4_K_M", "--prune-layers", "3,4,5,6")
    assert whole.returncode == 0, whole.stderr
    want, want_kv = contents(tmp_path / "whole.gguf")
    parts = [contents(middle / name) for name in names]
    assert {**parts[0][0], **parts[1][0]} == want and len(parts[0][0]) + len(parts[1][0]) == len(want)
    assert {k: v for k, v in parts[0][1].items() if not k.startswith("split.")} == want_kv
    assert [part[1]["split.no"] for part in parts] == [0, 1] and parts[1][1]["split.count"] == 2


def test_prune_layers_from_python_and_refused(models, tmp_path):
    """safeweights.convert(..., prune_layers=[...]) writes what --prune-layers writes; a list
    llama-quantize refuses is refused (naming the id), and nothing is written."""
    import safeweights

    src = models["gqa"][1]
    safeweights.convert(str(src), str(tmp_path / "py.gguf"), type="Q4_K_M", prune_layers=[6, 0])
    got = ours(src, tmp_path / "cli.gguf", "Q4_K_M", "--prune-layers", "0,6")
    assert got.returncode == 0, got.stderr
    tensors, keys = contents(tmp_path / "py.gguf")
    assert contents(tmp_path / "py.gguf") == contents(tmp_path / "cli.gguf")
    assert keys["llama.block_count"] == 6 and "blk.5.attn_q.weight" in tensors and "blk.6.attn_q.weight" not in tensors
    for bad in ("1,x", "1,", "-2"):
        assert llama_quantize(src, tmp_path / "ref.gguf", "Q4_K_M", "--prune-layers", bad).returncode != 0
        got = ours(src, tmp_path / "bad.gguf", "Q4_K_M", "--prune-layers", bad)
        assert got.returncode != 0 and f"--prune-layers {bad}: invalid layer id" in got.stderr, got.stderr
    with pytest.raises(Exception, match="invalid layer id '-1'"):
        safeweights.convert(str(src), str(tmp_path / "bad.gguf"), type="Q4_K_M", prune_layers=[-1])
    assert not (tmp_path / "bad.gguf").exists() and not (tmp_path / "ref.gguf").exists()


def test_dry_run_and_keep_split_from_python(models, tmp_path):
    """safeweights.convert(..., dry_run=True) reports what --dry-run prints (each tensor's types and note)
    and the bytes a run writes, and writes nothing; keep_split=True writes the files --keep-split writes."""
    import safeweights

    src = models["gqa"][1]
    dry = safeweights.convert(str(src), str(tmp_path / "py.gguf"), type="Q4_K_M", dry_run=True)
    cli = ours(src, tmp_path / "cli.gguf", "Q4_K_M", "--dry-run")
    assert cli.returncode == 0, cli.stderr
    assert list(tmp_path.iterdir()) == [] and dry["files"] == []
    printed = {n: (a, b, note) for n, a, b, note in re.findall(r"^(\S+): (\S+) -> (\S+)(?: \((.*)\))?$", cli.stdout, re.M)}
    assert {t["name"]: (t["from"], t["to"], t["note"]) for t in dry["tensors"]} == printed
    assert dry["bytes_written"] == safeweights.convert(str(src), str(tmp_path / "real.gguf"), type="Q4_K_M")["bytes_written"]

    r = run(CLI, "convert", src, tmp_path / "in.gguf", "--split-max-tensors", 30)
    assert r.returncode == 0, r.stderr
    first = tmp_path / "in-00001-of-00003.gguf"
    (tmp_path / "py").mkdir()
    (tmp_path / "cli").mkdir()
    report = safeweights.convert(str(first), str(tmp_path / "py" / "q.gguf"), type="Q4_K_M", keep_split=True)
    got = ours(first, tmp_path / "cli" / "q.gguf", "Q4_K_M", "--keep-split")
    assert got.returncode == 0, got.stderr
    names = [f"q-0000{k}-of-00003.gguf" for k in (1, 2, 3)]
    assert [os.path.basename(f) for f in report["files"]] == names
    assert sorted(p.name for p in (tmp_path / "py").iterdir()) == sorted(p.name for p in (tmp_path / "cli").iterdir()) == names
    for name in names:
        assert contents(tmp_path / "py" / name) == contents(tmp_path / "cli" / name), name


def test_tensor_type_file_from_python(models, tmp_path):
    """safeweights.convert(..., tensor_type_file=PATH) writes what the CLI's --tensor-type-file writes
    (a list of paths: each file's entries in turn, after tensor_types); a bad entry raises naming it."""
    import safeweights

    src = models["gqa"][1]
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text("attn_q=q8_0\n  FFN_UP=q5_1\tblk\\.1\\.attn_v=q6_k\n")
    second.write_text("attn_k=q4_1 ffn_down=nvfp4\n")
    safeweights.convert(str(src), str(tmp_path / "one.gguf"), type="Q4_K_M", tensor_type_file=first)
    got = ours(src, tmp_path / "cli-one.gguf", "Q4_K_M", "--tensor-type-file", first)
    assert got.returncode == 0, got.stderr
    assert contents(tmp_path / "one.gguf") == contents(tmp_path / "cli-one.gguf")
    safeweights.convert(str(src), str(tmp_path / "two.gguf"), type="Q4_K_M", tensor_types={"attn_k": "q5_0"}, tensor_type_file=[first, str(second)])
    got = ours(src, tmp_path / "cli-two.gguf", "Q4_K_M", "--tensor-type", "attn_k=q5_0", "--tensor-type-file", first, "--tensor-type-file", second)
    assert got.returncode == 0, got.stderr
    assert contents(tmp_path / "two.gguf") == contents(tmp_path / "cli-two.gguf")
    types = {n: t for n, (t, _) in contents(tmp_path / "two.gguf")[0].items()}
    assert types["blk.0.attn_k.weight"] == "Q5_0" and types["blk.0.ffn_down.weight"] == "NVFP4"
    bad = tmp_path / "bad.txt"
    bad.write_text("attn_q=q8_0 attn_k\n")
    with pytest.raises(Exception, match=re.escape(f"--tensor-type-file {bad}: attn_k: expected PATTERN=TYPE")):
        safeweights.convert(str(src), str(tmp_path / "bad.gguf"), type="Q4_K_M", tensor_type_file=bad)
    assert not (tmp_path / "bad.gguf").exists()


def test_nvfp4_is_a_tensor_type_not_a_file_type(models, tmp_path):
    """--type nvfp4 makes every matrix NVFP4, the bytes llama-quantize writes with --pure and a pattern
    that names every tensor, and general.file_type 39 (llama.h's MOSTLY_NVFP4). As a file type, NVFP4
    is refused by both."""
    src = models["gqa"][1]
    got = ours(src, tmp_path / "ours.gguf", "nvfp4")
    assert got.returncode == 0, got.stderr
    ref = llama_quantize(src, tmp_path / "ref.gguf", "Q8_0", "--pure", "--tensor-type", ".=nvfp4")
    assert ref.returncode == 0, ref.stderr[-2000:]
    (want, _), (have, have_kv) = contents(tmp_path / "ref.gguf"), contents(tmp_path / "ours.gguf")
    assert have == want
    assert {t for t, _ in have.values()} == {"NVFP4", "F32"}
    assert have_kv["general.file_type"] == 39
    # Read back: diff compares it (values differ, nothing refused) and convert dequantizes it as gguf-py does.
    d = run(CLI, "diff", src, tmp_path / "ours.gguf")
    assert d.returncode == 1, d.stdout[-2000:] + d.stderr
    back = run(CLI, "convert", tmp_path / "ours.gguf", tmp_path / "back.safetensors")
    assert back.returncode == 0, back.stderr
    from safetensors.numpy import load_file

    dequantized = load_file(str(tmp_path / "back.safetensors"))
    t = next(t for t in gguf.GGUFReader(str(tmp_path / "ours.gguf")).tensors if t.name == "blk.0.ffn_up.weight")
    assert np.array_equal(dequantized["blk.0.ffn_up.weight"], gguf.quants.dequantize(t.data, t.tensor_type))
    assert llama_quantize(src, tmp_path / "ref2.gguf", "NVFP4").returncode != 0
    got = ours(src, tmp_path / "ours2.gguf", "NVFP4", "--pure")
    assert got.returncode != 0 and "--type NVFP4: expected" in got.stderr, got.stderr
    assert not (tmp_path / "ours2.gguf").exists() and not (tmp_path / "ref2.gguf").exists()


@pytest.mark.parametrize("text, message", [("attn_q=q8_0 attn_k\n", "attn_k: expected PATTERN=TYPE"),
                                           ("attn_q=q9_9\n", "q9_9: not a ggml type name")])
def test_tensor_type_file_refused_as_llama_quantize(models, tmp_path, text, message):
    src, listing = models["gqa"][1], tmp_path / "types.txt"
    listing.write_text(text)
    ref = llama_quantize(src, tmp_path / "ref.gguf", "Q4_K_M", "--tensor-type-file", listing)
    got = ours(src, tmp_path / "ours.gguf", "Q4_K_M", "--tensor-type-file", listing)
    assert ref.returncode != 0 and not (tmp_path / "ref.gguf").exists()
    assert got.returncode != 0 and f"--tensor-type-file {listing}: {message}" in got.stderr, got.stderr
    assert not (tmp_path / "ours.gguf").exists()
    got = ours(src, tmp_path / "ours.gguf", "Q4_K_M", "--tensor-type-file", tmp_path / "missing.txt")
    assert got.returncode != 0 and "FileNotFound" in got.stderr and "missing.txt" in got.stderr, got.stderr


# --override-kv: each type, a new key, a key the type rules read (head_count_kv: GQA 1 instead of 4,
# which makes attn_v Q3_K instead of Q4_K in Q2_K), and a negative int (written as its magnitude, UINT32).
OVERRIDES = ["general.name=str:renamed model", "llama.context_length=int:-4096", "llama.rope.freq_base=float:500000.5",
             "general.flag=bool:true", "my.new_key=str:", "llama.attention.head_count_kv=int:4"]


def test_override_kv_as_llama_quantize(models, tmp_path):
    src = models["gqa"][1]
    knobs = [a for o in OVERRIDES for a in ("--override-kv", o)]
    got = ours(src, tmp_path / "ours.gguf", "Q2_K", *knobs)
    ref = llama_quantize(src, tmp_path / "ref.gguf", "Q2_K", *knobs)
    assert ref.returncode == 0, ref.stderr[-2000:]
    assert got.returncode == 0, got.stderr
    assert_same(tmp_path / "ref.gguf", tmp_path / "ours.gguf")
    keys = contents(tmp_path / "ours.gguf")[1]
    assert keys["general.name"] == "renamed model" and keys["llama.context_length"] == 4096 and keys["general.flag"] is True
    plain = ours(src, tmp_path / "plain.gguf", "Q2_K")
    assert plain.returncode == 0, plain.stderr
    assert contents(tmp_path / "plain.gguf")[0]["blk.0.attn_v.weight"][0] == "Q4_K"
    assert contents(tmp_path / "ours.gguf")[0]["blk.0.attn_v.weight"][0] == "Q3_K"


def test_override_kv_from_python(models, tmp_path):
    """safeweights.convert(..., override_kv=[...]) writes what the CLI writes; a bad entry raises naming it."""
    import safeweights

    src = models["gqa"][1]
    safeweights.convert(str(src), str(tmp_path / "py.gguf"), type="Q4_K_M", override_kv=OVERRIDES)
    got = ours(src, tmp_path / "cli.gguf", "Q4_K_M", *[a for o in OVERRIDES for a in ("--override-kv", o)])
    assert got.returncode == 0, got.stderr
    assert contents(tmp_path / "py.gguf") == contents(tmp_path / "cli.gguf")
    with pytest.raises(Exception, match="a bool is true or false"):
        safeweights.convert(str(src), str(tmp_path / "bad.gguf"), type="Q4_K_M", override_kv=["general.flag=bool:1"])
    assert not (tmp_path / "bad.gguf").exists()


@pytest.mark.parametrize("spec, message", [("general.name=string:x", "the type is int, float, bool or str"),
                                           ("general.flag=bool:yes", "a bool is true or false"),
                                           ("general.name=str:" + "x" * 128, "a string value holds at most 127 bytes"), ("no-equals", "expected KEY=TYPE:VALUE")])
def test_override_kv_refused_as_llama_quantize(models, tmp_path, spec, message):
    src = models["gqa"][1]
    ref = llama_quantize(src, tmp_path / "ref.gguf", "Q4_K_M", "--override-kv", spec)
    got = ours(src, tmp_path / "ours.gguf", "Q4_K_M", "--override-kv", spec)
    assert ref.returncode != 0 and not (tmp_path / "ref.gguf").exists()
    assert got.returncode != 0 and f"--override-kv {spec}: {message}" in got.stderr, got.stderr
    assert not (tmp_path / "ours.gguf").exists()


def test_requantize_refused_then_allowed(models, tmp_path):
    q8 = tmp_path / "q8.gguf"
    assert llama_quantize(models["gqa"][1], q8, "Q8_0").returncode == 0
    ref = llama_quantize(q8, tmp_path / "ref.gguf", "Q4_0")
    got = ours(q8, tmp_path / "ours.gguf", "Q4_0")
    assert ref.returncode != 0 and "requantizing from type q8_0 is disabled" in ref.stderr
    assert got.returncode != 0 and "requantizing from Q8_0 is refused without --allow-requantize" in got.stderr
    assert not (tmp_path / "ours.gguf").exists()
    assert llama_quantize(q8, tmp_path / "ref.gguf", "Q4_0", "--allow-requantize").returncode == 0
    got = ours(q8, tmp_path / "ours.gguf", "Q4_0", "--allow-requantize")
    assert got.returncode == 0, got.stderr
    assert_same(tmp_path / "ref.gguf", tmp_path / "ours.gguf")


@pytest.mark.parametrize("fmt", ["gguf", "dat"])
@pytest.mark.parametrize("ftype", ["Q8_0", "Q4_0", "Q2_K_S", "IQ3_XXS"])
def test_imatrix_as_llama_quantize(models, imatrices, tmp_path, fmt, ftype):
    src, imatrix = models["gqa"][1], imatrices[fmt]
    got = ours(src, tmp_path / "ours.gguf", ftype, "--imatrix", imatrix)
    skip_if_missing_kernel(got, f"{ftype} with an importance matrix")
    ref = llama_quantize(src, tmp_path / "ref.gguf", ftype, "--imatrix", imatrix)
    assert ref.returncode == 0, ref.stderr[-2000:]
    assert got.returncode == 0, got.stderr
    assert_same(tmp_path / "ref.gguf", tmp_path / "ours.gguf")


@pytest.mark.parametrize("which", [["--include-weights", "attn_v"], ["--exclude-weights", "ffn_down"]])
def test_imatrix_filters_as_llama_quantize(models, imatrices, tmp_path, which):
    src, imatrix = models["gqa"][1], imatrices["gguf"]
    ref = llama_quantize(src, tmp_path / "ref.gguf", "Q8_0", "--imatrix", imatrix, *which)
    assert ref.returncode == 0, ref.stderr[-2000:]
    got = ours(src, tmp_path / "ours.gguf", "Q8_0", "--imatrix", imatrix, *which)
    assert got.returncode == 0, got.stderr
    assert_same(tmp_path / "ref.gguf", tmp_path / "ours.gguf")


# Mid-sized models (issue 37: "tiny and mid-sized random models"): hidden 512, 8 heads over 2 key/value
# heads (GQA 4), 4 layers, and an FFN of 1408, not a whole number of 256-blocks, so that ffn_down takes
# llama.cpp's fallback types; and the same model as a mixture of 4 experts. The vocabulary is the tiny
# tokenizer's (llama-imatrix runs the model on text). A subset of the file types, for CI time.
MID_FILE_TYPES = ["Q4_K_M", "Q5_K_M", "Q3_K_M", "Q2_K", "IQ4_XS", "IQ2_M"]


@pytest.fixture(scope="session")
def mid(tmp_path_factory):
    where = tmp_path_factory.mktemp("mid")
    dense = f16_models(where, {"mid": dict(hidden_size=512, intermediate_size=1408, num_hidden_layers=4, num_attention_heads=8,
                                           num_key_value_heads=2)})["mid"][1]
    return {"dense": dense, "moe": moe_from(dense, where / "mid-moe-f16.gguf"), "imatrix": imatrix_files(dense, where)["gguf"]}


@pytest.mark.parametrize("model, ftype, imatrix", [("dense", f, True) for f in MID_FILE_TYPES] + [("dense", "Q4_K_M", False)] +
                         [("moe", f, False) for f in ("Q4_K_M", "Q2_K")])
def test_mid_sized_as_llama_quantize(mid, tmp_path, model, ftype, imatrix):
    src, knobs = mid[model], ["--imatrix", mid["imatrix"]] if imatrix else []
    got = ours(src, tmp_path / "ours.gguf", ftype, *knobs)
    skip_if_missing_kernel(got, ftype)
    ref = llama_quantize(src, tmp_path / "ref.gguf", ftype, *knobs)
    assert ref.returncode == 0, ref.stderr[-2000:]
    assert got.returncode == 0, got.stderr
    assert_same(tmp_path / "ref.gguf", tmp_path / "ours.gguf")


def test_one_pass_from_the_hf_folder(models, tmp_path):
    """HF folder -> Q4_K_M in one command equals llama.cpp's two steps: convert_hf_to_gguf.py --outtype
    f32, then llama-quantize."""
    if not SOURCE:
        tools()
        pytest.skip("SAFEWEIGHTS_LLAMA_CPP is not set: no convert_hf_to_gguf.py")
    folder = models["gqa"][0]
    f32 = tmp_path / "f32.gguf"
    env = dict(os.environ, PYTHONPATH=f"{SOURCE}/gguf-py", NO_LOCAL_GGUF="")
    r = subprocess.run([os.sys.executable, f"{SOURCE}/convert_hf_to_gguf.py", str(folder), "--outfile", str(f32), "--outtype", "f32"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    ref = llama_quantize(f32, tmp_path / "ref.gguf", "Q4_K_M")
    assert ref.returncode == 0, ref.stderr[-2000:]
    got = ours(folder, tmp_path / "ours.gguf", "Q4_K_M")
    assert got.returncode == 0, got.stderr
    want, _ = contents(tmp_path / "ref.gguf")
    have, _ = contents(tmp_path / "ours.gguf")
    assert sorted(have) == sorted(want)
    assert {n: want[n][0] for n in want} == {n: have[n][0] for n in have}
    assert [n for n in want if want[n][1] != have[n][1]] == []


SNAPSHOTS = {  # llama.cpp's snapshot file -> (architecture, dense model facts) of the models we can rebuild from their header
    "meta-llama-3.1-70b-instruct": "llama",
    "qwen3-14b": "qwen3",
    "qwen3-0.6b": "qwen3",
}


@pytest.mark.parametrize("snapshot", sorted(SNAPSHOTS))
def test_types_as_llama_cpp_snapshots(snapshot):
    """llama.cpp's own expected types for real dense models (tests/snapshots/*.schema, made by its
    test-quant-type-selection from the published GGUFs): every file type we know, every tensor."""
    if not SOURCE:
        if os.environ.get("CI") == "true":
            pytest.fail("SAFEWEIGHTS_LLAMA_CPP is not set under CI=true")
        pytest.skip("SAFEWEIGHTS_LLAMA_CPP is not set: no llama.cpp snapshots")
    path = Path(SOURCE) / "tests" / "snapshots" / f"{snapshot}.schema"
    text = path.read_text()
    facts = dict(re.findall(r"(\w+)=(\d+)", text.splitlines()[1]))
    tool = Path(CLI).parent / "tests" / "gguf" / "mix_types"
    sections = re.split(r"^\[(\w+)\] (\w+)\n", text, flags=re.M)[1:]
    assert sections, path
    for ftype, default, body in zip(sections[0::3], sections[1::3], sections[2::3]):
        want = dict(line.rsplit(" ", 1) for line in body.strip().splitlines())
        r = run(tool, SNAPSHOTS[snapshot], ftype, facts["n_layer"], facts["n_embd"], facts["n_ff"], facts["n_vocab"], facts["n_head"],
                facts["n_head_kv"])
        assert r.returncode == 0, r.stderr
        have = {n: t.lower() for n, t in (line.rsplit(" ", 1) for line in r.stdout.splitlines())}
        expected = {n: want.get(n, default).lower() for n in have}
        assert set(want) <= set(have), set(want) - set(have)
        assert have == expected, (ftype, {n: (expected[n], have[n]) for n in have if have[n] != expected[n]})
