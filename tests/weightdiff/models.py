"""Tiny real models for weightdiff's tests: a GPT-like stack with an embedding LayerNorm and tied head."""

from __future__ import annotations

import torch
from torch import nn

# The seed's bug: a module-level alias of a fused norm class, which a naive isinstance rule misses.
class MixedFusedLayerNorm(nn.LayerNorm):
    pass


LayerNorm = MixedFusedLayerNorm


class Embed(nn.Module):
    def __init__(self, vocab: int = 32, hidden: int = 8, norm_cls: type = nn.LayerNorm):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.norm = norm_cls(hidden)

    def forward(self, ids):
        return self.norm(self.word_embeddings(ids))


class Block(nn.Module):
    def __init__(self, hidden: int = 8):
        super().__init__()
        self.input_layernorm = LayerNorm(hidden)
        self.dense = nn.Linear(hidden, hidden)

    def forward(self, x):
        return x + torch.tanh(self.dense(self.input_layernorm(x)))


class TinyGPT(nn.Module):
    """Embedding (with a plain torch LayerNorm), two blocks, and a head tied to the embedding by identity."""

    def __init__(self, vocab: int = 32, hidden: int = 8):
        super().__init__()
        self.embed = Embed(vocab, hidden)
        self.blocks = nn.Sequential(Block(hidden), Block(hidden))
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.head.weight = self.embed.word_embeddings.weight

    def forward(self, ids):
        return self.head(self.blocks(self.embed(ids)))


def naive_groups(model: nn.Module, weight_decay: float = 0.1) -> list[dict]:
    """The seed's grouping rule: isinstance against the alias, so the embedding's torch LayerNorm is decayed."""
    decay, no_decay, seen = [], [], set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            (no_decay if isinstance(module, LayerNorm) or name == "bias" else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
