"""Megatron-style tensor-parallel layers: vocab-parallel embedding, column- and row-parallel linears.

Each layer initialises the FULL weight from its own seeded generator and keeps only its TP shard (Megatron's
`_initialize_affine_weight_cpu`), so any TP size holds slices of exactly the weights a single process holds:
that is what lets the distributed tests compare against a one-process reference.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from trainer.tensor_parallel.comms import copy_to_tp_region, reduce_from_tp_region, tp_rank, tp_size


def _full_normal(shape: tuple[int, ...], std: float, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.empty(shape).normal_(0.0, std, generator=generator)


def _shard(full: torch.Tensor, dim: int, group) -> torch.Tensor:
    return full.chunk(tp_size(group), dim=dim)[tp_rank(group)].clone()


def _split_parameter(data: torch.Tensor, dim: int) -> nn.Parameter:
    """A parameter that holds one TP shard, marked as Megatron marks it.

    DeepSpeed reads `tensor_model_parallel` (is_model_parallel_parameter) when it computes the global gradient
    norm for clipping: a marked parameter counts on every TP rank, an unmarked one only on TP rank 0.
    """
    param = nn.Parameter(data)
    param.tensor_model_parallel = True
    param.partition_dim = dim
    param.partition_stride = 1
    return param


class VocabParallelEmbedding(nn.Module):
    """Embedding table split by vocabulary rows over the TP group.

    forward: look up the ids this rank owns (others give zero rows), then all-reduce over TP (`g`).
    backward: identity into the local rows (each rank's gradient lands only on its own rows).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, *, group, init_std: float, init_seed: int):
        super().__init__()
        size = tp_size(group)
        assert num_embeddings % size == 0, "vocab is padded to a multiple of tp in TrainConfig"
        self.group = group
        self.per_rank = num_embeddings // size
        self.vocab_start = tp_rank(group) * self.per_rank
        full = _full_normal((num_embeddings, embedding_dim), init_std, init_seed)
        self.weight = _split_parameter(_shard(full, 0, group), 0)  # (V/tp, H)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        outside = (ids < self.vocab_start) | (ids >= self.vocab_start + self.per_rank)
        local_ids = (ids - self.vocab_start).masked_fill(outside, 0)
        out = F.embedding(local_ids, self.weight)  # (B, S, H)
        out = out.masked_fill(outside.unsqueeze(-1), 0.0)
        return reduce_from_tp_region(out, self.group)


class ColumnParallelLinear(nn.Module):
    """Y = X A + b with A split by output columns over TP; the output stays split (Megatron's gather_output=False).

    forward: `f` (identity), then the local matmul. backward: all-reduce of the input gradient over TP (`f`).
    """

    def __init__(self, in_features: int, out_features: int, *, group, init_std: float, init_seed: int):
        super().__init__()
        assert out_features % tp_size(group) == 0
        self.group = group
        self.weight = _split_parameter(_shard(_full_normal((out_features, in_features), init_std, init_seed), 0, group), 0)
        self.bias = _split_parameter(torch.zeros(out_features // tp_size(group)), 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(copy_to_tp_region(x, self.group), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """Y = X A + b with A split by input rows over TP; the input arrives split (Megatron's input_is_parallel=True).

    forward: local matmul, then all-reduce of the partial sums over TP (`g`), then the (replicated) bias.
    backward: identity (each rank already holds the gradient of its input slice).
    """

    def __init__(self, in_features: int, out_features: int, *, group, init_std: float, init_seed: int):
        super().__init__()
        assert in_features % tp_size(group) == 0
        self.group = group
        self.weight = _split_parameter(_shard(_full_normal((out_features, in_features), init_std, init_seed), 1, group), 1)
        self.bias = nn.Parameter(torch.zeros(out_features))  # replicated: equal on every TP rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return reduce_from_tp_region(F.linear(x, self.weight), self.group) + self.bias
