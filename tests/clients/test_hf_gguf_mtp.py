"""Qwen3.5, Qwen3.5-MoE and Qwen3-Next folders holding multi-token-prediction layers (`mtp.*`) -> `safeweights
convert FOLDER OUT.gguf` -> llama.cpp.

The Hub's Qwen3.5 and Qwen3-Next checkpoints carry an MTP block beside the model: `mtp.fc` [hidden, 2 hidden],
`mtp.pre_fc_norm_embedding`, `mtp.pre_fc_norm_hidden` and `mtp.norm` [hidden], and `mtp.layers.0.*`, one
full-attention decoder layer (gated query, head norms, the model's MLP or experts). transformers 5.24 has no
module for it (its classes ignore `mtp.*` on load and save none), so each folder here is one of
test_hf_gguf_qwen35.py's tiny random models, saved by transformers, with such a block added to its
model.safetensors by `add_mtp`: the shapes of the model's own full-attention layer (layer 3), in the folder's
expert layout, random values. Judged:

(a) against the pinned llama.cpp's converter run as users run it, without --no-mtp (it keeps MTP layers by
    default), on the same folder: the same tensors (name, type, shape, bytes) and keys, but for
    test_hf_gguf_moe.py's DELIBERATE_DIFFERENCES. The block is layer num_hidden_layers of the file
    (block_count counts it, nextn_predict_layers says 1, recurrent_layers padded with false), its own tensors
    blk.4.nextn.{eh_proj, enorm, hnorm, shared_head_norm}, every norm + 1;
(b) llama.cpp (llama-cpp-python) gives the logits transformers gives (the MTP layer is not on their path;
    llama.cpp loads the file with it, as it loads the converter's).

What llama.cpp's converter would write but llama.cpp cannot run is refused by name, and no file is written
(deliberate differences, docs/GGUF.md): a second MTP layer (its converter gives it no nextn tensors, and
llama.cpp's qwen35 graph asserts one), an MTP layer missing a tensor llama.cpp's loader requires for it. And
a count config.json gives for a block the weights lack is left out (as with --no-mtp), with a note: the
converter's default file then holds the count without the layer, which llama.cpp does not load.
"""

import json
import os

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")
llama_cpp = pytest.importorskip("llama_cpp")
from safetensors.torch import load_file, save_file  # noqa: E402

from gguf_helpers import edited, refused, with_weights  # noqa: E402
from test_hf_gguf_llamacpp import llama_cpp_logits, transformers_logits  # noqa: E402
from test_hf_gguf_moe import F32_TOLERANCE, IDS, REFERENCE_RUNNER, same_gguf  # noqa: E402
from test_hf_gguf_qwen35 import (NO_MTP_RUNNER, convert_cases, qwen35, qwen35_vl, qwen35moe, qwen3next, reference_files,  # noqa: E402
                                 same_bytes)

HIDDEN = 64  # test_hf_gguf_qwen35.COMMON's
LAYERS = 4   # layer 3 is full attention: the MTP layer's shapes


def add_mtp(folder, seed):
    """Adds the MTP block to `folder`'s model.safetensors (see the module's docstring)."""
    path = folder / "model.safetensors"
    weights = load_file(str(path))
    full = next(p for p in ("model.language_model.layers.3.", "model.layers.3.") if p + "input_layernorm.weight" in weights)
    assert full + "self_attn.q_proj.weight" in weights  # a full-attention layer
    shapes = {"mtp.fc.weight": (HIDDEN, 2 * HIDDEN)}
    shapes.update({f"mtp.{n}.weight": (HIDDEN,) for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm")})
    shapes.update({"mtp.layers.0." + k[len(full):]: tuple(v.shape) for k, v in weights.items() if k.startswith(full)})
    g = torch.Generator().manual_seed(seed)
    weights.update({name: 0.3 * torch.randn(shape, generator=g) for name, shape in shapes.items()})
    save_file(weights, str(path), metadata={"format": "pt"})


def edit_config(folder, edit):
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    edit(cfg)
    path.write_text(json.dumps(cfg))


def qwen35_vl_mtp(folder):
    model = qwen35_vl(folder)
    edit_config(folder, lambda cfg: cfg["text_config"].update(mtp_num_hidden_layers=1))
    return model


# case -> (maker, layouts, the MTP block added); the MoE ones in both expert layouts (the block's experts in
# the folder's). Qwen3.5 counts its block in config.json (mtp_num_hidden_layers, as released); Qwen3.5-MoE and
# Qwen3-Next here do not, and both converters count it from the weights (Qwen3-Next's configs have no key).
MAKERS = {
    "qwen35": (lambda folder: qwen35(folder, mtp_num_hidden_layers=1), ("per_expert",), True),
    "qwen35moe": (qwen35moe, ("per_expert", "fused"), True),
    "qwen3next": (qwen3next, ("per_expert", "fused"), True),
    # As released: the text model under model.language_model.*, the block at the top (mtp.*), its count in
    # text_config.
    "qwen35-vl": (qwen35_vl_mtp, ("per_expert",), True),
    # A Qwen3.5 saved by transformers: config.json counts the block its weights do not hold. Written without
    # it, as llama.cpp's converter writes with --no-mtp: by default it writes the count without the layer's
    # tensors, a file llama.cpp does not load ("tensor 'blk.4.attn_norm.weight' not found").
    "qwen35-absent": (lambda folder: qwen35(folder, mtp_num_hidden_layers=1), ("per_expert",), False),
}
TYPED = {"qwen35": ("q8_0",), "qwen35moe": ("q8_0",)}
STDERR = {}


def add_mtp_where_held(case, folder):
    if MAKERS[case][2]:
        add_mtp(folder, list(MAKERS).index(case))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """case -> {"model", layout or f"{layout}-{type}": (folder, our gguf)}, the MTP block added to the folders."""
    return convert_cases(tmp_path_factory, MAKERS, TYPED, STDERR, prepare=add_mtp_where_held)


@pytest.fixture(scope="module")
def reference(models, tmp_path_factory):
    """case -> key -> the GGUF llama.cpp's converter writes by default (MTP layers kept) from the same folder;
    with --no-mtp for a folder without the block."""
    return reference_files(models, tmp_path_factory, lambda case: REFERENCE_RUNNER if MAKERS[case][2] else NO_MTP_RUNNER)


COMPARED = [(case, key) for case, (_, layouts, _) in MAKERS.items() for layout in layouts
            for key in [layout] + [f"{layout}-{t}" for t in TYPED.get(case, ())]]
NEXTN = ["blk.4.nextn.eh_proj.weight", "blk.4.nextn.enorm.weight", "blk.4.nextn.hnorm.weight", "blk.4.nextn.shared_head_norm.weight"]


@pytest.mark.parametrize("case,key", COMPARED)
def test_tensors_and_keys_equal_llama_cpp_converter(models, reference, case, key):
    ours, theirs = models[case][key][1], reference[case][key]
    a, _, ka, _ = same_gguf(ours, theirs, same_bytes=same_bytes)
    arch = case.partition("-")[0]
    if not MAKERS[case][2]:
        assert ka[f"{arch}.block_count"][1] == LAYERS and f"{arch}.nextn_predict_layers" not in ka
        assert not [n for n in a if n.startswith("blk.4.")]
        return
    assert ka[f"{arch}.block_count"][1] == LAYERS + 1
    assert ka[f"{arch}.nextn_predict_layers"][1] == 1
    assert ka[f"{arch}.attention.recurrent_layers"][1] == [True, True, True, False, False]
    assert all(name in a for name in NEXTN)
    assert not [n for n in a if n.startswith("blk.4.ssm")]  # a full-attention layer
    assert a["blk.4.attn_q.weight"][1] == a["blk.3.attn_q.weight"][1]
    assert a["blk.4.nextn.eh_proj.weight"][1] == [2 * HIDDEN, HIDDEN]


def test_block_counted_but_not_held_is_left_out_with_a_note(models):
    assert ("note: mtp_num_hidden_layers counts 1 multi-token-prediction layer(s) the weights do not hold: written without them"
            in STDERR[("qwen35-absent", "per_expert")])
    assert "multi-token" not in STDERR[("qwen35", "per_expert")]


@pytest.mark.parametrize("case,layout", [(case, layout) for case, (_, layouts, _) in MAKERS.items() for layout in layouts])
def test_llama_cpp_logits_match_transformers(models, case, layout):
    model, (_, ours) = models[case]["model"], models[case][layout]
    want = transformers_logits(model, IDS)
    got = llama_cpp_logits(ours, IDS)
    assert np.abs(got - want).max() <= F32_TOLERANCE * np.abs(want).max()
    assert (got.argmax(-1) == want.argmax(-1)).all()


def without(name):
    return lambda weights: weights.pop(name)


def second_layer(weights):
    weights.update({k.replace("mtp.layers.0.", "mtp.layers.1."): v.clone() for k, v in list(weights.items()) if k.startswith("mtp.layers.0.")})


# (case, config.json's changes or None, an edit of the weights in place or None, the file named, the text).
REFUSED = [
    ("qwen35", {"mtp_num_hidden_layers": 2}, None, "config.json",
     "key `mtp_num_hidden_layers` is 2: llama.cpp's qwen35 runs 1 multi-token-prediction layer"),
    ("qwen3next", None, second_layer, "model.safetensors", "multi-token-prediction layer 1: llama.cpp's qwen3next runs 1"),
    ("qwen35moe", None, without("mtp.fc.weight"), "model.safetensors",
     "tensor mtp.fc.weight is missing (llama.cpp needs blk.4.nextn.eh_proj.weight)"),
    ("qwen35", None, without("mtp.layers.0.self_attn.k_norm.weight"), "model.safetensors",
     "tensor mtp.layers.0.self_attn.k_norm.weight is missing (llama.cpp needs blk.4.attn_k_norm.weight)"),
    ("qwen35", None, lambda w: w.update({"mtp.fc.bias": torch.zeros(HIDDEN)}), "model.safetensors",
     "no name in llama.cpp's qwen35 architecture"),
]


@pytest.mark.parametrize("case,edit,tensors,file,text", REFUSED)
def test_refused_by_name(models, tmp_path, case, edit, tensors, file, text):
    source = models[case]["per_expert"][0]
    folder = edited(source, tmp_path, edit) if edit else with_weights(source, tmp_path, tensors)
    err = refused(folder, tmp_path / "out.gguf")
    assert file in err and text in err, err
