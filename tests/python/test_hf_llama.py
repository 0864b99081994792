"""Hugging Face Llama folder -> llama.cpp GGUF (safeweights convert FOLDER OUT.gguf), proven against
independent references.

The test makes tiny random-weight Llama folders itself (GQA: 2 key/value heads for 4 query heads): one
with a SentencePiece tokenizer.model (protobuf bytes written here), untied lm_head, one
model.safetensors; two with byte-level BPE tokenizer.json (GPT-2's ByteLevel pre-tokenizer, and Llama
3's split pattern), tied embeddings, sharded weights with an index. Then:

- gguf-py (llama.cpp's own reader) reads the file: llama.cpp's keys with the value types its loader
  demands, its tensor names, and the Q/K rows permuted as llama.cpp's converter permutes them;
- when LLAMA_CPP_DIR names a llama.cpp checkout built with CMake (libllama in build/bin), the test
  compiles tests/hf/llama_logits.cpp against it and compares llama.cpp's logits for a few token ids
  with a float64 numpy forward pass written here in Hugging Face's formulation (RMSNorm, rotate_half
  RoPE on the unpermuted weights, GQA, SwiGLU), and llama.cpp's tokenization of a text with the source
  tokenizer's (the `tokenizers` package for tokenizer.json, `sentencepiece` for tokenizer.model; each
  skipped when not installed).

Expected values come from numpy, gguf-py, tokenizers/sentencepiece and llama.cpp, never from safeweights.
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
gguf = pytest.importorskip("gguf")

from conftest import REPO, build_file  # noqa: E402
import safeweights  # noqa: E402
from safeweights import formats  # noqa: E402
from spm_model import spm_model, spm_pieces  # noqa: E402

VT = gguf.GGUFValueType

HIDDEN, HEADS, KV_HEADS, LAYERS, FF = 64, 4, 2, 2, 96
HEAD_DIM = HIDDEN // HEADS
THETA, EPS, CTX = 10000.0, 1e-5, 128
TEXT = "hello world, the help? hello xyz 42"

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _cli():
    cli = os.environ.get("SAFEWEIGHTS_CLI") or str(REPO / "build" / "safeweights")
    if not Path(cli).exists():
        pytest.skip("the safeweights CLI is not built")
    return cli


# ---- weights -------------------------------------------------------------------------------------


def _weights(vocab, tied, seed):
    rng = np.random.default_rng(seed)

    def mat(rows, cols, scale=None):
        return (rng.standard_normal((rows, cols)) * (scale or cols**-0.5)).astype(np.float32)

    def norm(n):
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w = {"model.embed_tokens.weight": mat(vocab, HIDDEN, 1.0), "model.norm.weight": norm(HIDDEN)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(HIDDEN)
        w[p + "self_attn.q_proj.weight"] = mat(HEADS * HEAD_DIM, HIDDEN)
        w[p + "self_attn.k_proj.weight"] = mat(KV_HEADS * HEAD_DIM, HIDDEN)
        w[p + "self_attn.v_proj.weight"] = mat(KV_HEADS * HEAD_DIM, HIDDEN)
        w[p + "self_attn.o_proj.weight"] = mat(HIDDEN, HEADS * HEAD_DIM)
        w[p + "post_attention_layernorm.weight"] = norm(HIDDEN)
        w[p + "mlp.gate_proj.weight"] = mat(FF, HIDDEN)
        w[p + "mlp.up_proj.weight"] = mat(FF, HIDDEN)
        w[p + "mlp.down_proj.weight"] = mat(HIDDEN, FF)
        w[p + "self_attn.rotary_emb.inv_freq"] = (1.0 / THETA ** (np.arange(0, HEAD_DIM, 2) / HEAD_DIM)).astype(np.float32)
    if not tied:
        w["lm_head.weight"] = mat(vocab, HIDDEN)
    return w


def _safetensors(tensors):
    return build_file([(n, "F32", a.shape, a.tobytes()) for n, a in tensors.items()])


def _write_weights(folder, w, shards):
    names = list(w)
    if shards == 1:
        (folder / "model.safetensors").write_bytes(_safetensors(w))
        return
    weight_map = {}
    per = -(-len(names) // shards)
    for s in range(shards):
        part = names[s * per : (s + 1) * per]
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        (folder / fname).write_bytes(_safetensors({n: w[n] for n in part}))
        weight_map.update({n: fname for n in part})
    index = {"metadata": {"total_size": sum(a.nbytes for a in w.values())}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))


def _config(vocab, tied, extra=None):
    c = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab,
        "hidden_size": HIDDEN, "intermediate_size": FF, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "max_position_embeddings": CTX,
        "rope_theta": THETA, "rms_norm_eps": EPS, "tie_word_embeddings": tied, "torch_dtype": "float32",
        "bos_token_id": 1, "eos_token_id": 2,
    }
    c.update(extra or {})
    return c


# ---- byte-level BPE tokenizer.json ------------------------------------------------------------------


def _bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def _train_bpe(text, n_merges):
    """Merges learnt from `text` by plain pair counting (any merge list defines a valid tokenizer)."""
    b2u = _bytes_to_unicode()
    words = [[b2u[b] for b in w.encode()] for w in re.findall(r" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+", text)]
    merges = []
    for _ in range(n_merges):
        counts = {}
        for w in words:
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + 1
        if not counts:
            break
        best = max(sorted(counts), key=lambda p: counts[p])
        merges.append(best)
        for w in words:
            i = 0
            while i < len(w) - 1:
                if (w[i], w[i + 1]) == best:
                    w[i : i + 2] = [w[i] + w[i + 1]]
                else:
                    i += 1
    return merges


def _bpe_tokenizer(pre_kind):
    b2u = _bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges = _train_bpe("hello world the help hello world there hello, 42 the world " * 3, 40)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    n = len(vocab)
    added = [{"id": n, "content": "<|begin_of_text|>", "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True},
             {"id": n + 1, "content": "<|end_of_text|>", "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}]
    if pre_kind == "gpt-2":
        pre = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
        merge_list = [f"{a} {b}" for a, b in merges]
    else:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
        merge_list = [[a, b] for a, b in merges]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": pre, "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": pre_kind == "llama-bpe", "vocab": vocab, "merges": merge_list},
    }
    return tok, vocab, [f"{a} {b}" for a, b in merges]


# ---- folders ---------------------------------------------------------------------------------------

CHAT = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def make_spm_folder(folder):
    pieces = spm_pieces()
    vocab = len(pieces) + 3  # config's vocab_size pads the vocabulary
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_config(vocab, tied=False)))
    (folder / "tokenizer.model").write_bytes(spm_model(pieces))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "chat_template": CHAT}))
    w = _weights(vocab, tied=False, seed=1)
    _write_weights(folder, w, shards=1)
    return {"kind": "spm", "pieces": pieces, "vocab": vocab, "weights": w}


def make_bpe_folder(folder, pre_kind):
    tok, bpe_vocab, merges = _bpe_tokenizer(pre_kind)
    vocab = len(bpe_vocab) + 2 + 2  # two added tokens, two padding rows
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_config(vocab, True, {"bos_token_id": None, "eos_token_id": None})))
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "add_bos_token": True, "bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|end_of_text|>"},
        "chat_template": CHAT}))
    w = _weights(vocab, tied=True, seed=2)
    _write_weights(folder, w, shards=2)
    return {"kind": "bpe", "pre": pre_kind, "bpe_vocab": bpe_vocab, "merges": merges, "vocab": vocab, "weights": w,
            "added": {a["id"]: a["content"] for a in tok["added_tokens"]}}


def convert(folder, out, type_name="f32"):
    r = subprocess.run([_cli(), "convert", str(folder), str(out), "--type", type_name], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + r.stdout
    return out


@pytest.fixture(scope="module", params=["spm", "gpt-2", "llama-bpe"])
def model(request, tmp_path_factory):
    base = tmp_path_factory.mktemp("hf_" + request.param)
    folder = base / "tiny-llama"
    info = make_spm_folder(folder) if request.param == "spm" else make_bpe_folder(folder, request.param)
    info["folder"] = folder
    info["gguf"] = convert(folder, base / "model-f32.gguf")
    return info


# ---- (a) what gguf-py reads -------------------------------------------------------------------------


def _field_value(f):
    t = f.types[0]
    if t == VT.ARRAY:
        if f.types[1] == VT.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    if t == VT.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]][0].item()


def permute(w, n_head):
    """llama.cpp's converter's Q/K row order (convert_hf_to_gguf.py LlamaModel.permute)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def test_keys_types_and_values(model):
    r = gguf.GGUFReader(str(model["gguf"]))
    f = r.fields
    expect = {
        "general.architecture": (VT.STRING, "llama"), "general.name": (VT.STRING, "tiny-llama"),
        "general.file_type": (VT.UINT32, 0), "general.quantization_version": (VT.UINT32, 2),
        "llama.context_length": (VT.UINT32, CTX), "llama.embedding_length": (VT.UINT32, HIDDEN),
        "llama.block_count": (VT.UINT32, LAYERS), "llama.feed_forward_length": (VT.UINT32, FF),
        "llama.attention.head_count": (VT.UINT32, HEADS), "llama.attention.head_count_kv": (VT.UINT32, KV_HEADS),
        "llama.rope.dimension_count": (VT.UINT32, HEAD_DIM), "llama.vocab_size": (VT.UINT32, model["vocab"]),
        "llama.rope.freq_base": (VT.FLOAT32, np.float32(THETA).item()),
        "llama.attention.layer_norm_rms_epsilon": (VT.FLOAT32, np.float32(EPS).item()),
        "tokenizer.ggml.add_bos_token": (VT.BOOL, True), "tokenizer.chat_template": (VT.STRING, CHAT),
    }
    for key, (vt, value) in expect.items():
        assert key in f, key
        assert f[key].types[0] == vt, key
        assert _field_value(f[key]) == value, key
    tokens = _field_value(f["tokenizer.ggml.tokens"])
    types = _field_value(f["tokenizer.ggml.token_type"])
    assert f["tokenizer.ggml.token_type"].types == [VT.ARRAY, VT.INT32]
    assert len(tokens) == len(types) == model["vocab"]
    assert tokens[-1] == f"[PAD{model['vocab'] - 1}]" and types[-1] == 5
    if model["kind"] == "spm":
        pieces = model["pieces"]
        assert _field_value(f["tokenizer.ggml.model"]) == "llama"
        assert _field_value(f["tokenizer.ggml.pre"]) == "default"
        assert tokens[: len(pieces)] == [p for p, _, _ in pieces]
        assert types[: len(pieces)] == [t for _, _, t in pieces]
        assert f["tokenizer.ggml.scores"].types == [VT.ARRAY, VT.FLOAT32]
        scores = _field_value(f["tokenizer.ggml.scores"])
        assert scores[: len(pieces)] == [np.float32(s).item() for _, s, _ in pieces]
        assert scores[-1] == -10000.0
        ids = {"bos": 1, "eos": 2}  # config.json's (no tokenizer.json to look the texts up in)
        assert "tokenizer.ggml.add_eos_token" in f and _field_value(f["tokenizer.ggml.add_eos_token"]) is False
    else:
        assert _field_value(f["tokenizer.ggml.model"]) == "gpt2"
        assert _field_value(f["tokenizer.ggml.pre"]) == model["pre"]
        assert _field_value(f["tokenizer.ggml.merges"]) == model["merges"]
        for text, i in model["bpe_vocab"].items():
            assert tokens[i] == text and types[i] == 1
        for i, text in model["added"].items():
            assert tokens[i] == text and types[i] == 3  # special: CONTROL
        ids = {"bos": min(model["added"]), "eos": min(model["added"]) + 1}
        assert "tokenizer.ggml.scores" not in f
    for kind, key in (("bos", "tokenizer.ggml.bos_token_id"), ("eos", "tokenizer.ggml.eos_token_id")):
        assert f[key].types[0] == VT.UINT32 and _field_value(f[key]) == ids[kind], key


def test_tensor_names_and_permutation(model):
    r = gguf.GGUFReader(str(model["gguf"]))
    w = model["weights"]
    got = {t.name: np.array(t.data).reshape([int(d) for d in reversed(t.shape)]) for t in r.tensors}
    expect = {"token_embd.weight": w["model.embed_tokens.weight"], "output_norm.weight": w["model.norm.weight"]}
    if "lm_head.weight" in w:
        expect["output.weight"] = w["lm_head.weight"]
    names = {"input_layernorm": "attn_norm", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    for i in range(LAYERS):
        for hf, gg in names.items():
            expect[f"blk.{i}.{gg}.weight"] = w[f"model.layers.{i}.{hf}.weight"]
        expect[f"blk.{i}.attn_q.weight"] = permute(w[f"model.layers.{i}.self_attn.q_proj.weight"], HEADS)
        expect[f"blk.{i}.attn_k.weight"] = permute(w[f"model.layers.{i}.self_attn.k_proj.weight"], KV_HEADS)
    assert sorted(got) == sorted(expect)  # tied: no output.weight; rotary_emb.inv_freq dropped
    for name, a in expect.items():
        assert got[name].dtype == np.float32, name
        np.testing.assert_array_equal(got[name], a, err_msg=name)


# ---- (b) llama.cpp itself ---------------------------------------------------------------------------


def _rms_norm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * w


def _rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def reference_logits(w, ids):
    """Hugging Face's LlamaForCausalLM forward pass in float64 (no cache, causal mask)."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    t = len(ids)
    x = w["model.embed_tokens.weight"][ids]
    inv_freq = 1.0 / THETA ** (np.arange(0, HEAD_DIM, 2, dtype=np.float64) / HEAD_DIM)
    freqs = np.outer(np.arange(t, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
    mask = np.triu(np.full((t, t), -np.inf), 1)
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        h = _rms_norm(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(t, HEADS, HEAD_DIM)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(t, KV_HEADS, HEAD_DIM)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(t, KV_HEADS, HEAD_DIM)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        k = np.repeat(k, HEADS // KV_HEADS, axis=1)
        v = np.repeat(v, HEADS // KV_HEADS, axis=1)
        s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(HEAD_DIM) + mask
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s /= s.sum(axis=-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", s, v).reshape(t, HEADS * HEAD_DIM)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        h = _rms_norm(x, w[p + "post_attention_layernorm.weight"])
        g = h @ w[p + "mlp.gate_proj.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    x = _rms_norm(x, w["model.norm.weight"])
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.T


@pytest.fixture(scope="module")
def llama_driver(tmp_path_factory):
    root = os.environ.get("LLAMA_CPP_DIR")
    if not root:
        pytest.skip("LLAMA_CPP_DIR is not set (a llama.cpp checkout built with CMake): llama.cpp checks skipped")
    root = Path(root)
    libs = [p for p in (root / "build" / "bin", root / "build" / "src", root / "build") if (p / "libllama.so").exists()]
    if not libs:
        pytest.skip(f"no libllama.so under {root}/build")
    exe = tmp_path_factory.mktemp("driver") / "llama_logits"
    cmd = [os.environ.get("CXX", "c++"), "-std=c++17", "-O1", str(REPO / "tests" / "hf" / "llama_logits.cpp"),
           f"-I{root / 'include'}", f"-I{root / 'ggml' / 'include'}", f"-L{libs[0]}", "-lllama",
           f"-Wl,-rpath,{libs[0]}", "-o", str(exe)]
    subprocess.run(cmd, check=True)
    return exe


def llama_logits(driver, gguf_path, ids):
    r = subprocess.run([str(driver), str(gguf_path), "logits", *map(str, ids)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return np.array([[float(v) for v in line.split()] for line in r.stdout.splitlines()])


IDS = {"spm": [1, 270, 262, 5, 288], "bpe": [3, 100, 17, 250, 42, 7]}
# F32 weights, F32 KV cache: float32 arithmetic throughout, so relative to the logits' scale the error
# is a few float32 ulps accumulated over two layers.
F32_TOLERANCE = 1e-5


def test_llama_cpp_logits_match_reference(model, llama_driver):
    ids = IDS[model["kind"]]
    want = reference_logits(model["weights"], ids)
    got = llama_logits(llama_driver, model["gguf"], ids)
    assert got.shape == want.shape
    err = np.abs(got - want).max() / np.abs(want).max()
    print(f"{model['kind']}/{model.get('pre', '')} F32: max |llama.cpp - reference| / max |reference| = {err:.3g}")
    assert err < F32_TOLERANCE


def test_llama_cpp_tokenizer_matches_source(model, llama_driver):
    r = subprocess.run([str(llama_driver), str(model["gguf"]), "tokenize", TEXT], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = [int(t) for t in r.stdout.split()]
    if model["kind"] == "spm":
        spm = pytest.importorskip("sentencepiece")
        sp = spm.SentencePieceProcessor(model_proto=(model["folder"] / "tokenizer.model").read_bytes())
        want = sp.encode(TEXT)
    else:
        tokenizers = pytest.importorskip("tokenizers")
        tok = tokenizers.Tokenizer.from_file(str(model["folder"] / "tokenizer.json"))
        want = tok.encode(TEXT, add_special_tokens=False).ids
    assert got == want
    assert len(set(got)) > 5  # the text exercises merges, not one token per byte


# ---- F16 and Q8_0 -----------------------------------------------------------------------------------

# Relative to the largest logit, as measured against llama.cpp c392e50 (docs/GGUF.md) with a margin:
# the weights' rounding (F16: 2^-11 relative; Q8_0: 1/254 of each block's largest value) and llama.cpp's
# own rounding of activations for those matrix products (F16; Q8_0 activations for Q8_0 weights).
TYPE_TOLERANCE = {"f16": 5e-3, "q8_0": 5e-2}
FTYPE = {"f16": (1, gguf.GGMLQuantizationType.F16), "q8_0": (7, gguf.GGMLQuantizationType.Q8_0)}


@pytest.fixture(scope="module", params=sorted(TYPE_TOLERANCE))
def typed(request, model, tmp_path_factory):
    out = tmp_path_factory.mktemp("typed") / f"model-{request.param}.gguf"
    return request.param, convert(model["folder"], out, request.param)


def test_backends_and_threads_give_the_same_bytes(model, tmp_path):
    # The Llama path reads the shards as --backend says (mapped by default, or pread); the bytes depend
    # on neither that nor the thread count.
    outputs = []
    for extra in ([], ["--backend", "pread"], ["--backend", "mmap", "--threads", "3"]):
        out = tmp_path / f"q8-{len(outputs)}.gguf"
        r = subprocess.run([_cli(), "convert", str(model["folder"]), str(out), "--type", "q8_0", *extra],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr + r.stdout
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
    r = subprocess.run([_cli(), "convert", str(model["folder"]), str(tmp_path / "x.gguf"), "--backend", "nope"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and not (tmp_path / "x.gguf").exists()


def test_typed_file_types(model, typed):
    type_name, path = typed
    ftype, qtype = FTYPE[type_name]
    r = gguf.GGUFReader(str(path))
    assert r.fields["general.file_type"].types == [VT.UINT32]
    assert _field_value(r.fields["general.file_type"]) == ftype
    for t in r.tensors:
        want = gguf.GGMLQuantizationType.F32 if len(t.shape) == 1 or t.shape[1] == 1 else qtype
        assert t.tensor_type == want, t.name


def test_llama_cpp_logits_typed(model, typed, llama_driver):
    type_name, path = typed
    ids = IDS[model["kind"]]
    want = reference_logits(model["weights"], ids)
    got = llama_logits(llama_driver, path, ids)
    err = np.abs(got - want).max() / np.abs(want).max()
    print(f"{model['kind']}/{model.get('pre', '')} {type_name}: max |llama.cpp - reference| / max |reference| = {err:.3g}")
    assert err < TYPE_TOLERANCE[type_name]


# ---- routing: a folder whose config.json is broken is refused, never converted as plain tensors ----------


@pytest.mark.parametrize("config,kind,reason", [
    (b'{"architectures": ["LlamaForCausalLM"], "vocab_size": 6, "vocab_size": 7}', "DuplicateKey", "`vocab_size` repeated"),
    (b'{"architectures": ["LlamaForCausalLM"],', "InvalidModelFolder", "is not valid JSON"),
    (b'{"architectures": ["LlamaForCausalLM"], "rope_theta": Infinity}', "InvalidModelFolder", "is not valid JSON"),
    (b'{"a": "\xff"}', "InvalidModelFolder", "is not valid UTF-8"),
    (b"[" * 300 + b"]" * 300, "InvalidModelFolder", "is not valid JSON"),
    (b'{"architectures": ["LlamaForCausalLM"], "vocab_size": 0}', "InvalidModelFolder", "`vocab_size` is 0"),
    (b'{"architectures": ["BertModel"]}', "NotSupported", "architecture `BertModel` is not converted"),
])
def test_broken_or_unknown_config_is_refused_by_the_cli(model, tmp_path, config, kind, reason):
    # A broken folder is invalid input (exit 1, docs/CLI.md), never a usage error (exit 2), and its kind
    # says which verdict it is; Python's convert raises SafetensorError with the same kind.
    folder = tmp_path / "m"
    shutil.copytree(model["folder"], folder)
    (folder / "config.json").write_bytes(config)
    out = tmp_path / "out.gguf"
    r = subprocess.run([_cli(), "convert", str(folder), str(out)], capture_output=True, text=True)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert f"config.json: {kind}: " in r.stderr and reason in r.stderr, r.stderr
    assert not out.exists()
    with pytest.raises(safeweights.SafetensorError) as e:
        formats.convert(str(folder), str(out))
    assert e.value.kind == kind and e.value.file.endswith("config.json"), (e.value.kind, e.value.file)
    assert reason in str(e.value), str(e.value)
    assert not out.exists()
