"""safetensors.torch, zero-copy: save, save_file, load, load_file, save_model, load_model.

Loading with the default ``backend="mmap"`` returns tensors that view the file's mapping, mapped
copy-on-write: they are writable, an in-place update copies just the touched pages into private memory,
and the file never changes. ``tensor.clone()`` gives independent memory. ``device="cuda"`` (or
``"cuda:N"``, an int, a CUDA ``torch.device``) loads every tensor with the library's loader into one
device allocation, with no zero-copy read or per-tensor ``.to()`` on the way (docs/PYTHON.md,
"Loading"); without a CUDA device torch can use, that raises SafetensorError (kind ``DeviceError``).

Saving follows the reference's rules and messages: no sparse or non-contiguous tensors, no tensors
sharing memory (use ``save_model``, which removes the aliases and records them in the metadata).
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict
from typing import Dict, List, Optional, Set, Tuple, Union

import torch

from . import _load, _safeweights
from ._errors import SafetensorError
from ._safe_open import safe_open
from ._safeweights import TensorSpec, deserialize, serialize, serialize_file
from ._write import write


def _dtypes(pairs):
    """{key: torch dtype} for the (key, torch attribute name) pairs this torch has."""
    out = {}
    for key, attr in pairs:
        dt = getattr(torch, attr, None)
        if isinstance(dt, torch.dtype):
            out[key] = dt
    return out


# The reference module's tables, which code written for it imports (diffusers, transformers): element
# sizes by torch dtype, and torch dtypes by safetensors code (the codes the reference lists there).
_SIZE = {
    dt: torch.empty((), dtype=dt).element_size()
    for dt in _dtypes(
        (n, n)
        for n in (
            "int64", "float32", "int32", "bfloat16", "float16", "int16", "uint8", "int8", "bool", "float64", "complex64",
            "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "uint64", "uint32",
            "uint16",
        )
    ).values()
}
_SIZE.update({dt: 1 for dt in _dtypes([("f4", "float4_e2m1fn_x2")]).values()})  # two elements to a byte
_TYPES = _dtypes(
    [
        ("F64", "float64"), ("F32", "float32"), ("F16", "float16"), ("BF16", "bfloat16"), ("I64", "int64"),
        ("I32", "int32"), ("I16", "int16"), ("I8", "int8"), ("U8", "uint8"), ("BOOL", "bool"),
        ("F8_E4M3", "float8_e4m3fn"), ("F8_E4M3FNUZ", "float8_e4m3fnuz"), ("F8_E5M2", "float8_e5m2"),
        ("F8_E5M2FNUZ", "float8_e5m2fnuz"), ("C64", "complex64"), ("U64", "uint64"), ("U32", "uint32"), ("U16", "uint16"),
    ]
)


def _getdtype(dtype_str: str) -> torch.dtype:
    """The torch dtype of a safetensors code from ``_TYPES`` (KeyError for any other, as the reference)."""
    return _TYPES[dtype_str]


def _element_size(dtype) -> int:
    size = _SIZE.get(dtype)
    if size is None:
        size = _SIZE[dtype] = torch.empty((), dtype=dtype).element_size()
    return size


def _to_ndarray(tensor: torch.Tensor):
    """``(uint8 array, tensor)``: the array views the bytes of ``tensor`` (moved to the CPU first), its
    element count times its element size from its first byte, and ``tensor`` keeps them alive. A
    tensor with no memory gives ``(numpy.empty(0), 0)``. The reference's helper, which diffusers'
    remote utilities import."""
    import ctypes  # noqa: PLC0415

    import numpy as np  # noqa: PLC0415

    if tensor.device.type != "cpu":
        tensor = tensor.to("cpu")
    nbytes = tensor.nelement() * _element_size(tensor.dtype)
    address = tensor.data_ptr()
    if address == 0:
        return np.empty(0), 0
    data = np.ctypeslib.as_array(ctypes.cast(address, ctypes.POINTER(ctypes.c_ubyte)), (nbytes,))
    if sys.byteorder == "big":  # the file is little-endian: swap each element (each half of a complex)
        width = _element_size(tensor.dtype) // (2 if tensor.dtype.is_complex else 1)
        data = data.view(f"u{width}").byteswap(inplace=False) if width > 1 else data
    return data, tensor


def _view2torch(safeview) -> Dict[str, torch.Tensor]:
    """Tensors from ``deserialize``'s ``[(name, {"dtype", "shape", "data"})]``, viewing each ``data``."""
    out = {}
    for name, info in safeview:
        dtype = _getdtype(info["dtype"])
        if len(info["data"]) == 0:
            t = torch.empty(info["shape"], dtype=dtype)
        else:
            t = torch.frombuffer(info["data"], dtype=dtype).reshape(info["shape"])
        if sys.byteorder == "big":
            t = torch.from_numpy(t.numpy().byteswap(inplace=False))
        out[name] = t
    return out


def storage_ptr(tensor: torch.Tensor) -> int:
    try:
        return tensor.untyped_storage().data_ptr()
    except (AttributeError, NotImplementedError, RuntimeError):
        try:
            return tensor.storage().data_ptr()  # torch < 2.0
        except NotImplementedError:
            return 0  # fake tensors and the like have no storage


def _end_ptr(tensor: torch.Tensor) -> int:
    if tensor.nelement():
        return tensor.view(-1)[-1].data_ptr() + _element_size(tensor.dtype)
    return tensor.data_ptr()


def storage_size(tensor: torch.Tensor) -> int:
    try:
        return tensor.untyped_storage().nbytes()
    except (AttributeError, NotImplementedError, RuntimeError):
        try:
            return tensor.storage().size() * _element_size(tensor.dtype)  # torch < 2.0
        except NotImplementedError:
            return tensor.nelement() * _element_size(tensor.dtype)


def _filter_shared_not_shared(tensors: List[Set[str]], state_dict: Dict[str, torch.Tensor]) -> List[Set[str]]:
    """Splits each group of names on one storage into sets whose byte areas actually overlap."""
    filtered = []
    for shared in tensors:
        if len(shared) < 2:
            filtered.append(shared)
            continue
        areas = sorted((state_dict[name].data_ptr(), _end_ptr(state_dict[name]), name) for name in shared)
        _, last_stop, last_name = areas[0]
        filtered.append({last_name})
        for start, stop, name in areas[1:]:
            if start >= last_stop:
                filtered.append({name})
            else:
                filtered[-1].add(name)
            last_stop = max(last_stop, stop)
    return filtered


def _find_shared_tensors(state_dict: Dict[str, torch.Tensor]) -> List[Set[str]]:
    groups = defaultdict(set)
    for name, v in state_dict.items():
        if v.device != torch.device("meta") and storage_ptr(v) != 0 and storage_size(v) != 0:
            groups[(v.device, storage_ptr(v), storage_size(v))].add(name)
    # The groups are disjoint, so the reference's sorted() of them keeps first-seen order: so do we.
    return _filter_shared_not_shared(list(groups.values()), state_dict)


def _is_complete(tensor: torch.Tensor) -> bool:
    return tensor.data_ptr() == storage_ptr(tensor) and tensor.nelement() * _element_size(tensor.dtype) == storage_size(tensor)


def _remove_duplicate_names(
    state_dict: Dict[str, torch.Tensor],
    *,
    preferred_names: Optional[List[str]] = None,
    discard_names: Optional[List[str]] = None,
) -> Dict[str, List[str]]:
    preferred = set(preferred_names or [])
    discard = set(discard_names or [])
    to_remove = defaultdict(list)
    for shared in _find_shared_tensors(state_dict):
        complete = {name for name in shared if _is_complete(state_dict[name])}
        if not complete:
            raise RuntimeError(
                "Error while trying to find names to remove to save state dict, but found no suitable name to keep"
                f" for saving amongst: {shared}. None is covering the entire storage. Refusing to save/load the"
                " model since you could be storing much more memory than needed. Please refer to"
                " https://huggingface.co/docs/safetensors/torch_shared_tensors for more information. Or open an"
                " issue."
            )
        keep_name = sorted(complete)[0]
        not_discarded = sorted(complete - discard)
        if not_discarded:
            keep_name = not_discarded[0]
        kept_preferred = sorted(complete & preferred)
        if kept_preferred:
            keep_name = kept_preferred[0]
        for name in sorted(shared):
            if name != keep_name:
                to_remove[keep_name].append(name)
    return to_remove


def _flatten(tensors: Dict[str, torch.Tensor]):
    if not isinstance(tensors, dict):
        raise ValueError(f"Expected a dict of [str, torch.Tensor] but received {type(tensors)}")
    invalid = []
    for k, v in tensors.items():
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"Key `{k}` is invalid, expected torch.Tensor but received {type(v)}")
        if v.layout != torch.strided:
            invalid.append(k)
    if invalid:
        raise ValueError(
            f"You are trying to save a sparse tensors: `{invalid}` which this library does not support."
            " You can make it a dense tensor before saving with `.to_dense()` but be aware this might"
            " make a much larger file than needed."
        )
    failing = [names for names in _find_shared_tensors(tensors) if len(names) > 1]
    if failing:
        raise RuntimeError(
            f"""
            Some tensors share memory, this will lead to duplicate memory on disk and potential differences when loading them again: {failing}.
            A potential way to correctly save your model is to use `save_model`.
            More information at https://huggingface.co/docs/safetensors/torch_shared_tensors
            """
        )
    specs, keep = {}, []
    for name, v in tensors.items():
        if not v.is_contiguous():
            raise ValueError(
                f"You are trying to save a non contiguous tensor: `{name}` which is not allowed. It either means you"
                " are trying to save tensors which are reference of each other in which case it's recommended to save"
                " only the full tensors, and reslice at load time, or simply call `.contiguous()` on your tensor to"
                " pack it before saving."
            )
        if v.device.type != "cpu":
            v = v.to("cpu")  # meta tensors raise torch's own error here, as in the reference
        # A lazy conjugate (t.conj()) or negative (t.conj().imag, torch._neg_view) view shares the
        # memory of its source and holds only a flag: the values are the resolved ones, copied here.
        v = v.resolve_conj().resolve_neg()
        keep.append(v)
        specs[name] = _safeweights.TensorSpec(
            dtype=str(v.dtype).split(".")[-1],
            shape=list(v.shape),
            data_ptr=v.data_ptr(),
            data_len=v.nelement() * _element_size(v.dtype),
        )
    return specs, keep


def _flatten_as_ptr(tensors: Dict[str, torch.Tensor], keep_alive_buffer: List) -> Dict[str, "TensorSpec"]:
    """The reference's helper: a TensorSpec per tensor, checked as save checks them; what the specs
    point into is appended to ``keep_alive_buffer``, which the caller holds until serialize returns."""
    specs, keep = _flatten(tensors)
    keep_alive_buffer.extend(keep)
    return specs


def save(tensors: Dict[str, torch.Tensor], metadata: Optional[Dict[str, str]] = None) -> bytes:
    """The safetensors file for these tensors, as bytes."""
    return write(_flatten(tensors), metadata)


def save_file(
    tensors: Dict[str, torch.Tensor],
    filename: Union[str, os.PathLike],
    metadata: Optional[Dict[str, str]] = None,
) -> None:
    """Writes the tensors to ``filename`` atomically (a temporary file renamed into place)."""
    write(_flatten(tensors), metadata, filename)


def load(data: bytes) -> Dict[str, torch.Tensor]:
    """The tensors of a safetensors file held in memory (copies: torch tensors are always writable)."""
    handle = _safeweights._SafeFile.from_buffer(data)
    try:
        f = safe_open._from_handle(handle, "pt")
        return {name: f.get_tensor(name).clone() for name in handle.offset_keys()}
    finally:
        handle.close()


def load_file(
    filename: Union[str, os.PathLike],
    device: Union[str, int, "torch.device"] = "cpu",
    *,
    backend: str = "mmap",
    shard: Optional[Tuple[int, int, int]] = None,
    process_group=None,
    timeout=None,
) -> Dict[str, torch.Tensor]:
    """Every tensor of the file, in file order: zero-copy on the CPU; on a CUDA device, loaded by the
    library's loader into one device allocation (no per-tensor copy through the CPU).

    ``shard=(dim, rank, world)`` loads only this rank's part of every tensor with more than ``dim``
    dimensions and at least ``world`` rows along ``dim`` (split as ``numpy.array_split`` / ``torch.tensor_split``
    do); the other tensors are loaded whole. Only the part's bytes are read, so N processes each read
    1/N of the model. Sharded tensors are copies (in one allocation), on the CPU too.

    ``process_group`` (a torch.distributed group, or ``torch.distributed.group.WORLD``) makes it a group
    load, called by every rank of the group: each rank reads a disjoint part of the bytes the group needs
    and the rest arrives through the group's collectives (broadcasts), so the group reads every needed
    byte once; with ``shard``, each rank still ends with its own part. The tensors are then copies in one
    allocation on ``device``. ``timeout`` (seconds or a timedelta; default 30 minutes) bounds every
    collective. A failure on any rank raises on every rank.
    """
    if process_group is not None:
        return _group_load_file(filename, device, backend, shard, process_group, timeout)[0]
    if timeout is not None:
        raise ValueError("timeout bounds a group load's collectives: it needs process_group")
    with safe_open(filename, framework="pt", device=device, backend=backend) as f:
        if shard is not None:
            return f._load(shard=shard)
        return f.get_tensors()


def _group_load_file(filename, device, backend, shard, process_group, timeout):
    """(tensors, the load's stats: read_bytes, shared_bytes, received_bytes) of load_file's group load."""

    def plan():
        with safe_open(filename, framework="pt", device=device, backend=backend) as f:
            return f._handle.plan_load(None, _load.check_shard(shard))  # the plan keeps the file open

    return _load.group_load(plan, device, process_group, timeout, os.fspath(filename))


def _group_load_tensors(filename, device, shard, allow_unknown, key, process_group, timeout):
    """(tensors, stats) of load_tensors' group load."""

    def plan():
        tensors = _safeweights._TensorSet.open(os.fspath(filename), allow_unknown, key)
        return tensors.plan_load(None, _load.check_shard(shard))

    return _load.group_load(plan, device, process_group, timeout, os.fspath(filename))


def load_tensors(
    filename: Union[str, os.PathLike],
    device: Union[str, int, "torch.device"] = "cpu",
    *,
    shard: Optional[Tuple[int, int, int]] = None,
    allow_unknown: bool = False,
    key: Optional[str] = None,
    process_group=None,
    timeout=None,
) -> Dict[str, torch.Tensor]:
    """Every tensor of a file in any supported format (safetensors, a sharded index, GGUF, a PyTorch
    checkpoint read without running its pickle) loaded by the library's loader into one allocation on
    ``device``, in the file's order. Quantized GGUF tensors have no torch dtype: a file holding one raises
    SafetensorError (``safeweights convert`` dequantizes). ``shard`` as in load_file.

    PyTorch checkpoints, as the CLI's ``--allow-unknown`` and ``--key``: ``allow_unknown=True`` keeps
    globals outside the allowlist (a training checkpoint's extra state) as inert placeholders instead of
    refusing the file (modules such as ``os`` or ``subprocess`` stay refused); ``key`` reads the tensors
    under that top-level key. ``process_group`` and ``timeout`` as in load_file."""
    if process_group is not None:
        return _group_load_tensors(filename, device, shard, allow_unknown, key, process_group, timeout)[0]
    if timeout is not None:
        raise ValueError("timeout bounds a group load's collectives: it needs process_group")
    tensors = _safeweights._TensorSet.open(os.fspath(filename), allow_unknown, key)
    return _load.load_plan(tensors.plan_load(None, _load.check_shard(shard)), device)


def save_model(
    model: torch.nn.Module, filename: str, metadata: Optional[Dict[str, str]] = None, force_contiguous: bool = True
):
    """Saves a model's state dict, dropping tensors that alias another (tied weights) and recording each
    alias in the metadata as ``{removed: kept}``."""
    state_dict = model.state_dict()
    to_removes = _remove_duplicate_names(state_dict)
    for kept_name, to_remove_group in to_removes.items():
        for to_remove in to_remove_group:
            if metadata is None:
                metadata = {}
            if to_remove not in metadata:
                metadata[to_remove] = kept_name  # never override what the caller put there
            del state_dict[to_remove]
    if force_contiguous:
        state_dict = {k: v.contiguous() for k, v in state_dict.items()}
    try:
        save_file(state_dict, filename, metadata=metadata)
    except ValueError as e:
        msg = str(e)
        msg += " Or use save_model(..., force_contiguous=True), read the docs for potential caveats."
        raise ValueError(msg) from e


def load_model(
    model: torch.nn.Module,
    filename: Union[str, os.PathLike],
    strict: bool = True,
    device: Union[str, int, "torch.device"] = "cpu",
    *,
    backend: str = "mmap",
) -> Tuple[Set[str], List[str]]:
    """Loads a file written by save_model into ``model``; returns (missing, unexpected) names: a set and
    a list, as the reference."""
    state_dict = load_file(filename, device=device, backend=backend)
    model_state_dict = model.state_dict()
    to_removes = _remove_duplicate_names(model_state_dict, preferred_names=list(state_dict.keys()))
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    missing = set(missing)
    for to_remove_group in to_removes.values():
        for to_remove in to_remove_group:
            if to_remove not in missing:
                unexpected.append(to_remove)
            else:
                missing.remove(to_remove)
    if strict and (missing or unexpected):
        missing_keys = ", ".join([f'"{k}"' for k in sorted(missing)])
        unexpected_keys = ", ".join([f'"{k}"' for k in sorted(unexpected)])
        error = f"Error(s) in loading state_dict for {model.__class__.__name__}:"
        if missing:
            error += f"\n    Missing key(s) in state_dict: {missing_keys}"
        if unexpected:
            error += f"\n    Unexpected key(s) in state_dict: {unexpected_keys}"
        raise RuntimeError(error)
    return missing, unexpected


__all__ = [
    "save", "save_file", "load", "load_file", "load_tensors", "save_model", "load_model", "storage_ptr", "storage_size",
    "SafetensorError", "TensorSpec", "deserialize", "safe_open", "serialize", "serialize_file",
]
