"""List the valid (TP, PP, DP, MBS) for a model on N GPUs, with estimated memory per GPU: the seeds' topology
search, done before booking the nodes.

Candidates keep TP within a node (TP divides the GPUs of a node), take every PP that divides GPUs / TP, and
every micro-batch size asked for; `validity.check_topology` rejects the rest (counted per rule). Rows are
ordered: those that fit in GPU memory first (when a budget is given), then by the smallest TP x PP (the
seeds: "DP is the fastest, then PP, then TP"), then by the smallest pipeline bubble (PP - 1) / micro-batches
(Narayanan et al. 2021), then by the larger micro-batch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from throughput.memory import GB, BytesPerParam, MemoryEstimate, memory_per_gpu
from throughput.model_size import ModelShape
from throughput.validity import A100_SMS, MODEL_RULES, Finding, check_topology, model_hints


@dataclass(frozen=True)
class PlanRequest:
    shape: ModelShape
    gpus: int
    gpus_per_node: int
    global_batch_size: int
    micro_batch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    zero_stage: int = 1
    embedding_as_layer: bool = False
    gpu_memory_gb: float | None = None  # e.g. 80 for an A100 80GB; None: no fit column
    activation_checkpointing: bool = True
    estimate_activations: bool = True
    sms: int = A100_SMS
    bytes_per_param: BytesPerParam = BytesPerParam()

    def __post_init__(self) -> None:
        for name in ("gpus", "gpus_per_node", "global_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', ' ')}={getattr(self, name)} must be at least 1")
        if not self.micro_batch_sizes or min(self.micro_batch_sizes) < 1:
            raise ValueError(f"micro batch sizes {self.micro_batch_sizes} must be positive")
        if self.gpu_memory_gb is not None and self.gpu_memory_gb <= 0:
            raise ValueError(f"GPU memory {self.gpu_memory_gb} GB must be positive")
        self.bytes_per_param.sharded(self.zero_stage)  # validates the stage


@dataclass(frozen=True)
class PlanRow:
    tp: int
    pp: int
    dp: int
    mbs: int
    micro_batches: int  # per pipeline and iteration: GBS / (MBS x DP)
    memory: MemoryEstimate
    hints: tuple[Finding, ...]  # those that depend on this topology (model-level ones are in Plan.model_hints)
    fits: bool | None  # None without a memory budget

    @property
    def bubble(self) -> float:
        return (self.pp - 1) / self.micro_batches

    @property
    def model_parallel(self) -> int:
        return self.tp * self.pp


@dataclass(frozen=True)
class Plan:
    request: PlanRequest
    rows: tuple[PlanRow, ...]
    rejected: dict[str, int]  # rule -> candidates it ruled out (each counted under its first error)
    model_hints: tuple[Finding, ...] = ()  # tile/wave quantization of the hidden size, the same for every row

    @property
    def candidates(self) -> int:
        return len(self.rows) + sum(self.rejected.values())


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def plan_topologies(request: PlanRequest) -> Plan:
    r = request
    rows, rejected = [], Counter()
    for tp in _divisors(r.gpus_per_node):
        if r.gpus % tp:
            continue
        for pp in _divisors(r.gpus // tp):
            for mbs in sorted(set(r.micro_batch_sizes)):
                findings = check_topology(
                    r.shape, gpus=r.gpus, tp=tp, pp=pp, micro_batch_size=mbs, global_batch_size=r.global_batch_size,
                    gpus_per_node=r.gpus_per_node, embedding_as_layer=r.embedding_as_layer, sms=r.sms,
                )
                errors = [f for f in findings if f.is_error]
                if errors:
                    rejected[errors[0].rule] += 1
                    continue
                dp = r.gpus // (tp * pp)
                micro_batches = r.global_batch_size // (mbs * dp)
                memory = memory_per_gpu(
                    r.shape, tp=tp, pp=pp, dp=dp, zero_stage=r.zero_stage, embedding_as_layer=r.embedding_as_layer,
                    bytes_per_param=r.bytes_per_param, micro_batch_size=mbs if r.estimate_activations else None,
                    micro_batches=micro_batches, activation_checkpointing=r.activation_checkpointing,
                )
                fits = None if r.gpu_memory_gb is None else memory.peak.total_bytes <= r.gpu_memory_gb * GB
                hints = tuple(f for f in findings if f.rule not in MODEL_RULES)
                rows.append(PlanRow(tp, pp, dp, mbs, micro_batches, memory, hints, fits))
    rows.sort(key=lambda row: (row.fits is False, row.model_parallel, row.bubble, -row.mbs, row.tp))
    return Plan(r, tuple(rows), dict(rejected), tuple(model_hints(r.shape, sms=r.sms)))
