"""One process of the tensor-parallel test (test_loading.py runs two of them on the CPU with gloo,
under torchrun, or with torchrun's environment where torchrun itself fails: Debian 12's torch 1.13): each loads its shard of every tensor, rank 0 gathers the shards and checks that, joined
along the shard dimension, they equal the whole tensors loaded without sharding."""
import sys

import torch
import torch.distributed as dist

import safeweights.torch as swt


def main():
    path, dim = sys.argv[1], int(sys.argv[2])
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    part = swt.load_file(path, shard=(dim, rank, world))
    parts = [None] * world
    dist.all_gather_object(parts, {k: v.clone() for k, v in part.items()})
    if rank == 0:
        whole = swt.load_file(path)
        assert list(whole) == list(part), "shards list the same tensors, in the same order"
        for name, t in whole.items():
            split = t.dim() > dim and t.shape[dim] >= world
            got = torch.cat([p[name] for p in parts], dim) if split else parts[0][name]
            assert got.dtype == t.dtype and torch.equal(got, t), name
            if split:
                assert all(p[name].shape[dim] < t.shape[dim] for p in parts), name
        print(f"OK {len(whole)} tensors, world {world}, dim {dim}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
