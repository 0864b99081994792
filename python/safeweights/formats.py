"""Any file the library reads, through its format registry: detect, validate, inspect, convert.

The format is found from the file's content (magic bytes, then structure), never from its name, and
every rule of that format is applied in C++. Paths (str, bytes, os.PathLike, as open() takes them) and
http(s):// URLs are accepted.
"""

from __future__ import annotations

from . import _safeweights

# json and typing are not imported here: `import safeweights` loads this module, and neither is needed
# until inspect() is called (the annotations stay strings; formats.pyi has the types).


def detect_format(path) -> str:
    """The file's format: "safetensors", "safetensors-index", "dduf", "pytorch" or "gguf"."""
    return _safeweights._detect_format(path)


def validate(path, *, strict: bool = False, crc: bool = True, detect: bool = False) -> str:
    """Checks every rule of the file's format; returns a one-line summary, raises on the first violation.

    ``strict`` also rejects unknown fields in safetensors tensor entries; ``crc=False`` skips the
    CRC-32 of archive members (which reads every byte). A file whose name claims another format than
    its content (``x.dduf`` holding safetensors) fails, as ``safeweights validate`` does, unless
    ``detect=True`` (the CLI's ``--detect``) says to validate it by its content alone.
    """
    _format, summary = _safeweights._validate(path, strict, crc, detect)
    return summary


def inspect(path, entry: str | None = None) -> dict:
    """What ``safeweights inspect --json`` prints, as a dict (``entry``: a DDUF .safetensors member)."""
    import json  # noqa: PLC0415 (lazy, see above)

    return json.loads(_safeweights._inspect(path, entry))


def convert(
    input,
    output,
    *,
    type: str | None = None,
    to: str | None = None,
    entry: str | None = None,
    threads: int = 0,
    dedup: bool = False,
    durable: bool = False,
    carry_metadata: bool = True,
    split_max_bytes: int = 0,
    split_max_tensors: int = 0,
    allow_unknown: bool = False,
    key: str | None = None,
    llama_version: str | None = None,
    max_position_embeddings: int = 0,
    instruct: bool = False,
    output_tensor_type: str | None = None,
    token_embedding_type: str | None = None,
    tensor_types: list | None = None,
    tensor_type_file=None,
    pure: bool = False,
    leave_output_tensor: bool = False,
    allow_requantize: bool = False,
    imatrix=None,
    include_weights: list | None = None,
    exclude_weights: list | None = None,
    override_kv: list | None = None,
    prune_layers: list | None = None,
    dry_run: bool = False,
    keep_split: bool = False,
) -> dict:
    """Converts ``input`` (any format the library reads, a Hugging Face model folder) into ``output``.

    A folder converts only with its ``config.json``: one without is refused (``InvalidModelFolder``,
    naming the file to give instead), except Meta's original download or Mistral's native layout
    (``params.json`` beside ``consolidated.*``), which converts to a transformers folder or to GGUF;
    ``llama_version``, ``max_position_embeddings`` and ``instruct`` say what its params.json does not
    (the CLI's ``--llama-version``, ``--max-position-embeddings``, ``--instruct``).

    What ``safeweights convert`` does, with the same rules: ``output``'s extension (.safetensors, .gguf,
    .safetensors.index.json) picks the format unless ``to`` names it; ``type`` ("f16", "q8_0", ...)
    as docs/GGUF.md's "Conversion" says (in a GGUF, llama.cpp's fallbacks); a Hugging Face model folder written as GGUF gets llama.cpp's
    names, metadata and tokenizer; ``dedup`` keeps one copy of PyTorch tensors that share storage;
    ``split_max_*`` cut llama.cpp's split GGUF files, or the shards of a ``*.safetensors.index.json``
    (5 GB each when not given); ``allow_unknown`` and ``key`` are for PyTorch checkpoints. The output is written
    atomically. ``type`` may also be one of llama-quantize's file types ("Q4_K_M", "IQ4_XS", or its
    number; GGUF output): each tensor then gets the type llama-quantize gives it, with its options as
    keywords (``output_tensor_type``, ``token_embedding_type``, ``tensor_types`` as (pattern, type)
    pairs, ``tensor_type_file`` a path or a list of paths of llama-quantize's --tensor-type-file
    (their entries tried after ``tensor_types``), ``pure``, ``leave_output_tensor``,
    ``allow_requantize``, ``imatrix``, ``include_weights``, ``exclude_weights``, ``override_kv`` as
    "KEY=TYPE:VALUE" strings, ``prune_layers`` as block numbers; any of them makes a name such as
    "Q8_0" the file type). ``dry_run`` decides everything and writes nothing (the CLI's ``--dry-run``:
    the report as a run would give it, ``files`` empty); ``keep_split`` cuts the output where a split
    input's files are cut (``--keep-split``). Returns {"tensors": [{"name", "from", "to", "note"}],
    "bytes_written", "files", "notes"} (``notes``: what was inferred rather than read).
    """
    mix: dict[str, object] = {}
    if output_tensor_type is not None:
        mix["output_tensor_type"] = output_tensor_type
    if token_embedding_type is not None:
        mix["token_embedding_type"] = token_embedding_type
    if tensor_types:
        mix["tensor_types"] = [tuple(p) for p in (tensor_types.items() if isinstance(tensor_types, dict) else tensor_types)]
    if tensor_type_file is not None:
        import os

        files = [tensor_type_file] if isinstance(tensor_type_file, (str, bytes, os.PathLike)) else list(tensor_type_file)
        mix["tensor_type_files"] = files
    for name, flag in (("pure", pure), ("leave_output_tensor", leave_output_tensor), ("allow_requantize", allow_requantize)):
        if flag:
            mix[name] = True
    if imatrix is not None:
        mix["imatrix"] = imatrix
    if include_weights:
        mix["include_weights"] = list(include_weights)
    if exclude_weights:
        mix["exclude_weights"] = list(exclude_weights)
    if override_kv:
        mix["override_kv"] = list(override_kv)
    if prune_layers:
        mix["prune_layers"] = [int(n) for n in prune_layers]
    return _safeweights._convert(
        input, output, type, to, entry, threads, dedup, durable, carry_metadata, split_max_bytes, split_max_tensors, allow_unknown, key,
        llama_version, max_position_embeddings, instruct, mix, dry_run, keep_split,
    )
