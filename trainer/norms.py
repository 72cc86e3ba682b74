"""LayerNorm classes, and the alias that caused BigScience's weight-decay bug.

Megatron-DeepSpeed imported apex's `MixedFusedLayerNorm` under the name `LayerNorm`. Its optimizer grouping
tested `isinstance(module, LayerNorm)`, i.e. against the fused class, so a plain `torch.nn.LayerNorm` added
for the embedding (`--embed-layernorm`) was put in the weight-decay group. We keep the same shapes here:
transformer blocks use `LayerNorm` (the alias of `FusedLayerNorm`), the embedding norm is a `torch.nn.LayerNorm`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class FusedLayerNorm(nn.Module):
    """Stand-in for apex's MixedFusedLayerNorm: a LayerNorm that does not derive from torch.nn.LayerNorm."""

    def __init__(self, hidden_size: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


LayerNorm = FusedLayerNorm  # the alias, as in megatron/model/__init__.py

EmbeddingLayerNorm = nn.LayerNorm  # what --embed-layernorm adds, as in BigScience's Megatron-DeepSpeed
