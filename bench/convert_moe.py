#!/usr/bin/env python3
"""A Qwen3-MoE-shaped Hugging Face folder to a Q8_0 GGUF (docs/PERFORMANCE.md, "Mixture of experts"): our
CLI against the pinned llama.cpp's convert_hf_to_gguf.py --outtype q8_0, same run: wall time and peak RSS
of each (GNU time), for both expert layouts (one tensor per expert; transformers 5's fused experts).

    bench/convert_moe.py --cli build/safeweights [--gib 2] [--dir /tmp] [--llama-cpp SRC] [--python PY]
                         [--layouts per-expert,fused] [--runs 3]

The folder: Qwen3-30B-A3B's layer shape (hidden 2048, 32 query and 4 key/value heads of 128, 128 experts
of width 768, 8 used) with fewer experts per layer (64) and as many layers as make --gib of BF16 weights,
a vocabulary of 32000, random weights, a byte-level BPE tokenizer.json trained by `tokenizers`. The
reference (when --llama-cpp, or SAFEWEIGHTS_LLAMA_CPP, names the pinned tree: `bash scripts/llama-cpp.sh`)
runs under --python (the clients' venv: torch, numpy, tokenizers, transformers) with its own gguf-py and
its pre-tokenizer lookup answering "qwen2" (a tokenizer trained here has no hash it knows). The outputs
are compared byte for byte (tensor data and keys but general.name / size_label) after the timing.

Each of --runs rounds times our CLI, then the reference, each after a `sync` and with its previous
output deleted, so that neither pays for the other's (or its own earlier) dirty pages being written
back; every run's wall and CPU (user + system) time is printed, then the medians, and their ratios.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import statistics  # noqa: E402

from convert_gguf import measured  # noqa: E402

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, EXPERTS, FFN, VOCAB = 2048, 32, 4, 128, 64, 768, 32000

# llama.cpp's converter (argv: its tree, folder, out, the pre-tokenizer its lookup answers) to Q8_0.
REFERENCE = r"""
import runpy, sys
llama_cpp, folder, out, pre = sys.argv[1:5]
sys.path.insert(0, llama_cpp)
import conversion.base
conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
sys.argv = ["convert_hf_to_gguf.py", folder, "--outfile", out, "--outtype", "q8_0"]
runpy.run_path(llama_cpp + "/convert_hf_to_gguf.py", run_name="__main__")
"""

# Writes one layout's folder (argv: folder, layers, fused 0/1) with numpy, tensor by tensor.
WRITER = r"""
import json, struct, sys
import numpy as np
folder, layers, fused = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
H, NH, KV, D, E, F, V = %s
rng = np.random.default_rng(0)
shapes = {"model.embed_tokens.weight": [V, H], "lm_head.weight": [V, H], "model.norm.weight": [H]}
for l in range(layers):
    p = f"model.layers.{l}."
    shapes.update({p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
                   p + "self_attn.q_proj.weight": [NH * D, H], p + "self_attn.k_proj.weight": [KV * D, H],
                   p + "self_attn.v_proj.weight": [KV * D, H], p + "self_attn.o_proj.weight": [H, NH * D],
                   p + "self_attn.q_norm.weight": [D], p + "self_attn.k_norm.weight": [D], p + "mlp.gate.weight": [E, H]})
    if fused:
        shapes[p + "mlp.experts.gate_up_proj"] = [E, 2 * F, H]
        shapes[p + "mlp.experts.down_proj"] = [E, H, F]
    else:
        for e in range(E):
            for k, s in (("gate_proj", [F, H]), ("up_proj", [F, H]), ("down_proj", [H, F])):
                shapes[f"{p}mlp.experts.{e}.{k}.weight"] = s
header, offset = {}, 0
for name in sorted(shapes):
    n = int(np.prod(shapes[name])) * 2
    header[name] = {"dtype": "BF16", "shape": shapes[name], "data_offsets": [offset, offset + n]}
    offset += n
text = json.dumps(header).encode()
text += b" " * (-len(text) %% 8)
with open(folder + "/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text)
    for name in sorted(shapes):
        n = int(np.prod(shapes[name]))
        values = (rng.standard_normal(min(n, 1 << 22), dtype=np.float32) * 0.02).view(np.uint32) >> 16
        reps = -(-n // values.size)
        f.write(np.tile(values.astype(np.uint16), reps)[:n].tobytes())
""" % repr((HIDDEN, HEADS, KV_HEADS, HEAD_DIM, EXPERTS, FFN, VOCAB))

TOKENIZER = r"""
import sys
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
tok = Tokenizer(models.BPE())
split = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False),
                                             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(["The quick brown fox jumps over the lazy dog 0123456789."] * 100,
                        trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>").save_pretrained(sys.argv[1])
"""


def layer_bytes():
    attention = (HEADS * HEAD_DIM * HIDDEN * 2 + KV_HEADS * HEAD_DIM * HIDDEN * 2)
    return 2 * (attention + EXPERTS * 3 * FFN * HIDDEN + EXPERTS * HIDDEN)


def make_folder(folder, layers, fused, python):
    os.makedirs(folder)
    config = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": VOCAB, "hidden_size": HIDDEN,
              "intermediate_size": 6144, "moe_intermediate_size": FFN, "num_hidden_layers": layers, "num_attention_heads": HEADS,
              "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "num_local_experts": EXPERTS, "num_experts_per_tok": 8,
              "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [], "max_position_embeddings": 4096,
              "rms_norm_eps": 1e-6, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "tie_word_embeddings": False,
              "hidden_act": "silu", "bos_token_id": 0, "eos_token_id": 1, "torch_dtype": "bfloat16"}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    subprocess.run([python, "-c", WRITER, folder, str(layers), "1" if fused else "0"], check=True)
    subprocess.run([python, "-c", TOKENIZER, folder], check=True, capture_output=True)


def warm(folder):
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as f:
            while f.read(64 << 20):
                pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--llama-cpp", default=os.environ.get("SAFEWEIGHTS_LLAMA_CPP"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--layouts", default="per-expert,fused")
    ap.add_argument("--runs", type=int, default=3, help="timed runs of each tool, taking turns (medians reported)")
    args = ap.parse_args()
    layers = max(1, round(args.gib * (1 << 30) / layer_bytes()))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for layout in args.layouts.split(","):
            folder = os.path.join(tmp, layout)
            make_folder(folder, layers, layout == "fused", args.python)
            size = sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder)) / (1 << 30)
            os.sync()  # the folder just written goes to the disk before anything is timed
            warm(folder)
            ours_out, ref_out = os.path.join(tmp, f"{layout}-ours.gguf"), os.path.join(tmp, f"{layout}-ref.gguf")
            env = dict(os.environ, PYTHONPATH=os.path.join(args.llama_cpp or "", "gguf-py"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
            commands = {"safeweights": ([args.cli, "convert", folder, ours_out, "--type", "q8_0"], ours_out, None)}
            if args.llama_cpp:
                commands["llama.cpp"] = ([args.python, "-c", REFERENCE, args.llama_cpp, folder, ref_out, "qwen2"], ref_out, env)
            print(f"{layout}: {size:.2f} GiB, {layers} layers of {EXPERTS} experts, {args.runs} runs each (sync before each)")
            runs = {tool: [] for tool in commands}
            for r in range(args.runs):
                for tool, (cmd, out, cmd_env) in commands.items():
                    if os.path.exists(out):
                        os.unlink(out)
                    os.sync()
                    runs[tool].append(measured(cmd, cmd_env))
                    wall, cpu, rss = runs[tool][-1]
                    print(f"{layout}: run {r + 1} {tool}: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss:.0f} MiB", flush=True)
            medians = {tool: [statistics.median(column) for column in zip(*values)] for tool, values in runs.items()}
            for tool, (wall, cpu, rss) in medians.items():
                print(f"{layout}: {tool} median {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss:.0f} MiB")
            if args.llama_cpp:
                (w1, c1, r1), (w2, c2, r2) = medians["safeweights"], medians["llama.cpp"]
                print(f"{layout}: llama.cpp / safeweights: x{w2 / w1:.1f} wall, x{c2 / c1:.1f} CPU, x{r2 / r1:.1f} peak RSS")
                same = subprocess.run([args.python, "-c", COMPARE, ours_out, ref_out], env=env, capture_output=True, text=True)
                print(f"{layout}: {same.stdout.strip() or same.stderr.strip()[-500:]}")
                os.unlink(ref_out)
            os.unlink(ours_out)
            for name in os.listdir(folder):
                os.unlink(os.path.join(folder, name))


# Tensor names, types, shapes and bytes, and keys but the deliberate differences (docs/GGUF.md: what
# llama.cpp's converter takes from the folder's name).
COMPARE = r"""
import sys, gguf
a, b = (gguf.GGUFReader(p) for p in sys.argv[1:3])
ta = {t.name: (int(t.tensor_type), list(t.shape), t.data.tobytes()) for t in a.tensors}
tb = {t.name: (int(t.tensor_type), list(t.shape), t.data.tobytes()) for t in b.tensors}
skip = lambda k: k.startswith(("GGUF.", "safetensors.")) or k in ("general.name", "general.basename", "general.finetune", "general.version", "general.organization")
ka = {k: f.contents() for k, f in a.fields.items() if not skip(k)}
kb = {k: f.contents() for k, f in b.fields.items() if not skip(k)}
print("outputs equal (tensors and keys)" if ta == tb and ka == kb else
      f"outputs DIFFER: tensors {sorted(k for k in set(ta) | set(tb) if ta.get(k) != tb.get(k))[:5]}, keys {sorted(k for k in set(ka) | set(kb) if ka.get(k) != kb.get(k))[:5]}")
"""

if __name__ == "__main__":
    main()
