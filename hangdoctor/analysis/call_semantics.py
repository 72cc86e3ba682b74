"""Whom a call waits for, as data: one row per (framework, file, function) of the code around a wait.

The wait table (wait_rules.py) says *what* a stack waits in (a broadcast, a recv, a batch); these rows say *for
whom*: the previous pipeline stage, the next one, the last stage of the pipeline (DeepSpeed's loss broadcast), the
data-parallel group, the rank's own DataLoader workers. A row that names a function matches at the innermost frame
it can (`meaning`), so that the schedule's own function (DeepSpeed's `_exec_recv_activations`, a Megatron
`recv_forward`) names the peers even when the call itself is a generic recv; a catch-all row (a library's files,
function `.*`) only where no named row matches.

`peers` is one of:
    prev-stage, next-stage      the pipeline neighbour (pp-1, pp+1; same dp and tp)
    neighbour-stage             one of them, the schedule does not say which
    last-stage                  the last stage of the rank's pipeline (and, on the last stage, the others)
    group:dp, group:tp, group:pp   the rank's process group along that axis
    workers, threads            the rank's own helper processes or threads: a local wait

`phase` orders a schedule's phases within one step (1 first): when two sides of a pipeline wait for each other
in different phases, the one in the earlier phase has gone on into the next step (it finished this step's
exchanges with the other), so it is the side that skipped the later phase (waitgraph.py). 0: no order known.
`source`: a regular expression over the frame's source line (read on the node) that must also match: the same
function waits for different peers on different lines (torch.distributed.pipelining's `_step_microbatches`).
Users add rows in their wait-rules files: a row with a "peers" field is one of these (docs/wait-rules.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hangdoctor.clicore.inputs import check_field_types
from hangdoctor.clicore.regex import compile_user_regex

PEERS = ("prev-stage", "next-stage", "neighbour-stage", "last-stage", "group:dp", "group:tp", "group:pp",
         "workers", "threads")


@dataclass(frozen=True)
class CallRow:
    schedule: str  # whose schedule or layer: "deepspeed pipeline", "torch pipelining", "megatron", ...
    file: str  # a part of the frame's file
    function: str  # regular expression, in full against the qualified name or its last dotted part
    peers: str  # one of PEERS
    phase: int = 0  # order within the schedule's step, 1 first; 0 none
    says: str = ""  # the phase in words, e.g. "the forward receive of activations"
    source: str = ""  # regular expression over the frame's source line; "" matches any (or unknown) line
    by_line: bool = False  # the function holds several phases: its line tells them apart (a place each)
    _pattern: re.Pattern = field(init=False, repr=False, compare=False)
    _source: re.Pattern | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.peers not in PEERS:
            raise ValueError(f"peers {self.peers!r} is not one of {', '.join(PEERS)}")
        object.__setattr__(self, "_pattern", compile_user_regex(self.function, "function"))
        object.__setattr__(self, "_source", compile_user_regex(self.source, "source") if self.source else None)

    @property
    def catch_all(self) -> bool:
        return self.function == ".*" and not self.source

    def matches(self, name: str, file: str, line_text: str | None) -> bool:
        if self.file not in file:
            return False
        if self._pattern.fullmatch(name) is None and self._pattern.fullmatch(name.rsplit(".", 1)[-1]) is None:
            return False
        if self._source is not None:
            return line_text is not None and self._source.search(line_text) is not None
        return True


DS_ENGINE = "deepspeed/runtime/pipe/engine.py"
PIPELINING = "torch/distributed/pipelining/"

ROWS: tuple[CallRow, ...] = (
    # DeepSpeed's PipelineEngine.train_batch: the instruction schedule (1F1B: sends and receives between stages),
    # the tied and data-parallel gradient reductions, the optimizer step, then the loss broadcast from the last stage.
    CallRow("deepspeed pipeline", DS_ENGINE, "_exec_recv_activations", "prev-stage", 1,
            "the receive of activations from the previous stage"),
    CallRow("deepspeed pipeline", DS_ENGINE, "_exec_send_activations", "next-stage", 1,
            "the send of activations to the next stage"),
    CallRow("deepspeed pipeline", DS_ENGINE, "_exec_recv_grads", "next-stage", 1,
            "the receive of gradients from the next stage"),
    CallRow("deepspeed pipeline", DS_ENGINE, "_exec_send_grads", "prev-stage", 1,
            "the send of gradients to the previous stage"),
    CallRow("deepspeed pipeline", DS_ENGINE, "_exec_reduce_tied_grads", "group:pp", 2,
            "the all-reduce of tied weights' gradients between the stages that hold them"),
    CallRow("deepspeed pipeline", DS_ENGINE, "_exec_reduce_grads|_bf16_reduce_grads",
            "group:dp", 2, "the data-parallel gradient reduction"),
    CallRow("deepspeed pipeline", DS_ENGINE, "_exec_optimizer_step", "group:dp", 3,
            "the optimizer step (ZeRO's gather of updated parameters)"),
    CallRow("deepspeed pipeline", DS_ENGINE, "_aggregate_total_loss|_bcast_pipe_scalar",
            "last-stage", 4, "the broadcast of the loss from the last stage"),
    CallRow("deepspeed pipeline", DS_ENGINE, "_reduce_outputs", "last-stage", 4,
            "the broadcast of eval outputs from the last stage"),
    # DeepSpeed's ZeRO (no pipeline): every collective of its optimizer is in the data-parallel group
    CallRow("deepspeed zero", "deepspeed/runtime/zero/", ".*", "group:dp", 0, "ZeRO's data-parallel collective"),
    # torch.distributed.pipelining: the schedules wait on batched P2P work; the line tells forward from backward
    CallRow("torch pipelining", PIPELINING + "schedules.py", ".*_step_microbatches|.*step", "prev-stage", 1,
            "the forward receive of activations", source=r"fwd_recv|get_fwd_recv|recv_fwd", by_line=True),
    CallRow("torch pipelining", PIPELINING + "schedules.py", ".*_step_microbatches|.*step", "next-stage", 2,
            "the backward receive of gradients", source=r"bwd_recv|get_bwd_recv|recv_bwd", by_line=True),
    CallRow("torch pipelining", PIPELINING + "schedules.py", ".*_step_microbatches", "neighbour-stage", 0,
            "a pipeline-schedule exchange with a neighbour stage", by_line=True),
    CallRow("torch pipelining", PIPELINING + "stage.py", ".*_shape_inference|.*_prepare_forward_infra",
            "prev-stage", 1, "the shape inference exchange"),
    # Megatron-LM (megatron/core/pipeline_parallel/): p2p_communication's calls name their direction
    CallRow("megatron", "p2p_communication.py", "recv_forward|send_backward_recv_forward", "prev-stage", 1,
            "the receive of activations from the previous stage"),
    CallRow("megatron", "p2p_communication.py", "recv_backward|send_forward_recv_backward", "next-stage", 1,
            "the receive of gradients from the next stage"),
    CallRow("megatron", "p2p_communication.py", "send_forward", "next-stage", 1,
            "the send of activations to the next stage"),
    CallRow("megatron", "p2p_communication.py", "send_backward", "prev-stage", 1,
            "the send of gradients to the previous stage"),
    CallRow("megatron", "tensor_parallel/", ".*", "group:tp", 0, "a tensor-parallel collective"),
    # finalize_model_grads, after the schedule's exchanges: the tied word (and position) embeddings' gradients
    # are all-reduced in the embedding group, the first and the last pipeline stage
    CallRow("megatron", "megatron/core/distributed/finalize_model_grads.py",
            "_allreduce_word_embedding_grads|_allreduce_position_embedding_grads|_allreduce_embedding_grads?",
            "last-stage", 2, "the all-reduce of the tied embeddings' gradients between the first and the last stage"),
    CallRow("megatron", "megatron/core/distributed/", ".*", "group:dp", 0, "the data-parallel gradient reduction"),
    # local waits: the rank waits for its own helpers
    CallRow("torch", "torch/utils/data/dataloader.py", ".*", "workers", 0, "a batch from its DataLoader workers"),
)


# Activation recomputation: frames under which backward runs a block's forward a second time. A communication
# call issued there repeats one of the forward's, which a peer that does not recompute the same block never
# matches (a point-to-point receive inside a checkpointed block). (file part, function regex)
RECOMPUTE: tuple[tuple[str, re.Pattern], ...] = tuple((file, re.compile(function)) for file, function in (
    ("torch/utils/checkpoint.py", r".*recompute_fn|CheckpointFunction\.backward|.*unpack_hook"),
    ("tensor_parallel/random.py", r"CheckpointFunction\.backward|CheckpointWithoutOutputFunction\.backward"),
    ("deepspeed/runtime/activation_checkpointing/checkpointing.py", r"CheckpointFunction\.backward|.*recompute.*"),
))


def recomputing(frames) -> bool:
    """Whether the stack runs inside an activation recomputation (a forward re-run by backward)."""
    return any(not frame.native and file in frame.file and pattern.fullmatch(frame.name)
               for frame in frames for file, pattern in RECOMPUTE)


@dataclass(frozen=True, slots=True)
class CallMeaning:
    """What a frame of the waiting rank's stack says about whom it waits for."""

    row: CallRow
    frame_index: int  # in the rank's stack (innermost first)


def phase_of(frames, start: int, source: dict | None, rows: tuple[CallRow, ...] = ROWS) -> str:
    """"_step_microbatches:938" when the frame whose row gives the wait its meaning holds several phases."""
    found = meaning(frames, start, source, rows)
    if found is None or not found.row.by_line:
        return ""
    frame = frames[found.frame_index]
    return f"{frame.name.rsplit('.', 1)[-1]}:{frame.line}"


def meaning(frames, start: int, source: dict | None, rows: tuple[CallRow, ...] = ROWS) -> CallMeaning | None:
    """The row that says whom the wait at `frames[start]` (the call, innermost first) waits for: the innermost frame
    of the whole stack that a specific row matches (a named function: `_exec_optimizer_step`, Megatron's
    `_allreduce_word_embedding_grads` inside the call's own region), else the first frame from `start` outwards
    that a catch-all row (function `.*`: a whole library's files) matches. A catch-all never hides a specific row
    further in or further out: ZeRO's collectives under DeepSpeed's pipeline step keep the step's phase."""
    fallback = None
    for index, frame in enumerate(frames):
        if frame.native:
            continue
        text = source.get((frame.file, frame.line)) if source else None
        for row in rows:
            if row.matches(frame.name, frame.file, text):
                if not row.catch_all:
                    return CallMeaning(row, index)
                if fallback is None and index >= start:
                    fallback = CallMeaning(row, index)
    return fallback
