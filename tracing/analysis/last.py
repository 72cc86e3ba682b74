"""`tracing last`: where every rank is now (its frames still open) and what it did last, grouped across ranks.

Ranks whose main thread has the same open frames and the same condition (running, dead, exited...) form one
group, e.g. "ranks 0-5: inside train > all_reduce"; groups are listed largest first. "The same open frames": the
same functions, and the same executing line in each outer frame where the ring recorded one (two ranks in one
function but at different calls of a collective are two groups). The innermost frame's line (its last call) is
not compared: it tells when a rank last called traced code, not where it waits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hangdoctor.topology import fold_ranks
from tracing.records import EXECUTING, EXITED, RUNNING, STOPPED, Event, OpenFrame, RankTrace, ThreadTrace

SUMMARY_FRAMES = 5  # frames named in a one-line summary before it elides the middle


@dataclass
class ThreadLast:
    name: str
    is_main: bool
    open_frames: list[OpenFrame]  # outermost first, with the lines they are at
    frames_truncated: bool
    last_events: list[Event]  # oldest first


@dataclass
class RankLast:
    rank: int
    host: str
    pid: int
    path: str
    source: str
    condition: str  # running | suspended | dead | exited | stopped | unknown
    exit_code: int | None
    last_event_wall_ns: int | None
    silent_s: float | None  # seconds since its last event, while it is not finished
    total_events: int
    threads: list[ThreadLast]

    @property
    def main(self) -> ThreadLast | None:
        return next((t for t in self.threads if t.is_main), self.threads[0] if self.threads else None)


@dataclass
class LastGroup:
    ranks: list[int]
    ranks_text: str  # folded, e.g. "0-5"
    condition: str
    summary: str  # "inside train > all_reduce"
    open_frames: list[OpenFrame]  # of the representative rank
    frames_truncated: bool
    representative: int  # the rank whose last events are shown
    last_events: list[Event]
    silent_s: tuple[float, float] | None  # min and max over the group


@dataclass
class LastReport:
    source: str
    now_wall_ns: int
    ranks: list[RankLast]
    groups: list[LastGroup]
    warnings: list[str] = field(default_factory=list)


def condition_of(trace: RankTrace, status: str | None) -> str:
    if trace.state == EXITED:
        return "exited"
    if trace.state == STOPPED:
        return "stopped"
    if trace.state == RUNNING:
        return {"alive": "running", "suspended": "suspended", "zombie": "dead", "gone": "dead"}.get(status, "unknown")
    return "unknown"


def summarize_frames(frames: list[OpenFrame], truncated: bool = False) -> str:
    if not frames:
        return "no traced frame open"
    names = [f.qualname + ("()" if f.is_c else "") for f in frames]
    if len(names) > SUMMARY_FRAMES:
        names = names[:1] + ["…"] + names[-(SUMMARY_FRAMES - 2):]
    elif truncated:
        names = ["…"] + names
    return "inside " + " > ".join(names)


def _thread_last(thread: ThreadTrace, events: int) -> ThreadLast:
    return ThreadLast(thread.name, thread.is_main, thread.frames, thread.frames_truncated,
                      thread.events[-events:] if events > 0 else [])


def rank_last(trace: RankTrace, status: str | None, now_wall_ns: int, events: int) -> RankLast:
    condition = condition_of(trace, status)
    last = trace.last_event_wall_ns
    silent = None
    if last is not None and condition in ("running", "suspended", "unknown", "dead"):
        silent = max(0.0, (now_wall_ns - last) / 1e9)
    threads = [_thread_last(t, events) for t in trace.threads]
    if threads and not any(t.is_main for t in threads):
        threads[0].is_main = True
    return RankLast(trace.identity.rank, trace.identity.host, trace.identity.pid, trace.path, trace.source,
                    condition, trace.exit_code, last, silent, trace.total_events, threads)


def group_ranks(ranks: list[RankLast]) -> list[LastGroup]:
    buckets: dict[tuple, list[RankLast]] = {}
    for r in ranks:
        main = r.main
        frames = tuple((f.name, f.line if f.line_source == EXECUTING else 0) for f in main.open_frames) if main else ()
        buckets.setdefault((r.condition, frames), []).append(r)
    groups = []
    for (condition, _), members in buckets.items():
        members.sort(key=lambda r: r.rank)
        first = members[0]
        main = first.main
        frames = main.open_frames if main else []
        silences = [r.silent_s for r in members if r.silent_s is not None]
        groups.append(LastGroup(
            ranks=[r.rank for r in members], ranks_text=fold_ranks(r.rank for r in members), condition=condition,
            summary=summarize_frames(frames, main.frames_truncated if main else False), open_frames=frames,
            frames_truncated=main.frames_truncated if main else False, representative=first.rank,
            last_events=main.last_events if main else [],
            silent_s=(min(silences), max(silences)) if silences else None,
        ))
    groups.sort(key=lambda g: (-len(g.ranks), g.ranks[0]))
    return groups


def last_report(source: str, traces: list[RankTrace], statuses: dict[int, str | None], now_wall_ns: int,
                events: int = 8, warnings: list[str] | None = None) -> LastReport:
    ranks = [rank_last(t, statuses.get(t.identity.rank), now_wall_ns, events) for t in traces]
    return LastReport(source, now_wall_ns, ranks, group_ranks(ranks), list(warnings or []))
