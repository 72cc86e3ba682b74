"""The streaming trace: one text line per event in trace-{host}-{local_rank}-{pid}.txt, as the seed wrote it.

    # hangdoctor-trace 1 {"identity": {...}, "config": {...}, "t0_wall_ns": ...}
    # thread 0 140234 5123 1 MainThread
    0.000012 0 0 open  __main__:main train.py:10
    0.000340 0 1 call   deepspeed.runtime.pipe.engine:PipelineEngine.train_batch deepspeed/runtime/pipe/engine.py:330
    0.000512 0 1 ret    deepspeed.runtime.pipe.engine:PipelineEngine.train_batch deepspeed/runtime/pipe/engine.py:330
    # state exited 0 1700000000123456789

Columns: seconds since the start, thread slot, depth, kind, then the function indented by its depth and its
location. Every line is one write(2) on an O_APPEND descriptor, so a line is on disk (in the page cache) as soon
as the event happened, a SIGKILL loses nothing written before it and lines of different threads never mix.
"""

from __future__ import annotations

import json
import os
from collections import deque

from tracing.identity import RankIdentity
from tracing.records import (
    ENTERS, GAP, GAP_LOCATION, GAP_WARNING, RUNNING, STATE_WORDS, WORD_KINDS, CodeLocation, Event, RankTrace,
    ThreadTrace,
)
from tracing.regularfile import open_regular

MAGIC_LINE = "# hangdoctor-trace 1 "
MAX_INDENT = 40
MAX_LINE = 1 << 16  # bytes; longer lines are not the writer's and are skipped as unreadable
MAX_HEADER_LINE = 1 << 20
MAX_DEPTH = 1 << 16
_WORD_STATES = {word: state for state, word in STATE_WORDS.items()}


class StreamWriter:
    def __init__(self, path: str, meta: dict) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self.write_line(MAGIC_LINE + json.dumps(meta, sort_keys=True))

    def write_line(self, text: str) -> None:
        os.write(self.fd, (text + "\n").encode("utf-8", "replace"))

    def add_thread(self, index: int, ident: int, native_id: int, name: str, is_main: bool) -> None:
        self.write_line(f"# thread {index} {ident} {native_id} {int(is_main)} {name}")

    def set_state(self, state: int, wall_ns: int, exit_code: int | None = None) -> None:
        code = "-" if exit_code is None else str(int(exit_code))
        self.write_line(f"# state {STATE_WORDS[state]} {code} {wall_ns}")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def forget(self) -> None:
        """In a forked child: the descriptor is shared with the parent; close our copy only."""
        self.close()


def location_text(loc: CodeLocation) -> str:
    return f"{loc.name} {loc.where}"


def _parse_location(text: str) -> CodeLocation:
    name, _, where = text.strip().partition(" ")
    module, sep, qualname = name.partition(":")
    if not sep:
        module, qualname = "", name
    if where == "[C]":
        return CodeLocation(module, qualname, "", 0, is_c=True)
    filename, _, lineno = where.rpartition(":")
    return CodeLocation(module, qualname, filename, int(lineno) if lineno.isdigit() else 0)


class StreamFormatError(ValueError):
    pass


def read_stream(path: str, max_events_per_thread: int | None = None) -> RankTrace:
    """Replays the whole file to rebuild every thread's open frames; keeps the last events of each thread."""
    with os.fdopen(open_regular(path), "rb") as f:
        first = f.readline(MAX_HEADER_LINE).decode("utf-8", "replace")
        if not first:
            raise StreamFormatError(f"{path}: empty trace file (the process died before tracing started?)")
        if not first.startswith(MAGIC_LINE):
            raise StreamFormatError(f"{path}: not a hangdoctor stream trace (first line is not '{MAGIC_LINE.strip()}')")
        try:
            meta = json.loads(first[len(MAGIC_LINE):])
            identity = RankIdentity.from_dict(meta["identity"])
            t0 = int(meta["t0_wall_ns"])
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            raise StreamFormatError(f"{path}: unreadable header line ({e})") from None
        trace = RankTrace(identity=identity, path=path, source="stream", state=RUNNING, start_wall_ns=t0,
                          config=meta["config"] if isinstance(meta.get("config"), dict) else {})
        threads: dict[int, ThreadTrace] = {}
        stacks: dict[int, list[CodeLocation]] = {}
        counts: dict[int, int] = {}
        recent: dict[int, deque] = {}
        locations: dict[str, CodeLocation] = {}
        seq = bad = gaps = 0
        for raw in _bounded_lines(f):
            if raw is None:  # longer than any line the writer writes
                bad += 1
                continue
            line = raw.decode("utf-8", "replace")
            if not line.endswith("\n"):
                break  # a torn last line: the process died while writing it
            if line.startswith("#"):
                _header_line(line, trace, threads)
                continue
            try:
                t_text, thread_text, depth_text, word, rest = line.split(None, 4)
                thread, depth, kind = int(thread_text), int(depth_text), WORD_KINDS[word]
                wall = t0 + int(round(float(t_text) * 1e9))
                if not 0 <= depth <= MAX_DEPTH:
                    raise ValueError(depth)
            except (ValueError, KeyError, OverflowError):
                bad += 1
                continue
            gaps += kind == GAP
            loc = GAP_LOCATION if kind == GAP else locations.get(rest)
            if loc is None:
                loc = locations[rest] = _parse_location(rest)
            if thread not in threads:
                threads[thread] = ThreadTrace(index=thread, name=f"thread {thread}")
            stack = stacks.setdefault(thread, [])
            del stack[0 if kind == GAP else depth:]  # after a gap, OPEN events record the stack again
            if kind in ENTERS:
                stack.extend([None] * (depth - len(stack)))
                stack.append(loc)
            tseq = counts.get(thread, 0)
            counts[thread] = tseq + 1
            recent.setdefault(thread, deque(maxlen=max_events_per_thread)).append(
                Event(seq, thread, tseq, wall, kind, depth, loc))
            seq += 1
    for index, thread in threads.items():
        thread.open_frames = [loc or _MISSING for loc in stacks.get(index, [])]
        thread.events = list(recent.get(index, ()))
    trace.threads = [threads[i] for i in sorted(threads)]
    trace.total_events = seq
    trace.dropped_events = seq - sum(len(t.events) for t in trace.threads)
    trace.in_file = seq  # a stream keeps every line
    if bad:
        trace.warnings.append(f"{path}: skipped {bad} unreadable line(s)")
    if gaps:
        trace.warnings.append(f"{path}: {GAP_WARNING}")
    return trace


_MISSING = CodeLocation("", "<not recorded>", "", 0)


def _bounded_lines(f):
    """The file's lines, each read with a bounded readline; None in place of a line longer than MAX_LINE."""
    while True:
        raw = f.readline(MAX_LINE)
        if len(raw) < MAX_LINE or raw.endswith(b"\n"):
            if not raw:
                return
            yield raw
            continue
        while raw and not raw.endswith(b"\n"):  # skip the rest of the overlong line
            raw = f.readline(MAX_LINE)
        yield None


def _header_line(line: str, trace: RankTrace, threads: dict[int, ThreadTrace]) -> None:
    parts = line.rstrip("\n").split(" ", 6)
    try:
        if parts[1] == "thread" and len(parts) >= 6:
            index = int(parts[2])
            name = parts[6] if len(parts) > 6 else ""
            thread = threads.setdefault(index, ThreadTrace(index=index, name=name))
            thread.name, thread.ident, thread.native_id, thread.is_main = name, int(parts[3]), int(parts[4]), parts[5] == "1"
        elif parts[1] == "state" and len(parts) >= 5:
            trace.state = _WORD_STATES.get(parts[2], RUNNING)
            trace.exit_code = None if parts[3] == "-" else int(parts[3])
            trace.state_wall_ns = int(parts[4])
    except (ValueError, IndexError):
        trace.warnings.append(f"{trace.path}: skipped an unreadable header line: {line.strip()[:80]}")

