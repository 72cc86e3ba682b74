"""Collective calls numbered per rank and compared one by one (tracing/analysis/sequence.py), on made-up traces
whose answers are worked out by hand in each test."""

from __future__ import annotations

from tracing.analysis.sequence import LAST, ROLES, number_calls, sequence_divergences
from tracing.records import CALL, GAP, RETURN, CodeLocation, Event, ThreadTrace

T0 = 1_700_000_000_000_000_000
STEP = CodeLocation("trainer.engine", "train_step", "/src/trainer/engine.py", 10)
C10D = "torch.distributed.distributed_c10d"


def api(name: str) -> CodeLocation:
    return CodeLocation(C10D, name, "/t/torch/distributed/distributed_c10d.py", 100)


def thread(calls: list[str], *, first_seq: int = 0, times: list[int] | None = None, gap_at: int | None = None,
           inner: str | None = None) -> ThreadTrace:
    """One train_step per call, each making one collective API call (which itself calls `inner`, another API
    function, as DeepSpeed's broadcast calls torch's); the last call stays open (the rank waits in it)."""
    events, seq = [], first_seq
    times = times or [i * 1000 for i in range(len(calls))]
    for i, (name, t) in enumerate(zip(calls, times)):
        script = [(CALL, STEP, 0), (CALL, api(name), 1)]
        if inner:
            script += [(CALL, api(inner), 2), (RETURN, api(inner), 2)]
        if i < len(calls) - 1:
            script += [(RETURN, api(name), 1), (RETURN, STEP, 0)]
        if gap_at == i:
            script.insert(0, (GAP, STEP, 0))
        for kind, loc, depth in script:
            events.append(Event(seq, 0, seq, T0 + t, kind, depth, loc))
            seq += 1
    frames = [STEP, api(calls[-1])] if calls else []
    return ThreadTrace(index=0, name="MainThread", is_main=True, open_frames=frames, open_lines=[0] * len(frames),
                       events=events)


def test_ranks_alike_until_one_calls_the_barrier_where_the_other_all_gathers():
    threads = {0: thread(["all_gather", "reduce_scatter", "all_gather"]),
               1: thread(["all_gather", "reduce_scatter", "barrier"])}
    (d,), whole = sequence_divergences(threads)
    assert whole and (d.kind, d.number, d.ranks_text) == (LAST, 3, "0-1")
    assert d.summary == ("collective #3, after 2 alike: rank 0 all_gather (from train_step), its last; "
                         "rank 1 barrier (from train_step), its last")


def test_a_rank_that_made_fewer_says_so():
    threads = {0: thread(["all_reduce", "all_reduce", "barrier"]), 1: thread(["all_reduce", "all_reduce"]),
               2: thread(["all_reduce", "all_reduce"])}
    (d,), _ = sequence_divergences(threads)
    assert (d.kind, d.number) == (LAST, 3)
    assert [(s.ranks_text, s.call.name if s.call else None) for s in d.sides] == [("0", "barrier"), ("1-2", None)]
    assert "ranks 1-2 made no more" in d.summary


def test_pipeline_roles_part_by_design_and_a_replica_that_stops_is_found_inside_its_role():
    """Stage 0 (ranks 0-1) sends, stage 1 (ranks 2-3) receives; rank 3 stops two calls early, rank 2 goes on."""
    stage0 = ["broadcast", "send", "send", "send", "send"]
    threads = {0: thread(stage0), 1: thread(stage0), 2: thread(["broadcast", "recv", "recv", "recv", "recv"]),
               3: thread(["broadcast", "recv", "recv"])}
    found, _ = sequence_divergences(threads)
    assert [(d.kind, d.number, d.ranks_text) for d in found] == [(LAST, 4, "2-3"), (ROLES, 2, "0-3")]
    assert [(s.ranks_text, s.call.name if s.call else None) for s in found[0].sides] == [("2", "recv"), ("3", None)]


def test_only_the_outermost_api_call_counts_and_an_empty_selection_numbers_nothing():
    threads = {r: thread(["broadcast", "broadcast"], inner="_broadcast_impl") for r in (0, 1)}
    numbered, whole = number_calls(threads)
    assert whole and [[c.name for c in numbered[r]] for r in (0, 1)] == [["broadcast", "broadcast"]] * 2
    assert sequence_divergences(threads)[0] == []
    none = {r: thread([]) for r in (0, 1)}
    assert sequence_divergences(none)[0] == []


def test_a_gap_leaves_that_rank_out():
    threads = {0: thread(["all_reduce", "barrier"], gap_at=1), 1: thread(["all_reduce", "all_reduce"])}
    numbered, _ = number_calls(threads)
    assert set(numbered) == {1}
    assert sequence_divergences(threads)[0] == []


def test_rings_that_dropped_their_oldest_calls_are_paired_by_time():
    """Rank 1's ring starts later (at its 3rd step, t=2000) and rank 0 ran asynchronous calls ahead: at t=2000 rank
    0 had entered its 4th call already (t=1900). Pairing by time alone would start rank 0 one call late; the names
    of the calls that follow decide: both start at the reduce_scatter of t=1500/2000, and part at the barrier."""
    names0 = ["all_gather", "all_gather", "reduce_scatter", "all_gather", "reduce_scatter", "all_gather"]
    names1 = ["reduce_scatter", "all_gather", "reduce_scatter", "barrier"]
    threads = {0: thread(names0, first_seq=500, times=[0, 1000, 1500, 1900, 2500, 3500]),
               1: thread(names1, first_seq=700, times=[2000, 2600, 3000, 3600])}
    (d,), whole = sequence_divergences(threads)
    assert not whole and (d.kind, d.number) == (LAST, 4)
    assert [(s.ranks_text, s.call.name) for s in d.sides] == [("0", "all_gather"), ("1", "barrier")]
