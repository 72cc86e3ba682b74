"""What counts as progress for a training run: a higher iteration in its log, or a heartbeat file that changed.

Iteration lines are Megatron's and Megatron-DeepSpeed's by default (`throughput.megatron_log`: " iteration 12/
100 |"); `--iteration-regex` takes any other form, read by `throughput.regex_log` as `hangdoctor experiment`
reads it: its `iteration` group, else its first group, else the whole match is the iteration number. A repeated
or lower number (a line printed twice) is not progress, except right after a stall: a run restarted from a
checkpoint logs lower iterations again, and any iteration line then counts.

A watch started beside a running job does not wait for its next line to know where it is: `seed` gives the last
sign written before the watch began (the log's last iteration line, dated by the file's modification time; a
heartbeat's own time), so a job that was already silent is a stall once that silence passes the bound. The
modification time is when the log was last written at all: never earlier than that iteration line, so the silence
is never overstated.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from hangdoctor.clicore.regex import compile_user_regex
from hangdoctor.throughput.logtail import LogTail
from hangdoctor.throughput.megatron_log import parse_iteration_line
from hangdoctor.throughput.regex_log import iteration_number


@dataclass(frozen=True)
class Step:
    """One sign of progress: an iteration number (None for a heartbeat) seen at `time`."""

    time: float
    iteration: int | None = None


def compile_iteration_regex(text: str) -> re.Pattern:
    """Raises ValueError with a one-line reason."""
    return compile_user_regex(text, "--iteration-regex")


def iteration_of(line: str, pattern: re.Pattern | None) -> int | None:
    if pattern is None:
        parsed = parse_iteration_line(line)
        return parsed.iteration if parsed is not None else None
    match = pattern.search(line)
    return iteration_number(match) if match is not None else None


class LogProgress:
    """New iteration lines of a log."""

    def __init__(self, path: Path, pattern: re.Pattern | None = None, *, from_end: bool = True):
        self.tail = LogTail(path, from_end=from_end)
        self.pattern = pattern
        self.last: int | None = None

    def seed(self, now: float) -> Step | None:
        """The last iteration line before the watch began, dated `now` less the log's age; None when none."""
        numbers = (iteration_of(line, self.pattern) for line in reversed(self.tail.before))
        number = next((n for n in numbers if n is not None), None)
        if number is None or self.tail.before_mtime is None:
            return None
        self.last = number
        return Step(now - max(0.0, time.time() - self.tail.before_mtime), number)

    def poll(self, now: float, *, stalled: bool = False) -> list[Step]:
        steps = []
        for line in self.tail.new_lines():
            number = iteration_of(line, self.pattern)
            if number is None:
                continue
            if self.last is None or number > self.last or stalled:
                self.last = number
                steps.append(Step(now, number))
                stalled = False
        return steps


class HeartbeatProgress:
    """A file the job touches or rewrites while it runs: a changed modification time or size is progress."""

    def __init__(self, path: Path):
        self.path = path
        self.seen = self._signature()

    def _signature(self) -> tuple[int, int] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return info.st_mtime_ns, info.st_size

    def seed(self, now: float) -> Step | None:
        """The heartbeat's last touch before the watch began, dated `now` less its age; None when not there."""
        try:
            age = max(0.0, time.time() - os.stat(self.path).st_mtime)
        except OSError:
            return None
        return Step(now - age)

    def poll(self, now: float, *, stalled: bool = False) -> list[Step]:
        signature = self._signature()
        if signature is None or signature == self.seen:
            return []
        self.seen = signature
        return [Step(now)]
