"""Finds and reads the trace files of a run: one RankTrace per rank, whatever mix of ring and stream files.

A folder may hold, per process, a ring file (trace-*.ring), a stream file (trace-*.txt) or both; the ring is
preferred because it carries the open-frame stacks directly. A rank traced twice (a restarted process) keeps its
newest trace and says so. An unreadable file is reported and skipped; the others still count.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field

from hangdoctor.clicore.bulk import paused_gc
from tracing.records import RankTrace
from tracing.regularfile import NotRegularFile
from tracing.ringreader import RingFormatError, read_ring
from tracing.streamfile import StreamFormatError, read_stream


FOLDER_HINT = "point it at the --out folder of `tracing run`"


class TraceInputError(ValueError):
    """Nothing readable: the message is one line for the user; the hint, when there is one, says what to do."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass
class TraceSet:
    source: str
    traces: list[RankTrace]  # one per rank, ordered by rank
    warnings: list[str] = field(default_factory=list)

    @property
    def ranks(self) -> list[int]:
        return [t.identity.rank for t in self.traces]


def trace_files(path: str) -> list[str]:
    if not os.path.isdir(path):
        if not os.path.exists(path):
            what = "a symbolic link that leads nowhere (a loop, or its target is gone)" if os.path.islink(path) \
                else "no such file or folder"
            raise TraceInputError(f"{path}: {what}", hint=FOLDER_HINT)
        return [path]  # a file (the reader refuses what is not a regular file)
    files = sorted(glob.glob(os.path.join(path, "trace-*.ring"))) + sorted(glob.glob(os.path.join(path, "trace-*.txt")))
    if not files:
        raise TraceInputError(f"{path}: no trace files (trace-*.ring or trace-*.txt) in this folder", hint=FOLDER_HINT)
    return files


def read_trace_file(path: str, *, tail: int | None = None) -> RankTrace:
    try:
        if path.endswith(".ring"):
            return read_ring(path, tail=tail)
        return read_stream(path, max_events_per_thread=tail)
    except (RingFormatError, StreamFormatError, NotRegularFile) as e:
        raise TraceInputError(str(e)) from None
    except OSError as e:
        raise TraceInputError(f"{path}: {e.strerror or e}") from None


@paused_gc()  # one Event per call and return, none in a cycle (clicore/bulk.py)
def load_traces(path: str, *, tail: int | None = None) -> TraceSet:
    """tail: keep only the newest events (per file for rings, per thread for streams); None keeps all."""
    files = trace_files(path)
    warnings: list[str] = []
    read: list[RankTrace] = []
    errors: list[str] = []
    for name in files:
        try:
            trace = read_trace_file(name, tail=tail)
        except TraceInputError as e:
            errors.append(str(e))
            continue
        read.append(trace)
    if not read:
        more = f" (and {len(errors) - 1} more unreadable file(s))" if len(errors) > 1 else ""
        raise TraceInputError(errors[0] + more)
    chosen = _one_per_rank(read, warnings)
    # The warnings of the files in use (a process's stream file says again what its ring says), then the skipped.
    warnings[:0] = [w for trace in chosen for w in trace.warnings]
    warnings.extend(f"skipped {e}" for e in errors)
    return TraceSet(source=path, traces=chosen, warnings=warnings)


def _one_per_rank(traces: list[RankTrace], warnings: list[str]) -> list[RankTrace]:
    by_process: dict[tuple[str, int], RankTrace] = {}
    for trace in traces:  # rings come first in the file list, so they win over a stream of the same process
        by_process.setdefault((trace.identity.host, trace.identity.pid), trace)
    by_rank: dict[int, list[RankTrace]] = {}
    for trace in by_process.values():
        by_rank.setdefault(trace.identity.rank, []).append(trace)
    chosen = []
    for rank in sorted(by_rank):
        candidates = sorted(by_rank[rank], key=lambda t: t.start_wall_ns)
        if len(candidates) > 1:
            older = ", ".join(os.path.basename(t.path) for t in candidates[:-1])
            warnings.append(f"rank {rank} has {len(candidates)} traces; using the newest "
                            f"({os.path.basename(candidates[-1].path)}), not {older}")
        chosen.append(candidates[-1])
    return _one_run(chosen, warnings)


def _one_run(chosen: list[RankTrace], warnings: list[str]) -> list[RankTrace]:
    """The traces of the newest run only: ranks whose newest trace says another world size (or a rank beyond the
    newest run's) are an older run's, left in the folder and out of the job, said once."""
    newest = max(chosen, key=lambda t: t.start_wall_ns)
    size = newest.identity.world_size
    if size is None:
        return chosen
    other = [t for t in chosen if (t.identity.world_size not in (None, size)) or t.identity.rank >= size]
    if other:
        sizes = sorted({t.identity.world_size for t in other if t.identity.world_size is not None})
        warnings.append(f"{len(other)} trace(s) of another run left out (world size {', '.join(map(str, sizes))}; "
                        f"the newest run has {size} ranks): {', '.join(os.path.basename(t.path) for t in other[:4])}"
                        + (" ..." if len(other) > 4 else ""))
    return [t for t in chosen if t not in other]
