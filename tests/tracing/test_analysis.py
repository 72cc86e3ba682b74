"""Analysis on synthetic records: diverge's window over ring tails, early stops and nested splits; last's
conditions."""

from __future__ import annotations

import gc

import pytest

from tracing.analysis.diverge import diverge_report
from tracing.analysis.last import condition_of, summarize_frames
from tracing.identity import RankIdentity
from tracing.records import CALL, EXITED, RETURN, RUNNING, STOPPED, CodeLocation, Event, RankTrace, ThreadTrace
from tracing.tracedir import TraceInputError, load_traces

A, B, C, D = (CodeLocation("m", name, "/m.py", 1) for name in "ABCD")


def trace(rank: int, first: int, script: list[CodeLocation], open_frames=()) -> RankTrace:
    """Events numbered from `first` (a ring that lost the older ones): call+return of each location in turn."""
    events = []
    for i, loc in enumerate(script):
        for j, kind in enumerate((CALL, RETURN)):
            seq = first + 2 * i + j
            events.append(Event(seq, 0, seq, seq, kind, 0, loc))
    thread = ThreadTrace(0, "MainThread", is_main=True, open_frames=list(open_frames), events=events)
    return RankTrace(RankIdentity(rank, rank, 4, "h", rank), f"r{rank}", "ring", RUNNING, 0, threads=[thread])


def test_window_starts_where_every_rank_has_events_and_early_stops_are_reported():
    traces = [
        trace(0, 100, [A] * 20 + [B, C]),
        trace(1, 90, [A] * 30 + [B, C]),  # older events too (compared from #100 on), and more A calls
        trace(2, 100, [A] * 20 + [B, D]),
        trace(3, 10, [A] * 5, open_frames=[D]),  # its last event is long before the others' window
    ]
    report = diverge_report("d", traces)
    assert report.start == 100
    assert [(e.rank, e.last_position) for e in report.early] == [(3, 19)]
    assert [f.loc for f in report.early[0].open_frames] == [D]
    (first,) = report.divergences[:1]
    assert first.ranks == [0, 1, 2]
    # rank 1 still calls A at event #140, where ranks 0 and 2 call B: it departs there.
    assert first.position == 140
    assert [(b.ranks, b.events[0].loc.qualname) for b in first.branches] == [([0, 2], "B"), ([1], "A")]
    second = report.divergences[1]
    assert second.ranks == [0, 2] and second.position == 142
    assert [(b.ranks_text, b.events[0].loc.qualname) for b in second.branches] == [("0", "C"), ("2", "D")]


def test_a_rank_with_no_more_events_forms_its_own_branch():
    traces = [trace(0, 0, [A, B, C]), trace(1, 0, [A, B, C]), trace(2, 0, [A, B], open_frames=[A, D])]
    report = diverge_report("d", traces)
    (split,) = report.divergences
    assert split.position == 4
    stopped = next(b for b in split.branches if b.stopped)
    assert stopped.ranks == [2] and [f.loc for f in stopped.open_frames] == [A, D]
    assert diverge_report("d", traces[:2]).identical


def test_conditions_and_summaries():
    t = trace(0, 0, [A])
    assert condition_of(t, "alive") == "running"
    assert condition_of(t, "gone") == "dead"
    assert condition_of(t, "suspended") == "suspended"
    assert condition_of(t, None) == "unknown"
    t.state = EXITED
    assert condition_of(t, "gone") == "exited"
    t.state = STOPPED
    assert condition_of(t, "alive") == "stopped"
    frames = [CodeLocation("m", f"f{i}", "/m.py", 1) for i in range(8)]
    assert summarize_frames(frames) == "inside f0 > … > f5 > f6 > f7"
    assert summarize_frames(frames[:2], truncated=True) == "inside … > f0 > f1"
    assert summarize_frames([]) == "no traced frame open"


def test_load_and_diverge_leave_the_garbage_collector_as_they_found_it(tmp_path):
    """Both build their objects with the cyclic collector paused (clicore/bulk.py), an error included, and put
    back the state they found."""
    traces = [trace(0, 0, [A, B]), trace(1, 0, [A, C])]
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            assert not diverge_report("d", traces).identical
            assert gc.isenabled() is enabled
            with pytest.raises(TraceInputError):
                load_traces(str(tmp_path / "missing"))
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
