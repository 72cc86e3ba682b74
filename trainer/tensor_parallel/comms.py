"""The four collectives of Megatron-style tensor parallelism, as autograd functions over one TP group.

Names follow the Megatron-LM paper (Shoeybi et al. 2019, section 3): `f` is copy-to-region, `g` is
reduce-from-region. A group of None (or of size 1) makes every function the identity, so the same layers run
in a single process (the reference) and in a TP group.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def tp_size(group) -> int:
    return 1 if group is None else dist.get_world_size(group)


def tp_rank(group) -> int:
    return 0 if group is None else dist.get_rank(group)


def _all_reduce(x: torch.Tensor, group) -> torch.Tensor:
    if tp_size(group) == 1:
        return x
    x = x.contiguous()
    dist.all_reduce(x, group=group)
    return x


def _gather_last_dim(x: torch.Tensor, group) -> torch.Tensor:
    size = tp_size(group)
    if size == 1:
        return x
    parts = [torch.empty_like(x) for _ in range(size)]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=-1)


def _split_last_dim(x: torch.Tensor, group) -> torch.Tensor:
    size = tp_size(group)
    if size == 1:
        return x
    return x.chunk(size, dim=-1)[tp_rank(group)].contiguous()


class CopyToTensorParallelRegion(torch.autograd.Function):
    """Identity in forward, all-reduce over the TP group in backward. This is `f` in the Megatron paper.

    Placed before a column-parallel layer: every TP rank reads the same input, and the input's gradient is the
    sum of each rank's partial gradient.
    """

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad.clone(), ctx.group), None


class ReduceFromTensorParallelRegion(torch.autograd.Function):
    """All-reduce over the TP group in forward, identity in backward. This is `g` in the Megatron paper.

    Placed after a row-parallel layer (and the vocab-parallel embedding): partial sums become the full output.
    """

    @staticmethod
    def forward(ctx, x, group):
        return _all_reduce(x.clone(), group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class GatherFromTensorParallelRegion(torch.autograd.Function):
    """All-gather along the last dimension in forward; in backward, keep this rank's slice (no communication).

    Used on the vocab-parallel logits, so that the loss sees the whole vocabulary.
    """

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _gather_last_dim(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _split_last_dim(grad, ctx.group), None


def copy_to_tp_region(x: torch.Tensor, group) -> torch.Tensor:
    return CopyToTensorParallelRegion.apply(x, group)


def reduce_from_tp_region(x: torch.Tensor, group) -> torch.Tensor:
    return ReduceFromTensorParallelRegion.apply(x, group)


def gather_from_tp_region(x: torch.Tensor, group) -> torch.Tensor:
    return GatherFromTensorParallelRegion.apply(x, group)
