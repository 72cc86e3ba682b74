"""Export to Chrome trace-event JSON (opens in Perfetto and chrome://tracing): all ranks in one file, pid = rank.

Each call becomes a "B" event and its return an "E" event on the thread's track (tid = thread slot). Returns
whose call is older than the ring's window are dropped; frames still open at the end have no "E", which
Perfetto draws as slices that did not end: exactly the frames a hung rank is stuck in. Timestamps are
microseconds since the earliest trace start, from each rank's wall clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO

from tracing.records import ENTERS, GAP, GAP_TEXT, RankTrace, ThreadTrace


def _thread_events(rank: int, thread: ThreadTrace, base_ns: int) -> Iterator[dict]:
    stack: list[int] = []  # depths of the B events emitted and not yet ended
    for e in thread.events:
        ts = (e.wall_ns - base_ns) / 1000.0
        if e.kind == GAP:  # events are missing: end every open slice; OPEN events start the stack again
            while stack:
                stack.pop()
                yield {"ph": "E", "pid": rank, "tid": thread.index, "ts": ts}
            yield {"ph": "i", "pid": rank, "tid": thread.index, "ts": ts, "s": "t", "name": "tracing interrupted",
                   "args": {"note": GAP_TEXT}}
        elif e.kind in ENTERS:
            while stack and stack[-1] >= e.depth:  # a return we never saw (not expected; keeps B/E balanced)
                stack.pop()
                yield {"ph": "E", "pid": rank, "tid": thread.index, "ts": ts}
            stack.append(e.depth)
            yield {"ph": "B", "pid": rank, "tid": thread.index, "ts": ts, "name": e.loc.qualname,
                   "cat": e.loc.module or "python", "args": {"where": e.loc.where, "kind": e.word}}
        else:
            if not stack or stack[-1] < e.depth:
                continue  # its call happened before the window
            while stack and stack[-1] > e.depth:
                stack.pop()
                yield {"ph": "E", "pid": rank, "tid": thread.index, "ts": ts}
            stack.pop()
            yield {"ph": "E", "pid": rank, "tid": thread.index, "ts": ts}


def chrome_events(traces: list[RankTrace]) -> Iterator[dict]:
    base = min((t.start_wall_ns for t in traces), default=0)
    for trace in traces:
        rank = trace.identity.rank
        yield {"ph": "M", "name": "process_name", "pid": rank,
               "args": {"name": f"rank {rank} ({trace.identity.host}:{trace.identity.pid})"}}
        yield {"ph": "M", "name": "process_sort_index", "pid": rank, "args": {"sort_index": rank}}
        for thread in trace.threads:
            yield {"ph": "M", "name": "thread_name", "pid": rank, "tid": thread.index, "args": {"name": thread.name}}
            yield from _thread_events(rank, thread, base)


def write_chrome_trace(traces: list[RankTrace], out: IO[str]) -> int:
    """Writes the JSON object format; returns the number of trace events written."""
    out.write('{"displayTimeUnit": "ms", "traceEvents": [\n')
    count = 0
    for event in chrome_events(traces):
        out.write((",\n" if count else "") + json.dumps(event, separators=(",", ":")))
        count += 1
    out.write("\n]}\n")
    return count
