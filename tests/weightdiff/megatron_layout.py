"""Megatron-LM checkpoint folders for weightdiff's tests, written by our own code in Megatron-LM's layout (the
legacy `torch` checkpoint format). The layout was read from NVIDIA/Megatron-LM's public sources, not copied:
`megatron/training/checkpointing.py` (`get_checkpoint_name`: iter_{:07d}/mp_rank_{tp:02d}[_{pp:03d}]/
model_optim_rng.pt, the pp rank only with pipeline parallelism; `get_checkpoint_tracker_filename`:
latest_checkpointed_iteration.txt holding the iteration or "release"; `generate_state_dict`: args,
checkpoint_version 3.0, iteration, model, optimizer, opt_param_scheduler, rng_state),
`megatron/core/optimizer/optimizer.py` (`Float16OptimizerWithFloat16Params.state_dict`: optimizer,
grad_scaler, fp32_from_fp16_params, one list of fp32 masters per optimizer group) and
`megatron/core/optimizer/__init__.py` (`_get_param_groups`: parameters in named_parameters order, biases and
1-D parameters in a wd_mult=0 group after the default group).

The model is a tiny GPT in Megatron-core's names (`embedding.word_embeddings.weight`, `decoder.layers.0.
self_attention.linear_qkv.weight`, ...), layers numbered per stage as the legacy format saves them. Tensor
parallelism splits column-parallel weights (qkv, fc1, the vocabulary) along dim 0 and row-parallel weights
(proj, fc2) along dim 1; norms and row-parallel biases are replicated. Module weights are bf16, each the fp32
master rounded, as after an optimizer step.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import numpy as np
import torch

VOCAB, HIDDEN, SEQ = 32, 8, 16
COLUMN, ROW, REPLICATED = 0, 1, None  # the dim a tensor-parallel weight is split along


def layer_params(h: int = HIDDEN) -> list[tuple[str, tuple[int, ...], int | None]]:
    return [("input_layernorm.weight", (h,), REPLICATED), ("input_layernorm.bias", (h,), REPLICATED),
            ("self_attention.linear_qkv.weight", (3 * h, h), COLUMN),
            ("self_attention.linear_qkv.bias", (3 * h,), COLUMN),
            ("self_attention.linear_proj.weight", (h, h), ROW), ("self_attention.linear_proj.bias", (h,), REPLICATED),
            ("pre_mlp_layernorm.weight", (h,), REPLICATED), ("pre_mlp_layernorm.bias", (h,), REPLICATED),
            ("mlp.linear_fc1.weight", (4 * h, h), COLUMN), ("mlp.linear_fc1.bias", (4 * h,), COLUMN),
            ("mlp.linear_fc2.weight", (h, 4 * h), ROW), ("mlp.linear_fc2.bias", (h,), REPLICATED)]


def stage_params(pp: int, pp_size: int, layers: int) -> list[tuple[str, tuple[int, ...], int | None]]:
    """(name, full shape, split dim) of every parameter of one pipeline stage, in named_parameters order."""
    per_stage = layers // pp_size
    params = []
    if pp == 0:
        params += [("embedding.word_embeddings.weight", (VOCAB, HIDDEN), COLUMN),
                   ("embedding.position_embeddings.weight", (SEQ, HIDDEN), REPLICATED)]
    for i in range(per_stage):
        params += [(f"decoder.layers.{i}.{n}", s, d) for n, s, d in layer_params()]
    if pp == pp_size - 1:
        params += [("decoder.final_layernorm.weight", (HIDDEN,), REPLICATED),
                   ("decoder.final_layernorm.bias", (HIDDEN,), REPLICATED),
                   ("output_layer.weight", (VOCAB, HIDDEN), COLUMN)]
    return params


def masters(pp: int, pp_size: int, layers: int, seed: int) -> dict[str, torch.Tensor]:
    """The whole (unsplit) fp32 masters of one stage."""
    g = torch.Generator().manual_seed(seed * 100 + pp)
    return {name: torch.randn(shape, generator=g) * 0.1 + (1.0 if "norm.weight" in name else 0.0)
            for name, shape, _ in stage_params(pp, pp_size, layers)}


def shard(t: torch.Tensor, dim: int | None, tp: int, tp_size: int) -> torch.Tensor:
    return t.clone() if dim is None or t.dim() <= dim else t.chunk(tp_size, dim=dim)[tp].clone()


def _no_decay(name: str, shape: tuple[int, ...]) -> bool:
    return name.endswith(".bias") or len(shape) == 1


def rank_state(pp: int, tp: int, *, tp_size: int, pp_size: int, dp_size: int, layers: int, iteration: int,
               seed: int) -> dict:
    full = masters(pp, pp_size, layers, seed)
    params = stage_params(pp, pp_size, layers)
    fp32 = {name: shard(full[name], dim, tp, tp_size) for name, _, dim in params}
    model = {name: t.to(torch.bfloat16) for name, t in fp32.items()}
    groups = [[n for n, s, _ in params if not _no_decay(n, s)], [n for n, s, _ in params if _no_decay(n, s)]]
    ids = iter(range(len(params)))
    param_groups = [{"lr": 1e-4, "weight_decay": 0.1, "wd_mult": 1.0, "lr_mult": 1.0, "params": [next(ids) for _ in g]}
                    if k == 0 else {"lr": 1e-4, "weight_decay": 0.1, "wd_mult": 0.0, "lr_mult": 1.0,
                                    "params": [next(ids) for _ in g]} for k, g in enumerate(groups)]
    state = {i: {"step": torch.tensor(float(iteration)), "exp_avg": torch.zeros_like(fp32[n]),
                 "exp_avg_sq": torch.zeros_like(fp32[n])}
             for i, n in enumerate([n for g in groups for n in g])}
    args = argparse.Namespace(tensor_model_parallel_size=tp_size, pipeline_model_parallel_size=pp_size,
                              data_parallel_size=dp_size, num_layers=layers, hidden_size=HIDDEN, bf16=True,
                              use_distributed_optimizer=False, ckpt_format="torch")
    rng = {"random_rng_state": random.Random(seed).getstate(), "np_rng_state": np.random.RandomState(seed).get_state(),
           "torch_rng_state": torch.get_rng_state(), "cuda_rng_state": torch.zeros(16, dtype=torch.uint8),
           "rng_tracker_states": {}}
    return {"args": args, "checkpoint_version": 3.0, "iteration": iteration, "model": model,
            "optimizer": {"optimizer": {"state": state, "param_groups": param_groups},
                          "grad_scaler": {"scale": torch.tensor(1.0)},
                          "fp32_from_fp16_params": [[fp32[n] for n in g] for g in groups]},
            "opt_param_scheduler": {"max_lr": 1e-4, "num_steps": iteration * 8}, "rng_state": [rng]}


def rank_file(root: Path, iteration: int, tp: int, pp: int, pp_size: int) -> Path:
    folder = f"mp_rank_{tp:02d}" if pp_size == 1 else f"mp_rank_{tp:02d}_{pp:03d}"
    return root / f"iter_{iteration:07d}" / folder / "model_optim_rng.pt"


def write_checkpoint(root: Path, *, tp_size: int = 2, pp_size: int = 2, dp_size: int = 2, layers: int = 2,
                     iteration: int = 2, seed: int = 0) -> Path:
    """A whole Megatron-LM checkpoint folder (every tp x pp rank file, the tracker file); returns `root`."""
    for pp in range(pp_size):
        for tp in range(tp_size):
            path = rank_file(root, iteration, tp, pp, pp_size)
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(rank_state(pp, tp, tp_size=tp_size, pp_size=pp_size, dp_size=dp_size, layers=layers,
                                  iteration=iteration, seed=seed), path)
    (root / "latest_checkpointed_iteration.txt").write_text(str(iteration))
    return root


def whole_model(*, pp_size: int = 1, layers: int = 2, seed: int = 0) -> dict[str, torch.Tensor]:
    """The unsplit bf16 state dict that the tp ranks of a pp_size=1 checkpoint together hold."""
    assert pp_size == 1
    return {n: t.to(torch.bfloat16) for n, t in masters(0, 1, layers, seed).items()}
