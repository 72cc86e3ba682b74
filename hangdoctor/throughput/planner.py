"""List the valid (TP, PP, DP, MBS) for a model on N GPUs, with estimated memory per GPU: the seeds' topology
search, done before booking the nodes.

Candidates keep TP within a node (TP divides the GPUs of a node and the GPUs), take every PP that divides
GPUs / TP, and every micro-batch size asked for; `validity.check_topology` rejects the rest, counted under every
rule a candidate breaks. Rules that do not depend on the topology (GPUs that are not whole nodes, a hidden size
not divisible by the heads) reject every candidate: the plan names them as blockers. Rows are
ordered: those that fit in GPU memory first (when a budget is given), then by the smallest TP x PP (the
seeds: "DP is the fastest, then PP, then TP"), then by the smallest pipeline bubble (PP - 1) / micro-batches
(Narayanan et al. 2021), then by the larger micro-batch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hangdoctor.throughput.memory import GB, BytesPerParam, MemoryEstimate, memory_per_gpu
from hangdoctor.throughput.model_size import ModelShape
from hangdoctor.throughput.validity import A100_SMS, MODEL_RULES, Finding, check_topology, model_hints

# Errors that depend on the request only, not on TP, PP or MBS: when one holds, no candidate can be valid.
REQUEST_RULES = ("whole-nodes", "hidden-divisible")


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
    candidates: int  # topologies examined: len(rows) valid, the others rejected
    rejected: dict[str, int]  # rule -> candidates that break it (a candidate may break several rules)
    tps: tuple[int, ...] = ()  # the TP degrees searched: divisors of a node's GPUs that also divide the GPUs
    blockers: tuple[Finding, ...] = ()  # errors that reject every candidate (REQUEST_RULES), e.g. not whole nodes
    model_hints: tuple[Finding, ...] = ()  # tile/wave quantization of the hidden size, the same for every row

    @property
    def rejected_count(self) -> int:
        return self.candidates - len(self.rows)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def plan_topologies(request: PlanRequest) -> Plan:
    r = request
    rows, rejected, blockers, candidates = [], Counter(), {}, 0
    tps = tuple(tp for tp in _divisors(r.gpus_per_node) if r.gpus % tp == 0)
    for tp in tps:
        for pp in _divisors(r.gpus // tp):
            for mbs in sorted(set(r.micro_batch_sizes)):
                candidates += 1
                findings = check_topology(
                    r.shape, gpus=r.gpus, tp=tp, pp=pp, micro_batch_size=mbs, global_batch_size=r.global_batch_size,
                    gpus_per_node=r.gpus_per_node, embedding_as_layer=r.embedding_as_layer, sms=r.sms,
                )
                errors = [f for f in findings if f.is_error]
                if errors:
                    rejected.update({f.rule for f in errors})
                    blockers.update({f.rule: f for f in errors if f.rule in REQUEST_RULES})
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
    return Plan(r, tuple(rows), candidates, dict(rejected), tps, tuple(blockers.values()),
                tuple(model_hints(r.shape, sms=r.sms)))
