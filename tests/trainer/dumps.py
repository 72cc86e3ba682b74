"""Read the trainer's weight dumps in tests: exact tensors (safetensors) and sidecar metadata (weightdiff)."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from weightdiff.read.sidecar import read_sidecar


def dump_file(weights: Path, *, iteration: int, tag: str, rank: int, ext: str) -> Path:
    matches = sorted(weights.glob(f"debug-{iteration}-pp*-tp*-dp*-global{rank}-{tag}-iteration-*.{ext}"))
    assert len(matches) == 1, f"expected one {tag} dump of rank {rank} at iteration {iteration}, found {matches}"
    return matches[0]


def tensors(weights: Path, *, iteration: int, tag: str, rank: int) -> dict[str, torch.Tensor]:
    return load_file(str(dump_file(weights, iteration=iteration, tag=tag, rank=rank, ext="safetensors")))


def weight_decay_of(weights: Path, *, iteration: int, tag: str, rank: int, name: str) -> float:
    dump = read_sidecar(dump_file(weights, iteration=iteration, tag=tag, rank=rank, ext="json"))
    return float(dump.tensors[name].group["weight_decay"])
