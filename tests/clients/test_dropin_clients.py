"""The safetensors drop-in under the real clients, on tiny random models made here (no downloads).

- transformers 5 through the import shim (`import safetensors` is safeweights: tests/python/upstream_shim
  first on the path, as the upstream suite runs it): save_pretrained writes byte-identical files to the
  real safetensors' (one file and shards with their index), from_pretrained gives identical logits, the
  tensors transformers 5 reads with `get_slice(k)[...]` are views of the file's mapping as the
  reference's are; accelerate's device_map="auto" with disk offload gives the same logits.
- diffusers (0.40: 0.41 removed DDUF loading) with the real safetensors: DDUF archives (DDPM, and a
  StableDiffusion-style pipeline with a CLIP text encoder and tokenizer) packed by our CLI
  load; and with `safeweights.dduf.read_dduf_file` in place of huggingface_hub's, the pipeline's output
  is the same as from the folder.

Each shim-or-real run is its own process (both are `safetensors`). Run with the clients' interpreter
(scripts/python-env.sh --cached venv-clients tests/clients/requirements.txt) with PYTHONPATH=build/python and
SAFEWEIGHTS_CLI=build/safeweights. The DDUF tests need a diffusers that loads DDUF (0.40, which
tests/clients/requirements.txt pins).
"""

import filecmp
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]
SHIM = REPO / "tests" / "python" / "upstream_shim"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
os.environ.update(OFFLINE)


def child_env(shim: bool, extra_path=()):
    env = dict(os.environ, **OFFLINE)
    path = [str(p) for p in extra_path] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if shim:
        path.insert(0, str(SHIM))
    env["PYTHONPATH"] = os.pathsep.join(path)
    return env


def run_child(code: str, *args, shim: bool, extra_path=()):
    """Runs `code` in a fresh interpreter; returns the JSON object its last line prints."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], env=child_env(shim, extra_path),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-6000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (str(SHIM) in out["safetensors"]) == shim, out["safetensors"]  # the run used the intended package
    return out


# ---- transformers 5 and accelerate through the shim ----

MAKE_LLAMA = """
import json, sys, torch, safetensors
from transformers import LlamaConfig, LlamaForCausalLM
folder = sys.argv[1]
torch.manual_seed(0)
config = LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
                     num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=False)
model = LlamaForCausalLM(config).eval()
torch.save(model.state_dict(), folder + "/state.pt")
config.save_pretrained(folder)
ids = torch.randint(0, 512, (2, 12), generator=torch.Generator().manual_seed(1))
torch.save(ids, folder + "/ids.pt")
print(json.dumps({"safetensors": safetensors.__file__}))
"""

SAVE_AND_LOAD = """
import json, os, sys, torch, safetensors
from safetensors import safe_open
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
src, out = sys.argv[1], sys.argv[2]
config = LlamaConfig.from_pretrained(src)
model = LlamaForCausalLM(config).eval()
model.load_state_dict(torch.load(src + "/state.pt"))
model.save_pretrained(out + "/single")
model.save_pretrained(out + "/sharded", max_shard_size="200KB")
ids = torch.load(src + "/ids.pt")
result = {"safetensors": safetensors.__file__}
for layout in ("single", "sharded"):
    loaded = AutoModelForCausalLM.from_pretrained(out + "/" + layout)
    with torch.no_grad():
        torch.save(loaded(ids).logits, f"{out}/logits-{layout}.pt")
# get_slice(k)[...] as transformers 5 reads: a view of the file's mapping, writable (copy-on-write), and
# what is written never reaches the file.
path = out + "/single/model.safetensors"
before = open(path, "rb").read()
with safe_open(path, framework="pt") as f:
    name = f.keys()[0]
    whole = f.get_slice(name)[...]
    again = f.get_slice(name)[...]
    part = f.get_slice(name)[1:3]
maps = [line.split() for line in open("/proc/self/maps")]
def mapped_from(t):
    a = t.data_ptr()
    for m in maps:
        lo, hi = (int(x, 16) for x in m[0].split("-"))
        if lo <= a < hi:
            return m[5] if len(m) > 5 else ""
result["view_of"] = os.path.basename(mapped_from(whole))
result["part_view_of"] = os.path.basename(mapped_from(part))
result["same_memory"] = whole.data_ptr() == again.data_ptr()
whole.view(-1)[0] = 123.0
result["write_seen_by_alias"] = float(again.view(-1)[0]) == 123.0
result["file_unchanged"] = open(path, "rb").read() == before
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def llama_src(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llama-src")
    run_child(MAKE_LLAMA, folder, shim=False)
    return folder


@pytest.fixture(scope="module")
def saved(llama_src, tmp_path_factory):
    outs = {}
    for shim in (False, True):
        out = tmp_path_factory.mktemp("shim" if shim else "real")
        outs[shim] = (out, run_child(SAVE_AND_LOAD, llama_src, out, shim=shim))
    return outs


def test_save_pretrained_files_are_byte_identical(saved):
    (real, _), (ours, _) = saved[False], saved[True]
    for layout in ("single", "sharded"):
        names = sorted(p.name for p in (real / layout).iterdir())
        assert names == sorted(p.name for p in (ours / layout).iterdir())
        assert any(n.endswith(".safetensors") for n in names)
        if layout == "sharded":
            assert "model.safetensors.index.json" in names and sum(n.endswith(".safetensors") for n in names) > 1
        for n in names:
            assert filecmp.cmp(real / layout / n, ours / layout / n, shallow=False), f"{layout}/{n} differs"


def test_from_pretrained_logits_are_identical(saved):
    (real, _), (ours, _) = saved[False], saved[True]
    for layout in ("single", "sharded"):
        a = torch.load(real / f"logits-{layout}.pt")
        b = torch.load(ours / f"logits-{layout}.pt")
        assert a.shape == (2, 12, 512)
        assert torch.equal(a, b), layout


def test_get_slice_views_behave_as_the_reference(saved):
    (_, real), (_, ours) = saved[False], saved[True]
    keys = ("view_of", "part_view_of", "same_memory", "write_seen_by_alias", "file_unchanged")
    assert {k: ours[k] for k in keys} == {k: real[k] for k in keys}
    assert real["view_of"] == "model.safetensors"  # the reference's slices are views of the mapping


OFFLOAD = """
import json, sys, tempfile, torch, safetensors
from transformers import AutoModelForCausalLM
import accelerate
folder, out = sys.argv[1], sys.argv[2]
ids = torch.load(sys.argv[3])
with tempfile.TemporaryDirectory() as offload:
    model = AutoModelForCausalLM.from_pretrained(folder, device_map="auto", max_memory={"cpu": "300KB"},
                                                 offload_folder=offload)
    placed = sorted(set(model.hf_device_map.values()), key=str)
    with torch.no_grad():
        torch.save(model(ids).logits, out)
# accelerate on its own: an empty model, its checkpoint dispatched with disk offload.
with accelerate.init_empty_weights():
    empty = AutoModelForCausalLM.from_config(AutoModelForCausalLM.from_pretrained(folder).config)
with tempfile.TemporaryDirectory() as offload:
    dispatched = accelerate.load_checkpoint_and_dispatch(empty, folder, device_map="auto",
                                                         max_memory={"cpu": "300KB"}, offload_folder=offload)
    with torch.no_grad():
        torch.save(dispatched(ids).logits, out + ".dispatch")
print(json.dumps({"safetensors": safetensors.__file__, "placed": [str(p) for p in placed]}))
"""


def test_accelerate_disk_offload_gives_the_same_logits(saved, llama_src, tmp_path):
    real_dir = saved[False][0]
    expected = torch.load(real_dir / "logits-single.pt")
    for shim in (False, True):
        out = tmp_path / f"offload-{shim}.pt"
        result = run_child(OFFLOAD, real_dir / "sharded", out, llama_src / "ids.pt", shim=shim)
        assert "disk" in result["placed"], result["placed"]  # the offload happened
        assert torch.allclose(torch.load(out), expected, rtol=1e-5, atol=1e-6)
        assert torch.allclose(torch.load(str(out) + ".dispatch"), expected, rtol=1e-5, atol=1e-6)
        if shim:
            assert torch.equal(torch.load(out), torch.load(tmp_path / "offload-False.pt"))
            assert torch.equal(torch.load(str(out) + ".dispatch"), torch.load(str(tmp_path / "offload-False.pt") + ".dispatch"))


# ---- diffusers and DDUF, with the real safetensors ----

DIFFUSERS_PATH: list = []  # nothing before the venv's own diffusers

MAKE_PIPELINE = """
import json, sys, torch, safetensors, diffusers
folder, kind = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
if kind == "ddpm":
    from diffusers import DDPMPipeline, DDPMScheduler, UNet2DModel
    unet = UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(8, 16),
                       down_block_types=("DownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "UpBlock2D"),
                       norm_num_groups=4)
    pipe = DDPMPipeline(unet=unet, scheduler=DDPMScheduler(num_train_timesteps=20))
else:  # a StableDiffusion-style pipeline: its text encoder and tokenizer are transformers components
    from tokenizers import pre_tokenizers
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    for piece in alphabet + [c + "</w>" for c in alphabet]:  # every byte a token, no merges
        vocab[piece] = len(vocab)
    tokenizer = CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)
    text = CLIPTextModel(CLIPTextConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                                        num_attention_heads=4, max_position_embeddings=77, projection_dim=32,
                                        bos_token_id=0, eos_token_id=1, pad_token_id=1))
    unet = UNet2DConditionModel(block_out_channels=(8, 16), layers_per_block=1, sample_size=8, in_channels=4, out_channels=4,
                                down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=32,
                                attention_head_dim=4, norm_num_groups=4)
    vae = AutoencoderKL(block_out_channels=(8, 16), in_channels=3, out_channels=3, latent_channels=4, norm_num_groups=4,
                        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                        sample_size=16)
    pipe = StableDiffusionPipeline(unet=unet, vae=vae, text_encoder=text, tokenizer=tokenizer,
                                   scheduler=DDIMScheduler(num_train_timesteps=20), safety_checker=None,
                                   feature_extractor=None, requires_safety_checker=False)
pipe.save_pretrained(folder)
print(json.dumps({"safetensors": safetensors.__file__, "diffusers": diffusers.__version__}))
"""

RUN_PIPELINE = """
import json, sys, torch, safetensors, diffusers
from diffusers import DiffusionPipeline
folder, dduf, out, reader, kind = sys.argv[1:6]
if reader == "safeweights":
    import safeweights.dduf
    import diffusers.pipelines.pipeline_utils as pipeline_utils
    pipeline_utils.read_dduf_file = safeweights.dduf.read_dduf_file
if dduf:
    pipe = DiffusionPipeline.from_pretrained(folder, dduf_file=dduf)
else:
    pipe = DiffusionPipeline.from_pretrained(folder)
generator = torch.Generator().manual_seed(2)
if kind == "ddpm":
    images = pipe(batch_size=1, num_inference_steps=3, generator=generator, output_type="np").images
else:
    images = pipe("a photo of a cat", num_inference_steps=2, height=16, width=16, generator=generator,
                  output_type="np").images
weights = {name: getattr(pipe, name).state_dict() for name in ("unet", "vae", "text_encoder") if hasattr(pipe, name)}
ids = pipe.tokenizer("a photo of a cat").input_ids if hasattr(pipe, "tokenizer") else None
torch.save({"images": torch.from_numpy(images), "weights": weights, "ids": ids}, out)
print(json.dumps({"safetensors": safetensors.__file__, "diffusers": diffusers.__version__}))
"""


def _diffusers_loads_dduf():
    proc = subprocess.run([sys.executable, "-c", "import diffusers, diffusers.pipelines.pipeline_utils as p; "
                           "print(diffusers.__version__, hasattr(p, 'read_dduf_file'))"],
                          env=child_env(False, DIFFUSERS_PATH), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    version, loads = proc.stdout.split()
    # The clients' venv pins the last diffusers that loads DDUF; another one tests something else.
    assert loads == "True", f"diffusers {version} has no DDUF loading (removed in 0.41): tests/clients/requirements.txt pins 0.40"
    return version


@pytest.fixture(scope="module", params=["ddpm", "sd"])
def pipeline(request, tmp_path_factory):
    _diffusers_loads_dduf()
    kind = request.param
    folder = tmp_path_factory.mktemp(kind)
    run_child(MAKE_PIPELINE, folder, kind, shim=False, extra_path=DIFFUSERS_PATH)
    dduf = folder / f"{kind}.dduf"
    cli = os.environ.get("SAFEWEIGHTS_CLI", str(REPO / "build" / "safeweights"))
    proc = subprocess.run([cli, "pack", str(folder), str(dduf)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    reference = folder / "from-folder.pt"
    run_child(RUN_PIPELINE, folder, "", reference, "hub", kind, shim=False, extra_path=DIFFUSERS_PATH)
    return kind, folder, dduf, torch.load(reference)


@pytest.mark.parametrize("reader", ["hub", "safeweights"])
def test_diffusers_loads_our_dduf_with_the_real_safetensors(pipeline, reader, tmp_path):
    kind, folder, dduf, expected = pipeline
    out = tmp_path / "images.pt"
    run_child(RUN_PIPELINE, folder, dduf.name, out, reader, kind, shim=False, extra_path=DIFFUSERS_PATH)
    got = torch.load(out)
    assert list(got["weights"]) == list(expected["weights"]) and got["ids"] == expected["ids"]
    for component, state in expected["weights"].items():  # the same weights
        assert list(got["weights"][component]) == list(state), component
        assert all(torch.equal(got["weights"][component][k], v) for k, v in state.items()), component
    # The same computation on the same weights; the last bit may differ (the folder's tensors view a
    # page-aligned mapping, the archive's a bytes object: torch's kernels may take other vector paths).
    assert torch.allclose(got["images"], expected["images"], rtol=1e-5, atol=1e-6)


def test_read_dduf_file_entries_go_to_the_real_safetensors_load(pipeline):
    """What diffusers does with an entry (model_loading_utils.load_state_dict): the real
    safetensors.torch.load of what as_mmap() yields, here from our reader and the hub's."""
    import huggingface_hub

    import safetensors
    import safetensors.torch

    import safeweights.dduf

    assert "upstream_shim" not in safetensors.__file__
    _, _, dduf, _ = pipeline
    ours, hubs = safeweights.dduf.read_dduf_file(dduf), huggingface_hub.read_dduf_file(dduf)
    assert list(ours) == list(hubs)
    for name in ours:
        with ours[name].as_mmap() as mine, hubs[name].as_mmap() as theirs:
            assert type(mine) is type(theirs) and mine == theirs
        if name.endswith(".safetensors"):
            with ours[name].as_mmap() as mm:
                a = safetensors.torch.load(mm)
            with hubs[name].as_mmap() as mm:
                b = safetensors.torch.load(mm)
            assert sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a)
            with ours[name].as_memoryview() as view:  # the zero-copy form, for safeweights' own load
                assert isinstance(view, memoryview) and view == mine


# ---- safetensors.torch's names that real code imports, against the reference (same process) ----


@pytest.fixture(scope="module")
def both():
    import safetensors
    import safetensors.torch as ref

    import safeweights.torch as ours

    assert "upstream_shim" not in safetensors.__file__
    return ref, ours


def test_torch_module_defines_every_name_of_the_reference(both):
    import types

    ref, ours = both
    names = {k for k, v in vars(ref).items() if not k.startswith("__") and not isinstance(v, types.ModuleType)}
    # Not defined: typing names, the reference's module-level aliases of torch's float8/float4 dtypes
    # (torch.float8_e4m3fn and so on), and its _evaluate_tensors_for_save (_flatten_as_ptr runs the same checks).
    skipped = {"Any", "Dict", "List", "Optional", "Set", "Tuple", "Union", "_evaluate_tensors_for_save"}
    skipped |= {k for k in names if k.startswith(("_float8_", "_float4_"))}
    assert sorted(names - skipped - set(dir(ours))) == []
    for name in ("TensorSpec", "deserialize", "serialize", "serialize_file", "safe_open"):
        assert getattr(ours, name) is getattr(__import__("safeweights"), name)


def test_dtype_tables_and_getdtype_match(both):
    ref, ours = both
    assert ours._TYPES == ref._TYPES
    assert ours._SIZE == ref._SIZE
    for code in ref._TYPES:
        assert ours._getdtype(code) is ref._getdtype(code)
    for code in ("F8_E8M0", "F4", "I4", "nope"):
        with pytest.raises(KeyError):
            ref._getdtype(code)
        with pytest.raises(KeyError):
            ours._getdtype(code)


def _samples():
    g = torch.Generator().manual_seed(3)
    base = torch.randn(4, 6, generator=g)
    yield base
    yield base[1:]  # a view with an offset
    yield base.to(torch.bfloat16)
    yield base.to(torch.float16).reshape(2, 12)
    yield (base > 0)
    yield torch.randint(-100, 100, (5,), generator=g, dtype=torch.int64)
    yield torch.tensor(3.5)  # 0-d
    yield torch.zeros(0, 3)
    yield torch.complex(base, -base).to(torch.complex64)
    yield base.to(torch.float8_e4m3fn)
    yield torch.randint(0, 255, (3, 4), generator=g, dtype=torch.uint8)


def test_to_ndarray_matches(both):
    ref, ours = both
    for t in _samples():
        a, ta = ref._to_ndarray(t)
        b, tb = ours._to_ndarray(t)
        assert (b.dtype, b.shape) == (a.dtype, a.shape), t.dtype
        assert b.tobytes() == a.tobytes(), t.dtype
        assert (tb is t) == (ta is t) and type(tb) is type(ta)


def test_find_shared_tensors_matches(both):
    ref, ours = both
    w = torch.randn(6, 4)
    tied = torch.nn.Linear(4, 6)
    cases = [
        {"a": w, "b": w, "c": torch.randn(3)},  # tied
        {"a": w[:3], "b": w[3:], "c": w},  # views of one storage: the whole overlaps both halves
        {"a": w[:3], "b": w[3:]},  # disjoint views of one storage
        {"x": torch.randn(2), "y": torch.zeros(0), "z": torch.empty(3, device="meta")},
        {"weight": tied.weight, "bias": tied.bias, "also": tied.weight},
    ]
    for sd in cases:
        assert ours._find_shared_tensors(sd) == ref._find_shared_tensors(sd), list(sd)
        try:
            expected = ref._remove_duplicate_names(sd)
        except RuntimeError:  # a group with no tensor covering its storage
            with pytest.raises(RuntimeError):
                ours._remove_duplicate_names(sd)
        else:
            assert ours._remove_duplicate_names(sd) == expected, list(sd)


def test_view2torch_and_serialize_through_the_submodule_match(both):
    ref, ours = both
    sd = {f"t{i}": t.clone() for i, t in enumerate(_samples())}  # no two share memory
    data = ref.save(sd)
    assert ours.save(sd) == data
    a = ref._view2torch(ref.deserialize(data))
    b = ours._view2torch(ours.deserialize(data))
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert ref._to_ndarray(a[k])[0].tobytes() == ref._to_ndarray(b[k])[0].tobytes(), k
    keep_ref, keep_ours = [], []
    specs_ref, specs_ours = ref._flatten_as_ptr(sd, keep_ref), ours._flatten_as_ptr(sd, keep_ours)
    assert list(specs_ref) == list(specs_ours)
    for k in specs_ref:
        r, o = specs_ref[k], specs_ours[k]
        assert (o.dtype, list(o.shape), o.data_len) == (r.dtype, list(r.shape), r.data_len)
    assert bytes(ours.serialize(specs_ours)) == bytes(ref.serialize(specs_ref))


def test_load_model_returns_what_the_reference_returns(both, tmp_path):
    ref, ours = both

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(3, 3)
            self.b = self.a

    model = Tied()
    ref.save_model(model, tmp_path / "tied.safetensors")
    for strict in (True, False):
        got_ref = ref.load_model(Tied(), tmp_path / "tied.safetensors", strict=strict)
        got_ours = ours.load_model(Tied(), tmp_path / "tied.safetensors", strict=strict)
        assert got_ours == got_ref and [type(x) for x in got_ours] == [type(x) for x in got_ref]
    ref.save_file({"weight": torch.zeros(2, 3)}, tmp_path / "partial.safetensors")
    got_ref = ref.load_model(torch.nn.Linear(3, 2), tmp_path / "partial.safetensors", strict=False)
    got_ours = ours.load_model(torch.nn.Linear(3, 2), tmp_path / "partial.safetensors", strict=False)
    assert got_ours == got_ref == ({"bias"}, [])
    assert [type(x) for x in got_ours] == [type(x) for x in got_ref]


def _slice_keys():
    import random

    r = random.Random(5)
    keys = [Ellipsis, (), 0, -1, (slice(None), 1), (1, slice(1, 3)), (slice(0, 2), Ellipsis), (None, 1),
            (slice(None, None, 2), slice(1, None)), (Ellipsis, 2), slice(1, 100), (slice(-3, -1), None, slice(None))]
    for _ in range(40):
        item = []
        for n in (4, 5, 6)[: r.randint(1, 3)]:
            if r.random() < 0.3:
                item.append(r.randint(-n, n - 1))
            else:
                item.append(slice(r.choice([None, r.randint(-n, n)]), r.choice([None, r.randint(-n, n)]),
                                  r.choice([None, 1, 2, 3])))
        keys.append(tuple(item))
    return keys


def test_get_slice_gives_the_references_views(both, tmp_path):
    """Every slice under framework="pt" is what the reference gives: a view of the file's mapping at the
    same place, with the same shape and strides, writable without a warning (copy-on-write)."""
    import warnings

    import safetensors

    import safeweights

    ref, ours = both
    w = torch.randn(4, 5, 6, generator=torch.Generator().manual_seed(4))
    path = tmp_path / "s.safetensors"
    ref.save_file({"w": w, "b": torch.arange(7, dtype=torch.int32)}, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with safetensors.safe_open(path, "pt") as fr, safeweights.safe_open(path, "pt") as fo:
            base_r, base_o = fr.get_tensor("w"), fo.get_tensor("w")
            for key in _slice_keys():
                a, b = fr.get_slice("w")[key], fo.get_slice("w")[key]
                assert torch.equal(a, b), key
                assert (b.shape, b.stride(), b.is_contiguous()) == (a.shape, a.stride(), a.is_contiguous()), key
                if a.numel():  # (an empty tensor has no address)
                    assert b.data_ptr() - base_o.data_ptr() == a.data_ptr() - base_r.data_ptr(), key
                    assert b.untyped_storage().data_ptr() == base_o.untyped_storage().data_ptr(), key  # a view
            part = fo.get_slice("w")[1:3]
        part[0, 0, 0] = 42.0  # after close: the view keeps the mapping alive, and writes stay private
    assert float(part[0, 0, 0]) == 42.0
    assert torch.equal(ref.load_file(path)["w"], w)
