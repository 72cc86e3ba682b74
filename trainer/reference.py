"""The single-process reference: the same GPT, data, AdamW groups and clipping, with no DeepSpeed and no groups.

Distributed runs are checked against it: for the same config, every topology must give the same losses.
It builds the very layer classes the pipeline uses (TP group None makes every collective the identity), in
pipeline order, and runs plain PyTorch: mean loss over the global batch's micro-batches, one backward per
micro-batch scaled by 1 / number of micro-batches (what DeepSpeed's GAS scaling and DP averaging add up to),
clip_grad_norm_, AdamW step.

    python -m trainer.reference --train-iters 3 [model flags]   # one {"loss", "grad_norm"} line per iteration
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass

import torch
from torch import nn

from trainer.config import TrainConfig, parse_config
from trainer.data import global_micro_batches
from trainer.model import (
    AddLearnedPositions,
    EmbeddingPipe,
    FinalLayerNormPipe,
    GPTShape,
    ParallelTransformerLayerPipe,
    lm_loss,
)
from trainer.param_groups import build_param_groups


class ReferenceGPT(nn.Module):
    def __init__(self, shape: GPTShape):
        super().__init__()
        self.embed = EmbeddingPipe(shape, None)
        self.positions = AddLearnedPositions(shape)
        self.layers = nn.ModuleList(ParallelTransformerLayerPipe(shape, i, None) for i in range(shape.layers))
        self.final = FinalLayerNormPipe(shape)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.positions(self.embed(tokens))
        for layer in self.layers:
            hidden = layer(hidden)
        return self.embed.head(self.final(hidden))


@dataclass(frozen=True)
class ReferenceStep:
    loss: float
    grad_norm: float  # the global gradient norm before clipping


def reference_steps(cfg: TrainConfig) -> list[ReferenceStep]:
    shape = GPTShape(vocab=cfg.padded_vocab_size, hidden=cfg.hidden_size, heads=cfg.num_attention_heads,
                     seq=cfg.seq_length, layers=cfg.num_layers, embed_layernorm=cfg.embed_layernorm, seed=cfg.seed)
    model = ReferenceGPT(shape)
    optimizer = torch.optim.AdamW(build_param_groups(model, weight_decay=cfg.weight_decay), lr=cfg.lr,
                                  betas=(0.9, 0.95), eps=1e-8)
    steps = []
    for iteration in range(cfg.train_iters):
        micro_batches = global_micro_batches(iteration, global_batch_size=cfg.global_batch_size,
                                             micro_batch_size=cfg.micro_batch_size, seed=cfg.seed,
                                             seq_length=cfg.seq_length, vocab_size=cfg.vocab_size)
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for inputs, labels in micro_batches:
            loss = lm_loss(model(inputs), labels) / len(micro_batches)
            loss.backward()
            total += loss.item()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_grad if cfg.clip_grad > 0 else float("inf"))
        optimizer.step()
        steps.append(ReferenceStep(total, float(grad_norm)))
    return steps


def reference_losses(cfg: TrainConfig) -> list[float]:
    return [step.loss for step in reference_steps(cfg)]


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(argv)
    cfg.tp = cfg.pp = 1
    try:
        cfg.validate(1)
    except ValueError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 2
    for step in reference_steps(cfg):
        print(json.dumps(asdict(step)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
