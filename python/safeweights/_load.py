"""Loading through the library's loaders into memory torch allocates: one allocation per load, on the
CPU or a CUDA device, with every tensor a view into it (no per-tensor ``.to()``).

A CUDA load needs a CUDA device that torch can use (SafetensorError, kind DeviceError, without one, before
anything is allocated or read). It reads the file with the library's threads into pinned staging buffers and copies them to
the device on its own streams; it waits for every copy before returning, and waits for the work
already queued on torch's current stream first (the allocation may reuse memory that work still
uses). The tensors of one load share one storage: the memory is freed when the last of them goes.
"""

from __future__ import annotations

from ._dtypes import TABLE, torch_dtype, torch_shape
from ._errors import SafetensorError


def is_cuda(device) -> bool:
    if device is None:
        return False
    if isinstance(device, int):
        return True  # torch's convention: an int is a CUDA device number
    if isinstance(device, str):
        return device == "cuda" or device.startswith("cuda:")
    return getattr(device, "type", None) == "cuda"


def torch_device(device):
    import torch  # noqa: PLC0415

    if isinstance(device, int):
        return torch.device("cuda", device)
    return torch.device(device)


def check_shard(shard):
    """(dim, rank, world) as ints, or None."""
    if shard is None:
        return None
    try:
        dim, rank, world = (int(x) for x in shard)
    except (TypeError, ValueError):
        raise ValueError(f"shard must be (dim, rank, world), got {shard!r}") from None
    if dim < 0 or world < 1 or not 0 <= rank < world:
        raise ValueError(f"shard must be (dim, rank, world) with 0 <= rank < world and dim >= 0, got {shard!r}")
    return (dim, rank, world)


def load_plan(plan, device) -> dict:
    """The plan's tensors as torch tensors on `device` (CPU or CUDA), in the plan's order."""
    import torch  # noqa: PLC0415

    placed = plan.tensors()
    for name, code, *_ in placed:  # before anything is allocated or read
        if code not in TABLE:
            raise SafetensorError(f"tensor {name} is {code}: it has no torch dtype (convert the file to dequantize it)")
    dev = torch_device(device) if is_cuda(device) else torch.device("cpu")
    if dev.type == "cuda" and not torch.cuda.is_available():
        # torch's own error here would be an AssertionError (a CPU-only build) or a RuntimeError (no GPU).
        why = "torch was built without CUDA" if torch.version.cuda is None else "torch sees no CUDA device"
        error = SafetensorError(f"cannot load onto {dev}: {why} (torch {torch.__version__})")
        error.kind = "DeviceError"
        raise error
    size = max(plan.size, 1)
    buf = torch.empty((size + 63) // 64 * 64, dtype=torch.uint8, device=dev)
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        torch.cuda.current_stream(dev).synchronize()
        # The loader makes `index` the calling thread's current device; torch's context puts the
        # caller's back afterwards.
        with torch.cuda.device(index):
            plan.load_device(buf.data_ptr(), plan.size, index)
    else:
        plan.load_into(buf.data_ptr(), plan.size)
    return _views(torch, buf, placed)


def _empty(torch, name, shape, dtype, device):
    """A tensor with no elements. A GGUF may declare one whose other dimensions torch cannot stride
    (ne = [0, 2^62, 2^62], which ggml accepts): a SafetensorError naming it, not torch's RuntimeError."""
    try:
        return torch.empty(shape, dtype=dtype, device=device)
    except RuntimeError as e:
        error = SafetensorError(f"tensor {name}: torch cannot hold shape {list(shape)}: {e}")
        error.kind, error.tensor = "NotSupported", name
        raise error from None


def _views(torch, buf, placed) -> dict:
    """One tensor per (name, code, shape, strides, offset, nbytes), viewing `buf`. The buffer is viewed
    once per dtype; a run of tensors of one dtype and shape that follow each other in the buffer (the
    layers of a model) becomes views with one as_strided + unbind, any other tensor with one as_strided:
    20,000 tensors cost milliseconds, not the three torch calls each that slicing, view and reshape take."""
    typed: dict = {}
    out: dict = {}
    i, n = 0, len(placed)
    while i < n:
        name, code, shape, strides, offset, nbytes = placed[i]
        view = typed.get(code)
        if view is None:  # every code is in TABLE: load_plan checked
            v = buf.view(torch_dtype(code))
            view = typed[code] = (v, v.element_size())
        if code == "F4":  # two to a byte in torch: the last dimension halved
            shape = torch_shape(code, shape)
            strides = [s // 2 for s in strides[:-1]] + [1] if shape else strides
        elif nbytes:
            j = i + 1
            while j < n and placed[j][1] == code and placed[j][2] == shape and placed[j][4] == offset + (j - i) * nbytes:
                j += 1
            if j - i > 1:
                run = view[0].as_strided((j - i, *shape), (nbytes // view[1], *strides), offset // view[1]).unbind(0)
                for k, t in enumerate(run):
                    out[placed[i + k][0]] = t
                i = j
                continue
        if nbytes == 0:
            out[name] = _empty(torch, name, shape, view[0].dtype, buf.device)
        else:
            out[name] = view[0].as_strided(shape, strides, offset // view[1])
        i += 1
    return out
