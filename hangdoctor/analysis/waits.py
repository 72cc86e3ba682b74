"""Name what a rank waits in: a collective, point-to-point or barrier call, with the caller that issued it.

A stack (innermost frame first) is read from the innermost Python frame outwards. When that frame lies in
a communication layer (torch.distributed, deepspeed.comm, DeepSpeed's pipeline p2p, torch futures), the
whole run of communication-layer frames is the call; the op is the outermost frame of that run whose name
is a known op (the API the caller used, e.g. deepspeed.comm's `broadcast` over torch's), and the caller is
the first frame outside it:

    broadcast <- PipelineEngine._aggregate_total_loss (deepspeed/runtime/pipe/engine.py)

With --native, a rank blocked in C++ under a non-communication Python frame (e.g. waiting on a c10d Work
object, or in NCCL/gloo) is recognised from its native frames, with that Python frame as the caller.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hangdoctor.model import Frame, Stack

COMM_FILES = (
    "torch/distributed/distributed_c10d.py", "torch/distributed/c10d_logger.py",
    "torch/distributed/_functional_collectives", "torch/distributed/_symmetric_memory",
    "torch/distributed/utils.py", "deepspeed/comm/", "deepspeed/runtime/pipe/p2p.py", "torch/futures/",
    "torch/cuda/__init__.py",  # synchronize: waiting for the GPU, often for a collective's kernel
    "megatron/core/pipeline_parallel/p2p_communication.py", "megatron/p2p_communication.py",
)
P2P = frozenset({"send", "recv", "isend", "irecv", "batch_isend_irecv", "send_obj", "recv_obj",
                 "send_object_list", "recv_object_list", "_communicate", "send_forward", "recv_forward",
                 "send_backward", "recv_backward"})
BARRIER = frozenset({"barrier", "monitored_barrier"})
WAIT = frozenset({"wait", "wait_all", "synchronize"})
COLLECTIVE = frozenset({
    "broadcast", "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "all_gather_coalesced",
    "all_gather_base", "_all_gather_base", "allgather_fn", "reduce_scatter", "reduce_scatter_tensor",
    "_reduce_scatter_base", "reduce_scatter_fn", "all_to_all", "all_to_all_single", "reduce", "gather", "scatter",
    "broadcast_object_list", "scatter_object_list", "gather_object", "all_reduce_coalesced", "inference_all_reduce",
    "all_reduce_coalesced", "allreduce", "allgather", "reduce_scatter_coalesced",
})
OPS = P2P | BARRIER | WAIT | COLLECTIVE
# Native frames that block in a communication library, e.g. "c10d::ProcessGroupGloo::AsyncWork::wait",
# "ncclAllReduce", "gloo::transport::tcp::UnboundBuffer::waitRecv".
_NATIVE_OP = re.compile(r"(?i)(allreduce|all_reduce|broadcast|allgather|all_gather|reducescatter|reduce_scatter|"
                        r"alltoall|barrier|waitrecv|waitsend|recv|send|wait)")
_NATIVE_LIB = re.compile(r"(c10d::|gloo::|nccl|ProcessGroup|rccl|mpi_)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Wait:
    """A communication call a rank is inside."""

    op: str  # e.g. "broadcast", "recv", "barrier"
    kind: str  # "collective", "p2p", "barrier" or "wait"
    caller: Frame | None  # first frame outside the communication layer
    call: Frame  # the op's own frame (the API the caller called)

    @property
    def label(self) -> str:
        """Same for every rank in the same call from the same function, whatever the line numbers."""
        if self.caller is None:
            return f"{self.op} ({self.call.file})"
        return f"{self.op} <- {self.caller.name} ({self.caller.file})"


def kind_of(op: str) -> str:
    if op in P2P:
        return "p2p"
    if op in BARRIER:
        return "barrier"
    if op in WAIT:
        return "wait"
    return "collective"


def base_name(name: str) -> str:
    """"TorchBackend.broadcast" -> "broadcast"; "_exception_logger.<locals>.wrapper" -> "wrapper"."""
    return name.rsplit(".", 1)[-1]


def in_comm_layer(frame: Frame) -> bool:
    return not frame.native and any(part in frame.file for part in COMM_FILES)


def _native_op(frames: Stack, upto: int) -> str | None:
    for frame in frames[:upto]:
        if frame.native and _NATIVE_LIB.search(frame.name):
            match = _NATIVE_OP.search(frame.name.rsplit("::", 1)[-1]) or _NATIVE_OP.search(frame.name)
            if match:
                op = match.group(1).lower()
                return {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
                        "alltoall": "all_to_all", "waitrecv": "recv", "waitsend": "send"}.get(op, op)
    return None


def find_wait(frames: Stack) -> Wait | None:
    """The communication call this stack is in, or None."""
    first_py = next((i for i, f in enumerate(frames) if not f.native), None)
    if first_py is None:
        return None
    if not in_comm_layer(frames[first_py]):
        op = _native_op(frames, first_py)
        if op is None:
            return None
        return Wait(op=op, kind=kind_of(op), caller=frames[first_py], call=frames[first_py - 1])
    end = first_py
    call: Frame | None = None
    for i in range(first_py, len(frames)):
        frame = frames[i]
        if frame.native:
            continue
        if not in_comm_layer(frame):
            break
        end = i
        if base_name(frame.name) in OPS:
            call = frame
    if call is None:
        return None  # inside torch.distributed but not in a communication call (e.g. rendezvous bookkeeping)
    caller = next((f for f in frames[end + 1:] if not f.native), None)
    op = base_name(call.name)
    return Wait(op=op, kind=kind_of(op), caller=caller, call=call)


def innermost_python(frames: Stack) -> Frame | None:
    return next((f for f in frames if not f.native), frames[0] if frames else None)
