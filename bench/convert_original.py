#!/usr/bin/env python3
"""Meta's original Llama 3 download to a transformers folder and to a Q8_0 GGUF (docs/PERFORMANCE.md,
"Meta's original download"; issue 34): our CLI against transformers' convert_llama_weights_to_hf.py followed
by llama.cpp's convert_hf_to_gguf.py --outtype q8_0, same run: wall time and peak RSS of each step (GNU
time), medians of --runs where a step takes under a minute.

    bench/convert_original.py --cli build/safeweights [--gib 2] [--runs 3] [--dir /tmp] [--python PY]
                              [--llama-cpp SRC] [--reference-script FILE | --reference-url BASE]

The folder: consolidated.00.pth and consolidated.01.pth (torch.save, bf16, cut as fairscale cuts them),
params.json and a tiktoken tokenizer.model, of Llama 3.2-1B's layer shape (dim 2048, 32 query and 8
key/value heads, MLP 8192, vocabulary 128000 + 256 specials) with an untied head and as many layers as make
--gib. The rank file: the 256 bytes, then byte pairs, then pairs and a byte, each token the merge of two
earlier ones (a valid tiktoken vocabulary; the text it gives is no language's).

The reference's first step is transformers' script, which transformers 5 no longer ships (nor 4.57's wheel
or sdist): the bench fetches it from the transformers repository at a pinned commit
(src/transformers/models/llama/convert_llama_weights_to_hf.py at REFERENCE_COMMIT, the one
docs/PERFORMANCE.md measured), checks its SHA-256 and keeps it in $SAFEWEIGHTS_CACHE (default
~/.cache/safeweights), so later runs need no network; --reference-script names a local copy instead (checked
the same way), --reference-url a mirror of raw.githubusercontent.com. It runs under --python (the clients' venv: torch, tiktoken, transformers) with --llama_version 3
--num_shards 2; its tiktoken reads the local rank file without blobfile. The second step is the pinned
llama.cpp's convert_hf_to_gguf.py (--llama-cpp, or SAFEWEIGHTS_LLAMA_CPP: `bash scripts/llama-cpp.sh`) with
its own gguf-py, offline, its pre-tokenizer lookup answering "llama-bpe" (a vocabulary made here has no
hash it knows). The two GGUFs are compared after the timing (tensors and keys, but those llama.cpp's
converter takes from the folder's name: docs/GGUF.md).
"""
import argparse
import hashlib
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from convert_gguf import timed  # noqa: E402
from convert_moe import COMPARE, REFERENCE  # noqa: E402

# The reference script: transformers' repository at the commit measured in docs/PERFORMANCE.md.
REFERENCE_COMMIT = "01cc9cd9d804d368d553c093c4eb0646320545bb"
REFERENCE_PATH = "src/transformers/models/llama/convert_llama_weights_to_hf.py"
REFERENCE_SHA256 = "256304243abb25f9ee03dd6ce6064c86d29d3b7892bc57d2c81d0ea7d7f6627b"
REFERENCE_URL = "https://raw.githubusercontent.com/huggingface/transformers"

DIM, HEADS, KV_HEADS, FFN, RANKS, SPECIALS = 2048, 32, 8, 8192, 128000, 256
VOCAB = RANKS + SPECIALS

# Writes the two shards (argv: folder, layers) tensor by tensor, each cut as fairscale cuts it.
WRITER = r"""
import sys, torch
folder, layers = sys.argv[1], int(sys.argv[2])
D, NH, KV, F, V = %s
hd = D // NH
shapes = {"tok_embeddings.weight": ([V, D], 0), "norm.weight": ([D], None), "output.weight": ([V, D], 0)}
for l in range(layers):
    p = f"layers.{l}."
    shapes.update({p + "attention.wq.weight": ([NH * hd, D], 0), p + "attention.wk.weight": ([KV * hd, D], 0),
                   p + "attention.wv.weight": ([KV * hd, D], 0), p + "attention.wo.weight": ([D, NH * hd], 1),
                   p + "feed_forward.w1.weight": ([F, D], 0), p + "feed_forward.w3.weight": ([F, D], 0),
                   p + "feed_forward.w2.weight": ([D, F], 1), p + "attention_norm.weight": ([D], None),
                   p + "ffn_norm.weight": ([D], None)})
g = torch.Generator().manual_seed(0)
for s in range(2):
    part = {}
    for name, (shape, dim) in shapes.items():
        if dim is None:  # replicated (the norms): the same in every shard
            part[name] = torch.ones(*shape).bfloat16()
            continue
        shape = list(shape)
        shape[dim] //= 2
        part[name] = (torch.randn(*shape, generator=g) * 0.02).bfloat16()
    torch.save(part, f"{folder}/consolidated.{s:02d}.pth")
    del part
""" % repr((DIM, HEADS, KV_HEADS, FFN, VOCAB))

def layer_params():
    hd = DIM // HEADS
    return 2 * HEADS * hd * DIM + 2 * KV_HEADS * hd * DIM + 3 * FFN * DIM + 2 * DIM


def write_ranks(path):
    """RANKS tokens: the bytes, then byte pairs, then a pair and a byte, each the merge of earlier ones."""
    import base64

    tokens = [bytes([b]) for b in range(256)]
    tokens += [bytes([a, b]) for a in range(256) for b in range(256)]
    triples = (bytes([a, b, c]) for a in range(256) for b in range(256) for c in range(256))
    tokens += itertools.islice(triples, RANKS - len(tokens))
    with open(path, "w") as f:
        for rank, t in enumerate(tokens):
            f.write(f"{base64.b64encode(t).decode()} {rank}\n")


def make_folder(folder, layers, python):
    os.makedirs(folder)
    params = {"dim": DIM, "n_layers": layers, "n_heads": HEADS, "n_kv_heads": KV_HEADS, "vocab_size": VOCAB, "multiple_of": 256,
              "ffn_dim_multiplier": 1.5, "norm_eps": 1e-05, "rope_theta": 500000.0}
    with open(os.path.join(folder, "params.json"), "w") as f:
        json.dump(params, f)
    write_ranks(os.path.join(folder, "tokenizer.model"))
    subprocess.run([python, "-c", WRITER, folder, str(layers)], check=True)


def warm(folder):
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                while f.read(64 << 20):
                    pass


def measure(label, runs, cmd, out, env=None, before=None):
    """Runs `cmd` (which writes `out`) `runs` times, or once when the first run takes a minute or more;
    prints and returns the median seconds and MiB."""
    times, peaks = [], []
    for i in range(runs):
        if os.path.isdir(out):
            shutil.rmtree(out)
        elif os.path.exists(out):
            os.unlink(out)
        if before:
            before()
        t, rss = timed(cmd, env)
        times.append(t)
        peaks.append(rss)
        if t >= 60:
            break
    t, rss = statistics.median(times), statistics.median(peaks)
    print(f"{label}: {t:.1f} s, peak RSS {rss:.0f} MiB (runs: {', '.join(f'{x:.1f}' for x in times)} s)", flush=True)
    return t, rss


def checked(data, where):
    digest = hashlib.sha256(data).hexdigest()
    if digest != REFERENCE_SHA256:
        raise SystemExit(f"{where}: SHA-256 {digest}, not the pinned script's {REFERENCE_SHA256} "
                         f"({REFERENCE_PATH} at {REFERENCE_COMMIT})")
    return data


def reference_script(cache_root, url_base=REFERENCE_URL, local=None, timeout=60):
    """The pinned convert_llama_weights_to_hf.py: a local copy (checked), else the cached one, else fetched
    from url_base/COMMIT/PATH, checked, then cached (written to a temporary name and renamed: a failed
    or wrong download leaves nothing)."""
    if local:
        with open(local, "rb") as f:
            checked(f.read(), local)
        return local
    path = os.path.join(cache_root, f"convert_llama_weights_to_hf-{REFERENCE_COMMIT[:12]}.py")
    if os.path.exists(path):
        with open(path, "rb") as f:
            checked(f.read(), path)
        return path
    url = f"{url_base.rstrip('/')}/{REFERENCE_COMMIT}/{REFERENCE_PATH}"
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        data = checked(reply.read(), url)
    os.makedirs(cache_root, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=cache_root, delete=False) as f:
        f.write(data)
    os.replace(f.name, path)
    return path


def cache_root():
    return os.environ.get("SAFEWEIGHTS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "safeweights")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--llama-cpp", default=os.environ.get("SAFEWEIGHTS_LLAMA_CPP"))
    ap.add_argument("--reference-script", help="a local copy of the pinned convert_llama_weights_to_hf.py (see above)")
    ap.add_argument("--reference-url", default=REFERENCE_URL, help="where to fetch it from: BASE/COMMIT/PATH")
    ap.add_argument("--no-reference", action="store_true", help="time our CLI only")
    args = ap.parse_args()
    embeddings = 2 * VOCAB * DIM
    layers = max(1, round((args.gib * (1 << 30) / 2 - embeddings) / layer_params()))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        src = os.path.join(tmp, "Meta-Llama-3-synthetic")
        make_folder(src, layers, args.python)
        size = sum(os.path.getsize(os.path.join(src, n)) for n in os.listdir(src)) / (1 << 30)
        print(f"original folder: {size:.2f} GiB, {layers} layers, 2 model-parallel shards, bf16", flush=True)
        warming = lambda: warm(src)  # noqa: E731
        ours_hf, ours_gguf = os.path.join(tmp, "ours-hf"), os.path.join(tmp, "ours.gguf")
        hf = measure("safeweights convert ORIGINAL OUT/ (transformers folder)", args.runs, [args.cli, "convert", src, ours_hf], ours_hf,
                     before=warming)
        q8 = measure("safeweights convert ORIGINAL OUT.gguf --type q8_0", args.runs, [args.cli, "convert", src, ours_gguf, "--type", "q8_0"],
                     ours_gguf, before=warming)
        if args.no_reference or not args.llama_cpp:
            print("no reference run: " + ("--no-reference" if args.no_reference else "give --llama-cpp"))
            return
        script = reference_script(cache_root(), args.reference_url, args.reference_script)
        ref_hf, ref_gguf = os.path.join(tmp, "ref-hf"), os.path.join(tmp, "ref.gguf")
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        t1, m1 = measure("transformers convert_llama_weights_to_hf.py --llama_version 3 --num_shards 2", args.runs,
                         [args.python, script, "--input_dir", src, "--output_dir", ref_hf, "--llama_version", "3", "--num_shards",
                          "2"], ref_hf, env=env, before=warming)
        genv = dict(env, PYTHONPATH=os.path.join(args.llama_cpp, "gguf-py"))
        t2, m2 = measure("llama.cpp convert_hf_to_gguf.py --outtype q8_0 (on transformers' folder)", args.runs,
                         [args.python, "-c", REFERENCE, args.llama_cpp, ref_hf, ref_gguf, "llama-bpe"], ref_gguf, env=genv, before=lambda: warm(ref_hf))
        print(f"to a transformers folder: x{t1 / hf[0]:.1f} time, x{m1 / hf[1]:.1f} peak RSS")
        print(f"to Q8_0 GGUF (both steps): x{(t1 + t2) / q8[0]:.1f} time, x{max(m1, m2) / q8[1]:.1f} peak RSS")
        same = subprocess.run([args.python, "-c", COMPARE, ours_gguf, ref_gguf], env=genv, capture_output=True, text=True)
        print(f"GGUF: {same.stdout.strip() or same.stderr.strip()[-500:]}")


if __name__ == "__main__":
    main()
