"""Hand-built pickles and checkpoint containers, byte by byte (never by pickling real objects), for the
PyTorch reader's tests: hostile payloads, the malformed corpus (one file per rule, with the error kind
the reader must report) and the fuzz seeds. No torch needed.

    python3 pickles.py --corpus DIR   writes the malformed corpus and an `expected` file (name<TAB>kind)
    python3 pickles.py --seeds DIR    writes the pickle fuzz target's seeds (raw pickles)
"""
import io
import os
import struct
import sys
import tarfile
import zipfile

PROTO2 = b"\x80\x02"


def glob(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def s(text):
    data = text.encode() if isinstance(text, str) else text
    return b"X" + struct.pack("<I", len(data)) + data


def i(value):
    if 0 <= value < 256:
        return b"K" + bytes([value])
    if -(2 ** 31) <= value < 2 ** 31:
        return b"J" + struct.pack("<i", value)
    raw = value.to_bytes(9, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def tup(*items):
    return b"(" + b"".join(items) + b"t"


def storage_pid(type_name="FloatStorage", key="0", numel=4, legacy_view=None, legacy=False):
    items = [s("storage"), glob("torch", type_name), s(key), s("cpu"), i(numel)]
    if legacy:
        items.append(b"N" if legacy_view is None else legacy_view)
    return tup(*items) + b"Q"


def tensor(pid, offset=0, size=(4,), stride=(1,), rebuild="_rebuild_tensor_v2", extra=b""):
    args = [pid, i(offset), tup(*[i(v) for v in size]), tup(*[i(v) for v in stride])]
    if rebuild != "_rebuild_tensor":
        args += [b"\x89", glob("collections", "OrderedDict") + b")R"]
    if extra:
        args.append(extra)  # _rebuild_tensor_v2's metadata
    return glob("torch._utils", rebuild) + tup(*args) + b"R"


def state_dict(*entries):
    """entries: (key bytes, value bytes) pairs -> a dict pickle body (no PROTO/STOP)."""
    body = b"}(" + b"".join(k + v for k, v in entries) + b"u"
    return body


def pickle(body):
    return PROTO2 + body + b"."


def one_tensor(**kw):
    return pickle(state_dict((s("w"), tensor(storage_pid(), **kw))))


def torch_zip(data_pkl, storages=None, root="archive", extra=None, byteorder=b"little"):
    """A torch.save-style archive: <root>/data.pkl first, then data/<key>, byteorder, version."""
    storages = {"0": struct.pack("<4f", 1, 2, 3, 4)} if storages is None else storages
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{root}/data.pkl", data_pkl)
        for key, data in storages.items():
            z.writestr(f"{root}/data/{key}", data)
        if byteorder is not None:
            z.writestr(f"{root}/byteorder", byteorder)
        z.writestr(f"{root}/version", b"3\n")
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return buf.getvalue()


def torchscript_zip():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("m/data/0", struct.pack("<4f", 1, 2, 3, 4))
        z.writestr("m/data.pkl", one_tensor())
        z.writestr("m/code/__torch__/m.py", b"class M(Module):\n  pass\n" * 8, compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("m/constants.pkl", pickle(b")"))
    return buf.getvalue()


def zip_of(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


LEGACY_MAGIC = PROTO2 + b"\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little") + b"."
LEGACY_PROTOCOL = PROTO2 + b"M\xe9\x03."
LEGACY_SYS_INFO = pickle(b"}(" + s("protocol_version") + b"M\xe9\x03" + s("little_endian") + b"\x88u")


def legacy(obj_pickle, storages=(("1", 4, struct.pack("<4f", 1, 2, 3, 4)),), keys=None):
    """The legacy stream: magic, protocol, sys_info, the object, the key list, the storages."""
    keys = [k for k, _, _ in storages] if keys is None else keys
    out = LEGACY_MAGIC + LEGACY_PROTOCOL + LEGACY_SYS_INFO + obj_pickle
    out += pickle(b"](" + b"".join(s(k) for k in keys) + b"e")  # EMPTY_LIST, APPENDS: as torch writes it (its weights-only unpickler has no LIST)
    for _, count, data in storages:
        out += struct.pack("<q", count) + data
    return out


def legacy_tensor_dict():
    return pickle(state_dict((s("w"), tensor(storage_pid(key="1", legacy=True)))))


# --- hostile payloads: each would run `touch CANARY` if a real unpickler loaded it ----------------------

def hostile_payloads(canary):
    cmd = s(f"touch {canary}")
    call = lambda module, name: glob(module, name) + tup(cmd) + b"R"  # noqa: E731
    w = s("w")
    good = tensor(storage_pid())
    return {
        # name: (pickle bytes, the text the error must name)
        "os_system": (pickle(call("os", "system")), "os.system"),
        "posix_system": (pickle(call("posix", "system")), "posix.system"),
        "builtins_eval": (pickle(glob("__builtin__", "eval") + tup(s(f"open('{canary}','w')")) + b"R"), "builtins.eval"),
        "builtins_exec": (pickle(glob("builtins", "exec") + tup(s(f"open('{canary}','w')")) + b"R"), "builtins.exec"),
        "subprocess_popen": (pickle(glob("subprocess", "Popen") + tup(b"(" + s("touch") + s(canary) + b"l") + b"R"), "subprocess.Popen"),
        "inst": (pickle(b"(" + cmd + b"ios\nsystem\n"), "INST"),
        "obj": (pickle(b"(" + glob("collections", "OrderedDict") + b"o"), "OBJ"),
        "stack_global": (pickle(b"\x8c\x02os\x94\x8c\x06system\x94\x93" + tup(cmd) + b"R"), "os.system"),
        # The module and name arrive as harmless strings memoised and popped, are fetched back with
        # BINGET and composed with STACK_GLOBAL: refused there, however the strings were made.
        "memo_binget": (pickle(b"}" + s("os") + b"q\x010" + s("system") + b"q\x020" + w + b"h\x01h\x02\x93" + tup(cmd) + b"Rs"), "os.system"),
        # A refused global memoised straight away never gets as far as the memo.
        "memo_global": (pickle(b"}" + glob("os", "system") + b"q\x010" + w + b"h\x01" + tup(cmd) + b"Rs"), "os.system"),
        "unknown_module_value": (pickle(state_dict((w, good), (s("cfg"), glob("mymodule", "Config"))))  , "mymodule.Config"),
        "reduce_inside_state_dict": (pickle(state_dict((w, good), (s("x"), call("os", "system")))), "os.system"),
        "newobj": (pickle(glob("collections", "OrderedDict") + b")\x81"), "NEWOBJ"),
        "ext1": (pickle(b"\x82\x01"), "EXT1"),
        "build_on_tensor": (pickle(state_dict((w, good + b"}b"))), "BUILD"),
    }


def hostile_legacy(canary):
    return legacy(pickle(state_dict((s("w"), glob("os", "system") + tup(s(f"touch {canary}")) + b"R"))), storages=())


# --- the malformed corpus: file name -> (bytes, expected error kind, expected rule code) ---------------

def malformed_corpus():
    """file name -> (bytes, error kind, rule code (ErrorRule, docs/PYTORCH.md)[, text the message must contain])"""
    w = s("w")
    f32 = struct.pack("<4f", 1, 2, 3, 4)
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w", format=tarfile.USTAR_FORMAT) as t:
        info = tarfile.TarInfo("sys_info")
        info.size = 2
        t.addfile(info, io.BytesIO(b"{}"))
    c = {
        "truncated_pickle.pt": (torch_zip(one_tensor()[:-5]), "InvalidPickle", "pytorch.pickle-truncated"),
        "unknown_opcode.pt": (torch_zip(pickle(b"\xff")), "InvalidPickle", "pytorch.pickle-opcode"),
        "binget_missing.pt": (torch_zip(pickle(b"h\x07")), "InvalidPickle", "pytorch.pickle-stack"),
        "setitems_odd.pt": (torch_zip(pickle(b"}(" + w + b"u")), "InvalidPickle", "pytorch.pickle-stack"),
        "setitem_on_list.pt": (torch_zip(pickle(b"]" + w + w + b"s")), "UnsafePickle", "pytorch.call-refused"),
        "append_on_dict.pt": (torch_zip(pickle(b"}" + w + b"a")), "UnsafePickle", "pytorch.call-refused"),
        "huge_string_length.pt": (torch_zip(pickle(b"X\xff\xff\xff\xff")), "ResourceLimit", "pytorch.limit"),
        "deep_marks.pt": (torch_zip(pickle(b"(" * 70000)), "ResourceLimit", "pytorch.limit"),
        "stop_two_values.pt": (torch_zip(PROTO2 + b"NN."), "InvalidPickle", "pytorch.pickle-stack"),
        "protocol_6.pt": (torch_zip(b"\x80\x06N."), "InvalidPickle", "pytorch.pickle-protocol"),
        "pid_not_storage.pt": (torch_zip(pickle(state_dict((w, tup(s("other")) + b"Q")))), "InvalidPickle", "pytorch.pickle-arguments"),
        "numel_vs_record.pt": (torch_zip(one_tensor(), {"0": f32[:12]}), "InvalidCheckpoint", "pytorch.storage"),
        "stride_out_of_bounds.pt": (torch_zip(one_tensor(size=(2, 2), stride=(3, 1))), "InvalidCheckpoint", "pytorch.tensor-bounds"),
        "offset_out_of_bounds.pt": (torch_zip(one_tensor(offset=1)), "InvalidCheckpoint", "pytorch.tensor-bounds"),
        "stride_overflow.pt": (torch_zip(one_tensor(size=(2, 2), stride=(2 ** 62, 1))), "InvalidCheckpoint", "pytorch.tensor-bounds"),
        "size_stride_lengths.pt": (torch_zip(one_tensor(size=(2, 2), stride=(1,))), "InvalidPickle", "pytorch.pickle-arguments"),
        "rank_65.pt": (torch_zip(one_tensor(size=(1,) * 65, stride=(1,) * 65)), "ResourceLimit", "pytorch.limit"),
        "negative_size.pt": (torch_zip(one_tensor(size=(-1,), stride=(1,))), "InvalidPickle", "pytorch.pickle-arguments"),
        "missing_record.pt": (torch_zip(one_tensor(), {}), "InvalidCheckpoint", "pytorch.storage"),
        "byteorder_middle.pt": (torch_zip(one_tensor(), byteorder=b"middle"), "InvalidCheckpoint", "pytorch.container"),
        "key_two_types.pt": (torch_zip(pickle(state_dict((w, tensor(storage_pid())),
                                                          (s("v"), tensor(storage_pid("IntStorage")))))), "InvalidCheckpoint", "pytorch.storage"),
        "duplicate_name.pt": (torch_zip(pickle(state_dict((w, tensor(storage_pid())), (w, tensor(storage_pid()))))), "InvalidCheckpoint", "pytorch.object",
                              "key `w` appears twice in one pickled dict; torch.load would keep the last one"),
        "self_containing_list.pt": (torch_zip(pickle(b"}" + w + b"]q\x00h\x00as")), "InvalidCheckpoint", "pytorch.object"),
        "member_outside_root.pt": (torch_zip(one_tensor(), extra={"elsewhere/x": b"1"}), "InvalidCheckpoint", "pytorch.container"),
        "torchscript.pt": (torch_zip(one_tensor(), extra={"archive/constants.pkl": pickle(b")")}), "NotSupported", "pytorch.archive-kind"),
        # torch.jit.save's layout: storages first, data.pkl after, code/ compressed.
        "torchscript_compressed.pt": (torchscript_zip(), "NotSupported", "pytorch.archive-kind", "TorchScript"),
        "quantized.pt": (torch_zip(pickle(state_dict((w, glob("torch._utils", "_rebuild_qtensor") + b")R")))), "NotSupported", "pytorch.tensor-kind"),
        "conj_bit.pt": (torch_zip(one_tensor(extra=b"}(" + s("conj") + b"\x88u")), "NotSupported", "pytorch.tensor-kind"),
        "complex128_storage.pt": (torch_zip(pickle(state_dict((w, tensor(storage_pid("ComplexDoubleStorage")))))), "NotSupported", "pytorch.tensor-kind"),
        "legacy_count_mismatch.pt": (legacy(legacy_tensor_dict(), storages=(("1", 3, f32),)), "InvalidCheckpoint", "pytorch.storage"),
        "legacy_truncated_storage.pt": (legacy(legacy_tensor_dict(), storages=(("1", 4, f32[:8]),)), "InvalidCheckpoint", "pytorch.storage"),
        "legacy_unlisted_storage.pt": (legacy(legacy_tensor_dict(), storages=()), "InvalidCheckpoint", "pytorch.storage"),
        "legacy_bad_protocol.pt": (LEGACY_MAGIC + PROTO2 + b"M\xea\x03." + b"\0" * 16, "InvalidCheckpoint", "pytorch.container"),
        "tar_format.pt": (tar.getvalue(), "NotSupported", "pytorch.archive-kind"),
        # Each level is a dict holding the level below twice: 2^40 paths, bounded by the visit limit.
        "shared_dag_blowup.pt": (torch_zip(pickle(b"}q\x000" + b"".join(
            b"}q" + bytes([k + 1]) + s("a") + b"h" + bytes([k]) + b"s" + s("b") + b"h" + bytes([k]) + b"s0"
            for k in range(40)) + b"h\x28")), "ResourceLimit", "pytorch.limit"),
        "preview_pytorch1.pt": (b"PYTORCH1" + bytes(64), "NotSupported", "pytorch.archive-kind"),
        # Limits: 1,048,576 values on the stack; 4,194,304 memo entries; 64 levels of containers.
        "stack_limit.pt": (torch_zip(pickle(b"N" * ((1 << 20) + 1))), "ResourceLimit", "pytorch.limit", "limit on stack depth"),
        "memo_limit.pt": (torch_zip(pickle(b"N" + b"\x94" * ((1 << 22) + 1))), "ResourceLimit", "pytorch.limit", "limit on memo entries"),
        "nesting_65.pt": (torch_zip(pickle((b"}(" + w) * 65 + tensor(storage_pid()) + b"u" * 65)), "ResourceLimit", "pytorch.limit", "nested more than 64 deep"),
        # Malformed opcodes and arguments.
        "pop_mark_without_mark.pt": (torch_zip(pickle(b"N1")), "InvalidPickle", "pytorch.pickle-stack", "no MARK to pop to"),
        "stack_global_ints.pt": (torch_zip(pickle(b"K\x01K\x02\x93")), "InvalidPickle", "pytorch.pickle-arguments", "STACK_GLOBAL of non-strings"),
        "reduce_on_int.pt": (torch_zip(pickle(b"K\x01)R")), "UnsafePickle", "pytorch.call-refused", "REDUCE on a value that is not a global"),
        "reduce_args_not_tuple.pt": (torch_zip(pickle(glob("collections", "OrderedDict") + b"K\x01R")), "InvalidPickle", "pytorch.pickle-arguments", "REDUCE arguments are not a tuple"),
        "dict_odd.pt": (torch_zip(pickle(b"(" + w + b"d")), "InvalidPickle", "pytorch.pickle-stack", "DICT with an odd number of items"),
        "ext2.pt": (torch_zip(pickle(b"\x83\x01\x00")), "UnsafePickle", "pytorch.opcode-refused", "opcode EXT2"),
        "ext4.pt": (torch_zip(pickle(b"\x84\x01\x00\x00\x00")), "UnsafePickle", "pytorch.opcode-refused", "opcode EXT4"),
        "persid_text.pt": (torch_zip(pickle(b"P0\n")), "UnsafePickle", "pytorch.opcode-refused", "opcode PERSID"),
        "frame_past_end.pt": (torch_zip(b"\x80\x04\x95" + struct.pack("<Q", 100) + b"N."), "InvalidPickle", "pytorch.pickle-truncated", "FRAME longer than the pickle"),
        # Checkpoint rules.
        "name_not_utf8.pt": (torch_zip(pickle(state_dict((b"\x8c\x01\xff", tensor(storage_pid()))))), "InvalidCheckpoint", "pytorch.object", "not valid UTF-8"),
        "zip_without_data_pkl.pt": (zip_of({"archive/data/0": f32, "archive/version": b"3\n"}), "InvalidCheckpoint", "pytorch.container", "no archive/data.pkl"),
        "legacy_sys_info_not_dict.pt": (LEGACY_MAGIC + LEGACY_PROTOCOL + pickle(b"N") + legacy_tensor_dict(), "InvalidCheckpoint", "pytorch.container", "sys_info is not a dict"),
        "legacy_keys_not_list.pt": (LEGACY_MAGIC + LEGACY_PROTOCOL + LEGACY_SYS_INFO + legacy_tensor_dict() + pickle(b"N"), "InvalidCheckpoint", "pytorch.container", "key list is not a list"),
        "legacy_key_not_str.pt": (LEGACY_MAGIC + LEGACY_PROTOCOL + LEGACY_SYS_INFO + legacy_tensor_dict() + pickle(b"(K\x01l"), "InvalidCheckpoint", "pytorch.container", "storage key is not a string"),
        # _rebuild_tensor_v3 names its dtype; over a typed storage of another dtype the two disagree.
        "v3_dtype_vs_storage.pt": (torch_zip(pickle(state_dict((w, glob("torch._utils", "_rebuild_tensor_v3") + tup(
            storage_pid(), i(0), tup(i(4)), tup(i(1)), b"\x89", glob("collections", "OrderedDict") + b")R",
            glob("torch", "int32")) + b"R")))), "InvalidCheckpoint", "pytorch.storage", "dtype differs from its typed storage"),
    }
    c.update(issue28_corpus())
    return c


def legacy_pid(key, view=None, numel=6):
    """A legacy persistent id of a 6-element FloatStorage, optionally a view (view_key, offset, size)."""
    v = None if view is None else tup(s(view[0]), i(view[1]), i(view[2]))
    return storage_pid(key=key, numel=numel, legacy=True, legacy_view=v)


F6 = struct.pack("<6f", 0, 1, 2, 3, 4, 5)


def legacy_views(*entries, keys=None, storages=(("0", 6, F6),)):
    """A legacy checkpoint of 3-element tensors: entries are (name, persistent id)."""
    return legacy(pickle(state_dict(*[(s(n), tensor(pid, size=(3,))) for n, pid in entries])), storages=storages, keys=keys)


def issue28_corpus():
    """Odd files torch reads otherwise than they state (issue 28): refused, naming the rule."""
    w = s("w")
    ambiguous = "(ambiguous legacy view key)"
    pkl_rule = "torch.load reads the pickle only as <root>/data.pkl, one folder deep, where <root> is the first member's folder"
    f32 = struct.pack("<4f", 1, 2, 3, 4)
    return {
        # One view key, two views: torch.load binds the key on first sight and gives `b` the bytes of `a`.
        "legacy_view_key_reused.pt": (legacy_views(("a", legacy_pid("0", ("v", 0, 3))), ("b", legacy_pid("0", ("v", 3, 3)))),
                                      "InvalidCheckpoint", "pytorch.storage",
                                      "legacy storage view `v` is declared as `0` elements [3, 6) and before as `0` elements [0, 3); "
                                      "torch.load would read both as the first " + ambiguous),
        # A view key that is a root key: torch.load gives that storage, whole.
        "legacy_view_key_is_storage_key.pt": (legacy_views(("a", legacy_pid("0")), ("b", legacy_pid("1", ("0", 3, 3)))),
                                              "InvalidCheckpoint", "pytorch.storage",
                                              "legacy storage view key `0` is also a storage key; torch.load would give storage `0` for it, "
                                              "not `1` elements [3, 6) " + ambiguous),
        "legacy_view_key_is_own_key.pt": (legacy_views(("a", legacy_pid("0", ("0", 3, 3)))), "InvalidCheckpoint", "pytorch.storage",
                                          "legacy storage view key `0` is also a storage key; torch.load would give storage `0` for it, "
                                          "not `0` elements [3, 6) " + ambiguous),
        # A storage key first bound as a view: torch.load reads the storage as that view.
        "legacy_storage_key_was_view.pt": (legacy_views(("a", legacy_pid("0", ("v", 0, 3))), ("b", legacy_pid("v", numel=3))),
                                           "InvalidCheckpoint", "pytorch.storage",
                                           "legacy storage key `v` was declared as a view of `0` elements [0, 3); torch.load would read this "
                                           "storage as that view " + ambiguous),
        # The key list names a view: torch.load would read bytes from the file into part of storage 0.
        "legacy_key_list_names_view.pt": (legacy_views(("a", legacy_pid("0", ("v", 3, 3))), keys=["0", "v"],
                                                       storages=(("0", 6, F6), ("v", 3, F6[:12]))),
                                          "InvalidCheckpoint", "pytorch.storage",
                                          "the legacy storage key list names `v`, a storage view: torch.load would read those bytes into part "
                                          "of the storage it views"),
        # torch writes a storage's element count as int64: a negative one is no size.
        "legacy_negative_count.pt": (legacy_views(("a", legacy_pid("0")), storages=(("0", -1, F6),)), "InvalidCheckpoint", "pytorch.storage",
                                     "legacy storage `0` declares a negative element count (-1)"),
        # Repeated keys: torch keeps the last value, whichever holds the tensor.
        "repeated_key_tensor_then_int.pt": (torch_zip(pickle(state_dict((w, tensor(storage_pid())), (w, i(5))))), "InvalidCheckpoint",
                                            "pytorch.object", "key `w` appears twice in one pickled dict; torch.load would keep the last one"),
        "repeated_key_int_and_bool.pt": (torch_zip(pickle(state_dict((i(1), tensor(storage_pid())), (b"\x88", tensor(storage_pid()))))),
                                         "InvalidCheckpoint", "pytorch.object",
                                         "key `1` appears twice in one pickled dict; torch.load would keep the last one"),
        "repeated_top_level_model.pt": (torch_zip(pickle(state_dict((s("model"), state_dict((w, tensor(storage_pid())))),
                                                                    (s("model"), state_dict((s("v"), tensor(storage_pid()))))))),
                                        "InvalidCheckpoint", "pytorch.object",
                                        "key `model` appears twice in one pickled dict; torch.load would keep the last one"),
        "repeated_key_nested.pt": (torch_zip(pickle(state_dict((s("m"), state_dict((w, tensor(storage_pid())), (w, tensor(storage_pid()))))))),
                                   "InvalidCheckpoint", "pytorch.object",
                                   "key `w` appears twice in one pickled dict (under `m`); torch.load would keep the last one"),
        # Different keys joining to one dotted name: torch has both; a flat namespace cannot.
        "dotted_name_collision.pt": (torch_zip(pickle(state_dict((s("a.b"), tensor(storage_pid())),
                                                                 (s("a"), state_dict((s("b"), tensor(storage_pid()))))))),
                                     "InvalidCheckpoint", "pytorch.object",
                                     "two tensors named `a.b`: different keys that join to one dotted name (torch.load keeps both, under their own keys)"),
        # data.pkl at another depth than torch.save's: a PyTorch error, not DDUF's.
        "zip_data_pkl_at_top.pt": (zip_of({"data.pkl": one_tensor(), "data/0": f32}), "InvalidCheckpoint", "pytorch.container",
                                   "archive member `data.pkl` is not under a root folder (" + pkl_rule + ")"),
        "zip_data_pkl_too_deep.pt": (zip_of({"a/b/data.pkl": one_tensor(), "a/data/0": f32}), "InvalidCheckpoint", "pytorch.container",
                                     "`a/b/data.pkl` is not a/data.pkl (" + pkl_rule + ")"),
        # The same when data.pkl is not the first member (torch.load finds records by name, in any order).
        "zip_data_pkl_at_top_not_first.pt": (zip_of({"data/0": f32, "data.pkl": one_tensor(), "version": b"3\n"}), "InvalidCheckpoint",
                                             "pytorch.container", "`data.pkl` is not data/data.pkl (" + pkl_rule + ")"),
        "zip_data_pkl_too_deep_not_first.pt": (zip_of({"a/b/version": b"3\n", "a/b/data.pkl": one_tensor(), "a/b/data/0": f32}),
                                               "InvalidCheckpoint", "pytorch.container", "`a/b/data.pkl` is not a/data.pkl (" + pkl_rule + ")"),
    }


def shared_list_pickle(n=100_000, m=10_000):
    """A list of n ints, memoised, referenced m times from a list beside a tensor: n*m items if every
    reference were scanned (1e9 for the defaults, in a 220 KB pickle); the walk scans them once."""
    ints = b"](" + b"K\x07" * n + b"eq\x00"
    refs = b"](" + b"h\x00" * m + b"e"
    return pickle(state_dict((s("ints"), ints), (s("refs"), refs), (s("w"), tensor(storage_pid()))))


def fuzz_seeds():
    seeds = {"one_tensor": one_tensor(), "legacy_object": legacy_tensor_dict(),
             "legacy_magic": LEGACY_MAGIC, "sys_info": LEGACY_SYS_INFO}
    for name, (data, *_) in malformed_corpus().items():
        if not name.startswith("legacy") and data.startswith(b"PK"):
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                names = [n for n in z.namelist() if n.endswith("data.pkl")]
                if names and z.getinfo(names[0]).file_size <= 64 << 10:  # the limit files (MBs) are no seeds
                    seeds[name[:-3]] = z.read(names[0])
    for name, (data, _) in hostile_payloads("/nonexistent/canary").items():
        seeds["hostile_" + name] = data
    return seeds


def main(argv):
    mode, out = argv[1], argv[2]
    os.makedirs(out, exist_ok=True)
    if mode == "--corpus":
        lines = []
        for name, (data, kind, rule, *_) in sorted(malformed_corpus().items()):
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)
            lines.append(f"{name}\t{kind}\t{rule}")
        with open(os.path.join(out, "expected"), "w") as f:
            f.write("\n".join(lines) + "\n")
    elif mode == "--seeds":
        for name, data in sorted(fuzz_seeds().items()):
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main(sys.argv)
