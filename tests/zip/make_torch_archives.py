#!/usr/bin/env python3
"""Writes torch.save checkpoints into OUT_DIR and, for each, OUT_DIR/<file>.entries: one line per entry
in central-directory order, as CPython's zipfile sees it:

    name <TAB> header_offset <TAB> data_offset <TAB> compress_size <TAB> file_size <TAB> CRC

data_offset is ZipInfo.header_offset + 30 + the local header's name and extra lengths (the hub's and
torch's own formula). Exits 77 when torch cannot be imported.

Files: small.pt (one tensor), many.pt (300 tensors), large.pt (a 4 MiB tensor), buffer.pt (saved to a
file object: records under archive/), legacy.pt (_use_new_zipfile_serialization=False: not a ZIP).
"""
import io
import struct
import sys
import zipfile

try:
    import torch
except ImportError:
    sys.exit(77)


def manifest(path):
    data = open(path, "rb").read()
    lines = []
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            h = info.header_offset
            name_len, extra_len = struct.unpack("<HH", data[h + 26:h + 30])
            lines.append("\t".join(str(v) for v in (info.filename, h, h + 30 + name_len + extra_len,
                                                    info.compress_size, info.file_size, info.CRC)))
    with open(path + ".entries", "w") as out:
        out.write("\n".join(lines) + "\n")


def main(out_dir):
    torch.manual_seed(0)
    torch.save({"a": torch.ones(3)}, f"{out_dir}/small.pt")
    torch.save({f"layer{i}.weight": torch.randn(i % 7 + 1, 8) for i in range(300)}, f"{out_dir}/many.pt")
    torch.save({"x": torch.randn(1 << 20)}, f"{out_dir}/large.pt")
    buf = io.BytesIO()
    torch.save({"b": torch.arange(10, dtype=torch.int64)}, buf)
    with open(f"{out_dir}/buffer.pt", "wb") as f:
        f.write(buf.getvalue())
    torch.save({"a": torch.ones(3)}, f"{out_dir}/legacy.pt", _use_new_zipfile_serialization=False)
    for name in ("small.pt", "many.pt", "large.pt", "buffer.pt"):
        manifest(f"{out_dir}/{name}")


if __name__ == "__main__":
    main(sys.argv[1])
