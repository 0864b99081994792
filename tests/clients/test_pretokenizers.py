"""Pre-tokenizers named by what they are (src/hf/pretokenizer.cpp), judged by what llama.cpp does with the name.

For each known pre_tokenizer structure: a small byte-level BPE trained here with the `tokenizers` library,
split by that structure (its normalizer and model.ignore_merges as the family's files have them), saved with
a tiny random LlamaForCausalLM made by transformers; `safeweights convert` names llama.cpp's pre-tokenizer
from the structure; llama.cpp (llama-cpp-python, vocab only) then tokenizes a multilingual, code- and
number-heavy text to the ids the tokenizers library gives. That proves that the name we chose makes
llama.cpp split as the source does. Run with the clients' python; nothing is downloaded.
"""
import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")
tokenizers = pytest.importorskip("tokenizers")
llama_cpp = pytest.importorskip("llama_cpp")
LLAMA_CPP_SRC = os.environ.get("SAFEWEIGHTS_LLAMA_CPP")
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CLI = os.environ.get("SAFEWEIGHTS_CLI", str(REPO / "build" / "safeweights"))

# The published tokenizer.json patterns (an independent copy of src/hf/pretokenizer.cpp's table).
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN35 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
JAIS2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|"
         r"\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}")
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
          r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
O200K = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?"
         r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|"
         r"\s*[\r\n]+|\s+(?!\S)|\s+")
SEED_CODER = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+"
EXAONE_MOE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|"
              r"\s*[\r\n]|\s+(?!\S)|\s+")
MINICPM5 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
UFAKZEKA = r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
DEEPSEEK_V3 = ("[!\"" r"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")


def split(pattern):
    return pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False)


def then_bytes(*steps):
    """Splits, then ByteLevel without its own regex (bytes only), as these families write them."""
    return pre_tokenizers.Sequence([*steps, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


GPT2 = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)

def kept(pattern):
    """A Split that keeps its matches and drops the rest (MiniMax M2's, Granite 4.1's spelling)."""
    return pre_tokenizers.Split(Regex(pattern), behavior="removed", invert=True)


DEEPSEEK_CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
SPARK = ("[!\"" r"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|"
         r"\s+(?!\S)|\s+")
BLOOM = " ?[^(\\s|[.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c])]+"
BAILING = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"
KIMI = (r"[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
DIGITS = pre_tokenizers.Digits(individual_digits=True)

# case -> (llama.cpp name, pre_tokenizer, NFC normalizer, model.ignore_merges, tokenizer_config.json extras)
CASES = {
    "gpt-2": ("gpt-2", lambda: GPT2, False, False, {}),
    "llama-bpe": ("llama-bpe", lambda: then_bytes(split(LLAMA3)), False, True, {}),
    "llama-bpe kept": ("llama-bpe", lambda: then_bytes(kept(LLAMA3)), False, True, {}),
    "dbrx": ("dbrx", lambda: then_bytes(split(LLAMA3)), False, False, {}),
    "dbrx kept": ("dbrx", lambda: then_bytes(kept(LLAMA3)), False, False, {}),
    "jais-2": ("jais-2", lambda: then_bytes(split(JAIS2)), False, False, {}),
    "qwen2": ("qwen2", lambda: then_bytes(split(QWEN2)), True, False, {}),
    "qwen35": ("qwen35", lambda: then_bytes(split(QWEN35)), True, False, {}),
    "tekken": ("tekken", lambda: then_bytes(split(TEKKEN)), False, True, {}),
    "gpt-4o": ("gpt-4o", lambda: then_bytes(split(O200K)), False, False, {}),
    "minimax-m2": ("minimax-m2", lambda: then_bytes(kept(O200K)), False, False, {}),
    "tiny_aya": ("tiny_aya", lambda: then_bytes(split(r"\d{1,3}(?=(?:\d{3})*\b)"), split(O200K)), False, False, {}),
    "seed-coder": ("seed-coder", lambda: then_bytes(split(SEED_CODER)), False, False, {}),
    "exaone-moe": ("exaone-moe", lambda: then_bytes(split(EXAONE_MOE)), False, False, {}),
    "minicpm5": ("minicpm5", lambda: then_bytes(split(r"\p{N}{1,3}"), split(MINICPM5)), False, True, {}),
    "ufakzeka": ("ufakzeka", lambda: then_bytes(split(UFAKZEKA)), False, False, {}),
    "deepseek-v3": ("deepseek-v3", lambda: then_bytes(split(r"\p{N}{1,3}"), split("[一-龥\u3040-ゟ゠-ヿ]+"), split(DEEPSEEK_V3)),
                    False, False, {}),
    "spark2_5": ("spark2_5", lambda: then_bytes(split(r"\p{N}{1,3}"), split("[一-龥\u3040-ゟ゠-ヿ]+"), split(SPARK), DIGITS),
                 False, False, {}),
    "deepseek-coder": ("deepseek-coder", lambda: then_bytes(split("[\r\n]"), split(r"\s?\p{L}+"), split(r"\s?\p{P}+"), split(DEEPSEEK_CJK),
                                                            DIGITS), False, False, {}),
    "bloom": ("bloom", lambda: then_bytes(split(BLOOM)), False, False, {"clean_up_tokenization_spaces": True}),
    "poro-chat": ("poro-chat", lambda: then_bytes(split(BLOOM)), False, False, {"clean_up_tokenization_spaces": False}),
    "bailingmoe": ("bailingmoe", lambda: then_bytes(split(BAILING)), False, False, {}),
    "laguna": ("laguna", lambda: then_bytes(pre_tokenizers.Split(Regex(r"(?:\r?\n)+(?!\r?\n)"), behavior="merged_with_next", invert=False),
                                            split(QWEN2)), False, False, {}),
    "kimi-k2": ("kimi-k2", lambda: then_bytes(split(KIMI)), False, False, {}),
    "smollm": ("smollm", lambda: pre_tokenizers.Sequence([DIGITS, GPT2]), False, False, {}),
    "starcoder": ("starcoder", lambda: pre_tokenizers.Sequence([DIGITS, GPT2]), False, False, {"clean_up_tokenization_spaces": True}),
    "falcon": ("falcon", lambda: pre_tokenizers.Sequence([pre_tokenizers.Punctuation(behavior="contiguous"), GPT2,
                                                          pre_tokenizers.Digits(individual_digits=False), split("[0-9][0-9][0-9]")]),
               False, False, {}),
}

CORPUS = [
    "Hello world, this is a tiny corpus for a tiny tokenizer. I've been told he's there; you'll see.",
    "Numbers 1 12 123 1234 12345 123456 1234567 and 3.14, 2,024 and 1e10 appear here.",
    "Ünïcödé text: café, naïve, résumé, 東京, 我想在apple工作, привет мир, مرحبا, カタカナ, ひらがな, 한국어 🙂!",
    "def foo(x):\n    return x ** 2  # comment\n\tif (a && b) { c[i] = d->e; }\n",
    "CamelCaseWords and HTTPServer, snake_case_words and SHOUTING words.",
    "  leading spaces and\ttabs and\nnewlines\n\n\n   more   spaces   ",
] * 20

# What llama.cpp must split as the source does: contractions in both cases, digit runs of every length,
# CJK, Cyrillic, Arabic, kana, Hangul, combining marks, emoji (ZWJ), code, camel case, runs of spaces,
# tabs and newlines, and a special token.
TEXT = ("Hello  world! I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL\n"
        "3 33 333 3333 33333 333333 3333333 3.3 3..3 1,234,567 x=10**9; y[2]==-0.5\n"
        "我想在apple工作1314151天～ 東京タワー ひらがな 안녕하세요 привет МИР مرحبا بالعالم नमस्ते\n"
        "e\u0301te\u0301 naïve café 🚀 😶\u200d🌫️ ✅ 🦙🦙\n"
        "def f(x):\n\treturn x  # two  spaces\n\n\n    indented   \r\n"
        "camelCaseWord HTTPServer getHTTPResponse ------======= ''''''```````\"\"\"\"......!!!!!!??????"
        "<|endoftext|> after the special token")


def make_folder(folder: Path, case: str, family=None) -> Path:
    """A tiny LlamaForCausalLM with a BPE trained on CORPUS split by CASES[case]; `family` (FAMILIES) adds
    its special tokens, post-processor and chat template."""
    _, make_pre, nfc, ignore_merges, config_extra = CASES[case]
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = make_pre()
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    assert json.loads(tok.to_str())["model"]["ignore_merges"] is ignore_merges
    special = {"eos_token": "<|endoftext|>"}
    if family:
        spec = FAMILIES[family]
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in spec["special"]])
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in spec["plain"]])
        if spec["post"] == "bytelevel":
            tok.post_processor = processors.ByteLevel(trim_offsets=False)
        elif spec["post"]:
            first, last = spec["post"]
            single = " ".join(x for x in (first, "$A", last) if x)
            tok.post_processor = processors.TemplateProcessing(
                single=single, special_tokens=[(t, tok.token_to_id(t)) for t in (first, last) if t])
        special = spec["tokens"]
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **special)
    if family and FAMILIES[family]["chat"]:
        fast.chat_template = FAMILIES[family]["chat"]
    cfg = transformers.LlamaConfig(vocab_size=len(fast) + 3, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64, eos_token_id=0)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(str(folder))
    fast.save_pretrained(str(folder))
    if config_extra:
        path = folder / "tokenizer_config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **config_extra}))
    return folder


@pytest.mark.parametrize("case", sorted(CASES))
def test_llama_cpp_splits_as_the_source(tmp_path, case):
    name = CASES[case][0]
    folder = make_folder(tmp_path / "model", case)
    out = tmp_path / "model.gguf"
    r = subprocess.run([CLI, "convert", str(folder), str(out), "--type", "f32"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    field = gguf.GGUFReader(str(out)).get_field("tokenizer.ggml.pre")
    assert field.contents() == name
    want, got = source_and_llama_cpp_ids(folder, out, case)
    assert got == want


def source_and_llama_cpp_ids(folder, gguf_path, case, pre=None):
    """TEXT's ids as the tokenizers library gives them from `folder`, and as llama.cpp gives them from
    `gguf_path` (its tokenizer.ggml.pre overridden by `pre` when given)."""
    text = TEXT
    if CASES[case][0] == "tiny_aya":
        # llama.cpp's \b takes a CJK letter for a non-word character, the tokenizers library for a word
        # character: digits right before one group differently (llama.cpp's, under the name its own
        # converter gives this structure too).
        text = text.replace("1314151天", "1314151 天")
    want = transformers.AutoTokenizer.from_pretrained(str(folder))(text, add_special_tokens=False)["input_ids"]
    overrides = {"tokenizer.ggml.pre": pre} if pre else None
    llm = llama_cpp.Llama(model_path=str(gguf_path), vocab_only=True, verbose=False, kv_overrides=overrides)
    # llama.cpp does not normalize: Qwen's NFC normalizer agrees with it on text already in NFC.
    nfc = CASES[case][2]
    got = llm.tokenize((unicodedata.normalize("NFC", text) if nfc else text).encode("utf-8"), add_bos=False, special=True)
    return want, got


# The other names llama.cpp's converter writes or its loader reads (conversion/base.py's get_vocab_base_pre,
# src/llama-vocab.cpp) that it splits with a row's regexes and the same ignore_merges: the row's case -> those
# names. A folder of that structure is named after the row; llama.cpp under each of these names splits it the
# same (the names differ in loader defaults our keys set: add_bos / add_sep, and clean_spaces, which only the
# detokenizer reads). docs/GGUF.md lists them, and the names not recognised with the reason.
ALIASES = {
    "llama-bpe": ["llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano", "glm5"],
    "dbrx": ["smaug-bpe"],
    "gpt-2": ["phi-2", "mpt", "olmo", "jais", "exaone4", "trillion", "granite-docling", "a.x-4.0", "gigachat", "mellum", "modern-bert",
              "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "jina-v1-en", "jina-v2-code", "roberta-bpe"],
    "starcoder": ["refact", "codeshell", "minerva-7b", "mellum2"],
    "qwen2": ["deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "hunyuan", "solar-open", "grok-2"],
    "gpt-4o": ["llama4", "kanana2", "talkie"],
    "tiny_aya": ["cohere2moe"],
    "deepseek-v3": ["hunyuan-dense", "hy_v4", "joyai-llm"],
    "bailingmoe": ["bailingmoe2", "llada-moe"],
    "bloom": ["gpt3-finnish"],
}


@pytest.mark.parametrize("case", sorted(ALIASES))
def test_names_sharing_a_row_split_as_the_row(tmp_path, case):
    folder = make_folder(tmp_path / "model", case)
    out = tmp_path / "model.gguf"
    r = subprocess.run([CLI, "convert", str(folder), str(out), "--type", "f32"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for name in ALIASES[case]:
        want, got = source_and_llama_cpp_ids(folder, out, case, pre=name)
        assert got == want, name


def test_a_near_miss_is_refused_naming_its_structure(tmp_path):
    """Qwen2's regex with digits in pairs: llama.cpp has no such pre-tokenizer; nothing is written."""
    CASES["near miss"] = ("", lambda: then_bytes(split(QWEN2.replace(r"\p{N}|", r"\p{N}{1,2}|"))), False, False, {})
    try:
        folder = make_folder(tmp_path / "model", "near miss")
    finally:
        del CASES["near miss"]
    out = tmp_path / "model.gguf"
    r = subprocess.run([CLI, "convert", str(folder), str(out), "--type", "f32"], capture_output=True, text=True)
    assert r.returncode == 1 and not out.exists()
    assert "NotSupported: tokenizer.json's pre_tokenizer Sequence[Split(Isolated, Regex" in r.stderr
    assert "is not one llama.cpp splits text as" in r.stderr


# Special-token families, as their files have them: the tokens marked special and not, tokenizer_config.json's
# names, the post_processor (ByteLevel, or a TemplateProcessing around $A) and the chat template.
CHAT = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
FAMILIES = {
    # Llama 3: BOS added by the template, <|eot_id|> eos, a plain added token (USER_DEFINED).
    "llama3": dict(special=["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>"], plain=["<tool>"], post=("<|begin_of_text|>", None),
                   tokens=dict(bos_token="<|begin_of_text|>", eos_token="<|eot_id|>"), chat=CHAT),
    # Qwen: ByteLevel post-processor (adds nothing), no bos, pad <|endoftext|>, <think> not special.
    "qwen": dict(special=["<|im_start|>", "<|im_end|>"], plain=["<think>", "</think>", "<tool_call>"], post="bytelevel",
                 tokens=dict(eos_token="<|im_end|>", pad_token="<|endoftext|>"), chat=CHAT),
    # gpt-oss's harmony tokens, some not marked special (they look special: CONTROL), and a template that
    # ends with another token than eos (which becomes eos, the old one eot).
    "harmony": dict(special=["<|startoftext|>", "<|return|>", "<|start|>", "<|end|>", "<|message|>"], plain=["<|channel|>", "<|call|>"],
                    post=(None, "<|return|>"), tokens=dict(bos_token="<|startoftext|>", eos_token="<|endoftext|>"), chat=None),
}


def reference_gguf(folder: Path, out: Path, pre: str) -> Path:
    """llama.cpp's own convert_hf_to_gguf.py on `folder`, with `pre` for its hash lookup (a tokenizer trained
    here is in no list: the name is what the other test judges)."""
    driver = (
        "import runpy, sys\n"
        "src, pre = sys.argv[1], sys.argv[2]\n"
        "sys.path.insert(0, src)\n"
        "import conversion.base as base\n"
        "base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre\n"
        "sys.argv = ['convert_hf_to_gguf.py'] + sys.argv[3:]\n"
        "runpy.run_path(src + '/convert_hf_to_gguf.py', run_name='__main__')\n")
    env = dict(os.environ, PYTHONPATH=LLAMA_CPP_SRC + "/gguf-py", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    r = subprocess.run([sys.executable, "-c", driver, LLAMA_CPP_SRC, pre, str(folder), "--outfile", str(out), "--outtype", "f32"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def tokenizer_keys(path: Path) -> dict:
    reader = gguf.GGUFReader(str(path))
    return {k: reader.fields[k].contents() for k in reader.fields if k.startswith("tokenizer.")}


@pytest.mark.parametrize("case,family", [("llama-bpe", "llama3"), ("qwen2", "qwen"), ("gpt-4o", "harmony")])
def test_tokenizer_keys_as_llama_cpp_converter_writes_them(tmp_path, case, family):
    """Tokens, token types, merges, special token ids, add_bos/add_eos and the chat template: every
    tokenizer.* key equals what llama.cpp's convert_hf_to_gguf.py writes from the same folder."""
    if not LLAMA_CPP_SRC:
        if os.environ.get("CI") == "true":
            pytest.fail("SAFEWEIGHTS_LLAMA_CPP is unset in CI (scripts/test.sh exports it)")
        pytest.skip("SAFEWEIGHTS_LLAMA_CPP (the pinned llama.cpp's source, scripts/llama-cpp.sh) is unset")
    folder = make_folder(tmp_path / "model", case, family)
    ours = tmp_path / "ours.gguf"
    r = subprocess.run([CLI, "convert", str(folder), str(ours), "--type", "f32"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = tokenizer_keys(ours)
    want = tokenizer_keys(reference_gguf(folder, tmp_path / "reference.gguf", got["tokenizer.ggml.pre"]))
    assert got == want
