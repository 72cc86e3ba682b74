"""Is a 3D topology valid for a model and batch size? The rules the seeds applied by hand, one finding each.

Errors (Megatron/DeepSpeed refuse, or the run cannot be built):
- DP = GPUs / (TP x PP) must be a whole number;
- GBS must be divisible by MBS x DP (the seeds' `GBS % (MBS * nGPUs / PP / TP) == 0`);
- layers (plus 2 when the embeddings count as layers) divisible by PP, and at least one block per stage
  ("DS breaks if there isn't at least one transformer block per gpu");
- heads divisible by TP, hidden divisible by heads;
- TP within a node (the seeds' rule: "the highest degree of TP we can use is 4 for 4-gpu nodes").
Hints (it runs, but slower than it could):
- tile quantization: hidden % 128 == 0;
- wave quantization: hidden % SMs == 0 (108 SMs on an A100);
- Megatron's fused softmax kernel wants (heads / TP) x MBS % 4 == 0 ("NHEADS=108 breaks constraints for
  invoking optimized fused softmax kernel").
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoctor.throughput.model_size import ModelShape

A100_SMS = 108


MODEL_RULES = ("tile-quantization", "wave-quantization")  # depend on the model only, not on the topology


@dataclass(frozen=True)
class Finding:
    level: str  # "error" or "hint"
    rule: str  # short name, e.g. "gbs-divisible"
    message: str

    @property
    def is_error(self) -> bool:
        return self.level == "error"


def model_hints(shape: ModelShape, *, sms: int = A100_SMS) -> list[Finding]:
    """The seeds' tile and wave quantization hints for the hidden size."""
    h, found = shape.hidden, []
    if h % 128:
        found.append(Finding("hint", "tile-quantization",
                             f"hidden {h} % 128 = {h % 128}: matrix tiles are partly idle (use a multiple of 128)"))
    if sms and h % sms:
        found.append(Finding("hint", "wave-quantization",
                             f"hidden {h} % {sms} SMs = {h % sms}: the last wave of tiles on {sms} SMs is partial"))
    return found


def check_topology(
    shape: ModelShape,
    *,
    gpus: int,
    tp: int,
    pp: int,
    micro_batch_size: int,
    global_batch_size: int,
    gpus_per_node: int | None = None,
    embedding_as_layer: bool = False,
    sms: int = A100_SMS,
) -> list[Finding]:
    """Every rule the topology breaks (errors first), [] when it is valid and free of hints."""
    found: list[Finding] = []

    def error(rule: str, message: str) -> None:
        found.append(Finding("error", rule, message))

    def hint(rule: str, message: str) -> None:
        found.append(Finding("hint", rule, message))

    for name, value in (("gpus", gpus), ("tp", tp), ("pp", pp), ("micro batch size", micro_batch_size),
                        ("global batch size", global_batch_size)):
        if value < 1:
            raise ValueError(f"{name}={value} must be at least 1")
    h, heads = shape.hidden, shape.heads
    if gpus % (tp * pp):
        error("dp-integral", f"{gpus} GPUs are not divisible by TP x PP = {tp * pp}: DP would be {gpus / (tp * pp):g}")
        dp = None
    else:
        dp = gpus // (tp * pp)
    if dp and global_batch_size % (micro_batch_size * dp):
        error("gbs-divisible", f"GBS {global_batch_size} is not divisible by MBS x DP = {micro_batch_size} x {dp}")
    slots = shape.layers + (2 if embedding_as_layer else 0)
    what = f"layers + 2 embeddings = {slots}" if embedding_as_layer else f"{slots} layers"
    if slots % pp:
        error("layers-divisible", f"{what} are not divisible by PP={pp} (stages would hold uneven blocks)")
    if shape.layers < pp:
        error("block-per-stage", f"{shape.layers} layers cannot give each of PP={pp} stages a transformer block")
    if heads % tp:
        error("heads-divisible", f"{heads} heads are not divisible by TP={tp}")
    if h % heads:
        error("hidden-divisible", f"hidden {h} is not divisible by {heads} heads")
    if gpus_per_node:
        if tp > gpus_per_node:
            error("tp-in-node", f"TP={tp} spans nodes of {gpus_per_node} GPUs: keep TP within a node")
        elif gpus_per_node % tp:
            error("tp-in-node", f"TP={tp} does not divide the {gpus_per_node} GPUs of a node")
        if gpus > gpus_per_node and gpus % gpus_per_node:  # fewer GPUs than a node: one partial node is fine
            error("whole-nodes", f"{gpus} GPUs are not whole nodes of {gpus_per_node}")
    found.extend(model_hints(shape, sms=sms))
    if heads % tp == 0 and ((heads // tp) * micro_batch_size) % 4:
        hint("fused-softmax", f"(heads / TP) x MBS = {heads // tp} x {micro_batch_size} is not a multiple of 4: "
             "Megatron's fused softmax kernel is not used")
    return sorted(found, key=lambda f: f.level != "error")
