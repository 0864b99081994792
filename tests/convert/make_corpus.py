#!/usr/bin/env python3
"""The command-line corpus of `diff`, `convert` and `validate --json`: small input files, each with the
command run on it, the exit status and the exact output it must give (cases.json).

Cases: integers that float64 cannot tell apart (`diff` compares them exactly), F64 values near the
largest double (no inf, nan or null in the statistics), input that the output format cannot hold
(`Unrepresentable`, exit 1, naming the input file and the tensor or key), Hugging Face folders whose
config.json is out of range or disagrees with the tensors (`InvalidModelFolder`, exit 1), folders that
are no model (no config.json: `InvalidModelFolder`; Meta's or Mistral's original layout without a tokenizer;
exit 1, never a plain dump), and `--json` errors that name the split sibling or the shard they are in. The expected texts are written here by hand; the
numbers in them follow from the inputs (2**62 + 1 - 2**62 = 1; |1e308 - (-1e308)| = 2e308; ...).

Usage:
    make_corpus.py OUT_DIR                  write the corpus (stale files in OUT_DIR are removed)
    make_corpus.py --check OUT_DIR          regenerate in memory and compare with OUT_DIR
    make_corpus.py --run CLI OUT_DIR        run every case with the CLI, in a copy of OUT_DIR

Standard library only.
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

CASES = "cases.json"


def safetensors(tensors):
    """tensors: (name, dtype code, shape, raw bytes), laid out in order."""
    return safetensors_with_metadata(None, tensors)


def safetensors_with_metadata(metadata, tensors):
    header, data = ({} if metadata is None else {"__metadata__": metadata}), b""
    for name, code, shape, raw in tensors:
        header[name] = {"dtype": code, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def gguf(kvs, tensors, data_bytes=None):
    """A GGUF v3 file, alignment 32. kvs: (key bytes, type id, packed value); tensors: (name bytes, ne,
    F32 data bytes). data_bytes cuts the data section (a truncated file)."""
    def text(b):
        return struct.pack("<Q", len(b)) + b

    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, vtype, value in kvs:
        head += text(key) + struct.pack("<I", vtype) + value
    data, offset = b"", 0
    for name, ne, raw in tensors:
        head += text(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        head += struct.pack("<IQ", 0, offset)  # F32
        data += raw + b"\0" * (-len(raw) % 32)
        offset = len(data)
    head += b"\0" * (-len(head) % 32)
    return head + (data if data_bytes is None else data[:data_bytes])


def gguf_string(s):
    return struct.pack("<Q", len(s)) + s


UINT16, INT32, STRING = 2, 5, 8
F32_2 = struct.pack("<2f", 0.5, -1.5)


def corpus():
    files, cases = {}, []

    def case(name, args, code, stdout="", stderr=""):
        cases.append({"name": name, "args": args, "exit": code, "stdout": stdout, "stderr": stderr})

    # ---- diff: integers compared exactly, at every width ----
    files["i64-a.safetensors"] = safetensors([("t", "I64", [1], struct.pack("<q", 2**62)),
                                              ("u", "U64", [2], struct.pack("<2Q", 2**64 - 1, 2**63)),
                                              ("b", "BOOL", [2], b"\x01\x00")])
    files["i64-b.safetensors"] = safetensors([("t", "I64", [1], struct.pack("<q", 2**62 + 1)),
                                              ("u", "U64", [2], struct.pack("<2Q", 2**64 - 2, 2**63)),
                                              ("b", "BOOL", [2], b"\x01\x01")])
    case("diff-integers-above-2^53", ["diff", "i64-a.safetensors", "i64-b.safetensors"], 1,
         "t: I64 [1]: 1 of 1 values differ, max abs 1, rmse 1, cosine 1\n"
         "u: U64 [2]: 1 of 2 values differ, max abs 1, rmse 0.707107, cosine 1\n"
         "b: BOOL [2]: 1 of 2 values differ, max abs 1, rmse 0.707107, cosine 0.707106781\n"
         "different: 3 common tensors (3 differ), 0 only in A, 0 only in B\n")
    case("diff-integers-same", ["diff", "i64-a.safetensors", "i64-a.safetensors"], 0,
         "same: 3 common tensors (0 differ), 0 only in A, 0 only in B\n")
    case("diff-integers-above-2^53-json", ["diff", "--json", "i64-a.safetensors", "i64-b.safetensors"], 1,
         '{"a":"i64-a.safetensors","b":"i64-b.safetensors","same":false,"only_in_a":[],"only_in_b":[],"tensors":['
         '{"name":"t","type_a":"I64","type_b":"I64","shape_a":[1],"shape_b":[1],"same":false,"elements":1,'
         '"identical":false,"differing":1,"max_abs_diff":1,"rmse":1,"cosine":1,"nonfinite_mismatches":0},'
         '{"name":"u","type_a":"U64","type_b":"U64","shape_a":[2],"shape_b":[2],"same":false,"elements":2,'
         '"identical":false,"differing":1,"max_abs_diff":1,"rmse":0.7071067811865476,"cosine":1,"nonfinite_mismatches":0},'
         '{"name":"b","type_a":"BOOL","type_b":"BOOL","shape_a":[2],"shape_b":[2],"same":false,"elements":2,'
         '"identical":false,"differing":1,"max_abs_diff":1,"rmse":0.7071067811865476,"cosine":0.7071067811865475,'
         '"nonfinite_mismatches":0}]}\n')

    # ---- diff: F64 near the largest double ----
    # |1e308 - (-1e308)| = 2e308 is past the largest double: printed as the number it is. rmse over
    # [2e308, 0] = 2e308 / sqrt(2) = 1.4142135623730951e308; cosine of [1e308, 1] and [-1e308, 1] is -1.
    files["f64-a.safetensors"] = safetensors([("t", "F64", [2], struct.pack("<2d", 1e308, 1.0))])
    files["f64-b.safetensors"] = safetensors([("t", "F64", [2], struct.pack("<2d", -1e308, 1.0))])
    case("diff-f64-near-the-largest-double", ["diff", "f64-a.safetensors", "f64-b.safetensors"], 1,
         "t: F64 [2]: 1 of 2 values differ, max abs 2e+308, rmse 1.414214e+308, cosine -1\n"
         "different: 1 common tensors (1 differ), 0 only in A, 0 only in B\n")
    case("diff-f64-near-the-largest-double-json", ["diff", "--json", "f64-a.safetensors", "f64-b.safetensors"], 1,
         '{"a":"f64-a.safetensors","b":"f64-b.safetensors","same":false,"only_in_a":[],"only_in_b":[],"tensors":['
         '{"name":"t","type_a":"F64","type_b":"F64","shape_a":[2],"shape_b":[2],"same":false,"elements":2,'
         '"identical":false,"differing":1,"max_abs_diff":2e+308,"rmse":1.4142135623730952e+308,"cosine":-1,'
         '"nonfinite_mismatches":0}]}\n')

    # ---- convert: what the output format cannot hold is the input's fault (exit 1) ----
    long_name = "n" * 64
    files["long-name.safetensors"] = safetensors([(long_name, "F32", [2], F32_2)])
    case("convert-gguf-name-over-63-bytes", ["convert", "long-name.safetensors", "out.gguf"], 1, "",
         "safeweights: long-name.safetensors: Unrepresentable: a GGUF tensor name has at most 63 bytes (tensor `%s`)\n" % long_name)
    files["rank-5.safetensors"] = safetensors([("r", "F32", [1, 1, 1, 1, 2], F32_2)])
    case("convert-gguf-rank-over-4", ["convert", "rank-5.safetensors", "out.gguf"], 1, "",
         "safeweights: rank-5.safetensors: Unrepresentable: a GGUF tensor has at most 4 dimensions (tensor `r`)\n")
    files["dim-over-2^63.safetensors"] = safetensors([("t", "F32", [0, 2**63], b"")])
    case("convert-gguf-dimension-over-2^63-1", ["convert", "dim-over-2^63.safetensors", "out.gguf"], 1, "",
         "safeweights: dim-over-2^63.safetensors: Unrepresentable: a GGUF dimension is at most 2^63 - 1 (tensor `t`)\n")
    # A safetensors metadata key becomes `safetensors.KEY` in GGUF: 12 + 65524 = 65536 bytes, one too many.
    long_key = "k" * 65524
    files["long-key.safetensors"] = safetensors_with_metadata({long_key: "v"}, [("t", "F32", [2], F32_2)])
    case("convert-gguf-key-over-65535-bytes", ["convert", "long-key.safetensors", "out.gguf"], 1, "",
         "safeweights: long-key.safetensors: Unrepresentable: a GGUF key is 1 to 65535 bytes long, not 65536 (key `safetensors.%s...`)\n"
         % long_key[:52])
    files["name-not-utf8.gguf"] = gguf([], [(b"w\xff", [2], F32_2)])
    # A name or key that is not UTF-8 is invalid GGUF: the reader refuses the input before any writer.
    case("convert-safetensors-name-not-utf8", ["convert", "name-not-utf8.gguf", "out.safetensors"], 1, "",
         "safeweights: name-not-utf8.gguf: InvalidGguf: tensor 0: the name `w\\xff` is not valid UTF-8 (GGUF strings are UTF-8) "
         "(byte offset 24)\n")
    files["key-not-utf8.gguf"] = gguf([(b"safetensors.k\xfe", STRING, gguf_string(b"v"))], [(b"w", [2], F32_2)])
    case("convert-safetensors-metadata-key-not-utf8", ["convert", "key-not-utf8.gguf", "out.safetensors"], 1, "",
         "safeweights: key-not-utf8.gguf: InvalidGguf: key 0 `safetensors.k\\xfe` is not valid UTF-8 (GGUF strings are UTF-8) "
         "(byte offset 24)\n")
    files["value-not-utf8.gguf"] = gguf([(b"safetensors.note", STRING, gguf_string(b"v\xfe"))], [(b"w", [2], F32_2)])
    case("convert-safetensors-metadata-value-not-utf8", ["convert", "value-not-utf8.gguf", "out.safetensors"], 1, "",
         "safeweights: value-not-utf8.gguf: Unrepresentable: the value of metadata key `note` is not valid UTF-8: a "
         "safetensors header is JSON text\n")

    # ---- convert: a Hugging Face folder whose files are malformed or disagree is invalid input (exit 1) ----
    # InvalidModelFolder, naming the file (and the key or tensor), never InvalidArgument (a usage error, exit 2).
    embed = ("model.embed_tokens.weight", "F32", [3, 2], struct.pack("<6f", *range(6)))
    files["hf-config/config.json"] = b'{"architectures": ["LlamaForCausalLM"], "vocab_size": 0}'
    files["hf-config/model.safetensors"] = safetensors([embed])
    case("convert-hf-config-out-of-range", ["convert", "hf-config", "out.gguf"], 1, "",
         "safeweights: hf-config/config.json: InvalidModelFolder: key `vocab_size` is 0, outside [1, 4194304]\n")
    files["hf-shape/config.json"] = json.dumps(
        {"architectures": ["LlamaForCausalLM"], "vocab_size": 4, "hidden_size": 2, "intermediate_size": 2,
         "num_hidden_layers": 1, "num_attention_heads": 1, "max_position_embeddings": 8}).encode()
    files["hf-shape/model.safetensors"] = safetensors([embed])
    case("convert-hf-shape-disagrees-with-config", ["convert", "hf-shape", "out.gguf"], 1, "",
         "safeweights: hf-shape/model.safetensors: InvalidModelFolder: shape [3, 2], config.json implies [4, 2] "
         "(tensor `model.embed_tokens.weight`)\n")

    # ---- convert: a folder that is no model is refused, never written as a plain dump (issue 34) ----
    # Without config.json: InvalidModelFolder, naming the file that converts as plain tensors. Meta's or
    # Mistral's original layout (params.json + consolidated*) goes to its planner, HF shards beside or not.
    files["bare/model.safetensors"] = safetensors([embed])
    for out in ("out.gguf", "out.safetensors"):
        case("convert-folder-without-config-json-to-" + out, ["convert", "bare", out], 1, "",
             "safeweights: bare: InvalidModelFolder: has weights but no config.json: give the weights file itself "
             "(bare/model.safetensors) to convert its tensors as plain tensors\n")
    case("convert-the-weights-file-of-a-folder-without-config-json", ["convert", "bare/model.safetensors", "out.gguf"], 0,
         "wrote out.gguf: 1 tensors (1 F32), 24 B\n")
    files["meta/params.json"] = b'{"dim": 2, "n_layers": 1, "n_heads": 1}'
    files["meta/consolidated.00.pth"] = b"not read"
    files["meta/consolidated.01.pth"] = b"not read"
    case("convert-meta-original-layout", ["convert", "meta/", "llama-hf/"], 1, "",
         "safeweights: meta: FileNotFound: no tokenizer.model beside params.json (Meta's download has one)\n")
    files["mistral/params.json"] = b'{"dim": 2, "n_layers": 1, "n_heads": 1}'
    files["mistral/consolidated.safetensors"] = safetensors([embed])
    files["mistral/model.safetensors"] = safetensors([embed])
    case("convert-mistral-native-layout-with-hf-shards-beside", ["convert", "mistral", "out.gguf"], 1, "",
         "safeweights: mistral: FileNotFound: no tekken.json nor tokenizer.model.v3 (or .v7, .v1, tokenizer.model) beside params.json\n")

    # ---- validate --json: the error names the file it is in ----
    def split_kvs(no):
        return [(b"split.no", UINT16, struct.pack("<H", no)), (b"split.count", UINT16, struct.pack("<H", 2)),
                (b"split.tensors.count", INT32, struct.pack("<i", 2))]
    files["split-00001-of-00002.gguf"] = gguf(split_kvs(0), [(b"a", [2], F32_2)])
    files["split-00002-of-00002.gguf"] = gguf(split_kvs(1), [(b"b", [2], F32_2)], data_bytes=4)
    case("validate-json-split-sibling", ["validate", "--json", "split-00001-of-00002.gguf"], 1,
         '{"file":"split-00001-of-00002.gguf","format":"gguf","valid":false,"error":{"kind":"InvalidGguf",'
         '"rule":"gguf.tensor-offset","message":"the tensor\'s 8 bytes at data offset 0 run past the end of the file (164 bytes)",'
         '"file":"split-00002-of-00002.gguf","tensor":"b","offset":106}}\n')
    files["bin/pytorch_model.bin.index.json"] = json.dumps(
        {"metadata": {"total_size": 16}, "weight_map": {"a": "pytorch_model-00001-of-00002.bin",
                                                        "b": "pytorch_model-00002-of-00002.bin"}}).encode()
    files["bin/pytorch_model-00001-of-00002.bin"] = b"not a checkpoint"
    files["bin/pytorch_model-00002-of-00002.bin"] = b"not a checkpoint"
    case("validate-json-bin-index-shard", ["validate", "--json", "bin/pytorch_model.bin.index.json"], 1,
         '{"file":"bin/pytorch_model.bin.index.json","format":"pytorch","valid":false,"error":{"kind":"InvalidCheckpoint",'
         '"rule":"pytorch.container","message":"not a PyTorch checkpoint (neither torch.save\'s ZIP format nor its legacy stream)",'
         '"file":"bin/pytorch_model-00001-of-00002.bin"}}\n')

    files[CASES] = (json.dumps(cases, indent=1, ensure_ascii=True) + "\n").encode()
    return files


def existing(folder):
    out = {}
    for root, _, names in os.walk(folder):
        for n in names:
            path = os.path.join(root, n)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = f.read()
    return out


def write(folder):
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    for name, blob in corpus().items():
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(blob)


def check(folder):
    want, have = corpus(), existing(folder)
    bad = sorted(n for n in set(want) | set(have) if want.get(n) != have.get(n))
    for n in bad:
        print("differs from make_corpus.py: %s" % n)
    return 1 if bad else 0


def run(cli, folder):
    cli = os.path.abspath(cli)
    failed = 0
    with open(os.path.join(folder, CASES)) as f:
        cases = json.load(f)
    for c in cases:
        with tempfile.TemporaryDirectory() as tmp:
            work = os.path.join(tmp, "corpus")
            shutil.copytree(folder, work)
            r = subprocess.run([cli] + c["args"], cwd=work, capture_output=True, timeout=120)
            got = {"exit": r.returncode, "stdout": r.stdout.decode("utf-8", "backslashreplace"),
                   "stderr": r.stderr.decode("utf-8", "backslashreplace")}
            for key in ("exit", "stdout", "stderr"):
                if got[key] != c[key]:
                    failed += 1
                    print("FAIL %s: %s\n  want %r\n  got  %r" % (c["name"], key, c[key], got[key]))
            leftovers = sorted(set(existing(work)) - set(existing(folder)))
            if c["exit"] != 0 and leftovers:
                failed += 1
                print("FAIL %s: a failed command left %s" % (c["name"], leftovers))
    print("%d cases, %d failures" % (len(cases), failed))
    return 1 if failed else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--check":
        return check(argv[2])
    if len(argv) == 4 and argv[1] == "--run":
        return run(argv[2], argv[3])
    if len(argv) == 2:
        write(argv[1])
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
