#!/usr/bin/env python3
"""Conversion to GGUF (docs/PERFORMANCE.md, "Conversion"): a large safetensors file converted to GGUF
without a type change against `cp` of the same bytes, same run; the peak RSS of each command (from
GNU time); quantization to Q8_0 with one thread and with every core; and a Hugging Face Llama folder to a
Q8_0 GGUF against llama.cpp's path, same run.

    bench/convert_gguf.py --cli build/safeweights [--gib 2] [--dir /tmp] [--runs 3] [--quant-gib 0.5]
                          [--hf-gib 2] [--llama-cpp DIR] [--python PY] [--only hf|copy|quant]

The HF section writes a synthetic TinyLlama-shaped folder (hidden 2048, 32 query and 4 key/value heads,
FFN 5632, vocabulary 32000, BF16 shards, a SentencePiece tokenizer.model) with as many layers as make
--hf-gib, then times `safeweights convert FOLDER out.gguf --type q8_0` (every core) and, when
--llama-cpp (or LLAMA_CPP_DIR) names a llama.cpp checkout with build/bin/llama-quantize: its
convert_hf_to_gguf.py --outtype f16 followed by llama-quantize Q8_0 (every core), and, for information,
convert_hf_to_gguf.py --outtype q8_0. The reference runs under --python (default: this interpreter),
which needs torch, numpy, sentencepiece and safetensors; gguf-py comes from the checkout. Without a
checkout the reference is skipped.

Needs numpy (to write the inputs, in a child). Every command runs with a warm page cache (the input is read
once before timing), so the figures compare the work each does, not the disk.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time


def measured(cmd, env=None):
    """Wall seconds, CPU seconds (user + system) and peak RSS (MiB) of a command. They come from GNU time,
    a small parent: a child's ru_maxrss counts what it inherits at fork, and this interpreter's pages
    would hide the command's. On a loaded machine the CPU time is the steadier figure."""
    with tempfile.NamedTemporaryFile("r") as out, tempfile.TemporaryFile("w+") as log:
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", out.name, *cmd], stdout=log, stderr=log, env=env)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            log.seek(0)
            raise SystemExit(f"{cmd} failed with status {proc.returncode}:\n{log.read()[-4000:]}")
        user, system, rss = out.read().split()[-3:]
        return elapsed, float(user) + float(system), int(rss) / 1024


def timed(cmd, env=None):
    """Seconds and peak RSS (MiB) of a command (measured())."""
    elapsed, _, rss = measured(cmd, env)
    return elapsed, rss


def write_input(path, gib):
    """F32 tensors of 4096 x 4096 (64 MiB, a large model's layer), normal values, written piece by piece."""
    n = max(1, int(gib * (1 << 30) / (64 << 20)))
    header = {f"layers.{i}.weight": {"dtype": "F32", "shape": [4096, 4096], "data_offsets": [i << 26, (i + 1) << 26]}
              for i in range(n)}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    import numpy as np  # in the writing child only: the measuring parent stays small (children inherit its RSS at fork)
    rng = np.random.default_rng(0)
    block = rng.standard_normal(4096 * 4096, dtype=np.float32).tobytes()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for i in range(n):
            f.write(block[i * 4:] + block[:i * 4])  # distinct tensors without generating each


def make_input(path, gib):
    subprocess.run([sys.executable, __file__, "--write", path, str(gib)], check=True)


# TinyLlama-1.1B's shape; the layer count follows --hf-gib.
HF_HIDDEN, HF_HEADS, HF_KV_HEADS, HF_FF, HF_VOCAB = 2048, 32, 4, 5632, 32000


def hf_tensors(layers):
    """(name, shape) of every tensor of the folder, in file order."""
    kv = HF_HIDDEN // HF_HEADS * HF_KV_HEADS
    out = [("model.embed_tokens.weight", (HF_VOCAB, HF_HIDDEN))]
    for i in range(layers):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (HF_HIDDEN,)), (p + "self_attn.q_proj.weight", (HF_HIDDEN, HF_HIDDEN)),
                (p + "self_attn.k_proj.weight", (kv, HF_HIDDEN)), (p + "self_attn.v_proj.weight", (kv, HF_HIDDEN)),
                (p + "self_attn.o_proj.weight", (HF_HIDDEN, HF_HIDDEN)),
                (p + "post_attention_layernorm.weight", (HF_HIDDEN,)), (p + "mlp.gate_proj.weight", (HF_FF, HF_HIDDEN)),
                (p + "mlp.up_proj.weight", (HF_FF, HF_HIDDEN)), (p + "mlp.down_proj.weight", (HF_HIDDEN, HF_FF))]
    return out + [("model.norm.weight", (HF_HIDDEN,)), ("lm_head.weight", (HF_VOCAB, HF_HIDDEN))]


def write_hf_folder(folder, gib):
    """A Llama folder of about `gib` GiB of BF16 weights in shards of about 1 GiB, with an index."""
    import numpy as np  # in the writing child only, as write_input
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
    from spm_model import spm_model, spm_pieces

    per_layer = sum(int(np.prod(shape)) for _, shape in hf_tensors(1)[1:-2]) * 2
    layers = max(1, round((gib * (1 << 30) - 2 * HF_VOCAB * HF_HIDDEN * 2) / per_layer))
    os.makedirs(folder)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": HF_VOCAB,
              "hidden_size": HF_HIDDEN, "intermediate_size": HF_FF, "num_hidden_layers": layers,
              "num_attention_heads": HF_HEADS, "num_key_value_heads": HF_KV_HEADS, "max_position_embeddings": 2048,
              "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
              "bos_token_id": 1, "eos_token_id": 2}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(folder, "tokenizer.model"), "wb") as f:
        f.write(spm_model(spm_pieces()))
    # Normal values scaled as a trained layer's, as BF16 (the top half of each float32); one block rotated
    # per tensor so that tensors differ without generating each.
    rng = np.random.default_rng(0)
    block = (rng.standard_normal(HF_FF * HF_HIDDEN, dtype=np.float32) * 0.02).view(np.uint32)
    block = (block >> 16).astype(np.uint16).tobytes()
    shards, current, size = [], [], 0
    for name, shape in hf_tensors(layers):
        nbytes = int(np.prod(shape)) * 2
        if current and size + nbytes > (1 << 30):
            shards.append(current)
            current, size = [], 0
        current.append((name, shape, nbytes))
        size += nbytes
    shards.append(current)
    weight_map, total = {}, 0
    for k, shard in enumerate(shards):
        fname = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        header, offset = {}, 0
        for name, shape, nbytes in shard:
            header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
            offset += nbytes
            weight_map[name] = fname
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        with open(os.path.join(folder, fname), "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text)
            for i, (name, shape, nbytes) in enumerate(shard):
                for at in range(0, nbytes, len(block)):
                    piece = block[(2 * i) % len(block):] + block[:(2 * i) % len(block)]
                    f.write(piece[:min(len(block), nbytes - at)])
        total += offset
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)


def warm(path):
    paths = [os.path.join(path, n) for n in sorted(os.listdir(path))] if os.path.isdir(path) else [path]
    for p in paths:
        with open(p, "rb") as f:
            while f.read(64 << 20):
                pass


def folder_bytes(folder):
    return sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder))


def best_of(cmd, runs, cleanup, env=None):
    results = []
    for _ in range(runs):
        os.sync()  # no run pays for writing back what the one before it (or the input's writer) left dirty
        results.append(timed(cmd, env))
        for p in cleanup:
            if os.path.exists(p):
                os.remove(p)
    return min(results)


def main():
    if len(sys.argv) == 4 and sys.argv[1] in ("--write", "--write-hf"):
        write = write_input if sys.argv[1] == "--write" else write_hf_folder
        return write(sys.argv[2], float(sys.argv[3]))
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--quant-gib", type=float, default=0.5)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--hf-gib", type=float, default=2.0)
    ap.add_argument("--llama-cpp", default=os.environ.get("LLAMA_CPP_DIR"))
    ap.add_argument("--python", default=sys.executable, help="the interpreter that runs convert_hf_to_gguf.py")
    ap.add_argument("--only", choices=("copy", "quant", "hf"), help="run one section")
    args = ap.parse_args()
    work = tempfile.mkdtemp(dir=args.dir)
    try:
        run(args, work)
    finally:
        shutil.rmtree(work)


def run(args, work):
    if args.only in (None, "copy"):
        run_copy(args, work)
    if args.only in (None, "quant"):
        run_quant(args, work)
    if args.only in (None, "hf"):
        run_hf(args, work)


def run_copy(args, work):
    src = os.path.join(work, "model.safetensors")
    make_input(src, args.gib)
    size = os.path.getsize(src)
    out, copy = os.path.join(work, "out.gguf"), os.path.join(work, "copy.safetensors")
    warm(src)
    print(f"input: {size / (1 << 30):.2f} GiB, F32 tensors of 4096 x 4096; best of {args.runs}; {os.cpu_count()} cores")
    best = {}
    for name, cmd in {
        "cp": ["cp", src, copy],
        "convert -> .gguf": [args.cli, "convert", src, out],
        "convert -> .gguf (mmap)": [args.cli, "convert", "--backend", "mmap", src, out],
    }.items():
        t, rss = best_of(cmd, args.runs, (copy, out))
        best[name] = t
        print(f"{name:28s} {t:7.3f} s  {size / t / (1 << 30):6.2f} GiB/s  peak RSS {rss:8.1f} MiB")
    print(f"convert / cp speed: {best['cp'] / best['convert -> .gguf']:.2f}x")
    os.remove(src)


def run_quant(args, work):
    out = os.path.join(work, "out.gguf")
    qsrc = os.path.join(work, "q.safetensors")
    make_input(qsrc, args.quant_gib)
    qsize = os.path.getsize(qsrc)
    warm(qsrc)
    for threads in ("1", "0"):
        t, rss = best_of([args.cli, "convert", "--type", "q8_0", "--threads", threads, qsrc, out], args.runs, (out,))
        label = "every core" if threads == "0" else "1 thread"
        print(f"--type q8_0, {label:10s} {t:7.3f} s  {qsize / t / (1 << 20):8.1f} MiB/s of F32 in  peak RSS {rss:8.1f} MiB")
    os.remove(qsrc)


# Runs convert_hf_to_gguf.py (argv[1]) with its arguments. Its table of safetensors dtypes names torch's
# float8 types, which torch before 2.1 lacks (Debian's python3-torch is 1.13): those entries get a
# stand-in, never used here (the folder is BF16). Nothing else of the script is touched.
REFERENCE_SHIM = """import runpy, sys, torch
for name in ("float8_e4m3fn", "float8_e5m2"):
    if not hasattr(torch, name):
        setattr(torch, name, torch.uint8)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_hf(args, work):
    folder = os.path.join(work, "hf")
    subprocess.run([sys.executable, __file__, "--write-hf", folder, str(args.hf_gib)], check=True)
    size = folder_bytes(folder)
    with open(os.path.join(folder, "config.json")) as f:
        layers = json.load(f)["num_hidden_layers"]
    warm(folder)
    print(f"HF folder: {size / (1 << 30):.2f} GiB of BF16, {layers} layers of TinyLlama's shape; best of {args.runs}")
    out = os.path.join(work, "ours.q8_0.gguf")
    cmds = {"safeweights convert --type q8_0": [args.cli, "convert", "--type", "q8_0", folder, out],
            "safeweights convert --type q8_0 --threads 1": [args.cli, "convert", "--type", "q8_0", "--threads", "1",
                                                            folder, out],
            "safeweights convert --type q8_0 --backend mmap": [args.cli, "convert", "--type", "q8_0", "--backend", "mmap",
                                                               folder, out]}
    llama = args.llama_cpp
    quantize = os.path.join(llama or "", "build", "bin", "llama-quantize")
    if llama and os.path.exists(quantize):
        script = os.path.join(llama, "convert_hf_to_gguf.py")
        f16, q8 = os.path.join(work, "ref.f16.gguf"), os.path.join(work, "ref.q8_0.gguf")
        cores = str(os.cpu_count())
        reference = [args.python, "-c", REFERENCE_SHIM, script, folder]
        cmds["convert_hf_to_gguf.py --outtype f16"] = [*reference, "--outtype", "f16", "--outfile", f16]
        cmds["llama-quantize Q8_0"] = [quantize, f16, q8, "Q8_0", cores]
        cmds["convert_hf_to_gguf.py --outtype q8_0"] = [*reference, "--outtype", "q8_0", "--outfile", q8]
    else:
        print("llama.cpp reference skipped: --llama-cpp / LLAMA_CPP_DIR names no checkout with build/bin/llama-quantize")
    env = dict(os.environ, PYTHONPATH=os.path.join(llama, "gguf-py")) if llama else None
    best = {}
    for name, cmd in cmds.items():
        # The F16 file stays for llama-quantize, the step after the one that writes it.
        t, rss = best_of(cmd, args.runs, (out, os.path.join(work, "ref.q8_0.gguf")), env)
        best[name] = t
        print(f"{name:46s} {t:8.2f} s  {size / t / (1 << 30):6.2f} GiB/s in  peak RSS {rss:8.1f} MiB", flush=True)
    if "llama-quantize Q8_0" in best:
        os.remove(f16)
        ref = best["convert_hf_to_gguf.py --outtype f16"] + best["llama-quantize Q8_0"]
        ours = best["safeweights convert --type q8_0"]
        print(f"llama.cpp f16 + quantize: {ref:.2f} s; ours {ours:.2f} s: {ref / ours:.1f}x faster")
        print(f"llama.cpp --outtype q8_0: {best['convert_hf_to_gguf.py --outtype q8_0']:.2f} s: "
              f"{best['convert_hf_to_gguf.py --outtype q8_0'] / ours:.1f}x ours")


if __name__ == "__main__":
    main()
