"""diverge's communication comparison on synthetic pipelines: a collective skipped by one stage is named first,
while what differs between stages by design (other collectives, p2p directions, the first step's extra p2p) is
not a divergence."""

from __future__ import annotations

import pytest

from tracing.analysis.comms import comm_divergences, is_communication
from tracing.analysis.diverge import diverge_report
from tracing.identity import RankIdentity
from tracing.records import CALL, RETURN, RUNNING, CodeLocation, Event, RankTrace, ThreadTrace

ENGINE, C10D = "deepspeed.runtime.pipe.engine", "torch.distributed.distributed_c10d"


def loc(name: str) -> CodeLocation:
    module = C10D if "." not in name and name not in ("train", "layer") else ENGINE
    return CodeLocation(module, name, f"/src/{module.replace('.', '/')}.py", 10)


@pytest.mark.parametrize(("module", "qualname", "expected"), [
    (C10D, "broadcast", True), (C10D, "all_gather_into_tensor", True), (C10D, "barrier", True),
    (C10D, "isend", True), (C10D, "reduce", True), ("mylib.math", "reduce", False),
    (ENGINE, "PipelineEngine._exec_send_activations", True), ("trainer.tensor_parallel.comms", "_all_reduce", True),
    (C10D, "_is_valid_send_recv", False), (C10D, "can_send_recv", False), (C10D, "get_rank", False),
    (ENGINE, "PipelineEngine.train_batch", False),
    # FSDP2's helpers named after its all-gather (torch/distributed/fsdp/_fully_shard), seen in a traced FSDP hang
    (C10D, "FSDPParamGroup._all_gather_process_group", False), (C10D, "FSDPParam.init_all_gather_outputs", False),
    (C10D, "FSDPParam.alloc_all_gather_outputs", False), (C10D, "foreach_all_gather_copy_out", False),
    (C10D, "FSDPParamGroup._wait_all_gather_streams_on_event", False), (C10D, "foreach_all_gather", True),
    (C10D, "foreach_reduce_scatter_copy_in", False), (C10D, "reduce_scatter_tensor", True),
    ("deepspeed.runtime.zero.stage_1_and_2", "DeepSpeedZeroOptimizer.allreduce_bucket", True),
])
def test_which_functions_communicate(module, qualname, expected):
    assert is_communication(CodeLocation(module, qualname, "/x.py", 1)) is expected


class Script:
    """One rank's main thread: calls and returns by name; what is still open at the end is where it waits."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.stack: list[CodeLocation] = []

    def _add(self, kind: int, where: CodeLocation) -> None:
        n = len(self.events)
        self.events.append(Event(n, 0, n, 1_000 + n, kind, len(self.stack) - (kind == CALL), where))

    def call(self, name: str) -> Script:
        self.stack.append(loc(name))
        self._add(CALL, self.stack[-1])
        return self

    def ret(self) -> Script:
        self._add(RETURN, self.stack[-1])
        self.stack.pop()
        return self

    def leaf(self, *names: str) -> Script:
        for name in names:
            self.call(name).ret()
        return self

    def trace(self, rank: int) -> RankTrace:
        thread = ThreadTrace(0, "MainThread", is_main=True, open_frames=list(self.stack), events=self.events)
        return RankTrace(RankIdentity(rank, rank, 4, "h", rank), f"r{rank}", "ring", RUNNING, 0, threads=[thread])


def pipeline(skip_at: int | None = 2, rounds: int = 3) -> list[RankTrace]:
    """PP=2 x DP=2. Stage 0 (ranks 0-1) runs more layers (more tensor-parallel all_reduces) and sends; stage 1
    (ranks 2-3) receives, reduces the loss over DP, then broadcasts it. Round 1 also exchanges tensor shapes.
    At round skip_at stage 1 skips the broadcast and waits in the next round's recv; stage 0 waits in it."""
    scripts = {r: Script().call("train") for r in range(4)}
    for rank, s in scripts.items():
        first_stage = rank < 2
        for i in range(1, rounds + 1):
            s.call("PipelineEngine.train_batch").call("PipelineEngine._exec_schedule")
            for _ in range(3 if first_stage else 2):
                s.call("layer").leaf("_all_reduce").ret()
            p2p = "PipelineEngine._exec_send_activations" if first_stage else "PipelineEngine._exec_recv_activations"
            if i == 1:
                s.call(p2p).call("PipelineEngine._tensor_meta").leaf("send" if first_stage else "recv").ret().ret()
            stuck = not first_stage and skip_at is not None and i == skip_at + 1
            s.call(p2p).call("send" if first_stage else "recv")
            if stuck:
                break  # waits for activations that stage 0 never sends
            s.ret().ret().leaf("all_reduce").ret()  # _exec_schedule
            s.call("PipelineEngine._aggregate_total_loss")
            if not first_stage:
                s.leaf("all_reduce")
            if first_stage and i == skip_at:
                s.call("broadcast")
                break  # waits for the last stage's broadcast
            if first_stage or i != skip_at:
                s.leaf("broadcast")
            s.ret().ret()  # _aggregate_total_loss, train_batch
    return [s.trace(rank) for rank, s in scripts.items()]


def test_a_broadcast_skipped_by_the_last_stage_is_the_first_divergence():
    report = diverge_report("d", pipeline(skip_at=2))
    assert report.anchor == f"{ENGINE}:PipelineEngine.train_batch"  # found alone: it encloses every collective
    (first,) = report.communication
    assert (first.round, first.call, first.function.qualname) == (
        2, "PipelineEngine._aggregate_total_loss > broadcast", "broadcast")
    assert [(s.ranks_text, s.changed, s.before, s.calls) for s in first.sides] == [("2-3", True, 1, 0),
                                                                                 ("0-1", False, 1, 1)]
    assert [f.qualname for f in first.sides[1].open_frames][-1] == "broadcast"
    assert report.first == ("in round 2 of PipelineEngine.train_batch, ranks 2-3 skipped PipelineEngine."
                            "_aggregate_total_loss > broadcast (1 call in round 1, 0 in round 2); ranks 0-1 went on "
                            "as before.")
    assert report.divergences[0].ranks == [0, 1, 2, 3]  # the stages' split by design still follows


def test_what_differs_by_design_is_no_divergence():
    report = diverge_report("d", pipeline(skip_at=None))
    assert report.communication == []
    assert not report.identical  # the stages still run different code


def test_a_dp_peer_that_skips_a_collective_is_named_against_its_own_stage():
    traces = pipeline(skip_at=None, rounds=4)
    events = traces[1].threads[0].events
    # Rank 1 drops the all_reduce after the schedule in its third round (its events after it shift by two).
    third = [i for i, e in enumerate(events) if e.kind == CALL and e.loc.qualname == "PipelineEngine.train_batch"][2]
    skip = next(i for i, e in enumerate(events) if i > third and e.kind == CALL and e.loc.qualname == "all_reduce")
    traces[1].threads[0].events = events[:skip] + events[skip + 2:]
    anchor, found = comm_divergences({t.identity.rank: t.threads[0] for t in traces}, start_at="train_batch")
    assert anchor == f"{ENGINE}:PipelineEngine.train_batch"
    assert [(d.round, d.call, [(s.ranks_text, s.changed) for s in d.sides]) for d in found] == [
        (3, "PipelineEngine._exec_schedule > all_reduce", [("1", True), ("0,2-3", False)]),
        (4, "PipelineEngine._exec_schedule > all_reduce", [("1", True), ("0,2-3", False)])]  # and back in round 4
