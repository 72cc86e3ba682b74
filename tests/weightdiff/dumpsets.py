"""Dump sets made in one process: real modules dumped with weightdiff.dump under chosen coordinates.

For logic that needs many ranks but no communication (pairing, summaries, TP/DP checks, bad input), this is
the real dump format produced by the real dump code; only the ranks are simulated. Tests that need real
communication (ties, ZeRO, checkpoints) use ds_scenarios.py or the trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

import weightdiff
from tests.weightdiff.models import LayerNorm, naive_groups
from hangdoctor.topology import ParallelDims, RankCoords


class RowParallelLinear(nn.Module):
    """Just the parameter layout of a Megatron row-parallel layer: weight sharded, bias replicated."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features).normal_(0.0, 0.02))
        self.bias = nn.Parameter(torch.zeros(out_features))


class StageModel(nn.Module):
    def __init__(self, hidden: int = 16):
        super().__init__()
        self.input_layernorm = LayerNorm(hidden)
        self.dense = RowParallelLinear(hidden, hidden)
        self.mlp = nn.Linear(hidden, hidden)


def build_stage(coords: RankCoords, hidden: int = 16) -> StageModel:
    """Equal on every dp and tp rank of a stage except the row-parallel weight, which differs per tp (a shard)."""
    torch.manual_seed(1000 * coords.pp)
    model = StageModel(hidden)
    with torch.no_grad():
        model.dense.weight.add_(coords.tp)
    return model


def make_set(folder: Path, dims: ParallelDims, *, iteration: int = 5, tag: str = "after",
             mutate: Callable[[RankCoords, StageModel], None] | None = None, mode: str = "full",
             build: Callable[[RankCoords], nn.Module] = build_stage, groups: bool = True) -> Path:
    for coords in dims.all_coords():
        model = build(coords)
        if mutate is not None:
            with torch.no_grad():
                mutate(coords, model)
        opt = torch.optim.AdamW(naive_groups(model), lr=1e-3) if groups else None
        weightdiff.dump(model, iteration=iteration, tag=tag, out=folder, coords=coords, optimizer=opt, mode=mode)
    return folder
