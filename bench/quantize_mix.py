#!/usr/bin/env python3
"""llama-quantize's Q4_K_M against ours (docs/PERFORMANCE.md, "F16 GGUF and HF folder -> Q4_K_M"; issue 37),
fresh processes, same run:

1. an F16 GGUF of about --gib GiB (synthetic, TinyLlama-shaped) -> Q4_K_M, without and with an importance
   matrix, `safeweights convert --type Q4_K_M --threads T` against `llama-quantize ... Q4_K_M T`, for T in
   --threads (default 2 and 1);
2. the HF folder it came from (BF16 safetensors) -> Q4_K_M in one pass (ours) against llama.cpp's two steps,
   `convert_hf_to_gguf.py --outtype f16` then `llama-quantize Q4_K_M` (--hf-threads threads each).

    bench/quantize_mix.py --cli build/safeweights --tools "$(bash scripts/llama-cpp.sh --tools)"
                          --llama-cpp "$(bash scripts/llama-cpp.sh)" [--python PY] [--gib 1] [--runs 3]
                          [--ref-runs 3] [--threads 2,1] [--hf-threads 2] [--dir /tmp] [--only gguf|hf]

Wall time, CPU time (user + system) and peak RSS (GNU time) of each command, the median of --runs
(--ref-runs for llama.cpp's commands).
The folder is bench/convert_gguf.py's (`--write-hf`); the F16 GGUF is our conversion of it. The importance
matrix is synthetic, in llama-imatrix's GGUF format (imatrix.datasets/chunk_count/chunk_size, NAME.in_sum2
and NAME.counts for every matrix but token_embd), written with the pinned gguf-py. Each pair's outputs are
compared (the files byte for byte, else every tensor's type and bytes with gguf-py) and the result printed.
--python runs convert_hf_to_gguf.py and gguf-py (torch, numpy, sentencepiece, safetensors: the clients'
venv); the pinned tree's own gguf-py comes first on its path.
"""
import argparse
import filecmp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from convert_gguf import REFERENCE_SHIM, folder_bytes, measured, warm  # noqa: E402

# Runs in a child under --python with the pinned gguf-py: a synthetic importance matrix for every matrix of
# the GGUF argv[1] (but token_embd, which llama-imatrix never sees), written to argv[2].
WRITE_IMATRIX = """import sys, numpy as np, gguf
reader = gguf.GGUFReader(sys.argv[1])
writer = gguf.GGUFWriter(sys.argv[2], "llama")
writer.kv_data[0].pop("general.architecture")  # llama-imatrix writes none
writer.add_type("imatrix")
writer.add_array("imatrix.datasets", ["synthetic"])
writer.add_uint32("imatrix.chunk_count", 100)
writer.add_uint32("imatrix.chunk_size", 512)
rng = np.random.default_rng(7)
for t in reader.tensors:
    if len(t.shape) < 2 or t.name.startswith("token_embd"):
        continue
    cols = int(t.shape[0])  # gguf-py lists ne0 (the row length) first
    writer.add_tensor(t.name + ".in_sum2", (rng.chisquare(1.0, cols) * 51200).astype(np.float32))
    writer.add_tensor(t.name + ".counts", np.array([51200.0], dtype=np.float32))
writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_tensors_to_file()
writer.close()
"""

# Runs in a child under --python with the pinned gguf-py: the tensors of argv[1] and argv[2] that differ
# in name, type or bytes, then the keys that differ ("key:NAME"), one a line.
COMPARE = """import sys, numpy as np, gguf
a, b = (gguf.GGUFReader(p) for p in sys.argv[1:3])
ta = {t.name: (t.tensor_type, np.asarray(t.data).tobytes()) for t in a.tensors}
tb = {t.name: (t.tensor_type, np.asarray(t.data).tobytes()) for t in b.tensors}
for name in sorted(set(ta) | set(tb)):
    if ta.get(name) != tb.get(name):
        print(name)
def value(f):
    v = f.contents()
    return v.tobytes() if isinstance(v, np.ndarray) else v
ka, kb = ({n: value(f) for n, f in r.fields.items() if not n.startswith("GGUF.")} for r in (a, b))
for name in sorted(set(ka) | set(kb)):
    if ka.get(name) != kb.get(name):
        print("key:" + name)
"""


def median_of(cmd, runs, env=None):
    """The median wall and CPU times and the largest peak RSS of `runs` runs."""
    results = []
    for _ in range(runs):
        os.sync()  # no run pays for writing back what the one before it left dirty
        results.append(measured(cmd, env))
    return statistics.median(r[0] for r in results), statistics.median(r[1] for r in results), max(r[2] for r in results)


def same_output(args, env, ref, ours):
    if filecmp.cmp(ref, ours, shallow=False):
        return "identical files"
    r = subprocess.run([args.python, "-c", COMPARE, ref, ours], capture_output=True, text=True, env=env, check=True)
    keys = [w[4:] for w in r.stdout.split() if w.startswith("key:")]
    tensors = [w for w in r.stdout.split() if not w.startswith("key:")]
    if tensors:
        return f"{len(tensors)} TENSORS DIFFER: {tensors[:5]}"
    return "tensors identical, " + (f"keys differ: {', '.join(keys)}" if keys else "every key equal (the layout differs)")


def report(name, m, size):
    wall, cpu, rss = m
    print(f"{name:54s} wall {wall:8.2f} s  CPU {cpu:8.2f} s  {size / wall / (1 << 20):6.1f} MiB/s in  peak RSS {rss:7.1f} MiB", flush=True)


def run_gguf(args, work, env, folder):
    f16 = os.path.join(work, "model.f16.gguf")
    subprocess.run([args.cli, "convert", folder, f16, "--type", "f16"], check=True, capture_output=True)
    imatrix = os.path.join(work, "imatrix.gguf")
    subprocess.run([args.python, "-c", WRITE_IMATRIX, f16, imatrix], check=True, env=env)
    size = os.path.getsize(f16)
    warm(f16)
    print(f"F16 GGUF: {size / (1 << 30):.2f} GiB; medians of {args.runs} (ours) and {args.ref_runs} (llama-quantize)")
    ours, ref = os.path.join(work, "ours.gguf"), os.path.join(work, "ref.gguf")
    quantize = os.path.join(args.tools, "llama-quantize")
    for threads in args.threads.split(","):
        for knob in ([], ["--imatrix", imatrix]):
            label = f"Q4_K_M, {threads} thread{'s' if threads != '1' else ''}{', imatrix' if knob else ''}"
            theirs = median_of([quantize, *knob, f16, ref, "Q4_K_M", threads], args.ref_runs)
            report(f"llama-quantize {label}", theirs, size)
            mine = median_of([args.cli, "convert", f16, ours, "--type", "Q4_K_M", "--threads", threads, *knob], args.runs)
            report(f"safeweights convert {label}", mine, size)
            print(f"  {theirs[0] / mine[0]:.2f}x llama-quantize's wall speed, {theirs[1] / mine[1]:.2f}x its CPU time, "
                  f"{theirs[2] / mine[2]:.1f}x less memory; outputs: {same_output(args, env, ref, ours)}", flush=True)
            os.remove(ref)
            os.remove(ours)
    os.remove(f16)


def run_hf(args, work, env, folder):
    size = folder_bytes(folder)
    warm(folder)
    threads = args.hf_threads
    print(f"HF folder: {size / (1 << 30):.2f} GiB of BF16; {threads} threads; medians of {args.runs} (ours) and {args.ref_runs} (llama.cpp)")
    ours, f16, ref = (os.path.join(work, n) for n in ("ours.gguf", "ref.f16.gguf", "ref.gguf"))
    mine = median_of([args.cli, "convert", folder, ours, "--type", "Q4_K_M", "--threads", threads], args.runs)
    report("safeweights convert FOLDER --type Q4_K_M (one pass)", mine, size)
    script = os.path.join(args.llama_cpp, "convert_hf_to_gguf.py")
    conv = median_of([args.python, "-c", REFERENCE_SHIM, script, folder, "--outtype", "f16", "--outfile", f16], args.ref_runs, env)
    report("convert_hf_to_gguf.py --outtype f16", conv, size)
    quant = median_of([os.path.join(args.tools, "llama-quantize"), f16, ref, "Q4_K_M", threads], args.ref_runs)
    report("llama-quantize F16 -> Q4_K_M", quant, size)
    wall, cpu, peak = conv[0] + quant[0], conv[1] + quant[1], max(conv[2], quant[2])
    print(f"  two steps: wall {wall:.2f} s, CPU {cpu:.2f} s, peak {peak:.1f} MiB; one pass {mine[0]:.2f} s, {mine[1]:.2f} s, "
          f"{mine[2]:.1f} MiB: {wall / mine[0]:.2f}x the wall speed, {cpu / mine[1]:.2f}x less CPU, {peak / mine[2]:.1f}x less memory; "
          f"outputs: {same_output(args, env, ref, ours)}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--tools", required=True, help="the folder with the pinned llama-quantize (scripts/llama-cpp.sh --tools)")
    ap.add_argument("--llama-cpp", required=True, help="the pinned llama.cpp source (scripts/llama-cpp.sh)")
    ap.add_argument("--python", default=sys.executable, help="runs convert_hf_to_gguf.py and gguf-py")
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ref-runs", type=int, default=3)
    ap.add_argument("--threads", default="2,1")
    ap.add_argument("--hf-threads", default="2")
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--only", choices=("gguf", "hf"))
    args = ap.parse_args()
    # The pinned tree's gguf-py first, and its own folder (convert_hf_to_gguf.py imports its conversion/).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(args.llama_cpp, "gguf-py"), args.llama_cpp]), NO_LOCAL_GGUF="")
    work = tempfile.mkdtemp(dir=args.dir)
    try:
        folder = os.path.join(work, "hf")
        subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "convert_gguf.py"), "--write-hf", folder,
                        str(args.gib)], check=True)
        if args.only in (None, "gguf"):
            run_gguf(args, work, env, folder)
        if args.only in (None, "hf"):
            run_hf(args, work, env, folder)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
