"""A small GPT as DeepSpeed pipeline layers, with Megatron-style tensor parallelism inside each layer.

Pipeline layout (one LayerSpec per entry, built in engine.py; DeepSpeed's PipelineModule cuts it into stages):

    0      TiedLayerSpec("embed", EmbeddingPipe)        tokens (B, S) -> hidden (B, S, H)   [first stage]
    1      AddLearnedPositions                          position embeddings, NOT in the tied module
    2..L+1 ParallelTransformerLayerPipe x L             pre-LN blocks
    L+2    FinalLayerNormPipe
    L+3    TiedLayerSpec("embed", forward_fn=tied_head)  hidden -> logits (B, S, V)           [last stage]

The input and output embeddings are one tied module: DeepSpeed builds a copy on the first and on the last
stage, broadcasts the tied attributes from the first stage at start and after a checkpoint load
(`_synchronize_tied_weights`), and all-reduces their gradients between the two stages every step
(`_exec_reduce_tied_grads`, over a group of 2 ranks per (dp, tp)).

With --embed-layernorm the embedding norm lives inside the tied module and is one of its tied attributes,
so its copy on the last stage is kept equal to the first stage's. The last stage never applies that norm; its
head adds the norm's parameters times zero, so that their gradient exists there (exact zeros) and the tied
all-reduce runs over the same tensors on both stages.

Weights are initialised from generators seeded per layer (not from the global RNG), so every topology, and
the single-process reference, starts from the same full weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from trainer.norms import EmbeddingLayerNorm, LayerNorm
from trainer.tensor_parallel.comms import copy_to_tp_region, gather_from_tp_region, tp_size
from trainer.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding

INIT_STD = 0.02


@dataclass(frozen=True)
class GPTShape:
    vocab: int  # padded vocabulary size
    hidden: int
    heads: int
    seq: int
    layers: int
    embed_layernorm: bool
    seed: int

    def seed_for(self, layer: int, slot: int) -> int:
        """A distinct, topology-independent seed for one weight of one logical layer."""
        return self.seed * 100_003 + layer * 101 + slot


class EmbeddingPipe(nn.Module):
    """The tied module: vocab-parallel word embeddings (+ optional embedding LayerNorm) and the output head."""

    def __init__(self, shape: GPTShape, tp_group):
        super().__init__()
        self.tp_group = tp_group
        self.word_embeddings = VocabParallelEmbedding(
            shape.vocab, shape.hidden, group=tp_group, init_std=INIT_STD, init_seed=shape.seed_for(0, 0)
        )
        self.norm = EmbeddingLayerNorm(shape.hidden) if shape.embed_layernorm else None

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.word_embeddings(tokens)  # (B, S, H)
        return self.norm(hidden) if self.norm is not None else hidden

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits over the whole vocabulary: local (B, S, V/tp) from this rank's rows, then all-gathered over TP."""
        local = F.linear(copy_to_tp_region(hidden, self.tp_group), self.word_embeddings.weight)  # (B, S, V/tp)
        logits = gather_from_tp_region(local, self.tp_group)  # (B, S, V)
        if self.norm is not None:
            logits = logits + 0.0 * (self.norm.weight.sum() + self.norm.bias.sum())
        return logits


def tied_head(module: EmbeddingPipe, hidden: torch.Tensor) -> torch.Tensor:
    return module.head(hidden)


def tied_attributes(shape: GPTShape) -> list[str]:
    return ["word_embeddings.weight"] + (["norm.weight", "norm.bias"] if shape.embed_layernorm else [])


class AddLearnedPositions(nn.Module):
    """Learned absolute position embeddings, replicated on every TP rank, added to the token embeddings."""

    def __init__(self, shape: GPTShape):
        super().__init__()
        generator = torch.Generator().manual_seed(shape.seed_for(0, 1))
        self.weight = nn.Parameter(torch.empty(shape.seq, shape.hidden).normal_(0.0, INIT_STD, generator=generator))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden + self.weight[: hidden.size(1)]  # (B, S, H)


class ParallelTransformerLayerPipe(nn.Module):
    """A pre-LN GPT block. Attention heads and the MLP's inner dimension are split over the TP group.

    Per block, forward: 2 all-reduces over TP (after the attention projection and after the MLP);
    backward: 2 all-reduces over TP (input gradients of the QKV and first MLP projections).
    """

    def __init__(self, shape: GPTShape, layer_number: int, tp_group):
        super().__init__()
        h, layer = shape.hidden, layer_number + 1
        out_std = INIT_STD / math.sqrt(2 * shape.layers)  # GPT-2's scaled init of residual projections
        self.local_heads = shape.heads // tp_size(tp_group)
        self.head_dim = h // shape.heads
        self.input_layernorm = LayerNorm(h)
        # QKV rows are laid out per head as (heads, 3, head_dim), so a contiguous TP shard holds whole heads.
        self.query_key_value = ColumnParallelLinear(h, 3 * h, group=tp_group, init_std=INIT_STD, init_seed=shape.seed_for(layer, 0))
        self.dense = RowParallelLinear(h, h, group=tp_group, init_std=out_std, init_seed=shape.seed_for(layer, 1))
        self.post_attention_layernorm = LayerNorm(h)
        self.dense_h_to_4h = ColumnParallelLinear(h, 4 * h, group=tp_group, init_std=INIT_STD, init_seed=shape.seed_for(layer, 2))
        self.dense_4h_to_h = RowParallelLinear(4 * h, h, group=tp_group, init_std=out_std, init_seed=shape.seed_for(layer, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        qkv = self.query_key_value(self.input_layernorm(x))  # (B, S, 3H/tp)
        qkv = qkv.view(b, s, self.local_heads, 3, self.head_dim).permute(3, 0, 2, 1, 4)  # (3, B, nh/tp, S, hd)
        attn = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)  # (B, nh/tp, S, hd)
        attn = attn.transpose(1, 2).reshape(b, s, self.local_heads * self.head_dim)  # (B, S, H/tp)
        x = x + self.dense(attn)
        return x + self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(self.post_attention_layernorm(x))))


class FinalLayerNormPipe(nn.Module):
    def __init__(self, shape: GPTShape):
        super().__init__()
        self.final_layernorm = LayerNorm(shape.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.final_layernorm(x)


def lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross entropy over the micro-batch. logits (B, S, V), labels (B, S)."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), labels.reshape(-1))
