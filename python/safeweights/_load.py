"""Loading through the library's loaders into memory torch allocates: one allocation per load, on the
CPU or a CUDA device, with every tensor a view into it (no per-tensor ``.to()``).

A CUDA load needs a CUDA device that torch can use (SafetensorError, kind DeviceError, without one, before
anything is allocated or read). It reads the file with the library's threads into pinned staging buffers and copies them to
the device on its own streams; it waits for every copy before returning, and waits for the work
already queued on torch's current stream first (the allocation may reuse memory that work still
uses). The tensors of one load share one storage: the memory is freed when the last of them goes.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ._dtypes import TABLE, torch_dtype, torch_shape
from ._errors import SafetensorError


def is_cuda(device: Any) -> bool:
    if device is None:
        return False
    if isinstance(device, int):
        return True  # torch's convention: an int is a CUDA device number
    if isinstance(device, str):
        return device == "cuda" or device.startswith("cuda:")
    return getattr(device, "type", None) == "cuda"


def torch_device(device: Any) -> Any:
    import torch  # noqa: PLC0415

    if isinstance(device, int):
        return torch.device("cuda", device)
    return torch.device(device)


def check_shard(shard: Any) -> Optional[Tuple[int, int, int]]:
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


def _prepare(plan: Any, device: Any) -> Tuple[List[Any], Any, Any]:
    """(placed tensors, destination buffer, torch device) for a load of `plan`: every check before
    anything is read, then the one allocation."""
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
    return placed, buf, dev


def _run(
    plan: Any, buf: Any, dev: Any, load_host: Callable[[int, int], Any], load_device: Callable[[int, int, int], Any]
) -> Any:
    """Runs the plan's load into `buf`: load_host(address, size) on the CPU, load_device(address, size,
    index) on a CUDA device after the work queued on torch's current stream."""
    import torch  # noqa: PLC0415

    if dev.type != "cuda":
        return load_host(buf.data_ptr(), plan.size)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    torch.cuda.current_stream(dev).synchronize()
    # The loader makes `index` the calling thread's current device; torch's context puts the caller's
    # back afterwards.
    with torch.cuda.device(index):
        return load_device(buf.data_ptr(), plan.size, index)


def load_plan(plan: Any, device: Any) -> Dict[str, Any]:
    """The plan's tensors as torch tensors on `device` (CPU or CUDA), in the plan's order."""
    import torch  # noqa: PLC0415

    placed, buf, dev = _prepare(plan, device)
    _run(plan, buf, dev, plan.load_into, plan.load_device)
    return _views(torch, buf, placed)


class TorchGroup:
    """The collectives of a group load (safeweights/group.h's GroupTransport) over a torch.distributed
    process group (None: the default one). Every collective is waited on for at most `timeout`
    (a missed deadline raises TimeoutError, which the library reports as kind Timeout). The status rounds
    go through CPU tensors, or CUDA ones under NCCL (which moves device memory only); a broadcast moves
    a region of the destination buffer in place, on its device."""

    def __init__(self, group: Any, buf: Any, timeout: Any):
        import torch  # noqa: PLC0415
        import torch.distributed as dist  # noqa: PLC0415

        self._torch, self._dist, self._group, self._buf, self._timeout = torch, dist, group, buf, timeout
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        if self.rank < 0:
            raise ValueError("this process is not a member of the process group")
        nccl = dist.get_backend(group) == "nccl"
        if not nccl:
            self._status_device = torch.device("cpu")
        elif buf is not None and buf.device.type == "cuda":
            self._status_device = buf.device
        else:
            self._status_device = torch.device("cuda", torch.cuda.current_device())

    def _global(self, rank: int) -> int:
        if self._group is None or self._group is self._dist.group.WORLD:
            return rank
        get = getattr(self._dist, "get_global_rank", None) or self._dist.distributed_c10d._get_global_rank  # torch < 2
        return get(self._group, rank)

    def _wait(self, work: Any) -> None:
        try:
            work.wait(timeout=self._timeout)
        except RuntimeError as e:
            if "timed out" in str(e).lower() or "timeout" in str(e).lower():
                raise TimeoutError(f"torch.distributed collective: {e}") from e
            raise

    def all_gather(self, data: bytes) -> bytes:
        torch = self._torch
        mine = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(self._status_device)
        out = [torch.empty_like(mine) for _ in range(self.size)]
        self._wait(self._dist.all_gather(out, mine, group=self._group, async_op=True))
        return torch.cat(out).cpu().numpy().tobytes()

    def broadcast(self, address: int, length: int, root: int) -> None:
        offset = address - self._buf.data_ptr()
        region = self._buf[offset : offset + length]
        self._wait(self._dist.broadcast(region, src=self._global(root), group=self._group, async_op=True))


def group_timeout(timeout: Any) -> Any:
    """A collective's deadline as a timedelta: seconds or a timedelta; None: torch's default process-group
    timeout (30 minutes). torch.distributed waits in whole milliseconds and reads 0 as "no deadline", so
    anything under 1 ms (0, timedelta(0), negative, 1e-4) is refused rather than turned into a wait for the
    process group's own timeout; so are NaN, infinity, booleans and what a timedelta cannot hold."""
    import datetime  # noqa: PLC0415
    import math  # noqa: PLC0415
    import numbers  # noqa: PLC0415

    if timeout is None:
        import torch.distributed as dist  # noqa: PLC0415

        return getattr(dist, "default_pg_timeout", datetime.timedelta(minutes=30))
    if isinstance(timeout, datetime.timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, numbers.Real) and not isinstance(timeout, bool):
        seconds = float(timeout)
    else:
        raise TypeError(f"timeout must be seconds or a datetime.timedelta, not {type(timeout).__name__}")
    if not math.isfinite(seconds) or seconds < 0.001:
        raise ValueError(f"timeout must be at least 1 ms (torch.distributed reads less as no deadline), got {timeout!r}")
    if seconds > datetime.timedelta.max.total_seconds():
        raise ValueError(f"timeout is longer than a datetime.timedelta can hold, got {timeout!r}")
    return timeout if isinstance(timeout, datetime.timedelta) else datetime.timedelta(seconds=seconds)


def _fail_group(group: Any, timeout: Any, error: BaseException, name: Optional[str]) -> None:
    """Tells the other ranks that this one cannot take part (safeweights/group.h's fail_group): they
    raise instead of waiting for it. What the transport says then does not matter: `error` is raised."""
    from . import _safeweights  # noqa: PLC0415

    kind = getattr(error, "kind", None)
    if not isinstance(kind, str):
        kind = "FileNotFound" if isinstance(error, FileNotFoundError) else "IoError" if isinstance(error, OSError) else "InvalidArgument"
    file = getattr(error, "file", None) or getattr(error, "filename", None) or name or ""
    try:
        _safeweights._group_fail(TorchGroup(group, None, timeout), kind, f"{type(error).__name__}: {error}", str(file))
    except Exception:  # noqa: BLE001, S110 (the transport failed too: the others' deadline ends their wait)
        pass


def group_load(
    make_plan: Callable[[], Any], device: Any, group: Any, timeout: Any = None, name: Optional[str] = None
) -> Tuple[Dict[str, Any], Any]:
    """(tensors, stats) of a group load (docs/PYTHON.md, "Loading across a process group"): every rank of
    `group` calls this with the plan of its own tensors (make_plan()), reads its part of the bytes the
    group needs, and receives the rest through torch.distributed. A failure on any rank, before or
    during the load, raises on every rank; every collective has the deadline `timeout`. `name` (the
    file or URL) names the file in the other ranks' errors when this rank fails before its plan exists."""
    import torch  # noqa: PLC0415

    timeout = group_timeout(timeout)
    try:
        plan = make_plan()
        placed, buf, dev = _prepare(plan, device)
    except BaseException as e:
        _fail_group(group, timeout, e, name)
        raise
    transport = TorchGroup(group, buf, timeout)
    stats = _run(plan, buf, dev,
                 lambda address, size: plan.load_into_group(address, size, transport),
                 lambda address, size, index: plan.load_device_group(address, size, index, transport))
    return _views(torch, buf, placed), stats


def _empty(torch: Any, name: str, shape: Sequence[int], dtype: Any, device: Any) -> Any:
    """A tensor with no elements. A GGUF may declare one whose other dimensions torch cannot stride
    (ne = [0, 2^62, 2^62], which ggml accepts): a SafetensorError naming it, not torch's RuntimeError."""
    try:
        return torch.empty(shape, dtype=dtype, device=device)
    except RuntimeError as e:
        error = SafetensorError(f"tensor {name}: torch cannot hold shape {list(shape)}: {e}")
        error.kind, error.tensor = "NotSupported", name
        raise error from None


def _views(torch: Any, buf: Any, placed: List[Any]) -> Dict[str, Any]:
    """One tensor per (name, code, shape, strides, offset, nbytes), viewing `buf`. The buffer is viewed
    once per dtype; a run of tensors of one dtype and shape that follow each other in the buffer (the
    layers of a model) becomes views with one as_strided + unbind, any other tensor with one as_strided:
    20,000 tensors cost milliseconds, not the three torch calls each that slicing, view and reshape take."""
    typed: Dict[str, Tuple[Any, int]] = {}
    out: Dict[str, Any] = {}
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
