"""The true global gradient norm, and clipping by it, for ZeRO-0 runs (DeepSpeed's own ZeRO-0 norm is wrong under PP).

DeepSpeed 0.19.8 clips ZeRO-0 gradients in `runtime/utils.py clip_grad_norm_`: it counts a parameter that is not
marked `tensor_model_parallel` only where `mpu.get_model_parallel_rank() == 0`, i.e. on ONE rank of the whole
pipe x TP group (the first stage's TP rank 0), so the later stages' unsplit parameters (norms, biases) are left
out; and it does not skip the tied embedding's copy on the last stage, so that copy's gradient counts twice.
(ZeRO-1 is not affected: `stage_1_and_2.py` counts per TP rank and skips `ds_pipe_replicated` copies.)

So for ZeRO-0 the trainer turns DeepSpeed's clipping off (`gradient_clipping: 0`) and runs `GlobalGradClipper`
as a step pre-hook of the torch optimizer, i.e. after DeepSpeed's tied-gradient all-reduce and its DP gradient
all-reduce, right before AdamW steps. Each rank sums the squares of the gradients it counts:

- a parameter split over TP (`tensor_model_parallel = True`): on every TP rank (each holds a different shard);
- a parameter replicated over TP: on TP rank 0 only (every TP rank holds the same gradient);
- a tied copy on a later stage (`ds_pipe_replicated = True`, set by DeepSpeed's PipelineModule): never (the
  first stage's copy holds the same, already all-reduced, gradient).

Collective: ONE all-reduce (SUM, one float64) of that partial sum over the pp x tp ranks of this rank's DP
replica (`make_norm_group`), created by every rank in the same order. No collective over DP: after DeepSpeed's
DP all-reduce every replica holds the same averaged gradients, so each replica's sum is already the global one.
Then, as torch.nn.utils.clip_grad_norm_ (what the single-process reference runs): coef = max_norm / (norm + 1e-6),
clamped to 1, multiplies every local gradient (replicated copies too, so they stay equal).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from hangdoctor.topology import ParallelDims, RankCoords


def make_norm_group(dims: ParallelDims, coords: RankCoords):
    """This rank's group of the pp x tp ranks sharing its DP index, or None when that is one rank.

    Collective: every rank must call it, in the same order relative to other new_group calls.
    """
    if dims.pp * dims.tp == 1:
        return None
    mine = None
    for dp in range(dims.dp):
        ranks = dims.ranks_where(dp=dp)
        group = dist.new_group(ranks=ranks)
        if coords.rank in ranks:
            mine = group
    return mine


def counts_on_this_rank(param: torch.nn.Parameter, tp_rank: int) -> bool:
    """Whether this rank's copy of `param` contributes to the global norm (see the module docstring)."""
    if getattr(param, "ds_pipe_replicated", False):
        return False
    return bool(getattr(param, "tensor_model_parallel", False)) or tp_rank == 0


class GlobalGradClipper:
    """Computes the global gradient 2-norm over a model spread over pp x tp ranks, and clips by it.

    `last_norm` keeps the norm before clipping of the latest step (what Megatron logs as `grad norm`).
    max_norm <= 0 computes and records the norm but does not clip.
    """

    def __init__(self, params, *, max_norm: float, tp_rank: int, group):
        self.params = list(params)
        self.max_norm = max_norm
        self.tp_rank = tp_rank
        self.group = group
        self.last_norm: float | None = None

    def global_norm(self) -> torch.Tensor:
        partial = torch.zeros((), dtype=torch.float64)
        for param in self.params:
            if param.grad is not None and counts_on_this_rank(param, self.tp_rank):
                partial += param.grad.detach().double().pow(2).sum()
        if self.group is not None:
            dist.all_reduce(partial, op=dist.ReduceOp.SUM, group=self.group)
        return partial.sqrt().float()

    def clip(self) -> float:
        norm = self.global_norm()
        self.last_norm = float(norm)
        if self.max_norm > 0:
            coef = torch.clamp(self.max_norm / (norm + 1e-6), max=1.0)
            for param in self.params:
                if param.grad is not None:
                    param.grad.detach().mul_(coef.to(param.grad.dtype))
        return self.last_norm

    def step_pre_hook(self, optimizer, args, kwargs) -> None:
        """For torch.optim.Optimizer.register_step_pre_hook."""
        self.clip()
