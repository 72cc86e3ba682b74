"""A real torch.distributed.checkpoint (DCP) for weightdiff's tests: 2 processes, gloo, CPU.

    python tests/weightdiff/dcp_save.py OUT

Each rank holds `w` sharded by rows (a DTensor over a 2-rank mesh: each .distcp file holds half of it), and
replicated tensors (a BatchNorm's weight and buffers, a bfloat16 vector). Written: OUT/a and OUT/a2 (the same
state), OUT/b (w[5, 2] + 1 and bn.running_mean[3] + 5), and OUT/full.pt (rank 0's torch.save of the whole
state, the reference).
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed.checkpoint as dcp

from tests.weightdiff.savers import spawn_gloo


def state(changed: bool) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    g = torch.Generator().manual_seed(0)
    w = torch.randn(8, 4, generator=g)
    bn = torch.nn.BatchNorm1d(4)
    bn.running_mean.copy_(torch.randn(4, generator=g))
    if changed:
        w[5, 2] += 1.0
        bn.running_mean[3] += 5.0
    mesh = init_device_mesh("cpu", (2,))
    return {"w": distribute_tensor(w, mesh, [Shard(0)]), "h": torch.randn(6, generator=g).bfloat16(),
            **{f"bn.{k}": v for k, v in bn.state_dict().items()}}


def work(rank: int, out: str) -> None:
    for name, changed in (("a", False), ("a2", False), ("b", True)):
        dcp.save(state(changed), checkpoint_id=os.path.join(out, name))
    full = {k: (v.full_tensor() if hasattr(v, "full_tensor") else v) for k, v in state(False).items()}
    if rank == 0:
        torch.save(full, os.path.join(out, "full.pt"))


if __name__ == "__main__":
    spawn_gloo(work, 2, sys.argv[1])
