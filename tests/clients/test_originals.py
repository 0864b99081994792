"""Meta's original download and Mistral's native layout (issue 34), made at test time from tiny random
transformers models: the weights in Meta's names, q/k in Meta's interleaved rotary order, cut into
model-parallel shards as fairscale cuts them, with params.json and the tokenizer beside. Judges:
transformers loads the folder we write with the source model's logits; llama.cpp runs the GGUF we write
directly with them; that GGUF equals, key for key and tensor for tensor, the GGUF of our transformers
folder (ours, and llama.cpp's own convert_hf_to_gguf.py's when SAFEWEIGHTS_LLAMA_CPP is set); every
refusal's message."""
import base64
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

import gguf_helpers  # noqa: E402
from gguf_helpers import IDS, llama_cpp_logits, same_gguf  # noqa: E402
from tiny_models import meta_original_folder, meta_state, sentencepiece_model, write_shards  # noqa: E402

HIDDEN, HEADS, KV_HEADS, LAYERS = 64, 8, 4, 2  # 4 shards split the key/value heads, as Meta splits them
# The MLP width (tiny_models.meta_original_folder writes the params.json that gives it).
INTERMEDIATE = 192


def source_model(arch="llama", vocab=400, seed=0, **config):
    """A tiny transformers model in float32 whose weights are exact in bfloat16 (so the bf16 download
    loses nothing)."""
    cls = transformers.MistralForCausalLM if arch == "mistral" else transformers.LlamaForCausalLM
    cfg = transformers.MistralConfig if arch == "mistral" else transformers.LlamaConfig
    fields = dict(vocab_size=vocab, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                  num_key_value_heads=KV_HEADS, max_position_embeddings=4096, bos_token_id=1, eos_token_id=2, rms_norm_eps=1e-5,
                  tie_word_embeddings=False)
    fields.update(config)
    torch.manual_seed(seed)
    model = cls(cfg(**fields)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.bfloat16().float())
    return model


def mistral_folder(folder, model):
    """Mistral's native layout: consolidated.safetensors, params.json with head_dim and hidden_dim,
    tokenizer.model.v3, and the transformers shards beside it (which must be ignored)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    save_file(meta_state(model), str(folder / "consolidated.safetensors"))
    params = {"dim": HIDDEN, "n_layers": LAYERS, "head_dim": HIDDEN // HEADS, "hidden_dim": INTERMEDIATE, "n_heads": HEADS,
              "n_kv_heads": KV_HEADS, "norm_eps": 1e-05, "vocab_size": model.config.vocab_size, "rope_theta": 1000000.0}
    (folder / "params.json").write_text(json.dumps(params))
    sentencepiece_model(folder / "tokenizer.model.v3")
    save_file({"junk": torch.zeros(3)}, str(folder / "model.safetensors"))  # what a glob would read twice
    return folder


# Without --type: each test says the type it wants.
convert = functools.partial(gguf_helpers.convert, type_=None)


def convert_ok(src, out, *extra):
    r = convert(src, out, *extra)
    assert r.returncode == 0, r.stderr
    return r


def logits(model, ids=IDS):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def loaded_logits(folder, arch="llama"):
    return loaded_logits_of(folder, IDS, arch)


def loaded_logits_of(folder, ids, arch="llama"):
    cls = transformers.MistralForCausalLM if arch == "mistral" else transformers.LlamaForCausalLM
    return logits(cls.from_pretrained(folder, dtype=torch.float32).eval(), ids)


@pytest.fixture(scope="module")
def llama2(tmp_path_factory):
    model = source_model()
    root = tmp_path_factory.mktemp("llama2")
    return model, {s: meta_original_folder(root / f"mp{s}", model, shards=s) for s in (1, 2, 4)}


@pytest.mark.parametrize("shards", [1, 2, 4])
def test_llama2_folder_loads_with_the_source_logits(llama2, tmp_path, shards):
    model, folders = llama2
    out = tmp_path / "hf"
    r = convert_ok(folders[shards], out, "--llama-version", "2")
    names = sorted(p.name for p in out.iterdir())
    assert names == ["config.json", "generation_config.json", "model.safetensors", "special_tokens_map.json", "tokenizer.model",
                     "tokenizer_config.json"], r.stdout
    config = json.loads((out / "config.json").read_text())
    assert config["intermediate_size"] == INTERMEDIATE and config["max_position_embeddings"] == 4096
    assert config["vocab_size"] == 400 and config["torch_dtype"] == "bfloat16"
    np.testing.assert_allclose(loaded_logits(out), logits(model), rtol=1e-5, atol=1e-5)
    tok = transformers.AutoTokenizer.from_pretrained(out)
    assert tok("hello world").input_ids[0] == 1


@pytest.mark.parametrize("shards", [1, 2])
def test_llama2_gguf_direct_equals_gguf_of_our_folder(llama2, tmp_path, shards):
    _, folders = llama2
    convert_ok(folders[shards], tmp_path / "hf", "--llama-version", "2")
    convert_ok(folders[shards], tmp_path / "direct.gguf", "--llama-version", "2")
    convert_ok(tmp_path / "hf", tmp_path / "via-folder.gguf")
    same_gguf(tmp_path / "direct.gguf", tmp_path / "via-folder.gguf")


def test_llama2_gguf_runs_with_the_source_logits(llama2, tmp_path):
    model, folders = llama2
    convert_ok(folders[2], tmp_path / "m.gguf", "--llama-version", "2", "--type", "f32")
    got, want = llama_cpp_logits(tmp_path / "m.gguf"), logits(model)
    assert np.max(np.abs(got - want)) <= 1e-4 * np.max(np.abs(want))


def test_llama2_gguf_equals_llama_cpps_converter_on_our_folder(llama2, tmp_path):
    src = os.environ.get("SAFEWEIGHTS_LLAMA_CPP")
    if not src:
        if os.environ.get("CI") == "true":
            pytest.fail("SAFEWEIGHTS_LLAMA_CPP is unset in CI")
        pytest.skip("SAFEWEIGHTS_LLAMA_CPP is unset (the pinned llama.cpp's source folder: scripts/llama-cpp.sh)")
    _, folders = llama2
    convert_ok(folders[2], tmp_path / "hf", "--llama-version", "2")
    # --outtype bf16 is llama.cpp's --type bf16: the norms F32.
    convert_ok(folders[2], tmp_path / "direct.gguf", "--llama-version", "2", "--type", "bf16")
    env = dict(os.environ, PYTHONPATH=str(Path(src) / "gguf-py"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    r = subprocess.run([sys.executable, str(Path(src) / "convert_hf_to_gguf.py"), str(tmp_path / "hf"), "--outfile", str(tmp_path / "ref.gguf"),
                        "--outtype", "bf16"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    same_gguf(tmp_path / "direct.gguf", tmp_path / "ref.gguf")


@pytest.fixture(scope="module")
def rank_file(tmp_path_factory):
    """A tiktoken rank file of a byte-level BPE trained by `tokenizers` (test_tiktoken_tokenizers.py's)."""
    from test_tiktoken_tokenizers import train_ranks

    table = train_ranks(400)
    path = tmp_path_factory.mktemp("ranks") / "tokenizer.model"
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in sorted(table.items(), key=lambda kv: kv[1])))
    return len(table), path


LLAMA31_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


@pytest.mark.parametrize("version, shards", [("3", 2), ("3.1", 4), ("3.2", 1)])
def test_llama3_folder_and_gguf_give_the_source_logits(rank_file, tmp_path, version, shards):
    """3: inferred from the tokenizer; 3.1: named (a model this small is taken for 3.2); 3.2: inferred
    (use_scaled_rope, dim <= 3072: factor 32), its embeddings tied (no output.weight)."""
    n_ranks, ranks = rank_file
    scaled = version != "3"
    rope = dict(rope_theta=500000.0, max_position_embeddings=131072 if scaled else 8192,
                rope_scaling=dict(LLAMA31_ROPE, factor=32.0 if version == "3.2" else 8.0) if scaled else None)
    model = source_model(vocab=n_ranks + 256, bos_token_id=n_ranks, eos_token_id=n_ranks + 1, tie_word_embeddings=version == "3.2", **rope)
    src = meta_original_folder(tmp_path / "meta", model, shards=shards, tokenizer=ranks, extra_params={"use_scaled_rope": True} if scaled else None)
    named = ["--llama-version", "3.1", "--instruct"] if version == "3.1" else []
    r = convert_ok(src, tmp_path / "hf", *named)
    if not named:
        assert f"note: Llama {version} (" in r.stderr
    generation = json.loads((tmp_path / "hf" / "generation_config.json").read_text())
    if version == "3.1":  # the instruct model's ends: <|end_of_text|>, <|eom_id|>, <|eot_id|>
        assert generation == {"bos_token_id": n_ranks, "do_sample": True, "eos_token_id": [n_ranks + 1, n_ranks + 8, n_ranks + 9],
                              "temperature": 0.6, "top_p": 0.9}
    else:
        assert generation == {"bos_token_id": n_ranks, "eos_token_id": n_ranks + 1}
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["bos_token_id"] == n_ranks and config["vocab_size"] == n_ranks + 256
    assert config["max_position_embeddings"] == rope["max_position_embeddings"]
    ids = [n_ranks, 5, 77, 123, 250, 399, 42, 8, 300, 17, 200, 64]
    np.testing.assert_allclose(loaded_logits_of(tmp_path / "hf", ids), logits(model, ids), rtol=1e-5, atol=1e-5)
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert tok("hello world").input_ids[0] == n_ranks
    convert_ok(src, tmp_path / "m.gguf", "--type", "f32", *named)
    got, want = llama_cpp_logits(tmp_path / "m.gguf", ids), logits(model, ids)
    assert np.max(np.abs(got - want)) <= 1e-4 * np.max(np.abs(want))
    convert_ok(src, tmp_path / "direct.gguf", *named)
    convert_ok(tmp_path / "hf", tmp_path / "via-folder.gguf")
    same_gguf(tmp_path / "direct.gguf", tmp_path / "via-folder.gguf")


def tekken_source(tmp_path):
    """A Mistral model and its native layout with a tekken.json (special tokens first, the vocabulary cut
    and offset), and token ids within its vocabulary."""
    from test_tiktoken_tokenizers import train_ranks, write_tekken

    table = train_ranks(400)
    n_special, cut = 20, 100
    vocab = n_special + len(table) - cut
    model = source_model("mistral", vocab=vocab, sliding_window=None, rope_theta=1000000.0, head_dim=HIDDEN // HEADS)
    src = mistral_folder(tmp_path / "mistral", model)
    (src / "tokenizer.model.v3").unlink()
    write_tekken(table, src / "tekken.json", n_special=n_special, cut=cut)
    return model, src, vocab, [i % vocab for i in IDS]


def test_mistral_tekken_folder_loads_with_the_source_logits(tmp_path):
    model, src, vocab, ids = tekken_source(tmp_path)
    convert_ok(src, tmp_path / "hf")
    assert not (tmp_path / "hf" / "tokenizer.model").exists()
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["vocab_size"] == vocab
    np.testing.assert_allclose(loaded_logits_of(tmp_path / "hf", ids, "mistral"), logits(model, ids), rtol=1e-5, atol=1e-5)
    assert len(transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")) == vocab


def test_mistral_tekken_gguf_runs_with_the_source_logits(tmp_path):
    model, src, _, ids = tekken_source(tmp_path)
    convert_ok(src, tmp_path / "m.gguf", "--type", "f32")
    got, want = llama_cpp_logits(tmp_path / "m.gguf", ids), logits(model, ids)
    assert np.max(np.abs(got - want)) <= 1e-4 * np.max(np.abs(want))


def test_mistral_native_ignores_the_transformers_shards(tmp_path):
    model = source_model("mistral", sliding_window=None, rope_theta=1000000.0, head_dim=HIDDEN // HEADS)
    src = mistral_folder(tmp_path / "mistral", model)
    r = convert_ok(src, tmp_path / "hf")
    assert "context 32768" in r.stderr
    np.testing.assert_allclose(loaded_logits(tmp_path / "hf", "mistral"), logits(model), rtol=1e-5, atol=1e-5)
    convert_ok(src, tmp_path / "m.gguf", "--type", "f32")
    got, want = llama_cpp_logits(tmp_path / "m.gguf"), logits(model)
    assert np.max(np.abs(got - want)) <= 1e-4 * np.max(np.abs(want))


def assert_end_to_end(model, src, tmp_path, *extra, arch="llama"):
    """The judges on `src` converted: transformers loads our folder with the model's logits, llama.cpp runs
    our GGUF with them, and the GGUF written directly equals the GGUF of our folder. Returns our
    folder's config.json and the conversion's stderr."""
    r = convert_ok(src, tmp_path / "hf", *extra)
    np.testing.assert_allclose(loaded_logits(tmp_path / "hf", arch), logits(model), rtol=1e-5, atol=1e-5)
    convert_ok(src, tmp_path / "m.gguf", "--type", "f32", *extra)
    got, want = llama_cpp_logits(tmp_path / "m.gguf"), logits(model)
    assert np.max(np.abs(got - want)) <= 1e-4 * np.max(np.abs(want))
    convert_ok(src, tmp_path / "direct.gguf", *extra)
    convert_ok(tmp_path / "hf", tmp_path / "via-folder.gguf")
    same_gguf(tmp_path / "direct.gguf", tmp_path / "via-folder.gguf")
    return json.loads((tmp_path / "hf" / "config.json").read_text()), r.stderr


def test_mistral_native_pth_shards_give_the_source_logits(tmp_path):
    """Mistral's older native layout: consolidated.00.pth and .01.pth, cut as Meta cuts its model-parallel
    shards (embeddings by columns), with params.json's head_dim and hidden_dim and tokenizer.model.v3."""
    model = source_model("mistral", sliding_window=None, rope_theta=1000000.0, head_dim=HIDDEN // HEADS)
    src = mistral_folder(tmp_path / "mistral", model)
    (src / "consolidated.safetensors").unlink()
    write_shards(meta_state(model), src, 2)
    config, _ = assert_end_to_end(model, src, tmp_path, arch="mistral")
    assert config["architectures"] == ["MistralForCausalLM"] and config["intermediate_size"] == INTERMEDIATE


def test_llama1_without_n_kv_heads_gives_the_source_logits(tmp_path):
    """Llama 1's params.json has no n_kv_heads (every head has its keys) and vocab_size -1; context 2048."""
    model = source_model(num_key_value_heads=HEADS, max_position_embeddings=2048)
    src = meta_original_folder(tmp_path / "llama1", model, shards=2)
    params = json.loads((src / "params.json").read_text())
    del params["n_kv_heads"]
    (src / "params.json").write_text(json.dumps(params))
    config, _ = assert_end_to_end(model, src, tmp_path, "--llama-version", "1")
    assert config["max_position_embeddings"] == 2048 and config["num_key_value_heads"] == HEADS and config["vocab_size"] == 400


def test_code_llama_has_a_16k_context_and_its_rope_theta(tmp_path):
    """Code Llama: Llama 2's layout and tokenizer, rope_theta 1e6 in params.json, vocab_size -1 (the
    tokenizer's); transformers' converter gives it a context of 16384."""
    model = source_model(rope_theta=1000000.0, max_position_embeddings=16384)
    src = meta_original_folder(tmp_path / "codellama", model, shards=2, extra_params={"rope_theta": 1000000.0})
    config, err = assert_end_to_end(model, src, tmp_path, "--llama-version", "2")
    assert "Code Llama, context 16384" in err
    assert config["max_position_embeddings"] == 16384 and config["vocab_size"] == 400
    theta = config["rope_theta"] if "rope_theta" in config else config["rope_parameters"]["rope_theta"]
    assert theta == 1000000.0
    fields = gguf.GGUFReader(str(tmp_path / "direct.gguf")).fields
    assert fields["llama.context_length"].contents() == 16384 and fields["llama.rope.freq_base"].contents() == 1000000.0


def refused(src, tmp_path, *extra, code=1):
    return gguf_helpers.refused(src, tmp_path / "out", *extra, type_=None, code=code)


def copy_of(folder, tmp_path):
    return Path(shutil.copytree(folder, tmp_path / "src"))


def test_missing_shard_refused(llama2, tmp_path):
    src = copy_of(llama2[1][4], tmp_path)
    (src / "consolidated.02.pth").unlink()
    err = refused(src, tmp_path, "--llama-version", "2")
    assert "consolidated.02.pth: InvalidModelFolder: model-parallel shard consolidated.02.pth is missing" in err


def test_extra_shard_refused(llama2, tmp_path):
    src = copy_of(llama2[1][2], tmp_path)
    shutil.copy(src / "consolidated.01.pth", src / "consolidated.02.pth")
    err = refused(src, tmp_path, "--llama-version", "2")
    assert "params.json: InvalidModelFolder:" in err and "assembled from 3 shard(s)" in err


def test_shards_disagreeing_refused(llama2, tmp_path):
    src = copy_of(llama2[1][2], tmp_path)
    part = torch.load(src / "consolidated.01.pth")
    part["layers.1.ffn_norm.weight"] = part["layers.1.ffn_norm.weight"] + 1
    torch.save(part, src / "consolidated.01.pth")
    err = refused(src, tmp_path, "--llama-version", "2")
    assert "consolidated.01.pth: InvalidModelFolder: differs from its copy in" in err and "layers.1.ffn_norm.weight" in err
    del part["layers.0.attention.wq.weight"]
    torch.save(part, src / "consolidated.01.pth")
    err = refused(src, tmp_path, "--llama-version", "2")
    assert "tensor of" in err and "is missing (model-parallel shards hold the same tensors)" in err


def test_params_disagreeing_with_the_tensors_refused(llama2, tmp_path):
    src = copy_of(llama2[1][1], tmp_path)
    params = json.loads((src / "params.json").read_text())
    (src / "params.json").write_text(json.dumps(dict(params, n_layers=3)))
    assert "tensor layers.2.attention.wq.weight is missing" in refused(src, tmp_path, "--llama-version", "2")
    (src / "params.json").write_text(json.dumps(dict(params, multiple_of=2 * INTERMEDIATE)))
    assert "params.json implies [384, 64]" in refused(src, tmp_path, "--llama-version", "2")
    (src / "params.json").write_text(json.dumps(dict(params, moe={"num_experts": 8})))
    assert "params.json: NotSupported: key `moe` is not converted yet" in refused(src, tmp_path, "--llama-version", "2")
    (src / "params.json").write_text(json.dumps(dict(params, frobnicate=1)))
    assert "key `frobnicate` is not understood" in refused(src, tmp_path, "--llama-version", "2")


def test_output_missing_refused_but_for_llama_3_2(llama2, tmp_path):
    src = copy_of(llama2[1][1], tmp_path)
    part = torch.load(src / "consolidated.00.pth")
    del part["output.weight"]
    torch.save(part, src / "consolidated.00.pth")
    err = refused(src, tmp_path, "--llama-version", "2")
    assert "TensorNotFound: tensor output.weight is missing (transformers needs lm_head.weight)" in err


def test_version_not_inferred_is_asked_for(llama2, tmp_path):
    err = refused(llama2[1][1], tmp_path, code=2)
    assert "InvalidArgument: params.json and a SentencePiece tokenizer.model (Llama 1 or 2) fit Llama 1 (context 2048) and Llama 2 (4096) " \
           "alike: give --llama-version 1 or 2" in err


def test_pickle_holding_more_than_tensors_refused(llama2, tmp_path):
    src = copy_of(llama2[1][1], tmp_path)
    part = torch.load(src / "consolidated.00.pth")
    part["extra"] = NotATensor()
    torch.save(part, src / "consolidated.00.pth")
    err = refused(src, tmp_path, "--llama-version", "2")
    assert "consolidated.00.pth: UnsafePickle" in err and "NotATensor" in err


class NotATensor:
    """A global a checkpoint of tensors never holds."""
