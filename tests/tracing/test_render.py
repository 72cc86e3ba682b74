"""Renderers draw into a rich Console over StringIO; the JSON view carries the same groups and frames."""

from __future__ import annotations

import io
import json

from rich.console import Console

from tracing.analysis.diverge import diverge_report
from tracing.analysis.last import last_report
from tracing.identity import RankIdentity
from tracing.records import CALL, OPEN, RETURN, RUNNING, CodeLocation, Event, RankTrace, ThreadTrace
from tracing.render.diverge import render_diverge
from tracing.render.jsonout import dumps
from tracing.render.last import render_last

T0 = 1_700_000_000_000_000_000
TRAIN = CodeLocation("megatron.training", "train", "/src/megatron/training.py", 915)
STEP = CodeLocation("megatron.training", "train_step", "/src/megatron/training.py", 436)
LOSS = CodeLocation("deepspeed.runtime.pipe.engine", "PipelineEngine._aggregate_total_loss",
                    "/src/deepspeed/runtime/pipe/engine.py", 540)
BCAST = CodeLocation("torch.distributed.distributed_c10d", "broadcast", "/t/torch/distributed/distributed_c10d.py", 1191)
REDUCE = CodeLocation("torch.distributed.distributed_c10d", "all_reduce", "/t/torch/distributed/distributed_c10d.py", 2000)


def rank_trace(rank: int, stuck_in_broadcast: bool, train_line: int = 940) -> RankTrace:
    """The ring's stack slots give each open frame's line: outer frames the call they are in; the innermost one
    (broadcast, all_reduce) called no traced function since it was entered, so it has none."""
    script = [(OPEN, TRAIN, 0), (CALL, STEP, 1), (RETURN, STEP, 1), (CALL, STEP, 1)]
    if stuck_in_broadcast:
        script += [(CALL, LOSS, 2), (CALL, BCAST, 3)]
        frames, lines = [TRAIN, STEP, LOSS, BCAST], [train_line, 470, 573, 0]
    else:
        script += [(RETURN, STEP, 1), (CALL, REDUCE, 1)]
        frames, lines = [TRAIN, REDUCE], [train_line + 2, 0]
    events = [Event(i, 0, i, T0 + i * 1000, kind, depth, loc) for i, (kind, loc, depth) in enumerate(script)]
    thread = ThreadTrace(index=0, name="MainThread", is_main=True, open_frames=frames, open_lines=lines,
                         events=events)
    return RankTrace(identity=RankIdentity(rank=rank, local_rank=rank % 4, world_size=8, host="n1", pid=100 + rank),
                     path=f"trace-n1-{rank}.ring", source="ring", state=RUNNING, start_wall_ns=T0, threads=[thread],
                     total_events=len(events))


def traces():
    return [rank_trace(r, stuck_in_broadcast=r >= 6) for r in range(8)]


def test_last_view_groups_ranks_and_draws_open_frames():
    statuses = {r: "alive" for r in range(8)}
    report = last_report("traces/", traces(), statuses, now_wall_ns=T0 + 42 * 10**9, events=2)
    out = io.StringIO()
    render_last(report, Console(file=out, width=100))
    text = out.getvalue()
    lines = [line.rstrip() for line in text.splitlines()]
    assert lines[0].startswith("8 rank(s) traced in traces/, 2 group(s), at ")
    assert "ranks 0-5 (6 ranks) · running · silent for 42.0 s" in lines
    assert "  inside train > all_reduce" in lines
    assert "ranks 6-7 (2 ranks) · running · silent for 42.0 s" in lines
    assert "  inside train > train_step > PipelineEngine._aggregate_total_loss > broadcast" in lines
    # The executing line of each outer frame, as py-spy prints it; the innermost frame's first line, marked.
    assert "└── train  megatron/training.py:940" in lines
    assert "        └── PipelineEngine._aggregate_total_loss  deepspeed/runtime/pipe/engine.py:573" in lines
    assert "            └── broadcast  torch/distributed/distributed_c10d.py:1191 (def)" in lines
    assert text.index("ranks 0-5") < text.index("ranks 6-7")
    data = json.loads(dumps("tracing-last/1", report))
    assert [(g["ranks_text"], g["summary"]) for g in data["groups"]] == [
        ("0-5", "inside train > all_reduce"),
        ("6-7", "inside train > train_step > PipelineEngine._aggregate_total_loss > broadcast")]
    loss, bcast = data["groups"][1]["open_frames"][-2:]
    assert (loss["line"], loss["line_source"], loss["def_line"], loss["where"]) == (
        573, "executing", 540, "deepspeed/runtime/pipe/engine.py:573")
    assert (bcast["line"], bcast["line_source"], bcast["where"]) == (
        1191, "def", "torch/distributed/distributed_c10d.py:1191")


def test_ranks_at_different_lines_of_the_same_functions_are_two_groups():
    ranks = traces()
    ranks[7] = rank_trace(7, stuck_in_broadcast=True, train_line=950)  # e.g. the second broadcast in train
    report = last_report("traces/", ranks, {r: "alive" for r in range(8)}, now_wall_ns=T0, events=2)
    assert [(g.ranks_text, g.open_frames[0].line) for g in report.groups] == [("0-5", 942), ("6", 940), ("7", 950)]


def test_dead_ranks_split_from_live_ones():
    statuses = {r: ("gone" if r == 3 else "alive") for r in range(8)}
    report = last_report("traces/", traces(), statuses, now_wall_ns=T0, events=2)
    assert [(g.ranks_text, g.condition) for g in report.groups] == [("0-2,4-5", "running"), ("6-7", "running"),
                                                                   ("3", "dead")]


def test_diverge_view_names_the_first_departure():
    report = diverge_report("traces/", traces())
    out = io.StringIO()
    render_diverge(report, Console(file=out, width=100))
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    assert lines[0] == "Compared the main thread of 8 ranks in traces/ from event 0 on."
    assert " ".join(lines[1:3]).strip() == (
        "First departure: collective #1: ranks 6-7 broadcast (from PipelineEngine._aggregate_total_loss), its last; "
        "ranks 0-5 all_reduce (from train), its last.")
    assert any(line.startswith("  ranks 0-5:") for line in lines)
    assert any("ret   train_step  megatron/training.py:436" in line for line in lines)
    assert any("call  PipelineEngine._aggregate_total_loss  deepspeed/runtime/pipe/engine.py:540" in line
               for line in lines)


def test_without_collective_api_calls_the_first_departure_says_what_each_branch_did():
    """The same hang with only a framework's own communication wrapper traced (no torch.distributed): no
    collective numbers, so the first split of the event sequences is named, the odd ones out first."""
    wrapper = CodeLocation("deepspeed.runtime.pipe.p2p", "recv", "/src/deepspeed/runtime/pipe/p2p.py", 81)
    renamed = []
    for trace in traces():
        thread = trace.threads[0]
        thread.events = [Event(e.seq, e.thread, e.thread_seq, e.wall_ns, e.kind, e.depth,
                               wrapper if e.loc in (BCAST, REDUCE) else e.loc) for e in thread.events]
        thread.open_frames = [wrapper if f in (BCAST, REDUCE) else f for f in thread.open_frames]
        renamed.append(trace)
    report = diverge_report("traces/", renamed)
    assert report.collectives == []
    assert report.first == ("event 4: ranks 6-7 called PipelineEngine._aggregate_total_loss, then recv; "
                            "ranks 0-5 returned from train_step, then recv.")
