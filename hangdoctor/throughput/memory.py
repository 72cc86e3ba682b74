"""Per-GPU memory of 3D-parallel GPT training: model states exactly as the seeds count them, activations roughly.

Model states (weights, gradients, optimizer), mixed-precision Adam at 18 bytes per parameter:
    2 half-precision weights + 4 fp32 gradients + 4 fp32 master weights + 8 Adam moments (fp32 exp_avg, exp_avg_sq)
- TP splits every block and the embedding: a GPU holds 1/TP of them (the seeds' "/ 4 (TP=4)").
- PP splits the blocks into stages; the tied word embedding lives on the first AND the last stage (one copy when
  PP=1). With DeepSpeed's `partition_method='type:transformer|embedding'` the two embeddings count as layers:
  L + 2 slots over PP stages, so the first and last stages hold the embedding plus fewer blocks.
- ZeRO shards over DP: stage 1 the master weights and Adam moments (12 of the 18 bytes), stage 2 also the
  gradients, stage 3 also the half-precision weights. Why DP=2 used far less memory than DP=1 in the seeds.

Activations (rough, optional), after Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models"), tensor parallel without sequence parallelism, 2-byte activations:
- one block keeps s*b*h*(10 + 24/t + 5*a*s/(h*t)) bytes per micro-batch; with full activation checkpointing
  (the seeds' factor 4) only its 2*s*b*h-byte input stays, plus one block's full set while it is recomputed;
- 1F1B keeps up to PP - i micro-batches in flight on stage i (at most the number of micro-batches);
- the last stage also holds fp32 logits for the loss, 4*s*b*v/t bytes per micro-batch.
CUDA context, allocator fragmentation and communication buffers are not counted: compare with care (the
seeds measured 1.3-1.6 GiB of CUDA kernels alone).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hangdoctor.throughput.model_size import ModelShape

GB = 10**9  # the seeds' GB: 17_157_252_600 bytes is "17GB"


@dataclass(frozen=True)
class BytesPerParam:
    half_weights: int = 2
    gradients: int = 4
    master_weights: int = 4
    optimizer_states: int = 8

    @property
    def total(self) -> int:
        return self.half_weights + self.gradients + self.master_weights + self.optimizer_states

    def sharded(self, zero_stage: int) -> int:
        """Bytes per parameter that ZeRO at this stage spreads over the data-parallel group."""
        if zero_stage not in (0, 1, 2, 3):
            raise ValueError(f"ZeRO stage {zero_stage} does not exist: use 0, 1, 2 or 3")
        return (
            (self.master_weights + self.optimizer_states if zero_stage >= 1 else 0)
            + (self.gradients if zero_stage >= 2 else 0)
            + (self.half_weights if zero_stage >= 3 else 0)
        )

    def per_param(self, *, zero_stage: int, dp: int) -> float:
        sharded = self.sharded(zero_stage)
        return self.total - sharded + sharded / dp


@dataclass(frozen=True)
class StageMemory:
    stage: int
    blocks: int
    embeddings: int  # tied word-embedding copies on this stage (0 or 1)
    params_per_gpu: int
    state_bytes: float  # weights + gradients + optimizer, after ZeRO sharding
    activation_bytes: float  # 0 when not estimated

    @property
    def total_bytes(self) -> float:
        return self.state_bytes + self.activation_bytes


@dataclass(frozen=True)
class MemoryEstimate:
    stages: tuple[StageMemory, ...]

    @property
    def peak(self) -> StageMemory:
        return max(self.stages, key=lambda s: s.total_bytes)

    @property
    def first(self) -> StageMemory:
        return self.stages[0]

    @property
    def middle(self) -> StageMemory:
        """A stage without the embedding when there is one (the seeds' "gpu w/o emb"), else the first."""
        return next((s for s in self.stages if not s.embeddings), self.stages[0])


def partition_uniform(items: int, parts: int) -> list[int]:
    """How many items each part gets, as DeepSpeed's balanced partition does: the first ones get one more."""
    base, extra = divmod(items, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def stage_contents(layers: int, pp: int, *, embedding_as_layer: bool = False) -> list[tuple[int, int]]:
    """(blocks, embedding copies) per pipeline stage."""
    if pp < 1:
        raise ValueError(f"pp={pp} must be at least 1")
    if not embedding_as_layer:
        blocks = partition_uniform(layers, pp)
        return [(b, 1 if i in (0, pp - 1) else 0) for i, b in enumerate(blocks)]
    slots = partition_uniform(layers + 2, pp)  # [embedding, block x L, embedding]
    if pp == 1:
        return [(layers, 1)]  # both ends are the same tied tensor
    return [(n - (1 if i in (0, pp - 1) else 0), 1 if i in (0, pp - 1) else 0) for i, n in enumerate(slots)]


def block_activation_bytes(shape: ModelShape, *, micro_batch_size: int, tp: int) -> float:
    s, b, h, a = shape.seq_length, micro_batch_size, shape.hidden, shape.heads
    return s * b * h * (10 + 24 / tp + 5 * a * s / (h * tp))


def memory_per_gpu(
    shape: ModelShape,
    *,
    tp: int,
    pp: int,
    dp: int,
    zero_stage: int = 1,
    embedding_as_layer: bool = False,
    bytes_per_param: BytesPerParam = BytesPerParam(),
    micro_batch_size: int | None = None,  # None: model states only
    micro_batches: int | None = None,  # per pipeline per iteration (GBS / (MBS x DP)); None: at least PP
    activation_checkpointing: bool = True,
) -> MemoryEstimate:
    for name, value in (("tp", tp), ("pp", pp), ("dp", dp)):
        if value < 1:
            raise ValueError(f"{name}={value} must be at least 1")
    per_param = bytes_per_param.per_param(zero_stage=zero_stage, dp=dp)
    stages = []
    for i, (blocks, embeddings) in enumerate(stage_contents(shape.layers, pp, embedding_as_layer=embedding_as_layer)):
        params = math.ceil((blocks * shape.block_params + embeddings * shape.embedding_params) / tp)
        activations = 0.0
        if micro_batch_size:
            in_flight = min(pp - i, micro_batches or pp)
            full = block_activation_bytes(shape, micro_batch_size=micro_batch_size, tp=tp)
            kept = 2 * shape.seq_length * micro_batch_size * shape.hidden if activation_checkpointing else full
            activations = in_flight * blocks * kept + (full if activation_checkpointing and blocks else 0)
            if i == pp - 1:
                activations += 4 * shape.seq_length * micro_batch_size * shape.vocab / tp
        stages.append(StageMemory(i, blocks, embeddings, params, params * per_param, activations))
    return MemoryEstimate(tuple(stages))
