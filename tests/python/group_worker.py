"""One process of the group-load tests (test_group_loading.py starts 2 or 4 of them on the CPU, gloo):

  group_worker.py load SOURCE DIM            every rank group-loads SOURCE (a path or URL; DIM -1: no shard,
                                             else shard=(DIM, rank, world)); rank 0 checks every rank's
                                             tensors against its single-process load and the bytes read
  group_worker.py tensors SOURCE             load_tensors' group load (any format) against its single load
  group_worker.py group SOURCE DIM           the group load alone: each rank prints `READ <bytes it read>`
  group_worker.py MODE SOURCE BAD            rank BAD fails as MODE says; every rank must raise

Failure modes: `missing` (BAD's file does not exist), `truncate` (BAD's copy of the file shrinks after it
was opened and planned: its reads fail), `exit` (BAD's process ends before loading), `stall` (BAD never
calls the load: the others' deadline ends their wait). SOURCE may hold `{rank}` (node-local copies).
A rank that raised prints `RAISED <class> <kind> <message>` and exits 0; a load that should have failed
and did not exits 1."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import safeweights
import safeweights.torch as swt
from safeweights import _load

TIMEOUT = 60  # seconds: every collective's deadline; `stall` uses a short one


def split_along(t, dim, world):
    return world > 1 and t.dim() > dim and t.shape[dim] >= world


def check_load(source, dim, rank, world):
    shard = None if dim < 0 else (dim, rank, world)
    group = dist.group.WORLD
    tensors, stats = swt._group_load_file(source, "cpu", "mmap", shard, group, TIMEOUT)
    # The single-process load of the same tensors, and the public entry points' group loads.
    single = swt.load_file(source, shard=shard)
    public = swt.load_file(source, shard=shard, process_group=group, timeout=TIMEOUT)
    any_format = swt.load_tensors(source, shard=shard, process_group=group) if "://" not in source else public
    for got in (tensors, public, any_format):
        assert list(got) == list(single), (list(got), list(single))
        for name, t in single.items():
            assert got[name].dtype == t.dtype and torch.equal(got[name], t), (rank, name)
    # The bytes the group needs: every byte of the plan once; with a shard, the tensors read whole once
    # (a plan of those alone) and each rank's own part.
    with swt.safe_open(source, "pt") as f:
        plan_bytes = f._handle.plan_load(None, shard).read_bytes
        whole = [n for n, t in swt.load_file(source).items() if shard is None or not split_along(t, dim, world)]
        replicated = f._handle.plan_load(whole, None).read_bytes if whole else 0
    mine = {"read": stats["read_bytes"], "plan": plan_bytes, "replicated": replicated, "received": stats["received_bytes"]}
    every = [None] * world
    dist.all_gather_object(every, mine)
    if rank == 0:
        needed = sum(e["plan"] - e["replicated"] for e in every) + every[0]["replicated"]
        read = [e["read"] for e in every]
        assert sum(read) == needed, (read, needed)
        if world > 1:
            assert all(e["read"] < e["plan"] for e in every), every
        print("BYTES " + json.dumps({"read": read, "needed": needed, "plan": [e["plan"] for e in every]}), flush=True)
        print(f"OK {len(single)} tensors, world {world}, dim {dim}", flush=True)


def check_failure(mode, source, bad, rank, world):
    timeout = 3 if mode == "stall" else TIMEOUT
    path = source.format(rank=rank)
    if rank == bad:
        if mode == "exit":
            os._exit(3)
        if mode == "stall":
            time.sleep(timeout + 10)
            os._exit(0)
        if mode == "missing":
            path += ".missing"

    def make_plan():
        with swt.safe_open(path, "pt", backend="pread") as f:
            plan = f._handle.plan_load(None, None)
        if mode == "truncate" and rank == bad:
            os.truncate(path, 1000)  # after opening and planning: the reads fail
        return plan

    try:
        _load.group_load(make_plan, "cpu", dist.group.WORLD, timeout, path)
    except (safeweights.SafetensorError, OSError) as e:
        print(f"RAISED {type(e).__name__} {getattr(e, 'kind', None)} {e}", flush=True)
        os._exit(0)  # the group is unusable now: no destroy_process_group
    print("LOADED (no error)", flush=True)
    os._exit(1)


def main():
    mode, source = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if mode == "load":
        check_load(source, int(sys.argv[3]), rank, world)
    elif mode == "tensors":  # any format load_tensors reads (a PyTorch checkpoint here), no shard
        tensors, stats = swt._group_load_tensors(source, "cpu", None, False, None, dist.group.WORLD, TIMEOUT)
        single = swt.load_tensors(source)
        assert list(tensors) == list(single)
        for name, t in single.items():
            assert tensors[name].dtype == t.dtype and torch.equal(tensors[name], t), (rank, name)
        every = [None] * world
        dist.all_gather_object(every, stats["read_bytes"])
        needed = safeweights._safeweights._TensorSet.open(source).plan_load(None, None).read_bytes
        assert sum(every) == needed and all(r < needed for r in every), (every, needed)
        if rank == 0:
            print(f"OK {len(single)} tensors of {source}, read {every} of {needed}", flush=True)
    elif mode == "group":
        dim = int(sys.argv[3])
        _, stats = swt._group_load_file(source, "cpu", "mmap", None if dim < 0 else (dim, rank, world), dist.group.WORLD, TIMEOUT)
        print(f"READ {stats['read_bytes']}", flush=True)
    else:
        # Every rank has joined the group before one fails: a rank that ends while another is still inside
        # init_process_group makes that one fail there, in torch, before any load (seen on a loaded machine).
        dist.barrier()
        check_failure(mode, source, int(sys.argv[3]), rank, world)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
